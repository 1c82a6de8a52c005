"""Custom transcodings for the event log.

Vectors are stored as base64 of packed float32 rather than JSON lists of
floats: ~8.5 KB instead of ~30 KB per 1536-dim event, and about ten times
faster to decode during a rebuild (see docs/benchmarks.md).
"""

from __future__ import annotations

import base64
import datetime as _dt
from typing import Any
from uuid import UUID, SafeUUID

from eventsourcing.persistence import JSONTranscoder, Transcoding

from engram.domain.embedding import Embedding
from engram.domain.errors import InvalidInput
from engram.domain.text import text_problems

_new = object.__new__
_set = object.__setattr__
_UNKNOWN = SafeUUID.unknown


def uuid_from_hex(data: str) -> UUID:
    """`UUID(data)` for the 32 hex digits this log writes, in less than half the time.

    Builds the object the way `UUID.__setstate__` (unpickling) does. Every event carries two to four
    ids, so `UUID.__init__`'s parsing was a tenth of decoding an event during a rebuild.
    """
    number = int(data, 16) if len(data) == 32 else -1
    if number < 0:
        return UUID(data)  # not what this log writes: the full parser, with its errors
    value = _new(UUID)
    _set(value, "int", number)
    _set(value, "is_safe", _UNKNOWN)
    return value


class UUIDAsHex(Transcoding):
    """The library's `uuid_hex` transcoding (same name, same stored form), decoding faster."""

    type = UUID
    name = "uuid_hex"

    def encode(self, obj: UUID) -> str:
        return obj.hex

    def decode(self, data: str) -> UUID:
        return uuid_from_hex(data)


class EmbeddingAsFloat32(Transcoding):
    type = Embedding
    name = "embedding_f32"

    def encode(self, obj: Embedding) -> dict[str, Any]:
        return {"model": obj.model, "dim": obj.dim, "f32": base64.b64encode(obj.data).decode("ascii")}

    def decode(self, data: dict[str, Any]) -> Embedding:
        return Embedding(model=data["model"], dim=int(data["dim"]), data=base64.b64decode(data["f32"]))


class DateAsISO(Transcoding):
    type = _dt.date
    name = "date_iso"

    def encode(self, obj: _dt.date) -> str:
        return obj.isoformat()

    def decode(self, data: str) -> _dt.date:
        return _dt.date.fromisoformat(data)


class StorableTextTranscoder(JSONTranscoder):
    """The library's JSON transcoder, refusing an event that holds text no store can keep (ADR 0029).

    Every intake refuses such text first, naming the input's field (domain/text.py); this is the
    last line, for whatever else would write it (an LLM's answer, code yet to come): an event with
    a NUL would stop the views on PostgreSQL, and one with a lone surrogate cannot be encoded at all.
    JSON writes NUL as the escape `\\u0000`, so the check of a well-formed event is one substring
    search; the walk that names the field runs only when the search finds one.
    """

    def encode(self, obj: Any) -> bytes:
        text = self.encoder.encode(obj)
        if "\\u0000" in text:
            _refuse_unstorable(obj)  # or a literal backslash followed by "u0000": nothing to refuse
        try:
            return text.encode("utf8")
        except UnicodeEncodeError:
            _refuse_unstorable(obj)
            raise


def _refuse_unstorable(state: Any) -> None:
    found = next(text_problems(state), None)
    if found is not None:
        path, problem = found
        raise InvalidInput(f"an event's {path or 'text'} {problem}; nothing was written", field=path)
