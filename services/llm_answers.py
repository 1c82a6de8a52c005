"""Bounding what an LLM said before it is kept: the answer cap and the first bytes of a bad response (ADR 0026).

Both adapters and patrol use these, so that an answer is cut the same way wherever it is cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from engram.services.config import DEFAULT_MAX_ANSWER_KIB
from engram.services.ports import LLMAnswerTooLarge

__all__ = ["DEFAULT_MAX_ANSWER_KIB", "capped", "refuse_over_cap"]
KEPT_OF_A_CUT_ANSWER = 1024
"""How much of an answer over the cap is kept for the record."""
FIRST_BYTES = 256
"""How much of a body that held no answer is kept for the record and the error message."""

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def size_label(n_bytes: int) -> str:
    """`32 KiB` for whole kibibytes, else `1,000 bytes`."""
    if n_bytes >= 1024 and n_bytes % 1024 == 0:
        return f"{n_bytes // 1024:,} KiB"
    return f"{n_bytes:,} bytes"


def capped(text: str, cap_bytes: int) -> str:
    """`text` if its UTF-8 form fits in `cap_bytes`; else only its first bytes (`KEPT_OF_A_CUT_ANSWER`, or
    less under a smaller cap) and a mark of the cut, never more than the cap.

    An answer over the cap is a rejection, so its start is enough for the record: it tells what the
    model or server sent without storing it (ADR 0026). A character split by the cut is dropped.
    """
    data = text.encode("utf-8")
    if len(data) <= cap_bytes:
        return text
    mark = f"…[cut: {len(data):,} bytes, cap {size_label(cap_bytes)}]"
    keep = max(min(cap_bytes, KEPT_OF_A_CUT_ANSWER) - utf8_size(mark), 0)
    return data[:keep].decode("utf-8", "ignore") + mark


def refuse_over_cap(raw: str, cap_bytes: int, *, what: str) -> None:
    """Raise `LLMAnswerTooLarge` (keeping the answer's start, cut marked) when `raw` is over the cap."""
    size = utf8_size(raw)
    if size > cap_bytes:
        raise LLMAnswerTooLarge(
            f"{what} has {size:,} bytes, over the cap of {size_label(cap_bytes)}",
            raw=capped(raw, cap_bytes),
            size=size,
        )


def first_bytes(body: bytes, redact: Callable[[str], str]) -> str:
    """The start of a body as one printable line, secrets redacted, control and text-direction characters
    escaped, the cut marked with the body's size. At most `FIRST_BYTES` bytes of the body are kept.

    Redaction runs on a wider window than is kept, so that no key is cut in two and half kept.
    """
    text = redact(body[: FIRST_BYTES * 2].decode("utf-8", "ignore")).encode("utf-8")
    kept = _UNPRINTABLE.sub(_escaped, text[:FIRST_BYTES].decode("utf-8", "ignore"))
    if len(body) > FIRST_BYTES or len(text) > FIRST_BYTES:
        kept += f"…[cut: {len(body):,} bytes]"
    return kept


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
