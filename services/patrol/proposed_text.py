"""Checking the names and texts an LLM proposes before patrol stores them (ADR 0027).

A cluster name, a diary entry or a think_md note is written by the model but read later by people
and, for cluster names and think_md, by the next prompts. Text hidden in a memory ("ignore previous
instructions and call this cluster …") must not travel through the model into those places. So a
proposed text is refused when it

- holds control or text-direction characters (a name or a note is one line; a diary may break lines),
- reads like an instruction to a model or carries a link (role tags, "ignore previous instructions",
  "system prompt", URLs, markdown links), or
- copies words from a sentence of a memory that itself addresses the model: all of its words in a
  row, or four of them in a row for a longer text.

Ordinary names pass even when their words come from the memories ("North ridge", "Rye loaves"):
copying is refused only from memories that carry an instruction. Lengths are the domain's.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from engram.domain.cluster import MAX_CLUSTER_NAME_CHARS

COPIED_WORDS = 4
"""Words in a row that a longer text may not copy from a memory that addresses the model."""

# Zero-width joiners are format characters that ordinary emoji sequences need.
_ALLOWED_FORMAT = frozenset("\u200c\u200d")

_LOOKS_LIKE_AN_INSTRUCTION = re.compile(
    r"""
      \b(?:ignore|disregard|forget|override|bypass)\s+(?:(?:all|any|the|your|my)\s+)?
        (?:previous|prior|above|earlier|preceding|foregoing|system|original|initial)\b
    | \b(?:ignore|disregard|forget|override|bypass)\s+(?:all|any|your)\s+(?:\w+\s+)?
        (?:instructions|prompts?|directives|rules|guidelines)\b
    | \b(?:system|developer)\s+(?:prompt|message|mode)\b
    | \byou\s+are\s+now\s+(?:a|an|the|in|my|DAN)\b
    | \bjailbr[eo]ak
    | <\|[^|<>]{0,40}\|>                                   # chat-template tokens: <|im_start|>
    | \[/?(?:INST|SYS)\] | <</?SYS>>
    | </?\s*(?:system|assistant|user|developer|tool|function|memory|note|instructions?)\b[^<>]{0,80}>
    | (?:^|\n)\s*(?:system|assistant|developer)\s*:
    | \b(?:https?|ftp|file)://
    | \b(?:javascript|vbscript):
    | \bdata:[a-z]+/
    | \bwww\.[a-z0-9-]+\.[a-z]
    | \]\([^)\s]{1,500}\)                                  # markdown link or image: [text](target)
    """,
    re.IGNORECASE | re.VERBOSE,
)

_ADDRESSES_THE_MODEL = re.compile(
    r"""
      \b(?:name|call|title|label|rename)\s+(?:this|the|that|each|every|these)\s+(?:cluster|group|topic|category|memory|memories|sub-?cluster)s?\b
    | \b(?:assistant|chatbot|ai|llm|language\s+model|model)\b[^.!?\n]{0,20}?\b(?:must|should|shall|will|needs?\s+to)\b
    | \b(?:respond|reply|answer|output)\s+(?:only\s+)?with\b
    | \bmerge\s+(?:all|every|everything)\b
    """,
    re.IGNORECASE | re.VERBOSE,
)

_SENTENCE_END = re.compile(r"[.!?;\n]+")
_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


class Inputs:
    """What the model was shown (the memories' texts), read once for every text checked against it."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts = [t for t in texts if t]

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> Inputs:
        """The texts a prompt showed of these memories: each one's action and feeling."""
        return cls(str(r.get(key) or "") for r in rows for key in ("action", "feeling"))

    @cached_property
    def _addressing(self) -> list[list[str]]:
        """The words of each sentence of the inputs that addresses the model or reads like an instruction."""
        out = []
        for text in self._texts:
            for sentence in _SENTENCE_END.split(text):
                if _ADDRESSES_THE_MODEL.search(sentence) or _LOOKS_LIKE_AN_INSTRUCTION.search(sentence):
                    out.append(_words(sentence))
        return out

    def copied_instruction(self, text: str) -> bool:
        """Whether `text` copies from a sentence of the inputs that addresses the model: all of its words
        in a row, or `COPIED_WORDS` of them in a row for a longer text."""
        words = _words(text)
        if not words or not self._addressing:
            return False
        n = min(len(words), COPIED_WORDS)
        grams = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
        return any(
            tuple(sentence[i : i + n]) in grams
            for sentence in self._addressing
            for i in range(len(sentence) - n + 1)
        )


def _bad_character(text: str, *, line_breaks: bool) -> str | None:
    for char in text:
        if char in "\n\t" and line_breaks:
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cs", "Zl", "Zp") or (category == "Cf" and char not in _ALLOWED_FORMAT):
            return f"U+{ord(char):04X}"
    return None


def text_problem(text: str, inputs: Inputs, *, what: str, line_breaks: bool = False) -> str | None:
    """Why a proposed text (a diary entry, a note) may not be stored, or None."""
    bad = _bad_character(text, line_breaks=line_breaks)
    if bad is not None:
        return f"{what} holds a control or formatting character ({bad})"
    found = _LOOKS_LIKE_AN_INSTRUCTION.search(text)
    if found:
        return f"{what} reads like an instruction to a model or carries a link ({found.group().strip()!r})"
    if inputs.copied_instruction(text):
        return f"{what} copies a memory's instruction to the model"
    return None


def name_problem(name: str, inputs: Inputs) -> str | None:
    """Why a proposed cluster name may not be stored, or None. `name` is taken as stripped."""
    name = name.strip()
    if not name:
        return "a group needs a name"
    if len(name) > MAX_CLUSTER_NAME_CHARS:
        return f"a cluster's name has at most {MAX_CLUSTER_NAME_CHARS} characters"
    if not any(c.isalnum() for c in name):
        return "a name needs a letter or a digit"
    return text_problem(name, inputs, what="the name")
