"""The notes view: the intake, with what patrol and context need to find."""

from __future__ import annotations

from typing import Any

from engram.domain.note import Note, NoteKind, ParseStatus
from engram.projections.engine import Batch, Projection, handles
from engram.projections.tables import Index, TableSpec

NOTES = TableSpec(
    name="notes",
    columns={
        "id": "id",
        "being_id": "id",
        "kind": "text",
        "text": "text",
        "read": "bool",
        "enabled": "bool",
        "parse_status": "text",
        "parse_error": "text",
        "repaired": "bool",
        "repair_attempts": "int",
        "idempotency_key": "text",
        "source_ref": "text",
        "node_id": "id",
        "created_at": "text",
        "version": "int",
        "position": "int",
    },
    indexes=(
        Index("kind", ("being_id", "kind", "read")),
        Index("parse", ("being_id", "parse_status", "position")),
    ),
)


class NotesView(Projection):
    name = "notes"
    schema_version = 1
    tables = (NOTES,)

    def prefetch(self, batch: Batch, events: Any) -> None:
        batch.notes.prefetch(
            batch.conn, [str(e.originator_id) for e in events if not isinstance(e, Note.Noted)]
        )

    def _update(self, batch: Batch, e: Any, **changes: Any) -> None:
        row = batch.notes.get(batch.conn, str(e.originator_id))
        if row is None:
            raise LookupError(f"notes view: event {type(e).__qualname__} for unknown note {e.originator_id}")
        row.update(changes, version=e.originator_version, position=batch.position)
        batch.notes.put(row)

    @handles(Note.Noted)
    def _noted(self, batch: Batch, e: Note.Noted) -> None:
        batch.notes.put(
            {
                "id": str(e.originator_id),
                "being_id": str(e.being_id),
                "kind": e.kind,
                "text": e.text,
                "read": False,
                "enabled": True,
                "parse_status": (
                    ParseStatus.PENDING if e.kind == NoteKind.SCENE else ParseStatus.NOT_APPLICABLE
                ).value,
                "parse_error": None,
                "repaired": False,
                "repair_attempts": 0,
                "idempotency_key": e.idempotency_key,
                "source_ref": e.source_ref,
                "node_id": None,
                "created_at": e.timestamp.isoformat(),
                "version": e.originator_version,
                "position": batch.position,
            }
        )

    @handles(Note.ParseFailed)
    def _failed(self, batch: Batch, e: Note.ParseFailed) -> None:
        self._update(batch, e, parse_status=ParseStatus.FAILED.value, parse_error=e.reason)

    def _attempted(self, batch: Batch, e: Any) -> int:
        row = batch.notes.get(batch.conn, str(e.originator_id))
        return int(row["repair_attempts"] if row else 0) + 1

    @handles(Note.Repaired)
    def _repaired(self, batch: Batch, e: Note.Repaired) -> None:
        self._update(
            batch,
            e,
            parse_status=ParseStatus.PENDING.value,
            parse_error=None,
            repaired=True,
            repair_attempts=self._attempted(batch, e),
        )

    @handles(Note.RepairRejected)
    def _repair_rejected(self, batch: Batch, e: Note.RepairRejected) -> None:
        self._update(batch, e, repair_attempts=self._attempted(batch, e))

    @handles(Note.Processed)
    def _processed(self, batch: Batch, e: Note.Processed) -> None:
        self._update(batch, e, parse_status=ParseStatus.PROCESSED.value, node_id=str(e.node_id))

    @handles(Note.MarkedRead)
    def _read(self, batch: Batch, e: Note.MarkedRead) -> None:
        self._update(batch, e, read=True)

    @handles(Note.MarkedUnread)
    def _unread(self, batch: Batch, e: Note.MarkedUnread) -> None:
        self._update(batch, e, read=False)

    @handles(Note.Enabled)
    def _enabled(self, batch: Batch, e: Note.Enabled) -> None:
        self._update(batch, e, enabled=True)

    @handles(Note.Disabled)
    def _disabled(self, batch: Batch, e: Note.Disabled) -> None:
        self._update(batch, e, enabled=False)
