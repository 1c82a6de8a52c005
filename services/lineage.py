"""`engram why KIND ID` (issue #13, ADR 0068): a memory's lineage as a tree, read from the log.

The tree's root is the memory asked about: its own events (each with its log position and time),
the decisions that touched it (a patrol's `LlmDecisionRecorded`, a fact extraction, a note merge's
or a summary's model answer, which live in the events themselves), and its children: the aggregates
it came from (source notes, absorbed nodes, merged notes, the superseded note, the source message),
each a tree of its own, and references to where it went (the survivor that absorbed it, the note
that superseded it, its cluster).

Bounded work: every read is by id. The ids the events name, the deterministic ids of `domain/ids.py`
(a patrol run per being and cycle, a message per key, an extraction per message) and one read of the
conversations view (a session's conversation) lead from one aggregate to the next; nothing scans the
log. A tree holds at most `MAX_AGGREGATES` expanded aggregates (then `truncated`), `MAX_DEPTH` levels,
and a cluster reads the patrol runs of its being's last `MAX_RUNS` cycles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from engram.domain.being import Being
from engram.domain.compaction import compaction_id_for
from engram.domain.erasure import ErasedContent, Erasure
from engram.domain.errors import InvalidInput
from engram.domain.ids import (
    CALLERS_IDS,
    extraction_id_for_message,
    item_erasure_id,
    message_id_for_key,
    node_id_for_note,
    patrol_run_id,
)
from engram.domain.links import links_id_for
from engram.domain.patrol_run import PatrolRun
from engram.services.beings import parse_uuid, resolve_being
from engram.services.errors import NotFound
from engram.services.jsonview import event_payload, event_topic, event_type
from engram.services.store import AggregateStore

if TYPE_CHECKING:
    from engram.services.views import Views

WHY_KINDS = ("node", "cluster", "note", "fact", "session", "message")
MAX_AGGREGATES = 64
MAX_DEPTH = 4
MAX_RUNS = 50

_TOPIC_KINDS = {
    "engram.MemoryNode.": "node",
    "engram.Cluster.": "cluster",
    "engram.Note.": "note",
    "engram.Fact.": "fact",
    "engram.Message.": "message",
    "engram.Conversation.": "conversation",
    "engram.PatrolRun.": "patrol-run",
    "engram.Extraction.": "extraction",
    "engram.MemoryLinks.": "links",
}

# Fields naming where a memory came from: followed, each source a subtree.
SOURCE_FIELDS = {
    "source_note_id": ("source note", "note"),
    "absorbed_ids": ("absorbed", "node"),
    "sources": ("merged from", "note"),
    "old": ("supersedes", "note"),
}
# Fields naming where it went or where it sits: shown as references, not followed.
REFERENCE_FIELDS = {
    "survivor_id": ("absorbed into", "node"),
    "by": ("superseded by", "note"),
    "node_id": ("became node", "node"),
    "cluster_id": ("cluster", "cluster"),
    "from_cluster_id": ("moved from cluster", "cluster"),
    "parent_id": ("parent cluster", "cluster"),
    "conversation_id": ("conversation", "conversation"),
    "session_id": ("session", "session"),
}


class LineageIndex(Protocol):
    """The two look-ups by id the log cannot answer without a scan, answered by the views."""

    def session_conversation(self, being_id: UUID, session_id: UUID) -> UUID | None: ...

    def importance_scoring(self, being_id: UUID, memory_id: UUID) -> UUID | None: ...


class ViewsIndex:
    """`LineageIndex` on the conversations view (a session's conversation) and the importance view
    (the `ImportanceScoring` that last answered for a memory)."""

    def __init__(self, views: Views) -> None:
        self.views = views

    def session_conversation(self, being_id: UUID, session_id: UUID) -> UUID | None:
        self.views.ensure(names=["conversations"], being=being_id)
        row = self.views.conversations.session(being_id, session_id)
        return UUID(str(row["conversation_id"])) if row is not None else None

    def importance_scoring(self, being_id: UUID, memory_id: UUID) -> UUID | None:
        self.views.ensure(names=["importance"], being=being_id)
        return self.views.importance.scored_by(being_id, memory_id)


_UNDOABLE = ("AbsorbedNodes", "Superseded", "Merged", "Deleted", "Created")
"""The events that are decisions undo can reverse (ADR 0072; a cluster's merge or split, ADR 0078):
their id is `AGGREGATE@VERSION`."""


def undo_records(
    store: AggregateStore, being_id: UUID, aggregate_id: UUID, events: list[Any]
) -> list[dict[str, Any]]:
    """The undos of the decisions recorded on `aggregate_id` (ADR 0072), as decision entries: one
    lookup by id per decision event, so the cost follows the memory, not the log. Undo's
    compensating events already show among the aggregate's own events."""
    from engram.domain.undo import Undo, undo_id_for

    out: list[dict[str, Any]] = []
    for e in events:
        if type(e).__name__ not in _UNDOABLE:
            continue
        decision = f"{aggregate_id}@{e.originator_version}"
        undo = store.find(Undo, undo_id_for(being_id, decision))
        if undo is not None:
            out.append(
                {
                    "source": "undo",
                    "task": "undo",
                    "position": store.positions(undo.id).get(1),
                    "decision": decision,
                    "kind": undo.kind,
                    "reason": undo.reason,
                    "affected": list(undo.affected),
                    "cascade_of": undo.cascade_of,
                    "at": undo.created_on.isoformat(),
                }
            )
    return out


def _kind_of(topic: str) -> str | None:
    for prefix, kind in _TOPIC_KINDS.items():
        if topic.startswith(prefix):
            return kind
    return None


def _ids(value: Any) -> list[UUID]:
    values = value if isinstance(value, list | tuple) else [value]
    return [v if isinstance(v, UUID) else UUID(str(v)) for v in values if v is not None]


def _mentions(decision: dict[str, Any], ids: set[str]) -> bool:
    text = json.dumps([decision["subject"], decision["parsed_plan"], decision["rejected"]])
    return any(i in text for i in ids)


@dataclass
class _Walk:
    store: AggregateStore
    index: LineageIndex
    being_id: UUID
    expanded: set[UUID] = field(default_factory=set)
    truncated: bool = False

    def events(self, aggregate_id: UUID) -> list[Any] | None:
        """The aggregate's events if it is this being's, else None (another being's ids are unknown)."""
        events = self.store.events(aggregate_id)
        if not events or getattr(events[0], "being_id", None) != self.being_id:
            return None
        return events

    def entries(self, aggregate_id: UUID, events: list[Any]) -> list[dict[str, Any]]:
        positions = self.store.positions(aggregate_id)
        return [
            {
                "position": positions.get(e.originator_version),
                "version": e.originator_version,
                "at": e.timestamp.isoformat() if e.timestamp else None,  # an erased event keeps no time
                "type": event_type(e),
                "detail": {k: v for k, v in event_payload(e).items() if k != "being_id"},
            }
            for e in events
        ]

    def erasure(self, aggregate_id: UUID, erased: int, total: int) -> dict[str, Any]:
        """How much of the aggregate was erased, and the receipt of its own `forget` if it has one (a
        node made from a note, a user's message, a being's events were erased with their owner)."""
        out: dict[str, Any] = {"events": erased, "of": total}
        receipt = self.store.find(Erasure, item_erasure_id(aggregate_id))
        if receipt is not None and receipt.being_id == self.being_id:
            out |= {
                "receipt": str(receipt.id),
                "position": self.store.positions(receipt.id).get(1),
                "at": receipt.created_on.isoformat(),
                "by": receipt.by,
            }
        return out

    def ref(self, kind: str | None, aggregate_id: UUID, relation: str) -> dict[str, Any]:
        return {"kind": kind, "id": str(aggregate_id), "relation": relation, "ref": True}

    def tree(
        self, aggregate_id: UUID, relation: str, depth: int, kind: str | None = None
    ) -> dict[str, Any] | None:
        if aggregate_id in self.expanded or depth > MAX_DEPTH or len(self.expanded) >= MAX_AGGREGATES:
            if aggregate_id not in self.expanded:
                self.truncated = True
            return self.ref(kind, aggregate_id, relation)
        events = self.events(aggregate_id)
        if events is None:
            return None
        found = _kind_of(event_topic(events[0]))
        if kind is not None and found != kind:
            return None
        self.expanded.add(aggregate_id)
        node: dict[str, Any] = {
            "kind": found,
            "id": str(aggregate_id),
            "relation": relation,
            "events": self.entries(aggregate_id, events),
            "children": [],
        }
        node["decisions"] = (
            _answered(node["events"])
            + self.decisions(found, aggregate_id, events)
            + self.importance(found, aggregate_id)
            + undo_records(self.store, self.being_id, aggregate_id, events)
        )
        node["children"] = self.children(found, events, depth)
        erased = sum(isinstance(e, ErasedContent) for e in events)
        if erased:
            node["erased"] = self.erasure(aggregate_id, erased, len(events))
        if found in ("node", "fact"):
            # The A-MEM links dreaming recorded on this memory (ADR 0062), when it was linked later.
            linked = self.tree(links_id_for(self.being_id, aggregate_id), "links", depth + 1, "links")
            if linked is not None and not linked.get("ref"):
                node["children"].append(linked)
        return node

    def children(self, kind: str | None, events: list[Any], depth: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for e in events:
            for name, value in vars(e).items():
                if name in SOURCE_FIELDS and value:
                    relation, source_kind = SOURCE_FIELDS[name]
                    for i in _ids(value):
                        sub = self.tree(i, relation, depth + 1, source_kind)
                        if sub is not None:
                            out.append(sub)
                elif name in REFERENCE_FIELDS and value:
                    relation, ref_kind = REFERENCE_FIELDS[name]
                    # A reference back to a memory the tree already holds (a note's node) says nothing.
                    out += [self.ref(ref_kind, i, relation) for i in _ids(value) if i not in self.expanded]
            key = getattr(e, "source_message_id", None)
            if kind == "fact" and key:
                sub = self.tree(
                    message_id_for_key(self.being_id, str(key)), "source message", depth + 1, "message"
                )
                if sub is not None:
                    out.append(sub)
        return _unique(out)

    def decisions(self, kind: str | None, aggregate_id: UUID, events: list[Any]) -> list[dict[str, Any]]:
        if kind == "message":
            return self.extraction(aggregate_id)
        if kind not in ("node", "cluster", "note"):
            return []
        watched = {str(aggregate_id)}
        cycles: set[int] = set()
        for e in events:
            if isinstance(getattr(e, "cycle", None), int):
                cycles.add(e.cycle)
            if isinstance(getattr(e, "activation_cycle", None), int):
                # Notes become nodes before the patrol starts its cycle: that run is the next one.
                cycles |= {e.activation_cycle, e.activation_cycle + 1}
            for name in ("source_note_id", "cluster_id"):
                if getattr(e, name, None) is not None:
                    watched.add(str(getattr(e, name)))
        if kind == "note":
            # A note's events name no cycle: the patrol that made its node did (`activation_cycle`).
            node = self.store.events(node_id_for_note(aggregate_id), lte=1)
            if (
                node
                and not isinstance(node[0], ErasedContent)
                and getattr(node[0], "being_id", None) == self.being_id
            ):
                cycles |= {int(node[0].activation_cycle), int(node[0].activation_cycle) + 1}
        if kind == "cluster":
            # A cluster's events name no cycle either: its being's last cycles are read instead.
            head = self.store.get(Being, self.being_id).cycle
            cycles |= set(range(max(1, head - MAX_RUNS + 1), head + 1))
        out: list[dict[str, Any]] = []
        for cycle in sorted(cycles):
            out += self.patrol_decisions(cycle, watched)
        return out

    def patrol_decisions(self, cycle: int, watched: set[str]) -> list[dict[str, Any]]:
        run_id = patrol_run_id(self.being_id, cycle)
        events = self.store.events(run_id)
        if not events:
            return []
        positions = self.store.positions(run_id)
        out = []
        for e in events:
            if not isinstance(e, PatrolRun.LlmDecisionRecorded):
                continue
            d = {k: v for k, v in event_payload(e).items() if k != "being_id"}
            if _mentions(d, watched):
                out.append(
                    {
                        "source": "patrol",
                        "cycle": cycle,
                        "position": positions.get(e.originator_version),
                        "at": e.timestamp.isoformat(),
                        **d,
                        "validation": "rejected in part" if d["rejected"] else "accepted",
                    }
                )
        return out

    def importance(self, kind: str | None, memory_id: UUID) -> list[dict[str, Any]]:
        """The importance scoring (dreaming, ADR 0061) that last answered or refused for the memory."""
        if kind not in ("node", "fact", "message", "note"):
            return []
        scoring_id = self.index.importance_scoring(self.being_id, memory_id)
        if scoring_id is None:
            return []
        positions = self.store.positions(scoring_id)
        out = []
        for e in self.store.events(scoring_id)[1:]:  # after Opened: each answer, accepted or refused
            scores = getattr(e, "scores", {})
            named = str(memory_id) in scores or str(memory_id) in getattr(e, "memory_ids", [])
            if not named and str(memory_id) not in getattr(e, "missing", []):
                continue
            refused = getattr(e, "code", None)
            out.append(
                {
                    "source": "importance",
                    "position": positions.get(e.originator_version),
                    "at": e.timestamp.isoformat(),
                    "task": event_type(e),
                    "model": e.model,
                    "prompt_version": e.prompt_version,
                    "raw_answer": e.answer,
                    "score": scores.get(str(memory_id)),
                    "validation": f"refused ({refused}): {e.reason}" if refused else "accepted",
                }
            )
        return out

    def extraction(self, message_id: UUID) -> list[dict[str, Any]]:
        x_id = extraction_id_for_message(message_id)
        events = self.store.events(x_id)
        positions = self.store.positions(x_id) if events else {}
        return [
            {
                "source": "extraction",
                "position": positions.get(e.originator_version),
                "at": e.timestamp.isoformat(),
                "task": event_type(e),
                **{k: v for k, v in event_payload(e).items() if k not in ("being_id", "message_id")},
            }
            for e in events[1:]  # after Opened: each attempt, with the model's answer or its failure
        ]

    def compaction(self, session_id: UUID) -> list[dict[str, Any]]:
        """The context compactions of a session (dreaming, ADR 0067): their synthesis or refusal."""
        compaction_id = compaction_id_for(self.being_id, session_id)
        events = self.store.events(compaction_id)
        if not events or getattr(events[0], "being_id", None) != self.being_id:
            return []
        positions = self.store.positions(compaction_id)
        return [
            {
                "source": "compaction",
                "position": positions.get(e.originator_version),
                "at": e.timestamp.isoformat(),
                "task": event_type(e),
                **{k: v for k, v in event_payload(e).items() if k != "being_id"},
                "raw_answer": getattr(e, "answer", None),
            }
            for e in events[1:]  # after Started: each compaction, made or refused
        ]

    def session(self, session_id: UUID, conversation_id: UUID) -> dict[str, Any] | None:
        events = self.events(conversation_id)
        if events is None:
            return None
        mine = [e for e in events if getattr(e, "session_id", None) == session_id]
        entries = self.entries(conversation_id, mine)
        decisions = _answered(entries) + self.compaction(session_id)
        children = [
            sub
            for e in mine
            if getattr(e, "message_id", None) is not None
            for sub in [self.tree(e.message_id, "message", 1, "message")]
            if sub is not None
        ]
        return {
            "kind": "session",
            "id": str(session_id),
            "relation": "subject",
            "conversation_id": str(conversation_id),
            "events": entries,
            "decisions": decisions,
            "children": children,
        }


def _answered(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decisions an aggregate's own events hold: a note merge's, a repair's or a summary's model,
    prompt version and verbatim answer (rule-made ones name their method and no model)."""
    out = []
    for x in entries:
        detail = x["detail"]
        if "model" in detail and ("prompt_version" in detail or "answer" in detail or "method" in detail):
            out.append(
                {
                    "source": "event",
                    "position": x["position"],
                    "at": x["at"],
                    "task": x["type"],
                    "model": detail.get("model"),
                    "prompt_version": detail.get("prompt_version"),
                    "method": detail.get("method"),
                    "raw_answer": detail.get("answer"),
                    "validation": "refused: " + detail["refused"] if detail.get("refused") else "",
                }
            )
    return out


def _unique(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[tuple[str, str]] = set()
    out = []
    for item in items:
        key = (item["id"], item["relation"])
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


class WhyQueries:
    """`why`: read-only, scoped to one being."""

    def __init__(self, store: AggregateStore, index: LineageIndex) -> None:
        self.store = store
        self.index = index

    def why(self, being_ref: str, kind: str, ref: str) -> dict[str, Any]:
        if kind not in WHY_KINDS:
            raise InvalidInput(f"unknown kind {kind!r}; kinds are {', '.join(WHY_KINDS)}")
        being = resolve_being(self.store, being_ref)
        as_id = parse_uuid(ref)
        from_key = CALLERS_IDS.get(kind)
        if as_id is None and from_key is None:
            raise InvalidInput(f"{ref!r} is not an id")
        walk = _Walk(self.store, self.index, being.id)
        tree = None
        if kind == "session" and as_id is not None:
            conversation = self.index.session_conversation(being.id, as_id)
            tree = walk.session(as_id, conversation) if conversation is not None else None
        elif as_id is not None:
            tree = walk.tree(as_id, "subject", 0, kind)
        if tree is None and from_key is not None:
            # The caller's own id for it (a message's `id`, a note's key), as `forget` takes it.
            as_id = from_key(being.id, ref)
            tree = walk.tree(as_id, "subject", 0, kind)
        if tree is None:
            raise NotFound(f"{kind} {ref} not found")
        return {
            "being": being.name,
            "kind": kind,
            "id": str(as_id),
            "tree": tree,
            "truncated": walk.truncated,
        }


def why_text(report: dict[str, Any]) -> str:
    """The tree for a terminal: one line per event, decision and child, indented by depth."""
    lines = [f"why {report['kind']} {report['id']} (being {report['being']})"]
    _render(report["tree"], 0, lines)
    if report["truncated"]:
        lines.append(f"(truncated: at most {MAX_AGGREGATES} memories, {MAX_DEPTH} levels)")
    return "\n".join(lines)


def _short(value: Any, width: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


# Shown first and whole: what an auditor looks for (the idempotency key, the source ref, the reason).
_FIRST = ("idempotency_key", "message_key", "source_ref", "reason", "cycle", "survivor_id", "by", "old")


def _fields(detail: dict[str, Any]) -> str:
    """An event's fields as `name=value`, the ones auditors look for first, long values cut short."""
    names = [n for n in _FIRST if n in detail] + [n for n in detail if n not in _FIRST]
    parts = [
        f"{n}={_short(detail[n], 200 if n in _FIRST else 60)}"
        for n in names
        if detail[n] not in (None, [], {}, "")
    ]
    return " ".join(parts)


def _render(node: dict[str, Any], depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    head = f"{pad}{node['relation']}: {node['kind']} {node['id']}"
    if node.get("ref"):
        lines.append(head + " (see its own tree)")
        return
    lines.append(head)
    for e in node["events"]:
        at = e["at"] or "(time erased)"
        lines.append(f"{pad}  @{e['position']} {at} {e['type']} {_fields(e['detail'])}".rstrip())
    erased = node.get("erased")
    if erased:
        how = (
            f"forgotten @{erased['position']} {erased['at']} by {erased['by']}"
            if "receipt" in erased
            else "its key was destroyed: it, its source, its user or its being was forgotten"
        )
        lines.append(f"{pad}  * content erased ({erased['events']} of {erased['of']} events): {how}")
    for d in node["decisions"]:
        if d.get("source") == "undo":
            lines.append(f"{pad}  * undone @{d['position']} {d['at']} {d['decision']}: {_short(d['reason'])}")
            continue
        answer = d.get("raw_answer", d.get("answer"))
        lines.append(
            f"{pad}  * decision @{d['position']} {d['at']} {d.get('task')} model={d.get('model')} "
            f"prompt={d.get('prompt_version')} {d.get('validation', '')}".rstrip()
        )
        if answer:
            lines.append(f"{pad}    answer: {_short(answer)}")
    for child in node["children"]:
        _render(child, depth + 1, lines)
