"""The `why` lineage (ADR 0068) drawn as a graph, server-side SVG (ADR 0086).

Columns from left to right: the oldest sources, what came of them, and the memory asked about on
the right; each memory's recorded decisions (an LLM's answer, an undo) hang beside it as smaller
boxes. Every box that is a memory with a page of its own links to it. Every text is escaped here
(`markupsafe.escape`): the SVG is built in Python, outside Jinja's autoescape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

BOX_W, BOX_H = 210, 44
COL_GAP, ROW_GAP = 60, 14
MAX_DECISIONS_SHOWN = 4  # per memory; the decisions list below the graph has them all
LABEL_CHARS = 30
PAGE_KINDS = {"node": "nodes", "cluster": "clusters", "note": "notes", "fact": "facts"}


@dataclass
class _Box:
    title: str
    subtitle: str
    css: str
    href: str | None
    depth: int
    outgoing: bool = False  # a reference to where the memory went (absorbed into…): no arrow into it
    children: list[_Box] = field(default_factory=list)
    row: float = 0.0


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _href(being: str, kind: str | None, item_id: str) -> str | None:
    plural = PAGE_KINDS.get(kind or "")
    return f"/ui/beings/{being}/{plural}/{item_id}" if plural else None


def _decision_box(decision: dict[str, Any], depth: int) -> _Box:
    if decision.get("source") == "undo":
        return _Box("undone", _cut(str(decision.get("reason") or "")), "decision undo", None, depth)
    task = str(decision.get("task") or decision.get("source") or "decision")
    model = decision.get("model") or decision.get("method") or "rule"
    validation = str(decision.get("validation") or "")
    css = "decision rejected" if validation.startswith(("refused", "rejected")) else "decision"
    return _Box(_cut(f"decision · {task}"), _cut(f"{model} · {validation or 'recorded'}"), css, None, depth)


def _box(node: dict[str, Any], being: str, depth: int) -> _Box:
    kind = node.get("kind") or "?"
    relation = str(node.get("relation") or "")
    item_id = str(node.get("id") or "")
    if node.get("ref"):
        subtitle = "(its own lineage)"
    else:
        events = node.get("events") or []
        last = str(events[-1]["type"]).split(".")[-1] if events else ""
        subtitle = f"{len(events)} events · last {last}" if events else "no events"
    css = "memory subject" if depth == 0 else "memory ref" if node.get("ref") else "memory"
    box = _Box(
        _cut(f"{relation}: {kind} {item_id[:8]}"), _cut(subtitle), css, _href(being, kind, item_id), depth
    )
    box.outgoing = bool(node.get("ref"))
    decisions = node.get("decisions") or []
    box.children += [_decision_box(d, depth + 1) for d in decisions[:MAX_DECISIONS_SHOWN]]
    if len(decisions) > MAX_DECISIONS_SHOWN:
        more = len(decisions) - MAX_DECISIONS_SHOWN
        box.children.append(_Box(f"+{more} more decisions", "listed below", "decision", None, depth + 1))
    box.children += [_box(child, being, depth + 1) for child in node.get("children") or []]
    return box


def _place(box: _Box, next_row: list[float]) -> None:
    """Leaves take the next free row; a box sits level with the middle of its children."""
    if not box.children:
        box.row = next_row[0]
        next_row[0] += 1
        return
    for child in box.children:
        _place(child, next_row)
    box.row = (box.children[0].row + box.children[-1].row) / 2


def _walk(box: _Box) -> list[_Box]:
    out = [box]
    for child in box.children:
        out += _walk(child)
    return out


def lineage_svg(report: dict[str, Any], being: str) -> Markup:
    """The SVG of a `why` report's tree (`WhyQueries.why`), safe to put in a page as it is."""
    root = _box(report["tree"], being, 0)
    rows = [0.0]
    _place(root, rows)
    boxes = _walk(root)
    depth = max(b.depth for b in boxes)
    width = (depth + 1) * (BOX_W + COL_GAP) + 10
    height = int(rows[0]) * (BOX_H + ROW_GAP) + 10

    def x(b: _Box) -> int:
        return 5 + (depth - b.depth) * (BOX_W + COL_GAP)

    def y(b: _Box) -> int:
        return 5 + int(b.row * (BOX_H + ROW_GAP))

    parts = [
        f'<svg class="lineage" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="lineage graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>',
    ]
    for b in boxes:  # edges first: boxes are drawn over them
        for c in b.children:
            x1, y1 = x(c) + BOX_W, y(c) + BOX_H // 2
            x2, y2 = x(b), y(b) + BOX_H // 2
            mid = (x1 + x2) // 2
            # A source flows into what it made (an arrow); a reference is only a dashed line.
            edge = 'class="edge ref"' if c.outgoing else 'class="edge" marker-end="url(#arrow)"'
            parts.append(f'<path {edge} d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"/>')
    for b in boxes:
        shape = (
            f'<g class="box {escape(b.css)}"><rect x="{x(b)}" y="{y(b)}" width="{BOX_W}" height="{BOX_H}" '
            f'rx="6"/><text x="{x(b) + 8}" y="{y(b) + 18}">{escape(b.title)}</text>'
            f'<text class="sub" x="{x(b) + 8}" y="{y(b) + 35}">{escape(b.subtitle)}</text></g>'
        )
        parts.append(f'<a href="{escape(b.href)}">{shape}</a>' if b.href else shape)
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 - every text in it went through escape() above
