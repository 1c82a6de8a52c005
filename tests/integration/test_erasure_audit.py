"""What an auditor sees of a forgotten item: its events, erased, and the receipt that erased them."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest

from engram.domain.ids import node_id_for_note
from engram.services.beings import resolve_being
from engram.services.bootstrap import Engram
from engram.services.errors import NotFound
from tests.integration.test_erasure_items import CANARY, _plant


def test_history_why_and_log_show_a_forgotten_notes_events_without_their_content(engram: Engram) -> None:
    ids = _plant(engram)
    aria = resolve_being(engram.store, "Aria").id
    node = node_id_for_note(UUID(ids["note"]))
    before = engram.audit.history("note", ids["note"], being="Aria")
    done = engram.item_forgetting.forget_item("note", ids["note"], by="auditor-test")

    history = engram.audit.history("note", ids["note"], being="Aria")
    assert [h["version"] for h in history] == [h["version"] for h in before]  # every event still listed
    assert all(h["type"] == "ErasedContent" and h["timestamp"] is None for h in history)
    assert [h["payload"]["erased_topic"] for h in history] == [
        f"engram.{h['type']}" for h in before
    ]  # what each event was
    assert {h["payload"]["being_id"] for h in history} == {str(aria)}
    with pytest.raises(NotFound):  # still scoped to its being
        engram.audit.history("note", ids["note"], being="Bo")

    why = engram.why.why("Aria", "note", ids["note"])
    assert why["tree"]["erased"] == {
        "events": len(before),
        "of": len(before),
        "receipt": str(done.erasure_id),
        "position": done.position,
        "at": why["tree"]["erased"]["at"],
        "by": "auditor-test",
    }
    assert all(e["at"] is None and e["type"] == "ErasedContent" for e in why["tree"]["events"])
    made = engram.why.why("Aria", "node", str(node))  # erased with its note: no receipt of its own
    assert made["tree"]["erased"]["events"] == made["tree"]["erased"]["of"] >= 1
    assert "receipt" not in made["tree"]["erased"]
    with pytest.raises(NotFound):
        engram.why.why("Bo", "note", ids["note"])

    # The global log lists the erased events as the being's, so `log --being` still shows them.
    logged = [e for e in engram.audit.log(being="Aria", limit=1000) if e["aggregate_id"] == ids["note"]]
    assert len(logged) == len(before) and all(e["type"] == "ErasedContent" for e in logged)
    assert not [e for e in engram.audit.log(being="Bo", limit=1000) if e["aggregate_id"] == ids["note"]]
    assert CANARY not in json.dumps([history, why, made, logged])


def test_why_takes_the_callers_own_id_of_a_message(engram: Engram) -> None:
    ids = _plant(engram)
    by_own = engram.why.why("Aria", "message", "m1")
    assert by_own["id"] == ids["message"] and "erased" not in by_own["tree"]
    engram.item_forgetting.forget_item(
        "message", "m1", by="auditor-test", being=resolve_being(engram.store, "Aria").id
    )
    gone = engram.why.why("Aria", "message", "m1")
    assert gone["tree"]["erased"]["by"] == "auditor-test"
    with pytest.raises(NotFound):
        engram.why.why("Aria", "message", "never-sent")
    with pytest.raises(NotFound):
        engram.why.why("Bo", "message", "m1")  # Bo's own id space


def test_the_cli_shows_a_forgotten_notes_history_and_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from engram.adapters.cli.main import cli

    runner = CliRunner()
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    assert runner.invoke(cli, ["being", "create", "Aria"]).exit_code == 0
    taken = runner.invoke(
        cli, ["note", "Aria", "--kind", "todo", "--key", "k1", "--text", f"a {CANARY} errand"]
    )
    assert taken.exit_code == 0, taken.output
    assert runner.invoke(cli, ["forget", "note", "k1", "--being", "Aria", "--yes"]).exit_code == 0
    note_id = json.loads(runner.invoke(cli, ["why", "note", "k1", "--being", "Aria", "--json"]).output)["id"]
    history = runner.invoke(cli, ["history", "note", note_id])
    assert history.exit_code == 0, history.output
    assert "(time erased)" in history.output and "engram.Note.Noted" in history.output
    why = runner.invoke(cli, ["why", "note", "k1", "--being", "Aria"])
    assert why.exit_code == 0, why.output
    assert "content erased (1 of 1 events): forgotten @" in why.output and CANARY not in why.output
