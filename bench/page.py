"""docs/benchmarks.md, rendered from the JSON results of `engram bench all` (one file per benchmark).

Every figure on the page comes from a result file; the prose around the tables explains what is
measured and never quotes a number itself, so a new run regenerates the page without stale text.
The LoCoMo tuning log is history (each row was measured once, on the day of the change) and is
included verbatim from `docs/bench/locomo-notes.md`; so is the record of earlier runs of the latency
goals on other machines (`docs/bench/earlier-runs.md`), which the goals table reads for one run only,
the before/after record of the memory bounds (`docs/bench/memory-notes.md`, ADR 0028) and of the
renovation of issues #7 and #8 (`docs/bench/renovation-notes.md`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from bench import ROOT, erasure_items_page, erasure_page, keys_seal_page
from bench.ui import section as ui_section

Result = dict[str, Any]

BENCH_DOCS = ROOT / "docs" / "bench"
LOCOMO_NOTES = BENCH_DOCS / "locomo-notes.md"
EARLIER_RUNS = BENCH_DOCS / "earlier-runs.md"
MEMORY_NOTES = BENCH_DOCS / "memory-notes.md"
RENOVATION_NOTES = BENCH_DOCS / "renovation-notes.md"

# Goals from the issues; the page says for each whether this run met it.
REBUILD_GOAL = 20_000  # events/s into the SQL views (#3)
PATROL_RATIO_GOAL, PATROL_SECONDS_GOAL = 2.0, 1.0  # t(100k)/t(10k) and seconds at 100k (#4)
RECALL_P95_GOAL_MS = 5.0  # recall and query p95 at 100k, without the query embedding (#5)
LOCOMO_GOALS = {"5": 0.65, "10": 0.75}  # default profile, categories 1–4 (#6)
NOTES_SWEEP_RATIO_GOAL = 2.0  # the expiry sweep, t(1M)/t(100k) per note expired (#9, ADR 0048)
NOTES_P95_GOAL_MS = 5.0  # the context pack and the notes list at 100k notes, without a query (#9)
NOTES_GOAL_SIZE = 100_000
JOURNAL_INCREMENT_GOAL_S = 1.0  # an incremental journal refresh of a being with 100k messages (#10)


def load_results(directory: Path) -> dict[str, Result]:
    """`name.json` → result, for every JSON file in `directory` (a missing benchmark is a missing section)."""
    results = {}
    for path in sorted(directory.glob("*.json")):
        results[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    return results


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> str:
    """A Markdown table; `align` is one character per column, `l` or `r` (default: first left, others right)."""
    align = align or "l" + "r" * (len(header) - 1)
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|",
    ]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _n(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _met(ok: bool | None) -> str:
    return "–" if ok is None else ("**met**" if ok else "**missed**")


def _load(m: Result) -> str:
    if not m.get("load_average"):
        return "load not recorded"
    start = " ".join(f"{x:.2f}" for x in m.get("load_average", []))
    end = " ".join(f"{x:.2f}" for x in m.get("load_average_end", []))
    return f"load average {start}" + (f" → {end}" if end else "")


def _when(result: Result) -> str:
    m = result.get("machine") or result.get("meta") or {}
    date = str(m.get("date") or result.get("date") or "?")
    return f"{date[:16].replace('T', ' ')} UTC, {_load(m)}"


def _section(title: str, command: str, result: Result, body: Sequence[str]) -> str:
    return "\n\n".join([f"## {title}", f"`{command}` — {_when(result)}", *body])


# -- each benchmark ----------------------------------------------------------------------------------


def event_size(r: Result) -> str:
    rows = [
        (
            x["dim"],
            _n(x["f32_bytes_per_event"]),
            _n(x["json_list_bytes_per_event"]),
            f"{x['json_list_bytes_per_event'] / x['f32_bytes_per_event']:.1f}×",
            _n(x["f32_decode_events_per_s"]),
        )
        for x in r["rows"]
    ]
    return _section(
        "Vectors in the event log",
        "engram bench event-size",
        r,
        [
            "A node's vector lives in its own `MemoryNode.Embedded` event as base64 of packed float32 "
            "(`adapters/eventstore/transcodings.py`), so a rebuild reads vectors from the log and never "
            "calls an embedding API.",
            table(
                [
                    "dim",
                    "float32 event (bytes)",
                    "JSON list (bytes)",
                    "ratio",
                    "decode (events/s, median of 5)",
                ],
                rows,
            ),
        ],
    )


def ingest(results: dict[str, Result]) -> str | None:
    found = [(k, results[k]) for k in ("ingest-sqlite", "ingest-postgresql") if k in results]
    if not found:
        return None
    rows = []
    for _, r in found:
        c = r["config"]
        rows.append(
            (
                r["backend"],
                _n(r["single_notes_per_s"]),
                f"{_n(r['batched_notes_per_s'])} (batches of {c['batch_size']})",
                f"{r['ratio']:.1f}×",
                " ".join(str(x) for x in r["machine"].get("load_average", [])),
            )
        )
    first = found[0][1]
    return _section(
        "Ingest",
        "engram bench ingest [--database-url postgresql://…]",
        first,
        [
            "Notes per second through `notes.take` (one note per command: one transaction each) and "
            "`notes.take_many` (what `engram note --file` and the HTTP batch endpoint do); medians of "
            f"{first['config']['repeats']} repeats, hashing embedder (noting does not embed).",
            table(["backend", "one note per command", "batched", "ratio", "load average"], rows),
        ],
    )


def vectors(r: Result) -> str:
    rows = []
    for x in r["rows"]:
        build = ""
        if x.get("optimize_s") is not None:
            build = f"`optimize()` {x['optimize_s']:.1f} s"
        elif x.get("load_s") is not None:
            build = f"load {x['load_s']:.1f} s"
        recall = x.get("recall_at_3")
        rows.append(
            (
                _n(x["size"]),
                _n(x["total_points"]),
                x["engine"],
                _ms(x["p50_ms"]),
                _ms(x["p95_ms"]),
                "–" if recall is None else f"{recall:.3f}",
                build,
            )
        )
    setup = r.get("setup", {})
    return _section(
        "Vector search",
        "engram bench vectors --sizes 10000,100000",
        r,
        [
            f"Filtered top-{setup.get('limit', 3)} search through the `VectorIndex` adapters, "
            f"{setup.get('dim', '?')} dimensions, {setup.get('layout', '')}; filter: {setup.get('filter', '')}. "
            "Random unit vectors: the worst case for HNSW (real embeddings cluster; see the recall "
            "benchmark for HNSW recall on sentence embeddings). qdrant-client's local mode is a Python "
            "loop, for tests only.",
            table(
                ["N per being", "points", "engine", "p50 ms", "p95 ms", "recall@3 vs exact", "build"],
                rows,
                "rrlrrrl",
            ),
        ],
    )


def rebuild(results: dict[str, Result]) -> str | None:
    found = [results[k] for k in ("rebuild-sqlite", "rebuild-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL", "postgresql": "PostgreSQL"}
    header = ["view"] + [f"{names.get(r['backend']['name'], r['backend']['name'])} events/s" for r in found]
    views = [v["view"] for v in found[0]["views"]]
    rows: list[list[str]] = []
    for view in views:
        row = [view]
        for r in found:
            match = next((v for v in r["views"] if v["view"] == view), None)
            if match is None or not match["events_handled"]:
                row.append("– (no events of its kind)")
            else:
                row.append(f"{_n(match['events_per_s'])} ({_n(match['events_handled'])} events)")
        rows.append(row)
    for kind, label in (("sql", "**all SQL views**"), ("all", "all views incl. vectors")):
        row = [label]
        for r in found:
            t = r["totals"].get(kind) or {}
            row.append(f"**{_n(t.get('events_per_s'))}**" if kind == "sql" else _n(t.get("events_per_s")))
        rows.append(row)
    goal = [
        f"{names.get(r['backend']['name'], '?')} {_met((r['totals']['sql'].get('events_per_s') or 0) >= REBUILD_GOAL)}"
        for r in found
    ]
    lg = found[0]["log"]
    calls = [r["external_calls_during_rebuilds"] for r in found]
    pg = next((r["backend"] for r in found if r["backend"]["name"] != "sqlite"), None)
    return _section(
        "Rebuild",
        "engram bench rebuild [--database-url postgresql://…]",
        found[0],
        [
            f"A full blue-green rebuild of each view from a log of {_n(lg['events'])} events "
            f"({lg['beings']} beings; notes, nodes with {lg['embedding_dim']}-d vectors, state changes); "
            f"median of {lg['runs']} rebuilds; events/s = events of the view's topics / seconds until "
            "the switch. "
            + (
                f"PostgreSQL {pg.get('server_version')}, fsync={pg.get('fsync')}, "
                f"synchronous_commit={pg.get('synchronous_commit')}. "
                if pg
                else ""
            )
            + "Embedder / LLM calls during the rebuilds: "
            + ", ".join(
                f"{names.get(r['backend']['name'], '?')} {c['embedder']} / {c['llm']}"
                for r, c in zip(found, calls, strict=True)
            )
            + ".",
            table(header, rows),
            f"Goal ≥ {REBUILD_GOAL:,} events/s into the SQL views: " + ", ".join(goal) + ".",
        ],
    )


def lag(results: dict[str, Result]) -> str | None:
    found = [results[k] for k in ("lag-sqlite", "lag-postgresql") if k in results]
    if not found:
        return None
    rows = []
    for r in found:
        backend = r["backend"]["name"]
        for run in r["runs"]:
            notes = next((v for v in run["views"] if v["view"] == "notes"), run["views"][0])
            ms = notes["lag_ms"]
            rows.append(
                (
                    backend,
                    f"{run['rate_target']} → {run['rate_achieved']}",
                    run["wakeup"],
                    _ms(ms["p50"]),
                    _ms(ms["p95"]),
                    _ms(ms["max"]),
                )
            )
    return _section(
        "Projection lag under load",
        "engram bench lag [--database-url postgresql://…]",
        found[0],
        [
            "A writer notes at a fixed rate while the worker runs as `engram worker` does; lag = a note's "
            "commit to the notes view's batch that covers it. On SQLite the worker polls "
            "(`ENGRAM_WORKER_POLL_INTERVAL_S`; inside `engram serve` writes wake it at once); on PostgreSQL "
            "LISTEN/NOTIFY wakes it, with a safety pull.",
            table(
                ["backend", "notes/s (target → achieved)", "wake-up", "lag p50 ms", "p95 ms", "max ms"],
                rows,
                "lllrrr",
            ),
        ],
    )


def patrol(results: dict[str, Result]) -> str | None:
    main = results.get("patrol")
    if main is None:
        return None
    body = [
        "Patrol's mechanical steps (no LLM) on a being of N nodes where about 1 % of the nodes become "
        "dying each cycle and 0.1 % (dead ones) are read before it so that ❺ revives them; medians of "
        "the measured patrols, seconds. Building the beings is not measured. The fixed-number run "
        "holds both fixed: 100 become dying and 10 dead ones are read, at every size.",
    ]
    for key, label in (("patrol", "1 % of nodes change"), ("patrol-fixed", "a fixed number change")):
        r = results.get(key)
        if r is None:
            continue
        sizes = r["sizes"]
        header = ["step", *[f"{_n(s['nodes'])} nodes" for s in sizes]]
        steps = list(sizes[0]["step_median_s"])
        rows = [[step, *[f"{s['step_median_s'][step]:.3f}" for s in sizes]] for step in steps]
        rows.append(["**mechanical steps**", *[f"**{s['mechanical_median_s']:.3f}**" for s in sizes]])
        rows.append(["whole patrol", *[f"{s['patrol_median_s']:.3f}" for s in sizes]])
        changed = [sum(v for step in s["counts_last_run"].values() for v in step.values()) for s in sizes]
        rows.append(["state changes (last run)", *[_n(c) for c in changed]])
        body.append(f"**{label}** (`--dying {r['meta'].get('dying', '1%')}`)")
        body.append(table(header, rows))
        ratio = r.get("ratio")
        if ratio and key == "patrol":
            largest = sizes[-1]["mechanical_median_s"]
            body.append(
                f"t({ratio['sizes']}): mechanical steps **{ratio['mechanical']}**, whole patrol "
                f"{ratio['patrol']}; {largest:.2f} s at the largest size (goal < {PATROL_SECONDS_GOAL:g} s: "
                f"{_met(largest < PATROL_SECONDS_GOAL)}). With 1 % changing, the larger being has ten "
                "times the changes: a cost in proportion to what changes gives a ratio near 10 here; the "
                "fixed-number run below measures the ratio the goal is about (ADR 0013)."
            )
        elif ratio:
            body.append(
                f"t({ratio['sizes']}): mechanical steps **{ratio['mechanical']}**, whole patrol "
                f"{ratio['patrol']} (goal ≤ {PATROL_RATIO_GOAL:g}: {_met(ratio['mechanical'] <= PATROL_RATIO_GOAL)}): "
                "with the number of changes fixed, the cost barely follows the being's size."
            )
    notes = main.get("notes_to_nodes")
    if notes:
        body.append(
            f"❶ (notes → nodes) with the offline embedder `{notes['embedder']}`: {_n(notes['scenes'])} scenes "
            f"in {notes['notes_to_nodes_s']:.2f} s = **{_n(notes['notes_to_nodes_scenes_per_s'])} scenes/s**; "
            f"the embedder alone on the same texts: {_n(notes['embedder_alone_texts_per_s'])} texts/s "
            f"({notes['notes_to_nodes_scenes_per_s'] / notes['embedder_alone_texts_per_s']:.0%} of its "
            "ceiling)."
        )
    return _section("Patrol", "engram bench patrol --sizes 10000,100000 [--dying 100]", main, body)


def _recall_cells(report: Result, what: str) -> list[str]:
    cells = []
    for index in ("exact", "hnsw"):
        row = next((x for x in report["rows"] if x["what"] == what and x["index"] == index), None)
        cells.append("–" if row is None else f"{_ms(row['p50_ms'])} / {_ms(row['p95_ms'])}")
    return cells


def recall(r: Result) -> str:
    reports = r["reports"]
    header = ["call (p50 / p95 ms)"]
    for rep in reports:
        header += [f"{_n(rep['size'])} exact", f"{_n(rep['size'])} HNSW"]
    indexed = [x for rep in reports for x in rep["rows"] if x["index"] in ("exact", "hnsw")]
    whats = list(dict.fromkeys(x["what"] for x in indexed))
    calls = [w for w in whats if not w.startswith("part:")]
    parts = [w for w in whats if w.startswith("part:")]
    # Rows timed at a wider HNSW search breadth (`ef=`) through the adapter alone.
    breadth = list(
        dict.fromkeys(
            (x["what"], x["index"])
            for rep in reports
            for x in rep["rows"]
            if x["index"] not in ("exact", "hnsw")
        )
    )

    def rows(names: list[str]) -> list[list[str]]:
        return [[name, *[c for rep in reports for c in _recall_cells(rep, name)]] for name in names]

    setup = [
        f"{_n(rep['size'])}: the measured being holds {_n(rep['size'])} nodes, 9 others "
        f"{_n(rep['others'])} each ({_n(rep['total_nodes'])} in all); views built in "
        f"{rep['build_s'].get('project_views', 0):.0f} s"
        + (
            f", full-text indexes merged in {rep['build_s']['merge_fulltext']:.1f} s (ADR 0020)"
            if "merge_fulltext" in rep["build_s"]
            else ""
        )
        + f"; HNSW `optimize()` {rep.get('optimize_s') or 0:.0f} s; "
        "HNSW vs exact: "
        + ", ".join(f"{k} {v:.3f}" for k, v in rep.get("recall_at_k", {}).items() if "ef=" not in k)
        for rep in reports
    ]
    goal = []
    for rep in reports:
        if rep["size"] < 100_000:
            continue
        for what in calls:
            if "embedding" in what and "without" not in what:
                continue
            row = next((x for x in rep["rows"] if x["what"] == what and x["index"] == "hnsw"), None)
            if row is not None:
                goal.append(f"{what}: {_ms(row['p95_ms'])} ms {_met(row['p95_ms'] <= RECALL_P95_GOAL_MS)}")
    body = [
        "`recall` and `query` on the embedded default (SQLite, Qdrant Edge, offline MiniLM) through the "
        "same `Reading` calls the CLI, HTTP API, MCP server and Python API make; 10 beings. Texts are "
        "generated sentences embedded with MiniLM (near-duplicates perturbed around them); queries are "
        "held-out rephrasings. `exact` = Edge's brute-force search (what serves until the worker's "
        "maintenance builds the HNSW graph), `HNSW` = after it. `recall` reactivates what it returns "
        "(one write per call, committed without waiting for the disk since ADR 0018, writing only what "
        "changed since ADR 0021, loading the nodes and the being through the process's aggregate cache "
        "since ADR 0022); `query` ranks its full-text candidates on a worker beside the vector search, "
        "and SQLite hands them back as one text (ADR 0017 and its addendum); Edge searches each shard "
        "with one thread (ADR 0019); each being's "
        "full-text index is merged into one b-tree after the build, as the worker's maintenance keeps it "
        "(ADR 0020). Each phase first times one pass of `recall` over the queries, and one of `query` "
        "before its goal row (rows of their own: the first calls after the build or `optimize()` have "
        "run up to twice as slow as the same calls repeated: they read from the disk the pages the "
        "kernel dropped from its page cache meanwhile. "
        "This VM has kept as little as ~200 MB of page cache on 23.5 GiB, and dropping the page cache "
        "by hand reproduces the slow pass; since ADR 0023 the views' hot pages stay in the process), "
        "then the rows below in order; the `part:` rows time the pieces alone. "
        "The same holds across runs: the machine, not only the code, moves the figures (the `exact` "
        "columns show a run's phase: with the same Edge and search code, `vector search top 3` at 100k "
        "took 23 ms in one run and 43 ms in another).",
        "\n".join(f"- {line}" for line in setup),
        table(header, rows(calls)),
        table(header, rows(parts)),
    ]
    if breadth:
        cells = []
        for what, index in breadth:
            row = [f"{what}, {index}"]
            for rep in reports:
                hit = next((x for x in rep["rows"] if x["what"] == what and x["index"] == index), None)
                row.append("–" if hit is None else f"{_ms(hit['p50_ms'])} / {_ms(hit['p95_ms'])}")
            cells.append(row)
        body.append(table(["wider HNSW search (p50 / p95 ms)", *[_n(rep["size"]) for rep in reports]], cells))
    if goal:
        body.append(
            f"Goal p95 ≤ {RECALL_P95_GOAL_MS:g} ms at 100k without the embedding: " + "; ".join(goal) + "."
        )
    return _section("Recall and query latency", "engram bench recall --sizes 10000,100000", r, body)


def http(r: Result) -> str:
    rows = [(name, _ms(x["p50_ms"]), _ms(x["p95_ms"]), _ms(x["mean_ms"])) for name, x in r["results"].items()]
    s = r["setup"]
    return _section(
        "HTTP overhead",
        "engram bench http",
        r,
        [
            f"The same calls in-process and through `engram serve` on loopback (keep-alive client, being "
            f"token), alternating call by call on identical copies of one being ({_n(s['scenes'])} nodes, "
            f"{_n(s['calls'])} calls each, embedder {s['embedder']}). `HTTP adds` is the distribution of "
            "the per-pair differences.",
            table(["call", "p50 ms", "p95 ms", "mean ms"], rows),
        ],
    )


def cli(r: Result) -> str:
    rows = [
        (
            x["command"],
            x["engram"],
            f"{x['wall_s']['median']:.2f}",
            f"{x['wall_s']['min']:.2f}–{x['wall_s']['max']:.2f}",
            f"{x['cpu_s_median']:.2f}",
            f"{x['vs_first']:.2f}",
        )
        for x in r["results"]
    ]
    return _section(
        "One-shot reads through the CLI",
        "engram bench cli",
        r,
        [
            "A new `engram` process per read, as a shell starts one, on a data directory made by "
            "`engram demo` (30 patrolled scenes, offline MiniLM, no server running): the interpreter, the "
            "imports, loading the model, opening the stores, the read and closing. Executables given with "
            "`--engram` ran alternately; `vs 1st` is the median against the first one's. Issue #7 asks for a "
            "`recall` under 1 s.",
            table(["command", "engram", "median s", "range s", "CPU s", "vs 1st"], rows),
        ],
    )


def _mib(value: float | None) -> str:
    return "–" if value is None else f"{value / 1024 / 1024:,.0f}"


def memory(results: dict[str, Result]) -> str | None:
    """`memory.json` (`engram bench memory -- compare`) and `memory-soak.json` (`… -- soak`)."""
    parts: list[str] = []
    first: Result | None = None
    if "memory" in results:
        r = first = results["memory"]
        rows, disk_rows = [], []
        for entry in r["sizes"]:
            for key in ("engram", "serve", "mem0"):
                side = entry.get(key)
                if side is None:
                    continue
                m = side["memory"]
                rows.append(
                    (
                        side["system"],
                        _n(entry["size"]),
                        _mib(m["rss"]),
                        _mib(m["hwm"]),
                        _mib(side["disk"]["total"]),
                    )
                )
            if "ratios" in entry:
                x = entry["ratios"]
                rows.append(
                    ("Engram ÷ mem0", _n(entry["size"]), f"{x['rss']}×", f"{x['hwm']}×", f"{x['disk']}×")
                )
            side = entry.get("engram") or entry.get("serve")
            if side is not None:
                for name, v in list(side["disk"]["components"].items())[:10]:
                    disk_rows.append((f"{name} ({_n(entry['size'])})", f"{v['allocated'] / 1024 / 1024:.1f}"))
        parts += [
            "A fresh process per system notes the scenes through each one's public API with the same "
            "MiniLM ONNX embedder (mem0 with `infer=False` on its default local Qdrant), then runs the "
            "same reads; RSS is read from /proc, disk counts the allocated blocks of every file under "
            "each system's data dirs. `engram serve` rows measure a server opened on the data after the "
            "reads over HTTP.",
            table(["system", "scenes", "RSS MiB", "peak RSS MiB", "disk MiB"], rows),
            table(["Engram's disk, largest components", "MiB"], disk_rows),
        ]
    if "memory-soak" in results:
        r = results["memory-soak"]
        first = first or r
        p, s = r["plateau"], r["setup"]
        minute = max(1, round(60 / s["interval_s"]))
        samples = r["samples"][::minute]
        parts += [
            f"`engram bench memory -- soak`: `engram serve` under {s['writes_per_s']} notes/s and "
            f"{s['reads_per_s']} reads/s for {s['minutes']} minutes (its embedded worker patrols), RSS "
            f"every {s['interval_s']:.0f} s (one sample a minute shown). Plateau: "
            f"{'**yes**' if p['plateaued'] else '**no**'} — the median RSS of the last quarter is "
            f"{p['median_last_quarter_mib']} MiB against {p['median_third_quarter_mib']} MiB in the "
            f"quarter before ({p['growth_pct']:+.1f} %, threshold {p['threshold_pct']} %); over the "
            f"second half RSS moved {p['slope_second_half_mib_per_min']:+.2f} MiB a minute, while the "
            f"data grew (highest sample {p['max_mib']} MiB).",
            table(
                ["minute", "RSS MiB", "anonymous MiB", "notes written", "reads"],
                [(x["t_s"] // 60, x["rss_mib"], x["anon_mib"], x["notes"], x["reads"]) for x in samples],
            ),
        ]
    if first is None:
        return None
    if MEMORY_NOTES.exists():  # measured once, beside the unchanged code: history, not a rerun
        parts.append(MEMORY_NOTES.read_text(encoding="utf-8").strip())
    return _section("Memory and disk", "engram bench memory -- compare / soak", first, parts)


def locomo(r: Result) -> str:
    ds, cfg, ing = r["dataset"], r["config"], r["ingest"]
    ev = ds["evidence"]
    profiles: dict[str, Any] = r["profiles"]
    first = next(iter(profiles.values()))
    ks = list(first["overall"]["recall"])
    header = [
        "category",
        "n",
        "profile",
        *[f"R@{k}" for k in ks],
        *[f"H@{k}" for k in ks[-2:]],
        f"S@{ks[-1]}",
    ]
    header += ["p50 ms", "p95 ms"]
    order = [k for k in ("1", "2", "3", "4") if k in first["categories"]] + ["overall"]
    order += [k for k in first["categories"] if k not in ("1", "2", "3", "4", "5")]
    order += ["5"] if "5" in first["categories"] else []
    rows = []
    for key in order:
        for i, (name, p) in enumerate(profiles.items()):
            g = p["overall"] if key == "overall" else p["categories"].get(key)
            if g is None:
                continue
            label = ("**overall 1–4**" if key == "overall" else g["label"]) if i == 0 else ""
            if key == "5" and i == 0:
                label += " (apart)"
            bold = name == "default" and key != "5"
            rec = [
                f"**{g['recall'][k]:.3f}**" if bold and k in LOCOMO_GOALS else f"{g['recall'][k]:.3f}"
                for k in ks
            ]
            rows.append(
                [
                    label,
                    str(g["questions"]) if i == 0 else "",
                    f"**{name}**" if name == "default" else name,
                    *rec,
                    *[f"{g['hit'][k]:.3f}" for k in ks[-2:]],
                    f"{g['session_recall'][ks[-1]]:.3f}",
                    _ms(g["latency_ms"]["p50"]),
                    _ms(g["latency_ms"]["p95"]),
                ]
            )
    default = profiles.get("default", {}).get("overall")
    goal = ""
    if default:
        ok = all(default["recall"].get(k, 0) >= v for k, v in LOCOMO_GOALS.items())
        goal = (
            "Goal for the default profile over categories 1–4: "
            + ", ".join(f"R@{k} ≥ {v}" for k, v in LOCOMO_GOALS.items())
            + f": {_met(ok)}."
        )
    body = [
        f"`{Path(ds['path']).name}` (sha256 {ds['sha256'][:12]}…): {ds['conversations']} conversations, "
        f"{_n(ds['turns'])} turns, {_n(ds['questions'])} questions; evidence strings {_n(ev['strings'])}: "
        f"{_n(ev['clean'])} clean, {ev['repaired']} repaired, {ev['unparseable']} unparseable; ids dropped: "
        f"{ev['unknown_ids']} unknown, {ev['duplicate_ids']} duplicate; questions left without evidence "
        f"(unscored): {ev['questions_without_evidence']}. Embedder {cfg['embedder']} ({cfg['embedding_model']}), "
        f"no LLM, {cfg['storage']}; k = {cfg['k']}. Ingest: noting {ing.get('noting_s', '?')} s, patrol "
        f"{ing.get('patrol_s', '?')} s.",
        table(header, rows, "lrl" + "r" * (len(header) - 3)),
        "R@k: share of a question's evidence turns among the top k; H@k: at least one; S@k: share of its "
        "evidence sessions among the sessions of the top k; latency: the whole `query` call including "
        "the question's embedding. " + goal,
    ]
    if LOCOMO_NOTES.exists():
        body.append(LOCOMO_NOTES.read_text(encoding="utf-8").strip())
    body += locomo_links(r)
    return _section("LoCoMo retrieval", "engram bench locomo PATH --links", r, body)


def variant_table(
    variants: dict[str, Any], cats: Sequence[str], convs: Sequence[str], bold: str | None = None
) -> str:
    """One row per ranking variant: R@5, R@10, its interval, R@10 per category (– where a variant has
    no question of it) and per conversation."""
    header = ["variant", "R@5", "R@10", "±", *[f"R@10 c{c}" for c in cats], *convs]
    rows = [
        [
            f"**{name}**" if name == bold else name,
            f"{v['overall']['recall']['5']:.3f}",
            f"{v['overall']['recall']['10']:.3f}",
            f"{v['overall']['interval_10']:.3f}",
            *[_r10(v["categories"].get(c)) for c in cats],
            *[f"{v['conversations'][c]['recall']['10']:.3f}" for c in convs],
        ]
        for name, v in variants.items()
    ]
    return table(header, rows, "l" + "r" * (len(header) - 1))


def _r10(group: dict[str, Any] | None) -> str:
    return f"{group['recall']['10']:.3f}" if group else "–"


def locomo_logic(
    r: Result,
    title: str = "LoCoMo retrieval logic",
    command: str = "engram bench locomo-logic -- PATH --reuse-data DIR --links",
) -> str:
    """`engram bench locomo-logic`: retrieval variants beside the default on the same candidates
    (issue #15, ADRs 0082, 0083; with `--feedback`, the query side: ADRs 0090, 0091)."""
    variants: dict[str, Any] = r["variants"]
    cats = ("1", "2", "3", "4")
    convs = list(next(iter(variants.values()))["conversations"])
    chosen = ", ".join(f"{c}: {n}" for c, n in r.get("cross_validation", {}).items())
    body = [
        f"{r['dataset']['questions']} scored questions of `{Path(r['dataset']['path']).name}`; every "
        "variant ranks the same candidates in one run (`bench/locomo_tuning.py`); ± is the 95 % interval "
        "of R@10. The last row scores on each conversation the weight chosen on the other four: "
        f"{chosen}. What was kept and dropped: `docs/recall.md`.",
        variant_table(variants, cats, convs, bold="default"),
    ]
    paired = r.get("paired_gains", {})
    if paired:
        body.append(
            "Gain over the default it was measured beside, with its 95 % interval by a paired "
            "bootstrap over the questions:"
        )
        body.append(
            table(
                ["variant", "R@5 gain [interval]", "R@10 gain [interval]"],
                [
                    [n, *(f"{g[k][0]:+.4f} [{g[k][1]:+.4f}, {g[k][2]:+.4f}]" for k in ("5", "10"))]
                    for n, g in paired.items()
                ],
                "lrr",
            )
        )
    return _section(title, command, r, body)


def locomo_links(r: Result) -> list[str]:
    """The `+links` rows: `query` following the A-MEM links one hop (ADR 0063), and the dreaming
    that built them."""
    dreamt = r["ingest"].get("dreaming")
    if not dreamt:
        return []
    lpm = dreamt["links_per_memory"]
    profiles = r["profiles"]
    verdict = ""
    if "default" in profiles and "default+links" in profiles:
        plain, linked = profiles["default"], profiles["default+links"]
        gain = linked["overall"]["recall"]["10"] - plain["overall"]["recall"]["10"]
        multi = linked["categories"]["1"]["recall"]["10"] - plain["categories"]["1"]["recall"]["10"]
        verdict = (
            f" Following them changes the default profile's R@10 by {gain:+.3f} overall and {multi:+.3f} on "
            "multi-hop (category 1): "
            + (
                "both rise, so it may be on by default if the hop costs ≤ 2 ms p95 at 100k nodes."
                if gain > 0 and multi > 0
                else "it stays an option (`--links`, `ENGRAM_QUERY_LINKS`), off by default (ADR 0063)."
            )
        )
    return [
        f"`+links` rows: after ingest, dream ticks linked every memory to the others of its being at "
        f"cosine ≥ 0.7 ({dreamt['ticks']} ticks, {dreamt['dream_s']} s): {_n(dreamt['links'])} links, "
        f"{lpm['mean']} per memory on average (p50 {lpm['p50']}, p90 {lpm['p90']}, max {lpm['max']}; "
        f"{lpm['none']:.0%} with none); `query` then adds, after each of its top 3 hits, 2 of its "
        "linked memories, keeping k." + verdict
    ]


def dreaming_goals(results: dict[str, Result]) -> list[tuple[str, str, str]]:
    """Issue #12: a dreaming tick at 100k memories under 1 s, one hop of `query --links` ≤ 2 ms p95."""
    big = [s for s in results.get("dreaming", {}).get("sizes", []) if s["size"] >= 100_000]
    if not big:
        return []
    s = big[0]
    tick = max(s["tick_new"]["ms"], s["tick_cleanup"]["ms"])
    hop = s["expansion_ms"]["p95"]
    return [
        (
            f"dreaming tick at {_n(s['size'])} memories (linking {s['new']} new / cleaning {s['dead']} "
            "dead), no LLM: < 1 s",
            f"{_ms(tick)} ms (the slower)",
            _met(tick < 1000),
        ),
        (f"one hop along the links at {_n(s['size'])} memories: p95 ≤ 2 ms", f"{hop} ms", _met(hop <= 2)),
    ]


def dreaming(r: Result) -> str:
    rows = []
    for s in r["sizes"]:
        lpm = s["links_per_memory"]
        rows.append(
            [
                _n(s["size"]),
                f"{s['backlog']['s']} s / {s['backlog']['ticks']}",
                _ms(s["backlog"]["tick_ms_p50"]),
                f"{_ms(s['tick_new']['ms'])} ({s['new']})",
                _ms(s["tick_idle"]["ms"]),
                f"{_ms(s['tick_cleanup']['ms'])} ({s['dead']})",
                f"{lpm['mean']} / {lpm['p50']:g} / {lpm['p90']:g} / {lpm['max']} / {lpm['none']:.0%}",
                f"{s['expansion_ms']['p50']} / {s['expansion_ms']['p95']}",
            ]
        )
    body = [
        table(
            [
                "memories",
                "backlog linked / ticks",
                "tick p50 ms",
                "tick after new ms",
                "idle tick ms",
                "cleanup tick ms (died)",
                "links per memory mean / p50 / p90 / max / none",
                "one hop p50 / p95 ms",
            ],
            rows,
        ),
        "A tick links 100 memories (two vector searches each) and removes the links of 100 ended ones; "
        "goals (issue #12): a tick at 100k under 1 s excluding LLM calls, linking ∝ new memories (the "
        "tick after new memories about the same at 10k and 100k), and one hop of `query --links` within "
        "2 ms p95 at 100k nodes. Synthetic 384-dimension vectors in groups of ~20 (ADR 0062).",
    ]
    return _section("Dreaming", "engram bench dreaming", r, body)


def journal(results: dict[str, Result]) -> str | None:
    found = [results[k] for k in ("journal-sqlite", "journal-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    rows: list[tuple[Any, ...]] = []
    for r in found:
        backend = names.get(r["meta"]["backend"], r["meta"]["backend"])
        rows.append((backend, "full refresh", r["days"], f"{r['full_s']:.3f}", ""))
        rows.append((backend, "nothing new", 0, f"{r['noop_s']:.4f}", ""))
        rows += [
            (
                backend,
                f"+{_n(s['new'])} messages",
                s["days"],
                f"{s['refresh_s']:.3f}",
                f"{s['ms_per_new_message']:.3f}",
            )
            for s in r["increments"]
        ]
    first = found[0]
    return _section(
        "Journal refresh",
        "engram bench journal [--database-url postgresql://…]",
        first,
        [
            f"One being with {_n(first['messages'])} messages ({first['meta']['per_day']} a day, "
            f"{first['meta']['users']} users), taken 1,000 to a transaction; then the refresh of its daily "
            "files and MEMORY.md (`engram journal refresh`): everything, nothing new, and after each batch of "
            "new messages, which rewrites only the days they fell on (ADR 0054). Catching the view up is the "
            "worker's cost and is not counted.",
            table(["backend", "refresh", "days written", "seconds", "ms per new message"], rows),
            f"Goal: an incremental refresh under {JOURNAL_INCREMENT_GOAL_S:g} s, proportional to the new messages.",
        ],
    )


def embeddings_migrate(results: dict[str, Result]) -> str | None:
    """`engram embeddings migrate` beside the offline embedder's own rate (issue #13, ADR 0071)."""
    found = [
        results[k] for k in ("embeddings-migrate-sqlite", "embeddings-migrate-postgresql") if k in results
    ]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    rows = [
        (
            names.get(r["meta"]["backend"], r["meta"]["backend"]),
            _n(r["items"]),
            _n(r["embedder_per_s"]),
            _n(r["migration_per_s"]),
            " / ".join(f"{x:g}" for x in r.get("embedder_runs_s", [r["embedder_s"]])),
            f"{r['migration_s']:g}",
        )
        for r in found
    ]
    first = found[0]
    return _section(
        "Changing the embedding model",
        "engram bench embeddings-migrate [--database-url postgresql://…]",
        first,
        [
            f"{_n(first['per_kind']['node'])} nodes and {_n(first['per_kind']['note'])} notes embedded by the "
            f"hashing embedder, re-embedded with {first['model']} (`engram embeddings migrate --to offline`): "
            "embedding, the `Reembedded` events, the views' catch-up into the new collections and the switch "
            "(ADR 0071). Beside it, the embedder alone on the same texts in the same batches, before and after "
            "the migration: the migration is embedder-bound, its rate that of the embedder within the swing of "
            "the machine's load between the two runs.",
            table(
                [
                    "backend",
                    "items",
                    "embedder alone (texts/s, mean)",
                    "migration (items/s)",
                    "embedder alone before / after (s)",
                    "migration (s)",
                ],
                rows,
            ),
        ],
    )


def extraction(results: dict[str, Result]) -> str | None:
    """Fact extraction with an instant fake LLM (issue #11, ADR 0058)."""
    found = [results[k] for k in ("extraction-sqlite", "extraction-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    rows = [
        (
            names.get(r["backend"], r["backend"]),
            _n(r["messages"]),
            f"{r['seconds']:.1f}",
            f"{r['messages_per_s']:,.0f}",
            f"{r['facts_per_s']:,.0f}",
            ", ".join(f"{k} {v:.1%}" for k, v in r["rejected_share"].items()),
        )
        for r in found
    ]
    return _section(
        "Fact extraction",
        "engram bench extraction [--database-url postgresql://…]",
        found[0],
        [
            "One being, 50 users, every message a user's; a fake LLM answering at once with two candidates "
            "a message: the first grounded, the second in turns of ten grounded 4, not grounded 3, with an "
            "instruction 2, oversized 1. Timed: `run_until_done` (prompt, validation, guards, one "
            "transaction for a message's facts and record, the views caught up between rounds) and the "
            "facts view caught up after it.",
            table(
                ["backend", "messages", "seconds", "messages/s", "facts/s", "rejected (share of candidates)"],
                rows,
            ),
        ],
    )


# -- the page ----------------------------------------------------------------------------------------


MESSAGES_GOAL_PER_S = 2_000


def messages(results: dict[str, Result]) -> str | None:
    found = [results[k] for k in ("messages-sqlite", "messages-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    parts = list(found[0]["parts_s"])
    rows = [
        (
            names.get(r["meta"]["backend"], r["meta"]["backend"]),
            _n(r["intake_per_s"]),
            *(f"{r['parts_s'][p]:.1f} ({r['parts_s'][p] / r['intake_s']:.0%})" for p in parts),
            f"{r['views_s']['conversations']:.1f}",
            f"{r['views_s']['message_search']:.1f}",
            _n(r["with_views_per_s"]),
        )
        for r in found
    ]
    first = found[0]
    return _section(
        "Message intake",
        "engram bench messages [-- --database-url postgresql://…]",
        first,
        [
            f"A history of {_n(first['messages'])} chat messages of {first['users']} users imported as "
            f"`engram messages import` does it (parsed, validated, sorted by time, "
            f"{first['batch_size']} to a transaction; no embedding), {_n(first['events'])} events in all "
            "(a message's `Message.Received` and its conversation's `Heard`, and the sessions). The intake's "
            "seconds by part (the functions that do each part, timed); then each view that follows "
            "messages catching up on its own (the worker does it, after the intake's commits).",
            table(
                [
                    "backend",
                    "messages/s",
                    *(f"{p} (s)" for p in parts),
                    "conversations view (s)",
                    "message_search view (s)",
                    "with views (messages/s)",
                ],
                rows,
            ),
            f"Goal: ≥ {MESSAGES_GOAL_PER_S:,} messages/s through the intake (issue #10).",
            "`engram messages search` on the caught-up views, median of 5 runs (ADR 0055):",
            table(
                ["backend", "query", "filter", "ms", "hits"],
                [
                    (
                        names.get(r["meta"]["backend"], r["meta"]["backend"]),
                        f"`{x['query']}`",
                        " ".join(f"{k}={v}" for k, v in x["filters"].items()) or "–",
                        f"{x['median_ms']:.1f}",
                        x["hits"],
                    )
                    for r in found
                    for x in r.get("search", [])
                ],
                "lllrr",
            ),
        ],
    )


def notes_sweep(results: dict[str, Result]) -> str | None:
    found = [results[k] for k in ("notes-sweep-sqlite", "notes-sweep-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    rows = [
        (
            names.get(r["meta"]["backend"], r["meta"]["backend"]),
            _n(s["notes"]),
            _n(s["expired"]),
            s["batches"],
            f"{s['find_due_s']:.4f}",
            f"{s['sweep_s']:.3f}",
            f"{s['sweep_us_per_note']:.0f}",
        )
        for r in found
        for s in r["sizes"]
    ]
    ratios = [
        f"{names.get(r['meta']['backend'], '?')} {r['ratio']['sizes']}: whole sweep ×{r['ratio']['sweep']}, "
        f"per note expired ×{r['ratio']['per_note']} {_met(r['ratio']['per_note'] <= NOTES_SWEEP_RATIO_GOAL)}, "
        f"finding the due notes, per note ×{r['ratio']['find_due_per_note']}"
        for r in found
        if r.get("ratio")
    ]
    return _section(
        "Notes expiry sweep",
        "engram bench notes-sweep [--database-url postgresql://…]",
        found[0],
        [
            f"One sweep (`engram notes sweep`, the worker's) over notes spread across {found[0]['meta']['beings']} "
            f"beings, {found[0]['meta']['due']} of them due; every note due is one `Note.Expired` event "
            "written, 500 to a transaction. *find due* is every batch's read of the notes view's `notes_due` "
            "index alone. With a share due, ten times the notes hold ten times the notes to expire, so the "
            "goal compares the time per note expired (ADR 0048).",
            table(
                ["backend", "notes", "expired", "batches", "find due (s)", "sweep (s)", "µs per note"], rows
            ),
            f"Goal: the sweep at the larger size within {NOTES_SWEEP_RATIO_GOAL:g}× the smaller one, per note "
            "expired — " + "; ".join(ratios) + ".",
        ],
    )


def notes(results: dict[str, Result]) -> str | None:
    found = [results[k] for k in ("notes-sqlite", "notes-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}

    def cell(run: dict[str, Any], key: str) -> str:
        m = run.get(key)
        return f"{_ms(m['p50_ms'])} / {_ms(m['p95_ms'])}" if m else "—"

    rows = [
        (
            names.get(r.get("backend", "sqlite"), "?"),
            _n(run["notes"]),
            cell(run, "pack"),
            cell(run, "list"),
            cell(run, "list_tag"),
            cell(run, "pack_query"),
            f"{run['first_query_embeds_s']:.1f}" if "first_query_embeds_s" in run else "—",
        )
        for r in found
        for run in r["runs"]
    ]
    return _section(
        "Context pack and notes list",
        "engram bench notes [--database-url postgresql://…]",
        found[0],
        [
            "One being's notes (log, summary, rule, knowledge, todo; 5 % sensitive, 5 % expired on "
            "arrival, a tenth tagged `jobs`), the hashing embedder. `pack`: the 20 most recent live "
            "notes (`engram pack`); `list`: `engram notes list` (the 50 newest active notes); "
            "`list --tag`: the same filtered by a tag; `pack --query`: ranked by words and vectors, once "
            "every note is embedded (the first query, which embeds them when no worker did, is timed "
            "apart). p50 / p95 in ms, one call at a time through the Python API.",
            table(
                ["backend", "notes", "pack", "list", "list --tag", "pack --query", "first query (s)"],
                rows,
            ),
            f"Goal: pack and list p95 ≤ {NOTES_P95_GOAL_MS:g} ms at {_n(NOTES_GOAL_SIZE)} notes without a "
            "query (see *Goals*).",
        ],
    )


FACT_SEARCH_P95_GOAL_MS = 10.0  # fact search per profile, the query's vector given (#11)
FACT_SEARCH_RATIO_GOAL = 2.0  # t(100k) / t(10k)
FACT_PROFILES = ("hybrid", "blended", "trust")


def fact_search(results: dict[str, Result]) -> str | None:
    found = [results[k] for k in ("fact-search-sqlite", "fact-search-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    rows = [
        (
            names.get(r.get("backend", "sqlite"), "?"),
            _n(run["facts"]),
            *(f"{_ms(run[p]['p50_ms'])} / {_ms(run[p]['p95_ms'])}" for p in FACT_PROFILES),
        )
        for r in found
        for run in r["runs"]
    ]
    return _section(
        "Fact search",
        "engram bench fact-search [--database-url postgresql://…]",
        found[0],
        [
            "Facts in one space shared by two beings (6 words of a 3,000-word vocabulary each, a quarter "
            "with an entity ref, 1 % pinned), embedded ahead and the collection optimized as the worker "
            "does; `fact_search.search` with the query's vector given (the query's embedding excluded), "
            "limit 8, entity cards and the foundation included. p50 / p95 in ms, one call at a time "
            "through the Python API.",
            table(["backend", "facts", *FACT_PROFILES], rows),
            f"Goal: p95 ≤ {FACT_SEARCH_P95_GOAL_MS:g} ms per profile and t(100k)/t(10k) ≤ "
            f"{FACT_SEARCH_RATIO_GOAL:g} (see *Goals*).",
        ],
    )


def fact_search_goals(results: dict[str, Result]) -> list[tuple[str, str, str]]:
    rows = []
    for key, label in (("fact-search-sqlite", "SQLite"), ("fact-search-postgresql", "PostgreSQL")):
        runs = results.get(key, {}).get("runs", [])
        if not runs:
            continue
        big = runs[-1]
        p95 = max(big[p]["p95_ms"] for p in FACT_PROFILES)
        rows.append(
            (
                f"fact search at {_n(big['facts'])} facts: p95 ≤ {FACT_SEARCH_P95_GOAL_MS:g} ms per profile, {label}",
                f"{_ms(p95)} ms (the slowest profile)",
                _met(p95 <= FACT_SEARCH_P95_GOAL_MS),
            )
        )
        ratio = results[key].get("ratio_p95")
        if ratio:
            worst = max(ratio.values())
            rows.append(
                (
                    f"fact search t({_n(big['facts'])})/t({_n(runs[0]['facts'])}) ≤ "
                    f"{FACT_SEARCH_RATIO_GOAL:g}, {label}",
                    f"ratio {worst} (the largest)",
                    _met(worst <= FACT_SEARCH_RATIO_GOAL),
                )
            )
    return rows


def sessions(r: Result) -> str:
    rows = [
        (
            run["messages_per_session"],
            run["close"]["sessions"],
            f"{_ms(run['close']['median_ms'])} / {_ms(run['close']['p95_ms'])}",
            f"{_ms(run['summarize']['median_ms'])} / {_ms(run['summarize']['p95_ms'])}",
            f"{_ms(run['close_and_summarize']['median_ms'])} / {_ms(run['close_and_summarize']['p95_ms'])}",
            f"{_ms(run['extract']['median_ms'])} / {_ms(run['extract']['p95_ms'])}",
            run["spines"],
        )
        for run in r["runs"]
    ]
    return _section(
        "Session close and extractive summary",
        "engram bench sessions",
        r,
        [
            "SQLite, no LLM (the extractive method, ADR 0053); each session a conversation of its own. "
            "*close*: the worker's idle close of the session, the view caught up; *summarize*: the "
            "summariser's round for the being (the session summary, and a spine once 20 messages were "
            "said), the view caught up; *extract*: the extractive session summary alone. Median / p95 in "
            "ms per session.",
            table(
                ["messages", "sessions", "close", "summarize", "close + summarize", "extract", "spines"], rows
            ),
        ],
    )


def goals(results: dict[str, Result]) -> str | None:
    """One line per goal the issues set, with this run's figure and whether it was met."""
    rows: list[tuple[str, str, str]] = []
    for key, label in (("rebuild-sqlite", "SQLite"), ("rebuild-postgresql", "PostgreSQL")):
        if key in results:
            rate = results[key]["totals"]["sql"].get("events_per_s") or 0
            rows.append(
                (
                    f"rebuild into the SQL views ≥ {REBUILD_GOAL:,} events/s, {label}",
                    f"{rate:,}",
                    _met(rate >= REBUILD_GOAL),
                )
            )
    if "patrol" in results and results["patrol"].get("ratio"):
        r = results["patrol"]
        largest = r["sizes"][-1]["mechanical_median_s"]
        rows.append(
            (
                f"patrol, 1 % changing: < {PATROL_SECONDS_GOAL:g} s at {_n(r['sizes'][-1]['nodes'])} nodes",
                f"{largest:.2f} s",
                _met(largest < PATROL_SECONDS_GOAL),
            )
        )
        fixed = results.get("patrol-fixed", {}).get("ratio")
        if fixed:
            rows.append(
                (
                    f"patrol, a fixed number changing: t({fixed['sizes']}) ≤ {PATROL_RATIO_GOAL:g} (ADR 0013)",
                    f"ratio {fixed['mechanical']}",
                    _met(fixed["mechanical"] <= PATROL_RATIO_GOAL),
                )
            )
        rows.append(
            (
                f"patrol, 1 % changing: t({r['ratio']['sizes']}) ≤ {PATROL_RATIO_GOAL:g} read literally "
                "(≈ 10 for any cost in proportion to the changes, ADR 0013)",
                f"ratio {r['ratio']['mechanical']}",
                _met(r["ratio"]["mechanical"] <= PATROL_RATIO_GOAL),
            )
        )
    if "recall" in results:
        for rep in results["recall"]["reports"]:
            if rep["size"] != 100_000:
                continue
            for what in (
                "recall, vector given",
                "recall read path only (no write), vector given",
                "query k=10, vector given",
            ):
                p95 = _p95(rep["rows"], what=what, index="hnsw")
                if p95 is not None:
                    rows.append(
                        (
                            f"{what} at 100k (HNSW): p95 ≤ {RECALL_P95_GOAL_MS:g} ms",
                            f"{_ms(p95)} ms",
                            _met(p95 <= RECALL_P95_GOAL_MS),
                        )
                    )
    if "locomo" in results:
        default = results["locomo"]["profiles"].get("default", {}).get("overall")
        if default:
            got = " / ".join(f"{default['recall'][k]:.3f}" for k in LOCOMO_GOALS)
            ok = all(default["recall"][k] >= v for k, v in LOCOMO_GOALS.items())
            rows.append(("LoCoMo dev, default profile: R@5 ≥ 0.65, R@10 ≥ 0.75", got, _met(ok)))
    for key, label in (("messages-sqlite", "SQLite"), ("messages-postgresql", "PostgreSQL")):
        if key in results:
            r = results[key]
            rows.append(
                (
                    f"message intake, batched import of {_n(r['messages'])} messages: ≥ "
                    f"{MESSAGES_GOAL_PER_S:,} messages/s, {label}",
                    f"{_n(r['intake_per_s'])} messages/s",
                    _met(r["intake_per_s"] >= MESSAGES_GOAL_PER_S),
                )
            )
    for key, label in (("notes-sweep-sqlite", "SQLite"), ("notes-sweep-postgresql", "PostgreSQL")):
        ratio = results.get(key, {}).get("ratio")
        if ratio:
            rows.append(
                (
                    f"notes expiry sweep, 1 % due: t({ratio['sizes']}) per note expired ≤ "
                    f"{NOTES_SWEEP_RATIO_GOAL:g}, {label} (ADR 0048)",
                    f"ratio {ratio['per_note']}",
                    _met(ratio["per_note"] <= NOTES_SWEEP_RATIO_GOAL),
                )
            )
    for key, label in (("notes-sqlite", "SQLite"), ("notes-postgresql", "PostgreSQL")):
        big = [r for r in results.get(key, {}).get("runs", []) if r["notes"] >= NOTES_GOAL_SIZE]
        if big:
            p95 = max(big[0]["pack"]["p95_ms"], big[0]["list"]["p95_ms"])
            rows.append(
                (
                    f"context pack and notes list at {_n(big[0]['notes'])} notes: p95 ≤ "
                    f"{NOTES_P95_GOAL_MS:g} ms, {label}",
                    f"{_ms(p95)} ms (the larger)",
                    _met(p95 <= NOTES_P95_GOAL_MS),
                )
            )
    for key, label in (("journal-sqlite", "SQLite"), ("journal-postgresql", "PostgreSQL")):
        steps = results.get(key, {}).get("increments") or []
        if steps:
            worst = max(s["refresh_s"] for s in steps)
            rows.append(
                (
                    f"journal refresh at {_n(results[key]['messages'])} messages after "
                    f"{' / '.join(_n(s['new']) for s in steps)} new: < {JOURNAL_INCREMENT_GOAL_S:g} s, {label}",
                    f"{worst:.3f} s (the slowest)",
                    _met(worst < JOURNAL_INCREMENT_GOAL_S),
                )
            )
    rows += fact_search_goals(results)
    rows += dreaming_goals(results)
    if not rows:
        return None
    section = "## Goals\n\n" + table(["goal (from the issues)", "this run", ""], rows, "lrl")
    if EARLIER_RUNS.exists():  # the goals read one run on one machine; earlier runs say how far that holds
        section += "\n\n" + EARLIER_RUNS.read_text(encoding="utf-8").strip()
    return section


def _machine_line(results: dict[str, Result]) -> str:
    for r in results.values():
        m = r.get("machine") or r.get("meta")
        if m and m.get("cpu"):
            return (
                f"{m.get('cpus')} × {m.get('cpu')}, {m.get('memory_gib', '?')} GiB, {m.get('os', '?')}, "
                f"Python {m.get('python')}; "
                + ", ".join(f"{k} {v}" for k, v in (m.get("packages") or {}).items())
            )
    return "unknown"


def _p95(rows: list[Result], **match: Any) -> float | None:
    row = next((x for x in rows if all(x.get(k) == v for k, v in match.items())), None)
    return None if row is None else float(row["p95_ms"])


def deployment(results: dict[str, Result]) -> str:
    exact = hnsw = None
    if "vectors" in results:
        rows = results["vectors"]["rows"]
        exact = _p95(rows, size=100_000, engine="edge brute")
        hnsw = _p95(rows, size=100_000, engine="edge hnsw")
    search = (
        f" (filtered top-3 at 100k nodes per being: {_ms(exact)} ms p95 exact, {_ms(hnsw)} ms with HNSW)"
        if exact is not None and hnsw is not None
        else ""
    )
    query = "`query` at 100k is mostly"
    for rep in (results.get("recall") or {}).get("reports", []):
        row = next(
            (x for x in rep["rows"] if x["what"] == "query k=10, vector given" and x["index"] == "hnsw"), None
        )
        if rep["size"] == 100_000 and row is not None:
            query = f"`query` costs {_ms(row['p50_ms'])} ms (p50) at 100k, most of it"
    return "\n\n".join(
        [
            "## What the figures mean for a deployment",
            "- **Embedded default** (SQLite, Qdrant Edge, offline MiniLM; `engram serve` with its embedded "
            "worker): the CLI, `engram mcp` and the Python API work beside it on the same data directory, "
            "reaching the vector index through the process that owns it (ADR 0036). Exact vector search "
            "grows linearly with a "
            f"being's nodes{search}; the worker's maintenance builds the HNSW graph in a child process "
            "once a collection has grown by 10,000 points and swaps it in (searches wait for the swap: "
            "about a second at 100k points, several at 1M). Comfortable up to ~100k nodes per being and "
            f"a few hundred single notes/s (thousands batched); {query} bm25 over a being's common words "
            "and the vector search (ADR 0012, ADR 0014, ADR 0015; see *Recall and query latency*).",
            "- **PostgreSQL + a Qdrant server** (`ENGRAM_DATABASE_URL`, `ENGRAM_QDRANT_URL`): when several "
            "processes write or serve, when beings grow past ~100k nodes, or when projections must follow "
            "writes within tens of milliseconds (LISTEN/NOTIFY instead of polling). The server builds its "
            "HNSW in the background, with no swap pause.",
            "- Rebuilds (a new embedding model, a schema change) replay the log at the *Rebuild* rates with "
            "no embedding or LLM call; budget log size ÷ rate.",
        ]
    )


def facts_upsert(results: dict[str, Result]) -> str | None:
    """Issue #11 (helper A): one hot fact key from 8 writers, and `state_many` throughput."""
    found = [results[k] for k in ("facts-upsert-sqlite", "facts-upsert-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    rows = [
        (
            names.get(r["meta"]["backend"], r["meta"]["backend"]),
            f"{r['hot_key']['writers']} × {r['hot_key']['rounds']}",
            _n(r["hot_key"]["final_version"]),
            _n(r["hot_key"]["versions_lost"]),
            _n(r["hot_key"]["writes_failed"]),
            _n(r["batches"]["facts_per_s"]),
            f"{r['batches']['batch_ms']:.0f}",
        )
        for r in found
    ]
    first = found[0]
    return _section(
        "Fact upsert",
        "engram bench facts-upsert [-- --database-url postgresql://…]",
        first,
        [
            f"One memory key written by {first['hot_key']['writers']} writers at once (each its own Engram "
            "over one store, started at a barrier), each stating its own revisions; then "
            f"{_n(first['batches']['facts'])} distinct facts stated {first['batches']['batch_size']} to a "
            "transaction with `state_many`, each write followed by archive by capacity (ADR 0057).",
            table(
                [
                    "backend",
                    "writers × writes",
                    "versions",
                    "lost",
                    "failed",
                    "state_many facts/s",
                    "ms a batch",
                ],
                rows,
            ),
            "Goal: 0 versions lost (issue #11).",
        ],
    )


def audit_log(results: dict[str, Result]) -> str | None:
    """Issue #13 (helper F): the log's hash chain (ADR 0069) and a being's export/import (ADR 0070)."""
    found = [results[k] for k in ("audit-log-sqlite", "audit-log-postgresql") if k in results]
    if not found:
        return None
    names = {"sqlite": "SQLite", "postgres": "PostgreSQL"}
    rows = [
        (
            names.get(r["backend"], r["backend"]),
            f"{_n(r['ingest']['with_chain_per_s'])} / {_n(r['ingest']['without_chain_per_s'])}",
            f"{r['ingest']['cost_pct']}%",
            f"{_n(r['verify']['events_per_s'])} ({_n(r['verify']['events'])} events)",
            _n(r["transfer"]["export_per_s"]),
            _n(r["transfer"]["import_per_s"]),
            f"{r['transfer']['views_catch_up_s']}",
        )
        for r in found
    ]
    first = found[0]
    return _section(
        "Hash chain, verify, export and import",
        "engram bench audit-log [--backend postgres]",
        first,
        [
            "Ingest: `notes.take` per second with the chain sealed in each insert's transaction and with "
            f"sealing switched off, {first['ingest']['rounds']} interleaved rounds of "
            f"{first['ingest']['notes_per_round']} (medians). Verify: events per second recomputed and "
            f"compared (goal 50,000/s). Export/import: a being of {_n(first['transfer']['events'])} events "
            "written to a file, then read into a fresh deployment (every check, then 1,000 events a "
            "transaction), the views' catch-up apart. The ingest rounds alternate in one process on a shared "
            "machine: a difference of a few tens of percent either way is within its noise (a negative "
            "cost is noise).",
            table(
                [
                    "backend",
                    "notes/s with / without chain",
                    "ingest cost",
                    "verify events/s",
                    "export events/s",
                    "import events/s",
                    "views after import (s)",
                ],
                rows,
            ),
        ],
    )


def _locomo_and_models(results: dict[str, Result]) -> str | None:
    """LoCoMo, then its embedders and its ranking variants side by side (docs/recall.md), when their
    results are there."""
    from bench.page_context import render as render_context
    from bench.page_recall import render  # they import this module's helpers

    parts = [
        locomo(results["locomo"]) if "locomo" in results else None,
        render(results),
        locomo_logic(results["locomo-logic"]) if "locomo-logic" in results else None,
        render_context(results),
        locomo_logic(
            results["locomo-query-side"],
            "LoCoMo query side (second round)",
            "engram bench locomo-logic -- PATH --reuse-data DIR --feedback",
        )
        if "locomo-query-side" in results
        else None,
    ]
    return "\n\n".join(p for p in parts if p) or None


RENDERERS: tuple[tuple[str, Callable[[dict[str, Result]], str | None]], ...] = (
    ("event-size", lambda rs: event_size(rs["event-size"]) if "event-size" in rs else None),
    ("ingest", ingest),
    ("vectors", lambda rs: vectors(rs["vectors"]) if "vectors" in rs else None),
    ("rebuild", rebuild),
    ("lag", lag),
    ("patrol", patrol),
    ("recall", lambda rs: recall(rs["recall"]) if "recall" in rs else None),
    ("http", lambda rs: http(rs["http"]) if "http" in rs else None),
    ("cli", lambda rs: cli(rs["cli"]) if "cli" in rs else None),
    ("memory", memory),
    ("locomo", _locomo_and_models),
    ("messages", messages),
    ("notes-sweep", notes_sweep),
    ("notes", notes),
    ("fact-search", fact_search),
    ("journal", journal),
    ("sessions", lambda rs: sessions(rs["sessions"]) if "sessions" in rs else None),
    ("facts-upsert", facts_upsert),
    ("extraction", extraction),
    ("embeddings-migrate", embeddings_migrate),
    ("dreaming", lambda rs: dreaming(rs["dreaming"]) if "dreaming" in rs else None),
    ("audit-log", audit_log),
    ("erasure", lambda rs: erasure_page.erasure(rs, table, _section, _n)),
    ("erasure-items", lambda rs: erasure_items_page.erasure_items(rs, table, _section, _n)),
    ("keys-seal", lambda rs: keys_seal_page.keys_seal(rs, table, _section, _n)),  # ADR 0095
    ("ui", ui_section),
)


def render_page(results: dict[str, Result]) -> str:
    sections, missing = [], []
    for name, render in RENDERERS:
        section = render(results)
        if section is None:
            missing.append(name)
        else:
            sections.append(section)
    head = [
        "# Benchmarks",
        "<!-- Generated by `engram bench page`; edit bench/page.py or docs/bench/, not this file. -->",
        f"Machine: {_machine_line(results)}. Each section names the command that reproduces it and the "
        "load average around the run (the machine may be shared: figures from loaded minutes are lower "
        "bounds). Benchmarks are commands that print figures; no test is timed.",
        "The results behind this page are in `docs/bench/results/` (one JSON file per benchmark). "
        "Regenerate everything (≈ 30 min on 2 cores):\n\n```bash\n"
        "engram bench all --out docs/bench/results --database-url postgresql://… "
        "--locomo ../shared/bench/locomo-dev.json\n"
        "engram bench page docs/bench/results --out docs/benchmarks.md\n```",
    ]
    if missing:
        head.append("Not in this run: " + ", ".join(missing) + ".")
    summary = goals(results)
    # Measured once, the code before and after issues #7 and #8 side by side: history, not a rerun.
    renovation = [RENOVATION_NOTES.read_text(encoding="utf-8").strip()] if RENOVATION_NOTES.exists() else []
    return (
        "\n\n".join([*head, *([summary] if summary else []), *renovation, *sections, deployment(results)])
        + "\n"
    )
