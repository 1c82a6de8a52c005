"""`engram embeddings migrate` throughput (ADR 0071): hashing → offline MiniLM, on SQLite or PostgreSQL.

    engram bench embeddings-migrate [--scenes 2000] [--notes 2000] [--database-url postgresql://…]
                                    [--json] [--json-out FILE]

A fresh store gets `--scenes` scene notes made into nodes by a patrol and `--notes` knowledge notes,
all embedded by the hashing embedder. Then, timed: the offline MiniLM embedder alone on the same
texts (its own rate: the ceiling; before and after the migration, averaged, since a shared machine's
load changes during a run), and the migration to it (re-embed, record `Reembedded` events,
the views' catch-up into the new collections, the switch). The migration is embedder-bound: its rate
is shown beside the embedder's.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from bench import demo_scenes
from bench.machine import finish, machine_info
from bench.scratch import scratch_schema
from engram.adapters.embedders import build_embedder
from engram.domain.ids import being_id_for_name
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.embedding_migration import EmbeddingMigration, node_text

BATCH = 500


@contextmanager
def _store(root: Path, database_url: str | None) -> Iterator[Engram]:
    settings: dict[str, Any] = {"data_dir": root / "data", "embedder": "hashing", "llm": "none"}
    if database_url:
        with (
            scratch_schema(database_url, "bench_migrate_") as url,
            bootstrap(Settings(**settings, database_url=url)) as e,
        ):
            yield e
        return
    with bootstrap(Settings(**settings)) as e:
        yield e


def load(e: Engram, scenes: int, notes: int) -> None:
    base = demo_scenes()
    texts = []
    for i in range(scenes):
        obj = dict(base[i % len(base)])
        obj["action"] = f"{obj.get('action', 'something happened')} (#{i})"
        texts.append(json.dumps(obj, ensure_ascii=False))
    e.beings.register("bench")
    for start in range(0, scenes, BATCH):
        e.notes.take_many("bench", [NoteInput(text=t) for t in texts[start : start + BATCH]])
    e.patrol("bench")
    for start in range(0, notes, BATCH):
        batch = [
            NoteInput(kind="knowledge", text=f"Fact number {i}: {base[i % len(base)].get('action', '')}")
            for i in range(start, min(start + BATCH, notes))
        ]
        e.notes.take_many("bench", batch)
    e.packing.embed_notes(being_id_for_name("bench"))
    e.views.ensure()


def run(scenes: int, notes: int, database_url: str | None, log: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-migrate-") as tmp, _store(Path(tmp), database_url) as e:
        started = time.perf_counter()
        load(e, scenes, notes)
        log(f"loaded {scenes:,} nodes and {notes:,} notes in {time.perf_counter() - started:.1f} s")
        target = build_embedder(e.settings.model_copy(update={"embedder": "offline"}))
        target.embed(["warm up"])
        migration = EmbeddingMigration(e, target)
        pending = migration.pending()
        items = sum(len(v) for v in pending.values())
        texts = _texts(e, pending)
        before = _embed_alone(target, texts)
        log(f"embedder alone: {len(texts):,} texts in {before:.1f} s ({len(texts) / before:,.0f}/s)")
        report = migration.run()
        if not report.switched or sum(report.done.values()) != items:
            raise SystemExit(f"the migration did not finish: {report.as_dict()}")
        log(f"migration: {items:,} items in {report.seconds:.1f} s ({items / report.seconds:,.0f}/s)")
        # Again after: on a shared machine the load changes during a run; the two bracket the migration.
        after = _embed_alone(target, texts)
        log(f"embedder alone, again: {after:.1f} s ({len(texts) / after:,.0f}/s)")
        embed_s = (before + after) / 2
        return {
            "items": items,
            "per_kind": {k: len(v) for k, v in pending.items()},
            "embedder_s": round(embed_s, 2),
            "embedder_runs_s": [round(before, 2), round(after, 2)],
            "embedder_per_s": round(len(texts) / embed_s),
            "migration_s": round(report.seconds, 2),
            "migration_per_s": round(items / report.seconds),
            "embedder_share": round(embed_s / report.seconds, 3),
            "model": report.to_model,
        }


def _embed_alone(embedder: Any, texts: list[str]) -> float:
    """Seconds the embedder takes on `texts` in the migration's batches."""
    started = time.perf_counter()
    for i in range(0, len(texts), 64):
        embedder.embed(texts[i : i + 64])
    return time.perf_counter() - started


def _texts(e: Engram, pending: dict[str, list[Any]]) -> list[str]:
    """The texts the migration embeds, read the way it reads them (from the aggregates)."""
    from engram.domain.node import MemoryNode
    from engram.domain.note import Note

    being = being_id_for_name("bench")
    out: list[str] = []
    classes: tuple[tuple[str, Any], ...] = (("node", MemoryNode), ("note", Note))
    for kind, cls in classes:
        ids = [item for _, item in pending[kind]]
        for start in range(0, len(ids), BATCH):
            aggs: list[Any] = e.store.get_many(cls, ids[start : start + BATCH], being_id=being)
            out += [node_text(a) if kind == "node" else a.text for a in aggs]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenes", type=int, default=2_000, help="nodes (scene notes through a patrol)")
    parser.add_argument("--notes", type=int, default=2_000, help="embedded knowledge notes")
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (a scratch schema is created)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))

    def log(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    backend = "postgres" if args.database_url else "sqlite"
    figures = run(args.scenes, args.notes, args.database_url, log)
    result = {"benchmark": "embeddings-migrate", "meta": {**machine_info(), "backend": backend}, **figures}
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"# embeddings migrate — {backend}, hashing → {figures['model']}, {figures['items']:,} items")
    print("| | items/s | s |")
    print("|---|---:|---:|")
    print(f"| embedder alone | {figures['embedder_per_s']:,} | {figures['embedder_s']} |")
    print(f"| migration | {figures['migration_per_s']:,} | {figures['migration_s']} |")


if __name__ == "__main__":
    main()
