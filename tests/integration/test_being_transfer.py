"""`engram export` / `engram import` (ADR 0070): a round trip between backends gives identical views;
a second import writes nothing; a tampered, truncated or unknown file is refused with nothing written."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from engram.adapters.cli.main import cli
from engram.adapters.eventstore import being_transfer, chain_check
from engram.adapters.eventstore.being_transfer import TransferRefused
from engram.services.beings import list_beings
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MessageInput, NoteInput
from tests.support import SeededIds, SteppingClock, fresh_settings, require_postgres

CANARY = "qzxtransfercanaryv"
SCENE = {"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], "when": ["2026-05-02"]}


def _fill(engram: Engram) -> None:
    engram.beings.register("Aria")
    engram.beings.register("Bo")  # another being: never exported with Aria
    for i in range(5):
        engram.notes.take(
            "Aria", NoteInput(text=json.dumps({**SCENE, "action": f"step {i}"}), idempotency_key=f"k{i}")
        )
    engram.notes.take("Bo", NoteInput(text=json.dumps(SCENE)))


def _export(
    engram: Engram, path: Path, being: str = "Aria", *, keys: bool = True
) -> being_transfer.ExportSummary:
    from engram.services.beings import resolve_being

    found = resolve_being(engram.store, being)
    with_keys = being_transfer.key_exporter(engram.store.app) if keys else None
    with path.open("w", encoding="utf-8") as f:
        return being_transfer.export_being(engram.store.app, found.name, found.id, f, with_keys=with_keys)


def _views(engram: Engram) -> Any:
    notes = engram.listing.notes("Aria", include_sensitive=True, include_inactive=True)
    nodes = engram.listing.nodes("Aria")
    return (
        sorted(json.dumps(n.model_dump(mode="json"), sort_keys=True) for n in notes),
        sorted(json.dumps(n.model_dump(mode="json"), sort_keys=True) for n in nodes),
    )


@pytest.fixture
def other_backend(backend: str, tmp_path: Path) -> Iterator[Engram]:
    """A second deployment on the other backend: SQLite to PostgreSQL and back."""
    target = "sqlite" if backend == "postgres" else "postgres"
    if target == "postgres":
        require_postgres()
    with fresh_settings(target, tmp_path) as settings:
        e = bootstrap(settings, clock=SteppingClock(), ids=SeededIds())  # type: ignore[arg-type]
        yield e
        e.close()


def test_round_trip_to_the_other_backend_gives_identical_views(
    engram: Engram, other_backend: Engram, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(being_transfer, "WRITE_BATCH", 3)  # several transactions, in file order
    _fill(engram)
    path = tmp_path / "aria.jsonl"
    summary = _export(engram, path)
    assert summary.events > 6 and summary.first_position is not None
    plan = being_transfer.plan_import(other_backend.store.app, path)
    assert being_transfer.apply_import(other_backend.store.app, plan) == summary.events
    other_backend.views.catch_up_or_rebuild()
    assert _views(other_backend) == _views(engram)
    assert [b["name"] for b in list_beings(other_backend.store)] == ["Aria"]  # Bo stayed behind
    # Idempotent: a second import writes nothing.
    again = being_transfer.plan_import(other_backend.store.app, path)
    assert again.to_write == [] and again.present == summary.events
    # And back: the target's export holds the same events (ids, versions, bytes), at its own positions.
    back = tmp_path / "back.jsonl"
    _export(other_backend, back)
    _, there, _ = being_transfer.read_file(path)
    _, here, _ = being_transfer.read_file(back)
    assert there == here
    assert chain_check.verify(other_backend.store.app).ok


@pytest.mark.parametrize(
    "damage",
    ["tampered", "truncated", "unknown format", "not an export"],
)
def test_a_damaged_file_is_refused_and_nothing_is_written(
    engram: Engram, other_backend: Engram, tmp_path: Path, damage: str
) -> None:
    _fill(engram)
    path = tmp_path / "aria.jsonl"
    _export(engram, path)
    lines = path.read_text().splitlines()
    if damage == "tampered":
        row = json.loads(lines[3])
        row["topic"] = row["topic"] + "x"
        lines[3] = json.dumps(row)
    elif damage == "truncated":
        lines = lines[:-2]
    elif damage == "unknown format":
        lines[0] = json.dumps({**json.loads(lines[0]), "format": "engram-export/99"})
    else:
        lines = ["hello"]
    path.write_text("\n".join(lines) + "\n")
    head = other_backend.store.log.head()
    with pytest.raises(TransferRefused):
        being_transfer.plan_import(other_backend.store.app, path)
    assert other_backend.store.log.head() == head


def test_a_being_made_twice_is_two_histories_and_keys_are_needed(
    engram: Engram, other_backend: Engram, tmp_path: Path
) -> None:
    _fill(engram)
    other_backend.beings.register("Aria")  # the same id, registered here on its own: another being's key
    path = tmp_path / "aria.jsonl"
    _export(engram, path)
    # Encrypted with different keys (ADR 0073), the two registrations are two histories of one id.
    with pytest.raises(TransferRefused, match="disagree"):
        being_transfer.plan_import(other_backend.store.app, path)
    bare = tmp_path / "bare.jsonl"
    _export(engram, bare, keys=False)
    fresh = tmp_path / "fresh.jsonl"
    _export(engram, fresh)
    assert '"keys": null' in bare.read_text().splitlines()[-1]
    assert '"keys": null' not in fresh.read_text().splitlines()[-1]


def test_two_histories_of_one_aggregate_are_refused(
    engram: Engram, other_backend: Engram, tmp_path: Path
) -> None:
    _fill(engram)
    other_backend.clock.now()  # type: ignore[attr-defined]  # Aria registered a second later there
    other_backend.beings.register("Aria")
    path = tmp_path / "aria.jsonl"
    _export(engram, path)
    head = other_backend.store.log.head()
    with pytest.raises(TransferRefused, match="disagree"):
        being_transfer.plan_import(other_backend.store.app, path)
    assert other_backend.store.log.head() == head


def _cli_exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[CliRunner, Path]:
    """Deployment `a` with Aria and one note, exported with `engram export`."""
    runner = CliRunner()
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "a"))
    assert runner.invoke(cli, ["being", "create", "Aria"]).exit_code == 0
    assert runner.invoke(cli, ["note", "Aria", "--scene", json.dumps(SCENE)]).exit_code == 0
    path = tmp_path / "aria.jsonl"
    out = runner.invoke(cli, ["export", "Aria", "--with-keys", "--out", str(path)])
    assert out.exit_code == 0 and "exported Aria" in out.stdout, out.stderr
    return runner, path


def test_cli_export_import_idempotent_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, path = _cli_exported(tmp_path, monkeypatch)
    bare = tmp_path / "bare.jsonl"
    assert runner.invoke(cli, ["export", "Aria", "--out", str(bare)]).exit_code == 0
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "b"))
    keyless = runner.invoke(cli, ["import", str(bare)])  # encrypted, and no key for it here
    assert keyless.exit_code == 4 and "--with-keys" in keyless.stderr
    first = runner.invoke(cli, ["import", str(path), "--json"])
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["written"] > 0
    second = runner.invoke(cli, ["import", str(path)])
    assert second.exit_code == 0 and "nothing to import" in second.stdout
    listed = runner.invoke(cli, ["being", "list", "--json"])
    assert [b["name"] for b in json.loads(listed.stdout)] == ["Aria"]
    lines = path.read_text().splitlines()
    row = json.loads(lines[-2])  # the last event: one byte of its stored state changed
    state = bytearray(base64.b64decode(row["state"]))
    state[2] ^= 1
    lines[-2] = json.dumps({**row, "state": base64.b64encode(bytes(state)).decode()})
    path.write_text("\n".join(lines) + "\n")
    refused = runner.invoke(cli, ["import", str(path)])
    assert refused.exit_code == 4 and "nothing written" in refused.stderr


def test_cli_import_over_a_being_with_other_events_needs_yes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, path = _cli_exported(tmp_path, monkeypatch)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "b"))
    assert runner.invoke(cli, ["import", str(path)]).exit_code == 0
    other = {**SCENE, "action": "Repotted the basil"}
    assert runner.invoke(cli, ["note", "Aria", "--scene", json.dumps(other)]).exit_code == 0
    back = tmp_path / "back.jsonl"
    assert runner.invoke(cli, ["export", "Aria", "--with-keys", "--out", str(back)]).exit_code == 0
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "a"))
    assert (
        runner.invoke(
            cli, ["note", "Aria", "--scene", json.dumps({**SCENE, "action": "Only in a"})]
        ).exit_code
        == 0
    )
    refused = runner.invoke(cli, ["import", str(back)])  # no terminal: refuses instead of asking
    assert refused.exit_code == 4 and "other" in refused.stderr and "--yes" in refused.stderr
    done = runner.invoke(cli, ["import", str(back), "--yes", "--json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["written"] >= 1, done.stderr


def test_a_forgotten_item_travels_as_erased_and_every_read_works_there(
    engram: Engram, other_backend: Engram, tmp_path: Path
) -> None:
    """An export of a being with forgotten items names their destroyed keys (ids, never keys): the
    target records them as destroyed, so their events read as erased there, not as missing keys."""
    from engram.domain.erasure import ErasedContent

    _fill(engram)
    engram.messages.take("Aria", MessageInput(id="m1", user="mina", text=f"my {CANARY} secret"))
    engram.patrol("Aria")  # k0's note becomes a node, under a key of its own tagged with the note
    engram.item_forgetting.forget_item("note", "k0", by="admin", being=_aria(engram))
    engram.item_forgetting.forget_item("message", "m1", by="admin", being=_aria(engram))
    engram.views.catch_up_or_rebuild()
    path = tmp_path / "aria.jsonl"
    summary = _export(engram, path)
    _, _, manifest = being_transfer.read_file(path)
    assert len(manifest["destroyed_keys"]) >= 3  # the note, its node, the message
    assert CANARY not in path.read_text()  # sealed, all of it

    plan = being_transfer.plan_import(other_backend.store.app, path)
    assert being_transfer.apply_import(other_backend.store.app, plan) == summary.events
    other_backend.views.catch_up_or_rebuild()
    assert _views(other_backend) == _views(engram)  # the forgotten note and its node in neither
    erased = [e for _, e in other_backend.store.decoded_events(1, 10_000) if isinstance(e, ErasedContent)]
    assert len(erased) == sum(isinstance(e, ErasedContent) for _, e in engram.store.decoded_events(1, 10_000))
    assert other_backend.why.why("Aria", "note", "k0")["tree"]["erased"]["by"] == "admin"
    other_backend.views.rebuild_all()  # a rebuild reads every event, the erased ones too
    assert _views(other_backend) == _views(engram)
    assert being_transfer.plan_import(other_backend.store.app, path).to_write == []  # idempotent


@pytest.mark.parametrize(
    ("destroyed", "refusal"),
    [
        (None, "item keys that neither the file nor this deployment holds"),  # an export before the list
        ([], "item keys that neither the file nor this deployment holds"),
        ("0490d3b7bf935909b519f35e26671f2c", "destroyed keys are not readable"),
        (["not a key id"], "destroyed keys are not readable"),
    ],
)
def test_a_file_whose_item_keys_are_nowhere_is_refused_and_nothing_is_written(
    engram: Engram, other_backend: Engram, tmp_path: Path, destroyed: Any, refusal: str
) -> None:
    _fill(engram)
    engram.item_forgetting.forget_item("note", "k0", by="admin", being=_aria(engram))
    path = tmp_path / "aria.jsonl"
    _export(engram, path)
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])
    if destroyed is None:
        del last["manifest"]["destroyed_keys"]
    else:
        last["manifest"]["destroyed_keys"] = destroyed
    path.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    head = other_backend.store.log.head()
    with pytest.raises(TransferRefused, match=refusal):
        being_transfer.plan_import(other_backend.store.app, path)
    assert other_backend.store.log.head() == head


def test_an_export_with_keys_is_readable_by_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, path = _cli_exported(tmp_path, monkeypatch)
    assert path.stat().st_mode & 0o777 == 0o600
    bare = tmp_path / "bare.jsonl"
    assert runner.invoke(cli, ["export", "Aria", "--out", str(bare)]).exit_code == 0
    assert bare.stat().st_mode & 0o777 == 0o666 & ~_umask()  # no keys in it: as any file


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def _aria(engram: Engram) -> Any:
    from engram.services.beings import resolve_being

    return resolve_being(engram.store, "Aria").id
