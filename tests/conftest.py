from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from tests.support import SeededIds, SteppingClock, postgres_schema, require_postgres

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name == "postgres":
        require_postgres()
    return name


@pytest.fixture
def clock() -> SteppingClock:
    return SteppingClock()


@pytest.fixture
def make_settings(backend: str, tmp_path: Path) -> Iterator[Callable[..., Settings]]:
    """Settings for the parametrized backend; every call shares the same database."""
    if backend == "postgres":
        with postgres_schema(require_postgres()) as url:
            yield lambda **kw: Settings(
                **{
                    "data_dir": tmp_path / "data",
                    "database_url": url,
                    "embedder": "hashing",
                    "llm": "none",
                    **kw,
                }
            )
    else:
        yield lambda **kw: Settings(
            **{"data_dir": tmp_path / "data", "embedder": "hashing", "llm": "none", **kw}
        )


@pytest.fixture
def engram(make_settings: Callable[..., Settings], clock: SteppingClock) -> Iterator[Engram]:
    e = bootstrap(make_settings(), clock=clock, ids=SeededIds())
    yield e
    e.close()


@pytest.fixture
def with_llm(make_settings: Callable[..., Settings], clock: SteppingClock) -> Iterator[Callable[..., Engram]]:
    """Opens engrams on the parametrized backend with the given (scripted) LLM; closes them after."""
    opened: list[Engram] = []

    def make(llm: Any, **settings: Any) -> Engram:
        e = bootstrap(make_settings(**settings), clock=clock, ids=SeededIds(), llm=llm)
        opened.append(e)
        return e

    yield make
    for e in opened:
        e.close()


@pytest.fixture
def sqlite_engram(tmp_path: Path, clock: SteppingClock) -> Iterator[Engram]:
    """An engram on the embedded default (SQLite), for what only SQLite has (FTS5, its files)."""
    e = bootstrap(
        Settings(data_dir=tmp_path / "data", embedder="hashing", llm="none"), clock=clock, ids=SeededIds()
    )
    yield e
    e.close()


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """The CLI configures structlog for the process; each test starts from the defaults again."""
    import structlog

    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
