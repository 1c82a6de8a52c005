"""MEMORY.md's People and Ongoing lore from the facts a being reads (issue #11, ADR 0059).

People: the durable facts by subject (not the lore), the subjects most recently changed first, each
subject's facts pinned first, then by importance, then newest; Ongoing lore: the lore lines, newest
first. Both bounded (a MEMORY.md stays a page), each line escaped as the journal's lines are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram.domain.fact import LORE_SUBJECT
from engram.projections.fact_queries import FactReads
from engram.services.fact_search import newest_first, resolve_ref
from engram.services.journal_markdown import FactSections, escape

PEOPLE = 20  # subjects in People
FACTS_PER_PERSON = 5
LORE_LINES = 20
SCANNED = 2000  # the latest active facts read to fill both sections
_LORE_PREFIX = "Memory line: "


def fact_sections_of(facts: FactReads, owners: Sequence[str]) -> FactSections:
    rows = facts.facts(owners, limit=SCANNED)  # active, the latest change first
    lore = [r for r in rows if r["subject"] == LORE_SUBJECT][:LORE_LINES]
    aliases = facts.aliases(owners)
    by_subject: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["subject"] != LORE_SUBJECT:  # a merged alias's facts are its entity's
            by_subject.setdefault(resolve_ref(r["subject"], aliases), []).append(r)
    people = []
    for subject, kept in list(by_subject.items())[:PEOPLE]:
        best = sorted(
            kept, key=lambda r: (not r["pinned"], -int(r["importance"]), newest_first(r["updated_at"]))
        )
        texts = "; ".join(escape(r["text"].rstrip(".")) for r in best[:FACTS_PER_PERSON])
        more = f" (and {len(kept) - FACTS_PER_PERSON} more)" if len(kept) > FACTS_PER_PERSON else ""
        people.append(f"- {escape(subject)}: {texts}{more}")
    return FactSections(
        people=people,
        lore=[f"- {escape(r['text'].removeprefix(_LORE_PREFIX))}" for r in lore],
    )
