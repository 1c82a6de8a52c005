"""Bytes per `MemoryNode.Embedded` event and decode speed: float32 transcoding vs JSON float lists.

    python scripts/bench_vectors_in_log.py [--json]

Prints one row per dimension (384: MiniLM, 1536: text-embedding-3-small).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from datetime import UTC, datetime
from uuid import uuid4

from eventsourcing.persistence import JSONTranscoder, Mapper

from adapters.eventstore.event_log import EventLog
from domain.embedding import Embedding
from domain.node import MemoryNode


def _mapper() -> Mapper:  # type: ignore[type-arg]
    transcoder = JSONTranscoder()
    EventLog.register_transcodings(EventLog.__new__(EventLog), transcoder)
    return Mapper(transcoder=transcoder)


def measure(dim: int, n: int = 2000) -> dict[str, float]:
    mapper = _mapper()
    rng = random.Random(dim)
    values = [rng.uniform(-1, 1) for _ in range(dim)]
    event = MemoryNode.Embedded(
        originator_id=uuid4(),
        originator_version=2,
        timestamp=datetime.now(UTC),
        being_id=uuid4(),
        embedding=Embedding.from_floats("model", values),
    )
    stored = mapper.to_stored_event(event)
    as_json = json.dumps(
        {"embedding": {"model": "model", "dim": dim, "values": list(event.embedding.floats())}}
    )
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            mapper.to_domain_event(stored)
        runs.append(n / (time.perf_counter() - t0))
    json_runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            json.loads(as_json)
        json_runs.append(n / (time.perf_counter() - t0))
    return {
        "dim": dim,
        "f32_bytes_per_event": len(stored.state),
        "json_list_bytes_per_event": len(as_json),
        "f32_decode_events_per_s": statistics.median(runs),
        "json_list_parse_only_per_s": statistics.median(json_runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(384), measure(1536)]
    meta = {
        "date": datetime.now(UTC).date().isoformat(),
        "machine": f"{platform.machine()} {platform.system()}",
        "python": platform.python_version(),
    }
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=2))
        return
    print(f"# vectors in the log — {meta['date']}, {meta['machine']}, Python {meta['python']}")
    print(
        "| dim | float32 event (bytes) | JSON list (bytes) | ratio | float32 decode (events/s, median of 5) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = r["json_list_bytes_per_event"] / r["f32_bytes_per_event"]
        print(
            f"| {r['dim']} | {r['f32_bytes_per_event']:,} | {r['json_list_bytes_per_event']:,} "
            f"| {ratio:.1f}× "
            f"| {r['f32_decode_events_per_s']:,.0f} |"
        )


if __name__ == "__main__":
    main()
