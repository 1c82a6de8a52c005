"""The being overview's pure parts: the decay histogram, the state changes per patrol, the cluster
tree, and the SVG plots drawn from them (escaped, bounded)."""

from __future__ import annotations

import math
import re

from engram.adapters.ui import plots
from engram.domain import decay
from engram.services.being_overview import (
    cluster_tree,
    effective_from_dying_cycle,
    importance_histogram,
    state_changes,
)


def test_the_histogram_places_nodes_by_effective_importance_at_the_beings_cycle() -> None:
    def node(importance: float, last: int, status: str = "active") -> dict[str, object]:
        return {"status": status, "dying_cycle": decay.dying_cycle(importance, last), "n": 1}

    decaying = [
        *[node(0.9, 10)] * 7,  # read at cycle 10, now 40: 0.9 e^-1 = 0.331 -> bin 6 (0.30-0.35)
        *[node(0.05, 0, "dying")] * 3,  # at the threshold long ago -> bin 0
        node(1.0, 40),  # importance 1 read now: the last bin, not past it
    ]
    pinned = [{"pct": 90, "n": 2}]  # pinned: no decay -> bin 18 (0.90-0.95)
    bins = importance_histogram(decaying, pinned, cycle=40)
    assert len(bins) == 20
    assert int(0.9 * math.exp(-1) * 20) == 6
    assert (bins[6].alive, bins[18].alive, bins[0].dying, bins[19].alive) == (7, 2, 3, 1)
    assert sum(b.total for b in bins) == 13


def test_the_value_read_from_the_dying_cycle_is_within_half_a_cycles_decay() -> None:
    for pct in range(6, 101, 3):
        for last in (0, 7, 50):
            for cycle in range(last, last + 100, 9):
                importance = pct / 100
                exact = decay.effective_importance(importance, cycle - last)
                estimate = effective_from_dying_cycle(decay.dying_cycle(importance, last), cycle)
                if decay.is_at_or_below_threshold(importance, cycle - last):
                    assert estimate == 0.0
                else:
                    assert math.exp(-1 / 60) - 1e-9 <= estimate / exact <= math.exp(1 / 60) + 1e-9


def test_state_changes_sum_each_runs_step_counts_oldest_first() -> None:
    runs = [
        {
            "cycle": 2,
            "steps": {
                "flag_dying": {"counts": {"flagged_dying": 4}},
                "consolidate": {"counts": {"made_dead": 1, "merged": 2}},
            },
        },
        {
            "cycle": 1,
            "steps": {"notes_to_nodes": {"counts": {"nodes_created": 9}}, "split": {"state": "skipped"}},
        },
    ]
    assert state_changes(runs) == [
        {"cycle": 1, "created": 9, "flagged dying": 0, "died": 0, "revived": 0},
        {"cycle": 2, "created": 0, "flagged dying": 4, "died": 3, "revived": 0},
    ]


def test_the_tree_hangs_topics_under_their_parents_the_largest_first() -> None:
    def c(id: str, parent: str, root: bool, total: int) -> dict[str, object]:
        return {
            "id": id,
            "name": id,
            "parent_id": parent,
            "is_root": root,
            "active_count": total,
            "total_count": total,
        }

    tree = cluster_tree(
        [
            c("r", "r", True, 0),
            c("a", "r", False, 2),
            c("b", "r", False, 5),
            c("x", "a", False, 1),
            c("lost", "gone", False, 9),
        ]
    )
    assert [r.id for r in tree] == ["r"]
    assert [t.id for t in tree[0].children] == ["b", "a"]
    assert [t.id for t in tree[0].children[1].children] == ["x"]


def test_plots_are_svg_with_escaped_text() -> None:
    bins = importance_histogram([], [{"pct": 50, "n": 4}], cycle=0)
    svg = str(plots.importance_histogram(bins))
    assert svg.startswith('<svg class="plot histogram"') and svg.count('<rect class="alive"') == 20
    assert "0.50–0.55: 4 alive, 0 dying" in svg
    series = str(plots.series_plot([{"cycle": 1, "<b>x</b>": 3}, {"cycle": 2, "<b>x</b>": 1}], ["<b>x</b>"]))
    assert "<b>" not in series and "&lt;b&gt;x&lt;/b&gt;" in series
    assert len(re.findall(r"<circle", series)) == 2 and "<polyline" in series


def test_an_empty_being_still_draws_its_axes() -> None:
    svg = str(plots.importance_histogram(importance_histogram([], [], cycle=0)))
    assert "Effective importance of 0 alive and dying nodes" in svg
    assert "<polyline" not in str(plots.series_plot([{"cycle": 1, "created": 0}], ["created"]))
