"""A memory's own page (`/ui/beings/{being}/nodes|clusters|notes|facts/{id}`, issue #14, ADR 0086):
its state now or as of a version or an instant, the timeline of its events with the change each
made, the verbatim LLM decisions that touched it, its `why` lineage as a graph, and links to the
memories around it. Read through the same services as the HTTP API (`engram.audit`, `engram.why`,
the views); nothing here decides anything.
"""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any
from uuid import UUID

from fastapi import Request, Response
from fastapi.responses import HTMLResponse

from engram.adapters.http.deps import parse_as_of
from engram.adapters.ui.lineage_svg import PAGE_KINDS, lineage_svg
from engram.adapters.ui.render import page
from engram.adapters.ui.routes import ViewerDep, being_for, engram_of, ui_router
from engram.adapters.ui.session import Forbidden, Viewer
from engram.domain.errors import InvalidInput
from engram.services.beings import parse_uuid
from engram.services.bootstrap import Engram
from engram.services.errors import NotFound
from engram.services.item_history import TIMELINE_PAGE, cluster_nodes, source_message, timeline

ANSWER_CHARS = 4_000  # a decision's verbatim answer is shown up to this many characters

# What a person looks at first, per kind; the rest of the state is folded away.
KEY_FIELDS: dict[str, tuple[str, ...]] = {
    "node": ("scene", "status", "importance", "cluster_id", "pinned", "reactivation_count",
             "last_activated_at", "created_on", "absorbed_into"),
    "cluster": ("name", "is_root", "parent_id", "deleted", "created_on"),
    "note": ("text", "kind", "node_id", "superseded_by", "expired", "enabled", "sensitivity",
             "at", "created_on"),
    "fact": ("text", "subject", "fact_type", "importance", "confidence", "pinned",
             "source_message_id", "created_on"),
}  # fmt: skip
_LINKED = {"cluster_id": "cluster", "parent_id": "cluster", "node_id": "node", "absorbed_into": "node",
           "source_note_id": "note", "superseded_by": "note"}  # fmt: skip


def _plain(kind_type: str) -> str:
    """`MemoryNode.FlaggedDying` → `flagged dying`: an event's type in plain words."""
    name = kind_type.rsplit(".", 1)[-1]
    words = "".join(f" {c.lower()}" if c.isupper() else c for c in name).strip()
    return words or kind_type


def _show(value: Any) -> str:
    """A state's value as text: strings as they are, the rest as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ", ".join(value) if value else "—"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _as_of(value: str | None) -> tuple[int | None, Any]:
    """`?as_of=` as the HTTP API reads it; an instant without a zone (the page's datetime picker
    sends one) is read as UTC, as the picker's label says."""
    if value is None or not value.strip():
        return None, None
    version, instant = parse_as_of(value)
    if instant is not None and instant.tzinfo is None:
        instant = instant.replace(tzinfo=UTC)
    return version, instant


def _guard_sensitive(kind: str, state: dict[str, Any], viewer: Viewer) -> None:
    """A sensitive note or node shows to admin tokens only, as the HTTP API has it (ADR 0046)."""
    if viewer.is_admin or kind not in ("note", "node"):
        return
    if state.get("sensitivity") == "sensitive" or state.get("sensitive") is True:
        raise Forbidden(f"This {kind} is sensitive: it needs an admin token.")


def _decisions(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The decisions recorded on the memory itself, each answer cut at `ANSWER_CHARS`."""
    out = []
    for d in report["tree"].get("decisions") or []:
        answer = d.get("raw_answer", d.get("answer"))
        text = answer if isinstance(answer, str) or answer is None else _show(answer)
        cut = text is not None and len(text) > ANSWER_CHARS
        out.append(
            {
                **d,
                "answer_text": text[:ANSWER_CHARS] if text is not None else None,
                "answer_cut": len(text) - ANSWER_CHARS if cut and text is not None else 0,
                "plan": d.get("parsed_plan"),
            }
        )
    return out


def _page_no(value: str | None, shown: dict[str, Any]) -> int:
    """`?page=` of the timeline; without it, the page that holds the version shown."""
    if value is None or not value.strip():
        return (int(shown["version"]) - 1) // TIMELINE_PAGE + 1
    if not (value.isascii() and value.isdigit() and len(value) <= 9):
        raise InvalidInput(f"page takes a page number, not {value!r}")
    return int(value)


def _after_key(value: str | None) -> int | None:
    """`?after=` of a cluster's nodes: the `seq` of the previous page's last node."""
    if value is None or not value.strip():
        return None
    if not (value.isascii() and value.isdigit() and len(value) <= 18):
        raise InvalidInput(f"after takes the number a 'Next nodes' link carries, not {value!r}")
    return int(value)


def _links(
    engram: Engram, being_id: UUID, kind: str, item_id: UUID, state: dict[str, Any], viewer: Viewer,
    after: str | None,
) -> dict[str, Any]:  # fmt: skip
    links: dict[str, Any] = {}
    if kind == "node":
        links["notes"] = [state["source_note_id"]] if state.get("source_note_id") else []
    if kind == "cluster":
        engram.views.ensure(names=["memory"], being=being_id)
        rows, next_key = cluster_nodes(
            engram.views.read,
            being_id,
            item_id,
            now=engram.clock.now(),
            include_sensitive=viewer.is_admin,
            after=_after_key(after),
        )
        links["nodes"] = rows
        links["next_nodes"] = next_key
        links["sub_clusters"] = engram.views.read.children(being_id, item_id)[:100]
    if kind == "fact":
        links["message"] = source_message(engram.store, being_id, state.get("source_message_id"))
    return links


def _item_page(
    request: Request, viewer: Viewer, being: str, kind: str, item_id: str, as_of: str | None,
    page_no: str | None, after: str | None,
) -> Response:  # fmt: skip
    found = being_for(request, viewer, being)
    engram = engram_of(request)
    as_id = parse_uuid(item_id)
    if as_id is None:
        raise NotFound(f"{item_id!r} is not the id of a {kind}")
    ref = str(found.id)
    now = engram.audit.state(kind, str(as_id), being=ref)
    _guard_sensitive(kind, now, viewer)
    version, instant = _as_of(as_of)
    shown = (
        now
        if version is None and instant is None
        else engram.audit.state(kind, str(as_id), version=version, as_of=instant, being=ref)
    )
    head = int(now["latest_version"])
    history = timeline(engram.store, kind, str(as_id), being=ref, page=_page_no(page_no, shown))
    report = engram.why.why(ref, kind, str(as_id))
    key_fields = [(name, shown.get(name), _LINKED.get(name)) for name in KEY_FIELDS[kind] if name in shown]
    rest = {k: v for k, v in shown.items() if k not in KEY_FIELDS[kind]}
    return page(
        request,
        "item.html",
        viewer,
        being=found,
        kind=kind,
        plural=PAGE_KINDS[kind],
        item_id=str(as_id),
        state=shown,
        head=head,
        is_now=shown["version"] == head,
        as_of=as_of or "",
        key_fields=key_fields,
        rest=rest,
        history=history,
        decisions=_decisions(report),
        lineage=lineage_svg(report, str(found.id)),
        truncated=report["truncated"],
        links=_links(engram, found.id, kind, as_id, now, viewer, after),
        plain=_plain,
        show=_show,
        page_kinds=PAGE_KINDS,
    )


def _register(kind: str) -> None:
    """One route a kind: `/ui/beings/{being}/nodes/{id}` and so on (`after`: a cluster's next nodes)."""

    def item_page(
        request: Request, being: str, item_id: str, viewer: ViewerDep, as_of: str | None = None,
        page: str | None = None, after: str | None = None,
    ) -> Response:  # fmt: skip
        return _item_page(request, viewer, being, kind, item_id, as_of, page, after)

    item_page.__name__ = f"{kind}_page"  # the request log's `command`
    path = f"/beings/{{being}}/{PAGE_KINDS[kind]}/{{item_id}}"
    ui_router.add_api_route(path, item_page, methods=["GET"], response_class=HTMLResponse)


for _kind in KEY_FIELDS:
    _register(_kind)


@ui_router.get("/beings/{being}/sessions/{item_id}", response_class=HTMLResponse)
def session_page(request: Request, being: str, item_id: str, viewer: ViewerDep) -> Response:
    """A session's page: its messages, its events in its conversation, its summaries and compactions
    (a session is a slice of a conversation, not an aggregate: no state to replay as of a version)."""
    found = being_for(request, viewer, being)
    as_id = parse_uuid(item_id)
    if as_id is None:
        raise NotFound(f"{item_id!r} is not the id of a session")
    report = engram_of(request).why.why(str(found.id), "session", str(as_id))
    tree = report["tree"]
    messages = [
        {"id": child["id"], **child["events"][0]["detail"]}
        for child in tree["children"]
        if child.get("kind") == "message" and not child.get("ref") and child.get("events")
    ]
    return page(
        request,
        "item_session.html",
        viewer,
        being=found,
        item_id=str(as_id),
        tree=tree,
        messages=messages,
        more=len(tree["children"]) - len(messages),
        decisions=_decisions(report),
        plain=_plain,
        show=_show,
    )
