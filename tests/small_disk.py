"""A real full disk: a small tmpfs mounted for a test (or a fault script), filled with a file, freed.

Mounting needs root (CI and this sandbox run as root). Where the mount is refused, the tests that
need it skip with the reason (the mapping of the libraries' errors is tested without a mount too),
and `scripts/faults/disk_full.py` says so.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

CHUNK = 1 << 20


class CannotMount(Exception):
    """Mounting a small file system is refused here (not root, no tmpfs, a sandbox that forbids it)."""


def mount_tmpfs(path: Path, size_mib: int) -> None:
    """Mount a tmpfs of `size_mib` at `path`, or raise `CannotMount` with the reason."""
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", "tmpfs", str(path)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise CannotMount(f"cannot run mount: {exc}") from None
    if done.returncode != 0:
        raise CannotMount(f"mounting a tmpfs is refused here: {done.stderr.strip() or done.returncode}")


def unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@contextmanager
def mounted(size_mib: int) -> Iterator[Path]:
    """A tmpfs of `size_mib` MiB, mounted for the block; `CannotMount` where that is refused.

    Its mount point is world-traversable, so that a PostgreSQL server running as its own user can
    keep a tablespace there."""
    parent = Path(tempfile.mkdtemp(prefix="engram-small-disk-"))
    parent.chmod(0o755)
    mount_point = parent / "fs"
    mount_point.mkdir()
    try:
        mount_tmpfs(mount_point, size_mib)
    except CannotMount:
        mount_point.rmdir()
        parent.rmdir()
        raise
    try:
        yield mount_point
    finally:
        unmount(mount_point)
        mount_point.rmdir()
        parent.rmdir()


@contextmanager
def small_filesystem(size_mib: int) -> Iterator[Path]:
    """`mounted`, for a test: skips it, with the reason, where mounting is refused."""
    import pytest

    with ExitStack() as stack:
        try:
            root = stack.enter_context(mounted(size_mib))
        except CannotMount as exc:
            pytest.skip(str(exc))
        yield root


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def fill(path: Path, leave_bytes: int = 0) -> Path:
    """Fill the file system of `path` with a file until at most `leave_bytes` are free; the file."""
    filler = path / f"filler-{len(list(path.glob('filler-*')))}"
    with filler.open("ab", buffering=0) as out:
        while (room := free_bytes(path) - leave_bytes) >= 4096:
            try:
                out.write(b"\1" * min(CHUNK, room))
                out.flush()
            except OSError:  # the last partial block: full
                break
    return filler


def release(path: Path) -> None:
    """Delete every filler under `path`: the space comes back."""
    for filler in path.glob("filler-*"):
        filler.unlink()
