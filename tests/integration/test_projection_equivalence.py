"""Live views = rebuilt views = state replayed from the aggregates, for random command sequences."""

from __future__ import annotations

import contextlib
import json
import random
from collections import defaultdict
from typing import Any
from uuid import UUID

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.domain import decay
from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.errors import DomainError
from engram.domain.node import MemoryNode, NodeStatus, ReactivationSource
from engram.domain.note import Note
from engram.domain.scene import validate_scene_object
from engram.projections import engine
from engram.projections.vectors import centroids_alias, nodes_alias
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput
from tests.support import SeededIds, SteppingClock, fresh_settings

NAMES = ["Aria", "Bo", "Cyd"]
MODEL = "m"  # every node of the World is embedded with this model, 8 dimensions
# Repetition weights the draw towards the operations that change node state; "sync" catches the views up
# mid-way, so live processing applies the log in several batches (and materialises intermediate states,
# e.g. a centroid that later loses its last active node).
OPS = [
    "being",
    "note",
    "read",
    "sub",
    "move",
    *["pin"] * 2,
    "rename",
    "delete",
    "soul",
    "diary",
    *["sync"] * 3,
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
            node.embed(Embedding.from_floats(MODEL, [self.rng.uniform(-1, 1) for _ in range(8)]), self.now())
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
        elif op == "crash":
            self.crash(1 + b % 7)

    def crash(self, limit: int) -> None:
        """The vector view dies after its index writes, before its commit, catching up in batches of
        `limit` events (a cut live processing with its usual batches does not make): the index is
        then ahead of the view, which replays those events, cut its own way, at the next catch-up."""
        view = self.e.views.vectors_view

        def crashing(batch: Any) -> None:
            type(view).before_commit(view, batch)
            raise _Crash

        view.before_commit = crashing  # type: ignore[method-assign]
        try:
            engine.catch_up(self.e.views.dbs["vectors"], view, self.e.views.source, limit=limit)
        except _Crash:
            pass
        finally:
            del view.before_commit


class _Crash(Exception):
    pass


def snapshot(e: Engram) -> dict[str, Any]:
    """Every row of every view, keyed by id, without bookkeeping columns that legitimately differ."""
    out: dict[str, Any] = {}
    for name, db in e.views.dbs.items():
        projection = e.views.projections[name]
        with db.read() as conn:
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


Vectors = dict[str, dict[str, tuple[dict[str, Any], np.ndarray[Any, Any]]]]


def vector_contents(e: Engram, w: World) -> Vectors:
    """Every point of the node and centroid collections behind the aliases: id -> (payload, vector).

    Points are read by id, being by being (the index has no unscoped read); the collection's total
    count must match, so a stray point (of an id the World never made) cannot hide.
    """
    index, get = e.views.vector_index, e.store.get
    out: Vectors = {}
    for kind, alias, ids, cls in (
        ("nodes", nodes_alias(MODEL), w.nodes, MemoryNode),
        ("centroids", centroids_alias(MODEL), w.clusters, Cluster),
    ):
        found: dict[str, tuple[dict[str, Any], np.ndarray[Any, Any]]] = {}
        if index.resolve_alias(alias) is not None:
            by_being: dict[UUID, list[UUID]] = defaultdict(list)
            for i in ids:
                by_being[get(cls, i).being_id].append(i)  # type: ignore[attr-defined]
            for being_id, mine in by_being.items():
                for point in index.retrieve(alias, being_id, mine, with_vectors=True):
                    assert point.vector is not None
                    found[str(point.id)] = (dict(point.payload), np.asarray(point.vector, dtype=np.float64))
            assert index.count(alias) == len(found), f"{alias} holds points of unknown ids"
        out[kind] = found
    return out


def _unit(v: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    norm = float(np.linalg.norm(v))
    assert norm > 0
    return v / norm


def _floats(n: MemoryNode) -> np.ndarray[Any, Any]:
    assert n.embedding is not None
    return np.asarray(n.embedding.floats(), dtype=np.float64)


def check_vectors_against_aggregates(e: Engram, w: World, got: Vectors) -> None:
    """Node points carry the aggregate's state and vector; centroids are the mean of the active nodes."""
    get = e.store.get
    embedded = [n for n in (get(MemoryNode, i) for i in w.nodes) if n.embedding is not None]
    assert set(got["nodes"]) == {str(n.id) for n in embedded}
    for n in embedded:
        payload, vector = got["nodes"][str(n.id)]
        want = {
            "being_id": str(n.being_id),
            "status": n.status,
            "cluster_id": str(n.cluster_id),
            "fresh": n.fresh,
            "pinned": n.pinned,
        }
        assert {k: payload[k] for k in want} == want, n.id
        cosine = float(_unit(vector) @ _unit(_floats(n)))
        assert cosine > 0.9999, n.id
    expected: dict[str, tuple[Cluster, list[MemoryNode]]] = {}
    for c in (get(Cluster, i) for i in w.clusters):
        active = [m for m in embedded if m.cluster_id == c.id and m.status == NodeStatus.ACTIVE]
        if active:
            assert not c.deleted
            expected[str(c.id)] = (c, active)
    assert set(got["centroids"]) == set(expected), "a centroid exactly for each cluster with active vectors"
    for cid, (c, active) in expected.items():
        payload, vector = got["centroids"][cid]
        mean = np.mean([_floats(m) for m in active], axis=0)
        assert np.max(np.abs(_unit(vector) - _unit(mean))) < 1e-4, cid
        want_payload = {
            "being_id": str(c.being_id),
            "count": len(active),
            "parent_id": str(c.parent_id),
            "is_root": c.is_root,
        }
        assert {k: payload[k] for k in want_payload} == want_payload, cid


def assert_same_vectors(live: Vectors, rebuilt: Vectors) -> None:
    """Same points, vectors and payloads; `position` aside: it is the last event of the batch that
    wrote the point, and live processing and a rebuild cut the log into different batches
    (`check_positions` holds each of them to what that guard needs)."""
    for kind in ("nodes", "centroids"):
        assert set(live[kind]) == set(rebuilt[kind]), kind
        for i, (payload, vector) in live[kind].items():
            other_payload, other_vector = rebuilt[kind][i]
            assert _state(payload) == _state(other_payload), (kind, i)
            assert np.allclose(vector, other_vector, rtol=0, atol=1e-6), (kind, i)


def _state(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k != "position"}


def check_positions(e: Engram, rows: dict[str, Any], got: Vectors) -> None:
    """A point's `position` lies between the event that last changed it (its SQL row's position) and
    the view's tracking position: the state it holds is its state as of its position, so a replayed
    batch (equal or greater position) may rewrite it and nothing older can."""
    tracked = e.views.positions(["vectors"])["vectors"]
    for kind, table in (("nodes", "vector_nodes"), ("centroids", "centroids")):
        for i, (payload, _) in got[kind].items():
            key = i if kind == "nodes" else f"{i}:{MODEL}"
            assert rows[table][key]["position"] <= payload["position"] <= tracked, (kind, i)


def check(
    backend: str, tmp_root: str, ops: list[tuple[str, int, int, float]], seed: int, batch: int = 500
) -> None:
    with fresh_settings(backend, tmp_root, projection_batch_size=batch) as s:
        e = bootstrap(s, clock=SteppingClock(), ids=SeededIds(seed))
        try:
            w = World(e, seed)
            for op in ops:
                with contextlib.suppress(DomainError):  # refused by an invariant: nothing was written
                    w.run(*op)
            e.views.ensure()
            live = snapshot(e)
            live_vectors = vector_contents(e, w)
            check_positions(e, live, live_vectors)
            for name in e.views.names():
                e.views.rebuild(name)
            rebuilt = snapshot(e)
            assert live == rebuilt
            rebuilt_vectors = vector_contents(e, w)
            check_positions(e, rebuilt, rebuilt_vectors)
            assert_same_vectors(live_vectors, rebuilt_vectors)
            check_vectors_against_aggregates(e, w, live_vectors)
            check_vectors_against_aggregates(e, w, rebuilt_vectors)
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
    max_examples=20,  # ~1-3 s each (a fresh deployment, its vector collections, every view rebuilt)
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(ops=program, seed=st.integers(0, 10_000), batch=st.sampled_from([3, 16, 500]))
def test_live_rebuilt_and_replayed_agree(
    backend: str, tmp_path_factory: Any, ops: Any, seed: int, batch: int
) -> None:
    """`batch` (events per view transaction) varies how live processing and the rebuild cut the log."""
    check(backend, str(tmp_path_factory.mktemp("eq")), ops, seed, batch)


crashing_program = st.lists(
    st.tuples(
        st.sampled_from([*OPS, *["crash"] * 4]),
        st.integers(0, 1000),
        st.integers(0, 1000),
        st.sampled_from(IMPORTANCE),
    ),
    min_size=15,
    max_size=60,
)


@settings(PROPERTY, max_examples=10)
@given(ops=crashing_program, seed=st.integers(0, 10_000), batch=st.sampled_from([3, 16, 500]))
def test_vector_writes_replayed_after_a_crash_agree(
    backend: str, tmp_path_factory: Any, ops: Any, seed: int, batch: int
) -> None:
    """The vector view's index writes run ahead of its commit, then are replayed in other batches
    (older and newer stamps, payload patches over points the crashed batches wrote): live, rebuilt and
    replayed views still agree."""
    check(backend, str(tmp_path_factory.mktemp("eq")), ops, seed, batch)
