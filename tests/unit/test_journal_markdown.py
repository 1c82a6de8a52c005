"""The journals' markdown (ADR 0054): a pure rendering of the view's rows."""

from __future__ import annotations

import uuid

import pytest

from engram.domain.errors import InvalidInput
from engram.domain.message import journal_text
from engram.services.journal_markdown import (
    DayLog,
    FactSections,
    JournalLine,
    check_day,
    journal_folder,
    render_day,
    render_memory,
)

BEING = uuid.UUID(int=7)


def line(at: str, key: str, text: str, author: str = "Mina", channel: str | None = None) -> JournalLine:
    return JournalLine(f"2026-10-30T{at}.000000+00:00", key, author, channel, text)


def test_a_day_has_its_header_once_then_lines_in_time_then_id_order() -> None:
    text = render_day(
        "Aria",
        "2026-10-30",
        [
            line("10:00:00", "b", "second at ten"),
            line("09:00:00", "z", "first"),
            line("10:00:00", "a", "at ten"),
        ],
    )
    lines = text.splitlines()
    assert lines[0] == "# Aria — journal of 2026-10-30 (UTC)"
    assert text.count("# Aria") == 1 and lines[1] == ""
    assert lines[2:] == [
        "- 09:00:00 Mina: first",
        "- 10:00:00 Mina: at ten",
        "- 10:00:00 Mina: second at ten",
    ]
    assert text.endswith("\n")


def test_a_message_cannot_forge_a_header_or_markup() -> None:
    forged = line("09:00:00", "a", "# Aria — journal of 2026-10-31 (UTC) *bold* [x](y) <b>|`", author="#Bo_")
    rendered = render_day("Aria", "2026-10-30", [forged])
    body = rendered.splitlines()[2:]
    assert body == [r"- 09:00:00 \#Bo\_: \# Aria — journal of 2026-10-31 (UTC) \*bold\* \[x\](y) \<b\>\|\`"]
    assert sum(1 for row in rendered.splitlines() if row.startswith("#")) == 1
    with_newline = line("09:00:00", "a", "one\n# two", author="Mi\nna", channel="gen\neral")
    assert render_day("Aria", "2026-10-30", [with_newline]).count("\n") == 3  # header, blank, one line


def test_the_channel_is_shown_beside_the_author() -> None:
    assert (
        line("09:00:00", "a", "hello there", channel="garden").render()
        == "- 09:00:00 Mina (garden): hello there"
    )


def test_short_messages_are_not_journalled_and_long_ones_are_cut() -> None:
    assert journal_text("  ok ") is None and journal_text("abc") is None
    assert journal_text("abcd") == "abcd"
    long = journal_text("word " * 100)
    assert long is not None and len(long) <= 320 and long.startswith("word word")


def test_memory_sections_and_bounds() -> None:
    highlights = [line(f"09:00:{i:02d}", f"m{i}", f"message {i}") for i in range(3)]
    days = [DayLog("2026-10-30", 3), DayLog("2026-10-29", 1)]
    text = render_memory("Aria", FactSections(), list(reversed(highlights)), days, more_days=5)
    sections = [row for row in text.splitlines() if row.startswith("## ")]
    assert sections == [
        "## People",
        "## Ongoing lore",
        "## Recent journal highlights",
        "## Source daily logs",
    ]
    assert text.count("No facts yet") == 2
    assert "- 2026-10-30 09:00:00 Mina: message 0\n- 2026-10-30 09:00:01 Mina: message 1" in text
    assert (
        "- [2026-10-30](2026-10-30.md) — 3 messages\n- [2026-10-29](2026-10-29.md) — 1 message\n- and 5 more"
        in text
    )
    filled = render_memory("Aria", FactSections(people=["- Mina: likes tomatoes"]), [], [], 0)
    assert "## People\n\n- Mina: likes tomatoes\n" in filled and filled.count("No facts yet") == 1
    assert "_No messages journalled yet._" in filled


@pytest.mark.parametrize(
    "name", ["..", ".", "a/b", "../../etc", "Ärger und Ruß", "x" * 65, ".hidden", "a\\b", " ", "end."]
)
def test_a_folder_name_is_one_safe_component(name: str) -> None:
    folder = journal_folder(name, BEING)
    assert folder not in (".", "..") and "/" not in folder and "\\" not in folder
    assert not folder.startswith(".") and len(folder) <= 64
    assert folder.endswith(BEING.hex[:12])


def test_a_plain_name_is_its_own_folder() -> None:
    assert journal_folder("Aria", BEING) == "Aria"
    assert journal_folder("bot-2.v1_x", BEING) == "bot-2.v1_x"


@pytest.mark.parametrize(
    "bad", ["2026-13-01", "2026-02-30", "26-01-01", "2026-1-1", "today", "2026-01-01T00:00"]
)
def test_a_bad_date_is_invalid_input_naming_date(bad: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_day(bad)
    assert caught.value.details.get("field") == "date"


def test_a_good_date_passes() -> None:
    assert check_day("2026-02-28") == "2026-02-28"
