"""Reading a file in LoCoMo's format, whatever conversations it holds.

The format: a JSON list of samples, each with `conversation` (`speaker_a`, `speaker_b`,
`session_<n>` lists of turns `{speaker, dia_id, text, blip_caption?}` and `session_<n>_date_time`
strings such as `"1:56 pm on 8 May, 2023"`) and `qa` (`question`, `category`, `evidence` — a list of
`D<session>:<turn>` ids, some of them malformed in the wild: `"D8:6; D9:17"`, `"D:11:26"`, ids of
turns that do not exist). Nothing here knows which conversations a file holds.
"""

from __future__ import annotations

import calendar
import datetime as _dt
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engram.domain.errors import InvalidInput

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED_CATEGORIES = (1, 2, 3, 4)
"""Categories that make the overall figure; 5 (adversarial: the answer is not in the conversation) never does."""

CAPTION_KEYS = ("blip_caption", "img_caption", "image_caption", "caption")
MAX_ACTION_CHARS = 4000
MAX_ACTOR_CHARS = 200

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.IGNORECASE)
_CLEAN_ID = re.compile(r"^D(\d+):(\d+)$")
_TIME = re.compile(r"\b\d{1,2}[:.]\d{2}(?:[:.]\d{2})?\s*(?:[ap]\.?\s?m\.?)?", re.IGNORECASE)
_ISO = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_NUMERIC = re.compile(r"\b(\d{1,2})[/.](\d{1,2})[/.](\d{4})\b")
_TOKEN = re.compile(r"[A-Za-z]+|\d+")

_MONTHS: dict[str, int] = {}
for _i in range(1, 13):
    _MONTHS[calendar.month_name[_i].lower()] = _i
    _MONTHS[calendar.month_abbr[_i].lower()] = _i
_MONTHS["sept"] = 9


def parse_date(text: str) -> str | None:
    """A session's date as `YYYY-MM-DD`, from strings such as `"1:56 pm on 8 May, 2023"`,
    `"May 8th 2023, 10:00"`, `"2023-05-08T13:56"` or `"08/05/2023"` (day first); None if there is none."""
    if not isinstance(text, str) or not text.strip():
        return None
    iso = _ISO.search(text)
    if iso:
        return _safe_date(int(iso[1]), int(iso[2]), int(iso[3]))
    rest = _TIME.sub(" ", text)
    numeric = _NUMERIC.search(rest)
    if numeric:
        first, second, year = int(numeric[1]), int(numeric[2]), int(numeric[3])
        if second > 12 >= first:  # only month-first reads as a date
            first, second = second, first
        return _safe_date(year, second, first)
    tokens = _TOKEN.findall(rest)
    month_at = next((i for i, t in enumerate(tokens) if t.lower() in _MONTHS), None)
    if month_at is None:
        return None
    found_year = next((int(t) for t in tokens if t.isdigit() and len(t) == 4), None)
    if found_year is None:
        return None

    days = [
        (abs(i - month_at), i > month_at, int(t))
        for i, t in enumerate(tokens)
        if t.isdigit() and len(t) <= 2 and 1 <= int(t) <= 31 and abs(i - month_at) <= 3
    ]
    day = min(days)[2] if days else 1  # the number nearest the month, before it on a tie
    return _safe_date(found_year, _MONTHS[tokens[month_at].lower()], day)


def _safe_date(year: int, month: int, day: int) -> str | None:
    try:
        return _dt.date(year, month, day).isoformat()
    except ValueError:
        return None


def session_of(dia_id: str | None) -> int | None:
    """The session number of a clean `D<session>:<turn>` id."""
    m = _CLEAN_ID.match(dia_id or "")
    return int(m[1]) if m else None


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    text: str
    caption: str | None
    date: str

    def action(self) -> str:
        """What the memory remembers: the turn's text, plus the caption of the image it shared."""
        text = self.text.strip()
        if self.caption:
            text = f"{text} [shared an image: {self.caption.strip()}]" if text else self.caption.strip()
        return text[:MAX_ACTION_CHARS]


@dataclass(frozen=True)
class Question:
    index: int
    text: str
    category: int | str
    evidence: tuple[str, ...]
    """Normalised evidence: clean ids of turns that exist, deduplicated, in the order given."""
    raw_evidence: tuple[str, ...]


@dataclass
class EvidenceCounts:
    """What normalising the evidence strings did, over a whole file."""

    strings: int = 0
    clean: int = 0
    repaired: int = 0
    """Malformed strings from which ids were recovered (`"D8:6; D9:17"`, `"D:11:26"`, `"D05:3"`)."""
    unparseable: int = 0
    """Strings with no id in them: dropped."""
    unknown_ids: int = 0
    """Well-formed ids of turns the conversation does not have: dropped."""
    duplicate_ids: int = 0
    questions_without_evidence: int = 0
    """Questions left with no evidence: scored nowhere (counted per category in the report)."""

    def add(self, other: EvidenceCounts) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def normalise_evidence(
    raw: Any, known: Iterable[str]
) -> tuple[tuple[str, ...], tuple[str, ...], EvidenceCounts]:
    """(kept ids, the raw strings, counts). `raw` is a list of strings or one string."""
    items: list[str]
    if raw is None:
        items = []
    elif isinstance(raw, str):
        items = [raw]
    else:
        items = [str(x) for x in raw if x is not None]
    known_ids = set(known)
    counts = EvidenceCounts(strings=len(items))
    kept: list[str] = []
    for item in items:
        found = [f"D{int(s)}:{int(t)}" for s, t in _DIA_ID.findall(item)]
        if not found:
            counts.unparseable += 1
            continue
        if len(found) == 1 and item.strip() == found[0]:
            counts.clean += 1
        else:
            counts.repaired += 1
        for dia in found:
            if dia not in known_ids:
                counts.unknown_ids += 1
            elif dia in kept:
                counts.duplicate_ids += 1
            else:
                kept.append(dia)
    return tuple(kept), tuple(items), counts


@dataclass
class Conversation:
    index: int
    sample_id: str
    speakers: tuple[str, ...]
    turns: list[Turn]
    questions: list[Question]
    evidence: EvidenceCounts = field(default_factory=EvidenceCounts)
    undated_sessions: int = 0
    skipped_turns: int = 0
    skipped_questions: int = 0


def _category(value: Any) -> int | str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return str(value)


def _sessions(conv: dict[str, Any]) -> list[tuple[int, list[Any], str | None]]:
    """(number, turns, date) of every session, in session order; dates fall back to the nearest known one."""
    found: list[tuple[int, list[Any], str | None]] = []
    for key, value in conv.items():
        m = _SESSION_KEY.match(key)
        if m and isinstance(value, list):
            n = int(m[1])
            raw = conv.get(f"session_{n}_date_time", conv.get(f"session_{n}_date"))
            found.append((n, value, parse_date(raw) if isinstance(raw, str) else None))
    found.sort(key=lambda s: s[0])
    return found


def _conversation(index: int, sample: dict[str, Any]) -> Conversation:
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise InvalidInput(f"sample {index}: no `conversation` object")
    sample_id = str(sample.get("sample_id") or f"sample-{index + 1}")
    speakers = tuple(str(conv[k]) for k in ("speaker_a", "speaker_b") if conv.get(k))
    sessions = _sessions(conv)
    dates = [d for _, _, d in sessions]
    undated = sum(1 for d in dates if d is None)
    turns: list[Turn] = []
    skipped = 0
    seen: set[str] = set()
    for si, (number, items, date) in enumerate(sessions):
        if date is None:  # the nearest earlier dated session, else the nearest later one
            date = next((d for d in reversed(dates[:si]) if d), None) or next(
                (d for d in dates[si + 1 :] if d), "1970-01-01"
            )
        for ti, item in enumerate(items, 1):
            if not isinstance(item, dict):
                skipped += 1
                continue
            caption = next(
                (str(item[k]) for k in CAPTION_KEYS if isinstance(item.get(k), str) and item[k]), None
            )
            text = str(item.get("text") or "")
            found = _DIA_ID.search(str(item.get("dia_id") or ""))
            dia_id = f"D{int(found[1])}:{int(found[2])}" if found else f"D{number}:{ti}"
            if not (text.strip() or caption) or dia_id in seen:
                skipped += 1
                continue
            seen.add(dia_id)
            speaker = str(item.get("speaker") or "unknown").strip()[:MAX_ACTOR_CHARS] or "unknown"
            turns.append(Turn(dia_id, session_of(dia_id) or number, speaker, text, caption, date))
    known = [t.dia_id for t in turns]
    questions: list[Question] = []
    totals = EvidenceCounts()
    skipped_q = 0
    for qi, qa in enumerate(sample.get("qa") or []):
        text = str(qa.get("question") or "").strip() if isinstance(qa, dict) else ""
        if not text:
            skipped_q += 1
            continue
        kept, raw, counts = normalise_evidence(qa.get("evidence"), known)
        if not kept:
            counts.questions_without_evidence = 1
        totals.add(counts)
        questions.append(Question(qi, text, _category(qa.get("category")), kept, raw))
    return Conversation(index, sample_id, speakers, turns, questions, totals, undated, skipped, skipped_q)


def load(path: Path, limit: int | None = None) -> list[Conversation]:
    """The conversations of a LoCoMo-format file (the first `limit` of them)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path} is not a JSON file: {exc}") from None
    if isinstance(data, dict):  # one sample on its own
        data = [data]
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        raise InvalidInput(f"{path}: expected a JSON list of LoCoMo samples")
    samples: Sequence[dict[str, Any]] = data if limit is None else data[:limit]
    return [_conversation(i, s) for i, s in enumerate(samples)]


def category_label(category: int | str) -> str:
    name = CATEGORY_NAMES.get(category) if isinstance(category, int) else None
    return f"{category} {name}" if name else f"{category}"


def category_counts(conversations: Sequence[Conversation]) -> Counter[int | str]:
    return Counter(q.category for c in conversations for q in c.questions)
