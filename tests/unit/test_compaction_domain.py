"""The pure part of context compaction (ADR 0067): the token estimate, the split, the aggregate."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from engram.domain.compaction import Compaction, Split, check_synthesis, estimate_tokens, plan_split
from engram.domain.errors import InvalidInput, InvalidTransition

AT = datetime(2026, 11, 27, 23, 0, tzinfo=UTC)


def test_tokens_are_utf8_bytes_over_four_rounded_up() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    assert estimate_tokens("été") == 2  # 5 bytes


def test_the_split_keeps_the_newest_within_30_percent_and_compacts_the_rest() -> None:
    messages = [(n, 19) for n in range(1, 9)]  # 152 tokens
    assert plan_split(messages[:7], 0, 200, 0.7) is None  # 133 ≤ 140
    split = plan_split(messages, 0, 200, 0.7)
    assert split == Split(upto=5, compacted=5, tokens_before=152, preserved_tokens=57)
    assert plan_split(messages, 0, 200, 0.8) is None  # 152 ≤ 160: no emergency
    # the synthesis so far counts: 7 messages and a 20-token synthesis are past 70%
    again = plan_split(messages[5:], 20, 100, 0.7)
    assert again is not None and again.upto == 6


def test_the_last_two_messages_are_always_kept() -> None:
    assert plan_split([(1, 150), (2, 150)], 0, 200, 0.7) is None  # nothing older to compact
    split = plan_split([(1, 100), (2, 100), (3, 100)], 0, 200, 0.7)
    assert split is not None and (split.upto, split.compacted) == (1, 1)


def test_a_compaction_only_moves_forward_and_checks_its_synthesis() -> None:
    c = Compaction.start(uuid4(), uuid4(), "lena", AT)
    split = Split(upto=5, compacted=5, tokens_before=152, preserved_tokens=57)
    kw = {"trigger": "sleep", "budget": 200, "journal_note_id": uuid4(), "model": "m", "prompt_version": "v"}
    with pytest.raises(InvalidInput):
        c.compact(split, "   ", answer=None, at=AT, **kw)  # type: ignore[arg-type]
    c.compact(split, " The garden. ", answer=None, at=AT, **kw)  # type: ignore[arg-type]
    assert (c.upto, c.synthesis, c.compactions) == (5, "The garden.", 1)
    with pytest.raises(InvalidTransition):
        c.compact(split, "Again", answer=None, at=AT, **kw)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        check_synthesis("x" * 4001)
