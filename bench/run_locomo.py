"""The LoCoMo retrieval benchmark: ingest through the public services, query, score.

Each conversation becomes one being; each turn one scene note (action = the text plus its image
caption, actors = [speaker], when = the session's date, source reference = the turn's `dia_id`);
a patrol without an LLM turns the notes into nodes; every question then runs through
`Reading.query(…, k, reactivate=False)` once per ranking profile, on the same ingested data.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import locomo
from bench.locomo import SCORED_CATEGORIES, Conversation
from bench.metrics import KS, QuestionScore, score, summarise
from bench.report import machine, now_utc
from engram.domain.errors import InvalidInput
from engram.services.bootstrap import Engram, bootstrap
from engram.services.commands import MAX_BATCH_NOTES, NoteInput
from engram.services.config import Settings
from engram.services.ranking import profile
from engram.services.reading import MAX_QUERY_CHARS

DEFAULT_PROFILES = ("lexical", "semantic", "default")
MANIFEST = "bench-manifest.json"
MANIFEST_FORMAT = 1
ADVERSARIAL = 5

Progress = Callable[[str, int, int], None]
"""(stage, done, total)."""


@dataclass(frozen=True)
class LocomoOptions:
    path: Path
    profiles: tuple[str, ...] = DEFAULT_PROFILES
    k: int = 10
    limit_conversations: int | None = None
    reuse_data: Path | None = None
    """Keep the ingested data here; a later run with the same file, limit and embedder only queries."""
    batch_size: int = 500
    links: bool = False
    """Build the A-MEM links after ingest (dream ticks) and run every profile also with `query`
    following them (`<profile>+links`), in the same run (ADR 0063)."""


@dataclass
class LocomoRun:
    report: dict[str, Any]
    questions: list[dict[str, Any]] = field(default_factory=list)
    """Per question: conversation, category, evidence, and per profile the ranked refs and scores."""


def being_name(conv: Conversation) -> str:
    return f"locomo-{conv.index + 1}-{conv.sample_id}"[:64]


def scene_text(turn: locomo.Turn) -> str:
    return json.dumps(
        {"action": turn.action(), "actors": [turn.speaker], "when": [turn.date]}, ensure_ascii=False
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _data_dir(reuse: Path | None) -> Iterator[Path]:
    if reuse is not None:
        reuse.mkdir(parents=True, exist_ok=True)
        yield reuse
        return
    path = Path(tempfile.mkdtemp(prefix="engram-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _ingest(
    engram: Engram, conversations: Sequence[Conversation], batch_size: int, progress: Progress | None
) -> dict[str, Any]:
    total = sum(len(c.turns) for c in conversations)
    noted = 0
    note_s = patrol_s = 0.0
    nodes = 0
    for conv in conversations:
        name = being_name(conv)
        engram.beings.register(name)
        items = [NoteInput(text=scene_text(t), source_ref=t.dia_id) for t in conv.turns]
        started = time.perf_counter()
        for i in range(0, len(items), batch_size):
            batch = items[i : i + batch_size]
            result = engram.notes.take_many(name, batch)
            if result.failed:
                raise InvalidInput(f"{name}: {len(result.failed)} turn(s) did not parse as scenes")
            noted += len(batch)
            if progress:
                progress("noting", noted, total)
        note_s += time.perf_counter() - started
        started = time.perf_counter()
        report = engram.patrol(name)
        patrol_s += time.perf_counter() - started
        nodes += sum(
            s.get("counts", {}).get("nodes_created", 0) for s in report.steps if s["step"] == "notes_to_nodes"
        )
    return {
        "notes": noted,
        "nodes": nodes,
        "noting_s": round(note_s, 2),
        "patrol_s": round(patrol_s, 2),
    }


def _manifest(
    options: LocomoOptions, engram: Engram, sha: str, conversations: Sequence[Conversation]
) -> dict[str, Any]:
    return {
        "format": MANIFEST_FORMAT,
        "source_sha256": sha,
        "limit_conversations": options.limit_conversations,
        "embedder": engram.settings.embedder,
        "embedding_model": engram.embedder.model_id,
        "beings": [being_name(c) for c in conversations],
    }


def _prepare(
    options: LocomoOptions,
    engram: Engram,
    sha: str,
    conversations: Sequence[Conversation],
    progress: Progress | None,
) -> dict[str, Any]:
    """Ingest, or (with --reuse-data) check that the data dir holds exactly this ingest."""
    wanted = _manifest(options, engram, sha, conversations)
    path = engram.settings.data_dir / MANIFEST
    if path.exists():
        found = json.loads(path.read_text(encoding="utf-8"))
        ingest = found.pop("ingest", {})
        if found != wanted:
            differs = sorted(k for k in wanted if found.get(k) != wanted[k])
            raise InvalidInput(
                f"{engram.settings.data_dir} holds another ingest (differs in {', '.join(differs)}); "
                "use another --reuse-data directory"
            )
        return {**ingest, "reused": True}
    started = time.perf_counter()
    ingest = _ingest(engram, conversations, options.batch_size, progress)
    engram.views.ensure()
    ingest["total_s"] = round(time.perf_counter() - started, 2)
    path.write_text(json.dumps({**wanted, "ingest": ingest}, indent=2), encoding="utf-8")
    return {**ingest, "reused": False}


def _group_key(category: int | str) -> str:
    return str(category)


def run(
    options: LocomoOptions,
    base: Settings | None = None,
    *,
    progress: Progress | None = None,
    engram_factory: Callable[[Settings], Engram] = bootstrap,
) -> LocomoRun:
    """Ingest `options.path` into a fresh (or reused) data dir, query every question per profile, score."""
    for name in options.profiles:
        profile(name)  # unknown names fail before any work
    if not options.profiles:
        raise InvalidInput("give at least one profile")
    if not 1 <= options.batch_size <= MAX_BATCH_NOTES:
        raise InvalidInput(f"the batch size is between 1 and {MAX_BATCH_NOTES}")
    conversations = locomo.load(options.path, options.limit_conversations)
    if not conversations:
        raise InvalidInput(f"{options.path} holds no conversations")
    sha = _sha256(options.path)
    base = base or Settings()
    reuse = options.reuse_data
    if reuse is not None and reuse.exists():
        if not reuse.is_dir():
            raise InvalidInput(f"--reuse-data {reuse} is not a directory")
        if not (reuse / MANIFEST).exists() and any(reuse.iterdir()):
            raise InvalidInput(f"{reuse} holds data but no finished bench ingest; give an empty directory")
    with _data_dir(reuse) as data_dir:
        settings = base.model_copy(
            update={"data_dir": data_dir, "llm": "none", "database_url": None, "qdrant_url": None}
        )
        engram = engram_factory(settings)
        try:
            ingest = _prepare(options, engram, sha, conversations, progress)
            if options.links:
                ingest["dreaming"] = _dream(engram, conversations, progress)
            model = engram.embedder.model_id
            details, per_profile = _query_all(engram, options, conversations, progress)
        finally:
            engram.close()
    evidence = locomo.EvidenceCounts()
    for conv in conversations:
        evidence.add(conv.evidence)
    report = {
        "benchmark": "locomo",
        "date": now_utc(),
        "machine": machine(),
        "dataset": {
            "path": str(options.path),
            "sha256": sha,
            "conversations": len(conversations),
            "sample_ids": [c.sample_id for c in conversations],
            "turns": sum(len(c.turns) for c in conversations),
            "skipped_turns": sum(c.skipped_turns for c in conversations),
            "undated_sessions": sum(c.undated_sessions for c in conversations),
            "questions": sum(len(c.questions) for c in conversations),
            "skipped_questions": sum(c.skipped_questions for c in conversations),
            "categories": {
                _group_key(k): v for k, v in sorted(locomo.category_counts(conversations).items(), key=_order)
            },
            "evidence": evidence.as_dict(),
            "unscored_questions": _unscored(conversations),
        },
        "config": {
            "k": options.k,
            "profiles": list(options.profiles),
            "embedder": settings.embedder,
            "embedding_model": model,
            "llm": "none",
            "storage": "SQLite + Qdrant Edge",
            "data_dir": str(options.reuse_data) if options.reuse_data else "temporary",
            "batch_size": options.batch_size,
            "links": options.links,
        },
        "ingest": ingest,
        "profiles": per_profile,
    }
    return LocomoRun(report=report, questions=details)


def _dream(
    engram: Engram, conversations: Sequence[Conversation], progress: Progress | None
) -> dict[str, Any]:
    """Dream ticks for every being until linking is done: the links `query` may follow."""
    started = time.perf_counter()
    ticks = 0
    for done, conv in enumerate(conversations, 1):
        ticks += engram.sleep.dream(being_name(conv)).ticks
        if progress:
            progress("dreaming", done, len(conversations))
    engram.views.ensure()
    per_memory = sorted(engram.views.links.link_counts())
    links = sum(per_memory) // 2
    return {
        "dream_s": round(time.perf_counter() - started, 2),
        "ticks": ticks,
        "links": links,
        "memories": len(per_memory),
        "links_per_memory": _distribution(per_memory),
    }


def _distribution(values: Sequence[int]) -> dict[str, float]:
    if not values:
        return {}

    def at(q: float) -> int:
        return values[min(len(values) - 1, int(q * len(values)))]

    return {
        "mean": round(sum(values) / len(values), 2),
        "p50": at(0.5),
        "p90": at(0.9),
        "p99": at(0.99),
        "max": values[-1],
        "none": round(sum(1 for v in values if v == 0) / len(values), 4),
    }


def _order(item: tuple[int | str, Any]) -> tuple[int, str]:
    key = item[0]
    return (0, f"{key:08d}") if isinstance(key, int) else (1, key)


def _unscored(conversations: Sequence[Conversation]) -> dict[str, int]:
    out: dict[str, int] = {}
    for conv in conversations:
        for q in conv.questions:
            if not q.evidence:
                out[_group_key(q.category)] = out.get(_group_key(q.category), 0) + 1
    return out


def _query_all(
    engram: Engram, options: LocomoOptions, conversations: Sequence[Conversation], progress: Progress | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    details: list[dict[str, Any]] = [
        {
            "conversation": conv.sample_id,
            "question_index": q.index,
            "question": q.text,
            "category": q.category,
            "evidence": list(q.evidence),
            "raw_evidence": list(q.raw_evidence),
            "profiles": {},
        }
        for conv in conversations
        for q in conv.questions
    ]
    pairs = [(conv, q) for conv in conversations for q in conv.questions]
    per_profile: dict[str, Any] = {}
    variants = [(name, False) for name in options.profiles]
    if options.links:
        variants += [(name, True) for name in options.profiles]
    for name, links in variants:
        key = f"{name}+links" if links else name
        groups: dict[int | str, list[QuestionScore]] = {}
        latencies: dict[int | str, list[float]] = {}
        all_latencies: list[float] = []
        for done, ((conv, q), detail) in enumerate(zip(pairs, details, strict=True), 1):
            started = time.perf_counter()
            found = engram.reading.query(
                being_name(conv),
                q.text[:MAX_QUERY_CHARS],
                k=options.k,
                profile_name=name,
                reactivate=False,
                links=links,
            )
            ms = (time.perf_counter() - started) * 1000
            all_latencies.append(ms)
            refs = [n.source_ref for n in found.nodes]
            entry: dict[str, Any] = {"refs": refs, "ms": round(ms, 2)}
            if q.evidence:
                s = score(q.evidence, refs, [k for k in KS if k <= options.k])
                groups.setdefault(q.category, []).append(s)
                latencies.setdefault(q.category, []).append(ms)
                entry["recall"] = s.recall
            detail["profiles"][key] = entry
            if progress:
                progress(f"querying ({key})", done, len(pairs))
        ks = [k for k in KS if k <= options.k]
        categories = {
            _group_key(c): {"label": locomo.category_label(c), **summarise(groups[c], latencies[c], ks)}
            for c, _ in sorted(groups.items(), key=_order)
        }
        scored = [c for c in groups if c in SCORED_CATEGORIES]
        overall = summarise(
            [s for c in scored for s in groups[c]], [ms for c in scored for ms in latencies[c]], ks
        )
        per_profile[key] = {
            "categories": categories,
            "overall": {"label": "overall 1-4", **overall},
            "adversarial": categories.get(_group_key(ADVERSARIAL)),
            "latency_ms": summarise([], all_latencies, ks)["latency_ms"],
        }
    return details, per_profile
