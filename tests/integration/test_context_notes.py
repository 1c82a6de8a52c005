"""The agent context's notes in spec 002's order (ADR 0049), on SQLite and PostgreSQL: soul notes (up
to 5), rules (up to 10), recent summaries (up to 5), newest first by `at`; superseded, expired and
sensitive notes never appear, in the system prompt, the snapshot or MCP's `context` alike."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

from engram.domain.note import Note
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput


def _take(e: Engram, kind: str, text: str, **fields: object) -> str:
    if kind == "rule":
        fields.setdefault("evidence", ["seen it"])
    return e.notes.take("Aria", NoteInput(kind=kind, text=text, **fields)).note_id  # type: ignore[arg-type]


def test_context_leads_with_soul_notes_rules_and_summaries_newest_first(engram: Engram) -> None:
    engram.beings.register("Aria")
    engram.beings.define_soul("Aria", "Curious and kind.")
    start = engram.clock.now() - timedelta(days=30)
    old_soul = _take(engram, "soul", "I am a gardener", at=start)
    soul = _take(engram, "soul", "I am a gardener who reads", at=start + timedelta(days=1))
    a, b = engram.store.get(Note, UUID(old_soul)), engram.store.get(Note, UUID(soul))
    if a.superseded_by is None:  # a new soul supersedes the last by itself where that is built
        a.supersede(b, engram.clock.now())
        engram.store.save(a, b)
    for i in range(12):
        _take(engram, "rule", f"rule {i}", at=start + timedelta(days=2 + i))
    _take(engram, "rule", "a sensitive rule", sensitivity="sensitive")
    for i in range(7):
        _take(engram, "summary", f"summary {i}", at=start + timedelta(days=2 + i))
    _take(engram, "summary", "a summary that expired", ttl_days=1, at=start + timedelta(days=20))
    _take(engram, "knowledge", "a secret fact", sensitivity="sensitive")
    _take(engram, "todo", "an expired todo", ttl_days=1, at=start)
    _take(engram, "preference", "Likes short answers")

    view = engram.reading.context("Aria")
    prompt = view.system_prompt
    assert prompt["soul"] == "Curious and kind."
    assert prompt["soul_notes"] == ["I am a gardener who reads"]
    assert prompt["rules"] == [f"rule {i}" for i in range(11, 1, -1)]  # the 10 newest, newest first
    assert prompt["summaries"] == [f"summary {i}" for i in range(6, 1, -1)]
    assert prompt["preferences"] == ["Likes short answers"]
    headings = [line for line in view.system_text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## What you stand for",
        "## Rules you follow",
        "## What you did lately",
        "## Your preferences",
    ]
    for hidden in ("sensitive", "expired", "secret", "I am a gardener\n"):
        assert hidden not in view.text
    assert view.snapshot["unread"] == [] and view.snapshot["knowledge"] == []
