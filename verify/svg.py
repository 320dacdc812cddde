"""Plots for ``report.html`` drawn as inline SVG text: no plotting dependency, no external
resources, the same bytes for the same data.

:func:`heatmap` (attention patterns, labelled, values on hover, a log scale for spread
mass), :func:`line_plot` (accuracy by position) and
:func:`bar_plot` (margins; on a log axis a zero is marked as "0", never drawn as a tiny bar),
:func:`layout_map` (the residual stream's layout: who reads and writes each named subspace).
"""

from __future__ import annotations

import html
import math
from typing import Sequence

import numpy as np

VIRIDIS = ((0x44, 0x01, 0x54), (0x3b, 0x52, 0x8b), (0x21, 0x91, 0x8c), (0x5e, 0xc9, 0x62), (0xfd, 0xe7, 0x25))
"""Anchor colours of the viridis map at 0, 1/4, 1/2, 3/4, 1 (interpolated linearly)."""
FONT = 'font-family="system-ui,Helvetica,Arial,sans-serif"'


def colour(v: float) -> str:
    """The viridis colour of ``v`` in [0, 1] (clipped) as ``#rrggbb``."""
    v = min(max(float(v), 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(v), len(VIRIDIS) - 2)
    f = v - i
    return "#" + "".join(f"{round(a + (b - a) * f):02x}" for a, b in zip(VIRIDIS[i], VIRIDIS[i + 1]))


def _text(x: float, y: float, s: str, size: int = 10, anchor: str = "middle", extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" {FONT} {extra}>'
            f"{html.escape(s)}</text>")


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values in [lo, hi]."""
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    start = math.ceil(lo / step) * step
    return [round(start + k * step, 12) for k in range(int((hi - start) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    return f"{v:g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.0e}"


LOG_DECADES = 3
"""A log-scale heatmap spans 10^-LOG_DECADES .. 1."""


def shade(v: float, log: bool = False) -> str:
    """The colour of an attention weight ``v``: linear in [0, 1], or (``log``) linear in
    log10(v) over :data:`LOG_DECADES` decades (below them: the colour of 0)."""
    if not log:
        return colour(v)
    return colour(0.0) if v <= 0 else colour(1 + math.log10(v) / LOG_DECADES)


def spread(matrix: np.ndarray) -> bool:
    """Is the mass spread: in most rows over a tenth of it off the row's largest weight (prefix
    means and the like, which a linear scale shows as near-black)?"""
    return bool(np.median(1 - matrix.max(axis=1)) > 0.1)


def _axis_labels(labels: Sequence[str], left: float, top: float, cell: float) -> list[str]:
    """Position labels (thinned to about 32) left of the rows and above the columns."""
    step = max(1, math.ceil(len(labels) / 32))
    size = max(6, min(9, int(cell * 0.9 * step)))
    out = []
    for k in range(0, len(labels), step):
        name = labels[k][:6]
        out.append(_text(left - 2, top + (k + 0.7) * cell, name, size, anchor="end"))
        x, y = left + (k + 0.5) * cell, top - 3
        out.append(_text(x, y, name, size, anchor="start", extra=f'transform="rotate(-60 {x:.1f} {y:.1f})"'))
    return out


def heatmap(matrix: np.ndarray, title: str, labels: Sequence[str] | None = None, size: int = 320,
            log: bool = False) -> str:
    """A [rows, cols] matrix of values in [0, 1] (an attention pattern: row = query, column = key)
    as an SVG square of ``size`` pixels, 0 = dark violet, 1 = yellow (``log``: on a log scale,
    see :func:`shade`), each cell's value on hover (its ``<title>``), the positions labelled
    with ``labels`` when given.  Cells indistinguishable from 0 in the colour map are the
    background (so the causal upper triangle costs nothing)."""
    rows, cols = matrix.shape
    cell = size / max(rows, cols)
    left, top = (44, 46) if labels is not None else (26, 18)
    w, h = left + cols * cell + 4, top + rows * cell + 16
    zero = colour(0.0)
    name = (lambda k: f"{k} {labels[k]}") if labels is not None else str
    out = [f'<svg width="{w:.0f}" height="{h:.0f}" '
           f'viewBox="0 0 {w:.1f} {h:.1f}" role="img"><title>{html.escape(title)}</title>',
           _text(left + cols * cell / 2, 12, title + (" (log colour)" if log else ""), 10),
           f'<rect x="{left}" y="{top}" width="{cols * cell:.2f}" height="{rows * cell:.2f}" fill="{zero}"/>']
    if labels is not None:
        out += _axis_labels(labels, left, top, cell)
    for r in range(rows):
        for c in range(cols):
            fill = shade(matrix[r, c], log)
            if fill != zero:
                tip = html.escape(f"query {name(r)}, key {name(c)}: {matrix[r, c]:.4g}")
                out.append(f'<rect x="{left + c * cell:.2f}" y="{top + r * cell:.2f}" width="{cell + 0.05:.2f}" '
                           f'height="{cell + 0.05:.2f}" fill="{fill}"><title>{tip}</title></rect>')
    out.append(_text(left + cols * cell / 2, h - 3, "key", 9))
    out.append(_text(10, top + rows * cell / 2, "query", 9, extra=f'transform="rotate(-90 10 {top + rows * cell / 2:.1f})"'))
    out.append("</svg>")
    return "".join(out)


def colour_bar(width: int = 180) -> str:
    """The heatmaps' legend: 0 to 1."""
    steps = 32
    out = [f'<svg width="{width + 40}" height="30" role="img">'
           f"<title>attention weight, 0 to 1</title>"]
    for k in range(steps):
        out.append(f'<rect x="{20 + k * width / steps:.2f}" y="2" width="{width / steps + 0.05:.2f}" height="10" '
                   f'fill="{colour(k / (steps - 1))}"/>')
    out += [_text(20, 25, "0", 9), _text(20 + width / 2, 25, "attention weight", 9), _text(20 + width, 25, "1", 9),
            "</svg>"]
    return "".join(out)


class _Axes:
    """A plot area mapping data to pixels (y up), with its frame, ticks and labels."""

    def __init__(self, width: int, height: int, x: tuple[float, float], y: tuple[float, float], log_y: bool = False):
        self.W, self.H, self.left, self.right, self.top, self.bottom = width, height, 58, 12, 24, 36
        self.x0, self.x1 = x
        self.log = log_y
        self.y0, self.y1 = (math.log10(y[0]), math.log10(y[1])) if log_y else y

    def px(self, x: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return self.left + (x - self.x0) / span * (self.W - self.left - self.right)

    def py(self, y: float) -> float:
        v = math.log10(y) if self.log else y
        span = (self.y1 - self.y0) or 1.0
        return self.H - self.bottom - (v - self.y0) / span * (self.H - self.top - self.bottom)

    def frame(self, title: str, xlabel: str, ylabel: str, xticks: Sequence[float] | None = None) -> list[str]:
        L, R, T, B = self.left, self.W - self.right, self.top, self.H - self.bottom
        out = [f'<svg width="{self.W}" height="{self.H}" role="img">'
               f"<title>{html.escape(title)}</title>",
               f'<rect x="{L}" y="{T}" width="{R - L}" height="{B - T}" fill="#fff" stroke="#888"/>',
               _text((L + R) / 2, 15, title, 11), _text((L + R) / 2, self.H - 4, xlabel, 10),
               _text(12, (T + B) / 2, ylabel, 10, extra=f'transform="rotate(-90 12 {(T + B) / 2:.1f})"')]
        every = max(1, math.ceil((self.y1 - self.y0) / 6))  # at most about 6 decades labelled
        yt = ([10.0 ** k for k in range(math.ceil(self.y0), math.floor(self.y1) + 1, every)] if self.log
              else _ticks(self.y0, self.y1))
        for v in yt:
            y = self.py(v)
            out.append(f'<line x1="{L - 4}" y1="{y:.1f}" x2="{R}" y2="{y:.1f}" stroke="#ddd"/>')
            out.append(_text(L - 6, y + 3, _fmt(v), 9, "end"))
        for v in (xticks if xticks is not None else _ticks(self.x0, self.x1, 8)):
            x = self.px(v)
            out.append(f'<line x1="{x:.1f}" y1="{B}" x2="{x:.1f}" y2="{B + 4}" stroke="#888"/>')
            out.append(_text(x, B + 14, _fmt(v), 9))
        return out


def line_plot(y: Sequence[float], title: str, xlabel: str, ylabel: str, *, y_range: tuple[float, float],
              width: int = 760, height: int = 220, colour_: str = "#1f77b4") -> str:
    """``y[i]`` against i + 1 (positions 1..n) as a line."""
    n = len(y)
    ax = _Axes(width, height, (1, max(n, 2)), y_range)
    out = ax.frame(title, xlabel, ylabel)
    pts = " ".join(f"{ax.px(i + 1):.1f},{ax.py(min(max(v, y_range[0]), y_range[1])):.1f}" for i, v in enumerate(y))
    out.append(f'<polyline points="{pts}" fill="none" stroke="{colour_}" stroke-width="1.5"/>')
    out.append("</svg>")
    return "".join(out)


def bar_plot(values: Sequence[float | None], title: str, xlabel: str, ylabel: str, *, log: bool = False,
             marks: Sequence[float | None] | None = None, width: int = 440, height: int = 220,
             colours: Sequence[str] | None = None) -> str:
    """One bar per value (index on x).  ``log``: a log axis spanning the positive values (and
    ``marks``); a zero or missing value gets no bar, only a "0" (or "–") label at the axis.
    ``marks``: a black tick per bar (e.g. a derived bound)."""
    n = len(values)
    marks = list(marks) if marks is not None else [None] * n
    finite = [v for v in list(values) + marks if v is not None and np.isfinite(v)]
    if log:
        pos = [v for v in finite if v > 0] or [1.0]
        y_range = (10.0 ** (math.floor(math.log10(min(pos))) - 1), 10.0 ** math.ceil(math.log10(max(pos)) + 1e-12))
        if y_range[0] == y_range[1]:
            y_range = (y_range[0] / 10, y_range[1] * 10)
    else:
        lo, hi = min(finite + [0.0]), max(finite + [1.0])
        y_range = (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    ax = _Axes(width, height, (-0.5, n - 0.5), y_range, log_y=log)
    ticks = list(range(n)) if n <= 24 else list(range(0, n, max(1, n // 12)))
    out = ax.frame(title, xlabel, ylabel, ticks)
    bw = 0.7 * (ax.px(1) - ax.px(0)) if n > 1 else 40
    base = y_range[0] if log else 0.0
    for i, v in enumerate(values):
        x = ax.px(i)
        if v is None or not np.isfinite(v) or (log and v <= 0):
            out.append(_text(x, ax.py(base) - 4, "–" if v is None else "0", 9))
            continue
        y0, y1 = ax.py(base), ax.py(v)
        fill = colours[i] if colours is not None else "#d62728"
        out.append(f'<rect x="{x - bw / 2:.1f}" y="{min(y0, y1):.1f}" width="{bw:.1f}" height="{abs(y0 - y1):.1f}" '
                   f'fill="{fill}"><title>{html.escape(f"{i}: {v:.3g}")}</title></rect>')
    for i, m in enumerate(marks):
        if m is not None and np.isfinite(m) and (m > 0 or not log):
            y = ax.py(m)
            out.append(f'<line x1="{ax.px(i) - bw / 2 - 2:.1f}" y1="{y:.1f}" x2="{ax.px(i) + bw / 2 + 2:.1f}" '
                       f'y2="{y:.1f}" stroke="#000" stroke-width="2"/>')
    if not log:
        out.append(f'<line x1="{ax.left}" y1="{ax.py(0):.1f}" x2="{ax.W - ax.right}" y2="{ax.py(0):.1f}" stroke="#000"/>')
    out.append("</svg>")
    return "".join(out)


LAYOUT_COLOURS = {"read": ("#9ecae1", "read"), "write": ("#e6550d", "written"),
                  "read, write": ("#8856a7", "read and written")}
"""A residual-layout cell's colour and legend: read only, written only, both."""


def _dims_label(dims: Sequence[int]) -> str:
    """``[3, 4, 5]`` as ``3-5``; other sets as their first and last (``0..9``) or one number."""
    if not dims:
        return "-"
    lo, hi = min(dims), max(dims)
    return str(lo) if lo == hi else (f"{lo}-{hi}" if hi - lo + 1 == len(dims) else f"{lo}..{hi}")


def _layout_uses(layout: dict, name: str) -> list[tuple[str, list[str], list[str]]]:
    """For each layer's attention, then its MLP: (column title, who reads ``name`` there, who writes it)."""
    cols = []
    for block in layout["blocks"]:
        l = block["layer"] + 1
        reads = [f"head {h['index']} {h['name']} ({role})" for h in block["heads"]
                 for role in ("query", "key", "value") if name in h["reads"][role]]
        writes = [f"head {h['index']} {h['name']}" for h in block["heads"] if name in h["writes"]]
        cols.append((f"L{l} attention", reads, writes))
        m = block["mlp"]
        cols.append((f"L{l} MLP", [m["name"]] if m is not None and name in m["reads"] else [],
                     [m["name"]] if m is not None and name in m["writes"] else []))
    return cols


def layout_map(layout: dict, cell: int = 16) -> str:
    """The residual stream's layout (``model.layout()``, what ``shortcut info --layout`` prints)
    as a grid: a row per named subspace (in the order of its dims, labelled with them), two
    columns per layer (its attention, its MLP); a cell is coloured by whether that part reads the
    subspace, writes it or both (:data:`LAYOUT_COLOURS`), and says who on hover."""
    subspaces = sorted(layout["subspaces"].items(), key=lambda kv: min(kv[1]["dims"], default=-1))
    labels = [f"{name[:32]}  [{_dims_label(s['dims'])}]" for name, s in subspaces]
    n_cols = 2 * len(layout["blocks"])
    left = 12 + 6 * max((len(s) for s in labels), default=4)
    top = 58
    legend_w = sum(30 + 6 * len(legend) for _, legend in LAYOUT_COLOURS.values())
    w, h = max(left + n_cols * cell + 8, 8 + legend_w), top + len(labels) * cell + 30
    out = [f'<svg width="{w:.0f}" height="{h:.0f}" viewBox="0 0 {w:.1f} {h:.1f}" role="img" class="layout">'
           f"<title>residual layout: who reads and writes each subspace</title>"]
    for l, block in enumerate(layout["blocks"]):
        x = left + 2 * l * cell
        out.append(f'<rect x="{x:.1f}" y="{top - 2}" width="{2 * cell}" height="{len(labels) * cell + 4}" '
                   f'fill="{"#f4f4f4" if l % 2 else "#fff"}"/>')
        for k, part in enumerate(("attn", "MLP")):
            cx, cy = x + (k + 0.6) * cell, top - 6
            out.append(_text(cx, cy, f"L{block['layer'] + 1} {part}", 10, anchor="start",
                             extra=f'transform="rotate(-60 {cx:.1f} {cy:.1f})"'))
    for r, ((name, _), label) in enumerate(zip(subspaces, labels)):
        y = top + r * cell
        out.append(_text(left - 6, y + cell * 0.72, label, 10, anchor="end"))
        for c, (column, reads, writes) in enumerate(_layout_uses(layout, name)):
            kind = ", ".join(k for k, who in (("read", reads), ("write", writes)) if who)
            if kind:
                tip = html.escape(f"{name}, {column}: " + "; ".join(
                    f"{k} by {', '.join(who)}" for k, who in (("read", reads), ("written", writes)) if who))
                out.append(f'<rect x="{left + c * cell + 1:.1f}" y="{y + 1:.1f}" width="{cell - 2}" '
                           f'height="{cell - 2}" fill="{LAYOUT_COLOURS[kind][0]}"><title>{tip}</title></rect>')
    x = 8
    for fill, legend in LAYOUT_COLOURS.values():
        out.append(f'<rect x="{x:.1f}" y="{h - 20}" width="10" height="10" fill="{fill}"/>')
        out.append(_text(x + 14, h - 11, legend, 9, anchor="start"))
        x += 30 + 6 * len(legend)
    out.append("</svg>")
    return "".join(out)
