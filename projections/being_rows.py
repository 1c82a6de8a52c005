"""Which rows of each view belong to a being, and which to one of its aggregates: what a targeted
purge deletes after the being's key (or an item's) is destroyed (ADR 0077).

Every view table is listed here, so that a new table cannot be forgotten: a view with a table
missing from `BEING_COLUMNS` is not purged row by row but rebuilt (`covered`), and a unit test
fails until the table is placed. A table's being column is the one its rows are found by:
`being_id` for most, `owner_id` for facts (a being's or a space's: a space's facts are sealed under
the space's key, not the being's), `id` for one-row-per-being tables. `None` marks a table no
being's events write (the vector collections' registry, the spaces): it is left as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from uuid import UUID

from engram.projections.engine import Projection
from engram.projections.fact_search import facts_alias
from engram.projections.note_search import notes_alias
from engram.projections.sql import ViewConnection, ViewDatabase, chunks
from engram.projections.tables import MAX_IN_LIST
from engram.projections.vectors import model_slug

BEING_COLUMNS: dict[str, str | None] = {
    # beings
    "beings": "id",
    "diary": "being_id",
    # notes
    "notes": "being_id",
    "note_tags": "being_id",
    # memory
    "nodes": "being_id",
    "clusters": "being_id",
    # patrol_runs
    "patrol_runs": "being_id",
    # vectors
    "vector_nodes": "being_id",
    "vector_clusters": "being_id",
    "centroids": "being_id",
    "collections": None,
    # tokens (a being token's events carry its being, so they are sealed under its key)
    "tokens": "being_id",
    # note_search
    "note_docs": "being_id",
    "note_terms": "being_id",
    "note_collections": None,
    # conversations
    "messages": "being_id",
    "conversations": "being_id",
    "sessions": "being_id",
    "conversation_summaries": "being_id",
    # facts
    "facts": "owner_id",
    "fact_refs": "owner_id",
    "entity_aliases": "owner_id",
    "spaces": None,
    "space_members": "being_id",  # `Space.Joined` carries the being: sealed under its key
    # message_search
    "message_terms": "being_id",
    "message_term_beings": "id",
    # extraction
    "extraction_messages": "being_id",
    "extraction_beings": "id",
    # fact_search
    "fact_docs": "owner_id",
    "fact_terms": "owner_id",
    "fact_collections": None,
    # sleep
    "sleep_states": "id",
    "sleep_transitions": "being_id",
    # importance
    "importance_scores": "being_id",
    # profiles
    "entity_profiles": "being_id",
    "reflections": "being_id",
    # links
    "memory_links": "being_id",
    "link_memories": "being_id",
}

ITEM_COLUMNS: dict[str, tuple[str, ...]] = {
    # The columns of a table that hold the id of the aggregate a row comes from (or is about): an
    # item's rows are those where one of them is among the erased aggregates' ids. Tables absent
    # here have no row per item (a being's counters, registries).
    "notes": ("id",),
    "note_tags": ("note_id",),
    "nodes": ("id", "source_note_id"),
    "clusters": ("id",),
    "patrol_runs": ("id",),
    "vector_nodes": ("id",),
    "vector_clusters": ("id",),
    "centroids": ("cluster_id",),
    "tokens": ("id",),
    "note_docs": ("id",),
    "note_terms": ("note_id",),
    "messages": ("id",),
    "conversations": ("id",),
    "sessions": ("id", "conversation_id"),  # a subject's erasure names the conversation
    "conversation_summaries": ("id", "conversation_id"),
    "facts": ("id",),
    "fact_refs": ("fact_id",),
    "message_terms": ("message_id",),
    "extraction_messages": ("id",),
    "fact_docs": ("id",),
    "fact_terms": ("fact_id",),
    "importance_scores": ("id",),
    "entity_profiles": ("id",),
    "reflections": ("id",),
    "memory_links": ("memory_id", "other_id"),
    "link_memories": ("id",),
}


def covered(projection: Projection) -> bool:
    """Whether every table of the view is placed in `BEING_COLUMNS` (else it is rebuilt instead)."""
    return all(spec.name in BEING_COLUMNS for spec in projection.tables)


def _ids(conn: ViewConnection, table: str, column: str, being: str, key: str = "id") -> list[str]:
    return [str(r[key]) for r in conn.query(f"SELECT {key} FROM {table} WHERE {column} = ?", [being])]


def vector_points(
    conn: ViewConnection, db: ViewDatabase, projection: Projection, generation: int, being_id: UUID
) -> dict[str, list[UUID]]:
    """The being's points in the generation's vector collections, by collection: found from the
    view's rows, which the view writes in the same batch as the points (`before_commit`)."""
    being = str(being_id)
    t = {spec.name: db.table(spec.name, generation) for spec in projection.tables}
    out: dict[str, list[UUID]] = {}
    if "vector_nodes" in t:
        nodes = [UUID(i) for i in _ids(conn, t["vector_nodes"], "being_id", being)]
        clusters = [UUID(i) for i in _ids(conn, t["vector_clusters"], "being_id", being)]
        clusters += [UUID(i) for i in _ids(conn, t["centroids"], "being_id", being, key="cluster_id")]
        for row in conn.query(f"SELECT kind, model FROM {t['collections']}"):
            name = f"engram_{row['kind']}__{model_slug(row['model'])}__g{generation}"
            out[name] = nodes if row["kind"] == "nodes" else sorted(set(clusters))
    if "note_docs" in t:
        docs = [UUID(i) for i in _ids(conn, t["note_docs"], "being_id", being)]
        for row in conn.query(f"SELECT model FROM {t['note_collections']}"):
            out[f"{notes_alias(row['model'])}__g{generation}"] = docs
    if "fact_docs" in t:
        docs = [UUID(i) for i in _ids(conn, t["fact_docs"], "owner_id", being)]
        for row in conn.query(f"SELECT model FROM {t['fact_collections']}"):
            out[f"{facts_alias(row['model'])}__g{generation}"] = docs
    return {name: ids for name, ids in out.items() if ids}


def item_keys(
    conn: ViewConnection,
    db: ViewDatabase,
    table: str,
    generation: int,
    being_id: UUID,
    aggregate_ids: Sequence[UUID],
) -> list[str]:
    """The keys of the rows of `table` (a logical name) that are the erased aggregates' (`ITEM_COLUMNS`)."""
    physical, keys = db.table(table, generation), set[str]()
    for item_column in ITEM_COLUMNS.get(table, ()):
        for part in chunks([str(i) for i in aggregate_ids], MAX_IN_LIST):
            marks = ", ".join("?" for _ in part)
            found = conn.query(
                f"SELECT id FROM {physical} WHERE being_id = ? AND {item_column} IN ({marks})",
                [str(being_id), *part],
            )
            keys.update(str(r["id"]) for r in found)
    return sorted(keys)


def item_vector_points(
    points: dict[str, list[UUID]], aggregate_ids: Collection[UUID]
) -> dict[str, list[UUID]]:
    """Those of the being's points that are the erased aggregates' (a node, a cluster, a note, a fact)."""
    wanted = set(aggregate_ids)
    return {name: kept for name, ids in points.items() if (kept := [i for i in ids if i in wanted])}


def delete_rows(
    conn: ViewConnection,
    db: ViewDatabase,
    projection: Projection,
    generation: int,
    being_id: UUID,
    aggregate_ids: Sequence[UUID] | None = None,
) -> dict[str, int]:
    """Delete the being's rows (or, with `aggregate_ids`, those of its aggregates) from every table
    of the generation; how many went, by table (tables that lost none are left out)."""
    being = str(being_id)
    counts: dict[str, int] = {}
    for spec in projection.tables:
        column = BEING_COLUMNS[spec.name]
        if column is None:
            continue
        table = db.table(spec.name, generation)
        if aggregate_ids is None:
            found = conn.query_one(f"SELECT count(*) AS n FROM {table} WHERE {column} = ?", [being])
            n = int(found["n"]) if found else 0
            if n:
                conn.execute(f"DELETE FROM {table} WHERE {column} = ?", [being])
                counts[spec.name] = n
            continue
        n = 0
        for item_column in ITEM_COLUMNS.get(spec.name, ()):
            for part in chunks([str(i) for i in aggregate_ids], MAX_IN_LIST):
                marks = ", ".join("?" for _ in part)
                where = f"{column} = ? AND {item_column} IN ({marks})"
                found = conn.query_one(f"SELECT count(*) AS n FROM {table} WHERE {where}", [being, *part])
                if found and int(found["n"]):
                    conn.execute(f"DELETE FROM {table} WHERE {where}", [being, *part])
                    n += int(found["n"])
        if n:
            counts[spec.name] = n
    return counts
