"""What the explorer shows of beings (issue #14): every being with its counts, and one being's
overview — its cluster tree, the decay histogram of its nodes, the node state changes of its latest
patrols and its patrol runs a page at a time. Every list is bounded (ADR 0085)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from engram.domain import decay
from engram.projections.overview_queries import COUNTS, OverviewReads
from engram.services.views import Views

Row = dict[str, Any]

VIEWS = ("beings", "notes", "memory", "facts", "conversations", "sleep", "patrol_runs")
"""The views the pages read, caught up together before they are read."""

BINS = 20
"""Bins of the effective importance histogram, over [0, 1]."""

TOPICS_SHOWN = 60
"""The largest topics the cluster tree shows; the page says how many more there are."""

SERIES_RUNS = 60
"""Patrol runs the state-changes plot covers (the latest)."""

CHANGES: dict[str, tuple[str, ...]] = {
    "created": ("nodes_created",),
    "flagged dying": ("flagged_dying",),
    "died": ("made_dead", "merged"),
    "revived": ("revived",),
}
"""The plot's series: which counts of a patrol's steps move nodes between alive, dying and dead."""


@dataclass
class Bin:
    low: float
    high: float
    alive: int = 0
    dying: int = 0

    @property
    def total(self) -> int:
        return self.alive + self.dying


@dataclass
class ClusterBranch:
    id: str
    name: str
    alive: int
    total: int
    children: list[ClusterBranch] = field(default_factory=list)


@dataclass
class RunsPage:
    runs: list[Row]
    next_before: int | None
    """The cycle to pass as `before` for the next (older) page; None on the last."""


def beings(views: Views, only: UUID | None = None) -> list[Row]:
    """Every being (or only `only`) with its counts, mode and last patrol."""
    views.ensure(names=VIEWS)
    read = views.read
    counts = OverviewReads(read).counts_by_being(only)  # a being token's page counts its being only
    modes = {str(s["id"]): s["mode"] for s in views.sleep.states()}
    out = []
    for row in read.beings():
        if only is not None and row["id"] != str(only):
            continue
        out.append(
            {
                **row,
                **counts.get(row["id"], dict.fromkeys(COUNTS, 0)),
                "mode": modes.get(row["id"]) or "awake",
            }
        )
    return out


def effective_from_dying_cycle(dying_cycle: int, cycle: int) -> float:
    """A decaying node's effective importance at `cycle`, from the cycle it reaches 0.05: within a
    factor e^(±1/60) of the exact value (the middle of the cycle's decay); 0 once it reached it."""
    remaining = dying_cycle - cycle
    if remaining <= 0:
        return 0.0
    return min(1.0, decay.DYING_THRESHOLD * math.exp((remaining - 0.5) / decay.DECAY_SESSIONS))


def importance_histogram(
    decaying: Iterable[Row], pinned: Iterable[Row], cycle: int, bins: int = BINS
) -> list[Bin]:
    """Alive and dying nodes by effective importance (importance × e^(−sessions/30)) at the being's
    `cycle`, in `bins` equal bins over [0, 1]. A decaying node's value is read from its dying cycle
    d: it lies in (0.05·e^((d−cycle−1)/30), 0.05·e^((d−cycle)/30)], placed at the middle (ADR 0085);
    a pinned node does not decay: its importance."""
    out = [Bin(i / bins, (i + 1) / bins) for i in range(bins)]

    def add(value: float, status: str, n: int) -> None:
        slot = out[min(bins - 1, max(0, int(value * bins)))]
        if status == "dying":
            slot.dying += n
        else:
            slot.alive += n

    for g in decaying:
        add(effective_from_dying_cycle(g["dying_cycle"], cycle), g["status"], g["n"])
    for g in pinned:
        add(decay.clamp_importance(g["pct"] / 100), g.get("status", "active"), g["n"])
    return out


def state_changes(runs: Iterable[Row]) -> list[Row]:
    """Per patrol cycle (oldest first), how many nodes each run created, flagged dying, made dead
    (or merged away) and revived, from the counts its steps recorded."""
    out = []
    for run in sorted(runs, key=lambda r: r["cycle"]):
        counts: dict[str, int] = {}
        for step in run["steps"].values():
            for key, value in (step.get("counts") or {}).items():
                counts[key] = counts.get(key, 0) + int(value)
        out.append(
            {"cycle": run["cycle"], **{k: sum(counts.get(c, 0) for c in cs) for k, cs in CHANGES.items()}}
        )
    return out


def cluster_tree(clusters: list[Row]) -> list[ClusterBranch]:
    """Roots with the topics under them, the largest first; a topic whose parent is not among
    `clusters` hangs under its root."""
    branches = {
        c["id"]: ClusterBranch(c["id"], c["name"] or "", int(c["active_count"]), int(c["total_count"]))
        for c in clusters
    }
    roots = [branches[c["id"]] for c in clusters if c["is_root"]]
    for c in clusters:
        if c["is_root"]:
            continue
        parent = branches.get(c["parent_id"])
        if parent is not None and parent is not branches[c["id"]]:
            parent.children.append(branches[c["id"]])
    for b in branches.values():
        b.children.sort(key=lambda x: (-x.total, x.id))
    return roots


@dataclass
class Overview:
    being: Row
    counts: dict[str, int]
    mode: str
    tree: list[ClusterBranch]
    topics_hidden: int
    histogram: list[Bin]
    changes: list[Row]
    runs: RunsPage


def overview(views: Views, being_id: UUID, *, before: int | None = None, per_page: int = 10) -> Overview:
    """One being's overview; `before`: the patrol runs page of cycles before it (None: the latest)."""
    views.ensure(names=VIEWS, being=being_id)
    read = views.read
    reads = OverviewReads(read)
    row = read.being(being_id) or {"id": str(being_id), "name": "", "cycle": 0, "last_cycle_at": None}
    # Alive and dying nodes are counted by the histogram's scan of the decay index; one more scan
    # of the same index for their counts would double the page's cost at 100k nodes.
    counts = reads.counts_for(being_id, statuses=("dead",))
    histogram = importance_histogram(
        reads.decay_groups(being_id), reads.pinned_groups(being_id), int(row["cycle"] or 0)
    )
    counts.update(alive=sum(b.alive for b in histogram), dying=sum(b.dying for b in histogram))
    state = views.sleep.state(being_id)
    clusters = reads.largest_clusters(being_id, TOPICS_SHOWN)
    shown = sum(1 for c in clusters if not c["is_root"])
    latest = reads.patrol_runs(being_id, limit=SERIES_RUNS)
    page = (
        latest[: per_page + 1]
        if before is None
        else reads.patrol_runs(being_id, before=before, limit=per_page + 1)
    )
    more = len(page) > per_page
    page = page[:per_page]
    return Overview(
        being=row,
        counts=counts,
        mode=(state or {}).get("mode") or "awake",
        tree=cluster_tree(clusters),
        topics_hidden=max(0, counts["clusters"] - shown),
        histogram=histogram,
        changes=state_changes(latest),
        runs=RunsPage(page, page[-1]["cycle"] if more and page else None),
    )
