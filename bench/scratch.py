"""A throwaway PostgreSQL schema for one benchmark run (or test), so runs never see each other's data."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlencode

import psycopg


@contextmanager
def scratch_schema(base_url: str, prefix: str = "bench_") -> Iterator[str]:
    """Create a fresh schema, yield a database URL that selects it, drop it afterwards."""
    schema = prefix + uuid.uuid4().hex[:16]
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in base_url else "?"
    try:
        yield f"{base_url}{sep}{urlencode({'schema': schema})}"
    finally:
        with psycopg.connect(base_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
