"""Taking notes: single and batched, idempotent by key."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from uuid import UUID

from engram.domain.errors import InvalidInput
from engram.domain.ids import note_id_for_key
from engram.domain.note import Lifecycle, Note, NoteKind, ParseStatus, check_note_refs
from engram.services.beings import resolve_being_id
from engram.services.collector_pause import collector_paused
from engram.services.commands import LIFECYCLE_FIELDS, MAX_BATCH_NOTES, NoteInput, NotesTaken, NoteTaken
from engram.services.errors import IdempotencyConflict, NotFound
from engram.services.ports import Clock, IdFactory
from engram.services.runner import CommandRunner
from engram.services.souls import replace_souls
from engram.services.store import AggregateStore


def _result(
    note: Note, *, duplicate: bool, position: int | None, superseded: list[UUID] | None = None
) -> NoteTaken:
    is_scene = note.kind == NoteKind.SCENE
    return NoteTaken(
        note_id=str(note.id),
        being_id=str(note.being_id),
        kind=note.kind,
        parsed=(note.parse_status != ParseStatus.FAILED) if is_scene else None,
        parse_error=note.parse_error,
        duplicate=duplicate,
        source_ref=note.source_ref,
        position=position,
        stability=note.stability,
        expires_at=note.expires_at.isoformat() if note.expires_at is not None else None,
        sensitivity=note.sensitivity,
        superseded=[str(i) for i in superseded or []],
    )


def _number(exc: InvalidInput, index: int, count: int) -> None:
    """In a batch of several notes, an invalid note's error says which one it is."""
    if count > 1:
        exc.details["index"] = index
        exc.message = f"note {index}: {exc.message}"
        exc.args = (exc.message,)


class NoteCommands:
    def __init__(self, store: AggregateStore, clock: Clock, ids: IdFactory, runner: CommandRunner) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids
        self.runner = runner

    def take(self, being_ref: str, note: NoteInput) -> NoteTaken:
        return self.take_many(being_ref, [note]).notes[0]

    def take_many(self, being_ref: str, notes: Sequence[NoteInput]) -> NotesTaken:
        """All notes in one transaction, or none: every note is validated before anything is written."""
        if not notes:
            raise InvalidInput("a batch holds at least one note")
        if len(notes) > MAX_BATCH_NOTES:
            raise InvalidInput(f"a batch holds at most {MAX_BATCH_NOTES} notes, got {len(notes)}")
        being_id = resolve_being_id(self.store, being_ref)
        random_ids = [self.ids.new_id() for _ in notes]

        def handle() -> NotesTaken:
            at = self.clock.now()
            results: list[NoteTaken | None] = [None] * len(notes)
            fresh: list[Note] = []
            fresh_slots: list[int] = []
            keyed: dict[UUID, int] = {}
            # Most notes of a batch give no lifecycle field: they share one default per kind (its
            # checks run once), instead of one `Lifecycle` each on the intake's hot path.
            defaults: dict[NoteKind, Lifecycle] = {}
            i = 0
            try:  # one `try` for the batch: the loop is the intake's hot path
                for i, item in enumerate(notes):
                    note_id = random_ids[i]
                    # Before the key becomes an id: a key no store can keep has no id either.
                    check_note_refs(item.idempotency_key, item.source_ref)
                    if item.model_fields_set.isdisjoint(LIFECYCLE_FIELDS):
                        lifecycle = defaults.get(item.kind) or defaults.setdefault(
                            item.kind, item.lifecycle(at)
                        )
                    else:
                        lifecycle = item.lifecycle(at)
                    if item.idempotency_key is not None:
                        note_id = note_id_for_key(being_id, item.idempotency_key)
                        existing = self._existing(note_id, being_id)
                        first = keyed.get(note_id)
                        if existing is None and first is not None:
                            existing = fresh[fresh_slots.index(first)]
                        if existing is not None:
                            if not existing.same_request(
                                item.kind.value, item.text, item.source_ref, lifecycle, given_at=item.at
                            ):
                                raise IdempotencyConflict(
                                    f"idempotency key {item.idempotency_key!r} was used with other content",
                                    note_id=str(note_id),
                                    index=i,
                                )
                            results[i] = _result(existing, duplicate=True, position=None)
                            continue
                        keyed[note_id] = i
                    note = Note.take(
                        note_id,
                        being_id,
                        item.kind,
                        item.text,
                        at,
                        idempotency_key=item.idempotency_key,
                        source_ref=item.source_ref,
                        lifecycle=lifecycle,
                    )
                    fresh.append(note)
                    fresh_slots.append(i)
            except InvalidInput as exc:
                _number(exc, i, len(notes))
                raise
            # A new soul supersedes the current one in this transaction (ADR 0047).
            also, replaced = replace_souls(self.store, being_id, fresh, at)
            position = self.store.save(*fresh, *also) if fresh else None
            for slot, note in zip(fresh_slots, fresh, strict=True):
                results[slot] = _result(
                    note, duplicate=False, position=position, superseded=replaced.get(note.id)
                )
            return NotesTaken(notes=[r for r in results if r is not None], position=position)

        with collector_paused():  # its objects all live until the save: nothing to collect (ADR 0094)
            return self.runner.run("take_notes", handle, being_id=being_id)

    def _existing(self, note_id: UUID, being_id: UUID) -> Note | None:
        try:
            return self.store.get(Note, note_id, being_id=being_id)
        except NotFound:
            return None

    def mark_read(self, being_ref: str, note_id: UUID, read: bool = True) -> NoteTaken:
        return self._update(
            being_ref,
            note_id,
            "mark_note_read" if read else "mark_note_unread",
            lambda n, at: n.mark_read(at) if read else n.mark_unread(at),
        )

    def set_enabled(self, being_ref: str, note_id: UUID, enabled: bool) -> NoteTaken:
        return self._update(
            being_ref,
            note_id,
            "enable_note" if enabled else "disable_note",
            lambda n, at: n.enable(at) if enabled else n.disable(at),
        )

    def _update(
        self, being_ref: str, note_id: UUID, command: str, change: Callable[[Note, datetime], None]
    ) -> NoteTaken:
        being_id = resolve_being_id(self.store, being_ref)

        def handle() -> NoteTaken:
            note = self.store.get(Note, note_id, being_id=being_id)
            change(note, self.clock.now())
            return _result(note, duplicate=False, position=self.store.save(note))

        return self.runner.run(command, handle, being_id=being_id)
