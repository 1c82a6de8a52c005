"""`engram bench locomo PATH`: retrieval quality on a file in LoCoMo's format (adapters/bench)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from engram.adapters.cli.output import emit_json


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.group()
    def bench() -> None:
        """Benchmarks that print figures (see docs/benchmarks.md)."""

    def _passthrough(name: str, module: str, summary: str) -> None:
        """`engram bench NAME [ARGS…]`: runs adapters.bench.MODULE's own argument parser and report."""

        @bench.command(
            name,
            help=summary + " Options: `engram bench " + name + " -- --help`.",
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )
        @click.argument("args", nargs=-1, type=click.UNPROCESSED)
        def run(args: tuple[str, ...]) -> None:
            import importlib
            import sys

            target = importlib.import_module(f"engram.adapters.bench.{module}")
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
        "vectors",
        "vector_search_bench",
        "Filtered vector search p50/p95 on Qdrant Edge (exact, HNSW) and qdrant-client local mode.",
    )
    _passthrough("event-size", "event_size_bench", "Bytes and decode speed of a vector in the event log.")
    _passthrough("http", "http_bench", "What the HTTP API adds to recall and query.")
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
        from engram.adapters.bench.page import load_results, render_page
        from engram.adapters.bench.run_all import BenchFailed, plan, run_all

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
        from engram.adapters.bench.page import load_results, render_page

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
        from engram.adapters.bench import ingest as ingest_bench
        from engram.adapters.cli.output import emit_json

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
        *,
        as_json: bool,
    ) -> None:
        """Ingest PATH (LoCoMo format) into a fresh data dir, query every question, score per category.

        Each conversation becomes a being, each turn a scene note; a patrol without an LLM makes the
        nodes; each question runs through `query` (k hits, no reactivation) once per profile. The
        embedder comes from ENGRAM_EMBEDDER (default offline MiniLM); the LLM is always off.
        """
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        from engram.adapters.bench.report import render_locomo
        from engram.adapters.bench.run_locomo import DEFAULT_PROFILES, LocomoOptions, run

        options = LocomoOptions(
            path=path,
            profiles=tuple(dict.fromkeys(profiles)) or DEFAULT_PROFILES,
            k=k,
            limit_conversations=limit_conversations,
            reuse_data=reuse_data,
            batch_size=batch_size,
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
