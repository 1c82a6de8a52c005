"""The guards of spec 001 on each fact an LLM extracted from a message (issue #11, ADR 0058).

Each returns why a candidate is refused, or None; the extractor records every refusal with its
reason. Lengths and shapes are the domain's (`FactContent`); here are what only the message tells:

- instruction- or injection-like text, secrets and keys, markup (patrol's guards and a few more);
- first-person or assistant-centred text (spec 003's persona protection: facts are third person);
- grounding: the fact is a compact substring of the message, or shares at least 45% of its content
  words with it; a short fact (fewer than 4 content words) may miss at most one of them.
"""

from __future__ import annotations

import re

from engram.services.patrol.proposed_text import Inputs, text_problem

GROUNDED_SHARE = 0.45
SHORT_FACT_WORDS = 4

_WORD = re.compile(r"\w+")
_MARKUP = re.compile(r"<\s*/?\s*[a-z!][a-z0-9-]*(?:\s[^<>]*)?>|&(?:lt|gt|amp|#\d+);", re.IGNORECASE)
_SECRET = re.compile(
    r"""
      \b(?:api[\s_-]?keys?|secret[\s_-]?keys?|access[\s_-]?tokens?|passwords?|passwd|private[\s_-]?keys?)\b
    | \bsk-[A-Za-z0-9_-]{12,}
    | \bAKIA[0-9A-Z]{16}\b
    | \bgh[pousr]_[A-Za-z0-9]{20,}
    | -----BEGIN
    | \b[A-Za-z0-9+/_-]{32,}\b
    """,
    re.IGNORECASE | re.VERBOSE,
)
_FIRST_PERSON = frozenset({"i", "me", "my", "mine", "we", "our", "us", "im", "ive", "id", "ill"})
_ASSISTANT = re.compile(r"^\s*(?:the\s+)?(?:assistant|chatbot)\b", re.IGNORECASE)
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "am",
        "to",
        "of",
        "in",
        "on",
        "at",
        "for",
        "with",
        "and",
        "or",
        "but",
        "as",
        "by",
        "from",
        "that",
        "this",
        "it",
        "its",
        "his",
        "her",
        "their",
        "he",
        "she",
        "they",
        "them",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "will",
        "would",
        "can",
        "could",
        "so",
        "not",
    ]
)


def words(text: str) -> list[str]:
    """Case-folded words, a plural or third-person `s` taken off longer ones (works → work)."""
    out = []
    for w in _WORD.findall(text.casefold().replace("'", "")):
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def _compact(text: str) -> str:
    return "".join(_WORD.findall(text.casefold()))


def grounded(text: str, message: str) -> bool:
    """Whether `text` rests on `message`: a compact substring of it, or enough of its content words."""
    compact = _compact(text)
    if compact and compact in _compact(message):
        return True
    mine = [w for w in words(text) if w not in _STOP] or words(text)
    if not mine:
        return False
    theirs = set(words(message))
    shared = sum(1 for w in mine if w in theirs)
    if len(mine) < SHORT_FACT_WORDS:
        return shared >= max(1, len(mine) - 1)
    return shared / len(mine) >= GROUNDED_SHARE


def unsafe(text: str, message: str, being: str, *, quote: bool = False) -> tuple[str, str] | None:
    """(code, reason) when the text may not become a fact whatever the message says, else None.
    `quote`: evidence, the message's own words, which may be in the first person."""
    if _MARKUP.search(text):
        return "markup", "the fact holds markup (HTML)"
    problem = text_problem(text, Inputs([message]), what="the fact")
    if problem is not None:
        return "instruction", problem
    if _SECRET.search(text):
        return "secret", "the fact names or holds a secret, a password or a key"
    if quote:
        return None
    first = words(text)[:1]
    if first and first[0] in _FIRST_PERSON:
        return "first_person", "the fact is not written in the third person"
    if _ASSISTANT.search(text) or (being and text.casefold().startswith(being.casefold() + " ")):
        return "persona", "the fact is about the assistant itself, not the world"
    return None
