"""`engram keys seal` (ADR 0095): a log written before encryption (ADR 0074) or before item keys
(ADR 0075) rewritten into the form a new write gives it, so that `forget` erases its old data; the
hash chain stays verifiable, and the old plaintext leaves the files. Both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import UUID

import pytest

from engram.adapters.eventstore import chain_check
from engram.adapters.eventstore.key_choice import KeyChoice
from engram.adapters.eventstore.shredding import MAGIC, MAGIC_ITEM
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput, NoteInput
from engram.services.config import Settings
from engram.services.errors import Conflict
from tests.integration.test_erasure import CANARY, T0
from tests.support import SeededIds, SteppingClock


@contextmanager
def _old_log(
    settings: Settings, clock: SteppingClock, monkeypatch: pytest.MonkeyPatch, *, clear: bool
) -> Iterator[Engram]:
    """A deployment as an older version wrote it: in clear (before ADR 0073), or every event of a
    being under the being's key (before ADR 0075)."""
    import engram.adapters.eventstore as eventstore
    import engram.adapters.eventstore.shredding as shredding

    with monkeypatch.context() as m:
        if clear:
            plain = eventstore.open_event_log
            m.setattr(eventstore, "open_event_log", lambda d, u, keys=None: plain(d, u))
        else:
            m.setattr(shredding, "choose_key", lambda topic, oid, being, state: KeyChoice(being, being))
        with bootstrap(settings, clock=clock, ids=SeededIds()) as old:
            yield old


def _plant_old(old: Engram) -> UUID:
    old.beings.register("Aria")
    note = old.notes.take("Aria", NoteInput(kind="todo", text=f"water the {CANARY} garden"))
    old.notes.take("Aria", NoteInput(kind="todo", text="feed the cat"))
    old.messages.take("Aria", MessageInput(id="m1", user="mina", text="hello there", at=T0))
    return UUID(note.note_id)


def _states(engram: Engram) -> list[bytes]:
    return [bytes(n.state) for n in engram.store.notifications(1, 10_000)]


def _files_with(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.parametrize("clear", [True, False], ids=["in-clear", "being-key"])
def test_seal_makes_old_notes_erasable(
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    clear: bool,
) -> None:
    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=clear) as old:
        note_id = _plant_old(old)
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        with pytest.raises(Conflict):
            engram.item_forgetting.forget_item("note", str(note_id), by="admin")
        before = {n.text for n in engram.listing.notes("Aria")}
        dry = engram.key_sealing.seal("Aria", by="admin", dry_run=True)
        assert not dry.nothing_to_seal and dry.counts["events"] >= 3
        assert (dry.counts["in_clear"] > 0) is clear and (dry.counts["from_being_key"] > 0) is not clear
        done = engram.key_sealing.seal("Aria", by="admin")
        assert done.counts["events"] == dry.counts["events"] and done.position is not None
        assert chain_check.verify(engram.store.app).ok
        assert not any(CANARY.encode() in s for s in _states(engram))
        assert {n.text for n in engram.listing.notes("Aria")} == before  # reads the same
        again = engram.key_sealing.seal("Aria", by="admin")
        assert again.nothing_to_seal and again.position is None
        note_states = [bytes(e.state) for e in engram.store.app.recorder.select_events(note_id)]
        assert note_states and all(s[:4] == MAGIC_ITEM and s[4:20] == note_id.bytes for s in note_states)
        engram.item_forgetting.forget_item("note", str(note_id), by="admin")
        assert {n.text for n in engram.listing.notes("Aria")} == {"feed the cat"}
        assert chain_check.verify(engram.store.app).ok
    _no_canary_in_files(settings, backend)


def _no_canary_in_files(settings: Settings, backend: str) -> None:
    """SQLite: no file of the data dir (databases, WAL, journals, keys); PostgreSQL: no file of the
    schema's tables, indexes and TOAST after a CHECKPOINT (dead tuples included)."""
    assert _files_with(settings.data_dir, CANARY.encode()) == []
    if backend == "postgres":
        from tests.integration.test_erasure_pg_files import _holding, _table_files

        files = _table_files(settings)
        assert files and _holding(files, CANARY.encode()) == []


def test_seal_then_forget_being_of_a_log_in_clear(
    make_settings: Callable[..., Settings],
    clock: SteppingClock,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    settings = make_settings()
    with _old_log(settings, clock, monkeypatch, clear=True) as old:
        _plant_old(old)
        old.notes.take("Aria", NoteInput(kind="todo", text=f"another {CANARY}"))
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        with pytest.raises(Conflict, match="in clear"):
            engram.forgetting.forget_being("Aria", by="admin")
        engram.key_sealing.seal(None, by="admin")
        assert not [s for s in _states(engram) if s[:4] not in (MAGIC, MAGIC_ITEM) and CANARY.encode() in s]
        engram.forgetting.forget_being("Aria", by="admin")
        assert chain_check.verify(engram.store.app).ok
    _no_canary_in_files(settings, backend)
