"""Supersede and merge notes, and read a note's chain (spec 002, ADRs 0046 and 0048).

Every command is scoped to one being: a note of another being reads as unknown (`NotFound`), as the
store has it, so no caller learns that it exists. Each writes its events in one transaction; a
crossing write (A by B while B by A) loses the race, is run again on fresh state, and is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from uuid import UUID

import structlog
from pydantic import BaseModel, Field

from engram.domain.errors import InvalidInput
from engram.domain.note import MergeMethod, Note, Sensitivity, SupersedeReason
from engram.services.beings import resolve_being_id
from engram.services.commands import Result
from engram.services.note_merge_text import MergeText, merge_text, oldest_first
from engram.services.ports import LLM, Clock, IdFactory
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore

log = structlog.get_logger("engram.notes")

MAX_MERGE_NOTES = 100
"""Notes one merge takes: a summary of more says nothing (and its prompt would not fit a model)."""
MAX_CHAIN = 200
"""Notes a history follows each way: a longer chain is cut, and says so."""


class NoteSuperseded(Result):
    old: str
    by: str
    reason: str


class NotesMerged(Result):
    note_id: str = Field(description="The summary note the merge wrote.")
    being_id: str
    sources: list[str] = Field(
        description="The merged notes, oldest first; each is superseded by the summary."
    )
    method: str = Field(description="`llm` or `concatenation`.")
    model: str | None = None
    sensitivity: str
    refused: str | None = Field(
        None, description="Why the LLM's summary was not used (the merge is then the concatenation)."
    )


class ChainLink(BaseModel):
    """One note of a chain, as its history shows it."""

    id: str
    kind: str
    text: str | None = Field(description="None for a sensitive note, unless asked for.")
    at: str
    sensitivity: str
    expired: bool
    superseded_by: str | None
    merged_from: list[str]


class NoteChain(BaseModel):
    """A note's place in its chain: what it replaced (nearest first, merges included) and what replaced
    it (nearest first, up to the note that is current)."""

    note: ChainLink
    replaced: list[ChainLink]
    replaced_by: list[ChainLink]
    cut: bool = Field(False, description=f"True when a way held more than {MAX_CHAIN} notes.")


def _link(note: Note, include_sensitive: bool) -> ChainLink:
    hidden = note.sensitivity == Sensitivity.SENSITIVE and not include_sensitive
    return ChainLink(
        id=str(note.id),
        kind=note.kind,
        text=None if hidden else note.text,
        at=note.at.isoformat(),
        sensitivity=note.sensitivity,
        expired=note.expired,
        superseded_by=str(note.superseded_by) if note.superseded_by else None,
        merged_from=[str(i) for i in note.merged_from],
    )


def _ids(refs: Sequence[UUID | str], field: str) -> list[UUID]:
    out = []
    for i, ref in enumerate(refs):
        try:
            out.append(ref if isinstance(ref, UUID) else UUID(str(ref)))
        except ValueError:
            raise InvalidInput(
                f"{field}.{i}: {str(ref)[:60]!r} is not a note id", field=f"{field}.{i}"
            ) from None
    return out


class NoteLifecycle:
    """`Engram.note_lifecycle`: supersede, merge, history."""

    def __init__(
        self,
        store: AggregateStore,
        clock: Clock,
        ids: IdFactory,
        runner: CommandRunner,
        llm: Callable[[], LLM | None],
        *,
        max_answer_bytes: int,
    ) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids
        self.runner = runner
        self._llm = llm
        self.max_answer_bytes = max_answer_bytes

    # -- supersede ------------------------------------------------------------------------------

    def supersede(self, being_ref: str, old: UUID | str, by: UUID | str) -> NoteSuperseded:
        """`old` is superseded by `by`, both notes of the being. Refused, nothing written: the same
        note, an unknown note (or another being's), `old` already superseded, `by` superseded
        (which is also what a cycle meets) or expired."""
        old_id, by_id = _ids([old], "old")[0], _ids([by], "by")[0]
        if old_id == by_id:
            raise InvalidInput("a note cannot supersede itself", field="by")
        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> NoteSuperseded:
            old_note, new_note = self.store.get_many(Note, [old_id, by_id], being_id=being_id)
            old_note.supersede(new_note, self.clock.now(), SupersedeReason.MANUAL)
            position = self.store.save(old_note, new_note)
            return NoteSuperseded(
                position=position, old=str(old_id), by=str(by_id), reason=SupersedeReason.MANUAL.value
            )

        return self.runner.run("supersede_note", handle, being_id=being_id)

    # -- history --------------------------------------------------------------------------------

    def history(self, being_ref: str, note_id: UUID | str, *, include_sensitive: bool = False) -> NoteChain:
        """The note's chain both ways, read from the log (superseded and expired notes included)."""
        nid = _ids([note_id], "id")[0]
        being_id = resolve_being_id(self.store, being_ref)
        note = self.store.get(Note, nid, being_id=being_id)
        cut = False
        replaced_by: list[ChainLink] = []
        seen = {note.id}
        current = note
        while current.superseded_by is not None and current.superseded_by not in seen:
            if len(replaced_by) >= MAX_CHAIN:
                cut = True
                break
            current = self.store.get(Note, current.superseded_by, being_id=being_id)
            seen.add(current.id)
            replaced_by.append(_link(current, include_sensitive))
        replaced: list[ChainLink] = []
        frontier = [*note.supersedes, *note.merged_from]
        while frontier:
            if len(replaced) + len(frontier) > MAX_CHAIN:
                cut = True
                frontier = frontier[: MAX_CHAIN - len(replaced)]
            fresh = [i for i in dict.fromkeys(frontier) if i not in seen]
            notes = self.store.get_many(Note, fresh, being_id=being_id)
            seen.update(fresh)
            replaced += [_link(n, include_sensitive) for n in notes]
            frontier = [i for n in notes for i in (*n.supersedes, *n.merged_from)]
            if cut:
                break
        return NoteChain(
            note=_link(note, include_sensitive), replaced=replaced, replaced_by=replaced_by, cut=cut
        )

    # -- merge ----------------------------------------------------------------------------------

    def merge(self, being_ref: str, note_ids: Sequence[UUID | str], *, use_llm: bool = True) -> NotesMerged:
        """One `summary` note of two or more notes of the being, which it supersedes. The text is the
        LLM's (configured, `use_llm`, and no source sensitive) or the concatenation (ADR 0048).
        Refused, nothing written: fewer than two notes, a note given twice, an unknown note (or
        another being's), a scene, a superseded note."""
        if len(note_ids) < 2:
            raise InvalidInput("a merge takes two notes or more", field="ids")
        if len(note_ids) > MAX_MERGE_NOTES:
            raise InvalidInput(f"a merge takes at most {MAX_MERGE_NOTES} notes", field="ids")
        ids = _ids(note_ids, "ids")
        if len(set(ids)) != len(ids):
            raise InvalidInput("a merge takes each note once", field="ids")
        being_id = resolve_being_id(self.store, being_ref)
        sources = self.store.get_many(Note, ids, being_id=being_id)
        Note.check_merge(sources)  # before an LLM is asked anything
        return self.merge_notes(sources, use_llm=use_llm)

    def merge_notes(self, sources: list[Note], *, use_llm: bool = True) -> NotesMerged:
        """Merge notes already loaded and checked (`merge`, the worker's maintenance). The LLM is asked
        once, outside the transaction: a raced write runs again with the same text."""
        llm = self._llm() if use_llm else None
        made = merge_text(sources, llm, max_answer_bytes=self.max_answer_bytes)
        if made.refused is not None:
            log.warning("llm merge refused; concatenated", reason=made.refused, notes=len(sources))
        being_id = sources[0].being_id
        ids = [s.id for s in sources]
        summary_id = self.ids.new_id()

        def handle() -> NotesMerged:
            fresh = self.store.get_many(Note, ids, being_id=being_id)
            summary = self._merged(summary_id, fresh, made)
            position = self.store.save(summary, *fresh)
            return NotesMerged(
                position=position,
                note_id=str(summary.id),
                being_id=str(being_id),
                sources=[str(i) for i in summary.merged_from],
                method=made.method.value,
                model=made.model,
                sensitivity=summary.sensitivity,
                refused=made.refused,
            )

        return self.runner.run("merge_notes", handle, being_id=being_id)

    def _merged(self, summary_id: UUID, sources: list[Note], made: MergeText) -> Note:
        return Note.merge(
            summary_id,
            oldest_first(sources),
            made.text,
            self.clock.now(),
            method=MergeMethod(made.method),
            model=made.model,
            prompt_version=made.prompt_version,
            answer=made.answer,
            refused=made.refused,
        )
