"""`engram bench all`: every benchmark, one after the other, each in its own process, JSON into a folder.

Each benchmark runs as `engram bench NAME … --json` in a fresh interpreter (no shared caches, one
process owning each Qdrant Edge shard, memory returned between runs); its stdout is the result
file `OUT/NAME.json`, its stderr (progress) passes through. `quick` runs the same commands on tiny
inputs (seconds each): the smoke test CI runs so that the benchmarks keep working.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BenchRun:
    name: str  # the result file's stem, as `bench.page` expects it
    args: tuple[str, ...]  # after `engram bench`


def plan(database_url: str | None, locomo: Path | None, quick: bool) -> list[BenchRun]:
    def passthrough(command: str, *args: str) -> tuple[str, ...]:
        return (command, "--", *args, "--json")

    def per_backend(name: str, args: tuple[str, ...]) -> list[BenchRun]:
        """`NAME-sqlite`, and `NAME-postgresql` with `--database-url` when a server is given."""
        runs = [BenchRun(f"{name}-sqlite", args)]
        if database_url:
            runs.append(BenchRun(f"{name}-postgresql", (*args, "--database-url", database_url)))
        return runs

    ingest_args: tuple[str, ...]
    vectors: tuple[str, ...]
    rebuild: tuple[str, ...]
    lag: tuple[str, ...]
    patrol: tuple[str, ...]
    patrol_fixed: tuple[str, ...]
    recall: tuple[str, ...]
    http: tuple[str, ...]
    cli: tuple[str, ...]
    memory: tuple[str, ...]
    if quick:
        ingest_args = ("--singles", "10", "--batched", "100", "--repeats", "1")
        vectors = ("--sizes", "300", "--queries", "5", "--hnsw-ef", "")
        rebuild = ("--events", "1500", "--runs", "1", "--beings", "2")
        lag = ("--rates", "40", "--duration", "1")
        patrol = ("--sizes", "200,400", "--runs", "1", "--scenes", "10")
        patrol_fixed = (*patrol[:4], "--scenes", "0", "--dying", "3")
        recall = ("--sizes", "300", "--others", "50", "--queries", "5", "--texts", "40")
        http = ("--scenes", "20", "--calls", "5", "--embedder", "hashing")
        cli = ("--runs", "1")
        memory = ("--sizes", "100", "--reads", "3", "--patrol-every", "100")
    else:
        ingest_args = ()
        vectors = ("--sizes", "10000,100000")
        rebuild = ("--events", "100000")
        lag = ()
        patrol = ("--sizes", "10000,100000")
        patrol_fixed = (*patrol, "--scenes", "0", "--dying", "100")
        recall = ("--sizes", "10000,100000")
        http = ()
        cli = ()
        memory = ("--sizes", "10000")

    runs = [BenchRun("event-size", passthrough("event-size"))]
    runs += per_backend("ingest", ("ingest", *ingest_args, "--json"))
    runs.append(BenchRun("vectors", passthrough("vectors", *vectors)))
    runs += per_backend("rebuild", passthrough("rebuild", *rebuild))
    runs += per_backend("lag", passthrough("lag", *lag))
    runs.append(BenchRun("patrol", passthrough("patrol", *patrol)))
    runs.append(BenchRun("patrol-fixed", passthrough("patrol", *patrol_fixed)))
    runs.append(BenchRun("recall", passthrough("recall", *recall)))
    runs.append(BenchRun("http", passthrough("http", *http)))
    runs.append(BenchRun("cli", passthrough("cli", *cli)))
    runs.append(BenchRun("memory", passthrough("memory", "compare", *memory)))
    messages = ("--messages", "300", "--users", "5") if quick else ()
    runs += per_backend("messages", passthrough("messages", *messages))
    notes_sweep = ("--sizes", "300,3000", "--beings", "3") if quick else ()
    runs += per_backend("notes-sweep", passthrough("notes-sweep", *notes_sweep))
    notes = ("--sizes", "200", "--query-sizes", "200", "--calls", "5") if quick else ()
    runs += per_backend("notes", passthrough("notes", *notes))
    fact_search = ("--sizes", "300", "3000", "--calls", "5") if quick else ()
    runs += per_backend("fact-search", passthrough("fact-search", *fact_search))
    journal = ("--messages", "2000", "--increments", "10,100", "--per-day", "200") if quick else ()
    runs += per_backend("journal", passthrough("journal", *journal))
    sessions = ("--sizes", "10", "--sessions", "3") if quick else ()
    runs.append(BenchRun("sessions", passthrough("sessions", *sessions)))
    facts = ("--rounds", "2", "--facts", "2000") if quick else ()
    runs += per_backend("facts-upsert", passthrough("facts-upsert", *facts))
    extraction = ("--messages", "300") if quick else ()
    runs += per_backend("extraction", passthrough("extraction", *extraction))
    dreaming = ("--sizes", "2000", "--new", "50", "--dead", "20") if quick else ()
    runs.append(BenchRun("dreaming", passthrough("dreaming", *dreaming)))  # ADR 0062
    migrate = ("--scenes", "100", "--notes", "100") if quick else ()
    runs += per_backend("embeddings-migrate", passthrough("embeddings-migrate", *migrate))  # ADR 0071
    audit = ("--events", "3000", "--transfer", "300", "--notes", "10") if quick else ()
    runs += per_backend("audit-log", passthrough("audit-log", *audit))  # ADRs 0069, 0070
    erasure = (
        ("--nodes", "300", "--other", "100", "--notes", "10", "--rebuild-nodes", "200", "--rounds", "2")
        if quick
        else ()
    )
    runs += per_backend("erasure", passthrough("erasure", *erasure))  # ADR 0077
    items = ("--items", "--nodes", "300", "--other", "100") if quick else ("--items",)
    runs += per_backend("erasure-items", passthrough("erasure", *items))  # ADR 0089
    seal = ("--events", "2000") if quick else ()
    runs += per_backend("keys-seal", passthrough("keys-seal", *seal))  # ADR 0095
    ui = ("--nodes", "300", "--runs", "2", "--patrols", "1") if quick else ()
    runs += per_backend("ui", passthrough("ui", *ui))  # issue #14
    if locomo is not None:
        runs.append(BenchRun("locomo", ("locomo", str(locomo), "--links", "--json")))
    return runs


class BenchFailed(RuntimeError):
    pass


def run_all(
    runs: list[BenchRun], out: Path, report: Callable[[str], None], only: set[str] | None = None
) -> list[Path]:
    """Run each benchmark in turn; a failure stops the series (a partial page would hide it)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i, run in enumerate(runs, 1):
        if only and run.name not in only:
            continue
        report(f"[{i}/{len(runs)}] engram bench {' '.join(run.args)}")
        started = time.perf_counter()
        target = out / f"{run.name}.json"
        # The arguments are this module's own plan, never user text: no shell, no injection.
        with open(target.with_suffix(".part"), "w", encoding="utf-8") as stdout:
            proc = subprocess.run(  # noqa: S603
                [
                    sys.executable,
                    "-c",
                    "from engram.adapters.cli.main import main; main()",
                    "bench",
                    *run.args,
                ],
                stdout=stdout,
                env={**os.environ, "ENGRAM_LOG_LEVEL": os.environ.get("ENGRAM_LOG_LEVEL", "warning")},
                check=False,
            )
        if proc.returncode != 0:
            raise BenchFailed(f"engram bench {' '.join(run.args)} exited with {proc.returncode}")
        target.with_suffix(".part").replace(target)
        written.append(target)
        report(f"[{i}/{len(runs)}] {run.name}: {time.perf_counter() - started:.0f} s → {target}")
    return written
