"""Nodes of expired and sensitive notes (ADR 0046, 0049), on SQLite and PostgreSQL.

A node carries its note's expiry and sensitivity. Every read leaves out a node past its expiry
(compared with the clock at read time) and a sensitive node, and still fills its top k; node lists
show sensitive ones only when asked (`include_sensitive`: the CLI's flag, an admin token); patrol
never sends a sensitive node's or note's text to an LLM, and no longer takes up a pending scene note
that expired or was superseded.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from engram.domain.node import MemoryNode
from engram.domain.note import Note
from engram.projections.notes import utc_text
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.listing import Listing
from tests.patrol_support import ScriptedLLM, scene

GARDEN = [
    "Planted tomatoes in the garden with Mina",
    "Watered the tomato seedlings in the garden",
    "Harvested the first ripe tomatoes from the garden",
    "Weeded the tomato beds in the garden",
]
SECRET = "Buried the tomato treasure chest in the garden"
SHORT_LIVED = "Staked the tomato plants in the garden"


def _prepare(engram: Engram, llm: Any = None) -> tuple[UUID, dict[str, str]]:
    being_id = UUID(engram.beings.register("Aria").being_id)
    inputs = [NoteInput(text=scene(a, "2026-05-02", themes=["garden"])) for a in GARDEN]
    inputs.append(NoteInput(text=scene(SECRET, "2026-05-03", themes=["garden"]), sensitivity="sensitive"))
    inputs.append(NoteInput(text=scene(SHORT_LIVED, "2026-05-04", themes=["garden"]), ttl_days=1))
    engram.notes.take_many("Aria", inputs)
    engram.patrol("Aria", llm=llm)
    engram.views.ensure()
    ids = {r["action"]: r["id"] for r in engram.views.read.nodes(being_id)}
    assert set(ids) == {*GARDEN, SECRET, SHORT_LIVED}
    return being_id, ids


def _expire(engram: Engram) -> None:
    engram.clock.current += timedelta(days=2)  # type: ignore[attr-defined]


def test_nodes_carry_their_notes_expiry_and_sensitivity(engram: Engram) -> None:
    being_id, ids = _prepare(engram)
    secret = engram.store.get(MemoryNode, UUID(ids[SECRET]))
    short = engram.store.get(MemoryNode, UUID(ids[SHORT_LIVED]))
    plain = engram.store.get(MemoryNode, UUID(ids[GARDEN[0]]))
    note = engram.store.get(Note, short.source_note_id)
    assert (secret.sensitive, secret.expires_at) == (True, None)
    assert (short.sensitive, short.expires_at) == (False, note.expires_at)
    assert note.expires_at is not None
    assert (plain.sensitive, plain.expires_at) == (False, None)
    row = engram.views.read.node(being_id, UUID(ids[SHORT_LIVED]))
    assert row is not None and row["expires_at"] == utc_text(note.expires_at)
    assert engram.views.read.node(being_id, UUID(ids[SECRET]))["sensitive"]  # type: ignore[index]


def test_reads_leave_out_sensitive_and_expired_nodes_and_still_fill_their_k(engram: Engram) -> None:
    being_id, ids = _prepare(engram)
    hidden = {ids[SECRET], ids[SHORT_LIVED]}
    # Before its expiry the short-lived node is read like any other; the sensitive one never is.
    before = engram.reading.query("Aria", "tomato garden", k=5, reactivate=False)
    assert {n.id for n in before.nodes} == {ids[a] for a in [*GARDEN, SHORT_LIVED]}
    _expire(engram)
    recalled = engram.reading.recall("Aria", "tomato garden")
    assert len(recalled.nodes) == 3 and not {n.id for n in recalled.nodes} & hidden
    assert "treasure" not in recalled.text and "Staked" not in recalled.text
    found = engram.reading.query("Aria", "tomato garden", k=4, reactivate=False)
    assert {n.id for n in found.nodes} == {ids[a] for a in GARDEN}  # k filled by visible nodes
    searched = engram.reading.search_memory("Aria", ["tomato"])
    assert searched.total == 4 and not {n.id for n in searched.nodes} & hidden
    cluster = engram.views.read.node(being_id, UUID(ids[GARDEN[0]]))["cluster_id"]  # type: ignore[index]
    members = engram.reading.recall_memory("Aria", UUID(cluster))
    assert members.nodes and not {n.id for n in members.nodes} & hidden
    context = engram.reading.context("Aria")
    assert context.recent_nodes and not {n["id"] for n in context.recent_nodes} & hidden
    assert "treasure" not in context.text


def test_node_lists_show_sensitive_nodes_only_when_asked_and_expired_ones_never(engram: Engram) -> None:
    _, ids = _prepare(engram)
    _expire(engram)
    listing = Listing(engram)
    shown = {n.id for n in listing.nodes("Aria")}
    assert shown == {ids[a] for a in GARDEN}
    with_sensitive = {n.id: n for n in listing.nodes("Aria", include_sensitive=True)}
    assert set(with_sensitive) == {ids[a] for a in [*GARDEN, SECRET]}
    assert with_sensitive[ids[SECRET]].sensitive


def test_absorbing_keeps_the_latest_expiry_and_any_sensitivity(engram: Engram) -> None:
    _, ids = _prepare(engram)
    plain, short, secret = (
        engram.store.get(MemoryNode, UUID(ids[a])) for a in (GARDEN[0], SHORT_LIVED, SECRET)
    )
    at = engram.clock.now()
    short.absorb([plain], 1, at)
    # one of them never expires: the survivor never does; none was sensitive
    assert (short.expires_at, short.sensitive) == (None, False)
    other = engram.store.get(MemoryNode, UUID(ids[GARDEN[1]]))
    other.absorb([secret], 1, at)
    assert other.sensitive
    engram.store.save(short, plain, other, secret)
    replayed = engram.store.get(MemoryNode, short.id)
    assert (replayed.expires_at, replayed.sensitive) == (None, False)
    assert engram.store.get(MemoryNode, other.id).sensitive


def test_absorbing_expiring_nodes_records_the_latest_expiry(engram: Engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    engram.notes.take_many(
        "Aria",
        [
            NoteInput(text=scene(GARDEN[0], "2026-05-02"), ttl_days=1),
            NoteInput(text=scene(GARDEN[1], "2026-05-02"), ttl_days=3),
        ],
    )
    engram.patrol("Aria")
    engram.views.ensure()
    rows = engram.views.read.nodes(being_id)
    first, second = (engram.store.get(MemoryNode, UUID(r["id"])) for r in rows)
    latest = max(first.expires_at, second.expires_at)  # type: ignore[type-var]
    first.absorb([second], 1, engram.clock.now())
    engram.store.save(first, second)
    engram.views.ensure()
    assert engram.store.get(MemoryNode, first.id).expires_at == latest
    assert engram.views.read.node(being_id, first.id)["expires_at"] == utc_text(latest)  # type: ignore[index, arg-type]
    engram.clock.current += timedelta(days=2)  # type: ignore[attr-defined]
    assert [n.id for n in Listing(engram).nodes("Aria", state="active")] == [
        str(first.id)
    ]  # a live note fed it


def test_patrol_leaves_expired_and_superseded_pending_notes(engram: Engram) -> None:
    being_id = UUID(engram.beings.register("Aria").being_id)
    past = engram.clock.now() - timedelta(days=3)
    taken = engram.notes.take_many(
        "Aria",
        [
            NoteInput(text=scene(GARDEN[0], "2026-05-02"), ttl_days=1, at=past),  # expired on arrival
            NoteInput(text=scene(GARDEN[1], "2026-05-02")),
            NoteInput(text=scene(GARDEN[2], "2026-05-02")),
        ],
    )
    expired, old, new = (UUID(n.note_id) for n in taken.notes)
    old_note, new_note = engram.store.get(Note, old), engram.store.get(Note, new)
    old_note.supersede(new_note, engram.clock.now())
    engram.store.save(old_note, new_note)
    engram.views.ensure()
    now = utc_text(engram.clock.now())
    assert engram.views.read.pending_scene_counts(active_at=now) == {str(being_id): 1}
    engram.patrol("Aria")
    engram.views.ensure()
    assert [r["action"] for r in engram.views.read.nodes(being_id)] == [GARDEN[2]]
    for note_id in (expired, old):
        assert engram.store.get(Note, note_id).node_id is None


def test_patrol_never_sends_sensitive_text_to_an_llm(engram: Engram) -> None:
    llm = ScriptedLLM()
    _prepare(engram, llm=llm)
    assert llm.calls  # the LLM was asked (classification, consolidation, the diary…)
    for call in llm.calls:
        assert "treasure" not in call.prompt, call.task
    # The sensitive note's node was classified without the LLM.
    assert sum("tomato" in c.prompt for c in llm.calls_for("classify_root")) == len(GARDEN) + 1


def test_a_sensitive_node_over_the_audit_routes_needs_an_admin_token(engram: Engram) -> None:
    from fastapi.testclient import TestClient

    from engram.adapters.http import HttpSettings, create_app
    from engram.services.tokens import TokenService

    _, ids = _prepare(engram)
    tokens = TokenService(engram)
    admin = {"Authorization": f"Bearer {tokens.issue(admin=True).token}"}
    aria = {"Authorization": f"Bearer {tokens.issue(being='Aria').token}"}
    with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
        for path in (f"/v1/beings/Aria/nodes/{ids[SECRET]}", f"/v1/beings/Aria/nodes/{ids[SECRET]}/history"):
            refused = client.get(path, headers=aria)
            assert refused.status_code == 403 and "treasure" not in refused.text, path
            assert "treasure" in client.get(path, headers=admin).text, path
        assert client.get(f"/v1/beings/Aria/nodes/{ids[GARDEN[0]]}", headers=aria).status_code == 200
