"""The `/v1` routes. Handlers are plain functions (run in the worker thread pool) that call the services.

Every being-scoped route resolves `{being}` through `being_access`, so a being token never reaches
another being; the services are then called with the being's id.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Header, Path, Query, Response

from engram.adapters.http.deps import Admin, Being, BeingAccess, Caller, EngramDep, Tokens, parse_as_of
from engram.adapters.http.problems import ADMIN, BAD_JSON, COMMON, CONFLICT, SENSITIVE, ApiError, Responses
from engram.adapters.http.schemas import (
    BeingCreate,
    BeingSummary,
    ClusterRow,
    Health,
    HistoryEvent,
    ItemKind,
    LlmProvider,
    LogEntry,
    MergeIn,
    NoteBatch,
    NotePatch,
    PatrolIn,
    PatrolOut,
    PatrolRunRow,
    ProjectionStatus,
    QueryIn,
    Rebuilt,
    RecallIn,
    SearchMode,
    SoulIn,
    SupersedeIn,
    TokenCreate,
    ViewProblem,
)
from engram.domain.errors import InvalidInput
from engram.domain.message import MAX_USER_CHARS
from engram.domain.node import NodeStatus
from engram.domain.note import MAX_IDEMPOTENCY_KEY_CHARS, NoteKind
from engram.domain.token import MAX_LABEL_CHARS
from engram.projections.notes import utc_text
from engram.services.bootstrap import Engram
from engram.services.commands import BeingRegistered, Done, NoteInput, NotesTaken, NoteTaken
from engram.services.journals import JournalRefreshed
from engram.services.note_lifecycle import NoteChain, NotesMerged, NoteSuperseded
from engram.services.note_list import DEFAULT_NOTE_LIST, MAX_NOTE_LIST, NoteListed
from engram.services.pack import DEFAULT_PACK_LIMIT, MAX_PACK_LIMIT, ContextPack
from engram.services.reading import (
    MAX_CURSOR_CHARS,
    MAX_QUERY_CHARS,
    MAX_SEARCH_PAGE,
    ContextView,
    Found,
    NodeView,
    Recalled,
    Searched,
)
from engram.services.tokens import IssuedToken, Principal, TokenInfo

MAX_LIST = 1000
MAX_LLM_KEY_CHARS = 1000

AsOf = Annotated[
    str | None,
    Query(
        max_length=64,
        description="A version number (`3`) or an ISO instant with a timezone (`2026-11-20T09:00:00Z`).",
    ),
]


def _version() -> str:
    try:
        return version("engram")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without metadata
        return "unknown"


public = APIRouter(prefix="/v1", tags=["health"])
v1 = APIRouter(prefix="/v1", responses={**COMMON})
admin = APIRouter(prefix="/v1/admin", tags=["admin"], responses={**COMMON, **ADMIN})


@public.get("/health", name="health", response_model=Health)
def health(engram: EngramDep) -> Health:
    """Liveness, the views that stopped or hold events back, and what an operator should know
    (`warnings`): no token needed, so no error text and no being is named (`engram projections status`
    has them)."""
    from engram.services.embedder_check import embedder_mismatch

    try:
        problems = [ViewProblem(**p) for p in engram.views.problems()]
    except Exception as exc:  # the view databases themselves are unreachable
        problems = [ViewProblem(view="*", last_error=type(exc).__name__, position=0)]
    try:
        mismatch = embedder_mismatch(engram)
        warnings = [mismatch.message()] if mismatch else []
    except Exception as exc:  # liveness must answer even when a view cannot be read
        warnings = [f"could not compare the embedders: {type(exc).__name__}"]
    return Health(
        status="degraded" if problems else "ok", version=_version(), views=problems, warnings=warnings
    )


# -- beings ---------------------------------------------------------------------------------------


def _summary(row: dict[str, Any]) -> BeingSummary:
    return BeingSummary(
        id=row["id"],
        name=row["name"],
        cycle=row["cycle"],
        roots={"Business": row["business_root_id"], "Private": row["private_root_id"]},
        registered_at=row["registered_at"],
        last_cycle_at=row["last_cycle_at"],
    )


@v1.post(
    "/beings",
    name="create_being",
    status_code=201,
    response_model=BeingRegistered,
    tags=["beings"],
    responses={**BAD_JSON, **CONFLICT, **ADMIN},
)
def create_being(body: BeingCreate, engram: EngramDep, _caller: Admin) -> BeingRegistered:
    """Register a being (admin). A second being with the same name is a 409."""
    result = engram.beings.register(body.name)
    if body.soul:
        soul = engram.beings.define_soul(result.being_id, body.soul)
        result = result.model_copy(update={"position": soul.position})
    return result


@v1.get("/beings", name="list_beings", response_model=list[BeingSummary], tags=["beings"])
def list_beings(engram: EngramDep, caller: Caller) -> list[BeingSummary]:
    """Every being for an admin token; the token's own being for a being token."""
    engram.views.ensure(names=["beings"])
    rows = engram.views.read.beings()
    return [_summary(r) for r in rows if caller.being_id is None or r["id"] == str(caller.being_id)]


@v1.get("/beings/{being}", name="get_being", response_model=dict[str, Any], tags=["beings"])
def get_being(being: Being, engram: EngramDep, as_of: AsOf = None) -> dict[str, Any]:
    """The being's state (name, cycle, soul, think_md, diary), now or as of a version or an instant."""
    version_, instant = parse_as_of(as_of)
    return engram.audit.state("being", being.ref, version=version_, as_of=instant)


@v1.get("/beings/{being}/history", name="being_history", response_model=list[HistoryEvent], tags=["beings"])
def being_history(being: Being, engram: EngramDep) -> list[dict[str, Any]]:
    """Every event of the being itself, oldest first."""
    return engram.audit.history("being", being.ref)


@v1.put(
    "/beings/{being}/soul",
    name="define_soul",
    response_model=Done,
    tags=["beings"],
    responses={**BAD_JSON, **CONFLICT},
)
def define_soul(body: SoulIn, being: Being, engram: EngramDep) -> Done:
    return engram.beings.define_soul(being.ref, body.soul)


@v1.get("/beings/{being}/context", name="context", response_model=ContextView, tags=["memory"])
def context(
    being: Being,
    engram: EngramDep,
    user: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_USER_CHARS,
            description="Add the conversation with this user: last session summary, rolling summary, spine.",
        ),
    ] = None,
) -> ContextView:
    """The being's context: system prompt (soul, think_md, rules, preferences, relationships, tools,
    map), snapshot and recent memories, as data and rendered; `messages` is the snapshot as the user +
    assistant pair to start a conversation with. With `user`, `conversation` holds where the
    conversation with them stands."""
    return engram.reading.context(being.ref, user=user)


# `/beings/{being}/sessions…` (ADR 0053), registered before `/beings/{being}/{kind}/{item_id}` would take them.
from engram.adapters.http import session_routes as _session_routes  # noqa: E402,F401

# -- notes ----------------------------------------------------------------------------------------


@v1.post(
    "/beings/{being}/notes",
    name="take_note",
    status_code=201,
    response_model=NoteTaken,
    tags=["notes"],
    responses={
        200: {"model": NoteTaken, "description": "Replayed: the idempotency key was used before."},
        **BAD_JSON,
        **CONFLICT,
    },
)
def take_note(
    body: NoteInput,
    being: Being,
    engram: EngramDep,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=MAX_IDEMPOTENCY_KEY_CHARS,
            description="Same as the body's `idempotency_key` (give one or the other, or the same in both).",
        ),
    ] = None,
) -> NoteTaken:
    """Note one scene (or another kind of note). 201 when written, 200 when an idempotency key replayed."""
    if idempotency_key is not None:
        if body.idempotency_key not in (None, idempotency_key):
            raise InvalidInput("the Idempotency-Key header and the body's idempotency_key differ")
        body = body.model_copy(update={"idempotency_key": idempotency_key})
    taken = engram.notes.take(being.ref, body)
    response.status_code = 200 if taken.duplicate else 201
    return taken


@v1.post(
    "/beings/{being}/notes/batch",
    name="take_notes",
    status_code=201,
    response_model=NotesTaken,
    tags=["notes"],
    responses={
        200: {"model": NotesTaken, "description": "Every note replayed an earlier one: nothing written."},
        **BAD_JSON,
        **CONFLICT,
    },
)
def take_notes(body: NoteBatch, being: Being, engram: EngramDep, response: Response) -> NotesTaken:
    """Up to 1,000 notes in one transaction: all are validated first, and all or none are written."""
    taken = engram.notes.take_many(being.ref, body.notes)
    response.status_code = 201 if taken.position is not None else 200
    return taken


@v1.get(
    "/beings/{being}/notes",
    name="list_notes",
    response_model=list[NoteListed],
    tags=["notes"],
    responses=SENSITIVE,
)
def list_notes(
    being: Being,
    engram: EngramDep,
    caller: Caller,
    kind: Annotated[list[NoteKind] | None, Query(description="Only these kinds.")] = None,
    unread: Annotated[
        bool | None, Query(description="true: only unread notes; false: only read ones.")
    ] = None,
    scope: Annotated[str | None, Query(min_length=1, max_length=200, description="Only this scope.")] = None,
    tag: Annotated[list[str] | None, Query(description="Only notes with one of these tags.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_NOTE_LIST)] = DEFAULT_NOTE_LIST,
    all_states: Annotated[
        bool, Query(alias="all", description="Also expired and superseded notes (`state` says which).")
    ] = False,
    include_sensitive: Annotated[bool, Query(description="Also sensitive notes: admin tokens only.")] = False,
) -> list[NoteListed]:
    """The being's notes, newest first by `at`: active and not sensitive unless asked."""
    if include_sensitive and not caller.is_admin:
        raise ApiError(403, "forbidden", "sensitive notes need an admin token")
    return engram.listing.notes(
        being.ref,
        kinds=[k.value for k in kind or []],
        scope=scope,
        tags=tag,
        unread=unread,
        limit=limit,
        include_inactive=all_states,
        include_sensitive=include_sensitive,
    )


@v1.patch(
    "/beings/{being}/notes/{note_id}",
    name="update_note",
    response_model=NoteTaken,
    tags=["notes"],
    responses={**BAD_JSON, **CONFLICT},
)
def update_note(note_id: UUID, body: NotePatch, being: Being, engram: EngramDep) -> NoteTaken:
    """Mark a note read or unread, enable or disable it."""
    if body.read is None and body.enabled is None:
        raise InvalidInput("give `read` and/or `enabled`")
    result: NoteTaken | None = None
    if body.read is not None:
        result = engram.notes.mark_read(being.ref, note_id, read=body.read)
    if body.enabled is not None:
        result = engram.notes.set_enabled(being.ref, note_id, body.enabled)
    assert result is not None
    return result


# -- a note's lifecycle (ADR 0048) ----------------------------------------------------------------


@v1.post(
    "/beings/{being}/notes/{note_id}/supersede",
    name="supersede_note",
    response_model=NoteSuperseded,
    tags=["notes"],
    responses={**BAD_JSON, **CONFLICT},
)
def supersede_note(note_id: UUID, body: SupersedeIn, being: Being, engram: EngramDep) -> NoteSuperseded:
    """Mark the note superseded by `by`, a note of the same being: it leaves every read but its history.
    409 when either is superseded already (a cycle), or `by` has expired."""
    return engram.note_lifecycle.supersede(being.ref, note_id, body.by)


@v1.get(
    "/beings/{being}/notes/{note_id}/chain",
    name="note_chain",
    response_model=NoteChain,
    tags=["notes"],
)
def note_chain(note_id: UUID, being: Being, engram: EngramDep, caller: Caller) -> NoteChain:
    """The note's chain both ways: what it replaced and what replaced it. A sensitive note's text only
    for an admin token."""
    return engram.note_lifecycle.history(being.ref, note_id, include_sensitive=caller.is_admin)


@v1.post(
    "/beings/{being}/notes/merge",
    name="merge_notes",
    status_code=201,
    response_model=NotesMerged,
    tags=["notes"],
    responses={**BAD_JSON, **CONFLICT},
)
def merge_notes(body: MergeIn, being: Being, engram: EngramDep) -> NotesMerged:
    """One `summary` note of two or more of the being's notes (no scenes), which it supersedes. Its text
    is the LLM's summary, or the notes' texts joined when there is no LLM, `llm` is false, a note is
    sensitive or the LLM's answer could not be kept (`refused` says why)."""
    return engram.note_lifecycle.merge(being.ref, body.ids, use_llm=body.llm)


@admin.post("/notes/sweep", name="sweep_notes")
def sweep_notes(engram: EngramDep, _caller: Admin) -> dict[str, object]:
    """Record the expiry of every note past its `expires_at`, of every being (the worker does it too)."""
    engram.views.ensure(names=["notes"])
    return engram.note_expiry.sweep().as_dict()


# -- fact extraction (ADR 0058) -------------------------------------------------------------------


@v1.post("/beings/{being}/facts/extract", name="extract_facts", tags=["facts"])
def extract_facts(being: Being, engram: EngramDep) -> dict[str, Any]:
    """Extract facts from the being's user messages not read yet, now (the worker does it every
    `ENGRAM_EXTRACTION_INTERVAL_S`): messages read, facts stated/reinforced/revised, candidates
    rejected by reason; without an LLM, `skipped` (recorded once per run)."""
    return engram.extraction.run_until_done(being.ref).as_dict()


# -- journals (ADR 0054) --------------------------------------------------------------------------
# Before the `{kind}/{item_id}` routes, which would otherwise take `journal/{date}`.

MARKDOWN = "text/markdown; charset=utf-8"


def _markdown_doc(what: str) -> Responses:
    return {200: {"description": what, "content": {"text/markdown": {"schema": {"type": "string"}}}}}


@v1.get(
    "/beings/{being}/memory.md",
    name="memory_md",
    response_class=Response,
    tags=["journals"],
    responses=_markdown_doc("MEMORY.md, rendered from the log's view."),
)
def memory_md(being: Being, engram: EngramDep) -> Response:
    """The being's MEMORY.md (People, Ongoing lore, Recent journal highlights, Source daily logs),
    rendered from the view, so that every server answers the same whatever its local files hold."""
    return Response(engram.journals.memory_text(being.ref), media_type=MARKDOWN)


@v1.post(
    "/beings/{being}/memory.md/refresh",
    name="refresh_journals",
    response_model=JournalRefreshed,
    tags=["journals"],
    responses={**CONFLICT},
)
def refresh_journals(
    being: Being,
    engram: EngramDep,
    full: Annotated[
        bool, Query(description="Rewrite every file, not only the days with new messages.")
    ] = False,
) -> JournalRefreshed:
    """Write the being's journal files on this server now (the worker does it every
    `ENGRAM_JOURNAL_INTERVAL_S`): the days that got messages since the last refresh, and MEMORY.md."""
    return engram.journals.refresh(being.ref, full=full)


@v1.get(
    "/beings/{being}/journal/{date}",
    name="journal_day",
    response_class=Response,
    tags=["journals"],
    responses=_markdown_doc("The day's journal, rendered from the log's view."),
)
def journal_day(
    being: Being,
    engram: EngramDep,
    date: Annotated[str, Path(min_length=1, max_length=32, description="The day, YYYY-MM-DD (UTC).")],
) -> Response:
    """The being's journal of one UTC day: its header, then one line per journalled message (time,
    author, cleaned text). 404 when no message of that day was journalled."""
    _, text = engram.journals.day_text(being.ref, date)
    return Response(text, media_type=MARKDOWN)


# -- memory ---------------------------------------------------------------------------------------


@v1.post(
    "/beings/{being}/recall",
    name="recall",
    response_model=Recalled,
    tags=["memory"],
    responses={**BAD_JSON, **CONFLICT},
)
def recall(body: RecallIn, being: Being, engram: EngramDep) -> Recalled:
    """What a message brings back: up to 3 similar memories as a fragment stream; each is reactivated,
    and shown as the recall left it (its reactivation count after the increment)."""
    return engram.reading.recall(being.ref, body.query)


@v1.post(
    "/beings/{being}/clusters/{cluster_id}/recall",
    name="recall_cluster",
    response_model=Found,
    tags=["memory"],
    responses={**CONFLICT},
)
def recall_cluster(cluster_id: UUID, being: Being, engram: EngramDep) -> Found:
    """Every memory of one cluster, most recently activated first; reactivates them (dead ones by 2)."""
    return engram.reading.recall_memory(being.ref, cluster_id)


@v1.get(
    "/beings/{being}/search",
    name="search",
    response_model=Searched,
    tags=["memory"],
    responses={**CONFLICT},
)
def search(
    being: Being,
    engram: EngramDep,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="Space-separated terms.")],
    mode: SearchMode = SearchMode.OR,
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_PAGE, description="Memories per page.")] = 50,
    cursor: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_CURSOR_CHARS,
            description="The next page of the same search (same `q` and `mode`): the previous page's `cursor`.",
        ),
    ] = None,
) -> Searched:
    """Keyword search, any case: a substring of a memory's action, feeling or dates, or a whole theme;
    newest first, a page at a time.
    The first page's call reactivates every match (`total`); a `cursor` page reactivates nothing."""
    return engram.reading.search_memory(being.ref, q, mode.value, limit, cursor)


@v1.post(
    "/beings/{being}/query",
    name="query",
    response_model=Found,
    tags=["memory"],
    responses={**BAD_JSON, **CONFLICT},
)
def query(body: QueryIn, being: Being, engram: EngramDep) -> Found:
    """Ranked retrieval (semantic + lexical + importance + recency) by profile."""
    return engram.reading.query(
        being.ref,
        body.query,
        body.k,
        profile_name=body.profile,
        include_dead=body.include_dead,
        reactivate=body.reactivate,
        links=body.links,
    )


@v1.get("/beings/{being}/nodes", name="list_nodes", response_model=list[NodeView], tags=["memory"])
def list_nodes(
    being: Being,
    engram: EngramDep,
    caller: Caller,
    status: Annotated[list[NodeStatus] | None, Query(description="Only these statuses.")] = None,
    cluster_id: UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 100,
) -> list[NodeView]:
    """The being's memory nodes, most recently activated first. Reactivates nothing. Nodes past their
    notes' expiry are left out, and sensitive ones unless the token is an admin's."""
    engram.views.ensure(names=["memory"], being=being.id)
    read = engram.views.read
    rows = read.nodes(
        being.id,
        statuses=[s.value for s in status] if status else None,
        cluster_id=cluster_id,
        order="recent",
        limit=limit,
        where=read.visible(utc_text(engram.clock.now()), include_sensitive=caller.is_admin),
    )
    return [NodeView.of(r) for r in rows]


@v1.put(
    "/beings/{being}/nodes/{node_id}/pin",
    name="pin_node",
    response_model=Done,
    tags=["memory"],
    responses={**CONFLICT},
)
def pin_node(node_id: UUID, being: Being, engram: EngramDep) -> Done:
    """Pin a node: pinned nodes never decay. Pinning a dead node is refused (409): recall it first."""
    return engram.nodes.pin(being.ref, node_id)


@v1.delete(
    "/beings/{being}/nodes/{node_id}/pin",
    name="unpin_node",
    response_model=Done,
    tags=["memory"],
    responses={**CONFLICT},
)
def unpin_node(node_id: UUID, being: Being, engram: EngramDep) -> Done:
    return engram.nodes.unpin(being.ref, node_id)


@v1.get("/beings/{being}/clusters", name="list_clusters", response_model=list[ClusterRow], tags=["memory"])
def list_clusters(being: Being, engram: EngramDep) -> list[dict[str, Any]]:
    """The being's clusters: the two roots first, then sub-clusters by creation."""
    engram.views.ensure(names=["memory"], being=being.id)
    return engram.views.read.clusters(being.id)


# -- patrol ---------------------------------------------------------------------------------------


@v1.post(
    "/beings/{being}/patrol",
    name="patrol",
    response_model=PatrolOut,
    tags=["patrol"],
    responses={**BAD_JSON, **CONFLICT},
)
def patrol(
    being: Being,
    engram: EngramDep,
    body: PatrolIn | None = None,
    llm_key: Annotated[
        str | None,
        Header(
            alias="X-LLM-Key",
            max_length=MAX_LLM_KEY_CHARS,
            description="Bring your own key: used for this patrol only, never stored or logged.",
        ),
    ] = None,
    llm_provider: Annotated[
        LlmProvider,
        Header(
            alias="X-LLM-Provider",
            description="With X-LLM-Key: auto (by the key's shape: sk-ant-… is Anthropic), anthropic or openai.",
        ),
    ] = LlmProvider.AUTO,
) -> dict[str, Any]:
    """Run (or resume) a patrol of the being. 409 while another patrol of it runs."""
    llm = None
    if llm_key:
        from engram.adapters.llm.factory import build_llm

        llm = build_llm(engram.settings, api_key_override=llm_key, provider_override=llm_provider.value)
    dry_run = body.dry_run if body is not None else False
    return engram.patrol(being.ref, dry_run=dry_run, llm=llm).as_dict()


@v1.get(
    "/beings/{being}/patrol-runs", name="list_patrol_runs", response_model=list[PatrolRunRow], tags=["patrol"]
)
def list_patrol_runs(
    being: Being, engram: EngramDep, limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 20
) -> list[dict[str, Any]]:
    """The being's patrol runs, latest first, with their steps."""
    engram.views.ensure(names=["patrol_runs"], being=being.id)
    return engram.views.read.patrol_runs(being.id, limit)


# -- any item of a being: state as of, history --------------------------------------------------------


@v1.get("/beings/{being}/{kind}/{item_id}", name="get_item", response_model=dict[str, Any], tags=["audit"])
def get_item(
    kind: ItemKind, item_id: UUID, being: Being, engram: EngramDep, caller: Caller, as_of: AsOf = None
) -> dict[str, Any]:
    """A note, node, cluster or patrol run, replayed from the log: now, or as of a version or an instant.
    A sensitive note or node needs an admin token (ADR 0046)."""
    _sensitive_needs_admin(kind, item_id, being, engram, caller)
    version_, instant = parse_as_of(as_of)
    return engram.audit.state(kind.audit_kind, str(item_id), version=version_, as_of=instant, being=being.ref)


def _sensitive_needs_admin(
    kind: ItemKind, item_id: UUID, being: BeingAccess, engram: Engram, caller: Principal
) -> None:
    """A sensitive note or node (its text, its scene, its events) is shown to admin tokens only; its
    current state says (a node only becomes sensitive, by absorbing one)."""
    if caller.is_admin or kind.audit_kind not in ("note", "node"):
        return
    now = engram.audit.state(kind.audit_kind, str(item_id), being=being.ref)
    if now.get("sensitivity") == "sensitive" or now.get("sensitive") is True:
        raise ApiError(403, "forbidden", f"this {kind.audit_kind} is sensitive: it needs an admin token")


@v1.get(
    "/beings/{being}/{kind}/{item_id}/history",
    name="item_history",
    response_model=list[HistoryEvent],
    tags=["audit"],
)
def item_history(
    kind: ItemKind, item_id: UUID, being: Being, engram: EngramDep, caller: Caller
) -> list[dict[str, Any]]:
    """Every event of a note, node, cluster or patrol run, oldest first. A sensitive note or node needs
    an admin token."""
    _sensitive_needs_admin(kind, item_id, being, engram, caller)
    return engram.audit.history(kind.audit_kind, str(item_id), being=being.ref)


@v1.get("/beings/{being}/pack", name="pack", response_model=ContextPack, tags=["memory"])
def pack(
    being: Being,
    engram: EngramDep,
    query: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_QUERY_CHARS, description="Rank the notes by this text."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PACK_LIMIT)] = DEFAULT_PACK_LIMIT,
) -> ContextPack:
    """The context pack (spec 002): the being's most recent live notes, or with `query` those that
    match it best (lexical + semantic), rendered `## Memory Context` then `[kind] text` blocks. Never
    a scene, a sensitive, superseded, expired or disabled note; an admin token sees no more."""
    return engram.packing.pack(being.ref, query=query, limit=limit)


# -- admin ----------------------------------------------------------------------------------------


@admin.get("/projections", name="projections_status", response_model=list[ProjectionStatus])
def projections_status(engram: EngramDep, _caller: Admin) -> list[dict[str, Any]]:
    """Each projection's position, the head of the log, the lag and the last error."""
    rows = engram.views.status()
    for row in rows:
        row["building"] = {str(k): v for k, v in row["building"].items()}
    return rows


@admin.post(
    "/projections/{name}/rebuild",
    name="rebuild_projection",
    response_model=Rebuilt,
    responses={**CONFLICT},
)
def rebuild_projection(name: str, engram: EngramDep, _caller: Admin) -> Rebuilt:
    """Rebuild one projection from the log, blue-green (reads keep working until the switch)."""
    return Rebuilt(projection=name, generation=engram.views.rebuild(name))


@admin.get("/log", name="global_log", response_model=list[LogEntry])
def global_log(
    engram: EngramDep,
    _caller: Admin,
    being: Annotated[
        str | None, Query(min_length=1, max_length=100, description="Only this being's events.")
    ] = None,
    after: Annotated[int, Query(ge=0, description="Start after this log position.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 100,
) -> list[dict[str, Any]]:
    """The global event log in order."""
    return engram.audit.log(being=being, after=after, limit=limit)


@admin.post(
    "/tokens", name="create_token", status_code=201, response_model=IssuedToken, responses={**BAD_JSON}
)
def create_token(body: TokenCreate, tokens: Tokens, _caller: Admin) -> IssuedToken:
    """Issue a token for one being (`being`) or an admin token (`admin: true`). The token is shown once."""
    return tokens.issue(being=body.being, admin=body.admin, label=body.label)


@admin.get("/tokens", name="list_tokens", response_model=list[TokenInfo])
def list_tokens(tokens: Tokens, _caller: Admin, include_revoked: bool = False) -> list[TokenInfo]:
    """Every token's id, prefix, scope, being and label; never the token."""
    return tokens.list(include_revoked=include_revoked)


@admin.delete("/tokens/{token_id}", name="revoke_token", response_model=Done)
def revoke_token(
    token_id: UUID,
    tokens: Tokens,
    _caller: Admin,
    reason: Annotated[str, Query(max_length=MAX_LABEL_CHARS)] = "",
) -> Done:
    """Revoke a token: it stops working within a second. Revoking it again changes nothing."""
    return tokens.revoke(str(token_id), reason)
