"""Choose the LLM adapter from settings, or from a key brought with one request (BYOK)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import SecretStr

from engram.adapters.llm.none_llm import NoLLM
from engram.services.config import ConfigurationError, Settings
from engram.services.ports import LLM

if TYPE_CHECKING:
    import httpx2

# The providers' SDKs are imported by the branch that builds their adapter: together they are some
# 3,500 modules and 160,000 objects, which a process without an LLM (a patrol's mechanical steps, a
# worker) would otherwise load, and which every full pass of the garbage collector would traverse.

Provider = Literal["auto", "anthropic", "openai", "none"]

# Anthropic keys are the only ones with this prefix (OpenAI's are `sk-…`/`sk-proj-…`).
_ANTHROPIC_KEY_PREFIX = "sk-ant-"


class LLMConfigError(ConfigurationError):  # a ValueError too, through InvalidInput
    """The configuration names a provider that cannot be used (e.g. its key is missing)."""


class DescribedLLM(LLM, Protocol):
    def describe(self) -> str:
        """`provider:model` for status output; never contains a secret."""
        ...


def build_llm(
    settings: Settings,
    *,
    api_key_override: str | None = None,
    provider_override: Provider | None = None,
    http_client: httpx2.Client | None = None,
) -> DescribedLLM:
    """The adapter for `settings.llm` (or `provider_override`).

    `auto` picks Anthropic if its key is set, else OpenAI if its key is set,
    else `NoLLM`. An `api_key_override` replaces the configured key for this
    one adapter only; in `auto` mode it is routed by its shape (`sk-ant-…` →
    Anthropic, anything else → OpenAI), since the configured keys say nothing
    about a key the caller brought. A named provider without a key is a
    configuration error rather than a silent `NoLLM`.
    """
    provider: Provider = provider_override or settings.llm
    override = api_key_override or None
    if provider == "none":
        return NoLLM()
    if provider == "auto":
        if override is not None:
            provider = "anthropic" if override.startswith(_ANTHROPIC_KEY_PREFIX) else "openai"
        elif _secret(settings.anthropic_api_key):
            provider = "anthropic"
        elif _secret(settings.openai_api_key):
            provider = "openai"
        else:
            return NoLLM()

    if provider == "anthropic":
        from engram.adapters.llm.anthropic_llm import AnthropicLLM

        key = override or _secret(settings.anthropic_api_key)
        if not key:
            raise LLMConfigError(
                "llm=anthropic but no Anthropic key: set ENGRAM_ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY)"
            )
        return AnthropicLLM(
            api_key=key,
            base_url=settings.anthropic_base_url,
            reasoning_model=settings.llm_reasoning_model,
            fast_model=settings.llm_fast_model,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
            max_answer_bytes=settings.llm_max_answer_kib * 1024,
            http_client=http_client,
        )

    from engram.adapters.llm.openai_llm import OpenAILLM

    key = override or settings.openai_key()  # a placeholder for a keyless server at the base URL
    if not key:
        raise LLMConfigError(
            "llm=openai but no OpenAI key: set ENGRAM_OPENAI_API_KEY (or OPENAI_API_KEY), or "
            "ENGRAM_OPENAI_BASE_URL for a compatible server that needs none"
        )
    return OpenAILLM(
        api_key=key,
        base_url=settings.openai_base_url,
        reasoning_model=settings.llm_reasoning_model,
        fast_model=settings.llm_fast_model,
        timeout_s=settings.llm_timeout_s,
        max_retries=settings.llm_max_retries,
        max_answer_bytes=settings.llm_max_answer_kib * 1024,
        http_client=http_client,
    )


def _secret(value: SecretStr | None) -> str | None:
    """The secret's text, with an empty value treated as unset."""
    if value is None:
        return None
    return value.get_secret_value() or None
