"""The composition root: the one place that reads the configuration to pick and build adapters.

`bootstrap()` opens the event log and wires an `Engram`; everything else is built on first use, so
importing this module connects to nothing and opening Engram opens only the log: the views (their
databases, locks and vector index), the embedder and the LLM come when something needs them. The
services get what they use through ports (`services/ports.py`); only this module imports `adapters`
(an import-linter contract in pyproject.toml holds every other service to it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse, urlunparse
from uuid import UUID

from engram.projections.engine import Projection
from engram.projections.vector_index import VectorIndex
from engram.services.aggregate_cache import AggregateCache
from engram.services.audit import AuditQueries
from engram.services.beings import BeingCommands
from engram.services.config import Settings
from engram.services.lineage import ViewsIndex, WhyQueries
from engram.services.messages import MessageCommands
from engram.services.nodes import NodeCommands
from engram.services.notes import NoteCommands
from engram.services.ports import LLM, Clock, Embedder, IdFactory, Listen, TableScrub
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore
from engram.services.views import Views

if TYPE_CHECKING:
    from engram.services.conversation_summaries import ConversationSummaries
    from engram.services.entity_profiles import EntityProfiles
    from engram.services.erasure import Forgetting
    from engram.services.erasure_items import ItemForgetting
    from engram.services.fact_capacity import FactCapacity
    from engram.services.fact_extraction import FactExtraction
    from engram.services.fact_search import FactSearching
    from engram.services.facts import FactCommands
    from engram.services.journals import Journals
    from engram.services.key_sealing import KeySealingService
    from engram.services.listing import Listing
    from engram.services.memory_links import LinkQueries
    from engram.services.message_search import MessageSearching
    from engram.services.note_expiry import NoteExpirySweep
    from engram.services.note_lifecycle import NoteLifecycle
    from engram.services.note_maintenance import NoteMaintenance
    from engram.services.pack import Packing
    from engram.services.patrol.run import PatrolProgress, PatrolReport
    from engram.services.reading import Reading
    from engram.services.reflection import ReflectionReads
    from engram.services.sessions import Sessions
    from engram.services.sleep import DreamStep, SleepCycle
    from engram.services.spaces import SpaceCommands
    from engram.services.undo import UndoCommands


@dataclass
class Engram:
    """Engram wired for one deployment. Close it when done."""

    settings: Settings
    store: AggregateStore
    clock: Clock
    ids: IdFactory
    _embedder: Embedder | None = field(default=None, repr=False)
    _llm: LLM | None = field(default=None, repr=False)
    _vector_index: Callable[[], VectorIndex] | None = field(default=None, repr=False)

    @cached_property
    def runner(self) -> CommandRunner:
        return CommandRunner(self.settings.command_retries)

    @cached_property
    def beings(self) -> BeingCommands:
        return BeingCommands(self.store, self.clock, self.runner)

    @cached_property
    def notes(self) -> NoteCommands:
        return NoteCommands(self.store, self.clock, self.ids, self.runner)

    @cached_property
    def messages(self) -> MessageCommands:
        """Chat messages: exactly once per id, placed in sessions (ADR 0052)."""
        from datetime import timedelta

        return MessageCommands(
            self.store, self.clock, self.runner, timedelta(minutes=self.settings.session_gap_minutes)
        )

    @cached_property
    def summaries(self) -> ConversationSummaries:
        """The summariser: session, rolling and spine summaries, idle sessions closed (ADR 0053)."""
        from datetime import timedelta

        from engram.services.conversation_summaries import ConversationSummaries
        from engram.services.summary_writing import SummaryWriter

        def being_name(being_id: Any) -> str:
            row = self.views.read.being(being_id)
            return str(row["name"]) if row is not None else "assistant"

        return ConversationSummaries(
            self.store,
            self.clock,
            self.runner,
            lambda: self.views.conversations,
            being_name,
            SummaryWriter(
                lambda: self.llm if self.llm.available else None,
                max_answer_bytes=self.settings.llm_max_answer_kib * 1024,
            ),
            self.messages,
            timedelta(minutes=self.settings.session_gap_minutes),
            catch_up=lambda: self.views.ensure(names=["beings", "conversations"]),
        )

    @cached_property
    def sessions(self) -> Sessions:
        """Sessions as the interfaces show them, and what a context adds for one user (ADR 0053)."""
        from engram.services.sessions import Sessions

        return Sessions(self)

    @cached_property
    def message_search(self) -> MessageSearching:
        """Lexical search over a being's messages (ADR 0055)."""
        from engram.services.message_search import MessageSearching

        return MessageSearching(self.store, self.views)

    @cached_property
    def facts(self) -> FactCommands:
        """Durable facts: keyed upsert with history, pins, archives, entity aliases (ADR 0056)."""
        from engram.services.facts import FACT_WRITE_ATTEMPTS, FactCommands

        # One hot key may have many writers at once: each round of a race lands one of them (ADR 0057).
        runner = CommandRunner(max(self.settings.command_retries, FACT_WRITE_ATTEMPTS))
        return FactCommands(self.store, self.clock, runner, after_write=self.fact_capacity.enforce)

    @cached_property
    def fact_capacity(self) -> FactCapacity:
        """Archive by capacity after each fact write (ADR 0057)."""
        from engram.services.fact_capacity import FactCapacity

        return FactCapacity(self.store, self.clock, self.runner, lambda: self.views)

    @cached_property
    def extraction(self) -> FactExtraction:
        """Facts extracted from messages with the LLM, through spec 001's guards (ADR 0058)."""
        from engram.services.fact_extraction import FactExtraction

        def being_name(being_id: Any) -> str:
            row = self.views.read.being(being_id)
            return str(row["name"]) if row is not None else "assistant"

        return FactExtraction(
            self.store,
            self.clock,
            self.runner,
            self.facts,
            lambda: self.views.extraction,
            being_name,
            lambda: self.llm if self.llm.available else None,
            max_answer_bytes=self.settings.llm_max_answer_kib * 1024,
            catch_up=lambda: self.views.ensure(names=["beings", "extraction"]),
        )

    @cached_property
    def fact_search(self) -> FactSearching:
        """Fact retrieval: profiles, entity cards, the prompt slice, entities (ADR 0059)."""
        from engram.services.fact_search import FactSearching

        return FactSearching(self, lambda: self.message_search)

    @cached_property
    def spaces(self) -> SpaceCommands:
        """Spaces: facts shared by several beings (ADR 0056)."""
        from engram.services.spaces import SpaceCommands

        return SpaceCommands(self.store, self.clock, self.runner)

    @cached_property
    def sleep(self) -> SleepCycle:
        """Sleep and dreaming: modes, phases, wake conditions and the phases' steps (ADR 0060)."""
        from engram.services.sleep import SleepCycle

        return SleepCycle(
            self.store,
            self.clock,
            self.runner,
            lambda: self.views,
            lambda: self.dream_steps,
            lambda: self.llm.available,
        )

    @cached_property
    def dream_steps(self) -> list[DreamStep]:
        """The steps of the sleep phases, in order (services/dream_steps.py)."""
        from engram.services.dream_steps import build_steps

        return build_steps(self)

    @cached_property
    def profiles(self) -> EntityProfiles:
        """Entity profiles built while dreaming (ADR 0064)."""
        from engram.services.entity_profiles import EntityProfiles

        return EntityProfiles(self)

    @cached_property
    def reflections(self) -> ReflectionReads:
        """The being's reflections and the importance gathered towards the next (ADR 0065)."""
        from engram.services.reflection import ReflectionReads

        return ReflectionReads(self)

    @cached_property
    def links(self) -> LinkQueries:
        """A-MEM links between a being's memories, with their scores (ADR 0062)."""
        from engram.services.memory_links import LinkQueries

        return LinkQueries(self)

    @cached_property
    def nodes(self) -> NodeCommands:
        return NodeCommands(self.store, self.clock, self.runner)

    @cached_property
    def audit(self) -> AuditQueries:
        return AuditQueries(self.store)

    @cached_property
    def why(self) -> WhyQueries:
        """`engram why` (ADR 0068)."""
        return WhyQueries(self.store, ViewsIndex(self.views))

    @cached_property
    def undo(self) -> UndoCommands:
        """Undo of a recorded decision (ADR 0072); admins only, no MCP tool."""
        from engram.services.undo import UndoCommands

        return UndoCommands(self.store, self.clock, members=self._cluster_members)

    def _cluster_members(self, being_id: UUID, cluster_id: UUID) -> list[UUID]:
        """Every node in a cluster now, from the memory view caught up (undo of a split, ADR 0078)."""
        self.views.ensure(names=["memory"], being=being_id)
        return [UUID(str(r["id"])) for r in self.views.read.nodes(being_id, cluster_id=cluster_id)]

    @cached_property
    def reading(self) -> Reading:
        """recall, recall_memory, search_memory, query, context."""
        from engram.services.reading import Reading

        return Reading(self)

    @cached_property
    def listing(self) -> Listing:
        """clusters, nodes and notes as they are (reactivates nothing)."""
        from engram.services.listing import Listing

        return Listing(self)

    @cached_property
    def note_lifecycle(self) -> NoteLifecycle:
        """Supersede, merge and a note's history (ADR 0048)."""
        from engram.services.note_lifecycle import NoteLifecycle

        return NoteLifecycle(
            self.store,
            self.clock,
            self.ids,
            self.runner,
            lambda: self.llm if self.llm.available else None,
            max_answer_bytes=self.settings.llm_max_answer_kib * 1024,
        )

    @cached_property
    def note_expiry(self) -> NoteExpirySweep:
        """The sweep that records notes past their `expires_at` (the worker runs it)."""
        from engram.services.note_expiry import NoteExpirySweep

        return NoteExpirySweep(self.store, self.clock, self.runner, lambda: self.views.read)

    @cached_property
    def note_maintenance(self) -> NoteMaintenance:
        """The worker's merge of old volatile notes without a TTL (ADR 0048)."""
        from engram.services.beings import resolve_being_id
        from engram.services.note_maintenance import NoteMaintenance

        return NoteMaintenance(
            self.store,
            self.clock,
            self.note_lifecycle,
            lambda: self.views.read,
            resolve=lambda ref: resolve_being_id(self.store, ref),
        )

    @cached_property
    def packing(self) -> Packing:
        """The context pack (`pack`): the notes an agent puts in its prompt (ADR 0049)."""
        from engram.services.pack import Packing

        return Packing(self)

    @cached_property
    def journals(self) -> Journals:
        """Daily journals and MEMORY.md (spec 001, ADR 0054), under `ENGRAM_JOURNAL_DIR` (default
        `<data dir>/journals`)."""
        from engram.adapters.journal_files import JournalFolder
        from engram.services.journals import Journals

        root = self.settings.journal_dir or self.settings.data_dir / "journals"
        return Journals(
            self.store, lambda: self.views, JournalFolder(root), lambda key: self.views.named_lock(key)
        )

    @cached_property
    def forgetting(self) -> Forgetting:
        """Erasure that holds: `forget being` (crypto-shredding, ADR 0073)."""
        from engram.adapters.eventstore.shredding_storage import ShreddingStorage
        from engram.adapters.journal_files import JournalFolder
        from engram.services.erasure import Forgetting
        from engram.services.erasure_purge import ViewPurge

        keys = self.store.app.keys  # type: ignore[attr-defined]  # the EventLog's key store
        root = self.settings.journal_dir or self.settings.data_dir / "journals"
        storage = ShreddingStorage(self.store.app, self.settings.data_dir)
        purge = ViewPurge(lambda: self.views, self._table_scrub())
        return Forgetting(
            self.store, keys, storage, lambda: self.views, JournalFolder(root), self.clock, purge
        )

    @cached_property
    def key_sealing(self) -> KeySealingService:
        """`keys seal`: old events rewritten into the form a new write gives them (ADR 0095)."""
        from engram.adapters.eventstore.resealing import LogResealing
        from engram.services.key_sealing import KeySealingService

        return KeySealingService(self.store, LogResealing(self.store.app, self.settings.data_dir), self.clock)

    def _table_scrub(self) -> TableScrub:
        """What rewrites the view tables an erasure deleted rows from (ADR 0077)."""
        from engram.adapters.views.table_scrub import NoTableScrub, PostgresTableScrub

        if self.settings.database_url is None:
            return NoTableScrub()
        return PostgresTableScrub(*_split_schema(self.settings.database_url.get_secret_value()))

    @cached_property
    def item_forgetting(self) -> ItemForgetting:
        """Erasure of one subject or one item (ADR 0075, 0076)."""
        from engram.services.erasure_items import ItemForgetting

        return ItemForgetting(self.forgetting, lambda being_id: self.journals.refresh(being_id, full=True))

    @cached_property
    def views(self) -> Views:
        """The read models; opened on first use."""
        return self.open_views()

    def open_views(self, extra: Iterable[Projection] = ()) -> Views:
        """The views over this deployment's view databases, with `extra` projections beside the
        application's (`views` is the instance the application uses; close another one yourself)."""
        s = self.settings
        if s.database_url is not None:
            from engram.adapters.fulltext import build_full_text_index
            from engram.adapters.locks import AdvisoryLocks
            from engram.adapters.views.postgres_db import PostgresViews

            conninfo, schema = _split_schema(s.database_url.get_secret_value())
            return Views(
                s,
                self.store,
                PostgresViews(conninfo, schema=schema),
                AdvisoryLocks(conninfo, schema),
                self._vector_index or self._open_vector_index,
                build_full_text_index("postgres"),
                bulk_source=self.store.log,
                extra=extra,
            )
        from engram.adapters.fulltext import build_full_text_index
        from engram.adapters.locks import FileLocks
        from engram.adapters.views.sqlite_db import SQLiteViews

        storage = SQLiteViews(
            s.data_dir / "views",
            cached_connections=s.view_cached_connections,
            cache_kib=s.view_cache_mib * 1024,
            heap_kib=s.sqlite_heap_mib * 1024,
        )
        return Views(
            s,
            self.store,
            storage,
            FileLocks(s.data_dir),
            self._vector_index or self._open_vector_index,
            build_full_text_index("sqlite"),
            bulk_source=self.store.log,
            extra=extra,
        )

    def _open_vector_index(self) -> VectorIndex:
        from engram.adapters.vectors import build_vector_index

        s = self.settings
        return build_vector_index(
            s.data_dir,
            qdrant_url=s.qdrant_url,
            qdrant_api_key=s.qdrant_api_key.get_secret_value() if s.qdrant_api_key else None,
            search_threads=s.vector_search_threads,
            disk_reserve_mib=s.vector_disk_reserve_mib,
        )

    def listener(self, channel: str | None = None) -> Listen | None:
        """What wakes the worker when the log has new events: LISTEN/NOTIFY on PostgreSQL (on the log's
        channel, or `channel`); None on SQLite, where the worker polls."""
        if self.settings.database_url is None:
            return None
        from eventsourcing.postgres import PostgresApplicationRecorder

        from engram.adapters.eventstore.notify import postgres_listener
        from engram.services.worker import SAFETY_PULL_S

        recorder = self.store.app.recorder
        if channel is None:
            assert isinstance(recorder, PostgresApplicationRecorder)
            channel = recorder.channel_name
        conninfo, _ = _split_schema(self.settings.database_url.get_secret_value())
        return postgres_listener(conninfo, channel, safety_pull_s=SAFETY_PULL_S)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from engram.adapters.embedders.live import build_live_embedder
            from engram.services.live_embedder import live_model

            # The model the log says is live wins over the configured one (ADR 0079).
            self._embedder = build_live_embedder(self.settings, live_model(self.store))
        return self._embedder

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            from engram.adapters.llm import build_llm

            self._llm = build_llm(self.settings)
        return self._llm

    def patrol(
        self,
        being: str,
        *,
        dry_run: bool = False,
        llm: LLM | None = None,
        progress: Callable[[PatrolProgress], None] | None = None,
    ) -> PatrolReport:
        """Run (or resume) one patrol of `being`; `llm` overrides the configured LLM for this run only;
        `progress` is told how the patrol goes (step, items done of total, LLM calls made)."""
        from engram.services.patrol.run import Patrol

        return Patrol(self, llm=llm, progress=progress).run(being, dry_run=dry_run)

    def close(self) -> None:
        if "views" in self.__dict__:
            self.views.close()
        self.store.close()

    def __enter__(self) -> Engram:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _split_schema(url: str) -> tuple[str, str | None]:
    """A database URL without its `?schema=` (libpq does not know it), and that schema."""
    parsed = urlparse(url)
    schema = parse_qs(parsed.query).get("schema", [None])[0]
    return urlunparse(parsed._replace(query="")), schema


def bootstrap(
    settings: Settings | None = None,
    *,
    clock: Clock | None = None,
    ids: IdFactory | None = None,
    embedder: Embedder | None = None,
    llm: LLM | None = None,
    vector_index: Callable[[], VectorIndex] | None = None,
) -> Engram:
    """Engram for `settings` (default: from the environment). `clock`, `ids`, `embedder`, `llm` and
    `vector_index` (a factory, called on first use) replace the configured adapters."""
    from engram.adapters.eventstore import open_event_log
    from engram.adapters.eventstore.log_access import LogAccess
    from engram.adapters.key_files import open_key_store
    from engram.adapters.system import RandomIds, SystemClock

    settings = settings or Settings()
    url = settings.database_url.get_secret_value() if settings.database_url else None
    log = LogAccess(open_event_log(settings.data_dir, url, keys=open_key_store(settings.data_dir)))
    return Engram(
        settings=settings,
        store=AggregateStore(log, AggregateCache(settings.aggregate_cache_size)),
        clock=clock or SystemClock(),
        ids=ids or RandomIds(),
        _embedder=embedder,
        _llm=llm,
        _vector_index=vector_index,
    )


def configure_logging(settings: Settings) -> None:
    """structlog on stderr, as `settings` say (`log_level`, `log_format`)."""
    from engram.adapters.logging import configure_logging as configure

    configure(settings.log_level, settings.log_format)
