"""Fault: reads that reactivate nodes, eight at a time, and a view that really is ahead of the log
(issue #7, item 2).

`engram serve` (with its embedded worker) answers rounds of eight concurrent `query` calls that
reactivate nodes: expected, every call answers, no view is rebuilt and none is taken for ahead of
the log. Then, on SQLite, a power cut is played (the log loses its last commit after the views
applied it, and a new note takes its position): a read of the notes view fails with `view_diverged`
and rebuilds nothing; `engram worker --once` rebuilds it. (PostgreSQL never gives a position twice.)

    .venv/bin/python scripts/faults/view_ahead_race.py [--database-url URL]
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import httpx
from _harness import Checks, arguments, deployment, engram, serving

WORDS = ["garden", "river", "bread", "violin", "chess", "tomatoes", "Mina", "oven"]


def generations(env: dict[str, str]) -> dict[str, int]:
    status = engram(env, "projections", "status", "--json")
    return {r["name"]: r["generation"] for r in json.loads(status.stdout)}


def main() -> None:
    args = arguments(__doc__)
    checks = Checks()
    with deployment(args.database_url) as env:
        engram(env, "being", "create", "Aria")
        scenes = Path(env["ENGRAM_DATA_DIR"]) / "scenes.jsonl"
        scenes.write_text(
            "".join(
                json.dumps(
                    {
                        "action": f"{WORDS[i % 8]} and {WORDS[(3 * i) % 8]} #{i}",
                        "actors": ["me"],
                        "when": ["2026-05-01"],
                    }
                )
                + "\n"
                for i in range(60)
            )
        )
        engram(env, "note", "Aria", "--file", str(scenes))
        engram(env, "patrol", "Aria")
        before = generations(env)

        answers: list[int] = []
        failures: list[str] = []
        with serving(env) as server:

            def reader(i: int) -> None:
                for j in range(6):
                    text = f"{WORDS[(i + j) % 8]} {WORDS[(i * j) % 8]}"
                    r = httpx.post(
                        f"{server.url}/v1/beings/Aria/query", json={"query": text, "k": 5}, timeout=60
                    )
                    answers.append(r.status_code)
                    if r.status_code != 200:
                        failures.append(r.text[:200])

            threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            log = server.log()
        checks.check(
            answers == [200] * 48, "48 reactivating queries, eight at a time, all answered", str(failures[:2])
        )
        checks.check("ahead of the log" not in log, "no view was taken for ahead of the log", log[-500:])
        checks.check(generations(env) == before, "no view was rebuilt", str(generations(env)))

        if args.database_url is None:
            with sqlite3.connect(Path(env["ENGRAM_DATA_DIR"]) / "events.sqlite3") as conn:  # the power cut
                conn.execute("DELETE FROM stored_events WHERE rowid = (SELECT max(rowid) FROM stored_events)")
            for text in ("after the cut", "and one more"):
                engram(env, "note", "Aria", "--kind", "todo", "--text", text)
            with serving(env, "--no-worker") as server:
                r = httpx.get(f"{server.url}/v1/beings/Aria/notes", timeout=60)
                health = httpx.get(f"{server.url}/v1/health", timeout=60).json()
            checks.check(
                r.status_code == 503 and r.json().get("code") == "view_diverged",
                "a read of a view ahead of the log fails with view_diverged",
                r.text[:300],
            )
            checks.check(
                any(v["last_error"] == "LogDiverged" for v in health["views"]),
                "/v1/health shows it",
                str(health),
            )
            checks.check(generations(env)["notes"] == before["notes"], "the read rebuilt nothing")
            engram(env, "worker", "--once")
            after = json.loads(engram(env, "projections", "status", "--json").stdout)
            notes = next(r for r in after if r["name"] == "notes")
            checks.check(
                notes["generation"] > before["notes"] and notes["last_error"] is None,
                "`engram worker --once` rebuilt it",
                str(notes),
            )
    checks.exit()


if __name__ == "__main__":
    main()
