"""Configuration from `ENGRAM_*` environment variables (documented in the README)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ENGRAM_", extra="ignore")

    data_dir: Path = Field(Path("./engram-data"), description="Where the embedded default keeps its files.")
    database_url: SecretStr | None = Field(
        None, description="postgresql://user:pass@host:port/db — use PostgreSQL instead of SQLite."
    )

    embedder: Literal["offline", "openai", "hashing"] = Field(
        "offline", description="offline = MiniLM ONNX (no network); openai = text-embedding-3-small."
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
    llm_reasoning_model: str | None = Field(None, description="Model for ❹ ❻ and the diary.")
    llm_fast_model: str | None = Field(None, description="Model for classification.")
    llm_timeout_s: float = Field(60.0, gt=0)
    llm_max_retries: int = Field(3, ge=0, le=10)

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
        "kill the process (ADR 0026).",
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

    command_retries: int = Field(
        5, ge=1, le=50, description="Attempts on an optimistic-concurrency conflict."
    )
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    log_format: Literal["console", "json"] = "console"

    @property
    def uses_postgres(self) -> bool:
        return self.database_url is not None
