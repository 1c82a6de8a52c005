"""Plots drawn on the server as SVG (no charting script, nothing to fetch): the decay histogram and the
node state changes over patrol cycles of the being overview. Colours come from `static/ui.css`
(classes), text is escaped (`markupsafe.escape`), sizes are bounded by the data's (bins, runs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape

from engram.domain.decay import DYING_THRESHOLD

WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 34


def _svg(label: str, body: list[str], css: str) -> Markup:
    # Markup of our own building: every text in `body` and `label` went through `escape`.
    return Markup(  # noqa: S704
        f'<svg class="plot {css}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(label)}</title>{''.join(body)}</svg>"
    )


def _axes(top: int, x_ticks: Sequence[tuple[float, str]]) -> list[str]:
    """The frame, a y scale from 0 to `top` and the x ticks (position in plot pixels, label)."""
    base = HEIGHT - BOTTOM
    out = [
        f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}"/>',
        f'<text class="tick" x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end">{top:,}</text>',
        f'<text class="tick" x="{LEFT - 6}" y="{base}" text-anchor="end">0</text>',
    ]
    for x, text in x_ticks:
        out.append(
            f'<text class="tick" x="{x:.1f}" y="{base + 14}" text-anchor="middle">{escape(text)}</text>'
        )
    return out


def importance_histogram(bins: Sequence[Any]) -> Markup:
    """Stacked bars (alive, dying) of nodes per effective importance bin over [0, 1], with the dying
    threshold marked. `bins`: objects with `low`, `high`, `alive`, `dying` and `total`."""
    top = max([b.total for b in bins] + [1])
    span, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    width = span / max(1, len(bins))
    base = HEIGHT - BOTTOM
    body = _axes(top, [(LEFT + span * t, f"{t:g}") for t in (0, 0.25, 0.5, 0.75, 1)])
    for i, b in enumerate(bins):
        x = LEFT + i * width
        alive_h, dying_h = height * b.alive / top, height * b.dying / top
        tip = f"{b.low:.2f}–{b.high:.2f}: {b.alive:,} alive, {b.dying:,} dying"
        body.append(
            f'<g class="bin"><title>{escape(tip)}</title>'
            f'<rect class="alive" x="{x + 1:.1f}" y="{base - alive_h:.1f}" width="{width - 2:.1f}" '
            f'height="{alive_h:.1f}"/>'
            f'<rect class="dying" x="{x + 1:.1f}" y="{base - alive_h - dying_h:.1f}" width="{width - 2:.1f}" '
            f'height="{dying_h:.1f}"/></g>'
        )
    line = LEFT + span * DYING_THRESHOLD
    body.append(f'<line class="threshold" x1="{line:.1f}" y1="{TOP}" x2="{line:.1f}" y2="{base}"/>')
    body.append(
        f'<text class="tick" x="{WIDTH - RIGHT}" y="{HEIGHT - 4}" text-anchor="end">effective importance '
        f"(dying at ≤ {DYING_THRESHOLD:g})</text>"
    )
    total = sum(b.total for b in bins)
    return _svg(f"Effective importance of {total:,} alive and dying nodes", body, "histogram")


def series_plot(points: Sequence[dict[str, Any]], series: Sequence[str], x_key: str = "cycle") -> Markup:
    """One line per name of `series` over the points' `x_key` (patrol cycles), with a legend."""
    top = max([int(p[s]) for p in points for s in series] + [1])
    span, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    base = HEIGHT - BOTTOM
    step = span / max(1, len(points) - 1)

    def x(i: int) -> float:
        return LEFT + (i * step if len(points) > 1 else span / 2)

    shown = sorted({0, len(points) - 1, len(points) // 2}) if points else []
    body = _axes(top, [(x(i), f"cycle {points[i][x_key]}") for i in shown])
    for k, name in enumerate(series):
        coords = [(x(i), base - height * int(p[name]) / top) for i, p in enumerate(points)]
        css = f"s{k}"
        if len(coords) > 1:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in coords)
            body.append(f'<polyline class="line {css}" points="{path}"/>')
        for (a, b), p in zip(coords, points, strict=True):
            tip = f"cycle {p[x_key]}: {int(p[name]):,} {name}"
            body.append(
                f'<circle class="dot {css}" cx="{a:.1f}" cy="{b:.1f}" r="2.5"><title>{escape(tip)}</title></circle>'
            )
        legend_x = LEFT + 10 + k * 120
        body.append(f'<rect class="key {css}" x="{legend_x}" y="{TOP}" width="10" height="10"/>')
        body.append(f'<text class="tick" x="{legend_x + 14}" y="{TOP + 9}">{escape(name)}</text>')
    return _svg(f"Node state changes over {len(points)} patrol cycles", body, "series")
