"""`/docs` works without a network: every asset it loads is served by the app itself (#7, item 13)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from engram.adapters.http import HttpSettings, create_app
from engram.services.bootstrap import Engram


@pytest.fixture
def client(sqlite_engram: Engram) -> Iterator[TestClient]:
    with TestClient(create_app(sqlite_engram, settings=HttpSettings())) as c:
        yield c


def test_docs_loads_only_assets_the_app_serves(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "SwaggerUIBundle" in html and "'/openapi.json'" in html
    assert "//" not in re.sub(r"<!--.*?-->", "", html).replace("://", ""), "no protocol-relative URL"
    assert not re.search(r"https?://", html), "nothing is fetched from another host (a CDN)"
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert {u.rsplit("/", 1)[-1] for u in urls} >= {"swagger-ui-bundle.js", "swagger-ui.css"}
    kinds = {"js": "javascript", "css": "text/css", "png": "image/png"}
    for url in urls:
        assert url.startswith("/docs/assets/"), url
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert kinds[url.rsplit(".", 1)[-1]] in asset.headers["content-type"]
        assert len(asset.content) > 500, url
    bundle = client.get("/docs/assets/swagger-ui-bundle.js").text
    assert "SwaggerUIBundle" in bundle and len(bundle) > 500_000  # the real bundle, not a stub


def test_the_docs_need_no_token_and_the_api_still_does(client: TestClient) -> None:
    assert client.get("/docs/assets/swagger-ui.css").status_code == 200
    assert client.get("/openapi.json").json()["info"]["title"] == "Engram"
    assert client.get("/v1/beings").status_code == 401
