"""Fault: one stored event that a view cannot apply (issue #7, item 1).

On PostgreSQL, a note whose text holds a NUL, which `text` refuses; on SQLite, which stores NUL, a
pin of a node whose creation the log does not hold. Both are written straight into the log, past
the intake. Expected: the views hold back that being's events only; another being writes and reads
as usual; the poisoned being's reads say its view is held back; `engram projections status` shows
the hold; `engram projections retry` leaves it held while the cause is there.

    .venv/bin/python scripts/faults/poison_event.py [--database-url URL]
"""

from __future__ import annotations

import json
from uuid import uuid4

from _harness import Checks, arguments, deployment, engram, opened


def poison(env: dict[str, str]) -> str:
    """Writes the poison for Aria; returns the view it stops."""
    from eventsourcing.persistence import StoredEvent

    from engram.domain.being import Being
    from engram.domain.cluster import Cluster
    from engram.domain.node import MemoryNode
    from engram.domain.note import Note
    from engram.domain.scene import validate_scene_object
    from engram.services.beings import resolve_being_id

    with opened(env) as e:
        aria = resolve_being_id(e.store, "Aria")
        if e.settings.database_url is not None:
            [noted] = Note.take(uuid4(), aria, "knowledge", "marker", e.clock.now()).collect_events()
            stored = e.store.app.mapper.to_stored_event(noted)
            state = stored.state.replace(b"marker", b"a NUL: \\u0000")
            e.store.app.recorder.insert_events(
                [StoredEvent(stored.originator_id, stored.originator_version, stored.topic, state)]
            )
            return "notes"
        root = e.store.get(Cluster, e.store.get(Being, aria).business_root_id)
        scene = validate_scene_object({"action": "never created", "actors": ["me"], "when": ["2026-01-01"]})
        node = MemoryNode.create(uuid4(), scene, root, 0, e.clock.now())
        node.pin(e.clock.now())
        _, pinned = node.collect_events()
        e.store.app.recorder.insert_events([e.store.app.mapper.to_stored_event(pinned)])
        return "memory"


def main() -> None:
    args = arguments(__doc__)
    checks = Checks()
    with deployment(args.database_url) as env:
        for name in ("Aria", "Bo"):
            engram(env, "being", "create", name)
            engram(
                env,
                "note",
                name,
                "--scene",
                '{"action": "fed the cat", "actors": ["me"], "when": ["2026-05-01"]}',
            )
            engram(env, "patrol", name)
        view = poison(env)

        scene = '{"action": "planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]}'
        wrote = engram(env, "note", "Bo", "--scene", scene)
        patrolled = engram(env, "patrol", "Bo")
        found = engram(env, "query", "Bo", "tomatoes", "--no-reactivate", "--json")
        ok = wrote.returncode == patrolled.returncode == found.returncode == 0 and "tomatoes" in found.stdout
        checks.check(
            ok, "another being writes, patrols and reads its new memory", found.stderr or patrolled.stderr
        )

        held = engram(env, "patrol", "Aria")
        checks.check(
            held.returncode != 0 and f"{view} view holds back this being's events" in held.stderr,
            f"the poisoned being's reads say the {view} view holds it back",
            held.stderr.strip(),
        )

        status = engram(env, "projections", "status", "--json")
        rows = {r["name"]: r for r in json.loads(status.stdout or "[]")}
        holds = rows.get(view, {}).get("holds", [])
        checks.check(
            len(holds) == 1 and holds[0]["error"] and holds[0]["position"] > 0,
            f"`projections status` shows the hold: {holds[0]['event_type']} at {holds[0]['position']}, "
            f"{holds[0]['error'][:60]}"
            if holds
            else "`projections status` shows the hold",
            status.stdout[-300:],
        )
        checks.check(all(r["last_error"] is None for r in rows.values()), "no view stopped: the others go on")

        retried = engram(env, "projections", "retry", "--json")
        results = json.loads(retried.stdout or "[]")
        checks.check(
            bool(results) and all(r["result"] != "applied" for r in results),
            "`projections retry` keeps the hold while the cause is there",
            retried.stdout[-300:],
        )
    checks.exit()


if __name__ == "__main__":
    main()
