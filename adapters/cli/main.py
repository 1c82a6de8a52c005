"""The `engram` command line."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast
from uuid import UUID

import click
import structlog
from pydantic import ValidationError

from engram.adapters.cli.note_lifecycle import lifecycle_options
from engram.adapters.cli.output import EXIT_CONFLICT, EXIT_UNEXPECTED, emit_json, fail, fail_text
from engram.adapters.logging import configure_logging
from engram.adapters.storage_full import deployment_storage, is_storage_full
from engram.domain.errors import DomainError, InvalidInput
from engram.domain.note import NoteKind
from engram.services.beings import list_beings
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import NoteInput, given_lifecycle, invalid_input_of
from engram.services.config import Settings, load_settings, unknown_variables
from engram.services.errors import StorageFull
from engram.services.note_import import ImportProgress, Line, import_lines

F = TypeVar("F", bound=Callable[..., Any])
log = structlog.get_logger("engram.cli")


class Context:
    """What the commands share: the settings, read when a command first needs them (so `--help` works
    whatever the environment holds), and Engram, opened on first use."""

    def __init__(self, data_dir: Path | None) -> None:
        self._overrides: dict[str, Any] = {"data_dir": data_dir} if data_dir else {}
        self._settings: Settings | None = None
        self._engram: Engram | None = None

    @property
    def settings(self) -> Settings:
        """Raises `ConfigurationError` (exit 2, one line per problem); warns of unknown variables."""
        if self._settings is None:
            from engram.adapters.http.config import HttpSettings

            for warning in unknown_variables(models=(Settings, HttpSettings)):
                click.echo(f"warning: {warning}", err=True)
            self._settings = load_settings(**self._overrides)
            configure_logging(self._settings.log_level, self._settings.log_format)
        return self._settings

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
            _ = ctx.settings  # a configuration problem stops every command before it starts
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
    from engram.adapters.vectors.ownership import set_role

    # What the embedded vector index's owner lock names, should this process become its owner.
    set_role(f"engram {click_ctx.invoked_subcommand}")
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
@click.option("--start", "start_hour", type=int, help="Hour (UTC, 0-23) the sleep window starts.")
@click.option("--hours", "duration_hours", type=int, help="How long it lasts (1-23 hours).")
@click.option("--off", is_flag=True, help="Turn the schedule off (the being sleeps only when told).")
@click.option("--min-awake-ticks", type=int, help="Awake ticks before it may sleep again (default 10).")
@click.option("--tick-awake", "tick_awake_s", type=int, help="Seconds between awake ticks (default 5).")
@click.option("--tick-asleep", "tick_asleep_s", type=int, help="Seconds between sleep ticks (default 60).")
@click.option(
    "--cooldown", "cooldown_minutes", type=int, help="Minutes after waking before it may sleep (60)."
)
@click.option("--depth", type=click.Choice(["light", "deep"]), help="Light sleep wakes for urgent messages.")
@command
def being_sleep(
    ctx: Context,
    being_ref: str,
    start_hour: int | None,
    duration_hours: int | None,
    off: bool,
    *,
    as_json: bool,
    **tuning: int | str | None,
) -> None:
    """Set BEING's sleep schedule: the daily window (UTC; it may wrap past midnight) in which the
    worker puts it to sleep, and its tick rates, cooldown and depth. Fields not given stay."""
    changes: dict[str, Any] = {k: v for k, v in tuning.items() if v is not None}
    if off:
        changes["enabled"] = False
    if start_hour is not None:
        changes["start_hour"] = start_hour
    if duration_hours is not None:
        changes["duration_hours"] = duration_hours
    if not changes:
        raise InvalidInput("give --start and --hours, --off, or a field to change (see --help)")
    result = ctx.engram.beings.set_sleep_schedule(being_ref, **changes)
    if as_json:
        emit_json(result.model_dump())
        return
    s = result.details["schedule"]
    click.echo(
        f"sleep schedule: {s['start_hour']:02d}:00 UTC for {s['duration_hours']} h, {s['depth']} sleep"
        if s["enabled"]
        else "sleep schedule off"
    )


# -- notes ----------------------------------------------------------------------------------


def _read_lines(path: Path) -> list[Line]:
    try:
        with path.open(encoding="utf-8") as fh:
            return [Line(n, line.rstrip("\n")) for n, line in enumerate(fh, 1) if line.strip()]
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text") from None


NOTE_KINDS = [k.value for k in NoteKind]


@cli.command("note")
@click.argument("being_ref", metavar="BEING")
@click.option("--scene", "scene_text", help="One scene as a JSON object (kept exactly as given).")
@click.option(
    "--file",
    "scene_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Scenes as JSON lines, one per line; imported in batches.",
)
@click.option("--text", "plain_text", help="A note's text; needs --kind (todo, rule, tool, …).")
@click.option(
    "--kind",
    default=None,
    type=click.Choice(NOTE_KINDS),
    help="The kind of a --text note. --scene and --file note scenes. The system prompt lists soul (the "
    "being's identity; a new one supersedes the last), rule (needs --evidence), preference, "
    "relationship, tool (a tool the being can use) and map (an entry of its map: a place, a person, a "
    "project); the snapshot todo, reminder and knowledge; summary is what a job or a session came to, "
    "log a raw record of a request or an event.",
)
@click.option("--key", "idempotency_key", help="Idempotency key: the same key twice gives the same note.")
@click.option("--source-ref", help="Where the note came from, e.g. a message id.")
@lifecycle_options
@command
def note(
    ctx: Context,
    being_ref: str,
    scene_text: str | None,
    scene_file: Path | None,
    plain_text: str | None,
    kind: str | None,
    idempotency_key: str | None,
    source_ref: str | None,
    *,
    as_json: bool,
    **lifecycle: Any,
) -> None:
    """Note a scene (or another kind of note) for BEING.

    --file imports JSON lines, one scene each: every line is checked before any is written, and each
    gets an idempotency key (the file's path, the line's content and its place among identical lines;
    or the line's own "key" member), so an import that was interrupted can simply be run again. A
    line may carry its lifecycle as members too: "ttl_days", "tags", "at", … (as the options say).
    """
    given = [x for x in (scene_text, scene_file, plain_text) if x is not None]
    if len(given) != 1:
        raise InvalidInput("give exactly one of --scene, --file or --text")
    if scene_file is not None:
        if kind not in (None, "scene"):
            raise InvalidInput("--file notes scenes; use --text with --kind for other kinds")
        if idempotency_key:
            raise InvalidInput(
                "--key applies to one note; a file's lines get their own keys (or a `key` member each)"
            )
        if given_lifecycle(lifecycle):
            raise InvalidInput(
                "a file's lines carry their own lifecycle: give each line members such as "
                '"ttl_days" or "tags" instead of options'
            )
        _import_file(ctx, being_ref, scene_file, source_ref, as_json=as_json)
        return
    if scene_text is not None and kind not in (None, "scene"):
        raise InvalidInput("--scene notes a scene; use --text with --kind for other kinds")
    if plain_text is not None and kind is None:
        # Without a kind, prose would be stored as a scene that cannot parse: ask what it is instead.
        raise InvalidInput(
            f"--text needs --kind ({', '.join(k for k in NOTE_KINDS if k != 'scene')}); "
            """a scene is --scene '{"action": …, "actors": […], "when": […]}'"""
        )
    text = scene_text if scene_text is not None else cast(str, plain_text)
    kind = kind or "scene"
    item = NoteInput(
        kind=kind,
        text=text,
        idempotency_key=idempotency_key,
        source_ref=source_ref,
        **given_lifecycle(lifecycle),
    )
    result = ctx.engram.notes.take(being_ref, item)
    if as_json:
        emit_json(result.model_dump())
        return
    dup = " (already noted with this key)" if result.duplicate else ""
    click.echo(f"noted {result.kind} {result.note_id}{dup}")
    if result.expires_at is not None:
        click.echo(f"  expires {result.expires_at}")
    for old in result.superseded:
        click.echo(f"  supersedes {old}")
    if result.parsed is False:
        click.echo(
            f"warning: the text did not parse as a scene and is kept for repair: {result.parse_error}",
            err=True,
        )


def _import_file(ctx: Context, being_ref: str, path: Path, source_ref: str | None, *, as_json: bool) -> None:
    lines = _read_lines(path)
    if not lines:
        raise InvalidInput(f"{path} holds no scenes")
    show = _progress_printer(f"noting {path.name}")
    report = import_lines(
        ctx.engram.notes, being_ref, str(path.resolve()), lines, source_ref=source_ref, progress=show
    )
    counts = report.progress
    if as_json:
        emit_json(report.as_dict())
    else:
        click.echo(
            f"noted {len(report.notes)} scene(s) from {path}: {counts.written} written, "
            f"{counts.already_there} already there, {counts.refused} refused"
        )
    for item in report.failed_to_parse:
        click.echo(
            f"warning: line {item['line']} did not parse as a scene, kept for repair: {item['reason']}",
            err=True,
        )
    for item in report.refused:
        click.echo(f"refused: line {item['line']}: {item['reason']}", err=True)
    if report.refused:
        sys.exit(EXIT_CONFLICT)


def _progress_printer(label: str) -> Callable[[ImportProgress], None]:
    """Progress on stderr: one line rewritten in place on a terminal, one line per batch elsewhere."""
    live = sys.stderr.isatty()

    def show(p: ImportProgress) -> None:
        text = (
            f"{label}: read {p.read}/{p.total} lines, written {p.written}, "
            f"already there {p.already_there}, refused {p.refused}"
        )
        if live:
            click.echo(f"\r{text}", err=True, nl=p.read >= p.total)
        else:
            click.echo(text, err=True)

    return show


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

KINDS = click.Choice(["being", "note", "node", "cluster", "patrol-run", "token", "fact", "space"])


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
        when = e["timestamp"] or "(time erased)"
        click.echo(f"v{e['version']:<4} {when}  {e['type']:<32} {payload}")


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
    "--after", default=None, type=click.IntRange(0), help="Start after this position (default: the start)."
)
@click.option("--tail", "tail", type=click.IntRange(1, 10_000), help="Only the last N events.")
@click.option(
    "--follow",
    is_flag=True,
    help="Keep printing events as they are written, until Ctrl-C (with --json: one object per line). "
    "Starts with the last 10 events unless --after or --tail says otherwise.",
)
@command
def log_command(
    ctx: Context,
    being_ref: str | None,
    limit: int,
    after: int | None,
    tail: int | None,
    follow: bool,
    *,
    as_json: bool,
) -> None:
    """The global event log in order."""
    if tail is not None and after is not None:
        raise InvalidInput("give --tail or --after, not both")
    audit = ctx.engram.audit
    if tail is not None or (follow and after is None):
        entries = audit.tail(being=being_ref, limit=tail or 10)
    else:
        entries = audit.log(being=being_ref, after=after or 0, limit=limit)
    if not follow:
        emit_json(entries) if as_json else _print_log(entries, as_json=False)
        return
    _print_log(entries, as_json=as_json)
    position = (
        entries[-1]["position"] if entries else (after if after is not None else ctx.engram.store.head())
    )
    interval = ctx.settings.worker_poll_interval_s
    try:
        while True:
            time.sleep(interval)
            entries = audit.log(being=being_ref, after=position, limit=10_000)
            _print_log(entries, as_json=as_json)
            if entries:
                position = entries[-1]["position"]
    except KeyboardInterrupt:  # Ctrl-C is how --follow ends: not an error
        return


def _print_log(entries: list[dict[str, Any]], *, as_json: bool) -> None:
    for e in entries:
        if as_json:
            click.echo(json.dumps(e, ensure_ascii=False, default=str))
        else:
            click.echo(
                f"{e['position']:>7}  {e['timestamp'] or '(time erased)'}  {e['type']:<32} {e['aggregate_id']}"
            )
    sys.stdout.flush()


from engram.adapters.cli import admin as _admin  # noqa: E402
from engram.adapters.cli import bench_cmds as _bench  # noqa: E402
from engram.adapters.cli import demo as _demo  # noqa: E402
from engram.adapters.cli import http_cmds as _http  # noqa: E402
from engram.adapters.cli import listing_cmds as _listing  # noqa: E402
from engram.adapters.cli import mcp_cmds as _mcp  # noqa: E402
from engram.adapters.cli import message_cmds as _messages  # noqa: E402
from engram.adapters.cli import notes_cmds as _notes  # noqa: E402
from engram.adapters.cli import pack_cmds as _pack  # noqa: E402
from engram.adapters.cli import reading_cmds as _reading  # noqa: E402

for _module in (_demo, _admin, _reading, _listing, _http, _mcp, _bench, _notes, _pack, _messages):
    _module.register(cli, command)

from engram.adapters.cli import embeddings_cmds as _embeddings  # noqa: E402

_embeddings.register(cli, command)  # `engram embeddings migrate` (ADR 0071)

from engram.adapters.cli import note_lifecycle_cmds as _note_lifecycle  # noqa: E402

_note_lifecycle.register(cli, command)  # `engram notes supersede|history|merge|sweep|maintain` (ADR 0048)

from engram.adapters.cli import journal_cmds as _journal  # noqa: E402

_journal.register(cli, command)  # `engram journal refresh|show|memory` (ADR 0054)
from engram.adapters.cli import session_cmds as _sessions  # noqa: E402

_sessions.register(cli, command)  # `engram sessions list|show|summarize|resummarize` (ADR 0053)
from engram.adapters.cli import fact_cmds as _facts  # noqa: E402

_facts.register(cli, command)  # `engram facts add|list|pin|…`, `lore`, `space`, `entity` (ADR 0057)
from engram.adapters.cli import extraction_cmds as _extraction  # noqa: E402

_extraction.register(cli, command)  # `engram facts extract` (ADR 0058)
from engram.adapters.cli import fact_search_cmds as _fact_search  # noqa: E402

_fact_search.register(cli, command)  # `engram facts search`, `slice`, `entities list|show` (ADR 0059)
from engram.adapters.cli import sleep_cmds as _sleep  # noqa: E402

_sleep.register(cli, command)  # `engram sleep|wake|mode|dream` (ADR 0060)
from engram.adapters.cli import links_cmds as _links  # noqa: E402

_links.register(cli, command)  # `engram links` (ADR 0062)
from engram.adapters.cli import why_cmds as _why  # noqa: E402

_why.register(cli, command)  # `engram why` (ADR 0068)
from engram.adapters.cli import forget_cmds as _forget  # noqa: E402

_forget.register(cli, command)  # `engram forget being` (ADR 0073)
from engram.adapters.cli import forget_item_cmds as _forget_items  # noqa: E402

_forget_items.register(cli, command)  # `engram forget subject|note|message|fact` (ADR 0075, 0076)


def main() -> None:
    try:
        cli(prog_name="engram")
    except SystemExit as exc:  # how click ends every command, successful or not
        _exit_now(exc.code)
        raise


def _exit_now(code: str | int | None) -> None:
    """End the process without the interpreter's teardown once the command is done.

    The command has closed Engram (its stores, views and vector index) in `command`'s `finally`; what
    is left is freeing some 400,000 objects and the embedding model one by one, about 0.3 s of a
    one-shot command such as `engram recall`. Output is flushed first. A process that still runs a
    thread that is not a daemon takes the ordinary way out, which waits for it.
    """
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    if isinstance(code, str):  # `sys.exit("message")`: the interpreter would print it
        click.echo(code, err=True)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader that left (`engram log | head`): nothing to deliver
            stream.flush()
    os._exit(code or 0)


from engram.adapters.cli import profile_cmds as _profiles  # noqa: E402

_profiles.register(cli, command)  # `engram entities profile`, `engram reflections` (ADR 0064, 0065)
from engram.adapters.cli import undo_cmds as _undo  # noqa: E402

_undo.register(cli, command)  # `engram undo DECISION_ID` (ADR 0072)
from engram.adapters.cli import verify_cmds as _verify  # noqa: E402

_verify.register(cli, command)  # `engram verify` (ADR 0069)
from engram.adapters.cli import transfer_cmds as _transfer  # noqa: E402

_transfer.register(cli, command)  # `engram export`, `engram import` (ADR 0070)
from engram.adapters.cli import keys_cmds as _keys  # noqa: E402

_keys.register(cli, command)  # `engram keys seal` (ADR 0095)
