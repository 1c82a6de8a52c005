"""What the search, log and admin page tests share: an app on the `engram` fixture (both backends)
with beings Aria (garden memories, one planted `<script>`) and Bruno, their tokens, and helpers."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.services.beings import resolve_being
from engram.services.bootstrap import Engram
from engram.services.commands import NoteInput
from engram.services.tokens import TokenService
from tests.patrol_support import scene

GARDEN = [
    "Planted tomatoes in the garden with Mina",
    "Watered the tomato seedlings in the garden",
    "Harvested the first ripe tomatoes from the garden",
]
PLANTED = "<script>window.__pwned=1</script> tomato garden party"


@dataclass
class Explorer:
    client: TestClient
    engram: Engram
    tokens: dict[str, str]
    nodes: dict[str, str]
    """Aria's node ids by action."""

    def log_in(self, who: str) -> str:
        """Log in with `who`'s token (cookie); returns the CSRF token of the next page."""
        done = self.client.post("/ui/login", data={"token": self.tokens[who], "next": "/ui/beings"})
        assert done.status_code == 303, done.text
        return csrf(self.client.get("/ui/beings").text)


def csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', html)
    assert found, html
    return found.group(1)


@pytest.fixture
def explorer(engram: Engram) -> Iterator[Explorer]:
    engram.beings.register("Aria")
    engram.beings.register("Bruno")
    engram.notes.take_many(
        "Aria", [NoteInput(text=scene(a, "2026-05-02", themes=["garden"])) for a in [*GARDEN, PLANTED]]
    )
    engram.patrol("Aria")
    engram.views.ensure()
    service = TokenService(engram)
    tokens = {
        "admin": service.issue(admin=True).token,
        "Aria": service.issue(being="Aria").token,
        "Bruno": service.issue(being="Bruno").token,
    }
    being_id = resolve_being(engram.store, "Aria").id
    nodes = {r["action"]: r["id"] for r in engram.views.read.nodes(being_id)}
    app = create_app(engram, settings=HttpSettings(token_refresh_s=0.001), warm_up=False)
    with TestClient(app, follow_redirects=False) as client:
        yield Explorer(client=client, engram=engram, tokens=tokens, nodes=nodes)
