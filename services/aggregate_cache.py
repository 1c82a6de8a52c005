"""Aggregates this process read or saved lately, so that loading one again reads only its newer events.

A command loads its aggregates from the log: the latest snapshot of each and the events after it, all
decoded and applied. A recall reactivates nodes a recent recall often reached too, and every command
of a being reads the same being: at 100k nodes, loading the being and three nodes took ~1 ms of a
recall's ~4 (ADR 0022). With the state of each kept here, at its version, a load asks the log only for
the events after that version (one query for all ids, as before) and usually gets none.

Correctness does not depend on the cache being current: the log is still read for every load, so a
write by another process (or thread) is applied on top, and a save that lost a race still fails on the
log's unique version. An entry is never handed out: callers get a fork they may change freely.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from copy import deepcopy
from datetime import datetime
from enum import Enum
from typing import Any
from uuid import UUID

from engram.domain.embedding import Embedding

_SHARED = (str, int, float, bool, type(None), bytes, UUID, datetime, Enum, Embedding, frozenset)
"""Value types a fork may share with the cached aggregate: nothing changes them in place."""


_SHARED_EXACT = frozenset(_SHARED)


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind in _SHARED_EXACT:
        return value
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if isinstance(value, _SHARED):  # a subclass: an enum member, a datetime with a tzinfo subclass…
        return value
    return deepcopy(value)


def fork(aggregate: Any) -> Any:
    """A copy of `aggregate` that shares its immutable values and copies its dicts and lists (which a
    mutator might change in place) all the way down.

    `copy.deepcopy` took ~78 µs a node: it copies the embedding, datetimes and ids one by one and
    keeps a memo of everything it copied.
    """
    new = object.__new__(type(aggregate))
    state = {k: _copy(v) for k, v in vars(aggregate).items()}
    state["_pending_events"] = []
    new.__dict__.update(state)
    return new


class AggregateCache:
    """A bounded map id → aggregate, least recently used dropped first; safe across threads.

    Entries are forks, never changed after they are put: a reader forks again before changing one.
    """

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[UUID, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, ids: list[UUID]) -> dict[UUID, Any]:
        """The cached entries of `ids` (not forked: read them, or fork before changing them)."""
        if self.max_entries <= 0:
            return {}
        found: dict[UUID, Any] = {}
        with self._lock:
            for i in ids:
                entry = self._entries.get(i)
                if entry is not None:
                    self._entries.move_to_end(i)
                    found[i] = entry
        return found

    def put(self, aggregates: Sequence[Any]) -> None:
        """Keep forks of `aggregates`. An entry only moves forward: when a load read an older state
        than another thread's save put, the newer one stays."""
        if self.max_entries <= 0:
            return
        entries = [fork(a) for a in aggregates]
        with self._lock:
            for entry in entries:
                held = self._entries.get(entry.id)
                if held is None or held.version <= entry.version:
                    self._entries[entry.id] = entry
                    self._entries.move_to_end(entry.id)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def refresh(self, aggregates: Sequence[Any]) -> None:
        """Keep the new state of those `aggregates` the cache holds (after a save); others stay out:
        a command's new aggregates enter on their first load, so a batch of new notes costs no forks."""
        if self.max_entries <= 0:
            return
        with self._lock:
            held = [a for a in aggregates if a.id in self._entries]
        if held:
            self.put(held)

    def drop(self, ids: list[UUID]) -> None:
        with self._lock:
            for i in ids:
                self._entries.pop(i, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
