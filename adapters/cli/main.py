"""The `engram` command line."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast
from uuid import UUID

import click
import structlog
from pydantic import ValidationError

from engram.adapters.cli.output import EXIT_UNEXPECTED, emit_json, fail, fail_text
from engram.adapters.logging import configure_logging
from engram.adapters.storage_full import deployment_storage, is_storage_full
from engram.domain.errors import DomainError, InvalidInput, InvalidScene
from engram.domain.scene import parse_scene_text
from engram.services.beings import list_beings
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MAX_BATCH_NOTES, NoteInput, invalid_input_of
from engram.services.config import Settings
from engram.services.errors import StorageFull

F = TypeVar("F", bound=Callable[..., Any])
log = structlog.get_logger("engram.cli")

IMPORT_BATCH = 500


class Context:
    def __init__(self, data_dir: Path | None) -> None:
        overrides: dict[str, Any] = {"data_dir": data_dir} if data_dir else {}
        self.settings = Settings(**overrides)
        configure_logging(self.settings.log_level, self.settings.log_format)
        self._engram: Engram | None = None

    @property
    def engram(self) -> Engram:
        if self._engram is None:
            self._engram = bootstrap(self.settings)
        return self._engram

    def close(self) -> None:
        if self._engram is not None:
            self._engram.close()


def command(fn: F) -> F:
    """Adds `--json` and turns domain errors into a message on stderr and an exit code."""

    def wrapper(ctx: Context, /, *args: Any, as_json: bool, **kwargs: Any) -> Any:
        try:
            return fn(ctx, *args, as_json=as_json, **kwargs)
        except DomainError as exc:
            fail(exc, as_json=as_json)
        except ValidationError as exc:
            fail(invalid_input_of(exc), as_json=as_json)
        except (click.ClickException, click.exceptions.Exit, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:  # `engram log | head`: the reader left, nothing to report
            # Point stdout at /dev/null so the interpreter's final flush does not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except Exception as exc:  # the user gets one line; ENGRAM_LOG_LEVEL=debug shows the traceback
            if is_storage_full(exc):  # found by a read, where the file is not known
                fail(StorageFull(deployment_storage(ctx.settings)), as_json=as_json)
            log.debug("unexpected error", exc_info=True)
            fail_text(f"unexpected {type(exc).__name__}: {exc}", EXIT_UNEXPECTED)
        finally:
            ctx.close()

    functools.update_wrapper(wrapper, fn)
    decorated = click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(
        click.pass_obj(wrapper)
    )
    return cast(F, decorated)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Overrides ENGRAM_DATA_DIR (default ./engram-data).",
)
@click.version_option(package_name="engram")
@click.pass_context
def cli(click_ctx: click.Context, data_dir: Path | None) -> None:
    """Engram: event-sourced long-term memory for AI agents."""
    click_ctx.obj = Context(data_dir)


# -- beings ---------------------------------------------------------------------------------


@cli.group()
def being() -> None:
    """Create and list beings."""


@being.command("create")
@click.argument("name")
@click.option("--soul", default=None, help="The being's soul text.")
@command
def being_create(ctx: Context, name: str, soul: str | None, *, as_json: bool) -> None:
    result = ctx.engram.beings.register(name)
    if soul:
        result = result.model_copy(
            update={"position": ctx.engram.beings.define_soul(result.being_id, soul).position}
        )
    if as_json:
        emit_json(result.model_dump())
    else:
        click.echo(f"created being {result.name} ({result.being_id})")
        for root, cid in result.roots.items():
            click.echo(f"  root cluster {root}: {cid}")


@being.command("list")
@command
def being_list(ctx: Context, *, as_json: bool) -> None:
    beings = list_beings(ctx.engram.store)
    if as_json:
        emit_json(beings)
    elif not beings:
        click.echo("no beings yet: engram being create NAME")
    else:
        for b in beings:
            click.echo(f"{b['name']:<24} {b['id']}  cycle {b['cycle']}")


@being.command("soul")
@click.argument("being_ref", metavar="BEING")
@click.argument("soul", required=False)
@click.option(
    "--file", "soul_file", type=click.File("r", encoding="utf-8"), help="Read the soul from a file."
)
@command
def being_soul(ctx: Context, being_ref: str, soul: str | None, soul_file: Any, *, as_json: bool) -> None:
    """Define the being's soul (persona)."""
    text = soul_file.read() if soul_file else soul
    if not text:
        raise InvalidInput("give the soul as an argument or with --file")
    result = ctx.engram.beings.define_soul(being_ref, text)
    emit_json(result.model_dump()) if as_json else click.echo("soul defined")


@being.command("sleep")
@click.argument("being_ref", metavar="BEING")
@click.option("--start", "start_hour", type=click.IntRange(0, 23), help="Hour (UTC) the sleep window starts.")
@click.option("--hours", "duration_hours", type=click.IntRange(1, 23), help="How long it lasts.")
@click.option("--off", is_flag=True, help="Remove the sleep window.")
@command
def being_sleep(
    ctx: Context,
    being_ref: str,
    start_hour: int | None,
    duration_hours: int | None,
    off: bool,
    *,
    as_json: bool,
) -> None:
    """Set the daily window in which the worker patrols BEING on the slower sleep schedule."""
    if off:
        result = ctx.engram.beings.clear_sleep_window(being_ref)
    elif start_hour is None or duration_hours is None:
        raise InvalidInput("give --start and --hours, or --off")
    else:
        result = ctx.engram.beings.set_sleep_window(being_ref, start_hour, duration_hours)
    emit_json(result.model_dump()) if as_json else click.echo("sleep window " + ("removed" if off else "set"))


# -- notes ----------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> list[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8") as fh:
            return [(n, line.rstrip("\n")) for n, line in enumerate(fh, 1) if line.strip()]
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text") from None


def _validate_lines(lines: list[tuple[int, str]]) -> None:
    """Check every line before writing any, so a bad line 9,000 leaves nothing half-imported."""
    problems: list[dict[str, Any]] = []
    for lineno, text in lines:
        try:
            parse_scene_text(text)
        except InvalidScene as exc:
            problems.extend(
                {"field": f"line {lineno}: {e['field']}", "message": e["message"]} for e in exc.errors
            )
        except InvalidInput as exc:
            problems.append({"field": f"line {lineno}", "message": exc.message})
    if problems:
        raise InvalidScene(f"{len(problems)} problem(s) in the file; nothing was imported", problems[:50])


def _batches(items: list[NoteInput], size: int) -> Iterator[list[NoteInput]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@cli.command("note")
@click.argument("being_ref", metavar="BEING")
@click.option("--scene", "scene_text", help="One scene as a JSON object (kept exactly as given).")
@click.option(
    "--file",
    "scene_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Scenes as JSON lines, one per line; imported in batches.",
)
@click.option("--text", "plain_text", help="A note's text (with --kind).")
@click.option(
    "--kind",
    default="scene",
    show_default=True,
    type=click.Choice(["scene", "todo", "reminder", "knowledge", "rule", "preference", "relationship"]),
)
@click.option("--key", "idempotency_key", help="Idempotency key: the same key twice gives the same note.")
@click.option("--source-ref", help="Where the note came from, e.g. a message id.")
@command
def note(
    ctx: Context,
    being_ref: str,
    scene_text: str | None,
    scene_file: Path | None,
    plain_text: str | None,
    kind: str,
    idempotency_key: str | None,
    source_ref: str | None,
    *,
    as_json: bool,
) -> None:
    """Note a scene (or another kind of note) for BEING."""
    given = [x for x in (scene_text, scene_file, plain_text) if x is not None]
    if len(given) != 1:
        raise InvalidInput("give exactly one of --scene, --file or --text")
    if scene_file is not None:
        if idempotency_key:
            raise InvalidInput("--key applies to one note, not to --file")
        _import_file(ctx, being_ref, scene_file, source_ref, as_json=as_json)
        return
    text = scene_text if scene_text is not None else cast(str, plain_text)
    if scene_text is not None and kind != "scene":
        raise InvalidInput("--scene notes a scene; use --text with --kind for other kinds")
    result = ctx.engram.notes.take(
        being_ref, NoteInput(kind=kind, text=text, idempotency_key=idempotency_key, source_ref=source_ref)
    )
    if as_json:
        emit_json(result.model_dump())
        return
    dup = " (already noted with this key)" if result.duplicate else ""
    click.echo(f"noted {result.kind} {result.note_id}{dup}")
    if result.parsed is False:
        click.echo(
            f"warning: the text did not parse as a scene and is kept for repair: {result.parse_error}",
            err=True,
        )


def _import_file(ctx: Context, being_ref: str, path: Path, source_ref: str | None, *, as_json: bool) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    lines = _read_jsonl(path)
    if not lines:
        raise InvalidInput(f"{path} holds no scenes")
    _validate_lines(lines)
    items = [NoteInput(text=text, source_ref=source_ref) for _, text in lines]
    taken: list[dict[str, Any]] = []
    batch_size = min(IMPORT_BATCH, MAX_BATCH_NOTES)
    with Progress(
        TextColumn("noting"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        transient=True,
        disable=as_json,
    ) as progress:
        task = progress.add_task("notes", total=len(items))
        for batch in _batches(items, batch_size):
            result = ctx.engram.notes.take_many(being_ref, batch)
            taken.extend(n.model_dump() for n in result.notes)
            progress.advance(task, len(batch))
    failed = [(lineno, n) for (lineno, _), n in zip(lines, taken, strict=True) if n["parsed"] is False]
    if as_json:
        emit_json({"noted": len(taken), "failed_to_parse": len(failed), "notes": taken})
        return
    click.echo(f"noted {len(taken)} scene(s) from {path}")
    for lineno, n in failed:
        click.echo(
            f"warning: line {lineno} did not parse as a scene, kept for repair: {n['parse_error']}", err=True
        )


@cli.command("note-read")
@click.argument("being_ref", metavar="BEING")
@click.argument("note_id", type=click.UUID)
@click.option("--unread", is_flag=True, help="Mark as unread instead.")
@command
def note_read(ctx: Context, being_ref: str, note_id: UUID, unread: bool, *, as_json: bool) -> None:
    """Mark a note read (or unread)."""
    result = ctx.engram.notes.mark_read(being_ref, note_id, read=not unread)
    emit_json(result.model_dump()) if as_json else click.echo(
        f"note {note_id} marked {'unread' if unread else 'read'}"
    )


@cli.command("pin")
@click.argument("being_ref", metavar="BEING")
@click.argument("node_id", type=click.UUID)
@click.option("--off", is_flag=True, help="Unpin instead.")
@command
def pin(ctx: Context, being_ref: str, node_id: UUID, off: bool, *, as_json: bool) -> None:
    """Pin a node (pinned nodes never decay), or unpin it with --off."""
    nodes = ctx.engram.nodes
    result = nodes.unpin(being_ref, node_id) if off else nodes.pin(being_ref, node_id)
    emit_json(result.model_dump()) if as_json else click.echo(
        f"node {node_id} {'unpinned' if off else 'pinned'}"
    )


# -- auditing -------------------------------------------------------------------------------

KINDS = click.Choice(["being", "note", "node", "cluster", "patrol-run", "token"])


@cli.command("history")
@click.argument("kind", type=KINDS)
@click.argument("ref", metavar="ID")
@click.option("--being", "being_ref", help="Only if it belongs to this being.")
@command
def history(ctx: Context, kind: str, ref: str, being_ref: str | None, *, as_json: bool) -> None:
    """Every event of one aggregate, oldest first."""
    events = ctx.engram.audit.history(kind, ref, being=being_ref)
    if as_json:
        emit_json(events)
        return
    for e in events:
        payload = json.dumps(e["payload"], ensure_ascii=False)
        if len(payload) > 160:
            payload = payload[:157] + "..."
        click.echo(f"v{e['version']:<4} {e['timestamp']}  {e['type']:<32} {payload}")


def _parse_as_of(value: str) -> tuple[int | None, datetime | None]:
    if value.isdigit():
        return int(value), None
    try:
        instant = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"--as-of takes a version number or an ISO time, not {value!r}") from None
    return None, instant


@cli.command("show")
@click.argument("kind", type=KINDS)
@click.argument("ref", metavar="ID")
@click.option("--as-of", "as_of", help="A version number, or an ISO time such as 2026-11-20T09:00:00Z.")
@click.option("--being", "being_ref", help="Only if it belongs to this being.")
@command
def show(
    ctx: Context, kind: str, ref: str, as_of: str | None, being_ref: str | None, *, as_json: bool
) -> None:
    """An aggregate's state, now or as of a version or an instant."""
    version, instant = _parse_as_of(as_of) if as_of else (None, None)
    state = ctx.engram.audit.state(kind, ref, version=version, as_of=instant, being=being_ref)
    if as_json:
        emit_json(state)
        return
    click.echo(f"{kind} {state['id']}  version {state['version']} of {state['latest_version']}")
    for key, value in state.items():
        if key not in ("id", "version", "latest_version", "kind"):
            click.echo(f"  {key}: {json.dumps(value, ensure_ascii=False)}")


@cli.command("log")
@click.option("--being", "being_ref", help="Only this being's events.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@click.option(
    "--after", default=0, show_default=True, type=click.IntRange(0), help="Start after this position."
)
@command
def log_command(ctx: Context, being_ref: str | None, limit: int, after: int, *, as_json: bool) -> None:
    """The global event log in order."""
    entries = ctx.engram.audit.log(being=being_ref, after=after, limit=limit)
    if as_json:
        emit_json(entries)
        return
    for e in entries:
        click.echo(f"{e['position']:>7}  {e['timestamp']}  {e['type']:<32} {e['aggregate_id']}")


from engram.adapters.cli import admin as _admin  # noqa: E402
from engram.adapters.cli import bench_cmds as _bench  # noqa: E402
from engram.adapters.cli import demo as _demo  # noqa: E402
from engram.adapters.cli import http_cmds as _http  # noqa: E402
from engram.adapters.cli import mcp_cmds as _mcp  # noqa: E402
from engram.adapters.cli import reading_cmds as _reading  # noqa: E402

for _module in (_demo, _admin, _reading, _http, _mcp, _bench):
    _module.register(cli, command)


def main() -> None:
    cli(prog_name="engram")
