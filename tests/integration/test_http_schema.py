"""Property-based tests of the HTTP API against its own OpenAPI schema (schemathesis, in-process ASGI).

Every operation is called with generated valid and invalid input under an admin token; no call may
answer 5xx, and every answer must match the schema (status codes, content types, bodies, headers).
All of schemathesis' checks run except `positive_data_acceptance`: the domain validates more than
a schema can say (a scene is JSON inside `text`, a name must be printable, a query not blank), and
refuses such input with a documented 422.
Bounded: a few dozen examples per operation. LLM calls with a generated `X-LLM-Key` go to a closed
local port and fail fast, as they would against an unreachable provider.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance
from schemathesis.config import SchemathesisConfig
from schemathesis.core.result import Ok

from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import bootstrap
from engram.services.commands import NoteInput
from engram.services.config import Settings
from engram.services.tokens import TokenService
from tests.integration.http_support import free_port
from tests.support import postgres_schema, postgres_url

EXAMPLES_PER_MODE = 8


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def api_app(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, str]]:
    closed = f"http://127.0.0.1:{free_port()}"
    with contextlib.ExitStack() as stack:
        database_url = None
        if request.param == "postgres":
            base = postgres_url()
            assert base, (
                "set ENGRAM_TEST_DATABASE_URL for the PostgreSQL half (scripts/pg-start.sh starts one)"
            )
            database_url = stack.enter_context(postgres_schema(base))
        yield from _api(tmp_path_factory, closed, database_url)


def _api(
    tmp_path_factory: pytest.TempPathFactory, closed: str, database_url: str | None
) -> Iterator[tuple[Any, str]]:
    s = Settings(
        database_url=database_url,
        data_dir=Path(tmp_path_factory.mktemp("schema")) / "data",
        embedder="offline",  # what production runs; it copes with any text, words or none
        llm="none",
        openai_base_url=f"{closed}/v1",
        anthropic_base_url=closed,
        llm_max_retries=0,
        llm_timeout_s=2,
    )
    engram = bootstrap(s)
    engram.beings.register("Aria")
    engram.notes.take_many(
        "Aria",
        [
            NoteInput(
                text=json.dumps({"action": "Planted tomatoes", "actors": ["me"], "when": ["2026-05-02"]})
            ),
            NoteInput(kind="todo", text="Renew the passport"),
        ],
    )
    engram.patrol("Aria")
    token = TokenService(engram).issue(admin=True, label="schemathesis").token
    app = create_app(engram, settings=HttpSettings(rate_limit_per_s=1e6, rate_limit_burst=1_000_000))
    try:
        yield app, token
    finally:
        engram.close()


def _operations(app: Any, token: str) -> list[Any]:
    config = SchemathesisConfig.from_dict({"auth": {"openapi": {"bearer": {"bearer": token}}}})
    loaded = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)
    operations = []
    for result in loaded.get_all_operations():
        assert isinstance(result, Ok), result.err()
        operations.append(result.ok())
    return operations


def test_api_conforms_to_its_schema(api_app: tuple[Any, str]) -> None:
    app, token = api_app
    failures: list[str] = []
    calls = 0
    operations = _operations(app, token)
    assert len(operations) >= 25
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES_PER_MODE,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case: Any) -> None:
                nonlocal calls
                calls += 1
                case.call_and_validate(excluded_checks=[positive_data_acceptance])

            try:
                check()
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # nothing in the request can be made invalid
            except (
                Exception,
                BaseExceptionGroup,
            ) as exc:  # one operation's failure must not hide the others'
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)
    assert calls >= 8 * len(operations)  # the generators really produced calls
