"""Live views = rebuilt views = state replayed from the aggregates, for random command sequences."""

from __future__ import annotations

import contextlib
import json
import random
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import decay
from domain.being import Being
from domain.cluster import Cluster
from domain.embedding import Embedding
from domain.errors import DomainError
from domain.node import MemoryNode, NodeStatus, ReactivationSource
from domain.note import Note
from domain.scene import validate_scene_object
from services.bootstrap import Engram, bootstrap
from services.commands import NoteInput
from tests.support import SeededIds, SteppingClock, fresh_settings

NAMES = ["Aria", "Bo", "Cyd"]
# Repetition weights the draw towards the operations that change node state.
OPS = [
    "being",
    "note",
    "read",
    "sub",
    "move",
    "pin",
    "rename",
    "delete",
    "soul",
    "diary",
    "sync",
    *["node"] * 5,
    *["cycle"] * 3,
    *["flag"] * 4,
    *["dead"] * 3,
    *["absorb"] * 2,
    *["react"] * 3,
    *["revive"] * 3,
]
IMPORTANCE = [0.0, 0.02, 0.05, 0.06, 0.2, 0.5, 0.9, 1.0]
program = st.lists(
    st.tuples(st.sampled_from(OPS), st.integers(0, 1000), st.integers(0, 1000), st.sampled_from(IMPORTANCE)),
    min_size=15,
    max_size=60,
)


class World:
    def __init__(self, engram: Engram, seed: int) -> None:
        self.e = engram
        self.rng = random.Random(seed)
        self.beings: list[UUID] = []
        self.notes: list[UUID] = []
        self.nodes: list[UUID] = []
        self.clusters: list[UUID] = []
        for name in NAMES[:2]:
            self.run("being", NAMES.index(name), 0, 0.0)
            self.run("sub", len(self.beings) - 1, 1, 0.0)

    def pick(self, items: list[UUID], i: int) -> UUID | None:
        return items[i % len(items)] if items else None

    def pick_node(self, i: int, statuses: tuple[str, ...]) -> UUID | None:
        """Prefer nodes in a state where the operation can succeed; else any node (to exercise refusals)."""
        fitting = [n for n in self.nodes if self.e.store.get(MemoryNode, n).status in statuses]
        return self.pick(fitting if fitting and i % 5 else self.nodes, i)

    def now(self) -> Any:
        return self.e.clock.now()

    def save(self, *aggs: Any) -> None:
        self.e.store.save(*aggs)

    def run(self, op: str, a: int, b: int, x: float) -> None:
        e, get = self.e, self.e.store.get
        if op == "being":
            being, r1, r2 = Being.register(NAMES[a % len(NAMES)], self.now())
            if being.id not in self.beings:
                self.save(being, r1, r2)
                self.beings.append(being.id)
                self.clusters += [r1.id, r2.id]
        elif op == "note" and self.beings:
            being = self.pick(self.beings, a)
            text = (
                json.dumps({"action": f"did {b}", "actors": ["me"], "when": ["2026-01-02"]})
                if b % 3
                else f"prose {b}"
            )
            kind = ["scene", "todo", "rule"][b % 3]
            self.notes.append(UUID(e.notes.take(str(being), NoteInput(kind=kind, text=text)).note_id))
        elif op == "read" and self.notes:
            note = get(Note, self.pick(self.notes, a))
            note.mark_unread(self.now()) if note.read else note.mark_read(self.now())
            self.save(note)
        elif op == "node" and self.beings:
            being = get(Being, self.pick(self.beings, a))
            mine = [c for c in self.clusters if get(Cluster, c).being_id == being.id]
            cluster = get(Cluster, mine[b % len(mine)])
            if cluster.deleted:
                return
            scene = validate_scene_object(
                {
                    "action": f"node {b}",
                    "actors": ["me"],
                    "when": ["2026-01-03"],
                    "importance": round(x, 3),
                    "themes": [f"t{b % 4}"],
                }
            )
            node = MemoryNode.create(e.ids.new_id(), scene, cluster, being.cycle, self.now())
            node.embed(Embedding.from_floats("m", [self.rng.uniform(-1, 1) for _ in range(8)]), self.now())
            self.save(node)
            self.nodes.append(node.id)
        elif op == "sub" and self.beings:
            being = get(Being, self.pick(self.beings, a))
            parent = get(Cluster, being.root_ids["Business" if b % 2 else "Private"])
            sub = Cluster.create_sub(e.ids.new_id(), parent, f"topic {b}", self.now())
            self.save(sub)
            self.clusters.append(sub.id)
        elif op == "move" and self.nodes and self.clusters:
            node = get(MemoryNode, self.pick(self.nodes, a))
            same = [
                c
                for c in self.clusters
                if get(Cluster, c).being_id == node.being_id and not get(Cluster, c).deleted
            ]
            cluster = get(Cluster, self.pick(same if same and b % 5 else self.clusters, b))
            node.move_to(cluster, self.now())
            self.save(node)
        elif op == "pin" and self.nodes:
            node = get(MemoryNode, self.pick(self.nodes, a))
            node.unpin(self.now()) if node.pinned else node.pin(self.now())
            self.save(node)
        elif op == "cycle" and self.beings:
            being = get(Being, self.pick(self.beings, a))
            for _ in range(1 + b % 80):
                being.start_patrol_cycle(self.now())
            self.save(being)
        elif op in ("flag", "dead", "react", "revive") and self.nodes:
            wanted = {
                "flag": ("active",),
                "dead": ("dying",),
                "react": ("dying", "dead", "active"),
                "revive": ("dead",),
            }
            node = get(MemoryNode, self.pick_node(a, wanted[op]))
            cycle = get(Being, node.being_id).cycle
            if op == "flag":
                node.flag_dying(cycle, self.now())
            elif op == "dead":
                node.make_dead(cycle, "no partner", self.now())
            elif op == "react":
                node.reactivate(list(ReactivationSource)[b % 4], cycle, self.now())
            else:
                if node.status == NodeStatus.DEAD and not node.read_since_death and b % 2:
                    node.reactivate(ReactivationSource.RECALL_MEMORY, cycle, self.now())  # a recall, then ❺
                node.revive(cycle, self.now())
            self.save(node)
        elif op == "absorb" and len(self.nodes) > 1:
            survivor = get(MemoryNode, self.pick_node(a, ("active", "dying")))
            other = get(MemoryNode, self.pick_node(b, ("active", "dying")))
            survivor.absorb([other], get(Being, survivor.being_id).cycle, self.now())
            self.save(survivor, other)
        elif op in ("rename", "delete") and self.clusters:
            cluster = get(Cluster, self.pick(self.clusters, a))
            if op == "rename":
                cluster.rename(f"renamed {b}", self.now())
            else:
                members = [n for n in self.nodes if get(MemoryNode, n).cluster_id == cluster.id]
                if members:
                    return
                cluster.delete("empty", self.now())
            self.save(cluster)
        elif op == "soul" and self.beings:
            e.beings.define_soul(str(self.pick(self.beings, a)), f"soul {b}")
        elif op == "diary" and self.beings:
            e.beings.write_diary(str(self.pick(self.beings, a)), f"2026-02-{1 + b % 3:02d}", f"entry {b}")
        elif op == "sync":
            e.views.ensure()


def snapshot(e: Engram) -> dict[str, Any]:
    """Every row of every view, keyed by id, without bookkeeping columns that legitimately differ."""
    out: dict[str, Any] = {}
    for name, db in e.views.dbs.items():
        projection = e.views.projections[name]
        with db.read() as conn:
            from projections import engine

            for logical, physical in engine.read_tables(conn, db, projection).items():
                spec = next(s for s in projection.tables if s.name == logical)
                rows = [spec.normalise(r) for r in conn.query(f"SELECT * FROM {physical}")]
                out[logical] = {r[spec.key]: r for r in rows}
    return out


def expected_from_aggregates(e: Engram, w: World) -> dict[str, Any]:
    get = e.store.get
    nodes = {str(n): get(MemoryNode, n) for n in w.nodes}
    expected_nodes = {
        k: {
            "being_id": str(n.being_id),
            "cluster_id": str(n.cluster_id),
            "status": n.status,
            "fresh": n.fresh,
            "pinned": n.pinned,
            "importance": n.importance,
            "reactivation_count": n.reactivation_count,
            "last_activated_cycle": n.last_activated_cycle,
            "read_since_death": n.read_since_death,
            "dying_cycle": decay.dying_cycle(n.importance, n.last_activated_cycle),
            "absorbed_into": str(n.absorbed_into) if n.absorbed_into else None,
            "when_json": json.dumps(n.scene["when"], ensure_ascii=False),
            "version": n.version,
        }
        for k, n in nodes.items()
    }
    clusters = {}
    for c in map(lambda i: get(Cluster, i), w.clusters):
        if c.deleted:
            continue
        members = [n for n in nodes.values() if n.cluster_id == c.id]
        clusters[str(c.id)] = {
            "being_id": str(c.being_id),
            "name": c.name,
            "parent_id": str(c.parent_id),
            "is_root": c.is_root,
            "total_count": len(members),
            "active_count": sum(1 for n in members if n.status == NodeStatus.ACTIVE),
        }
    notes = {
        str(i): {"read": n.read, "parse_status": n.parse_status, "kind": n.kind}
        for i, n in ((i, get(Note, i)) for i in w.notes)
    }
    beings = {
        str(i): {"name": b.name, "cycle": b.cycle, "soul": b.soul}
        for i, b in ((i, get(Being, i)) for i in w.beings)
    }
    diary = {f"{i}:{d}": t for i in w.beings for d, t in get(Being, i).diary.items()}
    return {"nodes": expected_nodes, "clusters": clusters, "notes": notes, "beings": beings, "diary": diary}


def project(rows: dict[str, dict[str, Any]], fields: dict[str, Any]) -> dict[str, Any]:
    return {k: {f: rows[k][f] for f in next(iter(fields.values()), {})} for k in rows} if fields else {}


def check(backend: str, tmp_root: str, ops: list[tuple[str, int, int, float]], seed: int) -> None:
    with fresh_settings(backend, tmp_root) as s:
        e = bootstrap(s, clock=SteppingClock(), ids=SeededIds(seed))
        try:
            w = World(e, seed)
            for op in ops:
                with contextlib.suppress(DomainError):  # refused by an invariant: nothing was written
                    w.run(*op)
            e.views.ensure()
            live = snapshot(e)
            for name in e.views.names():
                e.views.rebuild(name)
            rebuilt = snapshot(e)
            assert live == rebuilt
            want = expected_from_aggregates(e, w)
            for table in ("nodes", "clusters", "notes", "beings"):
                got = {
                    k: {f: v[f] for f in next(iter(want[table].values()), {})} for k, v in live[table].items()
                }
                assert got == want[table], table
            assert {k: v["text"] for k, v in live["diary"].items()} == want["diary"]
        finally:
            e.close()


PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(ops=program, seed=st.integers(0, 10_000))
def test_live_rebuilt_and_replayed_agree(backend: str, tmp_path_factory: Any, ops: Any, seed: int) -> None:
    check(backend, str(tmp_path_factory.mktemp("eq")), ops, seed)
