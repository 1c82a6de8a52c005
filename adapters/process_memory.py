"""The C heap of a long-running process (`engram serve`, `engram worker`; ADR 0028)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8
"""glibc's `mallopt` parameter for the number of malloc arenas."""

SERVER_ARENAS = 2
"""Arenas of a server process, whatever its threads: glibc makes up to 8 per core, one for each
thread that allocates while the others hold theirs, and each keeps what its threads freed."""


def limit_malloc_arenas(arenas: int = SERVER_ARENAS) -> bool:
    """Cap glibc's malloc arenas for the threads that allocate from now on; a process started with
    `MALLOC_ARENA_MAX` keeps that value. False where the C library is not glibc."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c")).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_ARENA_MAX, arenas))
