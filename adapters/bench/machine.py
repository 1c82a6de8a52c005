"""What every benchmark prints about the machine it ran on."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from typing import Any


def machine_info() -> dict[str, Any]:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            mem_kb = int(next(line for line in fh if line.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        mem_kb = 0
    info: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
    }
    info["summary"] = f"{info['date'][:10]}, {info['cpus']} CPUs, {info['memory_gib']} GiB, Python {info['python']}"
    return info
