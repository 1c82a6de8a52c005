"""The notes view: the intake, with what patrol and context need to find, and each note's lifecycle
(spec 002, ADR 0046): stability, expiry, supersede chains, sensitivity, tags."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from engram.domain.note import Note, NoteKind, ParseStatus
from engram.projections.engine import Batch, Projection, handles
from engram.projections.tables import Index, TableSpec


def utc_text(at: datetime) -> str:
    """An instant as fixed-width UTC text, so that SQL compares instants as strings on both backends
    (`expires_at <= ?` with `utc_text(now)`), whatever zone the event was given in."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


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
        # spec 002's lifecycle (ADR 0046); instants as `utc_text`
        "stability": "text",
        "ttl_days": "float",
        "expires_at": "text",  # None: never expires
        "expired": "bool",  # the worker recorded `Note.Expired`; reads also compare expires_at with now
        "sensitivity": "text",
        "confidence": "float",
        "evidence_json": "text",  # JSON array of strings
        "tags_json": "text",  # JSON array of strings; filtered through NOTE_TAGS
        "scope": "text",
        "subject": "text",
        "job_id": "text",
        "at": "text",  # when the note's event happened; lists and packs are newest first by it
        "superseded_by": "id",
        "superseded_reason": "text",
        "merged_from_json": "text",  # JSON array of note ids, for a summary that merged them
    },
    indexes=(
        Index("kind", ("being_id", "kind", "read")),
        Index("parse", ("being_id", "parse_status", "position")),
        Index("recent", ("being_id", "at")),
        Index("kind_recent", ("being_id", "kind", "at")),
        # The expiry sweep reads only notes still to expire: its cost follows the notes due.
        # (expires_at, id): the sweep's batches follow one another by that key (ADR 0048), also
        # through many notes that expire at the same instant.
        Index("due", ("expires_at", "id"), where="expires_at IS NOT NULL AND NOT expired"),
        # The worker's maintenance merge reads only volatile notes without a TTL (ADR 0048): none
        # that this version's intake writes, so the index stays empty and costs nothing.
        Index(
            "volatile_open",
            ("being_id", "at"),
            where="stability = 'volatile' AND ttl_days IS NULL AND superseded_by IS NULL",
        ),
    ),
)

NOTE_TAGS = TableSpec(
    name="note_tags",
    columns={
        "id": "text",  # "<note id>/<tag>"
        "note_id": "id",
        "being_id": "id",
        "tag": "text",
        "at": "text",
    },
    indexes=(Index("tag", ("being_id", "tag", "at")), Index("note", ("note_id",))),
)


class NotesView(Projection):
    name = "notes"
    schema_version = 2
    tables = (NOTES, NOTE_TAGS)

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
                "stability": e.stability,
                "ttl_days": e.ttl_days,
                "expires_at": utc_text(e.expires_at) if e.expires_at is not None else None,
                "expired": False,
                "sensitivity": e.sensitivity,
                "confidence": e.confidence,
                "evidence_json": json.dumps(e.evidence, ensure_ascii=False),
                "tags_json": json.dumps(e.tags, ensure_ascii=False),
                "scope": e.scope,
                "subject": e.subject,
                "job_id": e.job_id,
                "at": utc_text(e.at),
                "superseded_by": None,
                "superseded_reason": None,
                "merged_from_json": None,
            }
        )
        for tag in e.tags:
            batch.note_tags.put(
                {
                    "id": f"{e.originator_id}/{tag}",
                    "note_id": str(e.originator_id),
                    "being_id": str(e.being_id),
                    "tag": tag,
                    "at": utc_text(e.at),
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

    @handles(Note.Expired)
    def _expired(self, batch: Batch, e: Note.Expired) -> None:
        self._update(batch, e, expired=True)

    @handles(Note.Superseded)
    def _superseded(self, batch: Batch, e: Note.Superseded) -> None:
        self._update(batch, e, superseded_by=str(e.by), superseded_reason=e.reason)

    @handles(Note.SupersedeUndone)
    def _supersede_undone(self, batch: Batch, e: Note.SupersedeUndone) -> None:
        self._update(batch, e, superseded_by=None, superseded_reason=None)

    @handles(Note.Supersedes, Note.SupersedesUndone)
    def _supersedes(self, batch: Batch, e: Any) -> None:
        self._update(batch, e)  # the chain is read from `superseded_by`; the row's version moves

    @handles(Note.Merged)
    def _merged(self, batch: Batch, e: Note.Merged) -> None:
        self._update(batch, e, merged_from_json=json.dumps([str(s) for s in e.sources]))
