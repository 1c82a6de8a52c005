"""Erasure on PostgreSQL, proved on the table files themselves (ADR 0077): after `forget` and a
`CHECKPOINT`, no file of the log's or the views' tables (heap, indexes, TOAST) holds the canary,
dead tuples included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from tests.integration.test_erasure import CANARY, _plant
from tests.support import SeededIds, SteppingClock


def _conninfo(settings: Settings) -> tuple[str, str]:
    url, _, query = settings.database_url.get_secret_value().partition("?")  # type: ignore[union-attr]
    return url, dict(p.split("=", 1) for p in query.split("&") if "=" in p)["schema"]


def _table_files(settings: Settings) -> list[Path]:
    """Every file of the schema's tables, their indexes and TOAST (all segments), after a CHECKPOINT
    has written the shared buffers out."""
    url, schema = _conninfo(settings)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row = conn.execute("SHOW data_directory").fetchone()
        assert row is not None
        data = Path(row[0])
        rels = conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'i') "
            "UNION SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.reltoastrelid <> 0 "
            "UNION SELECT pg_relation_filepath(i.indexrelid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_index i ON i.indrelid = c.reltoastrelid "
            "WHERE n.nspname = %s",
            [schema, schema, schema],
        ).fetchall()
    files = []
    for (rel,) in rels:
        if rel is None:
            continue
        base = data / rel
        files += [
            p
            for p in base.parent.glob(base.name + "*")
            if p.name == base.name or p.name[len(base.name)] == "."
        ]
    return files


def _holding(files: list[Path], needle: bytes) -> list[str]:
    return [str(p) for p in files if p.exists() and needle in p.read_bytes().lower()]


def test_no_table_file_holds_the_canary_after_forget_on_postgres(
    make_settings: Callable[..., Settings], clock: SteppingClock, backend: str
) -> None:
    if backend != "postgres":
        pytest.skip("PostgreSQL's table files (SQLite's files: test_erasure.py)")
    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        _plant(engram)
        engram.views.catch_up_or_rebuild()
        for n in range(3):  # the being's row rewritten: dead tuples that quote the canary
            engram.beings.write_think_md("Aria", f"thinking of {CANARY}, {n}")
            engram.views.catch_up_or_rebuild()
        files = _table_files(settings)
        assert files and _holding(files, CANARY.encode()), "the views' table files hold the canary before"
        engram.forgetting.forget_being("Aria", by="admin")
        engram.views.catch_up_or_rebuild()
        after = _table_files(settings)
        assert len(after) >= len(files) // 2  # the scan still covers the schema's tables
        assert _holding(after, CANARY.encode()) == []
    finally:
        engram.close()
