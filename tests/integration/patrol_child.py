"""Child process for the patrol crash tests: runs one patrol and stops where the parent will SIGKILL it.

    python -m tests.integration.patrol_child SETTINGS_JSON BEING MODE [ARG]

Modes (each prints a marker line on stdout, then blocks until killed):
- `between STEP`: STEP finished and its end is saved; the next step has not started.
- `notes-chunk N`: inside ❶, right after its N-th batch of nodes was committed.
- `notes-race N`: inside ❶, just before its N-th batch is committed; does not block, so the kill
  lands somewhere in or around that transaction.
- `consolidate K`: inside ❹, the scripted LLM answered K clusters and is "thinking" on the next.
- `run`: no stop; prints `done` at the end.

The LLM is a `ScriptedLLM` whose ❹ answer merges the first two memories of every cluster
(`merge_first_two`), so the parent can resume with the same script and compare.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import structlog

from engram.domain.node import MemoryNode
from engram.domain.note import Note
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from engram.services.patrol.context import StepContext
from tests.patrol_support import Call, ScriptedLLM, merge_first_two


def _block(marker: str) -> None:
    print(marker, flush=True)
    time.sleep(600)
    sys.exit(3)  # never reached when the parent does its job


def main() -> None:
    settings = Settings.model_validate_json(sys.argv[1])
    being, mode = sys.argv[2], sys.argv[3]
    arg = sys.argv[4] if len(sys.argv) > 4 else ""

    def stop_between_steps(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
        if mode == "between" and event.get("event") == "patrol step" and event.get("step") == arg:
            _block(f"between {arg}")
        return event

    structlog.configure(
        processors=[stop_between_steps, structlog.processors.KeyValueRenderer(sort_keys=True)],
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
    )

    chunks = 0
    original_save = StepContext.save

    def save(ctx: StepContext, *aggregates: Any) -> int | None:
        nonlocal chunks
        is_chunk = any(isinstance(a, Note) for a in aggregates) and any(
            isinstance(a, MemoryNode) for a in aggregates
        )
        if is_chunk:
            chunks += 1
            if mode == "notes-race" and chunks == int(arg):
                print(f"saving chunk {chunks}", flush=True)
        position = original_save(ctx, *aggregates)
        if is_chunk and mode == "notes-chunk" and chunks == int(arg):
            _block(f"saved chunk {chunks}")
        return position

    StepContext.save = save  # type: ignore[method-assign]

    answered = 0

    def consolidate(call: Call) -> Any:
        nonlocal answered
        if mode == "consolidate" and answered == int(arg):
            _block(f"asked cluster {answered + 1}")
        answered += 1
        return merge_first_two(call)

    llm = ScriptedLLM({"consolidate_cluster": consolidate})
    engram = bootstrap(settings)
    try:
        engram.patrol(being, llm=llm)
    finally:
        engram.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
