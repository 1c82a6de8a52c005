"""The benchmarks behind `engram bench` (docs/benchmarks.md, ADR 0037): not part of the wheel.

They live in the repository, import `engram` through its public modules only, and run from a
checkout: `engram bench NAME` (the CLI finds this folder beside the `engram` package of an editable
install) or `python -m bench NAME` from the repository root.

`locomo` reads a file in LoCoMo's format (conversations, sessions, turns, questions with evidence),
`metrics` scores ranked hits against evidence, `run_locomo` ingests and queries through the public
services, `report` renders the figures; `compare` runs one benchmark in two checkouts.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]  # the checkout that holds this folder


def demo_scenes() -> list[dict[str, Any]]:
    """The scenes `engram demo` notes (data shipped with the CLI), as objects."""
    text = resources.files("engram.adapters.cli").joinpath("demo_scenes.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
