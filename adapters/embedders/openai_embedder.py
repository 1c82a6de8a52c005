"""OpenAI (or OpenAI-compatible) embeddings through the official `openai` SDK.

The SDK does the HTTP, its own bounded retries with back-off on 429/5xx and
the timeouts; this adapter batches, restores input order, checks the answer
and turns every failure into `EmbedderError` with a message that names the
cause but never the API key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import httpx
import numpy as np
import structlog

from engram.adapters.embedders._errors import EmbedderConfigError
from engram.adapters.embedders._vectors import rows_to_embeddings
from engram.domain.embedding import Embedding
from engram.services.errors import EmbedderError

if TYPE_CHECKING:
    import openai

log = structlog.get_logger(__name__)

DEFAULT_MODEL = "text-embedding-3-small"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The API's limit on inputs in one request.
MAX_BATCH_SIZE = 2048

#: Native dimensions of OpenAI's embedding models.
KNOWN_DIMS: dict[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# Only the text-embedding-3 family accepts the `dimensions` parameter
# (Matryoshka truncation); ada-002 always answers in 1536.
_SHORTENABLE = frozenset({"text-embedding-3-small", "text-embedding-3-large"})

# Server messages are echoed into ours for diagnosis, but bounded: a proxy
# can answer with a whole HTML page.
_MAX_SERVER_MESSAGE = 300


class OpenAIEmbedder:
    """Embeddings from `POST {base_url}/embeddings`.

    `dim` may be omitted for the models in `KNOWN_DIMS`; for other models
    (e.g. on a compatible server) it must be given. A `dim` below the native
    size of a text-embedding-3 model is requested with `dimensions=`.
    Vectors are returned as the API gives them (OpenAI's are unit length).
    """

    def __init__(
        self,
        *,
        api_key: str,
        model: str = DEFAULT_MODEL,
        dim: int | None = None,
        base_url: str | None = None,
        batch_size: int = MAX_BATCH_SIZE,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        http_client: httpx.Client | None = None,
    ) -> None:
        if not api_key:
            raise EmbedderConfigError("the OpenAI embedder needs an API key (ENGRAM_OPENAI_API_KEY)")
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise EmbedderConfigError(f"batch_size must be in 1..{MAX_BATCH_SIZE}, got {batch_size}")
        if max_retries < 0:
            raise EmbedderConfigError(f"max_retries must be >= 0, got {max_retries}")
        native = KNOWN_DIMS.get(model)
        if dim is None:
            if native is None:
                raise EmbedderConfigError(
                    f"the dimension of embedding model {model!r} is unknown: pass dim explicitly"
                )
            dim = native
        if dim < 1:
            raise EmbedderConfigError(f"dim must be >= 1, got {dim}")
        if native is not None and dim != native and (model not in _SHORTENABLE or dim > native):
            raise EmbedderConfigError(f"model {model!r} cannot return {dim} dimensions (native: {native})")

        self._model = model
        self._dim = dim
        # Sent only when it changes the answer, so that compatible servers
        # that do not know the parameter still work with the defaults.
        self._dimensions_param = dim if native is not None and dim != native else None
        self._base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._batch_size = batch_size
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._api_key = api_key
        self._client = self._make_client(http_client)

    def _make_client(self, http_client: httpx.Client | None) -> openai.OpenAI:
        import openai  # the SDK is slow to import; only this embedder needs it

        return openai.OpenAI(
            api_key=self._api_key,
            base_url=self._base_url,
            # openai>=3 annotates `http_client` as an `httpx2.Client` but still
            # accepts an `httpx.Client` at run time; openai<3 takes `httpx`.
            http_client=cast(Any, http_client),
            max_retries=self._max_retries,
            timeout=self._timeout_s,
        )

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}"

    @property
    def dim(self) -> int:
        return self._dim

    def close(self) -> None:
        """Close the SDK's HTTP client (an injected `http_client` stays the caller's to close)."""
        self._client.close()

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIEmbedder(model={self._model!r}, dim={self._dim}, base_url={self._base_url!r})"

    def embed(self, texts: Sequence[str]) -> list[Embedding]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if not texts:
            return []
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            out[start : start + len(batch)] = self._embed_batch(batch)
        return rows_to_embeddings(self.model_id, out)

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        import openai

        # The API rejects empty strings (HTTP 400) and would fail the whole
        # batch; a single space embeds as "no content".
        inputs = [text if text else " " for text in batch]
        extra: dict[str, Any] = {}
        if self._dimensions_param is not None:
            extra["dimensions"] = self._dimensions_param
        log.debug("embedder.openai.request", model=self._model, inputs=len(inputs))
        try:
            response = self._client.embeddings.create(
                model=self._model,
                input=inputs,
                # Explicit, because the SDK otherwise asks for base64, which
                # not every OpenAI-compatible server implements.
                encoding_format="float",
                **extra,
            )
        except openai.APIStatusError as exc:
            raise self._error(self._status_message(exc)) from None
        except openai.APITimeoutError:
            raise self._error(
                f"request to {self._base_url} timed out after {self._timeout_s}s "
                f"(retried up to {self._max_retries} times)"
            ) from None
        except openai.APIConnectionError as exc:
            raise self._error(f"cannot reach {self._base_url}: {exc}") from None
        except openai.OpenAIError as exc:
            raise self._error(f"{type(exc).__name__}: {exc}") from None
        except ValueError as exc:  # a body that is not JSON, or JSON the SDK's models reject
            raise self._error(f"malformed response from {self._base_url}: {exc}") from None
        return self._vectors_in_order(response, len(inputs))

    def _vectors_in_order(self, response: Any, expected: int) -> list[list[float]]:
        # The SDK builds its response objects without validation, so a
        # compatible server's odd answer surfaces here, not as an exception.
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else "no"
            raise self._error(f"malformed response: {got} vectors for {expected} inputs")
        by_index: dict[int, list[float]] = {}
        for item in data:
            index = getattr(item, "index", None)
            vector = getattr(item, "embedding", None)
            if not isinstance(index, int) or not 0 <= index < expected or index in by_index:
                raise self._error(f"malformed response: bad or repeated index {index!r}")
            if not isinstance(vector, list) or len(vector) != self._dim:
                size = len(vector) if isinstance(vector, list) else type(vector).__name__
                raise self._error(
                    f"model {self._model!r} returned a vector of {size} dimensions, expected {self._dim}"
                )
            by_index[index] = vector
        return [by_index[i] for i in range(expected)]

    def _status_message(self, exc: openai.APIStatusError) -> str:
        code = exc.status_code
        detail = _server_message(exc, self._api_key)
        if code == 401:
            what = "authentication failed (check ENGRAM_OPENAI_API_KEY)"
        elif code == 429:
            what = f"rate limited or out of quota (retried up to {self._max_retries} times)"
        elif code >= 500:
            what = f"server error (retried up to {self._max_retries} times)"
        else:
            what = "request rejected"
        return f"{what}: HTTP {code} from {self._base_url}: {detail}"

    def _error(self, message: str) -> EmbedderError:
        # Raised `from None` by the callers: the SDK's exception holds the
        # request, whose headers carry the key, and its message may echo the
        # key back; neither must reach a traceback or a log.
        safe = _redact(f"OpenAI embeddings ({self._model}): {message}", self._api_key)
        log.debug("embedder.openai.failed", model=self._model, error=safe)
        return EmbedderError(safe)


def _server_message(exc: openai.APIStatusError, secret: str) -> str:
    # `body` is the decoded `error` object when the server sent JSON, else the raw text.
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else None
    text = message if isinstance(message, str) else str(exc.message)
    # Redacted before it is cut, so that a cut cannot leave a prefix of the key.
    return _redact(text, secret)[:_MAX_SERVER_MESSAGE]


def _redact(text: str, secret: str) -> str:
    return text.replace(secret, "[redacted]") if secret else text
