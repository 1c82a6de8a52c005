"""Issuing, verifying and revoking API tokens (the HTTP API's bearer tokens).

A token is `eng_` + 32 random bytes in base64url (256 bits): it is shown once, when issued, and
stored nowhere. The log keeps its SHA-256 hash (a fast hash is enough for a high-entropy secret:
there is nothing to brute-force) and a short prefix that helps people tell tokens apart.

Verification reads the tokens view by hash. A hash it does not know yet catches the view up first,
so a token issued a moment ago by another process works at once; a known token is re-checked
against the log at most every `refresh_s` seconds, so a revocation takes effect within that time.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from engram.domain.errors import InvalidInput
from engram.domain.token import ApiToken, TokenScope
from engram.projections.tokens import token_by_hash, tokens
from engram.services.beings import parse_uuid, resolve_being
from engram.services.commands import Done
from engram.services.errors import NotFound
from engram.services.ports import Tokens

TOKEN_PREFIX = "eng_"  # noqa: S105 - the public prefix of every token, not a secret
TOKEN_BYTES = 32
TOKEN_CHARS = len(TOKEN_PREFIX) + 43  # base64url of 32 bytes, unpadded
DISPLAY_PREFIX_CHARS = 12  # "eng_" + 8 characters: 48 of the 256 bits, enough to tell tokens apart
VIEW = "tokens"


def generate_token() -> str:
    return TOKEN_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(TOKEN_BYTES)).rstrip(b"=").decode()


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def looks_like_token(token: str) -> bool:
    return len(token) == TOKEN_CHARS and token.startswith(TOKEN_PREFIX) and token.isascii()


class TokenInfo(BaseModel):
    """What is known about a token; never the token itself."""

    id: str
    scope: str
    being_id: str | None
    being: str | None = None
    prefix: str
    label: str
    issued_at: str
    revoked: bool
    revoked_at: str | None = None


class IssuedToken(TokenInfo):
    token: str = Field(description="The bearer token. Shown once: only its hash is stored.")
    position: int | None = None


@dataclass(frozen=True)
class Principal:
    """Who is calling: a verified token (or the development mode's implicit admin)."""

    token_id: str | None
    scope: TokenScope
    being_id: UUID | None

    @property
    def is_admin(self) -> bool:
        return self.scope is TokenScope.ADMIN


DEV_ADMIN = Principal(token_id=None, scope=TokenScope.ADMIN, being_id=None)


def _info(row: dict[str, Any], being: str | None = None) -> TokenInfo:
    return TokenInfo(
        id=row["id"],
        scope=row["scope"],
        being_id=row["being_id"],
        being=being,
        prefix=row["prefix"],
        label=row["label"],
        issued_at=row["issued_at"],
        revoked=bool(row["revoked"]),
        revoked_at=row["revoked_at"],
    )


class TokenService:
    def __init__(self, engram: Tokens, *, refresh_s: float = 1.0) -> None:
        self.e = engram
        self.refresh_s = refresh_s
        self._last_refresh = 0.0
        self._mutex = threading.Lock()

    # -- issuing and revoking -----------------------------------------------------------------

    def issue(self, *, being: str | None = None, admin: bool = False, label: str = "") -> IssuedToken:
        """A new token for one being (or, with `admin`, for everything). The result holds the secret."""
        if admin == (being is not None):
            raise InvalidInput("a token is either for one being or admin, not both and not neither")
        resolved = resolve_being(self.e.store, being) if being is not None else None
        being_id = resolved.id if resolved is not None else None
        token = generate_token()
        token_id = self.e.ids.new_id()
        prefix = token[:DISPLAY_PREFIX_CHARS]

        def handle() -> IssuedToken:
            at = self.e.clock.now()
            agg = ApiToken.issue(
                token_id,
                TokenScope.ADMIN if admin else TokenScope.BEING,
                being_id,
                hash_token(token),
                prefix,
                label,
                at,
            )
            position = self.e.store.save(agg)
            return IssuedToken(
                id=str(agg.id),
                scope=agg.scope,
                being_id=str(being_id) if being_id else None,
                being=resolved.name if resolved is not None else None,
                prefix=prefix,
                label=agg.label,
                issued_at=at.isoformat(),
                revoked=False,
                token=token,
                position=position,
            )

        return self.e.runner.run("issue_token", handle, being_id=being_id)

    def _find(self, ref: str) -> UUID:
        """A token by id, or by its listed prefix (which must match exactly one token)."""
        as_id = parse_uuid(ref)
        if as_id is not None:
            return as_id
        if not ref.startswith(TOKEN_PREFIX) or len(ref) < len(TOKEN_PREFIX) + 4:
            raise NotFound(f"token {ref!r} not found")
        matches = [
            t for t in self.list(include_revoked=True) if t.prefix.startswith(ref) or ref.startswith(t.prefix)
        ]
        if len(matches) > 1:
            raise InvalidInput(
                f"{len(matches)} tokens match {ref!r}; give the token's id", ids=[t.id for t in matches]
            )
        if not matches:
            raise NotFound(f"token {ref!r} not found")
        return UUID(matches[0].id)

    def revoke(self, ref: str, reason: str = "") -> Done:
        """Revoke a token (by id or prefix). Revoking a revoked token writes nothing."""
        token_id = self._find(ref)

        def handle() -> Done:
            agg = self.e.store.get(ApiToken, token_id)
            if agg.revoked:
                return Done(position=None, details={"id": str(agg.id), "already_revoked": True})
            agg.revoke(reason, self.e.clock.now())
            return Done(
                position=self.e.store.save(agg), details={"id": str(agg.id), "already_revoked": False}
            )

        done: Done = self.e.runner.run("revoke_token", handle)
        with self._mutex:
            self._last_refresh = 0.0
        return done

    def list(self, *, include_revoked: bool = False) -> list[TokenInfo]:
        views = self.e.views
        views.ensure(names=[VIEW, "beings"])
        names = {b["id"]: b["name"] for b in views.read.beings()}
        rows = tokens(views.dbs[VIEW], views.projections[VIEW], include_revoked=include_revoked)
        return [_info(r, names.get(r["being_id"])) for r in rows]

    # -- verifying ----------------------------------------------------------------------------

    def _lookup(self, token_hash: str) -> dict[str, Any] | None:
        views = self.e.views
        return token_by_hash(views.dbs[VIEW], views.projections[VIEW], token_hash)

    def _refresh(self) -> None:
        self.e.views.ensure(names=[VIEW])
        with self._mutex:
            self._last_refresh = time.monotonic()

    def verify(self, token: str) -> Principal | None:
        """The principal a bearer token stands for, or None for an unknown, malformed or revoked token."""
        if not looks_like_token(token):
            return None
        with self._mutex:
            stale = time.monotonic() - self._last_refresh > self.refresh_s
        if stale:
            self._refresh()
        token_hash = hash_token(token)
        row = self._lookup(token_hash)
        if row is None and not stale:
            self._refresh()
            row = self._lookup(token_hash)
        if row is None or row["revoked"]:
            return None
        being_id = UUID(row["being_id"]) if row["being_id"] else None
        return Principal(token_id=row["id"], scope=TokenScope(row["scope"]), being_id=being_id)
