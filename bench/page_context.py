"""The contextual-vectors sections of docs/benchmarks.md (issue #15, docs/recall.md "Memory side").

Result files: `locomo-context.json` (dense alone, `engram bench locomo-context`),
`locomo-context-logic.json` (the full ranking, `engram bench locomo-context-logic`) and
`locomo-pieces.json` (a memory's text in pieces, both stages, `engram bench locomo-pieces`).
"""

from __future__ import annotations

from typing import Any

from bench.page import Result, _r10, _section, table, variant_table

CATEGORIES = ("1", "2", "3", "4")


def _code(name: str) -> str:
    """Today's variant names its text `<date> <text>`: code, or a page would read it as HTML tags."""
    return name.replace("<date> <text>", "`<date> <text>`")


def dense(r: Result) -> str:
    variants: dict[str, Any] = r["variants"]
    convs = list(next(iter(variants.values()))["conversations"])
    header = ["variant", "R@5", "R@10", "±", *[f"R@10 c{c}" for c in CATEGORIES], *convs]
    rows = [
        [
            _code(name),
            f"{v['overall']['recall']['5']:.3f}",
            f"{v['overall']['recall']['10']:.3f}",
            f"{v['overall']['ci95']['10']:.3f}",
            *[_r10(v["categories"].get(c)) for c in CATEGORIES],
            *[f"{v['conversations'][c]['recall']['10']:.3f}" for c in convs],
        ]
        for name, v in variants.items()
    ]
    body = [
        f"Dense retrieval alone ({r['embedding_model']}): each turn embedded with its neighbours in the "
        "same session, as its only vector or as a second one beside today's `<date> <text>` (a memory "
        "scores the max or the sum of its two cosines); the questions as `query` embeds them. ± is the "
        '95 % interval of R@10. Verdict in docs/recall.md, "Memory side".',
        table(header, rows, "l" + "r" * (len(header) - 1)),
    ]
    return _section("LoCoMo: contextual vectors, dense alone", "engram bench locomo-context -- PATH", r, body)


def ranking(r: Result) -> str:
    variants: dict[str, Any] = r["variants"]
    convs = list(next(iter(variants.values()))["conversations"])
    chosen = ", ".join(f"{c}: {n}" for c, n in r.get("cross_validation", {}).items())
    body = [
        f"{r['dataset']['questions']} scored questions; the default profile's `rank` (fusion, speaker "
        "weight) over each question's lexical candidates and a semantic channel of exact cosines under "
        "each variant (`bench/locomo_context_logic.py`); ± is the 95 % interval of R@10. The last row "
        f"scores on each conversation the variant chosen on the other four: {chosen}.",
        variant_table(variants, CATEGORIES, convs),
    ]
    return _section(
        "LoCoMo: contextual vectors in the full ranking",
        "engram bench locomo-context-logic -- PATH --reuse-data DIR --cache DIR",
        r,
        body,
    )


def _gain(g: list[float]) -> str:
    mean, lo, hi = g
    return f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def pieces(r: Result) -> str:
    variants: dict[str, Any] = r["variants"]
    convs = list(next(iter(variants.values()))["conversations"])
    dense_rows = {n: v for n, v in variants.items() if n.startswith("dense,")}
    full_rows = {n: v for n, v in variants.items() if not n.startswith("dense,")}
    chosen = ", ".join(f"{c}: {n}" for c, n in r.get("cross_validation", {}).items())
    cost = table(
        ["split", "memories cut", "extra vectors per memory", "tokens embedded (x the turn's)"],
        [
            [
                name,
                f"{c['split']} of {c['memories']}",
                f"{c['extra_per_memory']:.2f}",
                f"{c['tokens_ratio']:.2f}",
            ]
            for name, c in r["cost"].items()
        ],
        "lrrr",
    )
    gains = table(
        [
            "variant (gain over today's, paired 95 % interval)",
            "R@5",
            "R@10",
            "multi-hop R@10",
            "openers R@10",
        ],
        [
            [
                name,
                _gain(g["overall"]["5"]),
                _gain(g["overall"]["10"]),
                _gain(g["1"]["10"]),
                _gain(g["openers"]["10"]) if "openers" in g else "–",
            ]
            for name, g in r["paired"].items()
        ],
        "lrrrr",
    )
    body = [
        f"{r['dataset']['questions']} scored questions ({r['embedding_model']}). A memory's text cut into "
        "sentences or into pieces of at most N tokens, each piece embedded as `<date> <piece>`; a memory "
        "scores its best piece, alone, with its whole-turn vector (max), or in a blend. First the dense "
        "channel alone (its top 10), then the default profile's `rank` over the same cosines "
        "(`bench/locomo_pieces.py`); ± is the 95 % interval of R@10. The last row scores on each "
        f"conversation the variant chosen on the other four: {chosen}. Openers: the questions with a "
        "session's first turn among their evidence. Verdict in docs/recall.md, "
        '"Memory side: finer pieces".',
        cost,
        variant_table(dense_rows, CATEGORIES, convs),
        variant_table(full_rows, CATEGORIES, convs),
        gains,
    ]
    return _section(
        "LoCoMo: finer pieces (a memory scores its best piece)",
        "engram bench locomo-pieces -- PATH --reuse-data DIR --cache DIR",
        r,
        body,
    )


def render(results: dict[str, Result]) -> str | None:
    parts = []
    if "locomo-context" in results:
        parts.append(dense(results["locomo-context"]))
    if "locomo-context-logic" in results:
        parts.append(ranking(results["locomo-context-logic"]))
    if "locomo-pieces" in results:
        parts.append(pieces(results["locomo-pieces"]))
    return "\n\n".join(parts) if parts else None
