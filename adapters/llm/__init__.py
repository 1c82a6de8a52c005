"""LLM adapters: Anthropic, OpenAI (or compatible), and `NoLLM` when no key is configured.

`AnthropicLLM` and `OpenAILLM` are imported on first use (their SDKs are large; see `factory`).
"""

from typing import TYPE_CHECKING, Any

from engram.adapters.llm.factory import DescribedLLM, LLMConfigError, Provider, build_llm
from engram.adapters.llm.none_llm import NoLLM
from engram.adapters.llm.strict_schema import to_strict_json_schema

if TYPE_CHECKING:
    from engram.adapters.llm.anthropic_llm import AnthropicLLM
    from engram.adapters.llm.openai_llm import OpenAILLM

__all__ = [
    "AnthropicLLM",
    "DescribedLLM",
    "LLMConfigError",
    "NoLLM",
    "OpenAILLM",
    "Provider",
    "build_llm",
    "to_strict_json_schema",
]


def __getattr__(name: str) -> Any:
    if name == "AnthropicLLM":
        from engram.adapters.llm.anthropic_llm import AnthropicLLM

        return AnthropicLLM
    if name == "OpenAILLM":
        from engram.adapters.llm.openai_llm import OpenAILLM

        return OpenAILLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
