"""Embedding Engram in a Python service: one call opens it, the same composition root as the CLI.

`engram.open()` (this module's `open`) returns an `Engram` (see `engram.services.bootstrap`), which
is a context manager. Settings come from the `ENGRAM_*` environment variables (README,
"Configuration"); keyword arguments override them. Every method takes a being by name or id, and
every write returns the log position it wrote.

Example::

    import engram
    from engram import FactInput, MessageInput, NoteInput

    with engram.open("./engram-data", embedder="offline") as memory:
        memory.beings.register("Aria")
        memory.beings.define_soul("Aria", "Curious, warm, dry humour.")

        # Services note scenes as they happen; an idempotency key makes retries safe.
        memory.notes.take_many("Aria", [
            NoteInput(text='{"action": "Planted tomatoes with Mina", "actors": ["me", "Mina"], '
                           '"when": ["2026-05-02"], "feeling": "hopeful", "themes": ["garden"]}',
                      idempotency_key="msg-1042"),
            NoteInput(kind="todo", text="Renew the passport"),
            NoteInput(kind="tool", text="calendar: reads and books appointments"),
        ])

        # Patrol turns notes into memory nodes, files them, lets them decay (run it in the background).
        memory.patrol("Aria")

        recalled = memory.reading.recall("Aria", "gardening with Mina")
        print(recalled.text)        # <memory>hopeful / Planted tomatoes with Mina</memory> (shuffled)

        ranked = memory.reading.query("Aria", "tomatoes", k=5, reactivate=False)
        for node in ranked.nodes:
            print(f"{node.score:.3f}", node.action)

        found = memory.reading.search_memory("Aria", ["garden", "Mina"], mode="and")
        print(found.total, found.cursor)  # every match was reactivated; a cursor pages through the rest
        context = memory.reading.context("Aria")   # system prompt, snapshot, recent memories
        print(context.text)
        conversation = [*(m.model_dump() for m in context.messages), {"role": "user", "content": "Hi!"}]

        # Chat messages (issue #10): taken once per id, placed in sessions per user; searchable.
        memory.messages.take("Aria", MessageInput(id="tg-8812", user="mina", channel="telegram",
                                                  text="Shall we plant the tomatoes on Saturday?"))
        memory.messages.take_many("Aria", [MessageInput(id="tg-8813", user="mina", role="assistant",
                                                        text="Saturday works, I will bring the seeds.")])
        hits = memory.message_search.search("Aria", "tomatoes", channel="telegram", limit=8).hits
        print(hits[0].id, hits[0].snippet)   # tg-8812 Shall we plant the tomatoes on Saturday?

        # Durable facts (issue #11): the same key again is the same fact, reinforced or revised.
        key = "profile|person|mina|fact"
        memory.facts.state("Aria", FactInput(subject="mina", text="Mina lives in Austin", memory_key=key))
        moved = memory.facts.state("Aria", FactInput(subject="mina", text="Mina lives in Denver",
                                                     memory_key=key))
        print(moved.outcome, moved.version)  # revised 2 (`engram show fact ID --as-of 1`: Austin)
        memory.facts.lore("Aria", "the harbour floods in spring")  # Memory line: … (__lore__)
        memory.spaces.create("family", ["Aria"])   # facts shared by several beings
        memory.facts.state("Aria", FactInput(subject="mina", text="Mina keeps bees"), space="family")

The reads are `recall` (≤ 3 nodes above the embedder's threshold, as a fragment stream),
`recall_memory` (a cluster's nodes), `search_memory` (keywords, a page at a time; it reactivates
every match) and `query` (ranked retrieval), which reactivate what they reach (not
`query(reactivate=False)`) and return it as they left it, and `context` (the system prompt with
`system_text`, the snapshot as a user + assistant pair in `messages`, the recent memories). Errors are
`engram.DomainError` subclasses with a `code`: `engram.InvalidInput`, `engram.NotFound`,
`engram.Conflict`, and the domain's invariant errors.

A note's lifecycle (ADR 0048) is `note_lifecycle`: `supersede(being, old, by)`, `history(being, id)`
(its chain both ways) and `merge(being, ids, use_llm=True)` (one summary note that supersedes them);
`note_expiry.sweep()` and `note_maintenance.run()` are what the worker runs periodically.

Conversation sessions (ADR 0053) are `sessions`: `list(being, user=None)` and `show(session_id,
being)`; `summaries.run_due(being)` writes the session, rolling and spine summaries that are due (the
worker does it every few seconds), `summaries.resummarize(being)` redoes extractive ones with the LLM;
`reading.context(being, user="lena")` adds where the conversation with that user stands.

Fact extraction (ADR 0058) is `extraction.run_until_done(being)`: facts from the user messages not
read yet, with the LLM and spec 001's guards (the worker does it every few seconds); its report counts
facts stated, reinforced and revised and candidates rejected by reason.

Several processes may use an embedded data directory at once (this one beside `engram serve`, say):
the first that needs the vector index owns it and the others reach it through that process (ADR 0036).
For several machines, use PostgreSQL (`database_url=...`) and a Qdrant server (`qdrant_url=...`).
"""

from __future__ import annotations

import os
from typing import Any

import structlog

from engram.services.bootstrap import Engram, bootstrap, configure_logging
from engram.services.commands import FactInput, MessageInput, NoteInput
from engram.services.config import ConfigurationError, Settings, load_settings, unknown_variables
from engram.services.ports import LLM, Clock, Embedder, IdFactory

__all__ = [
    "ConfigurationError",
    "Engram",
    "FactInput",
    "MessageInput",
    "NoteInput",
    "Settings",
    "open",
    "open_engram",
]

log = structlog.get_logger("engram")


def open(
    data_dir: str | os.PathLike[str] | None = None,
    *,
    clock: Clock | None = None,
    ids: IdFactory | None = None,
    embedder: str | Embedder | None = None,
    llm: str | LLM | None = None,
    **settings_overrides: Any,
) -> Engram:
    """Open Engram for this process; use it as a context manager, or call `close()`.

    `data_dir` overrides `ENGRAM_DATA_DIR`; `settings_overrides` are `Settings` fields (`database_url`,
    `qdrant_url`, `log_level`, …) and override the environment. `embedder` and `llm` are either a
    setting (`"offline"`, `"openai"`, `"hashing"`; `"auto"`, `"anthropic"`, `"openai"`, `"none"`) or
    an adapter object that replaces the configured one (an embedder the host already has loaded, a
    test double), like `clock` and `ids`.

    A bad setting raises `engram.ConfigurationError` (an `InvalidInput`) naming every problem, each
    the variable or keyword, what is wrong and what is accepted; an `ENGRAM_*` variable no setting
    reads is logged as a warning with the closest known name.

    Engram logs with structlog on stderr. When the host has not configured structlog itself, this
    configures it from `log_level` / `log_format`; a host that configured it keeps its own setup.
    """
    if data_dir is not None:
        settings_overrides["data_dir"] = os.fspath(data_dir)
    if isinstance(embedder, str):
        settings_overrides["embedder"], embedder = embedder, None
    if isinstance(llm, str):
        settings_overrides["llm"], llm = llm, None
    settings = load_settings(
        embedder_given=embedder is not None, llm_given=llm is not None, **settings_overrides
    )
    if not structlog.is_configured():
        configure_logging(settings)
    for warning in unknown_variables():
        log.warning(warning)
    return bootstrap(settings, clock=clock, ids=ids, embedder=embedder, llm=llm)


open_engram = open
"""The name of `open` before the package was called `engram` (kept for existing callers)."""
