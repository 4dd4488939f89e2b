"""Inline SVG charts for the offline report: horizontal bars with sample spread, and a
history line chart. Plain strings, no dependencies."""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

FONT = "font-family='system-ui, -apple-system, Segoe UI, sans-serif'"
PALETTE = {"ours-cpu": "#2563eb", "ours-cuda": "#7c3aed", "ours-compile": "#2563eb", "llama.cpp": "#ea580c",
           "torch-eager": "#dc2626", "torch-compile": "#db2777", "torch-eager-cuda": "#b91c1c",
           "torch-compile-cuda": "#9d174d"}
MUTED = "#94a3b8"


def color(path: str) -> str:
    return PALETTE.get(path, "#0d9488")


def nice_ceiling(value: float) -> float:
    """A round axis end at or above value (1, 2, 2.5 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 2.5, 5, 10) if step * power >= value)


def fmt(value: float, unit: str) -> str:
    if value >= 1000 and unit == "ms":
        return f"{value / 1000:.2f} s"
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}" if value >= 10 else f"{value:.2f} {unit}"


@dataclass
class Bar:
    label: str
    path: str
    value: float | None          # None: no measurement (failed or skipped)
    samples: list[float]
    note: str = ""               # shown right of the bar (e.g. a ratio)
    missing: str = ""            # shown instead of a bar


def bar_chart(title: str, unit: str, bars: list[Bar], width: int = 500) -> str:
    """The axis ends near the largest median: an outlying sample (a recompile, a burst of
    load) is clipped at the edge with an arrow and its value, not allowed to flatten the bars."""
    label_w, right_w, row_h, top = 112, 140, 30, 30
    plot_w = width - label_w - right_w
    medians = [b.value for b in bars if b.value]
    cap = 2 * max(medians) if medians else 1.0
    values = [v for b in bars for v in ([b.value] if b.value else []) + b.samples if v <= cap]
    top_value = nice_ceiling(max(values) if values else 1.0)
    height = top + row_h * len(bars) + 26
    scale = plot_w / top_value
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' width='{width}' "
             f"height='{height}' role='img' aria-label='{escape(title)}' {FONT}>",
             f"<text x='0' y='16' font-size='13' font-weight='600' fill='#0f172a'>{escape(title)}</text>"]
    for i in range(5):  # grid and axis labels
        x = label_w + plot_w * i / 4
        parts.append(f"<line x1='{x:.1f}' y1='{top - 4}' x2='{x:.1f}' y2='{top + row_h * len(bars)}' "
                     f"stroke='#e2e8f0'/>")
        parts.append(f"<text x='{x:.1f}' y='{height - 8}' font-size='10' fill='#64748b' text-anchor='middle'>"
                     f"{escape(fmt(top_value * i / 4, unit))}</text>")
    for row, bar in enumerate(bars):
        y = top + row * row_h
        mid = y + row_h / 2
        parts.append(f"<text x='{label_w - 8}' y='{mid + 4:.1f}' font-size='12' fill='#334155' text-anchor='end'>"
                     f"{escape(bar.label)}</text>")
        if bar.value is None:
            parts.append(f"<text x='{label_w + 4}' y='{mid + 4:.1f}' font-size='11' fill='{MUTED}' "
                         f"font-style='italic'>{escape(bar.missing or 'no result')}</text>")
            continue
        c = color(bar.path)
        parts.append(f"<rect x='{label_w}' y='{y + 6}' width='{max(1.0, bar.value * scale):.1f}' "
                     f"height='{row_h - 12}' rx='3' fill='{c}' fill-opacity='0.85'><title>{escape(bar.label)}: "
                     f"median {escape(fmt(bar.value, unit))} of {len(bar.samples)} samples</title></rect>")
        if len(bar.samples) > 1:
            edge = label_w + plot_w
            lo = min(bar.samples) * scale + label_w
            hi = min(max(bar.samples) * scale + label_w, edge)
            parts.append(f"<line x1='{lo:.1f}' y1='{mid:.1f}' x2='{hi:.1f}' y2='{mid:.1f}' stroke='#0f172a' "
                         f"stroke-width='1.5'/>")
            parts.append(f"<line x1='{lo:.1f}' y1='{mid - 5:.1f}' x2='{lo:.1f}' y2='{mid + 5:.1f}' "
                         f"stroke='#0f172a' stroke-width='1.5'/>")
            if max(bar.samples) > top_value:
                parts.append(f"<path d='M{edge - 6:.1f},{mid - 5:.1f} L{edge:.1f},{mid:.1f} L{edge - 6:.1f},"
                             f"{mid + 5:.1f}' fill='none' stroke='#0f172a' stroke-width='1.5'><title>max "
                             f"{escape(fmt(max(bar.samples), unit))}, off the axis</title></path>")
            else:
                parts.append(f"<line x1='{hi:.1f}' y1='{mid - 5:.1f}' x2='{hi:.1f}' y2='{mid + 5:.1f}' "
                             f"stroke='#0f172a' stroke-width='1.5'/>")
            for sample in bar.samples:
                if sample <= top_value:
                    parts.append(f"<circle cx='{sample * scale + label_w:.1f}' cy='{mid:.1f}' r='2' "
                                 f"fill='#0f172a' fill-opacity='0.45'/>")
        parts.append(f"<text x='{label_w + plot_w + 8}' y='{mid + 4:.1f}' font-size='12' fill='#0f172a'>"
                     f"{escape(fmt(bar.value, unit))}"
                     + (f"<tspan fill='#64748b' font-size='11'> {escape(bar.note)}</tspan>" if bar.note else "")
                     + "</text>")
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class Point:
    label: str                   # x tick (a short commit)
    value: float
    low: float
    high: float
    tooltip: str


def line_chart(title: str, unit: str, series: dict[str, list[Point]], width: int = 500, height: int = 190) -> str:
    """One line per series over run order; a band shows each run's sample spread."""
    left, right, top, bottom = 62, 16, 30, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    points = [p for ps in series.values() for p in ps]
    top_value = nice_ceiling(max(p.high for p in points) if points else 1.0)
    count = max((len(ps) for ps in series.values()), default=1)

    def x(i: int) -> float:
        return left + (plot_w * i / (count - 1) if count > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h * (1 - v / top_value)

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' width='{width}' "
             f"height='{height}' role='img' aria-label='{escape(title)}' {FONT}>",
             f"<text x='0' y='16' font-size='13' font-weight='600' fill='#0f172a'>{escape(title)}</text>"]
    for i in range(5):
        v = top_value * i / 4
        parts.append(f"<line x1='{left}' y1='{y(v):.1f}' x2='{width - right}' y2='{y(v):.1f}' stroke='#e2e8f0'/>")
        parts.append(f"<text x='{left - 6}' y='{y(v) + 3:.1f}' font-size='10' fill='#64748b' text-anchor='end'>"
                     f"{escape(fmt(v, unit))}</text>")
    ticks = next(iter(series.values()), [])
    step = max(1, math.ceil(len(ticks) / 8))
    for i, p in enumerate(ticks):
        if i % step == 0 or i == len(ticks) - 1:
            parts.append(f"<text x='{x(i):.1f}' y='{height - bottom + 16}' font-size='10' fill='#64748b' "
                         f"text-anchor='middle'>{escape(p.label)}</text>")
    for name, ps in series.items():
        c = color(name)
        if len(ps) > 1:
            band = [f"{x(i):.1f},{y(p.high):.1f}" for i, p in enumerate(ps)]
            band += [f"{x(i):.1f},{y(p.low):.1f}" for i, p in reversed(list(enumerate(ps)))]
            parts.append(f"<polygon points='{' '.join(band)}' fill='{c}' fill-opacity='0.12'/>")
            line = " ".join(f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(ps))
            parts.append(f"<polyline points='{line}' fill='none' stroke='{c}' stroke-width='2'/>")
        for i, p in enumerate(ps):
            parts.append(f"<circle cx='{x(i):.1f}' cy='{y(p.value):.1f}' r='3.5' fill='{c}'>"
                         f"<title>{escape(p.tooltip)}</title></circle>")
    parts.append(f"<text x='{left + plot_w / 2:.1f}' y='{height - 6}' font-size='10' fill='#94a3b8' "
                 f"text-anchor='middle'>run (commit), oldest to newest</text>")
    parts.append("</svg>")
    return "".join(parts)
