"""`engram bench …`: the benchmarks of the repository's `bench/` package, when Engram runs from a checkout.

The wheel does not ship them (ADR 0037). An editable install (`pip install -e .`) runs the `engram`
package from the checkout, whose root, the parent of the package's folder, holds `bench/`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import click

import engram
from engram.adapters.cli.output import emit_json

NOT_IN_A_CHECKOUT = (
    "the benchmarks live in Engram's repository (bench/), not in the installed package: "
    "install a checkout with `pip install -e .` and run `engram bench` there, or `python -m bench NAME` from its root"
)


def repository_root() -> Path:
    """Where `bench/` is when this `engram` runs from a checkout: beside the `engram` package."""
    return Path(engram.__file__).resolve().parent.parent


def load_bench(root: Path) -> ModuleType:
    """The `bench` package of the checkout at `root`, imported under its own name; exit 2 if none."""
    init = root / "bench" / "__init__.py"
    if not init.is_file():
        click.echo(NOT_IN_A_CHECKOUT, err=True)
        raise click.exceptions.Exit(2)
    if "bench" in sys.modules:  # `python -m bench`, or tests run from the root
        return sys.modules["bench"]
    spec = importlib.util.spec_from_file_location(
        "bench", init, submodule_search_locations=[str(init.parent)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = module
    spec.loader.exec_module(module)
    return module


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.group()
    def bench() -> None:
        """Benchmarks that print figures (see docs/benchmarks.md); from a checkout of the repository."""
        load_bench(repository_root())

    def _passthrough(name: str, module: str, summary: str) -> None:
        """`engram bench NAME [ARGS…]`: runs bench.MODULE's own argument parser and report."""

        @bench.command(
            name,
            help=summary + " Options: `engram bench " + name + " -- --help`.",
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )
        @click.argument("args", nargs=-1, type=click.UNPROCESSED)
        def run(args: tuple[str, ...]) -> None:
            import importlib

            target = importlib.import_module(f"bench.{module}")
            saved = sys.argv
            sys.argv = [f"engram bench {name}", *args]
            try:
                target.main()
            finally:
                sys.argv = saved

    _passthrough(
        "rebuild",
        "rebuild_bench",
        "Events/s of a full projection rebuild (≥ 100k events); embedder/LLM calls.",
    )
    _passthrough(
        "recall", "recall_bench", "recall and query p50/p95 at 10k and 100k nodes per being, 10 beings."
    )
    _passthrough(
        "patrol", "patrol_bench", "The mechanical patrol steps at 10k and 100k nodes, and their ratio."
    )
    _passthrough("lag", "lag_bench", "Projection lag under a sustained write load.")
    _passthrough(
        "ui", "ui", "Each memory explorer page (/ui) at 100k nodes for a being: median and p95 (goal 300 ms)."
    )
    _passthrough(
        "messages",
        "messages_bench",
        "Message intake (batched import, 100k messages) in messages/s, where its time goes, and the views' catch-up.",
    )
    _passthrough(
        "facts-upsert",
        "facts_upsert_bench",
        "One hot fact key from 8 writers (versions lost: goal 0) and state_many throughput (100k facts).",
    )
    _passthrough(
        "notes", "notes_pack", "Context pack and notes list p50/p95 at 1k, 10k and 100k notes of one being."
    )
    _passthrough(
        "vectors",
        "vector_search_bench",
        "Filtered vector search p50/p95 on Qdrant Edge (exact, HNSW) and qdrant-client local mode.",
    )
    _passthrough(
        "notes-sweep",
        "notes_sweep",
        "The notes expiry sweep at 100k and 1M notes with 1% due, and their ratio (ADR 0048).",
    )
    _passthrough(
        "journal",
        "journal_bench",
        "Journal refresh of a being with 100k messages: full, and after 100 / 1,000 / 10,000 new (ADR 0054).",
    )
    _passthrough(
        "sessions",
        "sessions_bench",
        "Session close and extractive summary cost per session, for sessions of 10 and 100 messages.",
    )
    _passthrough(
        "extraction",
        "extraction_bench",
        "Fact extraction with an instant fake LLM: messages/s, facts/s, rejected candidates by reason (ADR 0058).",
    )
    _passthrough(
        "fact-search",
        "fact_search_bench",
        "Fact search p50/p95 per profile (hybrid, blended, trust) at 10k and 100k facts in one space.",
    )
    _passthrough(
        "dreaming",
        "dreaming_bench",
        "The dreaming tick at 10k and 100k memories: linking, cleanup, one hop of retrieval (ADR 0062).",
    )
    _passthrough(
        "embeddings-migrate",
        "embeddings_migrate_bench",
        "engram embeddings migrate, hashing to offline MiniLM: items/s beside the embedder's own rate (ADR 0071).",
    )
    _passthrough(
        "audit-log",
        "audit_log_bench",
        "Hash chain: ingest cost and verify/s; a being's export/import per second.",
    )
    _passthrough(
        "locomo-models",
        "locomo_models",
        "Embedders side by side on LoCoMo, dense retrieval alone: recall per category and conversation, cost.",
    )
    _passthrough(
        "embedder-spinning",
        "spinning_bench",
        "MiniLM's query embedding and throughput with onnxruntime's idle threads spinning or waiting.",
    )
    _passthrough(
        "erasure",
        "erasure_bench",
        "forget being (100k nodes beside 10k): full rebuild vs targeted purge; sealing cost (ADR 0077).",
    )
    _passthrough(
        "keys-seal",
        "keys_seal_bench",
        "engram keys seal: events/s rewriting a log written in clear or under the being's key (ADR 0095).",
    )
    _passthrough("event-size", "event_size_bench", "Bytes and decode speed of a vector in the event log.")
    _passthrough("http", "http_bench", "What the HTTP API adds to recall and query.")
    _passthrough(
        "locomo-logic",
        "locomo_tuning",
        "LoCoMo retrieval logic (speaker, sessions, links) beside the default, offline, leave one conversation out.",
    )
    _passthrough(
        "locomo-context",
        "locomo_context",
        "LoCoMo, dense alone: a turn's vector with its neighbours in the session, beside today's.",
    )
    _passthrough(
        "locomo-context-logic",
        "locomo_context_logic",
        "LoCoMo, the full ranking over contextual vectors beside today's, leave one conversation out.",
    )
    _passthrough(
        "locomo-pieces",
        "locomo_pieces",
        "LoCoMo: a memory's text in sentences or N-token pieces, each embedded, the memory scoring its best.",
    )
    _passthrough(
        "cli", "cli_bench", "Wall time of a one-shot recall and query through the CLI, per checkout."
    )
    _passthrough(
        "memory",
        "memory_bench",
        "RSS and disk per component at 10k/100k scenes, beside mem0 (`compare`), and RSS under a soak.",
    )

    @bench.command("all")
    @click.option(
        "--out",
        type=click.Path(path_type=Path, file_okay=False),
        required=True,
        help="Folder for the result files (NAME.json).",
    )
    @click.option("--database-url", default=None, help="Also measure on this PostgreSQL server.")
    @click.option(
        "--locomo",
        type=click.Path(path_type=Path, dir_okay=False, exists=True),
        default=None,
        help="A file in LoCoMo's format for the retrieval benchmark.",
    )
    @click.option("--quick", is_flag=True, help="Tiny inputs: checks that every benchmark runs (seconds).")
    @click.option("--only", multiple=True, help="Only these result names (repeatable), e.g. recall.")
    @click.option(
        "--page",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="Also render the results into this Markdown file (e.g. docs/benchmarks.md).",
    )
    def run_everything(
        out: Path,
        database_url: str | None,
        locomo: Path | None,
        quick: bool,
        only: tuple[str, ...],
        page: Path | None,
    ) -> None:
        """Every benchmark in turn, each in its own process; results as JSON files in OUT."""
        from bench.page import load_results, render_page
        from bench.run_all import BenchFailed, plan, run_all

        try:
            run_all(
                plan(database_url, locomo, quick),
                out,
                lambda line: click.echo(line, err=True),
                set(only) or None,
            )
        except BenchFailed as exc:
            raise click.ClickException(str(exc)) from exc
        if page is not None:
            page.write_text(render_page(load_results(out)), encoding="utf-8")
            click.echo(f"wrote {page}", err=True)

    @bench.command(
        "compare",
        context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    )
    @click.option(
        "--old",
        type=click.Path(path_type=Path, file_okay=False, exists=True),
        required=True,
        help="A checkout of the repository with its own .venv (the baseline).",
    )
    @click.option(
        "--new",
        type=click.Path(path_type=Path, file_okay=False, exists=True),
        required=True,
        help="A checkout of the repository with its own .venv (the change).",
    )
    @click.option("--rounds", type=click.IntRange(1), default=3, show_default=True, help="Runs per side.")
    @click.option("--json", "as_json", is_flag=True, help="Print the medians and ratios as JSON.")
    @click.argument("name", metavar="BENCH")
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def compare(old: Path, new: Path, rounds: int, as_json: bool, name: str, args: tuple[str, ...]) -> None:
        """Run benchmark BENCH (with ARGS) alternately in two checkouts, one process per run, and print
        each figure's median per side and the ratio new/old. E.g. `engram bench compare --old ../a
        --new . recall -- --sizes 10000`."""
        from bench import compare as comparing

        if args[:1] == ("--",):  # options stop at BENCH, so the `--` before ARGS arrives as one of them
            args = args[1:]
        try:
            rows = comparing.compare(
                old.resolve(), new.resolve(), name, args, rounds, lambda line: click.echo(line, err=True)
            )
        except comparing.CompareFailed as exc:
            raise click.ClickException(str(exc)) from exc
        if as_json:
            emit_json(comparing.as_json(rows, rounds))
        else:
            click.echo(comparing.render(rows, rounds), nl=False)

    @bench.command("page")
    @click.argument("results", type=click.Path(path_type=Path, file_okay=False, exists=True))
    @click.option(
        "--out",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="Write the page here (default: stdout).",
    )
    def page(results: Path, out: Path | None) -> None:
        """Render docs/benchmarks.md from the result files of `engram bench all`."""
        from bench.page import load_results, render_page

        text = render_page(load_results(results))
        if out is None:
            click.echo(text, nl=False)
        else:
            out.write_text(text, encoding="utf-8")

    @bench.command("ingest")
    @click.option(
        "--database-url", default=None, help="Measure on PostgreSQL (default: SQLite in a temp dir)."
    )
    @click.option("--singles", default=500, show_default=True, type=click.IntRange(1))
    @click.option("--batched", default=10_000, show_default=True, type=click.IntRange(1))
    @click.option("--batch-size", default=500, show_default=True, type=click.IntRange(1, 1000))
    @click.option("--repeats", default=3, show_default=True, type=click.IntRange(1))
    @command
    def ingest(
        ctx: Any,
        database_url: str | None,
        singles: int,
        batched: int,
        batch_size: int,
        repeats: int,
        *,
        as_json: bool,
    ) -> None:
        """Notes per second: one note per command, and batched."""
        from bench import ingest as ingest_bench

        result = ingest_bench.run(database_url, singles, batched, batch_size, repeats)
        emit_json(result) if as_json else click.echo(ingest_bench.render(result))

    @bench.command("locomo")
    @click.argument("path", type=click.Path(path_type=Path, dir_okay=False, exists=True))
    @click.option(
        "--limit-conversations",
        type=click.IntRange(1),
        default=None,
        help="Only the first N conversations of the file.",
    )
    @click.option(
        "--profile",
        "profiles",
        multiple=True,
        help="A ranking profile to evaluate (repeatable); default: lexical, semantic and default.",
    )
    @click.option(
        "-k", "k", type=click.IntRange(1, 100), default=10, show_default=True, help="Hits per query."
    )
    @click.option(
        "--reuse-data",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Keep the ingested data in DIR; a later run on the same file only re-runs the queries.",
    )
    @click.option(
        "--batch-size", type=click.IntRange(1, 1000), default=500, show_default=True, help="Notes per batch."
    )
    @click.option(
        "--details",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="Write every question's ranked hits and scores to this JSON-lines file.",
    )
    @click.option(
        "--links",
        is_flag=True,
        help="Dream after ingest (A-MEM links) and run each profile also following them (`+links`).",
    )
    @command
    def locomo(
        ctx: Any,
        path: Path,
        limit_conversations: int | None,
        profiles: tuple[str, ...],
        k: int,
        reuse_data: Path | None,
        batch_size: int,
        details: Path | None,
        links: bool,
        *,
        as_json: bool,
    ) -> None:
        """Ingest PATH (LoCoMo format) into a fresh data dir, query every question, score per category.

        Each conversation becomes a being, each turn a scene note; a patrol without an LLM makes the
        nodes; each question runs through `query` (k hits, no reactivation) once per profile. The
        embedder comes from ENGRAM_EMBEDDER (default offline MiniLM); the LLM is always off.
        """
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from bench.report import render_locomo
        from bench.run_locomo import DEFAULT_PROFILES, LocomoOptions, run

        options = LocomoOptions(
            path=path,
            profiles=tuple(dict.fromkeys(profiles)) or DEFAULT_PROFILES,
            k=k,
            limit_conversations=limit_conversations,
            reuse_data=reuse_data,
            batch_size=batch_size,
            links=links,
        )
        with Progress(
            TextColumn("{task.description:<20}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            transient=True,
            disable=as_json,
        ) as bar:
            tasks: dict[str, Any] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done, total=total)

            result = run(options, ctx.settings, progress=progress)
        if details is not None:
            with details.open("w", encoding="utf-8") as fh:
                for q in result.questions:
                    fh.write(json.dumps(q, ensure_ascii=False, default=str) + "\n")
        if as_json:
            emit_json(result.report)
        else:
            click.echo(render_locomo(result.report))
