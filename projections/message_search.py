"""The messages' search view (issue #10, ADR 0055): what `engram messages search` ranks messages with.

- `message_terms`: one row per message and word (case-folded, as `note_search.terms` reads words),
  with the count and what a search filters and breaks ties on (user, channel, time). Plain rows that
  both backends query alike, scored BM25-style at read time (`MessageSearch.lexical`), as the notes'
  `note_terms` are (ADR 0049).
- `message_term_beings`: how many messages each being has indexed: BM25's N, read in one row.

Its own view, not columns of the conversations view: the words of a message are written when the
view catches up, never in the intake's transaction, and a rebuild of the search leaves sessions and
summaries alone (and the other way round).
"""

from __future__ import annotations

import math
from typing import Any
from uuid import UUID

from engram.domain.message import Message
from engram.projections.engine import Batch, Projection, handles
from engram.projections.note_search import BM25_K1, terms
from engram.projections.notes import utc_text
from engram.projections.tables import Index, TableSpec

MESSAGE_TERMS = TableSpec(
    name="message_terms",
    columns={
        "id": "text",  # "<message id>/<term>"
        "message_id": "id",
        "being_id": "id",
        "term": "text",
        "count": "int",
        "user_id": "text",
        "channel": "text",
        "at": "text",  # utc_text: newest first among equal scores
    },
    indexes=(Index("term", ("being_id", "term")),),
)

MESSAGE_TERM_BEINGS = TableSpec(
    name="message_term_beings", columns={"id": "id", "messages": "int", "position": "int"}
)

VIEW = "message_search"


class MessageSearchView(Projection):
    name = VIEW
    schema_version = 1
    tables = (MESSAGE_TERMS, MESSAGE_TERM_BEINGS)

    def prefetch(self, batch: Batch, events: Any) -> None:
        beings = {str(e.being_id) for e in events if isinstance(e, Message.Received)}
        batch.message_term_beings.prefetch(batch.conn, list(beings))

    @handles(Message.Received)
    def _received(self, batch: Batch, e: Message.Received) -> None:
        message_id, being_id = str(e.originator_id), str(e.being_id)
        at = utc_text(e.at)
        for term, count in terms(e.text).items():
            batch.message_terms.put(
                {
                    "id": f"{message_id}/{term}",
                    "message_id": message_id,
                    "being_id": being_id,
                    "term": term,
                    "count": count,
                    "user_id": e.user,
                    "channel": e.channel,
                    "at": at,
                }
            )
        row = batch.message_term_beings.get(batch.conn, being_id)
        messages = (row["messages"] if row is not None else 0) + 1
        batch.message_term_beings.put({"id": being_id, "messages": messages, "position": batch.position})


class MessageSearch:
    """Lexical search over one being's messages. `read` is a `ReadModels` (its `reading`)."""

    def __init__(self, read: Any) -> None:
        self.read = read

    def lexical(
        self,
        being_id: UUID,
        text: str,
        limit: int,
        *,
        channel: str | None = None,
        user: str | None = None,
    ) -> list[tuple[str, float]]:
        """The messages that share words with `text` (of `channel` and `user` when given), best first,
        the newest first among equal scores: Σ over the query's words of idf · count·(k1 + 1) /
        (count + k1), idf as BM25's over the being's messages. Only words reach the SQL, as bound
        parameters: quotes, operators and wildcards in `text` are separators or characters."""
        words = sorted(terms(text))
        if not words:
            return []
        marks = ", ".join("?" for _ in words)
        where, params = f"being_id = ? AND term IN ({marks})", [str(being_id), *words]
        with self.read.reading(VIEW) as (conn, tables):
            beings, postings = tables["message_term_beings"], tables["message_terms"]
            found = conn.query(f"SELECT messages FROM {beings} WHERE id = ?", [str(being_id)])
            if not found:
                return []
            n = int(found[0]["messages"])
            # Document frequencies over all the being's messages, so that a filter does not change
            # how rare a word counts as; the filtered postings are the candidates.
            df = {
                str(r["term"]): int(r["n"])
                for r in conn.query(
                    f"SELECT term, COUNT(*) AS n FROM {postings} WHERE {where} GROUP BY term", params
                )
            }
            idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
            if not idf:
                return []
            for column, value in (("channel", channel), ("user_id", user)):
                if value is not None:
                    where += f" AND {column} = ?"
                    params.append(value)
            # Scored and cut to `limit` in the database: a common word's postings (a third of a
            # being's messages) never cross to Python. Each word's idf is a bound parameter.
            weight = "CASE term " + " ".join("WHEN ? THEN ?" for _ in idf) + " END"
            rows = conn.query(
                f"SELECT message_id, MAX(at) AS at, "
                # Rounded, so that equal words give equal scores whatever order the sum took.
                # k1 as bound floats: PostgreSQL then computes in double precision, not numeric.
                f"ROUND(CAST(SUM({weight} * count * ? / (count + ?)) AS NUMERIC), 6) AS score "
                f"FROM {postings} WHERE {where} GROUP BY message_id "
                f"ORDER BY score DESC, at DESC, message_id DESC LIMIT {int(limit)}",
                [*(x for t, f in idf.items() for x in (t, f)), BM25_K1 + 1, BM25_K1, *params],
            )
        return [(str(r["message_id"]), float(r["score"])) for r in rows]
