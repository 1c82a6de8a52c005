"""The embedder of the model the log says is live (ADR 0079), built from its model id.

`build_embedder` builds what the settings name; after a migration the log names the model instead
(`services/live_embedder.py`), and this module builds that one, with the configured keys and URLs.
A configured embedder that differs is ignored with a warning; a live model that cannot be built here
(openai without a key, a model id no adapter knows) is refused with a clear message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from engram.adapters.embedders._errors import EmbedderConfigError

if TYPE_CHECKING:
    from engram.services.config import Settings
    from engram.services.live_embedder import LiveModel
    from engram.services.ports import Embedder

log = structlog.get_logger("engram.adapters.embedders.live")

DEFAULT_HASHING_DIM = 384


def configured_model_id(settings: Settings) -> str:
    """The model id the configured embedder would have, without building it."""
    if settings.embedder == "offline":
        from engram.adapters.embedders.offline_minilm import MODEL_ID

        return MODEL_ID
    if settings.embedder == "hashing":
        return f"hashing-{DEFAULT_HASHING_DIM}"
    if settings.embedder == "e5-small":
        from engram.adapters.embedders.offline_e5 import MODEL_ID as E5_MODEL_ID

        return E5_MODEL_ID
    return f"openai:{settings.embedding_model}"


def build_embedder_for_model(model_id: str, settings: Settings) -> Embedder:
    """The embedder whose `model_id` is `model_id`; keys, URL and batch size from `settings`."""
    from engram.adapters.embedders import build_embedder
    from engram.adapters.embedders.offline_minilm import MODEL_ID as MINILM_MODEL_ID

    if model_id == MINILM_MODEL_ID:
        return build_embedder(settings.model_copy(update={"embedder": "offline"}))
    from engram.adapters.embedders.offline_e5 import MODEL_ID as E5_MODEL_ID

    if model_id == E5_MODEL_ID:
        return build_embedder(settings.model_copy(update={"embedder": "e5-small"}))
    if model_id.startswith("hashing-") and model_id.removeprefix("hashing-").isdigit():
        from engram.adapters.embedders.hashing import HashingEmbedder

        return HashingEmbedder(int(model_id.removeprefix("hashing-")))
    if model_id.startswith("openai:") and model_id.removeprefix("openai:"):
        update = {"embedder": "openai", "embedding_model": model_id.removeprefix("openai:")}
        return build_embedder(settings.model_copy(update=update))
    raise EmbedderConfigError(f"no embedder of this version of engram makes {model_id} vectors")


def build_live_embedder(settings: Settings, live: LiveModel | None) -> Embedder:
    """The configured embedder on a deployment that never migrated, else the live model's."""
    from engram.adapters.embedders import build_embedder

    configured = configured_model_id(settings)
    if live is None or live.model == configured:
        return build_embedder(settings)
    try:
        embedder = build_embedder_for_model(live.model, settings)
    except EmbedderConfigError as exc:
        raise EmbedderConfigError(live.unbuildable_message(exc.message)) from None
    log.warning(
        "configured_embedder_ignored",
        configured=configured,
        live=live.model,
        since=live.position,
        message=live.ignored_message(configured),
    )
    return embedder
