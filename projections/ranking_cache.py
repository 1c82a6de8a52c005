"""What `query` ranks on, per being, held in this process and kept current from the memory view (ADR 0015).

At 100k nodes, reading the ranking columns of a query's ~200 candidates and their neighbours from
the view cost ~3 ms: a primary-key seek on a 36-character text key per row, and a seek per
neighbour. Held here, each is a dict lookup or a step along a list.

A being's rows are read whole once, in `seq` order (the order its memories were noted, ADR 0008).
Afterwards each use reads only the rows whose `position` (the log position of the last event that
changed them) is past the position the copy reflects, through the (being_id, position) index and in
the caller's read transaction. Positions only grow, so a copy is never older than the reader's
snapshot; it may be newer when another thread moved it on, as the vector index may be.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
from array import array
from collections import OrderedDict
from collections.abc import Collection, Iterable
from typing import Any
from uuid import UUID

from engram.projections.sql import ViewConnection

Row = dict[str, Any]

DEFAULT_MAX_NODES = 1_000_000
"""Nodes held over all beings (~200 bytes each) before the least recently read being is dropped."""


def _columns(dialect: str) -> str:
    """The columns read, with one parameter: '?' (a literal one would read as a placeholder).

    `asks`: the action holds a question mark, as `services.query_text.is_question` reads it."""
    asks = "instr(action, ?) > 0" if dialect == "sqlite" else "strpos(action, ?) > 0"
    return f"id, seq, status, importance, last_activated_at, when_json, actors, {asks} AS asks"


def _epoch(iso: str | None) -> float:
    return _dt.datetime.fromisoformat(iso).timestamp() if iso else 0.0


def actor_words(actors: str | None) -> frozenset[str]:
    """The words of a node's actors field (space-joined names), lower case: what a query's names are
    matched against (`BeingRanking.actors`, the `speaker` weight of `services/ranking.py`)."""
    return frozenset(w.lower() for w in (actors or "").split() if w)


def _plain_day(when_json: str | None) -> str | None:
    """The date of a `when` that is exactly one plain date (`["YYYY-MM-DD"]`, nearly all), else None."""
    if when_json is None or len(when_json) != 14:
        return None
    day = when_json[2:12]
    if when_json[:2] == '["' and when_json[12:] == '"]' and '"' not in day and "\\" not in day:
        return day
    return None


class BeingRanking:
    """One being's ranking columns, a slot per node in `seq` order."""

    __slots__ = (
        "_actor_sets",
        "_days",
        "_last_seq",
        "_statuses",
        "activated",
        "actors",
        "asks",
        "day",
        "ids",
        "importance",
        "position",
        "seq",
        "slot",
        "status",
        "table",
        "when",
    )

    def __init__(self, table: str, position: int, statuses: list[str]) -> None:
        self.table = table
        self.position = position
        self.slot: dict[str, int] = {}
        self.ids: list[str] = []
        self.seq = array("q")  # -1 for a node without one
        self.status = bytearray()  # index into `_statuses`
        self.importance = array("d")
        self.activated = array("d")  # last_activated_at, epoch seconds
        self.day: list[str | None] = []  # the plain date of `when`, when it is one
        self.when: dict[int, str] = {}  # `when_json` of the slots whose `when` is not one plain date
        self.asks = bytearray()
        self.actors: list[frozenset[str]] = []  # the words of each slot's actors, lower case
        self._statuses = statuses
        self._actor_sets: dict[str, frozenset[str]] = {}  # one set per distinct actors field
        self._days: dict[str, str] = {}  # one string per distinct day
        self._last_seq = -1

    def __len__(self) -> int:
        return len(self.ids)

    # -- keeping current ---------------------------------------------------------------------

    def _status_code(self, status: str) -> int:
        try:
            return self._statuses.index(status)
        except ValueError:
            self._statuses.append(status)
            return len(self._statuses) - 1

    def _put(self, slot: int, row: Row) -> None:
        self.status[slot] = self._status_code(str(row["status"]))
        self.importance[slot] = float(row["importance"])
        self.activated[slot] = _epoch(row["last_activated_at"])
        when_json = row["when_json"] or "[]"
        day = _plain_day(when_json)
        self.day[slot] = None if day is None else self._days.setdefault(day, day)
        if day is None:
            self.when[slot] = when_json
        else:
            self.when.pop(slot, None)
        self.asks[slot] = 1 if row["asks"] else 0
        actors = str(row.get("actors") or "")
        found = self._actor_sets.get(actors)
        if found is None:
            found = self._actor_sets[actors] = actor_words(actors)
        self.actors[slot] = found

    def apply(self, rows: Iterable[Row]) -> bool:
        """Take in rows read from the view (new ones in `seq` order); False when a new row would not
        come last in `seq` order, which a log read in order never gives (the copy is then read again).
        A node without a `seq` (none since schema 3) takes a slot but is nobody's neighbour."""
        for row in rows:
            node_id = str(row["id"])
            slot = self.slot.get(node_id)
            if slot is None:
                seq = -1 if row["seq"] is None else int(row["seq"])
                if 0 <= seq < self._last_seq:
                    return False
                self._last_seq = max(self._last_seq, seq)
                slot = len(self.ids)
                self.slot[node_id] = slot
                self.ids.append(node_id)
                self.seq.append(seq)
                self.status.append(0)
                self.importance.append(0.0)
                self.activated.append(0.0)
                self.day.append(None)
                self.asks.append(0)
                self.actors.append(frozenset())
            self._put(slot, row)
        return True

    # -- reading -----------------------------------------------------------------------------

    def row(self, slot: int) -> Row:
        """A ranking row: id, seq, status, importance, activated (epoch seconds), when_json, and what
        the ranking derives from them (`_day`, `_asks`) when it is known without decoding."""
        day = self.day[slot]
        seq = self.seq[slot]
        row: Row = {
            "id": self.ids[slot],
            "seq": None if seq < 0 else seq,
            "status": self._statuses[self.status[slot]],
            "importance": self.importance[slot],
            "activated": self.activated[slot],
            "_asks": bool(self.asks[slot]),
        }
        if day is None:
            row["when_json"] = self.when[slot]
        else:
            row["when_json"] = f'["{day}"]'
            row["_day"] = day
        return row

    def rows(self, ids: Iterable[UUID | str]) -> dict[str, Row]:
        """The ranking rows of those of `ids` that are this being's nodes (for inspection: `query`
        reads the columns by slot)."""
        return {node_id: self.row(slot) for node_id, slot in self.slots(ids).items()}

    def slots(self, ids: Iterable[UUID | str]) -> dict[str, int]:
        """The slots of those of `ids` that are this being's nodes."""
        get = self.slot.get
        out: dict[str, int] = {}
        for node_id in ids:
            key = str(node_id)
            slot = get(key)
            if slot is not None:
                out[key] = slot
        return out

    def when_of(self, slot: int) -> list[Any]:
        """The slot's `when`, decoded."""
        day = self.day[slot]
        return [day] if day is not None else list(json.loads(self.when[slot]))

    def around(self, ids: Iterable[str], radius: int, statuses: Collection[str]) -> dict[str, int]:
        """The slots of the nodes noted just before and after each of `ids`, up to `radius` each way
        among `statuses`."""
        wanted = {i for i, s in enumerate(self._statuses) if s in statuses}
        out: dict[str, int] = {}
        if radius < 1 or not wanted:
            return out
        last = len(self.ids) - 1
        seq, status = self.seq, self.status
        for node_id in ids:
            at = self.slot.get(node_id)
            if at is None or seq[at] < 0:
                continue
            for step in (-1, 1):
                found, slot = 0, at + step
                while found < radius and 0 <= slot <= last:
                    if status[slot] in wanted and seq[slot] >= 0:
                        out[self.ids[slot]] = slot
                        found += 1
                    slot += step
        return out


class RankingCache:
    """Every being's `BeingRanking` in this process, bounded by `max_nodes` (least recently read
    beings go first). Thread-safe: readers share a being's copy, and one thread at a time moves it
    on. Each being has a lock of its own, so reading one being's copy whole (~1 s at 100k nodes)
    holds up no query of another being."""

    def __init__(self, max_nodes: int = DEFAULT_MAX_NODES) -> None:
        self.max_nodes = max_nodes
        self._beings: OrderedDict[str, BeingRanking] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()  # guards `_beings` and `_locks`

    def _lock_for(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def current(
        self, conn: ViewConnection, dialect: str, nodes: str, being_id: UUID, position: int
    ) -> BeingRanking:
        """The being's copy, at least as new as `position`: the memory view's position in `conn`'s
        read transaction, whose active nodes table is `nodes`."""
        key = str(being_id)
        with self._lock_for(key):
            with self._lock:
                state = self._beings.get(key)
            if state is not None and state.table == nodes and state.position < position:
                changed = conn.query(
                    f"SELECT {_columns(dialect)} FROM {nodes} WHERE being_id = ? AND position > ?",
                    ["?", key, state.position],
                )
                changed.sort(key=lambda r: -1 if r["seq"] is None else int(r["seq"]))
                if state.apply(changed):
                    state.position = position
                else:
                    state = None
            if state is None or state.table != nodes:
                state = BeingRanking(nodes, position, ["active", "dying", "dead"])
                state.apply(
                    conn.query(
                        f"SELECT {_columns(dialect)} FROM {nodes} WHERE being_id = ? ORDER BY seq", ["?", key]
                    )
                )
            with self._lock:
                self._beings[key] = state
                self._beings.move_to_end(key)
                self._evict(keep=key)
            return state

    def _evict(self, keep: str) -> None:
        total = sum(len(s) for s in self._beings.values())
        for key in list(self._beings):
            if total <= self.max_nodes:
                return
            if key != keep:
                total -= len(self._beings.pop(key))
