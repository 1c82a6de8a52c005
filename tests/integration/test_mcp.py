"""`engram mcp --being Aria` end to end: the MCP SDK's stdio client spawns the server as a subprocess.

The data is prepared in-process and the Engram closed before the server starts (the embedded
vector store admits one process per data directory). Logs are turned up to `info` and captured
from the server's stderr: the session only works if none of them reached stdout, the protocol.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from engram.domain.node import MemoryNode
from engram.services.bootstrap import bootstrap
from engram.services.config import Settings
from tests.patrol_support import note_scenes, scene

BASIL = "Picked basil in the garden for a pesto"
PLANTED = "Planted tomatoes in the garden with Mina"
SCENES = [
    scene(PLANTED, "2026-05-02", feeling="hopeful", themes=["garden"]),
    scene("Watered the tomato seedlings in the garden", "2026-05-06", feeling="calm", themes=["garden"]),
    scene(
        "Harvested the first ripe tomatoes from the garden", "2026-07-20", feeling="proud", themes=["garden"]
    ),
    scene(BASIL, "2026-07-22", feeling="content", themes=["garden"]),
    scene("Fixed the leaking bathroom faucet", "2026-05-04", feeling="annoyed", themes=["work"]),
    scene("Ran the half marathon with Lena", [{"date": "Day7", "action": "Hashi"}], feeling="exhausted"),
]
TOOLS = {
    "recall",
    "recall_memory",
    "search_memory",
    "query",
    "note_scene",
    "note",
    "context",
    "supersede_note",
    "merge_notes",
    "pack",
    "list_sessions",  # ADR 0053
    "show_session",
    "note_message",
    "search_messages",
    "add_fact",  # issue #11
    "list_facts",
    "add_lore",
    "change_fact",
    "merge_entities",
    "extract_facts",  # ADR 0058
    "search_facts",  # ADR 0059
    "prompt_slice",
    "entity_profile",  # ADR 0064
    "noop",  # issue #12: the sleep tool set, and the mode
    "add_journal_entry",
    "review_journal",
    "mode",
    "wake",
    "sleep",
    "dream",
    "links",  # ADR 0062
    "why",  # ADR 0068
    "forget",  # ADR 0075, 0076
}


def _engram_command() -> list[str]:
    script = shutil.which("engram", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-c", "from engram.adapters.cli.main import main; main()"]


def _env(settings: Settings) -> dict[str, str]:
    env = {
        "ENGRAM_DATA_DIR": str(settings.data_dir),
        "ENGRAM_EMBEDDER": "hashing",
        "ENGRAM_LLM": "none",
        "ENGRAM_LOG_LEVEL": "info",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    if settings.database_url is not None:
        env["ENGRAM_DATABASE_URL"] = settings.database_url.get_secret_value()
    return env


def _prepare(settings: Settings) -> dict[str, Any]:
    """Aria and Bo with identical memories; returns what the checks need. The Engram is closed after."""
    with bootstrap(settings) as engram:
        out: dict[str, Any] = {}
        for name in ("Aria", "Bo"):
            being_id = UUID(engram.beings.register(name).being_id)
            note_scenes(engram, name, SCENES)
            engram.patrol(name)
            engram.views.ensure()
            out[name] = {
                "id": being_id,
                "nodes": {r["action"]: r for r in engram.views.read.nodes(being_id)},
            }
        engram.beings.define_soul("Aria", "Curious, warm, dry humour.")
        return out


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def _session_calls(params: StdioServerParameters, errlog: Any, calls: Callable[..., Any]) -> Any:
    faults: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):  # e.g. a line on stdout that is not JSON-RPC
            faults.append(message)

    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        result = await calls(session)
    assert faults == []
    return result


def test_every_tool_over_stdio(make_settings: Callable[..., Settings], tmp_path: Path) -> None:
    settings = make_settings()
    prepared = _prepare(settings)
    aria, bo = prepared["Aria"], prepared["Bo"]
    bo_cluster = bo["nodes"][PLANTED]["cluster_id"]
    params = StdioServerParameters(
        command=_engram_command()[0],
        args=[*_engram_command()[1:], "mcp", "--being", "Aria"],
        env=_env(settings),
        cwd=str(tmp_path),
    )

    async def calls(session: ClientSession) -> dict[str, CallToolResult]:
        tools = (await session.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        for tool in tools:  # no tool can name a being
            assert not {"being", "being_id", "being_ref"} & set(tool.input_schema.get("properties", {}))
        names: dict[str, tuple[str, dict[str, Any]]] = {
            "recall": ("recall", {"text": "tomatoes in the garden"}),
            "recall_nothing": ("recall", {"text": "xylophone quartz zeppelin"}),
            "recall_empty": ("recall", {"text": ""}),
            "query": ("query", {"text": "basil pesto", "k": 2}),
            "query_blank": ("query", {"text": "   "}),
            "query_k0": ("query", {"text": "basil", "k": 0}),
            "query_profile": ("query", {"text": "basil", "profile": "nope"}),
            "search": ("search_memory", {"query": "garden"}),
            "search_and": ("search_memory", {"query": ["garden", "hopeful"], "mode": "and"}),
            "search_when": ("search_memory", {"query": "day7"}),
            "search_empty": ("search_memory", {"query": "  "}),
            "search_page": ("search_memory", {"query": "garden", "limit": 3}),
            "search_bad_cursor": ("search_memory", {"query": "garden", "cursor": "nonsense"}),
            "note_tool": ("note", {"kind": "tool", "text": "calendar: books appointments"}),
            "note_map": (
                "note",
                {"kind": "map", "text": "Greenhouse: behind the house", "idempotency_key": "g"},
            ),
            "note_map_again": (
                "note",
                {"kind": "map", "text": "Greenhouse: behind the house", "idempotency_key": "g"},
            ),
            "note_scene_kind": ("note", {"kind": "scene", "text": "x"}),
            "note_empty": ("note", {"kind": "todo", "text": ""}),
            "note": (
                "note_scene",
                {
                    "scene": {
                        "action": "Ate pizza with Lena",
                        "actors": ["me", "Lena"],
                        "when": ["2026-05-05"],
                    },
                    "idempotency_key": "m-1",
                },
            ),
            "note_again": (
                "note_scene",
                {
                    "scene": {
                        "action": "Ate pizza with Lena",
                        "actors": ["me", "Lena"],
                        "when": ["2026-05-05"],
                    },
                    "idempotency_key": "m-1",
                },
            ),
            "note_invalid": ("note_scene", {"scene": {"action": "Ate pizza", "importance": 3}}),
            "note_prose": ("note_scene", {"scene": "felt great after the run"}),
            "context": ("context", {}),
            "pack": ("pack", {"limit": 1}),
            "pack_query": ("pack", {"query": "calendar appointments"}),
            "pack_limit0": ("pack", {"limit": 0}),
            "cluster_unknown": ("recall_memory", {"cluster_id": "00000000-0000-0000-0000-000000000001"}),
            "cluster_other_being": ("recall_memory", {"cluster_id": bo_cluster}),
            "cluster_bad": ("recall_memory", {"cluster_id": "not-a-uuid"}),
            "links": ("links", {}),  # ADR 0062
            "links_bad": ("links", {"node": "not-a-uuid"}),
            "why_unknown": ("why", {"kind": "node", "id": "00000000-0000-0000-0000-000000000001"}),
            # A fact is named by its id only (a note or a message also by the caller's own id).
            "forget_bad": ("forget", {"kind": "fact", "id": "not-a-uuid"}),  # ADR 0075, 0076
        }
        out = {}
        for key, (name, args) in names.items():
            out[key] = await session.call_tool(name, args)
        cursor = out["search_page"].structured_content["cursor"]
        out["search_next"] = await session.call_tool(
            "search_memory", {"query": "garden", "limit": 3, "cursor": cursor}
        )
        cluster = out["query"].structured_content["memories"][0]["cluster_id"]
        out["cluster"] = await session.call_tool("recall_memory", {"cluster_id": cluster})
        out["why"] = await session.call_tool("why", {"kind": "cluster", "id": cluster})  # ADR 0068
        prose = {"kind": "note", "id": out["note_prose"].structured_content["note_id"]}
        out["forget"] = await session.call_tool("forget", prose)  # the last: it rebuilds the views
        out["forget_again"] = await session.call_tool("forget", prose)
        return out

    with (tmp_path / "server.stderr").open("w+", encoding="utf-8") as errlog:
        r = anyio.run(_session_calls, params, errlog, calls)
        errlog.seek(0)
        stderr = errlog.read()

    ok = {k: v for k, v in r.items() if not v.is_error}
    errors = {k: _text(v) for k, v in r.items() if v.is_error}
    assert set(errors) == {
        "pack_limit0",
        "recall_empty",
        "query_blank",
        "query_k0",
        "query_profile",
        "search_empty",
        "search_bad_cursor",
        "note_scene_kind",
        "note_empty",
        "note_invalid",
        "cluster_unknown",
        "cluster_other_being",
        "cluster_bad",
        "links_bad",
        "why_unknown",
        "forget_bad",
    }, errors
    assert ok["links"].structured_content["links"] == [] and "node" in errors["links_bad"]
    assert ok["why"].structured_content["tree"]["kind"] == "cluster" and "not found" in errors["why_unknown"]
    assert ok["forget"].structured_content["already"] is False and "not a fact id" in errors["forget_bad"]
    assert ok["forget_again"].structured_content["already"] is True
    # recall: the fragment stream, or an empty result without a tag
    text = _text(ok["recall"])
    assert text.startswith("<memory>") and text.endswith("</memory>") and PLANTED in text
    assert ok["recall"].structured_content == {"text": text, "matched": 3}
    assert ok["recall_nothing"].content == [] and ok["recall_nothing"].structured_content == {
        "text": "",
        "matched": 0,
    }
    # query, search_memory, recall_memory: memories with their ids and clusters
    memories = ok["query"].structured_content["memories"]
    assert len(memories) == 2 and memories[0]["action"] == BASIL and memories[0]["score"] > 0
    assert BASIL in _text(ok["query"]) and memories[0]["id"] in _text(ok["query"])
    aria_ids = {r["id"] for r in aria["nodes"].values()}
    found = ok["search"].structured_content["memories"]
    assert len(found) == 4 and {m["id"] for m in found} <= aria_ids
    assert [m["action"] for m in ok["search_and"].structured_content["memories"]] == [PLANTED]
    assert [m["when"][0]["date"] for m in ok["search_when"].structured_content["memories"]] == ["Day7"]
    in_cluster = ok["cluster"].structured_content["memories"]
    assert in_cluster and {m["id"] for m in in_cluster} <= aria_ids
    # note_scene: stored once per key; prose kept for repair
    note = ok["note"].structured_content
    assert note["parsed"] is True and note["duplicate"] is False
    assert ok["note_again"].structured_content["duplicate"] is True
    assert ok["note_again"].structured_content["note_id"] == note["note_id"]
    assert ok["note_prose"].structured_content["parsed"] is False and "repair" in _text(ok["note_prose"])
    # search_memory pages: every match counted, the next page by cursor
    page = ok["search_page"].structured_content
    assert (len(page["memories"]), page["total"]) == (3, 4) and page["cursor"]
    assert f"cursor {page['cursor']}" in _text(ok["search_page"])
    rest = ok["search_next"].structured_content
    assert (len(rest["memories"]), rest["total"], rest["cursor"]) == (1, 4, None)
    assert {m["id"] for m in page["memories"] + rest["memories"]} == {m["id"] for m in found}
    assert "cursor" in errors["search_bad_cursor"]
    # note: the kinds that are not scenes; tool and map entries reach the system prompt
    assert ok["note_tool"].structured_content["kind"] == "tool"
    assert _text(ok["note_tool"]).startswith("noted tool ")
    assert ok["note_map_again"].structured_content["duplicate"] is True
    assert "note_scene_kind" in errors and "note_empty" in errors
    # context: the ready text, the blocks, and the snapshot as a prefix message pair
    assert _text(ok["context"]).startswith("# Who you are\nCurious, warm, dry humour.")
    context = ok["context"].structured_content
    assert context["system_prompt"]["tools"] == ["calendar: books appointments"]
    assert context["system_prompt"]["map"] == ["Greenhouse: behind the house"]
    assert [m["role"] for m in context["messages"]] == ["user", "assistant"]
    assert context["messages"][0]["content"].startswith("# What is on your plate")
    # pack: the notes as one text, newest first, or ranked by a query (ADR 0049)
    assert _text(ok["pack"]) == "## Memory Context\n\n[map] Greenhouse: behind the house"
    assert ok["pack_query"].structured_content["notes"][0]["text"] == "calendar: books appointments"
    assert "pack_limit0" in errors
    # errors carry their reason
    assert "not_found" in errors["cluster_unknown"] and "not found" in errors["cluster_other_being"]
    assert "uuid" in errors["cluster_bad"].lower()
    assert "must not be empty" in errors["query_blank"] and "unknown profile" in errors["query_profile"]
    assert "at least one search term" in errors["search_empty"]
    assert "actors" in errors["note_invalid"] and "importance" in errors["note_invalid"]
    # logs went to stderr (and, since the session worked, nowhere else)
    assert "command handled" in stderr and "mcp server starting" in stderr

    # What the server wrote is in the log: reactivations of Aria's nodes only, one note per key.
    with bootstrap(settings) as engram:
        engram.views.ensure()
        nodes = {r["action"]: r for r in engram.views.read.nodes(aria["id"])}
        assert nodes[PLANTED]["reactivation_count"] >= 2  # recall, search (and the cluster)
        assert all(r["reactivation_count"] == 0 for r in engram.views.read.nodes(bo["id"]))
        notes = engram.views.read.notes(aria["id"], kinds=["scene"])
        assert sum(n["text"].startswith('{"action": "Ate pizza') for n in notes) == 1
        node = engram.store.get(MemoryNode, UUID(nodes[PLANTED]["id"]), being_id=aria["id"])
        assert node.reactivation_count == nodes[PLANTED]["reactivation_count"]


def test_unknown_being_is_refused_before_serving(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none")
    with bootstrap(settings) as engram:
        engram.beings.register("Aria")
    env = {**os.environ, **_env(settings)}
    env.pop("ENGRAM_DATABASE_URL", None)
    done = subprocess.run(
        [*_engram_command(), "mcp", "--being", "Nobody"],
        env=env,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 3 and "being 'Nobody' not found" in done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr


def test_the_note_tool_takes_every_kind_but_scene() -> None:
    from typing import get_args

    from engram.adapters.mcp.server import NoteKindName
    from engram.domain.note import NoteKind

    assert set(get_args(NoteKindName)) == {k.value for k in NoteKind} - {"scene"}


def test_the_tool_set_switches_with_the_mode(make_settings: Callable[..., Settings], tmp_path: Path) -> None:
    """Asleep, the server offers only the sleep tool set and says so for any other tool; woken through
    its own `wake` tool, it offers every tool again (issue #12)."""
    settings = make_settings()
    with bootstrap(settings) as engram:
        engram.beings.register("Aria")
        note_scenes(engram, "Aria", SCENES[:2])
        engram.patrol("Aria")
        engram.sleep.sleep("Aria", hours=20)
        for _ in range(20):  # compacting done: a wake is no longer deferred
            if engram.sleep.tick("Aria").phase == "dreaming":
                break
        assert engram.sleep.mode("Aria").phase == "dreaming"
    params = StdioServerParameters(
        command=_engram_command()[0],
        args=[*_engram_command()[1:], "mcp", "--being", "Aria"],
        env=_env(settings),
        cwd=str(tmp_path),
    )

    async def calls(session: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {"asleep_tools": [t.name for t in (await session.list_tools()).tools]}
        out["query"] = await session.call_tool("query", {"text": "tomatoes"})
        out["mode"] = await session.call_tool("mode", {})
        out["noop"] = await session.call_tool("noop", {})
        out["entry"] = await session.call_tool("add_journal_entry", {"text": "Dreamt of the garden."})
        out["review"] = await session.call_tool("review_journal", {})
        out["recall"] = await session.call_tool("recall", {"text": "tomatoes in the garden"})
        out["wake"] = await session.call_tool("wake", {"reason": "the user is back"})
        out["awake_tools"] = {t.name for t in (await session.list_tools()).tools}
        out["query_awake"] = await session.call_tool("query", {"text": "tomatoes"})
        out["wake_again"] = await session.call_tool("wake", {})
        out["dream"] = await session.call_tool("dream", {"ticks": 2})
        out["sleep"] = await session.call_tool("sleep", {"hours": 1, "reason": "tired"})
        out["asleep_again"] = [t.name for t in (await session.list_tools()).tools]
        out["dream_asleep"] = await session.call_tool("dream", {})
        return out

    with (tmp_path / "stderr.txt").open("w") as errlog:
        out = anyio.run(_session_calls, params, errlog, calls)
    assert out["asleep_tools"] == [
        "noop",
        "add_journal_entry",
        "review_journal",
        "recall",
        "add_fact",
        "mode",
        "wake",
    ]
    refused = _text(out["query"])
    assert out["query"].is_error and "Aria is asleep (dreaming) until" in refused
    assert "`query` is not available" in refused and "noop, add_journal_entry" in refused
    assert out["mode"].structured_content["mode"] == "asleep"
    assert out["mode"].structured_content["phase"] == "dreaming"
    assert not out["noop"].is_error and not out["entry"].is_error and not out["recall"].is_error
    assert "Dreamt of the garden." in _text(out["review"])
    assert _text(out["wake"]) == "awake"
    assert out["awake_tools"] == TOOLS
    assert not out["query_awake"].is_error
    assert out["wake_again"].is_error and "awake already" in _text(out["wake_again"])
    assert "2 sleep ticks" in _text(out["dream"]) and _text(out["dream"]).endswith("now awake")
    assert _text(out["sleep"]).startswith("asleep (compacting) until ")
    assert out["asleep_again"] == out["asleep_tools"]
    assert out["dream_asleep"].is_error and "`dream` is not available" in _text(out["dream_asleep"])
    with bootstrap(settings) as engram:
        mode = engram.sleep.mode("Aria")
        assert mode.mode == "asleep" and mode.recent[0].reason == "tired"  # its `sleep` call
        assert [t.reason for t in mode.recent if t.event == "woke_up"][:2] == ["nap_over", "the user is back"]
