"""The log's hash chain (ADR 0069): `verify` catches a changed byte and a removed event on each backend."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from eventsourcing.sqlite import SQLiteApplicationRecorder

from engram.adapters.cli.main import cli
from engram.adapters.eventstore import chain, chain_check
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.config import Settings

SCENE = {"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]}


def _write(engram: Engram, n: int = 3) -> None:
    engram.beings.register("Aria")
    for i in range(n):
        engram.notes.take("Aria", NoteInput(text=json.dumps({**SCENE, "action": f"step {i}"})))


def _on_sqlite(engram: Engram) -> bool:
    return isinstance(engram.store.app.recorder, SQLiteApplicationRecorder)


def _sql(engram: Engram, statement: str, params: list[Any]) -> None:
    """Raw SQL on the log's own tables (EVENTS, HASHES), as someone with the database's files would."""
    recorder: Any = engram.store.app.recorder
    events, hashes = recorder.events_table_name, chain.HASH_TABLE
    if _on_sqlite(engram):
        with sqlite3.connect(recorder.datastore.pool.db_name) as conn:
            conn.execute(statement.replace("EVENTS", events).replace("HASHES", hashes), params)
        conn.close()
        return
    schema = recorder.datastore.schema
    statement = (
        statement.replace("EVENTS", f'"{schema}"."{events}"')
        .replace("HASHES", f'"{schema}"."{hashes}"')
        .replace("?", "%s")
        .replace("rowid", "notification_id")
    )
    with recorder.datastore.transaction(commit=True) as curs:
        curs.execute(statement.encode(), params)


def _positions(engram: Engram) -> list[int]:
    return [p for p, _ in engram.store.log.decoded_events(1, 10_000)]


def test_an_intact_log_verifies_and_its_head_is_the_last_event(engram: Engram) -> None:
    _write(engram)
    verdict = chain_check.verify(engram.store.app)
    positions = _positions(engram)
    assert verdict.ok and verdict.checked == len(positions) > 3 and verdict.head_position == positions[-1]
    # From a later position: anchored on the stored hash there, same head.
    later = chain_check.verify(engram.store.app, start=positions[2])
    assert later.ok and later.checked == len(positions) - 3 and later.head_hash == verdict.head_hash


def _change_one_byte(engram: Engram, target: int) -> None:
    """The third byte of the stored state at log position `target` becomes a space."""
    if _on_sqlite(engram):
        _sql(
            engram,
            "UPDATE EVENTS SET state = CAST(substr(state, 1, 2) || x'20' || substr(state, 4) AS BLOB) "
            "WHERE rowid = ?",
            [target],
        )
    else:
        _sql(
            engram,
            "UPDATE EVENTS SET state = overlay(state placing '\\x20'::bytea from 3 for 1) WHERE rowid = ?",
            [target],
        )


def test_one_changed_byte_is_caught_at_its_position(engram: Engram) -> None:
    _write(engram)
    target = _positions(engram)[2]
    _change_one_byte(engram, target)
    verdict = chain_check.verify(engram.store.app)
    assert not verdict.ok and verdict.broken_at == target and "changed" in verdict.reason


def test_a_removed_event_is_caught(engram: Engram) -> None:
    _write(engram)
    target = _positions(engram)[3]
    _sql(engram, "DELETE FROM EVENTS WHERE rowid = ?", [target])
    verdict = chain_check.verify(engram.store.app)
    assert not verdict.ok and verdict.broken_at == target and "missing" in verdict.reason


def test_a_log_written_before_the_chain_is_hashed_from_its_first_position(engram: Engram) -> None:
    _write(engram, n=1)
    _sql(engram, "DELETE FROM HASHES WHERE ? = ?", [1, 1])  # as if upgraded from before
    before = chain_check.verify(engram.store.app)
    assert before.ok and before.checked == 0 and before.unsealed == len(_positions(engram))
    engram.notes.take("Aria", NoteInput(text=json.dumps(SCENE)))  # the first write seals the history
    after = chain_check.verify(engram.store.app)
    assert after.ok and after.unsealed == 0 and after.checked == len(_positions(engram))


def test_cli_verify_prints_the_first_broken_position_and_checks_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    runner = CliRunner()
    assert runner.invoke(cli, ["being", "create", "Aria"]).exit_code == 0
    point = tmp_path / "checkpoint.json"
    ok = runner.invoke(cli, ["verify", "--checkpoint-out", str(point)])
    assert ok.exit_code == 0 and "chain intact" in ok.stdout, ok.stderr
    saved = json.loads(point.read_text())
    assert saved["format"] == "engram-checkpoint/1" and len(saved["hash"]) == 64
    assert runner.invoke(cli, ["verify", "--against", str(point)]).exit_code == 0
    with sqlite3.connect(tmp_path / "data" / "events.sqlite3") as conn:
        conn.execute("UPDATE stored_events SET state = CAST(state || ' ' AS BLOB) WHERE rowid = 1")
    conn.close()
    broken = runner.invoke(cli, ["verify", "--json", "--against", str(point)])
    result = json.loads(broken.stdout)
    assert broken.exit_code == 6 and result["broken_at"] == 1 and result["checkpoint_matches"] is True
    text = runner.invoke(cli, ["verify"])
    assert text.exit_code == 6 and "BROKEN at position 1" in text.stdout


@pytest.mark.parametrize(("step", "backlog"), [(7, True), (chain.BATCH, True), (chain.BATCH, False)])
def test_batches_larger_than_a_seal_step_are_sealed_in_order(
    step: int, backlog: bool, engram: Engram, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uuid import uuid4

    from eventsourcing.persistence import StoredEvent

    monkeypatch.setattr(chain, "BATCH", step)  # 7: several steps per seal, and per verify
    _write(engram, n=1)
    if backlog:  # events before the batch without hashes: the seal reads them back
        _sql(engram, "DELETE FROM HASHES WHERE ? = ?", [1, 1])
    noted = next(e for _, e in engram.store.log.decoded_events(1, 100) if type(e).__name__ == "Noted")
    mapper = engram.store.app.mapper

    def copy() -> StoredEvent:  # sealed for its own id: a sealed state binds its event's id and topic
        return mapper.to_stored_event(type(noted)(**{**vars(noted), "originator_id": uuid4()}))

    for _ in range(2):  # the library's insert in one transaction, 1000 events at a time
        engram.store.app.recorder.insert_events([copy() for _ in range(1000)])
    verdict = chain_check.verify(engram.store.app)
    assert verdict.ok and verdict.unsealed == 0 and verdict.checked == len(_positions(engram)) == 2004


def test_concurrent_writers_leave_one_intact_chain(make_settings: Callable[..., Settings]) -> None:
    """Three processes' worth of writers (each its own Engram and connections) at once: the chain
    follows the log's order (on PostgreSQL the library's table lock serialises the inserts)."""
    from engram.services.bootstrap import bootstrap

    engrams = [bootstrap(make_settings()) for _ in range(3)]
    barrier = threading.Barrier(len(engrams))

    def write(e: Engram, name: str) -> None:
        e.beings.register(name)
        barrier.wait()
        for i in range(15):
            e.notes.take(name, NoteInput(text=json.dumps({**SCENE, "action": f"{name} {i}"})))

    threads = [threading.Thread(target=write, args=(e, f"B{n}")) for n, e in enumerate(engrams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        verdict = chain_check.verify(engrams[0].store.app)
        assert verdict.ok and verdict.unsealed == 0 and verdict.checked == len(_positions(engrams[0]))
        assert verdict.checked >= 3 * 16
    finally:
        for e in engrams:
            e.close()
