"""The rows of a view's tables as a batch reads and writes them.

A batch of events is applied to rows held in memory: the rows it touches are loaded with one query
per table, handlers change them as plain dicts, and the changed rows are written back with one
`executemany` per table and kind of write. That keeps a batch to a handful of round trips on
PostgreSQL and the handlers free of SQL.

Two kinds of write. A row changed only in its table's `narrow` columns gets an UPDATE of those that
differ from the row as read (`write_narrow`); rows put whole (new rows, rewritten text) are upserted
(`flush`). A rebuild fills a generation that starts empty and that only it writes, so its caches can
be *complete*: they outlive a batch, a key they do not hold has no row, nothing is read back, and
rows never written before are inserted (COPY on PostgreSQL) instead of upserted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from engram.projections.sql import ViewConnection, chunks
from engram.projections.tables import MAX_IN_LIST, TableSpec

_ABSENT: Any = object()


@dataclass
class RowCache:
    """The rows of one table that a batch reads and writes."""

    spec: TableSpec
    physical: str
    rows: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    dirty: dict[str, None] = field(default_factory=dict)
    """Keys written since the last flush, in the order first written: new rows are inserted in
    that order (the log's), so a table's rowids follow the log in every process and every rebuild."""
    whole: set[str] = field(default_factory=set)
    """Dirty keys put with `whole=True`: written whole even when the table has narrow columns."""
    complete: bool = False
    """Every row of the table is in `rows` (see the module's docstring): a key not held has no row."""
    stored: set[str] = field(default_factory=set)
    """With `complete`: the keys that have a row in the table, so that new rows are inserted."""
    read: dict[str, dict[str, Any]] = field(default_factory=dict)
    """With `spec.narrow`: a copy of each row as `prefetch` read it from the table. What a batch
    changed in a row is what differs from it (`write_narrow` writes only those columns)."""

    @classmethod
    def for_new_table(cls, spec: TableSpec, physical: str) -> RowCache:
        """A complete cache for an empty table that only its owner writes (a generation being rebuilt)."""
        return cls(spec, physical, complete=True)

    def prefetch(self, conn: ViewConnection, keys: Iterable[str]) -> None:
        if self.complete:
            return
        missing = [k for k in dict.fromkeys(keys) if k not in self.rows]
        for part in chunks(missing, MAX_IN_LIST):
            marks = ", ".join("?" for _ in part)
            found = conn.query(
                f"SELECT {self.spec.select_list} FROM {self.physical} WHERE {self.spec.key} IN ({marks})",
                list(part),
            )
            keep = bool(self.spec.narrow)
            for row in found:
                key = str(row[self.spec.key])
                self.rows[key] = self.spec.normalise(row)
                if keep:
                    self.read[key] = dict(row)
            for k in part:
                self.rows.setdefault(k, None)

    def get(self, conn: ViewConnection, key: str) -> dict[str, Any] | None:
        row = self.rows.get(key, _ABSENT)
        if row is _ABSENT:
            if self.complete:
                return None
            self.prefetch(conn, [key])
            row = self.rows[key]
        return row  # type: ignore[no-any-return]

    def put(self, row: dict[str, Any], *, whole: bool = False) -> None:
        """`whole`: the row is new, or changed outside the table's narrow columns."""
        key = str(row[self.spec.key])
        self.rows[key] = row
        self.dirty[key] = None
        if whole:
            self.whole.add(key)

    def delete(self, key: str) -> None:
        self.rows[key] = None
        self.dirty[key] = None

    def whole_keys(self) -> list[str]:
        """The dirty keys that `flush` will write (or delete), once `write_narrow` took the others."""
        if not self.spec.narrow:
            return list(self.dirty)
        rows, whole = self.rows, self.whole
        return [k for k in self.dirty if k in whole or rows[k] is None]

    def write_narrow(self, conn: ViewConnection) -> None:
        """Write the dirty rows changed in narrow columns only, with an UPDATE of the narrow columns
        that differ from the row as read (every narrow column for a row this cache did not read, a
        rebuild's); rows that change the same columns share one `executemany`. The rows left dirty
        (new ones, rewritten ones, deleted ones) are for `flush`."""
        narrow = self.spec.narrow
        if not narrow or not self.dirty:
            return
        by_columns: dict[tuple[str, ...], list[list[Any]]] = {}
        rows, whole, read = self.rows, self.whole, self.read
        for key in self.dirty:
            row = rows[key]
            if row is None or key in whole:
                continue
            before = read.get(key)
            changed = narrow if before is None else tuple(c for c in narrow if row[c] != before[c])
            by_columns.setdefault(changed, []).append([*(row[c] for c in changed), key])
            if before is not None:
                before.update((c, row[c]) for c in changed)
        for changed, written in by_columns.items():
            if changed:
                sets = ", ".join(f"{c} = ?" for c in changed)
                conn.executemany(f"UPDATE {self.physical} SET {sets} WHERE {self.spec.key} = ?", written)
            for values in written:
                del self.dirty[values[-1]]

    def flush(self, conn: ViewConnection) -> None:
        """Write every dirty row whole: deletes, inserts of rows new to a complete cache, upserts."""
        self.whole.clear()
        if not self.dirty:
            return
        spec = self.spec
        cols = list(spec.columns)
        width = len(cols)
        pick = itemgetter(*cols) if width > 1 else (lambda row: (row[cols[0]],))
        upserts: list[Sequence[Any]] = []
        inserts: list[Sequence[Any]] = []
        deletes: list[Sequence[Any]] = []
        complete, stored = self.complete, self.stored
        for key in self.dirty:
            self.read.pop(key, None)  # written whole: a later change is diffed against nothing
            row = self.rows[key]
            if row is None:
                if not complete or key in stored:
                    deletes.append((key,))
                    stored.discard(key)
                continue
            try:
                values = pick(row)
            except KeyError:  # a column the handlers never set is NULL
                values = tuple(row.get(c) for c in cols)
            if len(row) > width:
                # Handlers may leave notes for `before_commit` in a row; a row that outlives its batch
                # must look like one read back from the table.
                for extra in [k for k in row if k not in spec.columns]:
                    del row[extra]
            if not complete or key in stored:
                upserts.append(values)
            else:
                inserts.append(values)
                stored.add(key)
        if deletes:
            conn.executemany(f"DELETE FROM {self.physical} WHERE {spec.key} = ?", deletes)
        if inserts:
            conn.insert_many(self.physical, cols, inserts)
        if upserts:
            updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != spec.key)
            conn.executemany(
                f"INSERT INTO {self.physical} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) "
                f"ON CONFLICT ({spec.key}) DO UPDATE SET {updates}",
                upserts,
            )
        self.dirty.clear()

    def trim(self, max_rows: int) -> None:
        """Forget every row once more than `max_rows` are held, to bound a long rebuild's memory.

        Call between batches (nothing dirty); the cache is no longer complete, and later batches read
        the rows they need back from the table.
        """
        if len(self.rows) > max_rows and not self.dirty:
            self.forget()

    def forget(self) -> None:
        """Forget every row, dirty ones too (their batch rolled back): later batches read them back."""
        self.rows.clear()
        self.dirty.clear()
        self.whole.clear()
        self.read.clear()
        self.stored.clear()
        self.complete = False
