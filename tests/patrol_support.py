"""Shared fakes and helpers for the patrol tests: a scripted LLM, scenes, prompt parsing, child processes.

`ScriptedLLM` implements the `services.ports.LLM` port the way the real adapters behave towards
patrol: a dict answer is validated with the task's pydantic schema (an answer that does not validate
raises `LLMMalformedAnswer` with the raw text, as the adapters do), a string is a raw answer that is
parsed and validated the same way, and an exception (e.g. `LLMTransientError`, what an adapter raises
once its own bounded retries are spent) is raised. Every call is recorded.
"""

from __future__ import annotations

import json
import math
import random
import re
import string
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID, uuid4

from pydantic import BaseModel, ValidationError

from engram.domain.being import Being
from engram.domain.cluster import Cluster
from engram.domain.embedding import Embedding
from engram.domain.ids import patrol_run_id
from engram.domain.node import MemoryNode
from engram.domain.patrol_run import PatrolRun
from engram.domain.scene import validate_scene_object
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.patrol.grouping import classify_root_fallback
from engram.services.ports import LLMAnswer, LLMMalformedAnswer, ModelClass
from engram.services.thresholds import thresholds_for

T = TypeVar("T", bound=BaseModel)

Reply = Mapping[str, Any] | str | BaseException | type[BaseException]
"""What the model "says": a dict (validated), a raw string (parsed, then validated), or an error."""


@dataclass(frozen=True)
class Memory:
    """One `<memory …>` line of a prompt (see `services.patrol.prompts._node_lines`)."""

    id: str
    flags: frozenset[str]
    importance: float
    action: str
    when: list[Any]

    @property
    def dying(self) -> bool:
        return "dying" in self.flags

    @property
    def fresh(self) -> bool:
        return "fresh" in self.flags

    @property
    def pinned(self) -> bool:
        return "pinned" in self.flags


_MEMORY = re.compile(r'<memory id="([^"]*)" flags="([^"]*)" importance="([^"]*)">when=')


def parse_memories(prompt: str) -> list[Memory]:
    """The memories a prompt shows, with their ids exactly as the model sees them."""
    decoder = json.JSONDecoder()
    out = []
    for m in _MEMORY.finditer(prompt):
        when, end = decoder.raw_decode(prompt, m.end())
        assert prompt.startswith(" action=", end), prompt[end : end + 40]
        action, _ = decoder.raw_decode(prompt, end + len(" action="))
        out.append(Memory(m.group(1), frozenset(m.group(2).split(",")), float(m.group(3)), action, when))
    return out


@dataclass(frozen=True)
class Call:
    """One `complete` call as the LLM saw it."""

    task: str
    system: str
    prompt: str
    model_class: ModelClass
    schema: type[BaseModel]

    @property
    def memories(self) -> list[Memory]:
        return parse_memories(self.prompt)

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.memories]

    def id_of(self, action: str) -> str:
        """The id of the one memory whose action is `action` (or starts with it)."""
        found = [m.id for m in self.memories if m.action == action] or [
            m.id for m in self.memories if m.action.startswith(action)
        ]
        assert len(found) == 1, f"{len(found)} memories match {action!r} in the {self.task} prompt"
        return found[0]


Responder = Callable[[Call], Reply]
Script = Reply | Responder | Sequence[Reply | Responder]


def _neutral_classify(call: Call) -> Reply:
    action = call.prompt.rsplit("<memory>", 1)[-1].removesuffix("</memory>")
    return {"root": classify_root_fallback(action)}


def _neutral_name(call: Call) -> Reply:
    first = call.memories[0].action if call.memories else "topic"
    return {"name": " ".join(first.split()[:3])}


GOOD_DIARY: dict[str, Any] = {
    "diary": "I met old friends today.\nThe ridge was cold but clear.\nI want to go back soon.",
    "think_md": ["Lena climbs faster now", "Bring a warmer jacket", "Bake bread on Sunday"],
}

NEUTRAL: dict[str, Script] = {
    "classify_root": _neutral_classify,
    "name_cluster": _neutral_name,
    "consolidate_cluster": {"merges": [], "make_dead": []},
    "split_cluster": {"groups": []},
    "write_diary": GOOD_DIARY,
}
"""Answers that change nothing beyond what patrol does mechanically (no repair: tests script it)."""


def merge_first_two(call: Call) -> dict[str, Any]:
    """❹: the first memory shown absorbs the second (pinned and dying ones aside); nothing is made dead.

    Dying nodes stay dying, so a decided cluster still holds nodes that ❹ looks at: a resumed patrol
    must skip it because its decision is recorded, not because nothing is left to decide."""
    live = [m for m in call.memories if not m.pinned and not m.dying]
    if len(live) < 2:
        return {"merges": [], "make_dead": []}
    return {
        "merges": [{"survivor": live[0].id, "absorbed": [live[1].id], "reason": "scripted"}],
        "make_dead": [],
    }


class UnexpectedCall(AssertionError):
    """The scripted LLM was asked something the test did not expect (not an `LLMError`: patrol must crash)."""


class ScriptedLLM:
    """An `LLM` whose answers a test scripts per task.

    `script[task]` is one reply (given on every call), a responder `f(call) -> reply`, or a sequence
    of replies/responders used one per call; when a sequence runs out, or a task is not scripted,
    `fallback[task]` answers (by default `NEUTRAL`), and without one the call raises `UnexpectedCall`.
    """

    def __init__(
        self,
        script: Mapping[str, Script] | None = None,
        *,
        fallback: Mapping[str, Script] | None = None,
        name: str = "scripted",
    ) -> None:
        self.script: dict[str, Script] = dict(script or {})
        self.fallback: dict[str, Script] = dict(NEUTRAL if fallback is None else fallback)
        self.name = name
        self.calls: list[Call] = []
        self._queues: dict[str, deque[Reply | Responder]] = {}
        self._mutex = threading.Lock()

    # -- the port -------------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return True

    def describe(self) -> str:
        return f"{self.name}:{self.model_for('reasoning')}"

    def model_for(self, model_class: ModelClass) -> str:
        return f"{self.name}-{model_class}"

    def complete(
        self,
        *,
        task: str,
        system: str,
        prompt: str,
        schema: type[T],
        model_class: ModelClass,
    ) -> LLMAnswer:
        call = Call(task, system, prompt, model_class, schema)
        with self._mutex:
            self.calls.append(call)
            reply = self._next(task)
        if callable(reply) and not isinstance(reply, type):
            reply = reply(call)
        if isinstance(reply, BaseException) or (isinstance(reply, type) and issubclass(reply, BaseException)):
            raise reply
        raw = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        try:
            parsed = schema.model_validate_json(raw)
        except ValidationError as exc:
            raise LLMMalformedAnswer(
                f"{task}: the answer does not match the schema: {exc.error_count()} errors", raw=raw
            ) from None
        return LLMAnswer(model=self.model_for(model_class), raw=raw, parsed=parsed)

    # -- inspection -----------------------------------------------------------------------------

    def calls_for(self, task: str) -> list[Call]:
        return [c for c in self.calls if c.task == task]

    def tasks(self) -> list[str]:
        return [c.task for c in self.calls]

    def _next(self, task: str) -> Reply | Responder:
        if task in self.script:
            entry = self.script[task]
            if isinstance(entry, Sequence) and not isinstance(entry, str):
                queue = self._queues.setdefault(task, deque(entry))
                if queue:
                    return queue.popleft()
            else:
                return entry
        if task in self.fallback:
            entry = self.fallback[task]
            assert not (isinstance(entry, Sequence) and not isinstance(entry, str))
            return entry
        raise UnexpectedCall(f"the scripted LLM was not expecting a {task!r} call")


# -- scenes and beings ----------------------------------------------------------------------------


def scene(
    action: str,
    when: str | Sequence[Any] = "2026-05-02",
    *,
    importance: float | None = None,
    actors: Sequence[str] = ("me",),
    feeling: str = "",
    themes: Sequence[str] = (),
) -> str:
    """A scene note's text (the flat form)."""
    obj: dict[str, Any] = {
        "action": action,
        "actors": list(actors),
        "when": [when] if isinstance(when, str) else list(when),
    }
    if feeling:
        obj["feeling"] = feeling
    if importance is not None:
        obj["importance"] = importance
    if themes:
        obj["themes"] = list(themes)
    return json.dumps(obj, ensure_ascii=False)


def note_scenes(engram: Any, being: str, texts: Sequence[str], *, prefix: str | None = None) -> list[str]:
    """Note scene texts (in batches of 500); returns the note ids in order."""
    ids: list[str] = []
    for start in range(0, len(texts), 500):
        part = texts[start : start + 500]
        taken = engram.notes.take_many(
            being,
            [
                NoteInput(text=t, idempotency_key=f"{prefix}-{start + i}" if prefix is not None else None)
                for i, t in enumerate(part)
            ],
        )
        ids += [n.note_id for n in taken.notes]
    return ids


# Topics whose scenes are near-duplicates under the hashing embedder: cosine ≥ 0.77 within a topic,
# ≤ 0.29 across topics and unrelated scenes (the cluster threshold is 0.30), topic centroids ≈ 0.05
# apart. Few shared words and distinct dates keep them apart; the hashing embedder is lexical.
TOPICS: dict[str, tuple[str, str]] = {
    "climbing": ("Climbed Rainier north ridge alongside Lena", "2026-05-02"),
    "baking": ("Baked rye sourdough loaves kitchen oven", "2025-11-15"),
    "chess": ("Played blitz chess openings versus Tom clubhouse", "2024-03-09"),
    "sailing": ("Sailed dinghy across Puget Sound strong wind", "2023-08-27"),
}
_VARIANTS = (
    "",
    " again",
    " at dawn",
    " at night",
    " once more",
    " before lunch",
    " after dinner",
    " in the rain",
    " for hours",
    " with joy",
    " slowly",
    " quickly",
    " twice",
    " in silence",
    " with friends",
    " on Sunday",
    " on Monday",
    " in spring",
    " in autumn",
    " for fun",
)


def topic_scenes(topic: str, n: int, *, importance: float | None = None) -> list[str]:
    """`n` near-duplicate scenes of one topic (at most 20), each with its own action."""
    base, date = TOPICS[topic]
    assert n <= len(_VARIANTS)
    return [scene(base + v, date, importance=importance) for v in _VARIANTS[:n]]


# Short scenes with few shared words or word pieces: no two are similar enough to cluster.
UNRELATED: tuple[tuple[str, str], ...] = (
    ("Walked the dog along the river", "2021-01-03"),
    ("Painted a watercolor of tulips", "2022-02-14"),
    ("Fixed the leaking bathroom faucet", "2023-03-25"),
    ("Read a novel about whales", "2024-04-06"),
    ("Swam twelve laps at the pool", "2025-05-17"),
    ("Called grandmother on her birthday", "2020-06-28"),
    ("Planted tomatoes in the garden", "2019-07-09"),
    ("Watched a meteor shower", "2018-08-21"),
    ("Learned three chords on guitar", "2017-09-30"),
    ("Cooked spicy ramen for dinner", "2016-10-11"),
    ("Visited the aquarium downtown", "2015-11-22"),
    ("Knitted a blue scarf", "2014-12-05"),
    ("Repaired my bicycle chain", "2013-01-16"),
    ("Fed ducks by a pond", "2012-02-27"),
)


def random_scenes(n: int, seed: int = 7) -> list[str]:
    """`n` scenes of ten random 7-letter words each: pairwise cosine ≤ ~0.32, no three form a cluster."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(7))

    return [
        scene(" ".join(word() for _ in range(10)), f"20{10 + i % 15}-{1 + i % 12:02d}-{1 + i % 28:02d}")
        for i in range(n)
    ]


def unrelated_scenes(n: int, *, importance: float | None = None) -> list[str]:
    assert n <= len(UNRELATED)
    return [scene(a, d, importance=importance) for a, d in UNRELATED[:n]]


# -- clusters placed by hand ----------------------------------------------------------------------


class World:
    """A being whose sub-clusters and nodes a test places by hand, each node's vector at an angle."""

    def __init__(self, engram: Any) -> None:
        self.e = engram
        self.made = 0
        being, business, private = Being.register("Aria", engram.clock.now())
        engram.store.save(being, business, private)
        self.being_id = being.id
        self.roots = {"Business": business, "Private": private}
        self.threshold = thresholds_for(engram.embedder.model_id).cluster

    def vector(self, angle: float, plane: int = 0) -> Embedding:
        """A unit vector at `angle` radians in the plane of axes (2·plane, 2·plane + 1)."""
        values = [0.0] * self.e.embedder.dim
        values[2 * plane], values[2 * plane + 1] = math.cos(angle), math.sin(angle)
        return Embedding.from_floats(self.e.embedder.model_id, values)

    def angle_for(self, similarity: float) -> float:
        return math.acos(similarity)

    def cluster(self, name: str, parent: Cluster) -> Cluster:
        sub = Cluster.create_sub(uuid4(), parent, name, self.e.clock.now())
        self.e.store.save(sub)
        return sub

    def nodes(self, cluster: Cluster, n: int, angle: float, plane: int = 0, *, dead: int = 0) -> list[UUID]:
        """`n` active nodes and `dead` dead ones in `cluster`, all at `angle`."""
        at = self.e.clock.now()
        made = []
        for i in range(n + dead):
            scene = validate_scene_object(
                {
                    "action": f"{cluster.name} scene {self.made + i}",
                    "actors": ["me"],
                    "when": ["2026-05-02"],
                    "importance": 0.5 if i < n else 0.0,
                }
            )
            node = MemoryNode.create(uuid4(), scene, cluster, 0, at)
            node.embed(self.vector(angle, plane), at)
            if i >= n:
                node.flag_dying(0, at)
                node.make_dead(0, "test: dead before ❼", at)
            made.append(node)
        self.e.store.save(*made)
        self.made += len(made)
        return [m.id for m in made]

    def patrol_small_clusters(self) -> dict[str, int]:
        """A patrol without an LLM; what its ❼ step did."""
        report = self.e.patrol("Aria")
        [step] = [s for s in report.steps if s["step"] == "merge_small"]
        assert step["state"] == "finished"
        return dict(step["counts"])

    def cluster_row(self, cluster: Cluster) -> dict[str, Any] | None:
        self.e.views.ensure()
        return self.e.views.read.cluster(self.being_id, cluster.id)

    def cluster_of(self, node_id: UUID) -> UUID:
        return self.e.store.get(MemoryNode, node_id).cluster_id


# -- reading patrol results -----------------------------------------------------------------------


def patrol_run(engram: Any, being_id: UUID | str, cycle: int) -> PatrolRun:
    return engram.store.get(PatrolRun, patrol_run_id(UUID(str(being_id)), cycle))


def decisions(run: PatrolRun, task: str) -> dict[str, dict[str, Any]]:
    """The run's recorded decisions of one task, by subject."""
    return {d["subject"]: d for d in run.decisions.values() if d["task"] == task}


def reasons(decision: Mapping[str, Any]) -> list[str]:
    return [str(r["reason"]) for r in decision["rejected"]]


def settings_json(settings: Settings) -> str:
    """Settings as JSON for a child process, secrets included (test databases only)."""
    data = json.loads(settings.model_dump_json())
    if settings.database_url is not None:
        data["database_url"] = settings.database_url.get_secret_value()
    return json.dumps(data)


def history_types(engram: Any, kind: str, aggregate_id: UUID | str) -> list[str]:
    return [str(e["type"]) for e in engram.audit.history(kind, str(aggregate_id))]
