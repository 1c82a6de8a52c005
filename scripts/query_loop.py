"""The read path's latency by profile, in one process: a measurement for old-against-new comparisons.

    PYTHONPATH=. .venv/bin/python scripts/query_loop.py LABEL [--plain-edge]

Builds one being of 10,000 nodes with `bench.recall_bench`'s corpus (the offline MiniLM embedder), then
times 200 `query` calls × 3 per profile (lexical, semantic, default; the vector given, no
reactivation) and prints the p50 of each: wall time, and the process's CPU time per call (all its
threads), which other processes' load on the machine moves much less than the wall time. Run it
alternately in two checkouts, several processes per side: on the 2-core VM one code's wall p50 moves
±25 % from process to process. It also runs in checkouts
from before the package rename (`adapters.bench`, bare layer imports). `--plain-edge`: a Qdrant Edge
index of this process only, instead of the shared one (ADR 0036). docs/bench/renovation-notes.md
quotes its figures.
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def _modules() -> tuple[Any, Any, Any, Any]:
    """recall_bench, EdgeVectorIndex, bootstrap, Settings, as this checkout names them (before the
    package rename: `adapters.bench`, bare layer modules)."""
    try:
        importlib.import_module("engram.services.bootstrap")
        layer, bench = "engram.", "bench.recall_bench"
    except ImportError:
        layer, bench = "", "adapters.bench.recall_bench"
    return (
        importlib.import_module(bench),
        importlib.import_module(f"{layer}adapters.vectors").EdgeVectorIndex,
        importlib.import_module(f"{layer}services.bootstrap").bootstrap,
        importlib.import_module(f"{layer}services.config").Settings,
    )


def main() -> None:
    rb, EdgeVectorIndex, bootstrap, Settings = _modules()
    label = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    plain = "--plain-edge" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        texts, queries = rb.corpus(2000, 200, 7)
        with bootstrap(Settings(data_dir=root / "embed", embedder="offline", llm="none")) as e:
            vectors = rb.embed_all(e, [t[0] for t in texts])
            qvecs = rb.embed_all(e, queries)
        extra: dict[str, Any] = (
            {"vector_index": lambda: EdgeVectorIndex(root / "d" / "vectors")} if plain else {}
        )
        settings = Settings(data_dir=root / "d", embedder="offline", llm="none", log_level="warning")
        engram = bootstrap(settings, **extra)
        try:
            rb.build_being(engram, "being-0", 10000, texts, vectors, np.random.default_rng(10000))
            engram.views.ensure()
            for profile in ("lexical", "semantic", "default"):
                times, cpu = [], []
                for _ in range(3):
                    for text, vector in zip(queries, qvecs, strict=True):
                        started, started_cpu = time.perf_counter(), time.process_time()
                        engram.reading.query(
                            "being-0", text, 10, profile_name=profile, reactivate=False, vector=vector
                        )
                        times.append((time.perf_counter() - started) * 1000)
                        cpu.append((time.process_time() - started_cpu) * 1000)
                sys.stdout.write(
                    f"{label} {profile} p50 ms {statistics.median(times):.3f} "
                    f"cpu p50 ms {statistics.median(cpu):.3f} cpu mean ms {statistics.fmean(cpu):.3f}\n"
                )
        finally:
            engram.close()


if __name__ == "__main__":
    main()
