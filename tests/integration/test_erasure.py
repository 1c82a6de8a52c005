"""Erasure that holds (crypto-shredding, ADR 0073/0074), on both backends."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engram.domain.erasure import ErasedContent, Erasure
from engram.services.beings import list_beings
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput, NoteInput
from engram.services.config import Settings
from engram.services.errors import Conflict, NotFound
from engram.services.key_store import KeyStoreError
from tests.patrol_support import scene
from tests.support import SeededIds, SteppingClock

CANARY = "zqxcanaryvjw"  # one token: a full-text index keeps it whole
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _plant(engram: Engram) -> None:
    engram.beings.register("Aria")
    engram.beings.register("Bo")
    engram.notes.take("Aria", NoteInput(kind="todo", text=f"water the {CANARY} garden"))
    engram.messages.take("Aria", MessageInput(id="m1", user="mina", text=f"my {CANARY} secret", at=T0))
    engram.beings.write_think_md("Aria", f"thinking of {CANARY}")
    engram.notes.take("Bo", NoteInput(kind="todo", text="feed the cat"))
    engram.notes.take("Aria", NoteInput(text=scene(f"Walked to the {CANARY} lake", actors=["me", "Lena"])))
    engram.patrol("Aria")  # the scene becomes a node with a vector
    engram.views.catch_up_or_rebuild()


def _files_with(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes().lower()]


def test_the_log_stores_personal_text_encrypted(engram: Engram) -> None:
    _plant(engram)
    raw = [bytes(n.state) for n in engram.store.notifications(1, 100)]
    assert raw and not any(CANARY.encode() in state for state in raw)
    assert (engram.settings.data_dir / "keys.json").stat().st_mode & 0o777 == 0o600
    assert f"water the {CANARY} garden" in [n.text for n in engram.listing.notes("Aria")]  # it reads back
    assert engram.listing.nodes("Aria")


def test_forget_being_erases_it_and_leaves_a_receipt(engram: Engram) -> None:
    _plant(engram)
    done = engram.forgetting.forget_being("Aria", by="admin")
    assert not done.already and done.counts["events"] >= 4
    events = [e for _, e in engram.store.decoded_events(1, 1000)]
    erased = [e for e in events if isinstance(e, ErasedContent)]
    assert len(erased) == done.counts["events"]  # history still shows that they existed
    receipts = [e for e in events if isinstance(e, Erasure.Erased)]
    assert [(r.scope, r.by, r.counts["events"]) for r in receipts] == [
        ("being", "admin", done.counts["events"])
    ]
    with pytest.raises(NotFound, match="forgotten"):
        engram.listing.notes("Aria")
    assert [b["name"] for b in list_beings(engram.store)] == ["Bo"]
    assert [n.text for n in engram.listing.notes("Bo")] == ["feed the cat"]  # the other being is untouched
    engram.views.rebuild_all()  # rebuilds work after erasure
    assert [n.text for n in engram.listing.notes("Bo")] == ["feed the cat"]
    again = engram.forgetting.forget_being("Aria", by="admin")
    assert again.already and "already forgotten" in again.message


def test_a_forgotten_being_cannot_be_forgotten_under_an_unknown_name(engram: Engram) -> None:
    with pytest.raises(NotFound):
        engram.forgetting.forget_being("Nobody", by="admin")


def _pg_dump(settings: Settings) -> bytes:
    url, _, query = settings.database_url.get_secret_value().partition("?")  # type: ignore[union-attr]
    schema = dict(p.split("=", 1) for p in query.split("&") if "=" in p)["schema"]
    pg_dump = shutil.which("pg_dump") or sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_dump"))[-1]
    return subprocess.run([pg_dump, "--schema", schema, url], capture_output=True, check=True).stdout


def test_canary_is_nowhere_in_the_files_after_forget(
    make_settings: Callable[..., Settings], clock: SteppingClock, backend: str, tmp_path: Path
) -> None:
    settings = make_settings()
    engram = bootstrap(settings, clock=clock, ids=SeededIds())
    try:
        _plant(engram)
        engram.journals.refresh("Aria")  # the journals on disk quote the messages
        data = settings.data_dir
        assert _files_with(data, CANARY.encode()), "the canary is in the views before forgetting"
        if backend == "postgres":
            assert CANARY.encode() in _pg_dump(settings).lower()  # the views on PostgreSQL hold it
        engram.forgetting.forget_being("Aria", by="admin")
    finally:
        engram.close()
    assert _files_with(data, CANARY.encode()) == []
    if backend == "postgres":
        dump = _pg_dump(settings)
        assert b"CREATE TABLE" in dump  # the dump holds the test's tables, …
        assert CANARY.encode() not in dump.lower()  # … and not the canary


def test_refuses_to_start_without_its_key_store(
    make_settings: Callable[..., Settings], clock: SteppingClock
) -> None:
    settings = make_settings()
    with bootstrap(settings, clock=clock, ids=SeededIds()) as engram:
        engram.beings.register("Aria")
    keys = settings.data_dir / "keys.json"
    os.chmod(keys, 0o644)
    with pytest.raises(KeyStoreError, match="chmod 600"):
        bootstrap(settings, clock=clock, ids=SeededIds())
    keys.unlink()
    with pytest.raises(KeyStoreError, match="missing"):
        bootstrap(settings, clock=clock, ids=SeededIds())


def test_forget_refuses_a_being_written_in_clear(
    make_settings: Callable[..., Settings], clock: SteppingClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ADR 0074: events of a log written before encryption cannot be shredded; nothing is erased."""
    settings = make_settings()
    import engram.adapters.eventstore as eventstore

    plain = eventstore.open_event_log
    with monkeypatch.context() as m:  # the log as a version before ADR 0073 wrote it: no key store
        m.setattr(eventstore, "open_event_log", lambda d, u, keys=None: plain(d, u))
        with bootstrap(settings, clock=clock, ids=SeededIds()) as old:
            old.beings.register("Aria")
            old.notes.take("Aria", NoteInput(kind="todo", text="an old note"))
    with bootstrap(settings, clock=clock, ids=SeededIds(1000)) as engram:
        engram.notes.take("Aria", NoteInput(kind="todo", text="a new note"))  # old and new read together
        assert {n.text for n in engram.listing.notes("Aria")} == {"an old note", "a new note"}
        with pytest.raises(Conflict, match="in clear"):
            engram.forgetting.forget_being("Aria", by="admin")
        assert {n.text for n in engram.listing.notes("Aria")} == {
            "an old note",
            "a new note",
        }  # nothing erased


def test_an_erasure_interrupted_after_its_key_went_is_finished_by_the_next_forget(engram: Engram) -> None:
    _plant(engram)
    being_id = engram.forgetting._being_id("Aria")
    purge = engram.forgetting.purge
    assert purge is not None
    real = purge.purge_being
    purge.purge_being = lambda *a, **kw: (_ for _ in ()).throw(Conflict("a rebuild is already running"))  # type: ignore[method-assign]
    with pytest.raises(Conflict):
        engram.forgetting.forget_being("Aria", by="admin")
    purge.purge_being = real  # type: ignore[method-assign]
    assert engram.store.app.keys.is_destroyed(being_id)  # type: ignore[attr-defined]
    done = engram.forgetting.forget_being("Aria", by="admin")
    assert not done.already and done.position is not None and done.counts["events"] >= 4
    with pytest.raises(NotFound, match="forgotten"):
        engram.listing.notes("Aria")
    assert engram.forgetting.forget_being("Aria", by="admin").already


def test_the_admin_log_over_http_shows_erased_events_without_their_time(engram: Engram) -> None:
    """An erased event's time went with its content: the log still lists it, with a null time."""
    from fastapi.testclient import TestClient

    from engram.adapters.http import create_app

    _plant(engram)
    engram.forgetting.forget_being("Aria", by="admin")
    with TestClient(create_app(engram, auth=False, warm_up=False)) as client:
        response = client.get("/v1/admin/log", params={"limit": 50})
    assert response.status_code == 200, response.text
    entries = response.json()
    erased = [e for e in entries if e["type"] == "ErasedContent"]
    assert erased and all(e["timestamp"] is None for e in erased)
    assert any(e["type"] == "Erasure.Erased" and e["timestamp"] for e in entries)
