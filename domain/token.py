"""API tokens: who may call the HTTP API, and for which being.

A token is issued once and shown once: the log keeps only its SHA-256 hash and a short non-secret
prefix for listing. The random token itself is drawn by the application (`services/tokens.py`),
like every other nondeterministic value, so this module stays pure.

A `being` token reaches one being's resources; an `admin` token reaches every being and the admin
endpoints. A revoked token never works again.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate

from engram.domain.errors import InvalidInput, InvalidTransition
from engram.domain.text import check_text

MAX_LABEL_CHARS = 200
MAX_PREFIX_CHARS = 16
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


class TokenScope(StrEnum):
    BEING = "being"
    ADMIN = "admin"


class ApiToken(Aggregate):
    TOPIC = "engram.ApiToken"

    class Event(Aggregate.Event):
        TOPIC = "engram.ApiToken.Event"
        being_id: UUID | None

    class Issued(Event, Aggregate.Created):
        TOPIC = "engram.ApiToken.Issued"
        class_version = 1
        scope: str
        token_hash: str
        prefix: str
        label: str

    class Revoked(Event):
        TOPIC = "engram.ApiToken.Revoked"
        class_version = 1
        reason: str

        def apply(self, token: ApiToken) -> None:
            token.revoked = True
            token.revoked_at = self.timestamp
            token.revoke_reason = self.reason

    def __init__(self, being_id: UUID | None, scope: str, token_hash: str, prefix: str, label: str) -> None:
        self.being_id = being_id
        self.scope = scope
        self.token_hash = token_hash
        self.prefix = prefix
        self.label = label
        self.revoked = False
        self.revoked_at: datetime | None = None
        self.revoke_reason: str | None = None

    @classmethod
    def issue(
        cls,
        token_id: UUID,
        scope: TokenScope | str,
        being_id: UUID | None,
        token_hash: str,
        prefix: str,
        label: str,
        at: datetime,
    ) -> ApiToken:
        """Record a new token. A being token names its being; an admin token names none."""
        try:
            scope = TokenScope(scope)
        except ValueError:
            raise InvalidInput(f"a token's scope is 'being' or 'admin', not {scope!r}") from None
        if scope is TokenScope.BEING and being_id is None:
            raise InvalidInput("a being token needs a being")
        if scope is TokenScope.ADMIN and being_id is not None:
            raise InvalidInput("an admin token belongs to no being")
        if not _SHA256_HEX.fullmatch(token_hash):
            raise InvalidInput("a token hash is 64 lowercase hex digits (SHA-256)")
        if not 0 < len(prefix) <= MAX_PREFIX_CHARS:
            raise InvalidInput(f"a token prefix has 1 to {MAX_PREFIX_CHARS} characters")
        label = check_text("label", label.strip())
        if len(label) > MAX_LABEL_CHARS:
            raise InvalidInput(f"a token label has at most {MAX_LABEL_CHARS} characters", field="label")
        return cls._create(
            cls.Issued,
            id=token_id,
            being_id=being_id,
            scope=scope.value,
            token_hash=token_hash,
            prefix=prefix,
            label=label,
            timestamp=at,
        )

    def revoke(self, reason: str, at: datetime) -> None:
        if self.revoked:
            raise InvalidTransition(f"token {self.prefix}… is already revoked", token_id=str(self.id))
        if len(check_text("reason", reason)) > MAX_LABEL_CHARS:
            raise InvalidInput(
                f"a revocation reason has at most {MAX_LABEL_CHARS} characters", field="reason"
            )
        self.trigger_event(self.Revoked, being_id=self.being_id, timestamp=at, reason=reason)

    def summary(self) -> dict[str, Any]:
        return {
            "id": str(self.id),
            "scope": self.scope,
            "being_id": str(self.being_id) if self.being_id else None,
            "prefix": self.prefix,
            "label": self.label,
            "revoked": self.revoked,
        }
