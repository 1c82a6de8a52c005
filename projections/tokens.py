"""The tokens view: API tokens by hash, for verifying a bearer token with one indexed lookup."""

from __future__ import annotations

from typing import Any

from engram.domain.token import ApiToken
from engram.projections import engine
from engram.projections.engine import Batch, Projection, handles
from engram.projections.sql import ViewDatabase
from engram.projections.tables import Index, TableSpec

TOKENS = TableSpec(
    name="tokens",
    key="token_hash",
    columns={
        "token_hash": "text",
        "id": "id",
        "scope": "text",
        "being_id": "id",
        "prefix": "text",
        "label": "text",
        "issued_at": "text",
        "revoked": "bool",
        "revoked_at": "text",
        "version": "int",
        "position": "int",
    },
    indexes=(Index("id", ("id",)), Index("prefix", ("prefix",))),
)


class TokensView(Projection):
    name = "tokens"
    schema_version = 1
    tables = (TOKENS,)

    def __init__(self) -> None:
        # Revocations arrive with the token's id, rows are keyed by hash.
        self._hash_by_id: dict[str, str] = {}

    def prefetch(self, batch: Batch, events: Any) -> None:
        wanted = [str(e.originator_id) for e in events if not isinstance(e, ApiToken.Issued)]
        if not wanted:
            return
        marks = ", ".join("?" for _ in wanted)
        table = batch.tokens.physical
        for row in batch.conn.query(
            f"SELECT {TOKENS.select_list} FROM {table} WHERE id IN ({marks})", wanted
        ):
            batch.tokens.rows[str(row["token_hash"])] = TOKENS.normalise(row)
            self._hash_by_id[str(row["id"])] = str(row["token_hash"])

    @handles(ApiToken.Issued)
    def _issued(self, batch: Batch, e: ApiToken.Issued) -> None:
        self._hash_by_id[str(e.originator_id)] = e.token_hash
        batch.tokens.put(
            {
                "token_hash": e.token_hash,
                "id": str(e.originator_id),
                "scope": e.scope,
                "being_id": str(e.being_id) if e.being_id else None,
                "prefix": e.prefix,
                "label": e.label,
                "issued_at": e.timestamp.isoformat(),
                "revoked": False,
                "revoked_at": None,
                "version": e.originator_version,
                "position": batch.position,
            }
        )

    @handles(ApiToken.Revoked)
    def _revoked(self, batch: Batch, e: ApiToken.Revoked) -> None:
        token_hash = self._hash_by_id.get(str(e.originator_id))
        row = batch.tokens.get(batch.conn, token_hash) if token_hash else None
        if row is None:
            raise LookupError(f"tokens view: Revoked for unknown token {e.originator_id}")
        row.update(
            revoked=True,
            revoked_at=e.timestamp.isoformat(),
            version=e.originator_version,
            position=batch.position,
        )
        batch.tokens.put(row)


def _select(
    db: ViewDatabase, projection: Projection, where: str, params: list[Any], tail: str = ""
) -> list[dict[str, Any]]:
    with db.read() as conn:
        table = engine.read_tables(conn, db, projection)[TOKENS.name]
        rows = conn.query(f"SELECT {TOKENS.select_list} FROM {table} WHERE {where} {tail}", params)
    return [TOKENS.normalise(r) for r in rows]


def token_by_hash(db: ViewDatabase, projection: Projection, token_hash: str) -> dict[str, Any] | None:
    rows = _select(db, projection, "token_hash = ?", [token_hash])
    return rows[0] if rows else None


def tokens(
    db: ViewDatabase, projection: Projection, *, include_revoked: bool = False
) -> list[dict[str, Any]]:
    where = "1 = 1" if include_revoked else "revoked = ?"
    params: list[Any] = [] if include_revoked else [False]
    return _select(db, projection, where, params, "ORDER BY issued_at, id")
