"""The MCP server while its being sleeps (spec 003 §2, issue #12): only the sleep tool set.

Spec 003's `SLEEP_MODE_TOOLS` mapped onto Engram's tools:

| spec 003            | Engram tool          | what it does                                               |
|---------------------|----------------------|------------------------------------------------------------|
| `noop`              | `noop`               | nothing (the agent has nothing to do this turn)            |
| `add_journal_entry` | `add_journal_entry`  | a `log` note tagged `journal`                              |
| `review_journal`    | `review_journal`     | the day's journal entries and its journal of messages (#10) |
| `recall_memories`   | `recall`             | the existing recall                                        |
| `store_memory`      | `add_fact`           | the existing fact store (#11)                              |

and, in either mode, `mode` (where the being stands) and `wake` (the agent asks to be woken: recorded,
deferred while compacting); awake, also `sleep` (go to sleep now) and `dream` (sleep ticks now).
While the being is asleep, the tool list holds only these, and any other
tool answers an error that says so ("Ada is asleep (dreaming) until …; only … are available").
The mode is read from the log at each list and call (`Sleep` of the being), so a sleep started by
the worker or the CLI is seen at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any
from uuid import UUID

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from engram.domain.note import MAX_TAG_CHARS
from engram.domain.sleep import Sleep, sleep_id_for
from engram.services.commands import NoteInput
from engram.services.errors import NotFound

if TYPE_CHECKING:
    from engram.adapters.mcp.server import EngramSession

SLEEP_TOOLS = ("noop", "add_journal_entry", "review_journal", "recall", "add_fact", "mode", "wake")
"""What a sleeping being's server offers, in this order."""
JOURNAL_TAG = "journal"
MAX_JOURNAL_ENTRIES = 50


class SleepState(BaseModel):
    mode: str = Field(description="awake or asleep.")
    phase: str | None = Field(description="compacting or dreaming while asleep.")
    wake_at: str | None = Field(description="When the sleep ends (ISO 8601, UTC); None: when woken.")
    deferred_wake: str | None = Field(
        description="A wake asked for while compacting: it waits for the phase."
    )
    tools: list[str] = Field(description="The tools available now.")


class JournalReview(BaseModel):
    day: str | None
    entries: list[dict[str, Any]] = Field(
        description="My journal entries (notes tagged journal), newest first."
    )
    journal: str | None = Field(description="The day's journal of messages (markdown), if any.")


def _state(session: EngramSession) -> Sleep | None:
    found: Sleep | None = session.engram.store.find(Sleep, sleep_id_for(UUID(session.being_id)))
    return found


def asleep_message(name: str, sleep: Sleep, tool: str) -> str:
    phase = sleep.phase.value if sleep.phase else "asleep"
    until = f"until {sleep.wake_at.isoformat()}" if sleep.wake_at else "until woken"
    return (
        f"{name} is asleep ({phase}) {until}; `{tool}` is not available. Only "
        f"{', '.join(SLEEP_TOOLS)} are available while asleep (`wake` asks to be woken)."
    )


def add_sleep_tools(server: MCPServer[Any], session: EngramSession) -> None:
    """The sleep tools, and the guard that narrows the tool list while the being sleeps."""
    being = session.being_id
    engram = session.engram

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def noop() -> str:
        """Do nothing this turn (the sleep tool set's way to pass)."""
        return "nothing done"

    @server.tool(
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False), structured_output=True
    )
    async def add_journal_entry(
        text: Annotated[
            str, Field(min_length=1, max_length=64_000, description="What to write in my journal.")
        ],
        tags: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS)]],
            Field(max_length=8, description="Tags besides `journal`."),
        ] = [],  # noqa: B006  (pydantic copies the default)
    ) -> CallToolResult:
        """Write an entry in my journal (a `log` note tagged journal); dreaming may consolidate it."""
        item = NoteInput(kind="log", text=text, tags=[JOURNAL_TAG, *tags])
        taken = await session.call(engram.notes.take, being, item)
        return CallToolResult(
            content=[TextContent(type="text", text=f"journal entry {taken.note_id} written")],
            structured_content=taken.model_dump(),
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def review_journal(
        day: Annotated[
            str | None,
            Field(None, pattern=r"^\d{4}-\d{2}-\d{2}$", description="YYYY-MM-DD (UTC); default: all."),
        ] = None,
    ) -> Annotated[CallToolResult, JournalReview]:
        """My journal: my entries (newest first, of `day` if given) and that day's journal of messages."""

        def review() -> JournalReview:
            notes = engram.listing.notes(being, tags=[JOURNAL_TAG], limit=MAX_JOURNAL_ENTRIES)
            entries = [
                {"id": n.id, "at": n.at, "kind": n.kind, "text": n.text, "tags": n.tags}
                for n in notes
                if day is None or n.at.startswith(day)
            ]
            shown_day: str | None
            journal: str | None
            try:
                shown_day, journal = engram.journals.day_text(being, day)
            except NotFound:
                shown_day, journal = day, None
            return JournalReview(day=shown_day, entries=entries, journal=journal)

        found = await session.call(review)
        lines = [f"- {e['at'][:16]} {e['text']}" for e in found.entries] or ["(no journal entry)"]
        if found.journal:
            lines += ["", found.journal]
        return CallToolResult(
            content=[TextContent(type="text", text="\n".join(lines))], structured_content=found.model_dump()
        )

    def state() -> SleepState:
        sleep = _state(session)
        asleep = sleep is not None and sleep.asleep
        return SleepState(
            mode=sleep.mode.value if sleep else "awake",
            phase=sleep.phase.value if sleep and sleep.phase else None,
            wake_at=sleep.wake_at.isoformat() if sleep and sleep.wake_at else None,
            deferred_wake=sleep.deferred if sleep else None,
            tools=list(SLEEP_TOOLS) if asleep else [t.name for t in server._tool_manager.list_tools()],
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=True)
    async def mode() -> Annotated[CallToolResult, SleepState]:
        """Whether I am awake or asleep (and in which phase, until when), and the tools I have now."""
        found = await session.call(state)
        text = found.mode + (f" ({found.phase})" if found.phase else "")
        if found.wake_at:
            text += f" until {found.wake_at}"
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=found.model_dump()
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def wake(
        reason: Annotated[
            str, Field(min_length=1, max_length=200, description="Why I ask to be woken.")
        ] = "agent",
    ) -> str:
        """Ask to be woken now; while compacting, the wake waits until the phase completes (recorded)."""
        done = await session.call(engram.sleep.wake, being, reason=reason)
        if done.details.get("outcome") == "deferred":
            return "wake deferred: I wake when compacting completes"
        return "awake"

    @server.tool(name="sleep", annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def go_to_sleep(
        hours: Annotated[
            float | None, Field(gt=0, le=23, description="How long; default: my schedule's length.")
        ] = None,
        reason: Annotated[str, Field(min_length=1, max_length=200, description="Why I sleep now.")] = "agent",
    ) -> str:
        """Go to sleep now: my memory is compacted, then I dream, until the sleep ends or I am woken.
        While I sleep, only the sleep tool set is available."""
        done = await session.call(engram.sleep.sleep, being, hours=hours, reason=reason)
        return f"asleep ({done.details['phase']}) until {done.details['wake_at']}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def dream(
        ticks: Annotated[int, Field(ge=1, le=100, description="How many sleep ticks to run now.")] = 1,
    ) -> str:
        """Run my sleep ticks now (an awake being naps for them and wakes after): what they did."""
        report = await session.call(engram.sleep.dream, being, ticks=ticks)
        return report.text()

    _guard(server, session)


def _guard(server: MCPServer[Any], session: EngramSession) -> None:
    """While the being sleeps: the tool list holds only `SLEEP_TOOLS`, and other tools are refused."""
    list_all = server.list_tools
    call_any = server.call_tool

    async def asleep() -> Sleep | None:
        sleep = await session.call(_state, session)
        return sleep if sleep is not None and sleep.asleep else None

    async def list_tools() -> list[Any]:
        tools = await list_all()
        if await asleep() is None:
            return tools
        return sorted((t for t in tools if t.name in SLEEP_TOOLS), key=lambda t: SLEEP_TOOLS.index(t.name))

    async def call_tool(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name not in SLEEP_TOOLS:
            sleep = await asleep()
            if sleep is not None:
                raise ToolError(asleep_message(session.being_name, sleep, name))
        return await call_any(name, arguments, context)

    server.list_tools = list_tools  # type: ignore[method-assign]
    server.call_tool = call_tool  # type: ignore[method-assign]
