"""The MCP `add_fact`, `list_facts` and `add_lore` tools, called in-process, on both backends: a fact
stated then reinforced, the shared bad facts tool errors naming the field with nothing written, and
the tenant probe: the server's being lists its own and its spaces' facts, nothing else (0 leaks)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from engram.adapters.mcp.server import EngramSession
from tests.fact_cases import GOOD, bad_facts
from tests.integration import test_note_lifecycle_mcp
from tests.integration.test_note_lifecycle_mcp import _call

session = test_note_lifecycle_mcp.session  # the fixture: the MCP server's session on Aria


def _head(session: EngramSession) -> int:
    return session.run(lambda: session.engram.store.head())


def test_add_list_lore_and_tenancy(session: EngramSession) -> None:
    def others(engram: Any) -> None:
        engram.beings.register("Bo")
        engram.beings.register("Cy")
        engram.spaces.create("family", ["Aria", "Bo"])
        engram.facts.state("Bo", engram_input(text="Bo's shared fact"), space="family")
        engram.facts.state("Cy", engram_input(text="Cy's private fact"))

    session.run(lambda: others(session.engram))
    first = _call(session, "add_fact", {**GOOD, "memory_key": "profile|person|mina|fact"})
    assert first.structured_content["outcome"] == "stated"
    assert first.content[0].text.startswith("stated fact ")
    again = _call(session, "add_fact", {**GOOD, "memory_key": "profile|person|mina|fact"})
    assert (again.structured_content["outcome"], again.structured_content["importance"]) == ("reinforced", 2)
    lore = _call(session, "add_lore", {"line": "the harbour floods in spring"})
    assert lore.structured_content["outcome"] == "stated"
    listed = _call(session, "list_facts", {}).structured_content["facts"]
    assert sorted(r["text"] for r in listed) == [
        "Bo's shared fact", "Memory line: the harbour floods in spring.", "Mina lives in Austin",
    ]  # fmt: skip
    with pytest.raises(ToolError) as refused:
        _call(session, "add_fact", {**GOOD, "space": "elsewhere"})
    assert "space" in str(refused.value)


def engram_input(**fields: Any) -> Any:
    from engram.services.commands import FactInput

    return FactInput.model_validate({**GOOD, **fields})


@bad_facts()
def test_bad_facts_are_tool_errors_naming_the_field(
    session: EngramSession, fields: dict[str, Any], field: str, code: str
) -> None:
    head = _head(session)
    with pytest.raises(ToolError) as refused:
        _call(session, "add_fact", fields)
    assert code in str(refused.value) and field.split(".")[0] in str(refused.value), str(refused.value)
    assert _head(session) == head


def test_pin_archive_and_merge_through_the_tools(session: EngramSession) -> None:
    def others(engram: Any) -> str:
        engram.beings.register("Cy")
        return str(engram.facts.state("Cy", engram_input(text="Cy's private fact")).fact_id)

    theirs = session.run(lambda: others(session.engram))
    mine = _call(session, "add_fact", {**GOOD, "entity_refs": ["person:mina"]}).structured_content["fact_id"]
    assert _call(session, "change_fact", {"fact_id": mine, "change": "pin"}).structured_content["details"]
    with pytest.raises(ToolError, match="invalid_transition"):  # a pinned fact is never archived
        _call(session, "change_fact", {"fact_id": mine, "change": "archive"})
    _call(session, "change_fact", {"fact_id": mine, "change": "unpin"})
    archived = _call(session, "change_fact", {"fact_id": mine, "change": "archive"}).structured_content
    assert archived["details"]["status"] == "archived"
    for fact_id in (theirs, "not-an-id"):  # another being's fact looks like no fact at all
        with pytest.raises(ToolError, match="not_found"):
            _call(session, "change_fact", {"fact_id": fact_id, "change": "pin"})
    with pytest.raises(ToolError, match="change"):
        _call(session, "change_fact", {"fact_id": mine, "change": "burn"})
    _call(session, "merge_entities", {"alias": "person:mina_k", "into": "person:mina"})
    with pytest.raises(ToolError, match="invalid_input"):  # a cycle
        _call(session, "merge_entities", {"alias": "person:mina", "into": "person:mina_k"})
    _call(session, "merge_entities", {"alias": "person:mina_k"})  # unmerged
    with pytest.raises(ToolError, match="invalid_transition"):
        _call(session, "merge_entities", {"alias": "person:mina_k"})
