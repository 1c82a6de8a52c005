"""Full-text search over the memory view: one port, two adapters, the searches `Reading` makes.

- `port.py`: the `FullTextIndex` port, a store's own full-text index kept in the memory view's
  database. Adapters: SQLite FTS5, a table per being (`adapters/fulltext/sqlite_fts5.py`, ADRs
  0012, 0014, 0020), and PostgreSQL, a generated `tsvector` column with a GIN index
  (`adapters/fulltext/postgres_tsvector.py`). The composition root picks one per backend.
- `terms.py`: the words a query searches for (stop words out), the same on both backends.
- `search.py`: `FullTextSearch`, what `Reading` calls: ranked full-text search, the actor names a
  query holds, the spec's keyword match; in the reader's read transaction.
- `overlap.py`: the worker threads that run the ranking statements beside the vector search (ADR 0017).

Ranking the hits with the vector search's is `services/ranking.py`'s work, not this package's.
"""
