"""Bytes per `MemoryNode.Embedded` event and decode speed: float32 transcoding vs JSON float lists.

    engram bench event-size [--json] [--json-out FILE]

Prints one row per dimension (384: MiniLM, 1536: text-embedding-3-small).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

from eventsourcing.persistence import JSONTranscoder, Mapper

from bench.machine import finish, machine_info
from engram.adapters.eventstore.event_log import EventLog
from engram.domain.embedding import Embedding
from engram.domain.node import MemoryNode


def _mapper() -> Mapper:  # type: ignore[type-arg]
    transcoder = JSONTranscoder()
    EventLog.register_transcodings(EventLog.__new__(EventLog), transcoder)
    return Mapper(transcoder=transcoder)


def measure(dim: int, n: int = 2000) -> dict[str, float]:
    mapper = _mapper()
    rng = random.Random(dim)
    values = [rng.uniform(-1, 1) for _ in range(dim)]
    # The library's event base class hides the nested event's own fields from mypy.
    fields: dict[str, Any] = {
        "originator_id": uuid4(),
        "originator_version": 2,
        "timestamp": datetime.now(UTC),
        "being_id": uuid4(),
        "embedding": Embedding.from_floats("model", values),
    }
    event = MemoryNode.Embedded(**fields)
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
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON to this file")
    args = parser.parse_args()
    machine = machine_info()
    result: dict[str, Any] = {
        "benchmark": "event_size",
        "machine": machine,
        "rows": [measure(384), measure(1536)],
    }
    finish(result, args.json_out)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"vectors in the event log — {machine['summary']}")
    print(f"{'dim':>5} {'float32 event B':>16} {'JSON list B':>12} {'ratio':>6} {'decode events/s':>16}")
    for r in result["rows"]:
        ratio = r["json_list_bytes_per_event"] / r["f32_bytes_per_event"]
        print(
            f"{r['dim']:>5} {r['f32_bytes_per_event']:>16,} {r['json_list_bytes_per_event']:>12,} "
            f"{ratio:>5.1f}× {r['f32_decode_events_per_s']:>16,.0f}"
        )


if __name__ == "__main__":
    main()
