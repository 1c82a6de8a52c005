"""What every benchmark prints about the machine it ran on, and how it hands its result over."""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

# Versions that change the figures: the stores and engines the benchmarks exercise.
_PACKAGES = ("eventsourcing", "qdrant-edge-py", "qdrant-client", "onnxruntime", "psycopg")


def _first_line(path: str, prefix: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(prefix):
                    return line.split(prefix, 1)[1].strip(' :=\t\n"')
    except OSError:
        return None
    return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """The machine, the date and the load at the time of the call (benchmarks share machines)."""
    mem_kb = _first_line("/proc/meminfo", "MemTotal")
    memory_gib = round(int(mem_kb.split()[0]) / 1024 / 1024, 1) if mem_kb else None
    info: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": _first_line("/proc/cpuinfo", "model name") or platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "memory_gib": memory_gib,
        "os": _first_line("/etc/os-release", "PRETTY_NAME") or platform.system(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "packages": {p: v for p in _PACKAGES if (v := _version(p))},
    }
    info["summary"] = (
        f"{info['date'][:10]}, {info['cpus']} CPUs ({info['cpu']}), {memory_gib} GiB, {info['os']}, "
        f"Python {info['python']}, load {' '.join(str(x) for x in info['load_average'])}"
    )
    return info


def finish(result: dict[str, Any], json_out: Path | None) -> None:
    """Stamp the load at the end (a run is only as quiet as its noisiest minute) and save the JSON."""
    result.setdefault("machine", machine_info())["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
