"""Admin commands: `engram projections status|rebuild|retry|gc|optimize` and `engram worker`."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import click
import structlog

from engram.adapters.cli.output import NO_LLM, emit_json, plain_reason, warn_if_embedder_changed
from engram.domain.errors import InvalidInput

log = structlog.get_logger("engram.cli")


def _opened_when_there_is_space(ctx: Any) -> Any:
    """The worker's Engram, its views open. On a full disk a process cannot even open its SQLite files
    (ADR 0030): the worker waits for space, as it does once running, instead of exiting."""
    from engram.services.errors import StorageFull
    from engram.services.worker import MAX_BACKOFF_S

    backoff = 0.5
    while True:
        try:
            engram = ctx.engram
            _ = engram.views
            return engram
        except StorageFull as exc:
            log.warning("no space left; the worker waits to start", path=exc.path, backoff_s=backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)


def log_embedder_mismatch(engram: Any) -> None:
    """The worker's (and the server's) log line when the stored vectors were made by another embedder."""
    import structlog

    from engram.services.embedder_check import embedder_mismatch

    mismatch = embedder_mismatch(engram)
    if mismatch is not None:
        structlog.get_logger("engram.worker").warning(
            "embedder changed",
            configured=mismatch.configured,
            stored=list(mismatch.stored),
            advice=mismatch.message(),
        )


def _patrol_progress(being: str) -> Callable[[Any], None]:
    """Patrol progress on stderr: on a terminal one line rewritten in place; elsewhere a line per step
    and at most one a second while a step works."""
    live = sys.stderr.isatty()
    last = 0.0

    def show(p: Any) -> None:
        nonlocal last
        now = time.monotonic()
        if p.state == "working" and p.done != p.total and not live and now - last < 1.0:
            return
        last = now
        items = f", {p.done}/{p.total} items" if p.total is not None else ""
        text = f"patrol {being}: {p.step} {p.state}{items}, {p.llm_calls} LLM call(s)"
        if live:
            click.echo(f"\r\x1b[K{text}", err=True, nl=False)
        else:
            click.echo(text, err=True)

    return show


def _would_be_node(node: dict[str, Any]) -> str:
    """A dry run's would-be node: its action and the cluster it would join, and why that one."""
    action = node["action"] if len(node["action"]) <= 70 else node["action"][:69] + "…"
    if node["placed_by"] == "similarity":
        why = f"similarity {node['similarity']:.2f}"
    else:
        why = "root, by keywords" + (
            ": the LLM chooses the root in a real patrol" if node["llm_decides"] else ""
        )
    return f"{action!r} -> {node['cluster']} ({why})"


def register(cli: click.Group, command: Callable[[Any], Any]) -> None:
    @cli.group()
    def projections() -> None:
        """Inspect and rebuild the read models and vector collections."""

    @projections.command("status")
    @command
    def status(ctx: Any, *, as_json: bool) -> None:
        """Each projection's position, the head of the log, the lag, the last error, and the beings
        whose events it holds back."""
        rows = ctx.engram.views.status()
        warn_if_embedder_changed(ctx.engram)
        if as_json:
            emit_json(rows)
            return
        click.echo(f"{'projection':<14} {'gen':>4} {'position':>10} {'head':>10} {'lag':>8}  last error")
        for r in rows:
            note = " (schema changed: rebuild)" if r["needs_rebuild"] else ""
            building = f" building gen {', '.join(map(str, r['building']))}" if r["building"] else ""
            error = (
                f"{r['last_error']} (stopped at {r['position']}, since {r['error_since'] or r['last_error_at']})"
                if r["last_error"]
                else "-"
            )
            click.echo(
                f"{r['name']:<14} {r['generation']:>4} {r['position']:>10} {r['head']:>10} {r['lag']:>8}  "
                f"{error}{note}{building}"
            )
            for h in r["holds"]:
                click.echo(
                    f"{'':<14} holds back being {h['being']} since {h['since']}: {h['event_type']} at "
                    f"{h['position']} failed: {h['error']} (tries: {h['attempts']})"
                )

    @projections.command("retry")
    @click.argument("name", required=False)
    @command
    def retry(ctx: Any, name: str | None, *, as_json: bool) -> None:
        """Apply again the events NAME (default: every projection) holds back since one of them could
        not be applied, once the cause is fixed. Where `engram worker` runs the projection, it is asked
        to do it at its next step."""
        results = ctx.engram.views.retry([name] if name else None)
        if as_json:
            emit_json(results)
            return
        if not results:
            click.echo("no projection holds events back")
        for r in results:
            click.echo(f"{r['view']}: being {r['being_id']}: {r['result']}")

    @projections.command("gc")
    @command
    def gc(ctx: Any, *, as_json: bool) -> None:
        """Drop what unfinished (killed) rebuilds left: their generations and vector collections. Never
        what serves, nor what a running rebuild fills. With the embedded index, run it while neither
        `engram serve` nor `engram worker` runs (the worker does it when it starts)."""
        results = ctx.engram.views.collect_garbage()
        if as_json:
            emit_json(results)
            return
        for view, done in results.items():
            if isinstance(done, str):
                click.echo(f"{view}: {done}")
            elif done["generations"] or done["extras"]:
                dropped = [*(f"generation {g}" for g in done["generations"]), *done["extras"]]
                click.echo(f"{view}: dropped {', '.join(dropped)}")

    @projections.command("rebuild")
    @click.argument("name", required=False)
    @click.option("--all", "rebuild_all", is_flag=True, help="Rebuild every projection.")
    @command
    def rebuild(ctx: Any, name: str | None, rebuild_all: bool, *, as_json: bool) -> None:
        """Rebuild NAME (or --all) from the log, blue-green: reads keep working until the switch."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        if bool(name) == rebuild_all:
            raise InvalidInput("give a projection NAME or --all")
        views = ctx.engram.views
        names: list[str] = views.names() if rebuild_all or name is None else [name]
        with Progress(
            TextColumn("{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            disable=as_json,
            transient=False,
        ) as progress:
            tasks = {n: progress.add_task(n, total=max(1, views.source.head())) for n in names}

            def report(n: str, position: int, head: int) -> None:
                progress.update(tasks[n], completed=position, total=max(1, head))

            # Views that handle the same events (memory, vectors) are rebuilt in one pass over the log.
            generations = views.rebuild_all(names, progress=report)
            results = [{"projection": n, "generation": generations[n]} for n in names]
        if as_json:
            emit_json(results)
        else:
            for r in results:
                click.echo(f"rebuilt {r['projection']}: now serving generation {r['generation']}")

    @projections.command("optimize")
    @click.option("--force", is_flag=True, help="Every node collection and full-text index, grown or not.")
    @command
    def optimize(ctx: Any, force: bool, *, as_json: bool) -> None:
        """Build the HNSW index of node collections that grew enough, and merge the full-text index of
        beings that grew enough (what the worker does by itself).

        Blocks until the build is done (about a minute per 100k points); the build runs in a child
        process. With the embedded index it runs in the process that holds the index (e.g. a running
        `engram serve`).
        """
        from engram.services.fulltext_maintenance import FullTextMaintenance
        from engram.services.worker import VectorMaintenance

        views = ctx.engram.views
        views.ensure(names=["vectors", "memory"])
        done = VectorMaintenance(views).run(force=force)
        merged = FullTextMaintenance(views).run(force=force)
        if as_json:
            emit_json({"vectors": done, "fulltext": merged})
            return
        if not done and not merged:
            click.echo("nothing to optimize (use --force to rebuild anyway)")
        for r in done:
            click.echo(
                f"optimized {r['collection']}: {r['points']} points, indexed {r['indexed_before']} -> "
                f"{r['indexed_after']} ({r['seconds']:.1f} s)"
            )
        for r in merged:
            click.echo(
                f"merged the full-text index of being {r['being_id']}: {r['rows']} rows, "
                f"{r['steps']} steps ({r['seconds']:.1f} s)"
            )

    @cli.command("patrol")
    @click.argument("being_ref", metavar="BEING")
    @click.option(
        "--dry-run",
        is_flag=True,
        help="Show what would change, listing the nodes the pending scene notes would become and the "
        "cluster each would join (the notes are embedded for it); write nothing, ask no LLM.",
    )
    @command
    def patrol(ctx: Any, being_ref: str, dry_run: bool, *, as_json: bool) -> None:
        """Run (or resume) a patrol of BEING: notes become nodes, decay, consolidation, clusters."""
        warn_if_embedder_changed(ctx.engram)  # the patrol embeds its new nodes with the configured one
        try:
            report = ctx.engram.patrol(being_ref, dry_run=dry_run, progress=_patrol_progress(being_ref))
        finally:
            if sys.stderr.isatty():  # the progress line is rewritten in place: clear it
                click.echo("\r\x1b[K", err=True, nl=False)
        if as_json:
            emit_json(report.as_dict())
            return
        title = "dry run of" if report.dry_run else ("resumed" if report.resumed else "patrol of")
        llm = report.llm or NO_LLM
        click.echo(f"{title} {report.being}, cycle {report.cycle}, LLM: {llm}")
        for s in report.steps:
            counts = ", ".join(f"{k} {v}" for k, v in (s.get("counts") or {}).items())
            extra = f" — {plain_reason(s['reason'])}" if s.get("reason") else ""
            took = f" ({s['duration_ms']:.0f} ms)" if s.get("duration_ms") is not None else ""
            click.echo(f"  {s['step']:<18} {s.get('state', ''):<10} {counts}{extra}{took}")
            for node in s.get("would_create", []):
                click.echo(f"    + {_would_be_node(node)}")

    @cli.command("worker")
    @click.option("--once", is_flag=True, help="Catch every projection up and exit.")
    @command
    def worker(ctx: Any, once: bool, *, as_json: bool) -> None:
        """Run every projection continuously (Ctrl-C stops)."""
        from engram.adapters.process_memory import limit_malloc_arenas
        from engram.services.worker import Worker

        limit_malloc_arenas()  # before the projection threads allocate (ADR 0028)

        engram = ctx.engram if once else _opened_when_there_is_space(ctx)
        views = engram.views
        if once:
            views.catch_up_or_rebuild()
            status = views.status()
            emit_json(status) if as_json else click.echo("all projections caught up")
            return
        from engram.adapters.vectors import hold_vector_index

        hold_vector_index(views.vector_index)  # the embedded index's owner while it runs
        poll = engram.settings.worker_poll_interval_s
        listen = engram.listener()  # PostgreSQL: LISTEN/NOTIFY plus a safety pull
        if listen is not None:
            poll = 5.0
        from engram.services.patrol.auto import AutoPatrol

        auto = AutoPatrol(engram) if engram.settings.auto_patrol else None
        w = Worker(
            views,
            poll_interval=poll,
            listen=listen,
            on_idle=auto.tick if auto else None,
            note_sweep=engram.note_expiry.sweep,
            note_maintenance=engram.note_maintenance.run,
            note_embedding=engram.packing.embed_pending,
            fact_embedding=engram.fact_search.embed_pending,
            journal_refresh=engram.journals.refresh_due,
            conversations=engram.summaries.worker_round,
            extraction=engram.extraction.worker_round,
            sleep=engram.sleep.worker_round,
        )

        def stop(*_: Any) -> None:
            w.stop_event.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        log_embedder_mismatch(engram)
        patrolling = "automatic patrols on" if auto else "automatic patrols off"
        click.echo(f"worker: running {', '.join(w.names)}; {patrolling} (Ctrl-C stops)", err=True)
        w.run_forever()
        if as_json:
            emit_json(w.stats)
