"""Child process for the crash test: catches the memory view up in small batches, reporting each one."""

from __future__ import annotations

import sys

from engram.projections import engine
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings


def main() -> None:
    e = bootstrap(Settings.model_validate_json(sys.argv[1]))
    views = e.views
    db, projection = views.dbs["memory"], views.projections["memory"]
    engine.catch_up(
        db, projection, e.store, limit=int(sys.argv[2]), progress=lambda n: print(f"batch {n}", flush=True)
    )
    print("done", flush=True)


if __name__ == "__main__":
    main()
