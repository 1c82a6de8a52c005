"""LLM adapters: Anthropic, OpenAI (or compatible), and `NoLLM` when no key is configured."""

from adapters.llm.anthropic_llm import AnthropicLLM
from adapters.llm.factory import DescribedLLM, LLMConfigError, Provider, build_llm
from adapters.llm.none_llm import NoLLM
from adapters.llm.openai_llm import OpenAILLM
from adapters.llm.strict_schema import to_strict_json_schema

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
