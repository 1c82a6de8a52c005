"""The journals' markdown (spec 001, ADR 0054): a file per UTC day and MEMORY.md, pure functions of
the conversations view's rows. No clock, no file, no randomness: the same rows give the same bytes,
which is what makes a journal rebuilt from the log byte-identical to the one written live.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any
from uuid import UUID

from engram.domain.errors import InvalidInput
from engram.domain.message import Role

JOURNAL_FORMAT = 1
"""The rendering's version, kept in each folder's state: a refresh after it changed rewrites every file."""

MEMORY_FILE = "MEMORY.md"
HIGHLIGHTS = 12
"""MEMORY.md's "Recent journal highlights": the latest journal lines, at most this many."""
SOURCE_DAYS = 14
"""MEMORY.md's "Source daily logs": the latest days linked, at most this many, then "and N more"."""
MAX_FOLDER_CHARS = 64

# Backslash-escaped wherever they appear in a message or a name: with them escaped, a line's text is
# plain text in every CommonMark reader (no emphasis, link, HTML, header or table cell it could open).
_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")
_SAFE_FOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def escape(text: str) -> str:
    """`text` on one line (every run of whitespace one space) with markdown's specials escaped."""
    return _SPECIAL.sub(r"\\\1", " ".join(text.split()))


def check_day(value: str) -> str:
    """A journal's day, `YYYY-MM-DD` (a real date), or `invalid_input` naming `date`."""
    if not isinstance(value, str) or not _DAY.fullmatch(value):
        raise InvalidInput(f"a journal's date is YYYY-MM-DD, not {value!r}", field="date")
    try:
        date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{value} is not a date", field="date") from None
    return value


def journal_folder(name: str, being_id: UUID) -> str:
    """The being's folder name under the journal dir: its name when that is a plain file name
    (letters, digits, `.`, `_`, `-`, not starting with a dot, at most 64 characters); otherwise an
    ASCII slug of the name and the first 12 hex digits of the being's id, so that no name can climb
    out of the journal dir (`..`, `/`) and two names that slug alike keep apart."""
    if len(name) <= MAX_FOLDER_CHARS and _SAFE_FOLDER.fullmatch(name) and not name.endswith("."):
        return name
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", ascii_name).strip("-_")[:40] or "being"
    return f"{slug}-{being_id.hex[:12]}"


@dataclass(frozen=True)
class JournalLine:
    """One journalled message: its instant (utc_text), the caller's id, author, channel, cleaned text."""

    at: str
    key: str
    author: str
    channel: str | None
    text: str

    @classmethod
    def of(cls, row: Mapping[str, Any], being_name: str) -> JournalLine:
        """From a `messages` row: the user writes a user message, the being its own answers."""
        author = being_name if row["role"] == Role.ASSISTANT.value else row["user_id"]
        return cls(row["at"], row["message_key"], author, row["channel"], row["clean"])

    def render(self, *, with_day: bool = False) -> str:
        when = f"{self.at[:10]} {self.at[11:19]}" if with_day else self.at[11:19]
        where = f" ({escape(self.channel)})" if self.channel else ""
        return f"- {when} {escape(self.author)}{where}: {escape(self.text)}"


def journal_order(lines: Sequence[JournalLine]) -> list[JournalLine]:
    """Journal order: time, then the caller's message id (what `day_messages` sorts by)."""
    return sorted(lines, key=lambda line: (line.at, line.key))


def render_day(being_name: str, day: str, lines: Sequence[JournalLine]) -> str:
    """`journals/<being>/YYYY-MM-DD.md`: the header once, then one line per message in journal order."""
    body = "".join(line.render() + "\n" for line in journal_order(lines))
    return f"# {escape(being_name)} — journal of {day} (UTC)\n\n{body}"


@dataclass(frozen=True)
class FactSections:
    """MEMORY.md's People (durable facts by subject) and Ongoing lore, as markdown lines.

    Empty until fact extraction (#11) writes facts; `services/journals.fact_sections` is where it
    fills them."""

    people: Sequence[str] = field(default_factory=tuple)
    lore: Sequence[str] = field(default_factory=tuple)


@dataclass(frozen=True)
class DayLog:
    day: str
    lines: int


NO_FACTS = "_No facts yet: facts are extracted from the messages once fact extraction runs._"


def _section(title: str, lines: Sequence[str], empty: str) -> str:
    return f"## {title}\n\n" + ("".join(f"{line}\n" for line in lines) if lines else f"{empty}\n")


def render_memory(
    being_name: str,
    facts: FactSections,
    highlights: Sequence[JournalLine],
    days: Sequence[DayLog],
    more_days: int,
) -> str:
    """MEMORY.md: People, Ongoing lore, Recent journal highlights (in journal order), Source daily
    logs (the latest first, linked to their files, then "and N more")."""
    recent = [line.render(with_day=True) for line in journal_order(highlights)]
    sources = [f"- [{d.day}]({d.day}.md) — {d.lines} message{'s' if d.lines != 1 else ''}" for d in days]
    if more_days > 0:
        sources.append(f"- and {more_days} more")
    return "\n".join(
        (
            f"# {escape(being_name)} — MEMORY.md\n",
            "Written by Engram from its log; a refresh overwrites it.\n",
            _section("People", facts.people, NO_FACTS),
            _section("Ongoing lore", facts.lore, NO_FACTS),
            _section("Recent journal highlights", recent, "_No messages journalled yet._"),
            _section("Source daily logs", sources, "_No daily logs yet._"),
        )
    )
