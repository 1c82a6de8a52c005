"""The message routes (issue #10): taking chat messages and searching them. Their own router, included
by `app.py` before `routes.v1`; every route resolves `{being}` through `being_access`, as the others do."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from engram.adapters.http.deps import Being, EngramDep
from engram.adapters.http.problems import BAD_JSON, COMMON, CONFLICT
from engram.services.commands import MAX_BATCH_MESSAGES, MessageInput, MessagesTaken, MessageTaken
from engram.services.message_search import DEFAULT_MESSAGE_HITS, MAX_MESSAGE_HITS, MessagesFound

messages = APIRouter(prefix="/v1", tags=["messages"], responses={**COMMON})


class MessageBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    messages: list[MessageInput] = Field(min_length=1, max_length=MAX_BATCH_MESSAGES)


def _shape(value: Any) -> str:
    return "batch" if isinstance(value, dict) and "messages" in value else "one"


MessageBody = Annotated[
    Annotated[MessageInput, Tag("one")] | Annotated[MessageBatch, Tag("batch")],
    Discriminator(_shape),
    Body(description='One message, or `{"messages": [...]}`: up to 1,000 in one transaction.'),
]


@messages.post(
    "/beings/{being}/messages",
    name="take_messages",
    status_code=201,
    response_model=MessageTaken | MessagesTaken,
    responses={
        200: {
            "model": MessageTaken | MessagesTaken,
            "description": "Every message id was taken before with the same content: nothing written.",
        },
        **BAD_JSON,
        **CONFLICT,
    },
)
def take_messages(
    body: MessageBody, being: Being, engram: EngramDep, response: Response
) -> MessageTaken | MessagesTaken:
    """Take one chat message, or a batch (all or none: a refused message refuses the batch, naming its
    index). A message is taken once per `id`: the same id again answers 200 with `duplicate: true` and
    writes nothing; the same id with other content is a 409 `conflict`. 201 when something was written."""
    if isinstance(body, MessageBatch):
        batch = engram.messages.take_many(being.ref, body.messages)
        response.status_code = 201 if batch.position is not None else 200
        return batch
    taken = engram.messages.take(being.ref, body)
    response.status_code = 200 if taken.duplicate else 201
    return taken


@messages.get("/beings/{being}/messages/search", name="search_messages", response_model=MessagesFound)
def search_messages(
    being: Being,
    engram: EngramDep,
    q: Annotated[str, Query(description="Words to find (at most 4,000 characters).")],
    channel: Annotated[str | None, Query(description="Only messages of this channel.")] = None,
    user: Annotated[str | None, Query(description="Only the conversation with this user.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_MESSAGE_HITS)] = DEFAULT_MESSAGE_HITS,
) -> MessagesFound:
    """The being's messages that share words with `q`, best first (BM25-style), the newest among equal
    scores; each with its id, user, channel, role, time, session, score and a snippet."""
    return engram.message_search.search(being.ref, q, channel=channel, user=user, limit=limit)
