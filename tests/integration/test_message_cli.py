"""`engram message`, `engram messages import` and `engram messages search` as a user drives them, on
both backends: results as text and JSON, duplicates and conflicts, an import in time order with its
refusals by line, an idempotent re-run, and the shared bad inputs refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration import test_note_lifecycle_cli
from tests.integration.test_note_lifecycle_cli import Run
from tests.message_cases import GOOD, bad_messages

run = test_note_lifecycle_cli.run  # the fixture: the CLI on the test's backend, with Aria made


def _received(run: Run) -> int:
    _, out, _ = run("log", "--being", "Aria", "--limit", "10000", "--json")
    return sum(e["type"] == "Message.Received" for e in json.loads(out))


def _options(fields: dict[str, Any]) -> list[str]:
    """A case's fields as `engram message` options."""
    args: list[str] = []
    for name, value in fields.items():
        args += [f"--{name}", str(value)]
    return args


def test_a_message_is_taken_once_and_a_conflict_exits_4(run: Run) -> None:
    args = ["message", "Aria", "--user", "mina", "--id", "m-1", "--channel", "telegram"]
    _, out, _ = run(*args, "--text", "Shall we plant tomatoes?", "--at", "2026-10-30T09:00:00Z")
    assert out.startswith("took message m-1 #1 from mina, session ")
    _, out, _ = run(*args, "--text", "Shall we plant tomatoes?", "--at", "2026-10-30T09:00:00Z", "--json")
    taken = json.loads(out)
    assert taken["duplicate"] is True and taken["number"] == 1 and taken["at"] == "2026-10-30T09:00:00+00:00"
    code, out, err = run(*args, "--text", "Something else", "--json", ok=False)
    assert code == 4 and not out and json.loads(err)["error"] == "conflict"
    _, out, _ = run("message", "Aria", "--user", "mina", "--id", "m-2", "--role", "assistant", "--text",
                    "Yes, on Saturday.", "--urgent", "--priority", "9", "--json")  # fmt: skip
    answer = json.loads(out)
    assert (answer["role"], answer["number"], answer["duplicate"]) == ("assistant", 2, False)
    assert _received(run) == 2


@bad_messages()
def test_bad_messages_are_refused_naming_the_field(
    run: Run, fields: dict[str, Any], field: str, code: str
) -> None:
    exit_code, out, err = run("message", "Aria", *_options(fields), "--json", ok=False)
    assert exit_code == 2 and not out, err
    error = json.loads(err)
    assert error["error"] == code
    named = [e["field"] for e in error["details"].get("errors", [])] + [error["details"].get("field")]
    assert field in named, error
    assert _received(run) == 0


def _write(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n",
        encoding="utf-8",
    )
    return path


def test_an_import_takes_history_in_time_order_and_reports_bad_lines(run: Run, tmp_path: Path) -> None:
    lines: list[Any] = [
        {"id": "h-3", "user": "mina", "text": "See you on Saturday then", "at": "2026-10-30T10:00:00Z"},
        {
            "id": "h-1",
            "user": "mina",
            "channel": "tg",
            "text": "Shall we plant tomatoes?",
            "at": "2026-10-30T09:00:00Z",
        },
        "{not json",
        '["a list"]',
        {"id": "h-4", "user": "mina", "role": "robot", "text": "beep"},
        {
            "id": "h-2",
            "user": "mina",
            "role": "assistant",
            "text": "Yes, the cherry ones.",
            "at": "2026-10-30T09:05:00Z",
            "urgent": True,
            "priority": 3,
        },
        {"id": "h-5", "user": "tom", "text": "no time given, taken last"},
    ]
    path = _write(tmp_path / "history.jsonl", lines)
    code, out, err = run("messages", "import", "Aria", str(path), "--json", ok=False)
    assert code == 2, err
    report = json.loads(out)
    assert (report["total"], report["taken"], report["duplicates"], report["refused"]) == (7, 4, 0, 3)
    assert report["sessions"] == 3  # mina: 09:00-09:05, then 10:00 (55 minutes later); tom: one
    refused = [(r["line"], r["field"]) for r in report["refused_lines"]]
    assert refused == [(3, "line"), (4, "line"), (5, "role")]
    assert "refused: line 3: not JSON" in err and "refused: line 5: role:" in err
    assert "importing history.jsonl: 7/7 lines, taken 4" in err  # the progress line
    # Taken in time order: h-1, h-2 (same session), then h-3 (a new one); h-5 after them.
    _, out, _ = run("messages", "search", "Aria", "tomatoes saturday cherry given", "--json")
    hits = {h["id"]: h for h in json.loads(out)["hits"]}
    assert set(hits) == {"h-1", "h-2", "h-3", "h-5"}
    assert hits["h-1"]["session_id"] == hits["h-2"]["session_id"] != hits["h-3"]["session_id"]
    # Run again: nothing new, and the same lines refused.
    code, out, err = run("messages", "import", "Aria", str(path), ok=False)
    assert code == 2
    assert out.strip() == (f"imported {path}: 0 taken, 4 duplicates, 3 refused, in 3 session(s)")
    assert _received(run) == 4


def test_an_import_writes_the_summaries_that_are_due_unless_told_not_to(run: Run, tmp_path: Path) -> None:
    def chat(prefix: str, day: int) -> list[dict[str, Any]]:
        return [
            {
                "id": f"{prefix}{i}",
                "user": "mina",
                "text": f"We talked about the garden and the tomatoes, part {i}.",
                "at": f"2026-10-{day:02d}T09:{i:02d}:00Z",
            }
            for i in range(6)
        ]

    # Two days of chat: the first session closed by the second, which stays open (6 turns).
    path = _write(tmp_path / "two-days.jsonl", chat("a", 1) + chat("b", 2))
    _, out, _ = run("messages", "import", "Aria", str(path), "--json")
    summaries = json.loads(out)["summaries"]
    assert (summaries["sessions"], summaries["rolling"]) == (1, 1)
    _, listed, _ = run("sessions", "list", "Aria", "--json")
    sessions = json.loads(listed)["sessions"]
    assert sorted(s["summary_method"] or "-" for s in sessions) == ["-", "extractive"]

    more = _write(tmp_path / "third-day.jsonl", chat("c", 3))
    _, out, _ = run("messages", "import", "Aria", str(more), "--no-summaries", "--json")
    assert json.loads(out)["summaries"] is None
    _, listed, _ = run("sessions", "list", "Aria", "--json")
    assert [s["summary_method"] for s in json.loads(listed)["sessions"]].count(
        None
    ) == 2  # left to the worker


def test_an_import_with_a_conflict_only_exits_4(run: Run, tmp_path: Path) -> None:
    run("message", "Aria", "--user", "mina", "--id", "c-1", "--text", "first words")
    path = _write(tmp_path / "c.jsonl", [{"id": "c-1", "user": "mina", "text": "other words"}, {**GOOD}])
    code, out, err = run("messages", "import", "Aria", str(path), "--json", ok=False)
    assert code == 4 and json.loads(out)["taken"] == 1
    assert "refused: line 1: id: message id 'c-1' was taken before with other content" in err


@bad_messages()
def test_bad_lines_are_refused_naming_line_and_field(
    run: Run, tmp_path: Path, fields: dict[str, Any], field: str, code: str
) -> None:
    ok = {"id": "fine", "user": "mina", "text": "a fine message"}
    path = _write(tmp_path / "bad.jsonl", [ok, fields])
    exit_code, out, err = run("messages", "import", "Aria", str(path), "--json", ok=False)
    assert exit_code == 2, err
    report = json.loads(out)
    assert report["taken"] == 1 and [(r["line"], r["field"], r["code"]) for r in report["refused_lines"]] == [
        (2, field, code)
    ]
    assert _received(run) == 1


def test_search_prints_hits_newest_first_among_equals(run: Run) -> None:
    for key, at, channel in (("s-1", "2026-10-30T09:00:00Z", "tg"), ("s-2", "2026-10-31T09:00:00Z", "mail")):
        run("message", "Aria", "--user", "mina", "--id", key, "--channel", channel, "--at", at, "--text",
            "the tomatoes are ripe")  # fmt: skip
    _, out, _ = run("messages", "search", "Aria", "Tomatoes!")
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("2026-10-31 09:00  mina@mail (user)")
    assert lines[0].endswith("the tomatoes are ripe  [s-2]") and lines[1].endswith("[s-1]")
    _, out, _ = run("messages", "search", "Aria", "tomatoes", "--channel", "tg", "--json")
    assert [h["id"] for h in json.loads(out)["hits"]] == ["s-1"]
    _, out, err = run("messages", "search", "Aria", "!!! ???")
    assert out == "" and "no message matches" in err
    code, _, err = run("messages", "search", "Aria", "x" * 10_000, ok=False)
    assert code == 2 and "at most 4000 characters" in err
