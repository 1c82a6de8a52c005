"""The composition root: the one place that picks adapters from configuration.

`bootstrap()` builds everything lazily enough that importing this module
connects to nothing, and building an `Engram` opens only the event log: the
embedder and the LLM are constructed on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from engram.services.aggregate_cache import AggregateCache
from engram.services.audit import AuditQueries
from engram.services.beings import BeingCommands
from engram.services.config import Settings
from engram.services.nodes import NodeCommands
from engram.services.notes import NoteCommands
from engram.services.ports import LLM, Clock, Embedder, IdFactory
from engram.services.runner import CommandRunner
from engram.services.store import AggregateStore
from engram.services.views import Views

if TYPE_CHECKING:
    from engram.services.patrol.run import PatrolProgress, PatrolReport
    from engram.services.reading import Reading


@dataclass
class Engram:
    """Engram wired for one deployment. Close it when done."""

    settings: Settings
    store: AggregateStore
    clock: Clock
    ids: IdFactory
    _embedder: Embedder | None = field(default=None, repr=False)
    _llm: LLM | None = field(default=None, repr=False)

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
    def nodes(self) -> NodeCommands:
        return NodeCommands(self.store, self.clock, self.runner)

    @cached_property
    def audit(self) -> AuditQueries:
        return AuditQueries(self.store)

    @cached_property
    def reading(self) -> Reading:
        """recall, recall_memory, search_memory, query, context."""
        from engram.services.reading import Reading

        return Reading(self)

    @cached_property
    def views(self) -> Views:
        """The read models; opened on first use."""
        return Views(self.settings, self.store)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from engram.adapters.embedders import build_embedder

            self._embedder = build_embedder(self.settings)
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


def bootstrap(
    settings: Settings | None = None,
    *,
    clock: Clock | None = None,
    ids: IdFactory | None = None,
    embedder: Embedder | None = None,
    llm: LLM | None = None,
) -> Engram:
    from engram.adapters.eventstore import open_event_log
    from engram.adapters.system import RandomIds, SystemClock

    settings = settings or Settings()
    url = settings.database_url.get_secret_value() if settings.database_url else None
    app = open_event_log(settings.data_dir, url)
    return Engram(
        settings=settings,
        store=AggregateStore(app, AggregateCache(settings.aggregate_cache_size)),
        clock=clock or SystemClock(),
        ids=ids or RandomIds(),
        _embedder=embedder,
        _llm=llm,
    )
