"""Child process for the key pool's crash test: takes notes one command at a time, reporting each,
until it is killed (with keys of the pool reserved and not yet used)."""

from __future__ import annotations

import sys

from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings


def main() -> None:
    e = bootstrap(Settings.model_validate_json(sys.argv[1]))
    for n in range(int(sys.argv[2])):
        e.notes.take("Aria", NoteInput(kind="todo", text=f"child note {n}"))
        print(f"batch {n}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
