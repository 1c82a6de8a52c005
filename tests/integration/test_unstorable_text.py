"""Text no store can keep (NUL, lone UTF-16 surrogates) is refused at every intake, naming the field,
and writes nothing; every other character is accepted and comes back as given, on both backends
(issue #7, ADR 0029).

The matrix runs through the Python API, the CLI, HTTP and MCP on SQLite and PostgreSQL. Before the
fix, a scene whose JSON escaped a NUL (`"action": "a\\u0000b"`) was accepted and then stopped four of
the six views on PostgreSQL for every being.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from engram.adapters.cli.main import cli
from engram.adapters.http import HttpSettings, create_app
from engram.domain.errors import DomainError, InvalidInput, InvalidScene
from engram.domain.note import Note, NoteKind
from engram.domain.text import check_text, escaped, text_problem, text_problems
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.tokens import TokenService

BAD = {"nul": "\x00", "high-surrogate": "\ud800", "low-surrogate": "\udfff"}
GOOD_SCENE: dict[str, Any] = {"action": "Planted tomatoes", "actors": ["me", "Mina"], "when": ["2026-05-02"]}


def _fields(exc: BaseException) -> set[str]:
    if isinstance(exc, InvalidScene):
        return {str(e["field"]) for e in exc.errors}
    if isinstance(exc, ValidationError):
        return {".".join(str(p) for p in e["loc"]) for e in exc.errors()}
    assert isinstance(exc, DomainError)
    return {str(exc.details.get("field"))}


def _refused(engram: Engram, call: Callable[[], object], field: str, kind: type[Exception]) -> None:
    """`call` raises `kind` naming `field`, and the log's head does not move."""
    head = engram.store.head()
    with pytest.raises(kind) as info:
        call()
    assert field in _fields(info.value), (field, info.value)
    assert "\x00" not in str(info.value) and text_problem(str(info.value)) is None  # safe to show
    assert engram.store.head() == head


# -- the rule ---------------------------------------------------------------------------------------


def test_the_rule_refuses_nul_and_lone_surrogates_only() -> None:
    assert text_problem("a\x00b") and text_problem("\ud800") and text_problem("x\udfff")
    for fine in ("", "plain", "\x01\x1f\x7f\x85", "\ufffe\uffff", "\U0001f600\U0010ffff", "\\u0000"):
        assert text_problem(fine) is None
    assert escaped("a\x00b\udc80") == "a\\u0000b\\udc80"
    with pytest.raises(InvalidInput) as info:
        check_text("soul", "a\x00")
    assert info.value.details == {"field": "soul"} and "NUL" in info.value.message
    nested = {"a": ["ok", {"b\x00": "x", "c": "\ud800"}]}
    assert [p for p, _ in text_problems(nested)] == ["a.1.b\\u0000", "a.1.c"]


# -- the Python API ---------------------------------------------------------------------------------

SCENE_FIELDS: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
    ("action", lambda b: {"action": f"a{b}b"}),
    ("actors.1", lambda b: {"actors": ["me", f"Mi{b}na"]}),
    ("when.0", lambda b: {"when": [f"2026-05-0{b}"]}),
    ("when.1.date", lambda b: {"when": ["2026-05-02", {"date": f"Day{b}", "action": "x"}]}),
    ("when.1.action", lambda b: {"when": ["2026-05-02", {"date": "Day7", "action": f"x{b}"}]}),
    ("setting", lambda b: {"setting": f"home{b}"}),
    ("dialogue.0", lambda b: {"dialogue": [f"hi{b}"]}),
    ("sensory.1", lambda b: {"sensory": ["warm", f"loud{b}"]}),
    ("feeling", lambda b: {"feeling": f"calm{b}"}),
    ("themes.2", lambda b: {"themes": ["a", "b", f"c{b}"]}),
    ("emotion.val\\u{:04x}ence", lambda b: {"emotion": {f"val{b}ence": 0.5}}),
    ("sce\\u{:04x}ne_key", lambda b: {f"sce{b}ne_key": 1}),
]


def test_a_scene_holding_unstorable_text_is_refused_naming_the_field(engram: Engram) -> None:
    engram.beings.register("Aria")
    for bad in BAD.values():
        for field, change in SCENE_FIELDS:
            text = json.dumps({**GOOD_SCENE, **change(bad)})  # JSON escapes it: the raw text is plain ASCII
            take = lambda text=text: engram.notes.take("Aria", NoteInput(text=text))  # noqa: E731
            _refused(engram, take, field.format(ord(bad)), InvalidScene)
        nested = json.dumps({"scene": GOOD_SCENE | {"action": f"x{bad}"}, "feeling": "fine"})
        _refused(
            engram, lambda n=nested: engram.notes.take("Aria", NoteInput(text=n)), "action", InvalidScene
        )


def test_a_batch_with_one_bad_scene_writes_nothing_and_says_which(engram: Engram) -> None:
    engram.beings.register("Aria")
    good, bad = json.dumps(GOOD_SCENE), json.dumps({**GOOD_SCENE, "feeling": "x\x00", "importance": 2})
    head = engram.store.head()
    with pytest.raises(InvalidScene) as info:
        engram.notes.take_many("Aria", [NoteInput(text=good), NoteInput(text=bad)])
    assert info.value.details["index"] == 1 and {"feeling", "importance"} <= _fields(info.value)
    assert engram.store.head() == head


def _raw(kind: NoteKind, text: str, key: str | None = None, ref: str | None = None) -> NoteInput:
    """A `NoteInput` that skipped its own validation, as a caller building it unchecked would."""
    return NoteInput.model_construct(kind=kind, text=text, idempotency_key=key, source_ref=ref)


COMMANDS: list[tuple[str, Callable[[Engram, str], object]]] = [
    ("text", lambda e, b: e.notes.take("Aria", _raw(NoteKind.TODO, f"renew{b}"))),
    ("text", lambda e, b: e.notes.take("Aria", _raw(NoteKind.SCENE, f"prose, not JSON {b}"))),
    ("text", lambda e, b: e.notes.take("Aria", _raw(NoteKind.SCENE, f'{{"action": "{b}'))),
    ("idempotency_key", lambda e, b: e.notes.take("Aria", _raw(NoteKind.TODO, "x", key=f"k{b}"))),
    ("source_ref", lambda e, b: e.notes.take("Aria", _raw(NoteKind.TODO, "x", ref=f"r{b}"))),
    ("name", lambda e, b: e.beings.register(f"Bo{b}")),
    ("soul", lambda e, b: e.beings.define_soul("Aria", f"warm{b}")),
    ("think_md", lambda e, b: e.beings.write_think_md("Aria", f"- idea{b}")),
    ("diary", lambda e, b: e.beings.write_diary("Aria", "2026-05-02", f"a day{b}")),
    ("being", lambda e, b: e.beings.define_soul(f"Ar{b}ia", "warm")),
    ("being", lambda e, b: e.notes.take(f"Ar{b}ia", NoteInput(kind="todo", text="x"))),
    ("label", lambda e, b: TokenService(e).issue(admin=True, label=f"ci{b}")),
    ("query", lambda e, b: e.reading.query("Aria", f"tomatoes{b}")),
    ("query", lambda e, b: e.reading.recall("Aria", f"tomatoes{b}")),
    ("a search term", lambda e, b: e.reading.search_memory("Aria", ["tomatoes", f"Mi{b}na"])),
]


def test_every_command_refuses_unstorable_text_naming_the_field(engram: Engram) -> None:
    engram.beings.register("Aria")
    token = TokenService(engram).issue(admin=True)
    for bad in BAD.values():
        for field, command in COMMANDS:
            _refused(engram, lambda c=command, b=bad: c(engram, b), field, InvalidInput)  # type: ignore[misc]
        revoke = lambda b=bad: TokenService(engram).revoke(token.id, f"lost{b}")  # noqa: E731
        _refused(engram, revoke, "reason", InvalidInput)


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
@pytest.mark.parametrize("field", ["text", "idempotency_key", "source_ref"])
def test_note_input_refuses_unstorable_text_when_built(bad: str, field: str) -> None:
    """A `NoteInput` is a pydantic model: like an empty text, unstorable text fails when it is built."""
    given = {"text": "x", field: f"a{bad}"}
    with pytest.raises(ValidationError) as info:
        NoteInput(**given)
    assert _fields(info.value) == {field} and "must not contain" in str(info.value)


def test_an_event_holding_unstorable_text_is_never_recorded(engram: Engram) -> None:
    """The log's last line: an event that some path other than the intake filled (an LLM's answer)."""
    engram.beings.register("Aria")
    being_id = UUID(engram.beings.register("Bo").being_id)
    at = datetime(2026, 5, 2, tzinfo=UTC)
    for bad in BAD.values():
        note = Note.take(engram.ids.new_id(), being_id, NoteKind.SCENE, json.dumps(GOOD_SCENE), at)
        note.fail_parse(f"the model said {bad}", at)
        _refused(engram, lambda note=note: engram.store.save(note), "reason", InvalidInput)
    literal = Note.take(engram.ids.new_id(), being_id, NoteKind.TODO, "a backslash: \\u0000", at)
    assert engram.store.save(literal) is not None  # an escape written out is text like any other


# -- every other character: accepted, and read back as given, on both backends ----------------------

OTHER_CHARACTERS = "".join(chr(c) for c in range(1, 32)) + "\x7f\x85\xa0\u2028\u2029\ufeff\ufffe\uffff"
ASTRAL = "\U00010000\U0001f600\U000e0001\U0010ffff"


def _wrapped(text: str) -> str:
    # A printable character on each side: the scene's fields are stripped of surrounding whitespace.
    return f"<{text}>"


storable_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=30
).map(_wrapped)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(action=storable_text, feeling=storable_text, actor=storable_text, theme=storable_text)
@example(action=_wrapped(OTHER_CHARACTERS), feeling=_wrapped(ASTRAL), actor="<\x01>", theme="<\U0001f600>")
def test_every_other_character_round_trips(
    engram: Engram, action: str, feeling: str, actor: str, theme: str
) -> None:
    if not engram.views.read.beings():
        engram.beings.register("Aria")
    scene = {**GOOD_SCENE, "action": action, "actors": ["me", actor], "feeling": feeling, "themes": [theme]}
    text = json.dumps(scene, ensure_ascii=False)
    taken = engram.notes.take_many(
        "Aria", [NoteInput(text=text), NoteInput(kind="todo", text=action, source_ref=feeling)]
    )
    assert all(n.parsed is not False for n in taken.notes)
    engram.patrol("Aria")
    engram.views.ensure()
    being_id = UUID(taken.notes[0].being_id)
    notes = {n["id"]: n for n in engram.views.read.notes(being_id, limit=10_000)}
    assert notes[taken.notes[0].note_id]["text"] == text
    assert (notes[taken.notes[1].note_id]["text"], notes[taken.notes[1].note_id]["source_ref"]) == (
        action,
        feeling,
    )
    [node] = engram.views.read.nodes(being_id, ids=[UUID(notes[taken.notes[0].note_id]["node_id"])])
    assert (node["action"], node["feeling"], node["themes"], node["scene"]["actors"]) == (
        action,
        feeling,
        [theme],
        ["me", actor],
    )
    assert engram.audit.state("note", taken.notes[0].note_id)["text"] == text


# -- the CLI ----------------------------------------------------------------------------------------


@pytest.fixture
def run_cli(make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch) -> Any:
    settings = make_settings()
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_LLM", "none")
    if settings.database_url is not None:
        monkeypatch.setenv("ENGRAM_DATABASE_URL", settings.database_url.get_secret_value())
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    def head() -> int:
        code, out, _ = invoke("log", "--json", "--limit", "10000")
        assert code == 0
        return max((e["position"] for e in json.loads(out)), default=0)

    invoke.head = head  # type: ignore[attr-defined]
    assert invoke("being", "create", "Aria")[0] == 0
    return invoke


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_the_cli_refuses_unstorable_text_naming_the_field(run_cli: Any, bad: str, tmp_path: Any) -> None:
    lines = tmp_path / "scenes.jsonl"
    lines.write_text(json.dumps(GOOD_SCENE) + "\n" + json.dumps({**GOOD_SCENE, "themes": [f"x{bad}"]}) + "\n")
    cases = [
        (["note", "Aria", "--scene", json.dumps({**GOOD_SCENE, "actors": ["me", f"M{bad}"]})], "actors.1"),
        (["note", "Aria", "--file", str(lines)], "line 2: themes.0"),
        (["note", "Aria", "--kind", "todo", "--text", f"renew{bad}"], "text"),
        (["note", "Aria", "--scene", f"prose {bad}"], "text"),
        (["note", "Aria", "--kind", "todo", "--text", "x", "--key", f"k{bad}"], "idempotency_key"),
        (["note", "Aria", "--kind", "todo", "--text", "x", "--source-ref", f"r{bad}"], "source_ref"),
        (["being", "create", f"Bo{bad}"], "name"),
        (["being", "soul", "Aria", f"warm{bad}"], "soul"),
        (["being", "soul", f"Ar{bad}ia", "warm"], "being"),
        (["query", "Aria", f"tomatoes{bad}"], "query"),
        (["recall", "Aria", f"tomatoes{bad}"], "query"),
        (["search", "Aria", "tomatoes", f"x{bad}"], "a search term"),
        (["token", "create", "--admin", "--label", f"ci{bad}"], "label"),
    ]
    head = run_cli.head()
    for args, field in cases:
        code, out, err = run_cli(*args)
        assert code == 2, (args, code, out, err)
        assert field in err and "must not contain" in err and "Traceback" not in err, (args, err)
        assert "\x00" not in err and text_problem(err) is None
    code, _, err = run_cli("note", "Aria", "--kind", "todo", "--text", f"x{bad}", "--json")
    refusal = json.loads(err)
    assert (
        code == 2
        and refusal["error"] == "invalid_input"
        and refusal["details"]["errors"][0]["field"] == "text"
    )
    assert run_cli.head() == head


# -- HTTP -------------------------------------------------------------------------------------------


@pytest.fixture
def client(engram: Engram) -> Iterator[TestClient]:
    engram.beings.register("Aria")
    with TestClient(
        create_app(engram, settings=HttpSettings(), auth=False), raise_server_exceptions=False
    ) as c:
        yield c


def _escape(bad: str) -> str:
    return f"\\u{ord(bad):04x}"


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_http_refuses_unstorable_text_naming_the_field(engram: Engram, client: TestClient, bad: str) -> None:
    e = _escape(bad)
    scene_text = json.dumps(json.dumps({**GOOD_SCENE, "feeling": f"x{bad}"}))  # escaped inside a string
    cases: list[tuple[str, str, str, str, str]] = [
        ("POST", "/v1/beings/Aria/notes", f'{{"text": {scene_text}}}', "feeling", "invalid_scene"),
        (
            "POST",
            "/v1/beings/Aria/notes",
            f'{{"kind": "todo", "text": "a{e}"}}',
            "body.text",
            "invalid_input",
        ),
        (
            "POST",
            "/v1/beings/Aria/notes",
            f'{{"kind": "todo", "text": "a", "idempotency_key": "k{e}"}}',
            "body.idempotency_key",
            "invalid_input",
        ),
        (
            "POST",
            "/v1/beings/Aria/notes/batch",
            f'{{"notes": [{{"text": "ok"}}, {{"kind": "todo", "text": "x", "source_ref": "{e}"}}]}}',
            "body.notes.1.source_ref",
            "invalid_input",
        ),
        (
            "POST",
            "/v1/beings/Aria/notes/batch",
            f'{{"notes": [{{"kind": "todo", "text": "ok"}}, {{"text": {scene_text}}}]}}',
            "feeling",
            "invalid_scene",
        ),
        ("POST", "/v1/beings", f'{{"name": "Bo{e}"}}', "body.name", "invalid_input"),
        ("POST", "/v1/beings", f'{{"name": "Bo", "soul": "s{e}"}}', "body.soul", "invalid_input"),
        ("PUT", "/v1/beings/Aria/soul", f'{{"soul": "s{e}"}}', "body.soul", "invalid_input"),
        ("POST", "/v1/beings/Aria/recall", f'{{"query": "q{e}"}}', "body.query", "invalid_input"),
        ("POST", "/v1/beings/Aria/query", f'{{"query": "q{e}"}}', "body.query", "invalid_input"),
        ("POST", "/v1/admin/tokens", f'{{"admin": true, "label": "l{e}"}}', "body.label", "invalid_input"),
    ]
    head = engram.store.head()
    for method, url, body, field, code in cases:
        r = client.request(method, url, content=body.encode(), headers={"Content-Type": "application/json"})
        problem = r.json()
        assert r.status_code == 422 and problem["code"] == code, (url, body, r.text)
        assert field in {f["field"] for f in problem["errors"]}, (url, body, problem)
    if bad == "\x00":  # a URL cannot carry a lone surrogate: servers decode invalid UTF-8 as U+FFFD
        for url in ("/v1/beings/Aria/search?q=a%00", "/v1/beings/Ar%00ia", "/v1/admin/log?being=A%00"):
            r = client.get(url)
            assert r.status_code == 422 and r.json()["code"] == "invalid_input", (url, r.text)
        token = client.post("/v1/admin/tokens", json={"admin": True}).json()["id"]
        head = engram.store.head()
        assert client.delete(f"/v1/admin/tokens/{token}?reason=a%00").status_code == 422
    assert engram.store.head() == head


# -- MCP --------------------------------------------------------------------------------------------


def test_mcp_tools_refuse_nul(engram: Engram) -> None:
    """NUL reaches the tools through JSON-RPC; a lone surrogate escape fails the message's parse."""
    from mcp.types import JSONRPCRequest

    from engram.adapters.mcp.server import EngramSession, build_server

    call = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", "arguments": %s}}'
    )
    assert JSONRPCRequest.model_validate_json(call % '{"text": "a\\u0000"}').params
    with pytest.raises(ValidationError):
        JSONRPCRequest.model_validate_json(call % '{"text": "a\\ud800"}')

    engram.beings.register("Aria")
    session = EngramSession(lambda: engram, "Aria")
    server = build_server(session)
    head = engram.store.head()
    calls = [
        ("note_scene", {"scene": {**GOOD_SCENE, "actors": ["me", "M\x00"]}}, "actors.1"),
        ("note_scene", {"scene": json.dumps({**GOOD_SCENE, "action": "a\x00"})}, "action"),
        ("note_scene", {"scene": "prose \x00"}, "text"),
        ("note_scene", {"scene": GOOD_SCENE, "idempotency_key": "k\x00"}, "idempotency_key"),
        ("note_scene", {"scene": GOOD_SCENE, "source_ref": "r\x00"}, "source_ref"),
        ("recall", {"text": "tomatoes\x00"}, "query"),
        ("query", {"text": "tomatoes\x00"}, "query"),
        ("search_memory", {"query": ["tomatoes", "x\x00"]}, "a search term"),
    ]
    try:
        for tool, arguments, field in calls:
            with pytest.raises(Exception) as info:
                asyncio.run(server.call_tool(tool, arguments))
            assert field in str(info.value) and "must not contain" in str(info.value), (tool, info.value)
    finally:
        session._executor.shutdown(wait=True)
    assert engram.store.head() == head
