"""Issue #7 items 4 and 7 end to end: patrol against an LLM server that misbehaves, on both backends.

The real OpenAI adapter talks to a mock transport or to a real local HTTP server (the fault script's
`BadLLMServer`): every body that holds no answer is recorded as a rejected decision with the
`llm_bad_response` classification, the step ends there and patrol goes on with the next one; an
answer over the cap is recorded as a rejection that keeps only its first bytes. `engram patrol`
exits 0 and the HTTP patrol route answers 200, where both crashed before (exit 1, HTTP 500).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx2
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from engram.adapters.cli.main import cli
from engram.adapters.http import HttpSettings, create_app
from engram.adapters.llm import OpenAILLM
from engram.domain.ids import patrol_run_id
from engram.domain.note import Note
from engram.domain.patrol_run import PatrolRun
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.llm_answers import KEPT_OF_A_CUT_ANSWER, utf8_size
from engram.services.ports import LLMBadResponse
from engram.services.tokens import TokenService
from scripts.faults.bad_llm_server import CASES, BadLLMServer
from tests.integration.http_support import ANSWERS
from tests.patrol_support import ScriptedLLM, decisions, note_scenes, patrol_run, scene, unrelated_scenes

KEY = "sk-proj-BADLLM-never-print-me-0123456789"
MIB = 1024 * 1024


def _completion(content: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "compat-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
    }


def _good(task: str) -> httpx2.Response:
    return httpx2.Response(200, json=_completion(json.dumps(ANSWERS[task])))


class Transport:
    """Answers each chat completion by its task: `bad[task]` if given, else a good answer."""

    def __init__(self, bad: dict[str, Callable[[], httpx2.Response]]) -> None:
        self.bad = bad
        self.tasks: list[str] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        task = json.loads(request.content)["response_format"]["json_schema"]["name"]
        self.tasks.append(task)
        return self.bad[task]() if task in self.bad else _good(task)

    def llm(self, max_retries: int = 1, max_answer_bytes: int = 64 * 1024) -> OpenAILLM:
        return OpenAILLM(
            api_key=KEY,
            base_url="http://llm.invalid/v1",
            http_client=httpx2.Client(transport=httpx2.MockTransport(self.handle)),
            max_retries=max_retries,
            max_answer_bytes=max_answer_bytes,
            sleep=lambda _: None,
        )


BAD: dict[str, tuple[Callable[[], httpx2.Response], str, str]] = {
    "html": (
        lambda: httpx2.Response(200, headers={"content-type": "text/html"}, content=b"<html>Sign in</html>"),
        "not_json",
        "text/html",
    ),
    "not-json": (
        lambda: httpx2.Response(200, headers={"content-type": "application/json"}, content=b"OK then"),
        "not_json",
        "application/json",
    ),
    "empty": (lambda: httpx2.Response(200, content=b""), "empty", ""),
    "no-choices": (
        lambda: httpx2.Response(200, json={"object": "chat.completion"}),
        "wrong_shape",
        "application/json",
    ),
    "choices-empty": (lambda: httpx2.Response(200, json={"choices": []}), "wrong_shape", "application/json"),
    "content-null": (lambda: httpx2.Response(200, json=_completion(None)), "wrong_shape", "application/json"),
}


def _register(engram: Any) -> UUID:
    return UUID(engram.beings.register("Aria").being_id)


def _step(report: Any, name: str) -> dict[str, Any]:
    return next(s for s in report.steps if s["step"] == name)


def _two_roots(engram: Any) -> None:
    """Fresh nodes in both roots: two clusters for ❹ to ask about."""
    note_scenes(
        engram, "Aria", [*unrelated_scenes(2), scene("Met the client about the invoice", "2018-08-21")]
    )


@pytest.mark.parametrize("case", BAD)
def test_a_bad_response_is_recorded_and_patrol_goes_on_with_the_next_step(engram, case: str) -> None:
    being_id = _register(engram)
    _two_roots(engram)
    make, kind, content_type = BAD[case]
    transport = Transport({"consolidate_cluster": make, "write_diary": make})

    report = engram.patrol("Aria", llm=transport.llm(max_retries=1))

    run = patrol_run(engram, being_id, 1)
    assert run.finished
    consolidate, diary = _step(report, "consolidate"), _step(report, "diary")
    assert consolidate["state"] == "skipped" and "llm_bad_response" in consolidate["reason"]
    assert "HTTP 200" in consolidate["reason"] and "after 1 clusters" in consolidate["reason"]
    assert diary["state"] == "skipped" and "llm_bad_response" in diary["reason"]
    assert _step(report, "merge_small")["state"] == "finished"
    # One cluster asked (the second never), each answer retried as its kind allows: once here.
    assert transport.tasks.count("consolidate_cluster") == 2 and transport.tasks.count("write_diary") == 2
    [decision] = decisions(run, "consolidate_cluster").values()
    assert decision["parsed_plan"] is None and decision["model"] == "gpt-5.4"
    [rejection] = decision["rejected"]
    assert rejection["item"] is None and rejection["code"] == "llm_bad_response"
    assert (rejection["kind"], rejection["status"], rejection["content_type"]) == (kind, 200, content_type)
    assert decision["raw_answer"] == _first_bytes(make())
    [diary_decision] = decisions(run, "write_diary").values()
    assert diary_decision["rejected"][0]["code"] == "llm_bad_response"
    assert KEY not in json.dumps(engram.audit.history("patrol-run", str(run.id)))
    # Nothing was applied: every node is still fresh, and the next patrol asks again.
    engram.views.ensure()
    assert all(n["fresh"] for n in engram.views.read.nodes(being_id))
    engram.patrol("Aria", llm=Transport({}).llm())
    engram.views.ensure()
    assert not any(n["fresh"] for n in engram.views.read.nodes(being_id))


def _first_bytes(response: httpx2.Response) -> str:
    return response.content.decode()


def test_classification_and_names_fall_back_after_a_bad_response(engram) -> None:
    being_id = _register(engram)
    texts = [
        scene(a, "2026-05-02", themes=["climbing"]) for a in ("Climbed the ridge", "Climbed the ridge again")
    ]
    note_scenes(
        engram, "Aria", [*texts, scene("Climbed the ridge at dawn", "2026-05-02", themes=["climbing"])]
    )
    html = BAD["html"][0]
    transport = Transport({"classify_root": html, "name_cluster": html})

    report = engram.patrol("Aria", llm=transport.llm(max_retries=0))

    assert transport.tasks.count("classify_root") == 1  # the first note's question; the rest fall back
    counts = _step(report, "notes_to_nodes")["counts"]
    assert counts["nodes_created"] == 3 and "llm_classified" not in counts
    assert _step(report, "birth_subclusters")["counts"]["subclusters_born"] == 1
    run = patrol_run(engram, being_id, 1)
    [classified] = decisions(run, "classify_root").values()
    assert classified["rejected"][0]["code"] == "llm_bad_response"
    [named] = decisions(run, "name_cluster").values()
    assert named["rejected"][0]["code"] == "llm_bad_response"
    engram.views.ensure()
    assert "Climbing" in {c["name"] for c in engram.views.read.clusters(being_id)}  # ADR 0007's fallback


def test_a_repair_hit_by_a_bad_response_is_deferred_and_a_resumed_patrol_does_not_ask_again(
    make_settings, clock
) -> None:
    bad = LLMBadResponse(
        "openai answered HTTP 200 with an HTML page",
        kind="not_json",
        status=200,
        content_type="text/html",
        first_bytes="<html>",
    )
    with bootstrap(make_settings(), clock=clock) as engram:
        being_id = _register(engram)
        failed = engram.notes.take("Aria", NoteInput(text="felt great after the run")).note_id
        note_scenes(engram, "Aria", [scene("Walked the dog along the river", "2021-01-03")])
        crash = ScriptedLLM({"repair_scene": bad, "classify_root": RuntimeError("killed mid-step")})
        with pytest.raises(RuntimeError, match="killed mid-step"):
            engram.patrol("Aria", llm=crash)
        run = engram.store.get(PatrolRun, patrol_run_id(being_id, 1))
        assert not run.finished
        [decision] = decisions(run, "repair_scene").values()
        assert decision["subject"] == failed and decision["rejected"][0]["code"] == "llm_bad_response"

        resumed = ScriptedLLM()  # repair_scene is not scripted: asking it again would raise
        report = engram.patrol("Aria", llm=resumed)

        assert report.resumed and "repair_scene" not in resumed.tasks()
        note = engram.store.get(Note, UUID(failed))
        assert note.parse_status == "failed" and note.repair_attempts == 0  # kept for a later patrol
        assert engram.store.get(PatrolRun, patrol_run_id(being_id, 1)).finished


# -- the answer cap ---------------------------------------------------------------------------------


def _stored_sizes(engram: Any, run_id: UUID) -> dict[str, int]:
    """The size of each stored event of the run, by type (the largest of each)."""
    sizes: dict[str, int] = {}
    for stored in engram.store.app.recorder.select_events(run_id):
        kind = stored.topic.rsplit(".", 1)[-1]
        sizes[kind] = max(sizes.get(kind, 0), len(stored.state))
    return sizes


def test_an_answer_over_the_cap_is_a_recorded_rejection_not_a_stored_blob(engram) -> None:
    being_id = _register(engram)
    note_scenes(engram, "Aria", unrelated_scenes(2))
    huge = json.dumps({"merges": [], "make_dead": [], "note": "x" * (4 * MIB)})
    transport = Transport({"consolidate_cluster": lambda: httpx2.Response(200, json=_completion(huge))})

    report = engram.patrol("Aria", llm=transport.llm(max_answer_bytes=64 * 1024))

    assert _step(report, "consolidate")["counts"] == {"clusters": 1, "clusters_skipped": 1}
    assert transport.tasks.count("consolidate_cluster") == 2  # malformed: asked once more, as ever
    run = patrol_run(engram, being_id, 1)
    [decision] = decisions(run, "consolidate_cluster").values()
    assert decision["parsed_plan"] is None
    assert decision["raw_answer"].startswith('{"merges": [], "make_dead": [], "note": "xxxx')
    assert decision["raw_answer"].endswith(f"…[cut: {utf8_size(huge):,} bytes, cap 64 KiB]")
    assert utf8_size(decision["raw_answer"]) <= KEPT_OF_A_CUT_ANSWER
    [rejection] = decision["rejected"]
    assert rejection["code"] == "llm_answer_too_large" and "over the cap of 64 KiB" in rejection["reason"]
    assert (rejection["answer_bytes"], rejection["cap_bytes"]) == (utf8_size(huge), 64 * 1024)
    sizes = _stored_sizes(engram, run.id)
    assert 0 < sizes["LlmDecisionRecorded"] < 64 * 1024
    assert max(sizes.values()) < 64 * 1024


def test_any_llm_is_held_to_the_configured_cap(make_settings, clock) -> None:
    """Not only the adapters: an answer that reached patrol over the cap is neither applied nor kept."""
    with bootstrap(make_settings(llm_max_answer_kib=2), clock=clock) as engram:
        being_id = _register(engram)
        note_scenes(engram, "Aria", unrelated_scenes(2))

        def merge_with_a_long_reason(call: Any) -> dict[str, Any]:
            first, second = call.ids[:2]
            return {
                "merges": [{"survivor": first, "absorbed": [second], "reason": "é" * 5000}],
                "make_dead": [],
            }

        llm = ScriptedLLM({"consolidate_cluster": merge_with_a_long_reason})
        report = engram.patrol("Aria", llm=llm)

        assert _step(report, "consolidate")["counts"] == {"clusters": 1, "clusters_skipped": 1}
        engram.views.ensure()
        assert {n["status"] for n in engram.views.read.nodes(being_id)} == {"active"}  # no merge applied
        [decision] = decisions(patrol_run(engram, being_id, 1), "consolidate_cluster").values()
        assert decision["raw_answer"].endswith("bytes, cap 2 KiB]") and decision["parsed_plan"] is None
        assert utf8_size(decision["raw_answer"]) <= 1024
        assert max(_stored_sizes(engram, patrol_run(engram, being_id, 1).id).values()) < 2 * 1024


# -- a real local server, through the CLI and the HTTP API -----------------------------------------------


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")
    monkeypatch.setenv("ENGRAM_LLM", "openai")
    monkeypatch.setenv("ENGRAM_OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ENGRAM_LLM_MAX_RETRIES", "0")
    return lambda url: monkeypatch.setenv("ENGRAM_OPENAI_BASE_URL", url)


@pytest.mark.parametrize("case", ["html", "null_content", "empty"])
def test_engram_patrol_against_a_bad_server_exits_0_and_reports_it(cli_env, case: str) -> None:
    runner = CliRunner()
    with BadLLMServer(CASES[case]) as server:
        cli_env(server.url)
        assert runner.invoke(cli, ["being", "create", "Aria"]).exit_code == 0
        for text in unrelated_scenes(2):
            assert runner.invoke(cli, ["note", "Aria", "--scene", text]).exit_code == 0
        result = runner.invoke(cli, ["patrol", "Aria", "--json"])

    assert result.exit_code == 0, result.stderr
    steps = {s["step"]: s for s in json.loads(result.stdout)["steps"]}
    assert steps["consolidate"]["state"] == "skipped" and "llm_bad_response" in steps["consolidate"]["reason"]
    assert steps["diary"]["state"] == "skipped"
    assert KEY not in result.stdout + result.stderr
    assert "consolidate_cluster" in server.tasks and "write_diary" in server.tasks


def test_the_http_patrol_route_answers_200_with_the_rejections_not_500(make_settings, clock) -> None:
    with (
        BadLLMServer(CASES["html"]) as server,
        bootstrap(make_settings(OPENAI_BASE_URL=server.url, llm_max_retries=0), clock=clock) as engram,
    ):
        being_id = _register(engram)
        note_scenes(engram, "Aria", unrelated_scenes(2))
        token = TokenService(engram).issue(admin=True).token
        with TestClient(create_app(engram, settings=HttpSettings()), raise_server_exceptions=False) as client:
            response = client.post(
                "/v1/beings/Aria/patrol",
                headers={"Authorization": f"Bearer {token}", "X-LLM-Key": KEY, "X-LLM-Provider": "openai"},
            )

        assert response.status_code == 200, response.text
        steps = {s["step"]: s for s in response.json()["steps"]}
        assert (
            "llm_bad_response" in steps["consolidate"]["reason"]
            and "text/html" in steps["consolidate"]["reason"]
        )
        assert KEY not in response.text
        [decision] = decisions(patrol_run(engram, being_id, 1), "consolidate_cluster").values()
        assert decision["rejected"][0]["status"] == 200
        assert decision["raw_answer"].startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("where", ["in-the-plan", "in-the-raw-answer"])
def test_an_answer_holding_a_nul_is_recorded_escaped_and_patrol_goes_on(engram, where: str) -> None:
    """The log refuses a NUL (ADR 0029): what the model said is recorded with it written as `\\u0000`."""
    being_id = _register(engram)
    note_scenes(engram, "Aria", unrelated_scenes(2))
    merge = {"survivor": "not-a-node", "absorbed": ["nor-this"], "reason": "the same\u0000day"}
    answer = json.dumps({"merges": [merge], "make_dead": []})
    if where == "in-the-raw-answer":
        answer = "\u0000" + answer  # not JSON any more: a malformed answer, its raw text recorded
    transport = Transport({"consolidate_cluster": lambda: httpx2.Response(200, json=_completion(answer))})

    report = engram.patrol("Aria", llm=transport.llm())

    assert _step(report, "consolidate")["state"] == "finished"
    run = patrol_run(engram, being_id, 1)
    [decision] = decisions(run, "consolidate_cluster").values()
    assert "\x00" not in json.dumps(decision, ensure_ascii=False)
    if where == "in-the-plan":
        assert decision["parsed_plan"]["merges"][0]["reason"] == "the same\\u0000day"
    else:
        assert decision["parsed_plan"] is None and decision["raw_answer"].startswith("\\u0000{")
