"""The rollout as a picture for a change review: one row per node, a colour per phase over time,
a time axis, a legend and the verdict line. Plain SVG written by hand (no plotting library);
each bar carries a <title>, so a browser shows the node, phase and times on hover.

Pure (no I/O): `svg()` returns the document; `mcd_sim.fleet` writes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from html import escape
from typing import Any

from mcd_sim import nodephase
from mcd_sim.timeline import NodeTimeline

COLOURS = {
    nodephase.OLD: "#cfd8dc",
    nodephase.QUEUED: "#ffd54f",
    nodephase.UPDATING: "#64b5f6",
    nodephase.DRAINING: "#ff9800",
    nodephase.REBOOTING_PHASE: "#e53935",
    nodephase.DONE: "#66bb6a",
    nodephase.DEGRADED: "#6a1b9a",
}
LABELS = {
    nodephase.OLD: "on the old config",
    nodephase.QUEUED: "asked to move",
    nodephase.UPDATING: "updating",
    nodephase.DRAINING: "draining",
    nodephase.REBOOTING_PHASE: "rebooting",
    nodephase.DONE: "done",
    nodephase.DEGRADED: "degraded",
}
WIDTH = 960
LEFT = 120  # node names
RIGHT = 20
ROW = 18
BAR = 13
TOP = 56  # title and verdict
STRIP = 60  # the unavailable-nodes strip under the rows
STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


def tick_step(total: float, most: int = 10) -> float:
    """The smallest round step that puts at most `most` ticks on the axis."""
    return next((s for s in STEPS if total / s <= most), STEPS[-1])


def _num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _strip(
    series: list[tuple[float, int]], x: Callable[[float], float], top: int, limit: int, total: float
) -> list[str]:
    """Nodes unavailable over time as a step line, the limit as a dashed line above it."""
    most = max([limit, *(count for _, count in series)])

    def y(count: float) -> float:
        return top + STRIP - STRIP * count / most

    points = []
    for i, (t, count) in enumerate(series):
        end = series[i + 1][0] if i + 1 < len(series) else total
        points += [f"{x(t):.1f},{y(count):.1f}", f"{x(end):.1f},{y(count):.1f}"]
    return [
        f'<rect x="{x(0):.1f}" y="{top}" width="{x(total) - x(0):.1f}" height="{STRIP}" fill="#fafafa"/>',
        f'<line x1="{x(0):.1f}" y1="{y(limit):.1f}" x2="{x(total):.1f}" y2="{y(limit):.1f}" '
        'stroke="#e53935" stroke-dasharray="4 3"/>',
        f'<polyline points="{" ".join(points)}" fill="none" stroke="#1e88e5" stroke-width="1.5"/>',
        f'<text x="{LEFT - 8}" y="{top + STRIP - 14}" text-anchor="end">nodes</text>',
        f'<text x="{LEFT - 8}" y="{top + STRIP - 2}" text-anchor="end">unavailable</text>',
        f'<text x="{LEFT - 8}" y="{y(limit) + 4:.1f}" text-anchor="end" fill="#e53935">limit {limit}</text>',
    ]


def svg(
    tracks: list[NodeTimeline],
    total: float,
    *,
    title: str,
    limit: int,
    result: Mapping[str, Any],
    series: list[tuple[float, int]] | None = None,
) -> str:
    """`series`: (time, unavailable nodes) steps, drawn under the rows against the limit."""
    total = max(total, 1e-3)
    plot = WIDTH - LEFT - RIGHT
    strip = STRIP + 16 if series else 0
    height = TOP + ROW * len(tracks) + strip + 70

    def x(t: float) -> float:
        return LEFT + plot * min(max(t, 0.0), total) / total

    verdict = (
        f"at most {result.get('maxConcurrentlyUnavailable')} unavailable at once (limit {limit}); "
        f"PodDisruptionBudget violations: {result.get('pdbViolations', 0)}; "
        f"all Done: {'yes' if result.get('allDone') else 'NO'}; "
        f"pool Updated: {'yes' if result.get('poolUpdated') else 'NO'}; "
        f"{_num(float(result.get('totalSeconds') or total))} s"
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<text x="{LEFT}" y="38" fill="#333333">{escape(verdict)}</text>',
    ]
    bottom = TOP + ROW * len(tracks) + strip
    if series:
        out.extend(_strip(series, x, TOP + ROW * len(tracks) + 8, limit, total))
    step = tick_step(total)
    t = 0.0
    while t <= total + 1e-9:
        out.append(
            f'<line x1="{x(t):.1f}" y1="{TOP - 4}" x2="{x(t):.1f}" y2="{bottom + 4}" stroke="#eeeeee"/>'
        )
        out.append(f'<text x="{x(t):.1f}" y="{bottom + 18}" text-anchor="middle">{_num(t)}</text>')
        t += step
    out.append(
        f'<text x="{LEFT + plot / 2}" y="{bottom + 34}" text-anchor="middle" fill="#555555">'
        "seconds after the pool was pointed at the new config</text>"
    )
    for row, track in enumerate(tracks):
        y = TOP + row * ROW
        out.append(f'<text x="{LEFT - 8}" y="{y + BAR - 2}" text-anchor="end">{escape(track.name)}</text>')
        for seg in track.segments:
            width = max(x(seg.end) - x(seg.start), 0.5)
            tip = f"{track.name}: {LABELS.get(seg.phase, seg.phase)} {_num(seg.start)}-{_num(seg.end)} s"
            out.append(
                f'<rect x="{x(seg.start):.1f}" y="{y}" width="{width:.1f}" height="{BAR}" '
                f'fill="{COLOURS.get(seg.phase, "#000000")}"><title>{escape(tip)}</title></rect>'
            )
    legend_y = bottom + 50
    lx = float(LEFT)
    for phase in nodephase.PHASES:
        out.append(f'<rect x="{lx:.0f}" y="{legend_y}" width="12" height="12" fill="{COLOURS[phase]}"/>')
        out.append(f'<text x="{lx + 16:.0f}" y="{legend_y + 10}">{escape(LABELS[phase])}</text>')
        lx += 26 + 6.2 * len(LABELS[phase])
    out.append("</svg>")
    return "\n".join(out) + "\n"
