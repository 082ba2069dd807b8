"""Plots as hand-written inline SVG: a line chart over time, a scatter, a bar chart.

Why not matplotlib: the report's plots are three simple kinds, and SVG written here is a few
hundred bytes per curve, deterministic, needs no extra package (nor a font cache or a backend),
and stays sharp when printed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from html import escape

WIDTH, HEIGHT = 520, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 10, 10, 28
COLORS = {"read": "#1f77b4", "write": "#d62728"}
PHASE_FILLS = ("#f2f2f2", "#e3ecf7", "#f7ece3", "#e8f4e3", "#f3e3f4")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g}"


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


class _Frame:
    def __init__(self, x0: float, x1: float, y0: float, y1: float) -> None:
        self.x0, self.x1 = x0, x1 if x1 > x0 else x0 + 1
        self.y0, self.y1 = y0, y1 if y1 > y0 else y0 + 1

    def x(self, value: float) -> float:
        return LEFT + (value - self.x0) / (self.x1 - self.x0) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (value - self.y0) / (self.y1 - self.y0) * (HEIGHT - TOP - BOTTOM)


def _svg(title: str, body: list[str]) -> str:
    return (
        f'<svg class="plot" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _axes(
    frame: _Frame, x_label: str, y_ticks: Sequence[float], x_ticks: Sequence[tuple[float, str]]
) -> list[str]:
    out = [
        f'<line class="axis" x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}"/>',
    ]
    for tick in y_ticks:
        y = frame.y(tick)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}"/>')
        out.append(f'<text x="{LEFT - 4}" y="{y + 3:.1f}" text-anchor="end">{_ms(tick)}</text>')
    for value, text in x_ticks:
        out.append(
            f'<text x="{frame.x(value):.1f}" y="{HEIGHT - 12}" text-anchor="middle">{escape(text)}</text>'
        )
    out.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 1}" text-anchor="end">{escape(x_label)}</text>')
    out.append(f'<text x="2" y="{TOP + 8}">ms</text>')
    return out


def timeline(
    title: str,
    curves: dict[str, list[tuple[float, float]]],
    goal: float | None,
    phases: Sequence[tuple[str, float, float]],
    start: float,
    end: float,
) -> str:
    """Latency per op over time, the goal as a dashed line (none for a LUN not judged), the phases shaded."""
    values = [v for points in curves.values() for _, v in points]
    top = max([goal * 1.25 if goal is not None else 0.0, *values]) or 0.001
    frame = _Frame(start, end, 0.0, top * 1.05)
    body = []
    for i, (name, begin, finish) in enumerate(phases):
        x0, x1 = frame.x(begin), frame.x(finish)
        body.append(
            f'<rect class="phase" x="{x0:.1f}" y="{TOP}" width="{x1 - x0:.1f}" height="{HEIGHT - TOP - BOTTOM}" '
            f'fill="{PHASE_FILLS[i % len(PHASE_FILLS)]}"><title>{escape(name)}</title></rect>'
            f'<text class="phase-name" x="{x0 + 3:.1f}" y="{TOP + 10}">{escape(name)}</text>'
        )
    x_ticks = [(t, datetime.fromtimestamp(t).astimezone().strftime("%H:%M")) for t in _ticks(start, end)]
    body += _axes(frame, "time", _ticks(0.0, top * 1.05), x_ticks)
    if goal is not None:
        goal_y = frame.y(goal)
        body.append(
            f'<line class="goal" x1="{LEFT}" y1="{goal_y:.1f}" x2="{WIDTH - RIGHT}" y2="{goal_y:.1f}"/>'
            f'<text class="goal-label" x="{WIDTH - RIGHT - 2}" y="{goal_y - 3:.1f}" text-anchor="end">goal {_ms(goal)} ms</text>'
        )
    for op, points in curves.items():
        if points:
            path = " ".join(f"{frame.x(t):.1f},{frame.y(v):.1f}" for t, v in points)
            body.append(f'<polyline class="curve" stroke="{COLORS.get(op, "#444")}" points="{path}"/>')
    legend = " ".join(
        f'<tspan fill="{COLORS.get(op, "#444")}">■ {escape(op)}</tspan>' for op in curves if curves[op]
    )
    body.append(f'<text x="{LEFT + 4}" y="{HEIGHT - BOTTOM - 4}">{legend}</text>')
    return _svg(title, body)


def scatter(title: str, points: dict[str, list[tuple[float, float]]], goal: float | None) -> str:
    """Latency (y) against IOPS (x), one dot per step and op; the goal as a line where one judges."""
    xs = [x for pts in points.values() for x, _ in pts] or [1.0]
    ys = [y for pts in points.values() for _, y in pts] or [goal or 0.001]
    frame = _Frame(0.0, max(xs) * 1.05, 0.0, (max(goal * 1.25 if goal else 0.0, *ys) or 0.001) * 1.05)
    body = _axes(
        frame,
        "IOPS",
        _ticks(0.0, frame.y1),
        [(t, f"{t:g}") for t in _ticks(0.0, frame.x1)],
    )
    if goal is not None:
        goal_y = frame.y(goal)
        body.append(
            f'<line class="goal" x1="{LEFT}" y1="{goal_y:.1f}" x2="{WIDTH - RIGHT}" y2="{goal_y:.1f}"/>'
        )
    for op, pts in points.items():
        color = COLORS.get(op, "#444")
        body += [
            f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="2" fill="{color}" fill-opacity="0.5"/>'
            for x, y in pts
        ]
    return _svg(title, body)


def bars(title: str, buckets: list[tuple[float, float]], goal: float) -> str:
    """A histogram: one bar per bucket (upper bound), the share of events in it."""
    total = sum(c for _, c in buckets) or 1.0
    shares = [(le, c / total) for le, c in buckets]
    width = (WIDTH - LEFT - RIGHT) / max(1, len(shares))
    frame = _Frame(0.0, float(len(shares)), 0.0, max(s for _, s in shares) * 1.1 or 1.0)
    body = [
        f'<line class="axis" x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}"/>',
        f'<text x="2" y="{TOP + 8}">share</text>',
    ]
    for i, (le, share) in enumerate(shares):
        x, y = frame.x(i), frame.y(share)
        color = "#d62728" if le > goal else "#2ca02c"
        label = "+Inf" if math.isinf(le) else _ms(le)
        body.append(
            f'<rect class="bar" x="{x + 1:.1f}" y="{y:.1f}" width="{max(1.0, width - 2):.1f}" '
            f'height="{HEIGHT - BOTTOM - y:.1f}" fill="{color}"><title>≤ {label} ms: {share:.1%}</title></rect>'
        )
        if i % max(1, len(shares) // 8) == 0:
            body.append(
                f'<text x="{x + width / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle">{label}</text>'
            )
    body.append(
        f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 1}" text-anchor="end">bucket upper bound, ms (red: above the goal)</text>'
    )
    return _svg(title, body)
