"""Configuration problems reach the user as one line each, naming the variable, at every edge (#7, item 9)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import engram
from engram.adapters.cli.main import cli
from engram.adapters.embedders import OpenAIEmbedder, build_embedder
from engram.adapters.llm import OpenAILLM, build_llm
from engram.services.config import KEYLESS_PLACEHOLDER, ConfigurationError, load_settings, unknown_variables
from tests.unit.test_llm_adapters import PLAN_INPUT, FakeServer, ask, openai_completion


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Whatever the developer's shell holds must not change what these tests see.
    for name in list(os.environ):
        if name.startswith(("ENGRAM_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ENGRAM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENGRAM_EMBEDDER", "hashing")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_bad_values_are_one_line_each_with_the_accepted_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_LLM", "opnai")
    monkeypatch.setenv("ENGRAM_EMBEDDING_BATCH_SIZE", "lots")
    monkeypatch.setenv("ENGRAM_AUTO_PATROL", "maybe")
    monkeypatch.setenv("ENGRAM_LLM_TIMEOUT_S", "0")
    code, out, err = run("being", "list")
    assert code == 2 and not out
    assert "Traceback" not in err and "validation error" not in err.lower()
    lines = err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("error: ENGRAM_") for line in lines)
    by_name = {line.split("=", 1)[0].removeprefix("error: "): line for line in lines}
    assert "'opnai'" in by_name["ENGRAM_LLM"] and "auto, anthropic, openai, none" in by_name["ENGRAM_LLM"]
    assert "not a whole number" in by_name["ENGRAM_EMBEDDING_BATCH_SIZE"]
    assert "from 1 to 2048" in by_name["ENGRAM_EMBEDDING_BATCH_SIZE"]
    assert "true or false" in by_name["ENGRAM_AUTO_PATROL"]
    assert "too small" in by_name["ENGRAM_LLM_TIMEOUT_S"] and "above 0" in by_name["ENGRAM_LLM_TIMEOUT_S"]


def test_json_errors_carry_every_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_LOG_LEVEL", "loud")
    code, _, err = run("being", "list", "--json")
    problem = json.loads(err)
    assert code == 2 and problem["error"] == "invalid_configuration"
    assert problem["details"]["problems"] == [
        "ENGRAM_LOG_LEVEL='loud': not one of the accepted values; accepted: debug, info, warning, error"
    ]


def test_help_works_whatever_the_environment_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_LLM", "opnai")
    code, out, _ = run("recall", "--help")
    assert code == 0 and "Usage:" in out


def test_a_secret_value_is_never_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_DATABASE_URL", "mysql://admin:hunter2@db/engram")
    code, _, err = run("being", "list")
    assert code == 2 and "hunter2" not in err
    assert err.startswith("error: ENGRAM_DATABASE_URL: not a postgresql:// URL; accepted: postgresql://")


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"ENGRAM_LLM": "openai"}, "ENGRAM_OPENAI_API_KEY"),
        ({"ENGRAM_LLM": "anthropic"}, "ENGRAM_ANTHROPIC_API_KEY"),
        ({"ENGRAM_EMBEDDER": "openai"}, "ENGRAM_OPENAI_BASE_URL"),
    ],
)
def test_a_provider_without_its_key_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, _, err = run("being", "list")
    [line] = err.strip().splitlines()
    variable = next(iter(env))
    assert code == 2 and line.startswith(f"error: {variable}={env[variable]}: no ") and named in line


def test_a_misspelled_variable_is_named_with_the_closest_known_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_EMBEDER", "offline")
    monkeypatch.setenv("ENGRAM_HTTP_PROT", "9000")
    monkeypatch.setenv("ENGRAM_TEST_DATABASE_URL", "postgresql://x/y")  # the tests' own: not warned about
    code, _, err = run("being", "list")
    assert code == 0
    assert (
        "warning: ENGRAM_EMBEDER is not a setting Engram reads, so it is ignored; did you mean ENGRAM_EMBEDDER?"
        in err
    )
    assert "ENGRAM_HTTP_PROT" in err and "did you mean ENGRAM_HTTP_PORT?" in err
    assert "ENGRAM_TEST_DATABASE_URL" not in err
    # The Python API has no HTTP edge: its variables are left to `engram serve`.
    assert unknown_variables({"ENGRAM_HTTP_PROT": "1", "ENGRAM_QDRANT_ULR": "x"}) == [
        "ENGRAM_QDRANT_ULR is not a setting Engram reads, so it is ignored; did you mean ENGRAM_QDRANT_URL?"
    ]


def test_serve_checks_its_own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_HTTP_PORT", "eighty")
    code, _, err = run("serve")
    assert code == 2 and err.strip() == (
        "error: ENGRAM_HTTP_PORT='eighty': not a whole number; accepted: a whole number from 0 to 65535"
    )


@pytest.mark.parametrize("args", [("worker", "--once"), ("mcp", "--being", "Aria"), ("serve",)])
def test_every_long_running_edge_stops_on_a_bad_value(
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    monkeypatch.setenv("ENGRAM_WORKER_POLL_INTERVAL_S", "soon")
    code, _, err = run(*args)
    assert code == 2 and err.startswith("error: ENGRAM_WORKER_POLL_INTERVAL_S='soon': not a number")


def test_engram_open_raises_a_configuration_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ENGRAM_PATROL_MIN_NOTES", "0")
    with pytest.raises(engram.ConfigurationError) as caught:
        engram.open(tmp_path / "a")
    assert isinstance(caught.value, engram.InvalidInput)
    assert caught.value.problems == [
        "ENGRAM_PATROL_MIN_NOTES='0': too small; accepted: a whole number from 1 up"
    ]
    monkeypatch.delenv("ENGRAM_PATROL_MIN_NOTES")
    with pytest.raises(
        engram.ConfigurationError, match=r"embeder= is not a setting; did you mean embedder=\?"
    ):
        engram.open(tmp_path / "a", embeder="hashing")
    with pytest.raises(engram.ConfigurationError, match=r"^embedder='onnx': not one of the accepted values"):
        engram.open(tmp_path / "a", embedder="onnx")


def test_a_keyless_openai_compatible_server_needs_only_its_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_LLM", "openai")
    monkeypatch.setenv("ENGRAM_OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    code, _, err = run("being", "list")
    assert code == 0, err
    settings = load_settings()
    server = FakeServer(openai_completion(json.dumps(PLAN_INPUT)))
    llm = build_llm(settings, http_client=server.client())
    assert isinstance(llm, OpenAILLM)
    assert ask(llm).groups == PLAN_INPUT["groups"]
    request = server.requests[0]
    assert str(request.url) == "http://127.0.0.1:11434/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEYLESS_PLACEHOLDER}"
    # The embedder takes the same road.
    embedder = build_embedder(load_settings(embedder="openai", embedding_model="text-embedding-3-small"))
    assert isinstance(embedder, OpenAIEmbedder)


def test_without_key_or_base_url_the_adapters_say_so_in_one_line() -> None:
    with pytest.raises(ConfigurationError, match="ENGRAM_OPENAI_BASE_URL"):
        build_llm(load_settings(llm="none").model_copy(update={"llm": "openai"}))


def test_settings_read_the_environment_as_they_always_did(monkeypatch: pytest.MonkeyPatch) -> None:
    """Variables in any case, a field's other names (`OPENAI_API_KEY`), keywords winning, and text
    turned into the field's type: what pydantic-settings did, kept without it (ADR 0051)."""
    from engram.adapters.http.config import HttpSettings
    from engram.services.config import Settings, load_model_settings

    for name in list(os.environ):
        if name.upper().startswith(("ENGRAM_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("engram_log_level", "info")
    monkeypatch.setenv("ENGRAM_LLM_TIMEOUT_S", "12.5")
    monkeypatch.setenv("ENGRAM_COMMAND_RETRIES", "7")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-usual-variable")
    monkeypatch.setenv("ENGRAM_HTTP_PORT", "9001")
    settings = Settings(command_retries=2)
    assert (settings.log_level, settings.llm_timeout_s, settings.command_retries) == ("info", 12.5, 2)
    assert settings.openai_key() == "sk-from-the-usual-variable"
    monkeypatch.setenv("ENGRAM_OPENAI_API_KEY", "sk-engram-first")
    assert Settings().openai_key() == "sk-engram-first", "the first name of the field wins"
    assert HttpSettings().port == 9001 and Settings().data_dir == Path("./engram-data")

    monkeypatch.setenv("ENGRAM_HTTP_PORT", "ninety")
    with pytest.raises(ConfigurationError, match="ENGRAM_HTTP_PORT='ninety': not a whole number"):
        load_model_settings(HttpSettings)
