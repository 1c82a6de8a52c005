"""Child process for the rebuild crash test: rebuilds the memory view in small bulk batches, reporting each."""

from __future__ import annotations

import sys

from engram.projections import engine
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings


def main() -> None:
    e = bootstrap(Settings.model_validate_json(sys.argv[1]))
    views = e.views
    db, projection = views.dbs["memory"], views.projections["memory"]
    engine.rebuild(
        db,
        projection,
        e.store,
        limit=int(sys.argv[2]),
        bulk_limit=int(sys.argv[2]),
        progress=lambda position, head: print(f"batch {position} {head}", flush=True),
    )
    print("done", flush=True)


if __name__ == "__main__":
    main()
