"""`engram facts …`, `engram lore`, `engram space …`, `engram entity …` and `engram show|history fact`
as a user drives them, on both backends; the shared bad facts refused naming the field, nothing
written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fact_cases import GOOD, bad_facts
from tests.integration import test_note_lifecycle_cli
from tests.integration.test_note_lifecycle_cli import Run

run = test_note_lifecycle_cli.run  # the fixture: the CLI on the test's backend, with Aria made


def _options(fields: dict[str, Any]) -> list[str]:
    """A case's fields as `engram facts add` options."""
    flags = {"entity_refs": "entity"}
    args: list[str] = []
    for name, value in fields.items():
        flag = "--" + flags.get(name, name).replace("_", "-")
        for item in value if isinstance(value, list) else [value]:
            args += [flag, str(item)]
    return args


def _stated(run: Run) -> int:
    _, out, _ = run("log", "--limit", "10000", "--json")
    return sum(e["type"].startswith("Fact.") for e in json.loads(out))


def test_add_list_pin_archive_show_and_history(run: Run) -> None:
    add = ["facts", "add", "Aria", "--subject", "mina", "--memory-key", "profile|person|mina|fact"]
    _, out, _ = run(*add, "--text", "Mina lives in Austin", "--entity", "person:mina")
    assert out.startswith("stated fact ") and "version 1, importance 1, active" in out
    fact_id = out.split()[2]
    _, out, _ = run(*add, "--text", "Mina lives in Austin", "--json")
    assert (json.loads(out)["outcome"], json.loads(out)["importance"]) == ("reinforced", 2)
    _, out, _ = run(*add, "--text", "Mina lives in Denver", "--json")
    assert json.loads(out)["version"] == 3
    _, out, _ = run("facts", "list", "Aria")
    assert f"{fact_id}  [Aria] mina: Mina lives in Denver  (other, importance 1, active, v3)" in out
    _, out, _ = run("facts", "pin", "Aria", fact_id)
    assert out.strip() == f"pinned fact {fact_id} (active)"
    code, _, err = run("facts", "archive", "Aria", fact_id, "--json", ok=False)
    assert code == 4 and "pinned" in json.loads(err)["message"]
    run("facts", "unpin", "Aria", fact_id)
    run("facts", "archive", "Aria", fact_id)
    _, out, _ = run("facts", "list", "Aria", "--json")
    assert json.loads(out) == []
    _, out, _ = run("facts", "list", "Aria", "--all", "--json")
    assert [(r["status"], r["importance"]) for r in json.loads(out)] == [("archived", 1)]
    _, out, _ = run("history", "fact", fact_id, "--json")
    assert [e["type"] for e in json.loads(out)][-3:] == ["Fact.Pinned", "Fact.Unpinned", "Fact.Archived"]
    _, out, _ = run("show", "fact", fact_id, "--as-of", "2", "--json")
    assert json.loads(out)["text"] == "Mina lives in Austin"


@bad_facts()
def test_bad_facts_are_refused_naming_the_field(
    run: Run, fields: dict[str, Any], field: str, code: str
) -> None:
    exit_code, out, err = run("facts", "add", "Aria", *_options(fields), "--json", ok=False)
    assert exit_code == 2 and not out, err
    error = json.loads(err)
    assert error["error"] == code
    named = [e["field"] for e in error["details"].get("errors", [])] + [error["details"].get("field")]
    assert field in named, error
    assert _stated(run) == 0


def test_spaces_lore_and_entities(run: Run) -> None:
    run("being", "create", "Bea")
    run("being", "create", "Cal")
    _, out, _ = run("space", "create", "family", "--being", "Aria", "--being", "Bea")
    assert out.startswith("created space family (")
    code, _, err = run("facts", "add", "Cal", "--subject", "mina", "--text", "Mina likes tea",
                       "--space", "family", "--json", ok=False)  # fmt: skip
    assert code == 2 and json.loads(err)["details"]["field"] == "space"
    run("facts", "add", "Bea", "--subject", "mina", "--text", "Mina likes tea", "--space", "family")
    _, out, _ = run("lore", "Aria", "the harbour floods in spring", "--space", "family")
    assert "of space family" in out
    _, out, _ = run("facts", "list", "Aria", "--json")
    assert sorted(r["text"] for r in json.loads(out)) == [
        "Memory line: the harbour floods in spring.",
        "Mina likes tea",
    ]
    _, out, _ = run("facts", "list", "Cal", "--json")
    assert json.loads(out) == []  # 0 leaks
    run("space", "join", "family", "Cal")
    _, out, _ = run("space", "list", "Cal")
    assert out.strip().endswith("members: Aria, Bea, Cal")
    _, out, _ = run("space", "leave", "family", "Bea")
    assert out.strip() == "Bea leave family: 2 member(s)"
    _, out, _ = run("entity", "merge", "Aria", "person:makesh", "person:mukesh")
    assert out.strip() == "merged person:makesh into person:mukesh for Aria"
    code, _, err = run("entity", "merge", "Aria", "person:mukesh", "person:makesh", "--json", ok=False)
    assert code != 0 and json.loads(err)["error"]
    run("entity", "unmerge", "Aria", "person:makesh")


def test_import_is_idempotent_and_names_bad_lines(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "profile.jsonl"
    lines = [
        json.dumps(GOOD),
        json.dumps({**GOOD, "text": "Mina likes tea"}),
        json.dumps({**GOOD, "confidence": 3}),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, err = run("facts", "import", "Aria", str(path), ok=False)
    assert code == 2
    assert out.strip() == f"imported {path}: 2 written (2 stated), 0 unchanged, 1 refused"
    assert "refused: line 3: confidence is between 0 and 1" in err
    before = _stated(run)
    _, out, _ = run("facts", "import", "Aria", str(path), "--json", ok=False)
    assert (json.loads(out)["written"], json.loads(out)["unchanged"]) == (0, 2)
    assert _stated(run) == before
    _, out, _ = run("facts", "list", "Aria", "--json")
    assert {r["source"] for r in json.loads(out)} == {"seeded_profile"}
