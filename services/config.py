"""Configuration from `ENGRAM_*` environment variables (documented in the README).

`load_settings` is how every edge (CLI, `engram serve`, `engram worker`, `engram mcp`, `engram.open`)
reads them: a bad value, or a provider chosen without what it needs, is a `ConfigurationError` with one
line per problem (the variable, what is wrong with its value, the accepted values), never a pydantic
traceback; `unknown_variables` names the `ENGRAM_*` variables no setting reads, with the closest known
name.
"""

from __future__ import annotations

import difflib
import os
import types
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin
from urllib.parse import urlsplit

import annotated_types
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo

from engram.domain.errors import InvalidInput

DEFAULT_MAX_ANSWER_KIB = 64
"""`ENGRAM_LLM_MAX_ANSWER_KIB`: 4,096 output tokens are at most ~24 KiB even in scripts of 6 bytes a token.
Here, not beside the cap in `llm_answers.py`: the configuration imports nothing of the services'
ports, so an adapter that reads it (the embedders' errors) loads no event store (`bench memory`'s mem0
side runs them without one)."""

POSTGRES_SCHEMES = ("postgres", "postgresql", "postgresql+psycopg")


class EnvSettings(BaseModel):
    """Settings read from environment variables: each field from `<env_prefix><FIELD>` (any case) or
    from the names of its `validation_alias`; keywords given to the constructor win.

    What pydantic-settings' `BaseSettings` did for the scalar fields Engram has, without importing it:
    that import was about a tenth of every one-shot `engram` command's wall time (ADR 0051).
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    env_prefix: ClassVar[str] = ""

    def __init__(self, **values: Any) -> None:
        environ = {name.upper(): value for name, value in os.environ.items()}
        from_env: dict[str, Any] = {}
        for field in type(self).model_fields:
            if field in values:
                continue
            for name in _variables(type(self), field):
                if name.upper() in environ:
                    from_env[field] = environ[name.upper()]
                    break
        super().__init__(**from_env, **values)


class Settings(EnvSettings):
    env_prefix: ClassVar[str] = "ENGRAM_"

    data_dir: Path = Field(Path("./engram-data"), description="Where the embedded default keeps its files.")
    database_url: SecretStr | None = Field(
        None, description="postgresql://user:pass@host:port/db — use PostgreSQL instead of SQLite."
    )

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        text = value.get_secret_value() if value is not None else ""
        if text and urlsplit(text).scheme not in POSTGRES_SCHEMES:
            raise ValueError("not a postgresql:// URL")
        return value if text else None

    embedder: Literal["offline", "openai", "hashing", "e5-small"] = Field(
        "offline",
        description="offline = MiniLM ONNX (no network); e5-small = multilingual-e5-small 4-bit "
        "(no network, extra `e5`, ADR 0080); openai = text-embedding-3-small.",
    )
    embedding_model: str = Field("text-embedding-3-small", description="Model name for the openai embedder.")
    embedding_batch_size: int = Field(256, ge=1, le=2048)

    openai_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ENGRAM_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        None, validation_alias=AliasChoices("ENGRAM_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ENGRAM_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        None, validation_alias=AliasChoices("ENGRAM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL")
    )

    llm: Literal["auto", "anthropic", "openai", "none"] = Field(
        "auto", description="auto = Anthropic if its key is set, else OpenAI if its key is set, else none."
    )
    llm_reasoning_model: str | None = Field(
        None, description="Model for consolidating duplicates, splitting clusters and the diary."
    )
    llm_fast_model: str | None = Field(None, description="Model for classifying notes.")
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(3, ge=0, le=10)
    llm_max_answer_kib: int = Field(
        DEFAULT_MAX_ANSWER_KIB,
        ge=1,
        le=1024,
        description="The largest LLM answer patrol parses and records; a longer one is a recorded rejection "
        "that keeps only its first bytes (ADR 0026).",
    )

    qdrant_url: str | None = Field(
        None, description="A Qdrant server; unset = Qdrant Edge embedded under data_dir."
    )
    qdrant_api_key: SecretStr | None = None

    projection_batch_size: int = Field(500, ge=1, le=10_000, description="Events per view transaction.")
    ranking_cache_nodes: int = Field(
        1_000_000,
        ge=0,
        description="Nodes whose ranking columns `query` keeps in memory, over all beings (~200 bytes "
        "each; ADR 0015). Least recently queried beings are dropped first.",
    )
    query_links: bool = Field(
        False,
        description="`query` and `recall` also return memories linked (A-MEM, cosine >= 0.7) to their top "
        "3 hits, 2 each (ADR 0063; measured off by default).",
    )
    view_cache_mib: int = Field(
        256,
        ge=1,
        description="SQLite: the page cache of each of a view's cached connections, allocated as pages are "
        "read; it keeps the hot pages of the views in the process (ADR 0023).",
    )
    view_cached_connections: int = Field(
        4,
        ge=0,
        description="SQLite: connections per view that keep that cache; requests beyond them read with "
        "SQLite's default 2 MB cache.",
    )
    sqlite_heap_mib: int = Field(
        256,
        ge=1,
        description="SQLite: the memory of every connection of the process together (page caches "
        "included); past it, a connection's page cache reuses its oldest pages instead of growing "
        "(ADR 0028).",
    )
    aggregate_cache_size: int = Field(
        10_000,
        ge=0,
        description="Aggregates (nodes, beings, …) whose latest state a process keeps, so loading one "
        "again reads only its newer events (~4 KB each with a 384-d vector; 0 = off; ADR 0022).",
    )
    worker_poll_interval_s: float = Field(0.2, gt=0, description="How often the worker looks for new events.")
    consistency_timeout_s: float = Field(
        10.0, gt=0, description="How long a read waits for the views to reach the caller's writes."
    )
    vector_search_threads: int = Field(
        1,
        ge=1,
        le=64,
        description="Threads each Qdrant Edge shard searches its segments with (ADR 0019). One is the "
        "fastest where requests already run side by side; more helps a shard of many large segments on "
        "an idle machine.",
    )
    vector_disk_reserve_mib: int = Field(
        64,
        ge=0,
        description="Qdrant Edge: the free disk space every write to the embedded vector index must leave, "
        "else it is refused as storage_full; a write into its memory-mapped files on a full disk would "
        "kill the process (ADR 0030).",
    )
    vector_optimize_min_points: int = Field(
        10_000,
        ge=1,
        description="The worker builds a node collection's HNSW index once it holds this many new points.",
    )
    vector_maintenance_interval_s: float = Field(
        60.0, gt=0, description="How often the worker checks whether a node collection is due (ADR 0009)."
    )
    fulltext_merge_min_rows: int = Field(
        1_000,
        ge=1,
        description="SQLite: the worker merges a being's full-text index into one b-tree once it holds this "
        "many new rows, and a tenth more than at its last merge (ADR 0020).",
    )
    fulltext_maintenance_interval_s: float = Field(
        60.0, gt=0, description="How often the worker checks whether a being's full-text index is due."
    )

    note_sweep_interval_s: float = Field(
        60.0, gt=0, description="How often the worker records the expiry of notes past their expires_at."
    )
    note_embed_interval_s: float = Field(
        30.0,
        ge=0,
        description="How often the worker embeds new notes for `pack --query` (0: never; the pack's "
        "first query then embeds them).",
    )
    note_maintenance_interval_s: float = Field(
        3600.0,
        gt=0,
        description="How often the worker merges volatile notes without ttl_days older than 7 days "
        "(ADR 0048).",
    )

    # Conversations (issue #10, ADR 0052)
    session_gap_minutes: float = Field(
        30.0,
        gt=0,
        description="A session closes when a message comes this long after the last one (by the "
        "messages' times), or when no message arrived for this long (the worker's clock).",
    )
    conversation_interval_s: float = Field(
        5.0,
        ge=0,
        description="How often the worker closes idle sessions and writes the summaries that are due "
        "(0: never; `engram sessions summarize` does it on demand).",
    )
    extraction_interval_s: float = Field(
        5.0,
        ge=0,
        description="How often the worker extracts facts from the messages not read yet (0: never; "
        "`engram facts extract` does it on demand).",
    )
    sleep_interval_s: float = Field(
        1.0,
        ge=0,
        description="How often the worker looks for beings whose sleep tick is due (each being ticks at "
        "its schedule's rate; 0: never, `engram dream` runs ticks on demand).",
    )
    journal_dir: Path | None = Field(
        None, description="Where the daily journals and MEMORY.md are written (default: <data dir>/journals)."
    )
    journal_interval_s: float = Field(
        300.0,
        ge=0,
        description="How often the worker refreshes a being's journals (at most; 0: never, "
        "`engram journal refresh` does it on demand).",
    )

    patrol_min_notes: int = Field(
        20, ge=1, description="The worker patrols a being with this many new scene notes."
    )
    patrol_interval_minutes: float = Field(
        60.0, gt=0, description="…or when this long has passed since its last patrol and any note is new."
    )
    sleep_patrol_interval_minutes: float = Field(
        180.0,
        gt=0,
        description="Inside a being's sleep window: one patrol per this interval if any note is new.",
    )
    patrol_check_s: float = Field(30.0, gt=0, description="How often the worker looks for beings to patrol.")
    auto_patrol: bool = Field(True, description="Whether `engram worker` patrols beings by itself.")

    # Dreaming: pruning and context compaction (issue #12, ADRs 0066, 0067)
    prune_after_days: float = Field(
        30.0,
        gt=0,
        le=36_525,
        description="Dreaming archives a being's low-importance facts untouched for this many days.",
    )
    prune_max_poignancy: int = Field(
        1,
        ge=1,
        le=10,
        description="…whose importance on the 1-10 scale is at most this (1: a fact of importance 0).",
    )
    context_token_budget: int = Field(
        8000,
        ge=200,
        le=2_000_000,
        description="A session's history is compacted past 70% of this many tokens while the being "
        "sleeps, past 80% while it is awake (tokens estimated offline, ADR 0067).",
    )

    command_retries: int = Field(
        5, ge=1, le=50, description="Attempts on an optimistic-concurrency conflict."
    )
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    log_format: Literal["console", "json"] = "console"

    @property
    def uses_postgres(self) -> bool:
        return self.database_url is not None

    def openai_key(self) -> str | None:
        """The key for the OpenAI client: the configured one, else a placeholder when a base URL names
        an OpenAI-compatible server (vLLM, Ollama, …) that needs none; None when neither is set.

        The client refuses to start without some key string; the placeholder is no secret and is sent
        only to the server the base URL names."""
        key = _secret_text(self.openai_api_key)
        if key:
            return key
        return KEYLESS_PLACEHOLDER if self.openai_base_url else None


KEYLESS_PLACEHOLDER = "engram-keyless"
"""What the OpenAI client is given as its key for a keyless compatible server (`ENGRAM_OPENAI_BASE_URL`)."""

TOOL_VARIABLES = frozenset({"ENGRAM_TEST_DATABASE_URL", "ENGRAM_TEST_PG_PORT"})
"""`ENGRAM_*` variables read by the test suite and its scripts, not by Engram."""

SECTION_PREFIXES = ("ENGRAM_HTTP_",)
"""Variables of another edge's settings (`engram serve`): checked only where that edge loads them."""


class ConfigurationError(InvalidInput):
    """Settings that cannot work: each of `problems` is one line naming the variable."""

    code = "invalid_configuration"

    def __init__(self, problems: list[str] | str) -> None:
        problems = [problems] if isinstance(problems, str) else problems
        super().__init__("; ".join(problems), problems=problems)
        self.problems = problems


S = TypeVar("S", bound=EnvSettings)


def load_settings(*, embedder_given: bool = False, llm_given: bool = False, **overrides: Any) -> Settings:
    """`Settings` from the environment, `overrides` (field names) winning.

    Raises `ConfigurationError` listing every problem at once: a value of the wrong type or out of
    range, an unknown keyword, a provider chosen without its key (unless the caller brings its own
    embedder or LLM object: `embedder_given`, `llm_given`).
    """
    settings = load_model_settings(Settings, **overrides)
    problems = _missing_keys(settings, embedder_given=embedder_given, llm_given=llm_given)
    if problems:
        raise ConfigurationError(problems)
    return settings


def load_model_settings(model: type[S], /, **overrides: Any) -> S:
    """Any settings model (`Settings`, the HTTP edge's) from the environment and `overrides`, with the
    same `ConfigurationError` for bad values and unknown keywords."""
    problems = [_unknown_keyword(model, name) for name in overrides if name not in model.model_fields]
    known = {k: v for k, v in overrides.items() if k in model.model_fields}
    try:
        settings = model(**known)
    except ValidationError as exc:
        raise ConfigurationError(
            problems + [_problem(model, err, set(known)) for err in exc.errors(include_url=False)]
        ) from None
    if problems:
        raise ConfigurationError(problems)
    return settings


def unknown_variables(
    environ: Mapping[str, str] | None = None, models: Iterable[type[EnvSettings]] = (Settings,)
) -> list[str]:
    """A warning line for each `ENGRAM_*` variable that none of `models` reads, with the closest known
    name. Variables of another edge's section (`ENGRAM_HTTP_*`) count only when its model is given."""
    environ = os.environ if environ is None else environ
    models = list(models)
    known = set(TOOL_VARIABLES).union(*(variable_names(m) for m in models))
    checked = [p for p in SECTION_PREFIXES if any(_prefix(m) == p for m in models)]
    out = []
    for name in sorted(environ):
        if not name.startswith("ENGRAM_") or name in known:
            continue
        if name.startswith(SECTION_PREFIXES) and not name.startswith(tuple(checked)):
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else "; see the README's configuration table"
        out.append(f"{name} is not a setting Engram reads, so it is ignored{hint}")
    return out


def variable_names(model: type[EnvSettings]) -> set[str]:
    """Every environment variable that sets a field of `model`."""
    return {name for field in model.model_fields for name in _variables(model, field)}


def _prefix(model: type[EnvSettings]) -> str:
    return model.env_prefix


def _variables(model: type[EnvSettings], field: str) -> list[str]:
    alias = model.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    if isinstance(alias, str):
        return [alias]
    return [(_prefix(model) + field).upper()]


def _name(model: type[EnvSettings], field: str, from_keyword: bool) -> str:
    if from_keyword:
        return field
    first, *others = _variables(model, field)
    return f"{first} (or {', '.join(others)})" if others else first


def _unknown_keyword(model: type[EnvSettings], name: str) -> str:
    close = difflib.get_close_matches(name, list(model.model_fields), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}=?" if close else ""
    return f"{name}= is not a setting{hint}"


def _problem(model: type[EnvSettings], err: Mapping[str, Any], keywords: Collection[str]) -> str:
    loc = err.get("loc") or ("?",)
    field = str(loc[0])
    if field not in model.model_fields:  # an alias names the field in the error
        field = next((f for f in model.model_fields if str(loc[0]) in _variables(model, f)), field)
    info = model.model_fields.get(field)
    name = _name(model, field, field in keywords) if info is not None else field
    value = err.get("input")
    secret = info is not None and _is_secret(info.annotation)
    shown = "" if secret or isinstance(value, dict) else f"={value!r}"
    if field in keywords and not shown:
        name += "="
    accepted = f"; accepted: {_accepted(info, field)}" if info is not None else ""
    return f"{name}{shown}: {_reason(err)}{accepted}"


def _reason(err: Mapping[str, Any]) -> str:
    kind = str(err.get("type", ""))
    reasons = {
        "literal_error": "not one of the accepted values",
        "int_parsing": "not a whole number",
        "int_from_float": "not a whole number",
        "float_parsing": "not a number",
        "bool_parsing": "not a yes/no value",
        "greater_than_equal": "too small",
        "greater_than": "too small",
        "less_than_equal": "too large",
        "less_than": "too large",
        "missing": "missing",
    }
    if kind == "value_error":  # a validator of ours: its message is the reason
        return str((err.get("ctx") or {}).get("error", "not valid"))
    return reasons.get(kind, str(err.get("msg", "not valid")).lower())


ACCEPTED = {"database_url": "postgresql://user:password@host:port/db, optionally with ?schema=NAME"}
"""What a field takes, where its type does not say it."""


def _accepted(info: FieldInfo, field: str) -> str:
    if field in ACCEPTED:
        return ACCEPTED[field]
    annotation = _without_none(info.annotation)
    if get_origin(annotation) is Literal:
        return ", ".join(str(a) for a in get_args(annotation))
    if annotation is bool:
        return "true or false (also 1/0, yes/no, on/off)"
    if annotation in (int, float):
        kind = "a whole number" if annotation is int else "a number"
        return kind + _bounds(info)
    if annotation is Path:
        return "a directory path"
    if _is_secret(annotation):
        return "a non-empty secret"
    return "text"


def _bounds(info: FieldInfo) -> str:
    low = high = ""
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            low = f"{m.ge}"
        elif isinstance(m, annotated_types.Gt):
            low = f"above {m.gt}"
        elif isinstance(m, annotated_types.Le):
            high = f"{m.le}"
        elif isinstance(m, annotated_types.Lt):
            high = f"below {m.lt}"
    if low and high:
        return f" from {low} to {high}" if not low.startswith("above") else f" {low} and up to {high}"
    if low:
        return f" {low}" if low.startswith("above") else f" from {low} up"
    if high:
        return f" up to {high}"
    return ""


def _without_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def _is_secret(annotation: Any) -> bool:
    return _without_none(annotation) is SecretStr


def _secret_text(value: SecretStr | None) -> str | None:
    return value.get_secret_value() or None if value is not None else None


def _missing_keys(settings: Settings, *, embedder_given: bool, llm_given: bool) -> list[str]:
    problems = []
    openai = (
        "set ENGRAM_OPENAI_API_KEY (or OPENAI_API_KEY), or ENGRAM_OPENAI_BASE_URL for a compatible server"
    )
    if settings.llm == "openai" and not llm_given and settings.openai_key() is None:
        problems.append(f"ENGRAM_LLM=openai: no OpenAI key; {openai} that needs none; or ENGRAM_LLM=none")
    if settings.llm == "anthropic" and not llm_given and not _secret_text(settings.anthropic_api_key):
        problems.append(
            "ENGRAM_LLM=anthropic: no Anthropic key; set ENGRAM_ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY), "
            "or choose ENGRAM_LLM=openai or none"
        )
    if settings.embedder == "openai" and not embedder_given and settings.openai_key() is None:
        problems.append(f"ENGRAM_EMBEDDER=openai: no OpenAI key; {openai}; or ENGRAM_EMBEDDER=offline")
    return problems
