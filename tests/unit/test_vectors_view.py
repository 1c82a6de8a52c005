"""The vectors view opens its index once per process, also when a server's threads ask at once
(Qdrant Edge opens a shard in one place only: a second open fails as `vector_index_busy`)."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from engram.projections.vector_index import VectorIndex
from engram.projections.vectors import VectorsView


def test_the_index_opens_once_when_threads_ask_at_once() -> None:
    opened: list[object] = []

    def open_index() -> VectorIndex:
        time.sleep(0.05)  # opening takes a while (Edge loads its shards)
        index = object()
        opened.append(index)
        return cast(VectorIndex, index)

    view = VectorsView(open_index)
    start = threading.Barrier(8)
    seen: list[Any] = []

    def ask() -> None:
        start.wait()
        seen.append(view.index)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 1 and seen == opened * 8
