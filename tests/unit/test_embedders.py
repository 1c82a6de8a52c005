"""Unit tests of the embedder adapters: hashing, OpenAI (over httpx.MockTransport) and the factory."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from engram.adapters.embedders import (
    EmbedderConfigError,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    build_embedder,
)
from engram.domain.embedding import Embedding
from engram.services.config import Settings
from engram.services.ports import Embedder, EmbedderError

REPO_ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-test-SECRET-0123456789abcdef"
BASE_URL = "http://embeddings.test/v1"


def _norm(e: Embedding) -> float:
    return math.sqrt(sum(x * x for x in e.floats()))


# --------------------------------------------------------------------------- hashing


def test_hashing_is_an_embedder_with_declared_dimension() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 384
    assert embedder.model_id == "hashing-384"
    (vector,) = embedder.embed(["memory engine"])
    assert vector.model == "hashing-384"
    assert vector.dim == 384

    small = HashingEmbedder(dim=64)
    assert small.model_id == "hashing-64"
    assert [v.dim for v in small.embed(["a b c", "d"])] == [64, 64]


def test_hashing_rejects_a_non_positive_dimension() -> None:
    with pytest.raises(EmbedderConfigError):
        HashingEmbedder(dim=0)


def test_hashing_is_deterministic_across_calls_and_instances() -> None:
    texts = ["The cat sat on the mat", "Ünïcode wörds and ČEŠTINA", "x"]
    first = HashingEmbedder().embed(texts)
    again = HashingEmbedder().embed(texts)
    assert [e.data for e in first] == [e.data for e in again]
    # Memoised buckets must not change the answer on a second pass.
    embedder = HashingEmbedder()
    assert [e.data for e in embedder.embed(texts)] == [e.data for e in embedder.embed(texts)]


def test_hashing_does_not_depend_on_python_hash_seed() -> None:
    # Python's str hash is salted per process; the vectors must not be.
    code = (
        "from engram.adapters.embedders.hashing import HashingEmbedder;"
        "print(HashingEmbedder(dim=32).embed(['stable hashing across processes'])[0].data.hex())"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO_ROOT)}
        result = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=REPO_ROOT, capture_output=True, text=True, check=True
        )
        outputs.add(result.stdout.strip())
    local = HashingEmbedder(dim=32).embed(["stable hashing across processes"])[0].data.hex()
    assert outputs == {local}


def test_hashing_vectors_are_unit_length_and_empty_text_is_zero() -> None:
    vectors = HashingEmbedder().embed(
        ["one", "two words", "a much longer sentence with many words in it", ""]
    )
    for v in vectors[:3]:
        assert _norm(v) == pytest.approx(1.0, abs=1e-5)
    assert _norm(vectors[3]) == 0.0


def test_hashing_keeps_input_order() -> None:
    embedder = HashingEmbedder()
    texts = ["alpha", "beta gamma", "delta"]
    batched = embedder.embed(texts)
    single = [embedder.embed([t])[0] for t in texts]
    assert [e.data for e in batched] == [e.data for e in single]
    assert len({e.data for e in batched}) == 3


def test_hashing_puts_similar_texts_closer_than_unrelated_ones() -> None:
    embedder = HashingEmbedder()
    cat, cat2, revenue = embedder.embed(
        ["The cat sat on the mat", "A cat was sitting on the mat", "Quarterly revenue grew by 5 percent"]
    )
    assert cat.cosine(cat2) > 0.3
    assert cat.cosine(cat2) > cat.cosine(revenue) + 0.2
    assert cat2.cosine(cat2) == pytest.approx(1.0, abs=1e-5)
    # Shared word pieces count: inflections are closer than unrelated words.
    memory, memories, banana = embedder.embed(["memory", "memories", "banana"])
    assert memory.cosine(memories) > memory.cosine(banana) + 0.2


def test_embedders_treat_empty_input_and_bare_strings() -> None:
    embedder = HashingEmbedder()
    assert embedder.embed([]) == []
    with pytest.raises(TypeError):
        embedder.embed("a str is a Sequence[str] but surely a mistake")


# --------------------------------------------------------------------------- openai


class FakeOpenAI:
    """An OpenAI embeddings endpoint behind httpx.MockTransport, recording every request."""

    def __init__(self, dim: int = 4, respond: Callable[[httpx.Request, int], httpx.Response] | None = None):
        self.dim = dim
        self.requests: list[httpx.Request] = []
        self._respond = respond

    def bodies(self) -> list[dict[str, object]]:
        return [json.loads(r.content) for r in self.requests]

    def vector_for(self, text: str) -> list[float]:
        # Distinct per text, so that a mix-up of order is visible.
        seed = sum(ord(c) for c in text) + len(text)
        return [float(seed % 97 + i) for i in range(self.dim)]

    def ok(self, request: httpx.Request, reverse: bool = True) -> httpx.Response:
        inputs = json.loads(request.content)["input"]
        data = [
            {"object": "embedding", "index": i, "embedding": self.vector_for(t)} for i, t in enumerate(inputs)
        ]
        if reverse:  # the API does not promise order; `index` is authoritative
            data.reverse()
        return httpx.Response(
            200,
            json={
                "object": "list",
                "model": "m",
                "data": data,
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self._respond is not None:
            return self._respond(request, len(self.requests))
        return self.ok(request)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self))


@pytest.fixture
def clients() -> Iterator[list[httpx.Client]]:
    made: list[httpx.Client] = []
    yield made
    for c in made:
        c.close()


def make(
    fake: FakeOpenAI,
    clients: list[httpx.Client],
    *,
    model: str = "local-model",
    dim: int | None = None,
    base_url: str = BASE_URL,
    batch_size: int = 2048,
    max_retries: int = 0,
) -> OpenAIEmbedder:
    client = fake.client()
    clients.append(client)
    return OpenAIEmbedder(
        api_key=API_KEY,
        model=model,
        dim=fake.dim if dim is None else dim,
        base_url=base_url,
        batch_size=batch_size,
        max_retries=max_retries,
        timeout_s=5.0,
        http_client=client,
    )


def test_openai_request_shape(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI()
    embedder = make(fake, clients)
    embedder.embed(["hello", "world"])
    (request,) = fake.requests
    assert request.method == "POST"
    assert str(request.url) == "http://embeddings.test/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    body = json.loads(request.content)
    assert body["model"] == "local-model"
    assert body["input"] == ["hello", "world"]
    assert body["encoding_format"] == "float"
    assert "dimensions" not in body


def test_openai_honours_a_compatible_base_url_with_a_path_prefix(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI()
    embedder = make(fake, clients, base_url="https://proxy.internal.test/openai/v1/")
    embedder.embed(["x"])
    assert fake.requests[0].url.host == "proxy.internal.test"
    assert fake.requests[0].url.path == "/openai/v1/embeddings"


def test_openai_returns_vectors_in_input_order(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI()
    embedder = make(fake, clients)
    texts = ["first text", "second", "the third one", "4"]
    vectors = embedder.embed(texts)
    assert [list(v.floats()) for v in vectors] == [fake.vector_for(t) for t in texts]
    assert all(v.model == "openai:local-model" and v.dim == 4 for v in vectors)


def test_openai_default_model_and_dimensions(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI(dim=1536)
    client = fake.client()
    clients.append(client)
    embedder = OpenAIEmbedder(api_key=API_KEY, base_url=BASE_URL, http_client=client, max_retries=0)
    assert embedder.model_id == "openai:text-embedding-3-small"
    assert embedder.dim == 1536
    (vector,) = embedder.embed(["x"])
    assert vector.dim == 1536
    assert fake.bodies()[0]["model"] == "text-embedding-3-small"
    for model, dim in [("text-embedding-3-large", 3072), ("text-embedding-ada-002", 1536)]:
        other = OpenAIEmbedder(api_key=API_KEY, model=model)
        assert (other.model_id, other.dim) == (f"openai:{model}", dim)
        other.close()


def test_openai_shortened_dimensions_are_requested(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI(dim=256)
    embedder = make(fake, clients, model="text-embedding-3-large", dim=256)
    (vector,) = embedder.embed(["x"])
    assert vector.dim == 256
    assert fake.bodies()[0]["dimensions"] == 256


@pytest.mark.parametrize(
    ("model", "dim"),
    [("my-local-model", None), ("text-embedding-ada-002", 256), ("text-embedding-3-small", 4096)],
)
def test_openai_rejects_unknown_or_impossible_dimensions(model: str, dim: int | None) -> None:
    with pytest.raises(EmbedderConfigError):
        OpenAIEmbedder(api_key=API_KEY, model=model, dim=dim)


@pytest.mark.parametrize("batch_size", [0, 2049])
def test_openai_rejects_batch_sizes_outside_the_api_limit(batch_size: int) -> None:
    with pytest.raises(EmbedderConfigError):
        OpenAIEmbedder(api_key=API_KEY, batch_size=batch_size)


def test_openai_batches_into_several_requests(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI()
    embedder = make(fake, clients, batch_size=2)
    texts = [f"text number {i}" for i in range(5)]
    vectors = embedder.embed(texts)
    assert [b["input"] for b in fake.bodies()] == [texts[0:2], texts[2:4], texts[4:5]]
    assert [list(v.floats()) for v in vectors] == [fake.vector_for(t) for t in texts]


def test_openai_sends_no_request_for_no_texts_and_replaces_empty_strings(
    clients: list[httpx.Client],
) -> None:
    fake = FakeOpenAI()
    embedder = make(fake, clients)
    assert embedder.embed([]) == []
    assert fake.requests == []
    assert len(embedder.embed(["", "x"])) == 2
    assert fake.bodies()[0]["input"] == [" ", "x"]


def _error_response(status: int, message: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"message": message, "type": "err", "code": None}}, headers=headers
    )


def _assert_key_not_leaked(error: BaseException) -> None:
    assert API_KEY not in str(error)
    assert API_KEY not in repr(error)
    assert error.__cause__ is None
    assert error.__suppress_context__
    rendered = "".join(traceback.format_exception(error))
    assert API_KEY not in rendered


def test_openai_401_is_an_embedder_error_without_the_key(clients: list[httpx.Client]) -> None:
    # Some servers echo the key they were given; it must not travel on.
    fake = FakeOpenAI(respond=lambda r, n: _error_response(401, f"Incorrect API key provided: {API_KEY}."))
    embedder = make(fake, clients, max_retries=2)
    with pytest.raises(EmbedderError) as caught:
        embedder.embed(["x"])
    message = str(caught.value)
    assert "401" in message
    assert "authentication failed" in message
    assert "[redacted]" in message
    _assert_key_not_leaked(caught.value)
    assert len(fake.requests) == 1  # a bad key is not retried
    assert API_KEY not in repr(embedder)


def test_openai_key_is_redacted_even_where_the_message_is_cut(clients: list[httpx.Client]) -> None:
    # A key straddling the length bound must not leave a prefix behind.
    message = "x" * 290 + API_KEY + " tail"
    fake = FakeOpenAI(respond=lambda r, n: _error_response(400, message))
    with pytest.raises(EmbedderError) as caught:
        make(fake, clients).embed(["x"])
    assert API_KEY[:10] not in str(caught.value)
    _assert_key_not_leaked(caught.value)


def test_openai_429_retries_then_gives_up(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI(
        respond=lambda r, n: _error_response(429, "Rate limit reached", headers={"retry-after-ms": "1"})
    )
    embedder = make(fake, clients, max_retries=2)
    with pytest.raises(EmbedderError) as caught:
        embedder.embed(["x"])
    assert len(fake.requests) == 3
    assert "429" in str(caught.value)
    assert "rate limited" in str(caught.value)
    assert "Rate limit reached" in str(caught.value)
    _assert_key_not_leaked(caught.value)


def test_openai_429_then_success_is_retried_transparently(clients: list[httpx.Client]) -> None:
    fake: FakeOpenAI

    def respond(request: httpx.Request, n: int) -> httpx.Response:
        if n == 1:
            return _error_response(429, "slow down", headers={"retry-after-ms": "1"})
        return fake.ok(request)

    fake = FakeOpenAI(respond=respond)
    (vector,) = make(fake, clients, max_retries=2).embed(["x"])
    assert list(vector.floats()) == fake.vector_for("x")
    assert len(fake.requests) == 2


def test_openai_500_is_an_embedder_error(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI(
        respond=lambda r, n: httpx.Response(
            500, text="<html>upstream exploded</html>", headers={"retry-after-ms": "1"}
        )
    )
    with pytest.raises(EmbedderError) as caught:
        make(fake, clients, max_retries=1).embed(["x"])
    assert "HTTP 500" in str(caught.value)
    assert "server error" in str(caught.value)
    assert len(fake.requests) == 2
    _assert_key_not_leaked(caught.value)


def test_openai_malformed_json_is_an_embedder_error(clients: list[httpx.Client]) -> None:
    fake = FakeOpenAI(
        respond=lambda r, n: httpx.Response(
            200, content=b'{"data": [not json', headers={"content-type": "application/json"}
        )
    )
    with pytest.raises(EmbedderError) as caught:
        make(fake, clients).embed(["x"])
    assert "malformed response" in str(caught.value)
    _assert_key_not_leaked(caught.value)


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"object": "list"}, "malformed response"),
        ({"data": [{"index": 0, "embedding": [1.0, 2.0, 3.0, 4.0]}]}, "1 vectors for 2 inputs"),
        (
            {"data": [{"index": 0, "embedding": [1.0] * 4}, {"index": 0, "embedding": [2.0] * 4}]},
            "repeated index",
        ),
        (
            {"data": [{"index": 0, "embedding": [1.0] * 3}, {"index": 1, "embedding": [2.0] * 3}]},
            "3 dimensions, expected 4",
        ),
    ],
)
def test_openai_unexpected_answers_are_embedder_errors(
    clients: list[httpx.Client], payload: dict[str, object], fragment: str
) -> None:
    fake = FakeOpenAI(respond=lambda r, n: httpx.Response(200, json=payload))
    with pytest.raises(EmbedderError, match=fragment):
        make(fake, clients).embed(["a", "b"])


def test_openai_connection_failure_is_an_embedder_error(clients: list[httpx.Client]) -> None:
    def refuse(request: httpx.Request, n: int) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    fake = FakeOpenAI(respond=refuse)
    with pytest.raises(EmbedderError) as caught:
        make(fake, clients).embed(["x"])
    assert "cannot reach http://embeddings.test/v1" in str(caught.value)
    _assert_key_not_leaked(caught.value)


def test_openai_needs_a_key() -> None:
    with pytest.raises(EmbedderConfigError):
        OpenAIEmbedder(api_key="")


# --------------------------------------------------------------------------- factory


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings reads the environment; a developer's real key must not leak in.
    for name in list(os.environ):
        if name.startswith(("ENGRAM_", "OPENAI_")):
            monkeypatch.delenv(name)


@pytest.mark.usefixtures("clean_env")
def test_factory_builds_the_hashing_embedder() -> None:
    embedder = build_embedder(Settings(embedder="hashing"))
    assert isinstance(embedder, HashingEmbedder)
    assert embedder.model_id == "hashing-384"


@pytest.mark.usefixtures("clean_env")
def test_factory_builds_the_offline_embedder_by_default_without_loading_it() -> None:
    embedder = build_embedder(Settings())
    assert isinstance(embedder, MiniLMEmbedder)
    assert (embedder.model_id, embedder.dim) == ("minilm-l6-v2-int8", 384)


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("key", [None, ""])
def test_factory_refuses_openai_without_a_key(key: str | None) -> None:
    with pytest.raises(EmbedderConfigError, match="ENGRAM_OPENAI_API_KEY") as caught:
        build_embedder(Settings(embedder="openai", openai_api_key=key))
    assert isinstance(caught.value, ValueError)


@pytest.mark.usefixtures("clean_env")
def test_factory_builds_the_openai_embedder_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("ENGRAM_OPENAI_BASE_URL", "http://compat.test/v1")
    settings = Settings(
        embedder="openai",
        embedding_model="text-embedding-3-large",
        embedding_batch_size=16,
        llm_max_retries=0,
    )
    embedder = build_embedder(settings)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.model_id, embedder.dim) == ("openai:text-embedding-3-large", 3072)
    assert "compat.test" in repr(embedder)
    assert API_KEY not in repr(embedder)
    embedder.close()
