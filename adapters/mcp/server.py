"""The MCP server: the spec's memory tools for one being, over stdio (`engram mcp --being NAME`).

The being is fixed when the server starts; no tool takes a being, so a client can never reach
another being's memories. Tools: `recall`, `recall_memory`, `search_memory`, `query`,
`note_scene`, `note`, `context`, … and `note_message`, `search_messages` (`message_tools.py`).

Every Engram call runs on one dedicated worker thread, in order: the embedded stores keep
per-thread connections, and one thread keeps them simple and safe; the event loop stays free to
answer pings and cancellations meanwhile. Refused input and domain errors come back as MCP tool
errors (`isError: true`) with the reason; unexpected failures are logged on stderr with the
traceback and reported as a bare tool error. stdout carries the protocol only: the SDK points
file descriptor 1 at stderr while it serves, and Engram logs to stderr anyway.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

import structlog
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from engram.adapters.mcp.message_tools import register_message_tools
from engram.adapters.mcp.note_fields import (
    At,
    Confidence,
    Evidence,
    JobId,
    Scope,
    Sensitive,
    Stability,
    Subject,
    Tags,
    TtlDays,
)
from engram.domain.errors import DomainError
from engram.domain.message import MAX_USER_CHARS
from engram.domain.scene import Scene
from engram.services.beings import resolve_being
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput, NoteTaken, given_lifecycle, invalid_input_of
from engram.services.note_lifecycle import NotesMerged, NoteSuperseded
from engram.services.pack import MAX_PACK_LIMIT, ContextPack
from engram.services.ranking import PROFILES
from engram.services.reading import (
    MAX_CURSOR_CHARS,
    MAX_QUERY_CHARS,
    MAX_QUERY_K,
    MAX_SEARCH_PAGE,
    MAX_SEARCH_TERMS,
    ContextView,
    NodeView,
    Searched,
)

T = TypeVar("T")
IdempotencyKey = Annotated[
    str | None, Field(min_length=1, max_length=200, description="The same key twice stores one note.")
]
SourceRef = Annotated[
    str | None, Field(min_length=1, max_length=500, description="Where it came from, e.g. a message id.")
]
NoteKindName = Literal[
    "todo",
    "reminder",
    "knowledge",
    "rule",
    "preference",
    "relationship",
    "tool",
    "map",
    "log",
    "summary",
    "soul",
]  # every kind but scene (`note_scene`); a test holds it to `NoteKind`

log = structlog.get_logger("engram.mcp")


# -- what the tools return (structured content; the text content says the same for the model) -------


class RecallResult(BaseModel):
    text: str = Field(description="The fragment stream in <memory>…</memory>, or empty when nothing matched.")
    matched: int = Field(description="How many memories the fragments come from (at most 3).")


class Memory(BaseModel):
    id: str
    cluster_id: str
    status: Literal["active", "dying", "dead"]
    text: str = Field(description='The scene as "YYYY-MM-DD — setting — action — "dialogue" — (feeling)".')
    action: str
    feeling: str
    when: list[Any]
    themes: list[str]
    importance: float
    pinned: bool
    score: float | None = Field(None, description="Relevance (query only).")

    @classmethod
    def of(cls, node: NodeView) -> Memory:
        try:
            text = Scene.model_validate(node.scene).to_text(node.feeling)
        except ValueError:
            text = node.action
        return cls(
            id=node.id,
            cluster_id=node.cluster_id,
            status=node.status,
            text=text,
            action=node.action,
            feeling=node.feeling,
            when=list(node.scene.get("when", [])),
            themes=node.themes,
            importance=node.importance,
            pinned=node.pinned,
            score=node.score,
        )


class Memories(BaseModel):
    memories: list[Memory]


class SearchPage(Memories):
    total: int = Field(description="How many memories match in all.")
    cursor: str | None = Field(description="For the next page (same query and mode); null on the last.")


# -- running Engram on its own thread -----------------------------------------------------------------


class EngramSession:
    """One Engram, one being, one worker thread. Create it, serve, then `close()` it."""

    def __init__(self, open_engram: Callable[[], Engram], being_ref: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-mcp")
        self._engram: Engram | None = None
        try:
            self._engram = self._executor.submit(open_engram).result()
            being = self._executor.submit(resolve_being, self._engram.store, being_ref).result()
        except BaseException:
            self.close()
            raise
        self.being_id = str(being.id)
        self.being_name: str = being.name

    @property
    def engram(self) -> Engram:
        assert self._engram is not None, "the session is closed"
        return self._engram

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn` on the worker thread and wait (for callers outside the event loop)."""
        return self._executor.submit(fn, *args, **kwargs).result()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn` on the worker thread; domain errors become tool errors with their reason
        (an invalid scene's message lists every problem)."""
        try:
            return await asyncio.wrap_future(self._executor.submit(fn, *args, **kwargs))
        except DomainError as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from exc

    def close(self) -> None:
        if self._engram is not None:
            engram, self._engram = self._engram, None
            self._executor.submit(engram.close).result()
        self._executor.shutdown(wait=True)


# -- the server --------------------------------------------------------------------------------------


def _memories_result(nodes: list[NodeView], empty: str, page: Searched | None = None) -> CallToolResult:
    memories = [Memory.of(n) for n in nodes]
    lines = [
        f"- {m.text}{'' if m.status == 'active' else f' [{m.status}]'}"
        + (f" (score {m.score:.4f})" if m.score is not None else "")
        + f" [id {m.id}, cluster {m.cluster_id}]"
        for m in memories
    ]
    structured: Memories = Memories(memories=memories)
    if page is not None:
        structured = SearchPage(memories=memories, total=page.total, cursor=page.cursor)
        if page.cursor is not None:
            lines.append(f"({page.total} memories match; the next page: cursor {page.cursor})")
    return CallToolResult(
        content=[TextContent(type="text", text="\n".join(lines) if lines else empty)],
        structured_content=structured.model_dump(mode="json"),
    )


async def _take_note(
    session: EngramSession,
    kind: str,
    text: str,
    idempotency_key: str | None,
    source_ref: str | None,
    lifecycle: dict[str, Any],
) -> CallToolResult:
    """`note_scene` and `note`: take one note; the text says what became of it."""
    try:
        item = NoteInput(
            kind=kind, text=text, idempotency_key=idempotency_key, source_ref=source_ref, **lifecycle
        )
    except ValidationError as exc:
        refused = invalid_input_of(exc)
        raise ToolError(f"{refused.code}: {refused.message}") from exc
    taken = await session.call(session.engram.notes.take, session.being_id, item)
    message = f"noted {taken.kind} {taken.note_id}" + (
        " (already noted with this key)" if taken.duplicate else ""
    )
    if taken.expires_at is not None:
        message += f"; it expires {taken.expires_at}"
    if taken.superseded:
        message += f"; it supersedes {', '.join(taken.superseded)}"
    if taken.parsed is False:
        message += f"; it did not parse as a scene and is kept for repair: {taken.parse_error}"
    return CallToolResult(
        content=[TextContent(type="text", text=message)], structured_content=taken.model_dump()
    )


def build_server(session: EngramSession) -> MCPServer[Any]:
    """An MCP server whose tools all act on `session`'s being."""
    name = session.being_name
    reading = session.engram.reading
    being = session.being_id
    server: MCPServer[Any] = MCPServer(
        name="engram",
        title=f"Engram — memory of {name}",
        instructions=(
            f"Long-term memory of {name}. Call `recall` with the user's message to let related "
            "memories surface; `query` to look something up; `search_memory` for exact keywords, "
            "dates or themes; `recall_memory` for every memory of a cluster; `note_scene` to remember "
            "what just happened; `note` for a to-do, reminder, knowledge, rule, preference, "
            "relationship, tool or map entry, a log, a summary or my soul (with a time to live, tags, "
            "sensitivity); `supersede_note` when a note replaces another; `merge_notes` to fold notes "
            "into one summary; `context` for the persona, notes, diary and recent memories; `pack` for "
            "my notes as one text block; `note_message` for every chat message (the user's and mine), "
            "`search_messages` to find what was said."
        ),
        log_level=session.engram.settings.log_level.upper(),  # type: ignore[arg-type]
    )
    reads = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)

    @server.tool(annotations=reads, structured_output=True)
    async def recall(
        text: Annotated[
            str,
            Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The message that may remind me."),
        ],
    ) -> Annotated[CallToolResult, RecallResult]:
        """What a message brings back: up to 3 similar memories, their actions and feelings shuffled
        into one <memory>…</memory> fragment stream. Empty when nothing is close enough. Recalled
        memories are reactivated."""
        result = await session.call(reading.recall, being, text)
        structured = RecallResult(text=result.text, matched=len(result.nodes)).model_dump()
        content = [TextContent(type="text", text=result.text)] if result.text else []
        return CallToolResult(content=content, structured_content=structured)

    @server.tool(annotations=reads, structured_output=True)
    async def recall_memory(
        cluster_id: Annotated[UUID, Field(description="A cluster id, as other tools report it.")],
    ) -> Annotated[CallToolResult, Memories]:
        """Every memory of one cluster, most recently activated first. Reactivates them (dead ones
        strongly, so they may revive)."""
        result = await session.call(reading.recall_memory, being, cluster_id)
        return _memories_result(result.nodes, "the cluster holds no memories")

    @server.tool(annotations=reads, structured_output=True)
    async def search_memory(
        query: Annotated[
            str | list[str],
            Field(
                description="Keywords: a string of space-separated terms, or a list of terms "
                "(a list item may be a phrase)."
            ),
        ],
        mode: Annotated[
            Literal["or", "and"],
            Field(description="or: any term matches (default); and: every term matches, in any field."),
        ] = "or",
        limit: Annotated[
            int, Field(ge=1, le=MAX_SEARCH_PAGE, description="At most this many memories per page.")
        ] = 50,
        cursor: Annotated[
            str | None,
            Field(
                min_length=1,
                max_length=MAX_CURSOR_CHARS,
                description="The next page of the same search: the cursor the previous page returned.",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, SearchPage]:
        """Keyword search: a term matches, case-insensitively, a substring of a memory's action,
        feeling or dates (including consolidated `{date, action}` entries), or one of its themes
        whole (any case). Newest memories first, a page at a time. Every matching memory is reactivated by the
        first call; pages asked for with a cursor reactivate nothing more."""
        terms = query.split() if isinstance(query, str) else [t.strip() for t in query if t.strip()]
        if not terms:
            raise ToolError("give at least one search term")
        if len(terms) > MAX_SEARCH_TERMS:
            raise ToolError(f"at most {MAX_SEARCH_TERMS} search terms")
        result = await session.call(reading.search_memory, being, terms, mode, limit, cursor)
        return _memories_result(result.nodes, "no memory matches", result)

    @server.tool(annotations=reads, structured_output=True)
    async def query(
        text: Annotated[
            str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")
        ],
        k: Annotated[int, Field(ge=1, le=MAX_QUERY_K, description="How many memories.")] = 10,
        profile: Annotated[str, Field(description=f"Ranking profile: {', '.join(PROFILES)}.")] = "default",
        include_dead: Annotated[bool, Field(description="Also rank dead memories.")] = False,
        reactivate: Annotated[
            bool, Field(description="Reactivate the memories returned (false: read only).")
        ] = True,
    ) -> Annotated[CallToolResult, Memories]:
        """The k memories most relevant to a text, best first: meaning and wording combined, with a
        little weight for importance."""
        result = await session.call(
            reading.query,
            being,
            text,
            k,
            profile_name=profile,
            include_dead=include_dead,
            reactivate=reactivate,
        )
        return _memories_result(result.nodes, "no memory matches")

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        structured_output=True,
    )
    async def note_scene(
        scene: Annotated[
            dict[str, Any] | str,
            Field(
                description='A scene: {"action", "actors", "when": ["YYYY-MM-DD"], optional "setting", '
                '"dialogue", "sensory", "feeling", "importance" (0–1), "themes", "emotion"}. '
                "Free text is kept too, and repaired later."
            ),
        ],
        idempotency_key: IdempotencyKey = None,
        source_ref: SourceRef = None,
        stability: Stability = None,
        ttl_days: TtlDays = None,
        tags: Tags = None,
        evidence: Evidence = None,
        confidence: Confidence = None,
        scope: Scope = None,
        subject: Subject = None,
        job_id: JobId = None,
        at: At = None,
        sensitive: Sensitive = False,
    ) -> Annotated[CallToolResult, NoteTaken]:
        """Remember a scene: it becomes a memory at the next patrol."""
        text = scene if isinstance(scene, str) else json.dumps(scene, ensure_ascii=False)
        if not text.strip():
            raise ToolError("the scene must not be empty")
        lifecycle = given_lifecycle(locals())  # the lifecycle parameters above that were given
        return await _take_note(session, "scene", text, idempotency_key, source_ref, lifecycle)

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        structured_output=True,
    )
    async def note(
        kind: Annotated[
            NoteKindName,
            Field(
                description="todo, reminder or knowledge (the snapshot); soul (who I am: a new one "
                "replaces the last), rule (reusable knowledge: needs evidence and confidence 0.8+), "
                "preference, relationship, tool (a tool I can use) or map (an entry of my map: a place, "
                "a person, a project) (the system prompt); summary (what a job or a session came to); "
                "log (a raw record of a request or an event, usually volatile with ttl_days). Scenes go "
                "through note_scene."
            ),
        ],
        text: Annotated[str, Field(min_length=1, description="The note.")],
        idempotency_key: IdempotencyKey = None,
        source_ref: SourceRef = None,
        stability: Stability = None,
        ttl_days: TtlDays = None,
        tags: Tags = None,
        evidence: Evidence = None,
        confidence: Confidence = None,
        scope: Scope = None,
        subject: Subject = None,
        job_id: JobId = None,
        at: At = None,
        sensitive: Sensitive = False,
    ) -> Annotated[CallToolResult, NoteTaken]:
        """Remember a note that is not a scene; the context shows it from the next call on."""
        lifecycle = given_lifecycle(locals())  # the lifecycle parameters above that were given
        return await _take_note(session, kind, text, idempotency_key, source_ref, lifecycle)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def context(
        user: Annotated[
            str | None,
            Field(
                None,
                min_length=1,
                max_length=MAX_USER_CHARS,
                description="Add where my conversation with this user stands (summaries, spine).",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ContextView]:
        """The conversation context: persona (soul, reflections, rules, preferences,
        relationships, tools, map), snapshot (unread to-dos and reminders, knowledge, the last 7 days
        of diary) and the 5 most recent memories, ready to use as text; `messages` holds the snapshot
        as a user + assistant message pair to start a conversation with. With `user`: the last
        session's summary, this session's rolling summary and the summary spine of that conversation."""
        view = await session.call(reading.context, being, user)
        return CallToolResult(
            content=[TextContent(type="text", text=view.text)], structured_content=view.model_dump()
        )

    # -- a note's lifecycle (ADR 0048) -------------------------------------------------------------

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
        structured_output=True,
    )
    async def supersede_note(
        old: Annotated[str, Field(description="The id of the note that is replaced.")],
        by: Annotated[str, Field(description="The id of the note that replaces it.")],
    ) -> Annotated[CallToolResult, NoteSuperseded]:
        """Mark one of my notes superseded by another of mine (a newer rule, a corrected fact); the old
        one leaves the context."""
        done = await session.call(session.engram.note_lifecycle.supersede, being, old, by)
        return CallToolResult(
            content=[TextContent(type="text", text=f"note {done.old} superseded by {done.by}")],
            structured_content=done.model_dump(),
        )

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False),
        structured_output=True,
    )
    async def merge_notes(
        ids: Annotated[list[str], Field(min_length=2, description="The ids of two or more of my notes.")],
    ) -> Annotated[CallToolResult, NotesMerged]:
        """Merge two or more of my notes (no scenes) into one summary note, which replaces them."""
        done = await session.call(session.engram.note_lifecycle.merge, being, ids)
        how = f"by {done.model}" if done.method == "llm" else "without an LLM"
        return CallToolResult(
            content=[
                TextContent(type="text", text=f"merged {len(done.sources)} notes into {done.note_id} ({how})")
            ],
            structured_content=done.model_dump(),
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def pack(
        query: Annotated[
            str | None,
            Field(
                None,
                min_length=1,
                max_length=MAX_QUERY_CHARS,
                description="Rank the notes by this text instead of recency.",
            ),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=MAX_PACK_LIMIT, description="How many notes at most.")] = 20,
    ) -> Annotated[CallToolResult, ContextPack]:
        """The context pack: my most recent live notes (or, with `query`, those that match it best),
        as a `## Memory Context` text of `[kind] text` blocks to put in a prompt. Never a sensitive,
        superseded or expired note."""
        found = await session.call(session.engram.packing.pack, being, query, limit)
        content = [TextContent(type="text", text=found.text)] if found.text else []
        return CallToolResult(content=content, structured_content=found.model_dump())

    from engram.adapters.mcp.session_tools import add_session_tools

    add_session_tools(server, session)  # `list_sessions`, `show_session` (ADR 0053)
    register_message_tools(server, session)  # note_message, search_messages (issue #10)
    from engram.adapters.mcp.fact_tools import register_fact_tools

    register_fact_tools(server, session)  # add_fact, list_facts, add_lore, change_fact, merge_entities
    from engram.adapters.mcp.extraction_tools import add_extraction_tools

    add_extraction_tools(server, session)  # `extract_facts` (ADR 0058)
    from engram.adapters.mcp.fact_search_tools import register_fact_search_tools

    register_fact_search_tools(server, session)  # search_facts, prompt_slice (ADR 0059)
    from engram.adapters.mcp.profile_tools import register_profile_tools

    register_profile_tools(server, session)  # entity_profile (ADR 0064)
    from engram.adapters.mcp.link_tools import add_link_tools

    add_link_tools(server, session)  # `links` (ADR 0062)
    from engram.adapters.mcp.why_tools import add_why_tools

    add_why_tools(server, session)  # `why` (ADR 0068)
    from engram.adapters.mcp.forget_tools import add_forget_tools

    add_forget_tools(server, session)  # `forget` one's own items (ADR 0075, 0076)
    from engram.adapters.mcp.sleep_tools import add_sleep_tools

    add_sleep_tools(
        server, session
    )  # noop, add_journal_entry, review_journal, mode, wake; asleep: only those
    return server


def serve_stdio(open_engram: Callable[[], Engram], being_ref: str) -> None:
    """Serve `being_ref`'s memory over stdio until the client closes the connection."""
    session = EngramSession(open_engram, being_ref)
    try:
        log.info("mcp server starting", being=session.being_name, being_id=session.being_id)
        build_server(session).run("stdio")
    finally:
        session.close()
