#!/usr/bin/env python3
"""The memory explorer's pages at 100k nodes for one being (issue #14: each under 300 ms, server time).

Builds one being with `--nodes` nodes as the patrol benchmark does (`bench.patrol_bench.build`: 99%
of them in sub-clusters of ~100, last activations spread so that patrols flag some dying, some dead),
runs `--patrols` patrols without an LLM (patrol runs for the overview), then requests every page of
`PAGES` (and `--path` ones) `--runs` times through the ASGI app in this process, with an admin token:
median and p95 per page. A page that answers 404 (not built yet) is listed as skipped. The views are
caught up before timing, as a served explorer finds them (its worker follows the log); on PostgreSQL
the views' tables are vacuumed and analysed first, as autovacuum leaves them (`vacuum_views`).

    engram bench ui [--nodes 100000] [--runs 20] [--patrols 5] [--json] [--json-out FILE]
        [--database-url postgresql://…] [--path /ui/…]…   # {being}, {cluster}, {node}, {cycle} filled in
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL_MS = 300.0

PAGES = (
    "/ui/beings",
    "/ui/beings/{being}",
    "/ui/beings/{being}?before={cycle}",
    "/ui/beings/{being}/clusters/{cluster}",
    "/ui/beings/{being}/nodes/{node}",
    "/ui/beings/{being}/search?q=bench+scene",
    "/ui/log",
    "/ui/admin",
)
"""The explorer's pages; those other parts of #14 add are timed once they exist (404: skipped)."""


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def vacuum_views(base_url: str, scoped_url: str) -> None:
    """`VACUUM ANALYZE` the views' tables of the scratch schema: what autovacuum does to a served
    database after a bulk load. Without it PostgreSQL's first minutes after the build read the
    heap for every index entry (no visibility map yet): at 30k nodes the overview took 91 ms
    before and 35 ms after."""
    import psycopg

    schema = scoped_url.rsplit("schema=", 1)[1]
    with psycopg.connect(base_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE 'v\\_%%'", [schema]
        ).fetchall()
        for (table,) in rows:
            conn.execute(f'VACUUM ANALYZE "{schema}"."{table}"')


def time_pages(client: Any, paths: list[str], token: str, runs: int) -> list[dict[str, Any]]:
    """Each path `runs` times after one warm-up request: its status and the median and p95 in ms."""
    headers = {"Authorization": f"Bearer {token}"}
    rows = []
    for path in paths:
        first = client.get(path, headers=headers)
        if first.status_code == 404:
            rows.append({"path": path, "status": 404, "skipped": True})
            continue
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            response = client.get(path, headers=headers)
            samples.append((time.perf_counter() - started) * 1000)
        rows.append(
            {
                "path": path,
                "status": response.status_code,
                "bytes": len(response.content),
                "runs": runs,
                "median_ms": round(statistics.median(samples), 2),
                "p95_ms": round(percentile(samples, 0.95), 2),
                "max_ms": round(max(samples), 2),
            }
        )
    return rows


def run(nodes: int, runs: int, patrols: int, database_url: str | None, extra: list[str]) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from bench.machine import machine_info
    from bench.patrol_bench import build, dying_per_cycle, quiet, settings_for
    from bench.scratch import scratch_schema
    from engram.adapters.http import HttpSettings, create_app
    from engram.services.bootstrap import bootstrap
    from engram.services.tokens import TokenService

    quiet()
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="engram-bench-ui-") as tmp:
        scoped = scratch_schema(database_url) if database_url else None
        url = scoped.__enter__() if scoped is not None else None
        try:
            with bootstrap(settings_for(Path(tmp), url, "hashing")) as engram:
                print(f"building {nodes:,} nodes, then {patrols} patrols…", file=sys.stderr)
                started = time.perf_counter()
                being_id, _, _ = build(engram, nodes, dying_per_cycle(nodes, "1%"))
                for _ in range(patrols):
                    engram.patrol(str(being_id))
                engram.views.ensure()
                if url is not None and database_url is not None:
                    vacuum_views(database_url, url)
                build_s = time.perf_counter() - started
                print(f"built {nodes:,} nodes and {patrols} patrols in {build_s:.1f} s", file=sys.stderr)
                read = engram.views.read
                being = read.being(being_id) or {}
                topic = next(c for c in read.clusters(being_id) if not c["is_root"])
                node = read.nodes(being_id, limit=1)[0]
                fill = {
                    "being": str(being_id),
                    "cluster": topic["id"],
                    "node": node["id"],
                    "cycle": max(1, int(being.get("cycle") or 1) - 2),
                }
                token = TokenService(engram).issue(admin=True).token
                app = create_app(engram, settings=HttpSettings(), warm_up=False)
                with TestClient(app, follow_redirects=False) as client:
                    pages = time_pages(client, [p.format(**fill) for p in (*PAGES, *extra)], token, runs)
        finally:
            if scoped is not None:
                scoped.__exit__(None, None, None)
    return {
        "benchmark": "ui",
        "backend": "postgresql" if database_url else "sqlite",
        "machine": machine,
        "nodes": nodes,
        "patrols": patrols,
        "build_s": round(build_s, 1),
        "goal_ms": GOAL_MS,
        "vacuumed": database_url is not None,
        "pages": [{**p, "path": _placeholders(p["path"], fill)} for p in pages],
    }


def _placeholders(path: str, fill: dict[str, Any]) -> str:
    for key in ("being", "cluster", "node"):
        path = path.replace(str(fill[key]), "{" + key + "}")
    return path


def main() -> None:
    from bench.machine import finish

    parser = argparse.ArgumentParser(prog="engram bench ui", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20, help="requests per page (after one warm-up)")
    parser.add_argument("--patrols", type=int, default=5)
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--path", action="append", default=[], help="another page to time")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    result = run(args.nodes, args.runs, args.patrols, args.database_url, args.path)
    finish(result, args.json_out)
    print(json.dumps(result, indent=2) if args.json else render(result))


def render(r: dict[str, Any]) -> str:
    """The result as a Markdown table (the benchmarks page and the command's own output)."""
    lines = ["| page | status | median ms | p95 ms | under goal |", "|---|---|--:|--:|---|"]
    for p in r["pages"]:
        if p.get("skipped"):
            lines.append(f"| `{p['path']}` | 404 (not built) | | | |")
            continue
        ok = "yes" if p["p95_ms"] < r["goal_ms"] else "**no**"
        lines.append(f"| `{p['path']}` | {p['status']} | {p['median_ms']:.1f} | {p['p95_ms']:.1f} | {ok} |")
    return "\n".join(lines)


def section(results: dict[str, dict[str, Any]]) -> str | None:
    """`bench/page.py`'s section: one table per backend."""
    from bench.page import _when  # bench.page imports this module

    found = [results[k] for k in ("ui-sqlite", "ui-postgresql") if k in results]
    if not found:
        return None
    first = found[0]
    body = [
        "## Memory explorer pages",
        f"`engram bench ui [-- --database-url postgresql://…]` — {_when(first)}",
        f"Each page of the explorer (`/ui`, issue #14) requested {first['pages'][0].get('runs', '?')} times "
        f"through the ASGI app in-process, with an admin token, for one being of {first['nodes']:,} nodes "
        f"after {first['patrols']} patrol(s); the goal is {first['goal_ms']:.0f} ms of server time per page. "
        "Pages not built yet answer 404 and are skipped.",
    ]
    for r in found:
        name = "PostgreSQL" if r["backend"] == "postgresql" else "SQLite"
        if r["backend"] == "postgresql":
            name += (
                " (views vacuumed and analysed after the bulk load, as autovacuum leaves them)"
                if r.get("vacuumed")
                else " (measured right after the bulk load, before any vacuum)"
            )
        body += [f"**{name}**", render(r)]
    return "\n\n".join(body)


if __name__ == "__main__":
    main()
