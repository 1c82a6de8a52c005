"""A view whose schema changed between Engram versions (ADR 0050).

An embedded command upgrades it on first use; the worker upgrades it before it applies events; the
HTTP server upgrades at its start and never in a request; nobody rebuilds a view that a newer Engram
built back to an older schema.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http.app import create_app
from engram.adapters.http.config import HttpSettings
from engram.projections import engine
from engram.services.bootstrap import Engram, bootstrap
from engram.services.config import Settings
from engram.services.views import ViewFromNewerCode, ViewUpgrading
from engram.services.worker import Worker
from tests.support import SeededIds, SteppingClock


@contextmanager
def _opened(make_settings: Callable[..., Settings], seed: int) -> Iterator[Engram]:
    e = bootstrap(make_settings(), clock=SteppingClock(), ids=SeededIds(seed))
    try:
        yield e
    finally:
        e.close()


def _written(make_settings: Callable[..., Settings]) -> None:
    """Three beings in the log and in the beings view, built with this code's schema."""
    with _opened(make_settings, 1) as e:
        for name in ("Aria", "Bo", "Cy"):
            e.beings.register(name)
        e.views.ensure()


def _view(e: Engram, name: str = "beings") -> engine.ViewStatus:
    return engine.status(e.views.dbs[name], e.views.projections[name])


def _code_moves(e: Engram, monkeypatch: pytest.MonkeyPatch, by: int) -> engine.ViewStatus:
    """This code's schema of the beings view moved `by` from the stored one; the view as it was."""
    before = _view(e)
    monkeypatch.setattr(type(e.views.projections["beings"]), "schema_version", before.schema_version + by)
    return before


def test_a_command_upgrades_a_view_of_an_older_schema_on_first_use(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    _written(make_settings)
    with _opened(make_settings, 2) as e:
        before = _code_moves(e, monkeypatch, +1)
        e.views.ensure(names=["beings"])
        assert {r["name"] for r in e.views.read.beings()} == {"Aria", "Bo", "Cy"}
        after = _view(e)
        assert after.schema_version == before.schema_version + 1
        assert after.generation > before.generation, "rebuilt blue-green into a new generation"


def test_a_view_built_by_a_newer_engram_is_never_rebuilt_back(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    _written(make_settings)
    with _opened(make_settings, 2) as e:
        before = _code_moves(e, monkeypatch, -1)
        with pytest.raises(ViewFromNewerCode, match="newer Engram") as raised:
            e.views.ensure(names=["beings"])
        assert raised.value.code == "view_from_newer_code"
        worker = Worker(e.views, names=["beings"], poll_interval=0.05)
        worker.start()
        try:
            time.sleep(0.5)
        finally:
            worker.stop()
        after = _view(e)
        assert (after.generation, after.schema_version) == (before.generation, before.schema_version)


def test_with_rebuilds_on_read_off_a_read_says_the_view_is_upgrading_and_the_worker_upgrades_it(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    _written(make_settings)
    with _opened(make_settings, 2) as e:
        before = _code_moves(e, monkeypatch, +1)
        e.views.rebuild_on_read = False
        with pytest.raises(ViewUpgrading, match="being upgraded"):
            e.views.ensure(names=["beings"])
        assert _view(e).generation == before.generation, "the read rebuilt nothing"

        worker = Worker(e.views, names=["beings"], poll_interval=0.05)
        worker.start()
        try:
            deadline = time.monotonic() + 30
            while _view(e).needs_rebuild and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            worker.stop()
        assert not _view(e).needs_rebuild
        e.views.ensure(names=["beings"])
        assert {r["name"] for r in e.views.read.beings()} == {"Aria", "Bo", "Cy"}


def test_the_http_server_upgrades_at_its_start_and_never_in_a_request(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    _written(make_settings)
    with _opened(make_settings, 2) as e:
        stored = _code_moves(e, monkeypatch, +1).schema_version
        with TestClient(create_app(e, settings=HttpSettings(), auth=False)) as client:
            assert not _view(e).needs_rebuild, "the start upgraded the view"
            assert client.get("/v1/beings").status_code == 200
            generation = _view(e).generation

            # A view that needs an upgrade after the start (here: this code's schema moved on again)
            # is not rebuilt by a request.
            monkeypatch.setattr(type(e.views.projections["beings"]), "schema_version", stored + 2)
            e.beings.register("Dee")  # the log moves on: the next read looks at the view again
            answer = client.get("/v1/beings")
            assert answer.status_code == 503
            assert answer.json()["code"] == "view_upgrading"
            assert _view(e).generation == generation
