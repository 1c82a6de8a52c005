"""New view rows are inserted in the log's order, in every process and every rebuild.

SQLite's full-text ranking takes the newest rows by rowid (ADR 0012's window) and breaks exact ties
at its cut by rowid: rowids must follow the order the memories were created, not the order a batch
happened to hold its rows in (a set of ids: different in each process, with Python's hash seed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from uuid import UUID

from engram.projections import engine
from engram.services.bootstrap import Engram
from tests.integration.test_reading_fast_paths import engram, populate

__all__ = ["engram"]  # the SQLite fixture of the fast-path tests


def rowid_order(e: Engram, being_id: UUID) -> list[str]:
    db = e.views.dbs["memory"]
    with db.read() as conn:
        nodes = engine.read_tables(conn, db, e.views.projections["memory"])["nodes"]
        rows = conn.query(f"SELECT id FROM {nodes} WHERE being_id = ? ORDER BY rowid", [str(being_id)])
    return [str(r["id"]) for r in rows]


def test_nodes_take_rowids_in_the_order_they_were_created(engram: Engram) -> None:
    being_id, ids = populate(engram, "Aria", 120, seed=7)  # one save, one projection batch
    assert rowid_order(engram, being_id) == ids
    engram.views.rebuild("memory")
    assert rowid_order(engram, being_id) == ids


CHILD = """
import sys
from pathlib import Path
from uuid import UUID
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from tests.integration.test_view_row_order import rowid_order
e = bootstrap(Settings(data_dir=Path(sys.argv[1]), embedder="hashing", llm="none"))
e.views.rebuild("memory")
print(",".join(rowid_order(e, UUID(sys.argv[2]))))
e.close()
"""


def test_a_rebuild_in_another_process_gives_the_same_rowids(engram: Engram, tmp_path: Path) -> None:
    being_id, ids = populate(engram, "Aria", 80, seed=8)
    data_dir = engram.settings.data_dir
    engram.close()
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(data_dir), str(being_id)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1].split(",") == ids
