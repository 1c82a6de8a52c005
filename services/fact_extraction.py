"""Fact extraction (issue #11, ADR 0058): a process manager that reads pending messages, asks the
LLM for facts, keeps the candidates that pass spec 001's guards and states them, and records what it
did with each message.

For each pending message (the `extraction` view), one LLM call, outside any transaction; then one
command writes the accepted facts (`FactCommands.state_many(skip_refused=True)`) and the message's
`Extraction` record together. The record's id derives from the message's, so a second extractor
running at once finds it done (or loses the write race, runs again and finds it done) and writes
nothing: no fact is reinforced twice by one message.

An LLM out of reach is recorded (`Failed`) and the message is asked again at a later round, at most
`MAX_ATTEMPTS` times; it never stops intake or the worker. Without an LLM the round records once, per
being, that extraction was skipped up to the newest pending message (`ExtractionCursor`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import UUID

import structlog
from pydantic import BaseModel, ConfigDict, ValidationError

from engram.domain.entities import check_entity_refs
from engram.domain.errors import InvalidInput
from engram.domain.extraction import Extraction, ExtractionCursor
from engram.domain.fact import (
    MAX_FACT_CHARS,
    MIN_FACT_CHARS,
    EntityType,
    FactContent,
    FactSource,
    FactType,
    memory_key,
    normalize_fact_text,
)
from engram.domain.ids import extraction_cursor_id, extraction_id_for_message
from engram.projections.extraction import ExtractionReads
from engram.services.beings import resolve_being_id
from engram.services.commands import FactWritten
from engram.services.errors import StorageFull
from engram.services.extraction_guards import grounded, unsafe
from engram.services.extraction_prompts import (
    EXTRACT_TASK,
    EXTRACTION_PROMPT_VERSION,
    EXTRACTION_SYSTEM,
    MAX_FACTS_PER_MESSAGE,
    FactsAnswer,
    extraction_prompt,
)
from engram.services.facts import FactCommands
from engram.services.llm_answers import capped
from engram.services.patrol.asking import ask
from engram.services.ports import LLM, Clock
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore

log = structlog.get_logger("engram.extraction")

DEFAULT_BATCH = 200  # messages a round reads
EXTRACTED_CONFIDENCE = 0.8  # what a candidate without a confidence gets
EXTRACTED_TRUST = 0.8  # a user's own statement, read by a model: trusted, below a hand-written fact
NO_LLM = "no LLM is configured (ENGRAM_LLM)"

_MEMORY_TYPE = {"person": "PEOPLE", "project": "PROJECT"}
_SUBTYPE = {"preference": "preference", "relationship": "relationship"}


class Candidate(BaseModel):
    """One item of the answer, with defaults for what is missing."""

    model_config = ConfigDict(extra="ignore", strict=True)

    fact: str
    type: str | None = None  # None (what a strict provider sends for "not given"): the default
    subject: str | None = None
    evidence: str | None = None
    confidence: float | None = None
    importance: int | None = None
    entity_refs: list[str] | None = None
    entity_label: str | None = None


@dataclass
class ExtractionReport:
    """What one round did: messages read, facts written by outcome, candidates refused by reason."""

    messages: int = 0
    stated: int = 0
    reinforced: int = 0
    revised: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    failed: int = 0  # the LLM out of reach: asked again later
    skipped: int = 0  # no LLM: recorded once per being
    already: int = 0  # extracted by another extractor meanwhile
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """The report as the CLI and MCP say it."""
        r = self
        lines = [
            f"{r.messages} messages read: {r.stated} facts stated, {r.reinforced} reinforced, {r.revised} revised"
        ]
        rejected = sum(r.rejected.values())
        if rejected:
            by = ", ".join(
                f"{code} {n}" for code, n in sorted(r.rejected.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            lines.append(f"{rejected} candidates rejected: {by}")
        if r.skipped:
            lines.append(f"{r.skipped} messages skipped: no LLM is configured (ENGRAM_LLM)")
        if r.failed:
            lines.append(f"{r.failed} messages deferred: the LLM could not be reached (asked again later)")
        if r.already:
            lines.append(f"{r.already} messages extracted meanwhile by another process")
        lines.extend(f"error: {e}" for e in r.errors)
        return "\n".join(lines)

    def add(self, other: ExtractionReport) -> None:
        for name in ("messages", "stated", "reinforced", "revised", "failed", "skipped", "already"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for code, n in other.rejected.items():
            self.rejected[code] = self.rejected.get(code, 0) + n
        self.errors.extend(other.errors)


@dataclass(frozen=True)
class ExtractionProgress:
    done: int
    total: int
    report: ExtractionReport


@dataclass
class _Sorted:
    """A message's candidates, sorted: contents to state, refusals to record."""

    contents: list[FactContent] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # the candidates' texts, as contents
    rejected: list[dict[str, Any]] = field(default_factory=list)


def _reject(out: _Sorted, candidate: Any, code: str, reason: str) -> None:
    text = candidate if isinstance(candidate, str) else repr(candidate)
    out.rejected.append({"candidate": text, "code": code, "reason": reason})


def _memory_key(c: Candidate, fact_type: str, refs: list[str]) -> str | None:
    """Spec 004's key when the answer gives enough: a typed fact about a known kind of entity."""
    if not refs or fact_type == FactType.OTHER.value:
        return None
    entity_type = refs[0].split(":", 1)[0]
    if entity_type not in {t.value for t in EntityType}:
        return None
    return memory_key(
        _MEMORY_TYPE.get(entity_type, "PROFILE"), entity_type, refs[0], _SUBTYPE.get(fact_type, "fact")
    )


def sort_candidates(items: list[Any], row: Mapping[str, Any], being: str) -> _Sorted:
    """Apply spec 001's guards to the answer's items: what to state, and every refusal with why."""
    out = _Sorted()
    message, user = str(row["text"]), str(row["user_id"])
    for i, item in enumerate(items):
        if i >= MAX_FACTS_PER_MESSAGE:
            _reject(
                out,
                item.get("fact", item) if isinstance(item, dict) else item,
                "too_many",
                f"more than {MAX_FACTS_PER_MESSAGE} facts from one message",
            )
            continue
        try:
            c = Candidate.model_validate(item)
        except ValidationError as exc:
            what = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors()[:3]
            )
            _reject(out, item, "wrong_shape", f"the item has the wrong shape ({what})")
            continue
        size = len(normalize_fact_text(c.fact))
        if not MIN_FACT_CHARS <= size <= MAX_FACT_CHARS:
            _reject(
                out,
                c.fact,
                "length",
                f"a fact has {MIN_FACT_CHARS} to {MAX_FACT_CHARS} characters, got {size}",
            )
            continue
        problem = unsafe(c.fact, message, being)
        if problem is not None:
            _reject(out, c.fact, *problem)
            continue
        if not grounded(c.fact, message):
            _reject(out, c.fact, "ungrounded", "the fact is not grounded in the message")
            continue
        evidence = c.evidence if c.evidence and grounded(c.evidence, message) else None
        if evidence is not None and unsafe(evidence, message, being, quote=True) is not None:
            evidence = None
        fact_type = (c.type or "other").strip().lower()
        fact_type = "other" if fact_type not in {t.value for t in FactType} - {"lore"} else fact_type
        subject = user
        try:
            refs = check_entity_refs(list(c.entity_refs or []))
            if c.subject and c.subject != user:
                subject = check_entity_refs([c.subject])[0]  # another subject is an entity ref
            content = FactContent(
                c.fact,
                subject,
                fact_type=fact_type,
                memory_key=_memory_key(c, fact_type, refs),
                evidence=evidence,
                source_message_id=str(row["message_key"]),
                confidence=EXTRACTED_CONFIDENCE if c.confidence is None else c.confidence,
                importance=1 if c.importance is None else c.importance,
                entity_refs=refs,
                entity_label=c.entity_label,
                source=FactSource.EXTRACTION,
                source_type="chat",
                source_trust=EXTRACTED_TRUST,
                source_entity=user,
                channel=row["channel"],
            )
        except InvalidInput as exc:
            _reject(out, c.fact, "invalid", exc.message)
            continue
        out.contents.append(content)
        out.kept.append(c.fact)
    return out


class FactExtraction:
    def __init__(
        self,
        store: AggregateStore,
        clock: Clock,
        runner: CommandRunner,
        facts: FactCommands,
        reads: Callable[[], ExtractionReads],
        being_name: Callable[[UUID], str],
        llm: Callable[[], LLM | None],
        *,
        max_answer_bytes: int,
        catch_up: Callable[[], None] = lambda: None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.runner = runner
        self.facts = facts
        self.reads = reads
        self.being_name = being_name
        self.llm = llm
        self.max_answer_bytes = max_answer_bytes
        self.catch_up = catch_up

    # -- rounds ---------------------------------------------------------------------------------

    def worker_round(self, *, stopping: Callable[[], bool] = lambda: False) -> ExtractionReport:
        """One batch of every being's pending messages (the worker's task)."""
        report = self.run_pending(stopping=stopping)
        if report.messages or report.skipped or report.failed:
            log.info("fact extraction", **report.as_dict())
        return report

    def run_pending(
        self,
        being_ref: str | None = None,
        *,
        limit: int = DEFAULT_BATCH,
        progress: Callable[[ExtractionProgress], None] | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> ExtractionReport:
        """Extract from at most `limit` pending messages of `being_ref` (every being's when None).
        A call for one being catches the views up first; the worker's reads the view as it is."""
        being_id = resolve_being_id(self.store, being_ref) if being_ref is not None else None
        if being_id is not None:
            self.catch_up()
        report = ExtractionReport()
        llm = self.llm()
        if llm is None:
            self._skip(self.reads().newest_pending(being_id), report)
            return report
        rows = self.reads().pending(being_id, limit=limit)
        for done, row in enumerate(rows, 1):
            if stopping():
                break
            try:
                self._message(llm, row, report)
            except StorageFull:  # nothing more can be written: the next round tries again
                raise
            except Exception as exc:  # one message's trouble never stops the others
                if being_ref is not None:
                    raise
                log.error("extracting a message failed", message_id=row["id"], exc_info=True)
                report.errors.append(f"{row['id']}: {type(exc).__name__}: {exc}")
            if progress is not None:
                progress(ExtractionProgress(done, len(rows), report))
        return report

    def run_until_done(
        self, being_ref: str, *, progress: Callable[[ExtractionProgress], None] | None = None
    ) -> ExtractionReport:
        """`run_pending` for one being until nothing is left that this run can do."""
        total = ExtractionReport()
        while True:
            report = self.run_pending(being_ref, progress=progress)
            total.add(report)
            done = report.messages + report.skipped + report.failed + report.already
            # Failed messages come back at most MAX_ATTEMPTS times; a round of failures only ends it.
            if done == 0 or report.skipped or report.failed == done:
                return total

    def extract_messages(self, being_id: UUID, message_ids: Sequence[str], *, limit: int) -> tuple[int, int]:
        """Extract from those of `message_ids` not read yet, at most `limit` of them (compaction's
        pre-compaction extraction, ADR 0067); returns (read now, still to read). Without an LLM it
        reads nothing."""
        llm = self.llm()
        self.catch_up()
        rows = self.reads().unsettled(being_id, message_ids)
        if llm is None:
            return 0, len(rows)
        report = ExtractionReport()
        for row in rows[:limit]:
            self._message(llm, row, report)
        return min(limit, len(rows)), max(0, len(rows) - limit)

    # -- one message ----------------------------------------------------------------------------

    def _skip(self, newest: Mapping[str, tuple[int, int]], report: ExtractionReport) -> None:
        """No LLM: one `Skipped` per being, up to its newest pending message."""
        for being, (position, count) in newest.items():
            being_id = UUID(being)

            def handle(being_id: UUID = being_id, position: int = position) -> bool:
                cursor_id = extraction_cursor_id(being_id)
                cursor = self.store.find(ExtractionCursor, cursor_id)
                if cursor is None:
                    cursor = ExtractionCursor.open(cursor_id, being_id, self.clock.now())
                if not cursor.skip(NO_LLM, position, self.clock.now()):
                    return False
                self.store.save(cursor)
                return True

            if self.runner.run("skip_extraction", handle, being_id=being_id):
                report.skipped += count

    def _message(self, llm: LLM, row: Mapping[str, Any], report: ExtractionReport) -> None:
        being_id, message_id = UUID(row["being_id"]), UUID(row["id"])
        extraction_id = extraction_id_for_message(message_id)
        known = self.store.find(Extraction, extraction_id)
        if known is not None and known.settled:
            report.already += 1
            return
        being = self.being_name(being_id)
        asked = ask(
            llm,
            EXTRACT_TASK,
            extraction_prompt(str(row["text"]), str(row["user_id"]), being),
            FactsAnswer,
            "fast",
            max_answer_bytes=self.max_answer_bytes,
            system=EXTRACTION_SYSTEM,
            prompt_version=EXTRACTION_PROMPT_VERSION,
        )

        def load() -> Extraction:
            found = self.store.find(Extraction, extraction_id)
            return found or Extraction.open(extraction_id, being_id, message_id, self.clock.now())

        if asked.transient:

            def failed() -> bool:
                x = load()
                if x.settled:
                    return False
                x.failed(asked.error or "LLM unavailable", self.clock.now())
                self.store.save(x)
                return True

            if self.runner.run("extraction_failed", failed, being_id=being_id):
                report.failed += 1
                log.warning("extraction deferred", reason=asked.error, message_id=str(message_id))
            else:
                report.already += 1
            return
        answer = capped(asked.raw, self.max_answer_bytes) if asked.raw else None
        if asked.error is not None or not isinstance(asked.plan, FactsAnswer):
            code = "bad_answer"
            sorted_ = _Sorted(rejected=[{"candidate": answer or "", "code": code, "reason": asked.error}])
        else:
            sorted_ = sort_candidates(list(asked.plan.facts), row, being)

        def extracted(written: list[FactWritten], refused: list[dict[str, Any]]) -> Extraction | None:
            x = load()
            if x.settled:
                return None
            rejected = list(sorted_.rejected) + [
                {"candidate": sorted_.kept[r["index"]], "code": "invalid", "reason": r["message"]}
                for r in refused
            ]
            x.extracted(
                model=asked.model,
                prompt_version=EXTRACTION_PROMPT_VERSION,
                answer=answer,
                accepted=[{"fact_id": w.fact_id, "outcome": w.outcome} for w in written],
                rejected=rejected,
                at=self.clock.now(),
            )
            return x

        if sorted_.contents:
            result = self.facts.state_many(
                str(being_id), sorted_.contents, skip_refused=True, record=extracted
            )
            if not result.facts and result.position is None:
                report.already += 1
                return
            written, refused = result.facts, result.refused
        else:

            def record() -> bool:
                x = extracted([], [])
                if x is None:
                    return False
                self.store.save(x)
                return True

            if not self.runner.run("record_extraction", record, being_id=being_id):
                report.already += 1
                return
            written, refused = [], []
        report.messages += 1
        for w in written:
            setattr(report, w.outcome, getattr(report, w.outcome) + 1)
        for r in sorted_.rejected:
            report.rejected[r["code"]] = report.rejected.get(r["code"], 0) + 1
        if refused:
            report.rejected["invalid"] = report.rejected.get("invalid", 0) + len(refused)
