"""`engram export` and `engram import`: a being's stored events in a file (ADR 0070).

The file is JSON Lines: a header (format, Engram version, the being), one line per stored event in
log order (its source position, aggregate id, version, topic, the stored state in base64 and the
source deployment's chain hash), and a manifest last (counts, positions, topics, and the head of a
hash chain over the file's events, computed as the log's chain is, `chain.link`). A file without its
manifest (truncated), whose chain does not match (tampered) or of an unknown format is refused before
anything is written.

A being's events are those of every aggregate whose first event carries its `being_id` (the being's
own aggregate included): whole aggregates, so an import never holds a version without its
predecessors. Shared aggregates (spaces) are not exported. Snapshots are a cache: not exported.

An import writes the events the target lacks, ids and versions preserved, in the file's order,
`WRITE_BATCH` to a transaction (the target's chain seals them); events it has already, byte for byte, are skipped, so a
second import writes nothing.

An item forgotten where the file was written (`forget note|message|fact|subject`) travels as what it
is there: its events, sealed under a destroyed key, and the id of that key in the manifest's
`destroyed_keys` (never a key). The target records those ids as destroyed before it writes the events,
so they read as erased there too instead of as events whose key is missing. Events sealed under a key
that neither the file, its `destroyed_keys` nor the target holds are refused before anything is written.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version as package_version
from pathlib import Path
from typing import IO, Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import StoredEvent

from engram.adapters.eventstore import chain, chain_check
from engram.adapters.eventstore.shredding import MAGIC_ITEM, being_of, key_id_of, sealed, slot_of
from engram.services.key_store import KeyDestroyed, KeyStoreError

FORMAT = "engram-export/1"
KEYS_HOOK = "keys"
"""The manifest's field for the being's data keys (`--with-keys`), filled by `key_exporter`."""
DESTROYED_HOOK = "destroyed_keys"
"""The manifest's list of the ids (hex) of the item and subject keys that sealed the file's events and
were destroyed where it was written: ids only, so it is in every export, with keys or without."""


def key_exporter(app: Any) -> Callable[[UUID], str | None] | None:
    """What `--with-keys` puts in the manifest: the being's data key from the log's key store (ADR
    0073), as JSON {key id: base64 key}; None when the deployment has no key store."""
    store = getattr(app, "keys", None)
    if store is None:
        return None

    def keys(being_id: UUID) -> str | None:
        found = dict(store.export_keys(being_id))
        return json.dumps(found) if found else None

    return keys


class TransferRefused(Exception):
    """The file or the target refuses the import; nothing was written."""


@dataclass
class ExportSummary:
    being: str
    being_id: str
    events: int = 0
    aggregates: int = 0
    first_position: int | None = None
    last_position: int | None = None
    topics: dict[str, int] = field(default_factory=dict)
    chain_head: str = chain.GENESIS.hex()
    keys: str | None = None


def _engram_version() -> str:
    try:
        return package_version("engram")
    except Exception:  # a checkout that is not installed
        return "unknown"


def _file_link(previous: bytes, index: int, oid: UUID, version: int, topic: str, state: bytes) -> bytes:
    return chain.link(previous, index, oid, version, topic, state)


def _being_events(app: Application[UUID], being_id: UUID) -> Iterator[tuple[int, UUID, int, str, bytes, Any]]:
    rows, _ = chain_check.log_rows(app)
    decode = app.mapper.transcoder.decode
    members: set[UUID] = set()
    # Its items' and subjects' keys name it too (ADR 0075): their events are the being's.
    store = getattr(app, "keys", None)
    keys = {being_id, *(store.owned_keys(being_id) if store is not None else ())}
    after = 0
    while True:
        batch = rows(after, chain.BATCH)
        if not batch:
            return
        after = batch[-1][0]
        for position, raw_id, version, topic, state, stored_hash in batch:
            if raw_id is None:
                continue
            oid = raw_id if isinstance(raw_id, UUID) else UUID(raw_id)
            state_bytes = bytes(state)
            # A sealed event names its being in its clear header (ADR 0073); others carry it in clear.
            owner = key_id_of(state_bytes) if sealed(state_bytes) else None
            if version == 1 and (
                oid == being_id
                or owner in keys
                or being_of(state_bytes) == being_id
                or (owner is None and decode(state_bytes).get("being_id") == being_id)
            ):
                members.add(oid)
            if oid in members:
                yield int(position), oid, int(version), topic, state_bytes, stored_hash


def export_being(
    app: Application[UUID],
    being: str,
    being_id: UUID,
    out: IO[str],
    *,
    with_keys: Callable[[UUID], str | None] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ExportSummary:
    """Write `being`'s events to `out`. `with_keys`: the key store's export of the being's keys (None:
    no keys in the file)."""
    summary = ExportSummary(being=being, being_id=being_id.hex)
    header = {"format": FORMAT, "engram_version": _engram_version(), "being": being, "being_id": being_id.hex}
    out.write(json.dumps(header) + "\n")
    head, aggregates = chain.GENESIS, set()
    store = getattr(app, "keys", None)
    seen: set[bytes] = set()
    destroyed: list[str] = []
    for position, oid, version, topic, state, stored_hash in _being_events(app, being_id):
        if store is not None and state[:4] == MAGIC_ITEM and state[4:20] not in seen:
            seen.add(state[4:20])  # each item key asked once
            key_id = key_id_of(state)
            if store.is_destroyed(key_id):
                destroyed.append(key_id.hex)
        summary.events += 1
        head = _file_link(head, summary.events, oid, version, topic, state)
        aggregates.add(oid)
        summary.topics[topic] = summary.topics.get(topic, 0) + 1
        summary.first_position = summary.first_position or position
        summary.last_position = position
        line = {
            "position": position,
            "id": oid.hex,
            "version": version,
            "topic": topic,
            "state": base64.b64encode(state).decode(),
            "chain_hash": bytes(stored_hash).hex() if stored_hash is not None else None,
        }
        out.write(json.dumps(line) + "\n")
        if progress is not None and summary.events % 1000 == 0:
            progress(summary.events)
    summary.aggregates, summary.chain_head = len(aggregates), head.hex()
    summary.keys = with_keys(being_id) if with_keys is not None else None
    manifest = {
        "manifest": {
            **summary.__dict__,
            "engram_version": _engram_version(),
            KEYS_HOOK: summary.keys,
            DESTROYED_HOOK: destroyed,
        }
    }
    out.write(json.dumps(manifest) + "\n")
    return summary


@dataclass(frozen=True)
class ImportPlan:
    being: str
    being_id: UUID
    events: list[StoredEvent]
    to_write: list[StoredEvent]
    present: int
    others: int
    """Events the target holds for this being's aggregates that the file does not have."""
    manifest: dict[str, Any]
    tombstones: frozenset[UUID] = frozenset()
    """Item and subject keys destroyed where the file was written, which the target does not hold."""


def read_file(path: Path) -> tuple[dict[str, Any], list[StoredEvent], dict[str, Any]]:
    """The header, events and manifest of an export, checked: TransferRefused when it is not one, of
    an unknown format, truncated or changed."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0]) if lines else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TransferRefused(f"{path} is not an Engram export: {exc}") from exc
    if not isinstance(header, dict) or "format" not in header:
        raise TransferRefused(f"{path} is not an Engram export (no header)")
    if header["format"] != FORMAT:
        raise TransferRefused(f"{path} has format {header['format']!r}; this Engram reads {FORMAT!r}")
    try:
        manifest = json.loads(lines[-1]).get("manifest") if len(lines) > 1 else None
    except json.JSONDecodeError:
        manifest = None
    if not isinstance(manifest, dict):
        raise TransferRefused(f"{path} is truncated: its manifest (the last line) is missing")
    events: list[StoredEvent] = []
    head = chain.GENESIS
    try:
        for n, text in enumerate(lines[1:-1], start=1):
            row = json.loads(text)
            oid, state = UUID(row["id"]), base64.b64decode(row["state"], validate=True)
            head = _file_link(head, n, oid, int(row["version"]), row["topic"], state)
            events.append(StoredEvent(oid, int(row["version"]), row["topic"], state))
    except (ValueError, KeyError, TypeError) as exc:
        raise TransferRefused(f"{path} is damaged at line {len(events) + 2}: {exc}") from exc
    if len(events) != manifest.get("events") or head.hex() != manifest.get("chain_head"):
        raise TransferRefused(
            f"{path} was changed or truncated: {len(events)} events whose chain ends in {head.hex()[:16]}…, "
            f"the manifest says {manifest.get('events')} ending in {str(manifest.get('chain_head'))[:16]}…"
        )
    return header, events, manifest


def plan_import(app: Application[UUID], path: Path) -> ImportPlan:
    header, events, manifest = read_file(path)
    being_id = UUID(header["being_id"])
    # What the target holds of this being: every event of its aggregates (one pass over the log).
    have = {
        (oid, version): StoredEvent(oid, version, topic, state)
        for _, oid, version, topic, state, _ in _being_events(app, being_id)
    }
    to_write, present = [], 0
    for e in events:
        oid = e.originator_id if isinstance(e.originator_id, UUID) else UUID(e.originator_id)
        mine = have.pop((oid, e.originator_version), None)
        if mine is None:
            to_write.append(e)
        elif mine.topic == e.topic and bytes(mine.state) == e.state:
            present += 1
        else:
            raise TransferRefused(
                f"the target holds another event {e.originator_version} of aggregate {e.originator_id}: "
                "the file and this deployment disagree on that history; nothing was imported"
            )
    _check_keys(app, being_id, to_write, manifest)
    tombstones = _check_item_keys(app, being_id, to_write, manifest)
    return ImportPlan(
        str(header["being"]), being_id, events, to_write, present, len(have), manifest, tombstones
    )


def _file_keys(manifest: dict[str, Any]) -> dict[str, str]:
    raw = manifest.get(KEYS_HOOK)
    if not raw:
        return {}
    try:
        keys = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        raise TransferRefused(f"the file's keys are not readable: {exc}") from exc
    if not isinstance(keys, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in keys.items()
    ):
        raise TransferRefused("the file's keys are not readable: not an object of key id to key")
    return keys


def _check_keys(app: Any, being_id: UUID, to_write: list[StoredEvent], manifest: dict[str, Any]) -> None:
    """Events sealed with the being's key (ADR 0073) are readable here only with that key: from the
    file (`--with-keys`) or from this deployment's key store already."""
    if not any(sealed(bytes(e.state)) for e in to_write):
        return
    store = getattr(app, "keys", None)
    if store is None:
        raise TransferRefused("the file's events are encrypted and this deployment has no key store")
    if being_id.hex in _file_keys(manifest):
        return
    if store.is_destroyed(being_id):
        raise TransferRefused("this being was forgotten here: its key is destroyed")
    if not store.export_keys(being_id):
        raise TransferRefused(
            "the file's events are encrypted with the being's key, which neither the file nor this "
            "deployment holds: export it again with --with-keys"
        )


def _destroyed_keys(manifest: dict[str, Any]) -> set[UUID]:
    raw = manifest.get(DESTROYED_HOOK) or []
    try:
        if not isinstance(raw, list):
            raise TypeError("not a list")
        return {UUID(hex=str(k)) for k in raw}
    except (TypeError, ValueError) as exc:
        raise TransferRefused(f"the file's destroyed keys are not readable: {exc}") from exc


def _check_item_keys(
    app: Any, being_id: UUID, to_write: list[StoredEvent], manifest: dict[str, Any]
) -> frozenset[UUID]:
    """Every event sealed under an item's or a subject's key (ADR 0075) must be readable here, or
    read as erased: its key in the file, held here, destroyed here, or destroyed where the file was
    written (`destroyed_keys`). Returns the keys of the last kind that the target still has to
    record as destroyed. An event whose key is nowhere is refused: written, it would fail every read
    and rebuild of the target."""
    store = getattr(app, "keys", None)
    items = [bytes(e.state) for e in to_write if bytes(e.state)[:4] == MAGIC_ITEM]
    if store is None or not items:
        return frozenset()
    in_file, listed = set(_file_keys(manifest)), _destroyed_keys(manifest)
    tombstones: set[UUID] = set()
    missing = 0
    checked: dict[bytes, bool] = {}
    for state in items:
        slot, key_id = slot_of(state), key_id_of(state)
        if slot is None or slot.hex in in_file:
            continue
        if being_of(state) != being_id:
            raise TransferRefused(f"an event of the file is sealed for another being than {being_id}")
        if key_id in listed:
            tombstones.add(key_id)  # `import_tombstones` leaves it alone if the target holds it
            continue
        ok = checked.get(state[4:52])  # the header: key id, being, slot
        if ok is None:
            try:
                store.key_of_slot(slot, key_id, being_id)
                ok = True
            except KeyDestroyed:
                ok = True  # forgotten here already: it reads as erased
            except KeyStoreError:
                ok = False
            checked[state[4:52]] = ok
        missing += not ok
    if missing:
        raise TransferRefused(
            f"{missing} of the file's events are sealed under item keys that neither the file nor this "
            "deployment holds: export it again with --with-keys (an export written before Engram listed "
            "the keys of forgotten items needs a new export)"
        )
    return frozenset(tombstones)


WRITE_BATCH = 1000
"""Events per transaction of an import. The library's PostgreSQL insert of 20,000 events in one call
never returned (its pipeline stalls with ~20 MB of parameters; 1,000 at a time is how the benchmarks
fill logs)."""


def apply_import(app: Application[UUID], plan: ImportPlan) -> int:
    """Write the plan's missing events, in file order, `WRITE_BATCH` to a transaction. Everything was
    checked before (`plan_import`); an import cut short by a crash is completed by running it again
    (what was written is skipped)."""
    keys = _file_keys(plan.manifest)
    store = getattr(app, "keys", None)
    if keys and store is not None:
        store.import_keys(keys)  # before the events: they are read with them
    if plan.tombstones and store is not None:
        store.import_tombstones(plan.tombstones)  # so are these: as erased
    for start in range(0, len(plan.to_write), WRITE_BATCH):
        app.recorder.insert_events(plan.to_write[start : start + WRITE_BATCH])
    return len(plan.to_write)
