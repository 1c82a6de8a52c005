"""`engram facts import BEING FILE.jsonl`: seeded profiles, one `FactInput` object per line (ADR 0057).

A line's source defaults to `seeded_profile`. An import states a fact or revises it, and never
reinforces: a line whose fact already says the same (same key, text, subject and type) is counted
`unchanged` and writes nothing, so that running the same file again changes nothing and does not
inflate importance. A bad line is refused naming its number and field; the others are written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from engram.domain.errors import DomainError, InvalidInput
from engram.domain.fact import Fact, FactContent, FactSource, fact_key
from engram.domain.ids import fact_id_for_key
from engram.services.commands import MAX_BATCH_FACTS, FactInput
from engram.services.facts import FactCommands

BATCH = 500


@dataclass
class FactImportProgress:
    total: int
    read: int = 0
    written: int = 0
    unchanged: int = 0
    refused: int = 0


@dataclass
class FactImportReport:
    progress: FactImportProgress
    outcomes: dict[str, int] = field(default_factory=dict)  # stated / revised
    refusals: list[dict[str, Any]] = field(default_factory=list)  # line, field, message

    def as_dict(self) -> dict[str, Any]:
        p = self.progress
        return {
            "total": p.total,
            "written": p.written,
            "unchanged": p.unchanged,
            "refused": p.refused,
            "outcomes": self.outcomes,
            "refusals": self.refusals,
        }


def _content(raw: str) -> FactContent:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"not JSON: {exc.msg}", field="line") from None
    if not isinstance(data, dict):
        raise InvalidInput("a line is one JSON object", field="line")
    data.setdefault("source", FactSource.SEEDED_PROFILE.value)
    try:
        return FactInput.model_validate(data).content()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = ".".join(str(p) for p in first["loc"]) or "line"
        raise InvalidInput(f"{name}: {first['msg']}", field=name) from None


def _same(fact: Fact, content: FactContent) -> bool:
    return (fact.text, fact.subject, fact.fact_type) == (content.text, content.subject, content.fact_type)


def import_facts(
    facts: FactCommands,
    being_ref: str,
    lines: Sequence[tuple[int, str]],
    *,
    space: str | None = None,
    progress: Callable[[FactImportProgress], None] | None = None,
) -> FactImportReport:
    """Imports `lines` (line number, text) in batches of 500; see the module's docstring."""
    owner = facts.owner(being_ref, space)
    report = FactImportReport(FactImportProgress(total=len(lines)))
    p = report.progress
    for start in range(0, len(lines), min(BATCH, MAX_BATCH_FACTS)):
        chunk = lines[start : start + BATCH]
        refused_before = len(report.refusals)
        contents: dict[str, FactContent] = {}  # by key: the last line of a key in a batch wins
        for number, raw in chunk:
            try:
                content = _content(raw)
            except DomainError as exc:
                p.refused += 1
                report.refusals.append(
                    {"line": number, "field": exc.details.get("field"), "message": exc.message}
                )
                continue
            contents[fact_key(content)] = content
        ids = {key: fact_id_for_key(owner.id, key) for key in contents}
        known = facts.store.find_many(Fact, list(ids.values()), being_id=owner.id)
        fresh = [c for key, c in contents.items() if not ((f := known.get(ids[key])) and _same(f, c))]
        valid = len(chunk) - (len(report.refusals) - refused_before)
        p.unchanged += valid - len(fresh)  # lines saying what their fact says already
        if fresh:
            written = facts.state_many(being_ref, fresh, space=space)
            p.written += len(written.facts)
            for w in written.facts:
                report.outcomes[w.outcome] = report.outcomes.get(w.outcome, 0) + 1
        p.read += len(chunk)
        if progress is not None:
            progress(p)
    return report
