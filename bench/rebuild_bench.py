"""Full rebuild throughput of every projection, in events per second, on SQLite or PostgreSQL.

    engram bench rebuild [--events 100000] [--runs 3] [--database-url postgresql://…] [--json]

Generates a realistic log first (beings with souls, diaries and patrol cycles; scene notes that
become embedded nodes, 384-dim random vectors; sub-clusters; node state changes: moves, pins,
freshness, dying, dead, reactivation; todo notes read and unread), saved ~200 aggregates per
transaction. Then rebuilds each view `--runs` times through `Views.rebuild` (blue-green, as
`engram projections rebuild` does) and prints, per view, the events it handles and the median
time to the switch (the throughput basis) and to the old generation's removal; then the SQL views,
and all views, through `Views.rebuild_all` as `engram projections rebuild --all` does (views that
share events, memory and vectors, in one pass over the log; the others one after the other).

The embedder and the LLM are counting fakes: a rebuild must call neither (the counts are printed).
Default backend: SQLite in a temporary directory. `--database-url` selects PostgreSQL (a fresh schema,
dropped at the end); the server's fsync setting is printed, since it changes write costs a lot.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from engram.adapters.logging import configure_logging
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.ids import node_id_for_note
from engram.domain.node import MemoryNode, ReactivationSource
from engram.domain.note import Note
from engram.domain.scene import validate_scene_object
from engram.projections.engine import rebuilding
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.ports import LLMAnswer, LLMUnavailable

DIM = 384
MODEL = "bench-random-384"
SAVE_AGGREGATES = 200
ACTIONS = ["walked", "cooked", "read", "called", "painted", "ran", "wrote", "planted", "fixed", "sang"]
PLACES = ["garden", "kitchen", "library", "park", "studio", "station", "office", "beach"]


class CountingEmbedder:
    """Never expected to be called during a rebuild; counts if it is."""

    calls = 0

    @property
    def model_id(self) -> str:
        return MODEL

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        self.calls += 1
        return [Embedding.from_floats(MODEL, [0.0] * (DIM - 1) + [1.0]) for _ in texts]


class CountingLLM:
    calls = 0

    @property
    def available(self) -> bool:
        return True

    def describe(self) -> str:
        return "fake:counting"

    def model_for(self, model_class: str) -> str:
        return "counting"

    def complete(self, **_: Any) -> LLMAnswer:
        self.calls += 1
        raise LLMUnavailable("benchmark: no LLM")


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        self.t += timedelta(milliseconds=10)
        return self.t


# -- the log -----------------------------------------------------------------------------------------


def generate(e: Engram, target: int, beings: int, seed: int) -> dict[str, Any]:
    """Write about `target` events; returns what was written."""
    rng = random.Random(seed)
    clock = e.clock
    pending: list[Any] = []
    written = Counter[str]()

    def flush(force: bool = False) -> None:
        if pending and (force or len(pending) >= SAVE_AGGREGATES):
            e.store.save(*pending)
            written["transactions"] += 1
            pending.clear()

    people: list[tuple[Being, list[Cluster]]] = []
    for i in range(beings):
        being, business, private = Being.register(f"being-{i:03d}", clock.now())
        being.define_soul(f"soul of being {i}: curious, kind, a little stubborn", clock.now())
        subs = [
            Cluster.create_sub(uuid.uuid4(), business if j % 2 else private, f"topic {j}", clock.now())
            for j in range(6)
        ]
        e.store.save(being, business, private, *subs)
        people.append((being, [business, private, *subs]))
    todo: list[Note] = []
    day = 0
    while e.store.head() < target:
        day += 1
        for being, clusters in people:
            if e.store.head() >= target:
                break
            # One patrol's worth of work for this being: notes become embedded nodes, then changes.
            being = e.store.get(Being, being.id)
            cycle = being.start_patrol_cycle(clock.now())
            being.write_diary(
                f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}", f"day {day}: fine", clock.now()
            )
            pending.append(being)
            nodes: list[MemoryNode] = []
            for k in range(40):
                scene = {
                    "action": f"{rng.choice(ACTIONS)} in the {rng.choice(PLACES)} ({day}.{k})",
                    "actors": ["me", f"friend {rng.randrange(30)}"],
                    "when": [f"2026-03-{1 + k % 28:02d}"],
                    "setting": rng.choice(PLACES),
                    "importance": rng.choice([0.02, 0.3, 0.5, 0.5, 0.8]),
                    "themes": [rng.choice(PLACES), rng.choice(ACTIONS)],
                }
                note = Note.take(uuid.uuid4(), being.id, "scene", json.dumps(scene), clock.now())
                cluster = rng.choice(clusters)
                node = MemoryNode.create(
                    node_id_for_note(note.id),
                    validate_scene_object(scene),
                    cluster,
                    cycle,
                    clock.now(),
                    source_note_id=note.id,
                )
                vector = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
                node.embed(Embedding.from_floats(MODEL, vector), clock.now())
                note.mark_processed(node.id, clock.now())
                pending += [note, node]
                nodes.append(node)
                flush()
            for node in nodes:
                roll = rng.random()
                at = clock.now()
                if roll < 0.30:
                    node.clear_fresh(at)
                elif roll < 0.40:
                    node.move_to(rng.choice(clusters), at)
                elif roll < 0.48:
                    node.pin(at)
                elif node.importance <= 0.05 and roll < 0.75:
                    node.flag_dying(cycle, at)
                    if roll < 0.65:
                        node.make_dead(cycle, "no partner", clock.now())
                elif roll < 0.85:
                    node.reactivate(ReactivationSource.RECALL, cycle, at)
            for k in range(5):
                t = Note.take(uuid.uuid4(), being.id, "todo", f"todo {day}.{k}", clock.now())
                todo.append(t)
                pending.append(t)
            queued = {id(a) for a in pending}
            for t in rng.sample(todo, min(3, len(todo))):
                if id(t) not in queued:
                    t.mark_read(clock.now()) if not t.read else t.mark_unread(clock.now())
                    pending.append(t)
            flush(force=True)
    flush(force=True)
    written["events"] = e.store.head()
    return dict(written)


def topic_counts(e: Engram) -> Counter[str]:
    counts: Counter[str] = Counter()
    for n in e.store.iter_notifications(page=5000):
        counts[n.topic] += 1
    return counts


# -- timing ------------------------------------------------------------------------------------------


@contextmanager
def switch_times() -> Iterator[list[tuple[float, float]]]:
    """(wall, CPU) instants at which views switched: a rebuild drops the old generations right after
    its switch commits (progress reports can reach the head earlier, before the indexes are built)."""
    times: list[tuple[float, float]] = []
    drop = rebuilding.drop_generations

    def timed_drop(*args: Any, **kwargs: Any) -> list[int]:
        times.append((time.perf_counter(), time.process_time()))
        return drop(*args, **kwargs)

    rebuilding.drop_generations = timed_drop
    try:
        yield times
    finally:
        rebuilding.drop_generations = drop


def rebuild_once(e: Engram, names: list[str]) -> tuple[float, float, float]:
    """Seconds to the (last) switch, to the end (old generations dropped), and this process's CPU
    seconds to the switch (SQLite works inside this process; PostgreSQL's server work is not counted).
    One name: `Views.rebuild`; several: `Views.rebuild_all`, one pass over the log."""
    with switch_times() as switched:
        t0, c0 = time.perf_counter(), time.process_time()
        if len(names) == 1:
            e.views.rebuild(names[0])
        else:
            e.views.rebuild_all(names)
        t1, c1 = time.perf_counter(), time.process_time()
    ts, cs = switched[-1] if len(switched) == len(names) else (t1, c1)
    return ts - t0, t1 - t0, cs - c0


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "load_average": os.getloadavg(),
    }


def postgres_info(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        out = {}
        for setting in (
            "server_version",
            "fsync",
            "synchronous_commit",
            "full_page_writes",
            "shared_buffers",
        ):
            row = conn.execute(f"SHOW {setting}").fetchone()
            out[setting] = row[0] if row else None
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="engram-bench-rebuild-"))
    schema = None
    base: dict[str, Any] = {
        "data_dir": tmp / "data",
        "embedder": "hashing",
        "llm": "none",
        "projection_batch_size": args.batch,
    }
    backend: dict[str, Any] = {"name": "sqlite"}
    if args.database_url:
        import psycopg

        schema = "bench_" + uuid.uuid4().hex[:10]
        with psycopg.connect(args.database_url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        sep = "&" if "?" in args.database_url else "?"
        base["database_url"] = f"{args.database_url}{sep}{urlencode({'schema': schema})}"
        backend = {"name": "postgres", **postgres_info(args.database_url)}
        if backend.get("fsync") == "off":
            backend["note"] = "fsync=off on this server: commits cost less than on a durable server"
    embedder, llm = CountingEmbedder(), CountingLLM()
    e = bootstrap(Settings(**base), clock=Clock(), embedder=embedder, llm=llm)
    try:
        t0 = time.perf_counter()
        written = generate(e, args.events, args.beings, args.seed)
        generate_s = time.perf_counter() - t0
        topics = topic_counts(e)
        head = e.store.head()
        views = e.views
        names = [n for n in views.names() if not args.views or n in args.views]
        t0 = time.perf_counter()
        views.ensure()  # live catch-up once, so that the rebuild replaces a full generation
        catch_up_s = time.perf_counter() - t0
        samples: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
        sql_names = [n for n in names if n != "vectors"]
        passes = {"sql": sql_names, "all": names} if len(names) > 1 else {}
        all_runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in passes}
        for _ in range(args.runs):
            for name in names:
                samples[name].append(rebuild_once(e, [name]))
                print(f"  {name:<12} {samples[name][-1][0]:8.2f} s", file=sys.stderr, flush=True)
            for kind, chosen in passes.items():
                if chosen:
                    all_runs[kind].append(rebuild_once(e, chosen))
                    print(f"  --all {kind:<7} {all_runs[kind][-1][0]:7.2f} s", file=sys.stderr, flush=True)
        rows: list[dict[str, Any]] = []
        for name in names:
            handled = sum(topics[t] for t in views.projections[name].topics)
            to_switch = statistics.median(s[0] for s in samples[name])
            total = statistics.median(s[1] for s in samples[name])
            cpu = statistics.median(s[2] for s in samples[name])
            rows.append(
                {
                    "view": name,
                    "kind": "vector" if name == "vectors" else "sql",
                    "events_handled": handled,
                    "seconds_to_switch": round(to_switch, 3),
                    "seconds_total": round(total, 3),
                    "events_per_s": round(handled / to_switch) if to_switch else None,
                    "cpu_seconds_to_switch": round(cpu, 3),
                    "events_per_cpu_s": round(handled / cpu) if cpu else None,
                    "log_events_per_s": round(head / to_switch) if to_switch else None,
                    "runs": [round(s[0], 3) for s in samples[name]],
                }
            )

        def summary(kind: str | None) -> dict[str, Any]:
            chosen = [r for r in rows if kind is None or r["kind"] == kind]
            seconds = sum(r["seconds_to_switch"] for r in chosen)
            cpu = sum(r["cpu_seconds_to_switch"] for r in chosen)
            handled = sum(r["events_handled"] for r in chosen)
            return {
                "views": [r["view"] for r in chosen],
                "events_handled": handled,
                "seconds_to_switch": round(seconds, 3),
                "events_per_s": round(handled / seconds) if seconds else None,
                "events_per_cpu_s": round(handled / cpu) if cpu else None,
                "log_events_per_s_each": round(head * len(chosen) / seconds) if seconds else None,
            }

        def through_rebuild_all(kind: str) -> dict[str, Any] | None:
            if not all_runs.get(kind):
                return None
            chosen = passes[kind]
            handled = sum(r["events_handled"] for r in rows if r["view"] in chosen)
            to_switch = statistics.median(s[0] for s in all_runs[kind])
            cpu = statistics.median(s[2] for s in all_runs[kind])
            return {
                "views": chosen,
                "events_handled": handled,
                "seconds_to_switch": round(to_switch, 3),
                "seconds_total": round(statistics.median(s[1] for s in all_runs[kind]), 3),
                "events_per_s": round(handled / to_switch) if to_switch else None,
                "events_per_cpu_s": round(handled / cpu) if cpu else None,
                "runs": [round(s[0], 3) for s in all_runs[kind]],
            }

        return {
            "benchmark": "rebuild",
            "machine": machine(),
            "backend": backend,
            "log": {
                "events": head,
                "written": written,
                "beings": args.beings,
                "embedding_dim": DIM,
                "generate_s": round(generate_s, 1),
                "live_catch_up_s": round(catch_up_s, 1),
                "batch_size": args.batch,
                "runs": args.runs,
            },
            "views": rows,
            "totals": {"sql": summary("sql"), "vector": summary("vector"), "all": summary(None)},
            "rebuild_all": {k: v for k in passes if (v := through_rebuild_all(k)) is not None},
            "external_calls_during_rebuilds": {"embedder": embedder.calls, "llm": llm.calls},
        }
    finally:
        e.close()
        if schema is not None:
            import psycopg

            with psycopg.connect(args.database_url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def print_table(result: dict[str, Any]) -> None:
    m, b, lg = result["machine"], result["backend"], result["log"]
    print(f"engram rebuild benchmark — {m['date']}")
    print(
        f"machine: {m['cpu']} × {m['cpus']}, {m['memory']}, {m['os']}, Python {m['python']}, "
        f"load average {', '.join(f'{x:.1f}' for x in m['load_average'])}"
    )
    extra = ""
    if b["name"] == "postgres":
        extra = (
            f" {b.get('server_version')}, fsync={b.get('fsync')}, "
            f"synchronous_commit={b.get('synchronous_commit')}"
        )
        if b.get("note"):
            extra += f" — NOTE: {b['note']}"
    else:
        extra = f" {m['sqlite']} (WAL, synchronous=NORMAL)"
    print(f"backend: {b['name']}{extra}")
    print(
        f"log: {lg['events']} events ({lg['written'].get('transactions', 0)} transactions, {lg['beings']} beings, "
        f"{lg['embedding_dim']}-dim vectors), generated in {lg['generate_s']} s; batch size {lg['batch_size']}; "
        f"median of {lg['runs']} run(s)"
    )
    print()
    head = (
        f"{'view':<12} {'kind':<6} {'events':>8} {'to switch s':>11} {'events/s':>9} "
        f"{'ev/CPU-s':>9} {'log ev/s':>9} {'total s':>8}  runs (s)"
    )
    print(head)
    for r in result["views"]:
        print(
            f"{r['view']:<12} {r['kind']:<6} {r['events_handled']:>8} {r['seconds_to_switch']:>11.2f} "
            f"{r['events_per_s'] or 0:>9} {r['events_per_cpu_s'] or 0:>9} {r['log_events_per_s'] or 0:>9} "
            f"{r['seconds_total']:>8.2f}  {', '.join(f'{x:.2f}' for x in r['runs'])}"
        )
    print()
    for kind, t in result["totals"].items():
        print(
            f"total {kind:<6}: {t['events_handled']} events handled in {t['seconds_to_switch']:.2f} s "
            f"= {t['events_per_s']} events/s, {t['events_per_cpu_s']} per CPU-second of this process "
            f"({', '.join(t['views'])})"
        )
    for kind, t in result.get("rebuild_all", {}).items():
        print(
            f"--all {kind:<6}: {t['events_handled']} events handled in {t['seconds_to_switch']:.2f} s "
            f"= {t['events_per_s']} events/s, {t['events_per_cpu_s']} per CPU-second "
            f"(`Views.rebuild_all`, as `engram projections rebuild --all`; runs {t['runs']})"
        )
    calls = result["external_calls_during_rebuilds"]
    print(f"embedder calls: {calls['embedder']}, LLM calls: {calls['llm']} (during generation and rebuilds)")
    print("events/s = events of the view's topics / wall seconds to the switch (median); ev/CPU-s = the same")
    print(
        "events / this process's CPU seconds (on PostgreSQL the server's CPU is not in it); 'log ev/s' = whole"
    )
    print("log / wall seconds; 'total s' adds dropping the old generation.")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000, help="log size to generate (default 100000)")
    parser.add_argument("--beings", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3, help="rebuilds per view; the median is reported")
    parser.add_argument(
        "--batch",
        type=int,
        default=Settings().projection_batch_size,
        help="events per view transaction (ENGRAM_PROJECTION_BATCH_SIZE)",
    )
    parser.add_argument("--views", nargs="*", help="only these views")
    parser.add_argument("--database-url", default=None, help="PostgreSQL URL (default: SQLite in a temp dir)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--save", type=Path, default=None, help="also write the JSON result to this file")
    args = parser.parse_args()
    configure_logging("warning")  # the library logs each rebuild at info level
    result = run(args)
    if args.save:
        args.save.write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
