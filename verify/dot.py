"""A construction's plan diagram (Graphviz DOT source) drawn as inline SVG without Graphviz.

Constructions draw their plan as DOT (``Construction.diagram``; Krohn-Rhodes: the cascade).
``report.html`` inlines Graphviz's drawing when the ``dot`` program is installed; without it,
:func:`dag_svg` draws the same graph: it reads the subset of DOT the constructions write
(:func:`parse_dot`: node and edge statements with attribute lists, ``subgraph cluster_*``
blocks with a ``label``), puts every node on the rank of its longest path from a source
(top to bottom, the order the cascade's levels feed each other), and draws nodes as boxes,
ellipses or plain text, edges as straight arrows (dashed or gray as the DOT says), clusters
as labelled dashed frames.  Text is escaped; nothing in the drawing links, loads or runs.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from .svg import FONT

_ID = r'(?:"(?:[^"\\]|\\.)*"|[A-Za-z_][\w.]*)'
_ATTRS = r"(?:\s*\[(?P<attrs>[^\]]*)\])?"
_EDGE = re.compile(rf"^\s*(?P<a>{_ID})\s*->\s*(?P<b>{_ID}){_ATTRS}\s*;?\s*$")
_NODE = re.compile(rf"^\s*(?P<a>{_ID}){_ATTRS}\s*;?\s*$")
_PAIR = re.compile(rf"(\w+)\s*=\s*({_ID}|[-\w.#]+)")
_CLUSTER = re.compile(r"^\s*subgraph\s+(cluster\w*)\s*\{\s*$")
_KEYWORDS = {"node", "edge", "graph", "digraph", "subgraph"}
CHAR_W, LINE_H, PAD, GAP_X, GAP_Y, MARGIN = 6.6, 14, 8, 24, 46, 16
"""Layout in pixels: a character's width and a text line's height at font size 11, padding
inside a node, horizontal and vertical gaps between nodes, the margin around the drawing."""


@dataclass
class Graph:
    """What :func:`parse_dot` read: nodes (id -> attributes) in order of appearance, edges
    (source, target, attributes), clusters (name -> (label, member ids)), the graph's label."""

    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    clusters: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    label: str = ""


def _unquote(s: str) -> str:
    """A DOT id or value as text: quotes removed, ``\\n`` a line break, other escapes resolved."""
    if s.startswith('"') and s.endswith('"'):
        s = s[1:-1]
        return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) in "nlr" else m.group(1), s)
    return s


def _attrs(text: str | None) -> dict[str, str]:
    return {k: _unquote(v) for k, v in _PAIR.findall(text or "")}


def parse_dot(dot: str) -> Graph:
    """The nodes, edges and clusters of ``dot`` (one statement per line, as the constructions
    write it); a node named only in an edge is added with no attributes."""
    g, cluster = Graph(), None
    for line in dot.splitlines():
        if (m := _CLUSTER.match(line)) is not None:
            cluster = m.group(1)
            g.clusters[cluster] = ("", [])
        elif line.strip() == "}":
            cluster = None
        elif (m := _EDGE.match(line)) is not None:
            a, b = _unquote(m.group("a")), _unquote(m.group("b"))
            for n in (a, b):
                g.nodes.setdefault(n, {})
            g.edges.append((a, b, _attrs(m.group("attrs"))))
        elif (m := re.match(r"^\s*label\s*=\s*(.+?);?\s*$", line)) is not None:
            label = _unquote(m.group(1))
            if cluster is None:
                g.label = label
            else:
                g.clusters[cluster] = (label, g.clusters[cluster][1])
        elif (m := _NODE.match(line)) is not None and m.group("a") not in _KEYWORDS and m.group("attrs") is not None:
            n = _unquote(m.group("a"))
            g.nodes[n] = {**g.nodes.get(n, {}), **_attrs(m.group("attrs"))}
            if cluster is not None:
                g.clusters[cluster][1].append(n)
    return g


def ranks(g: Graph) -> dict[str, int]:
    """Every node's rank: the length of its longest path from a node with no incoming edge
    (a cycle's back edges are ignored: a node keeps the first rank that reaches it on a cycle)."""
    incoming: dict[str, list[str]] = {n: [] for n in g.nodes}
    for a, b, _ in g.edges:
        if a != b:
            incoming[b].append(a)
    rank: dict[str, int] = {}
    visiting: set[str] = set()

    def of(n: str) -> int:
        if n in rank:
            return rank[n]
        if n in visiting:
            return 0
        visiting.add(n)
        rank[n] = 1 + max((of(a) for a in incoming[n]), default=-1)
        visiting.discard(n)
        return rank[n]

    return {n: of(n) for n in g.nodes}


def _size(attrs: dict[str, str], name: str) -> tuple[list[str], float, float]:
    """A node's text lines, width and height."""
    lines = attrs.get("label", name).split("\n")
    round_ = attrs.get("shape") in ("ellipse", "circle", "doublecircle", "oval")
    w = max(len(s) for s in lines) * CHAR_W + 2 * PAD + (16 if round_ else 0)
    return lines, w, len(lines) * LINE_H + PAD + (8 if round_ else 0)


def _shape(shape: str, x: float, y: float, w: float, h: float) -> str:
    """The outline of a node centred at (x, y)."""
    if shape == "plaintext":
        return ""
    if shape in ("ellipse", "circle", "oval", "doublecircle"):
        out = f'<ellipse cx="{x:.1f}" cy="{y:.1f}" rx="{w / 2:.1f}" ry="{h / 2:.1f}" fill="#fff" stroke="#333"/>'
        if shape == "doublecircle":
            out += (f'<ellipse cx="{x:.1f}" cy="{y:.1f}" rx="{w / 2 - 4:.1f}" ry="{h / 2 - 4:.1f}" '
                    f'fill="none" stroke="#333"/>')
        return out
    return f'<rect x="{x - w / 2:.1f}" y="{y - h / 2:.1f}" width="{w:.1f}" height="{h:.1f}" fill="#fff" stroke="#333"/>'


def _arrow(x1: float, y1: float, x2: float, y2: float, attrs: dict[str, str]) -> str:
    """A straight edge with an arrowhead at (x2, y2)."""
    colour = "#999" if attrs.get("color") == "gray" else "#333"
    dash = ' stroke-dasharray="5,3"' if attrs.get("style") == "dashed" else ""
    dx, dy = x2 - x1, y2 - y1
    n = max((dx * dx + dy * dy) ** 0.5, 1e-9)
    ux, uy = dx / n, dy / n
    bx, by = x2 - 8 * ux, y2 - 8 * uy
    head = f"{x2:.1f},{y2:.1f} {bx - 3.5 * uy:.1f},{by + 3.5 * ux:.1f} {bx + 3.5 * uy:.1f},{by - 3.5 * ux:.1f}"
    return (f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{bx:.1f}" y2="{by:.1f}" stroke="{colour}"{dash}/>'
            f'<polygon points="{head}" fill="{colour}"/>')


def dag_svg(dot: str) -> str | None:
    """``dot`` drawn as an SVG (module docstring); None when it holds no node."""
    g = parse_dot(dot)
    if not g.nodes:
        return None
    rank = ranks(g)
    rows: dict[int, list[str]] = {}
    for n in g.nodes:
        rows.setdefault(rank[n], []).append(n)
    sizes = {n: _size(a, n) for n, a in g.nodes.items()}
    row_w = {r: sum(sizes[n][1] for n in ns) + GAP_X * (len(ns) - 1) for r, ns in rows.items()}
    row_h = {r: max(sizes[n][2] for n in ns) for r, ns in rows.items()}
    width = max(row_w.values()) + 2 * MARGIN
    pos: dict[str, tuple[float, float]] = {}
    y: float = MARGIN + (LINE_H + 4 if g.clusters else 0)
    for r in sorted(rows):
        x = (width - row_w[r]) / 2
        for n in rows[r]:
            pos[n] = (x + sizes[n][1] / 2, y + row_h[r] / 2)
            x += sizes[n][1] + GAP_X
        y += row_h[r] + GAP_Y
    height = y - GAP_Y + MARGIN + (LINE_H + 6 if g.label else 0)
    out = [f'<svg width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.1f} {height:.1f}" role="img" '
           f'class="dag"><title>{html.escape(g.label or "diagram")}</title>']
    for label, members in g.clusters.values():
        inside = [m for m in members if m in pos]
        if inside:
            x0 = min(pos[m][0] - sizes[m][1] / 2 for m in inside) - 6
            x1 = max(pos[m][0] + sizes[m][1] / 2 for m in inside) + 6
            y0 = min(pos[m][1] - sizes[m][2] / 2 for m in inside) - LINE_H - 4
            y1 = max(pos[m][1] + sizes[m][2] / 2 for m in inside) + 6
            out.append(f'<rect x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" fill="#f7f7f7" '
                       f'stroke="#aaa" stroke-dasharray="3,3"/>'
                       f'<text x="{x0 + 4:.1f}" y="{y0 + LINE_H - 3:.1f}" font-size="10" {FONT}>'
                       f"{html.escape(label)}</text>")
    for a, b, attrs in g.edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        out.append(_arrow(xa, ya + sizes[a][2] / 2, xb, yb - sizes[b][2] / 2, attrs))
    for n, attrs in g.nodes.items():
        lines, w, h = sizes[n]
        x, yc = pos[n]
        out.append(_shape(attrs.get("shape", "box"), x, yc, w, h))
        top = yc - len(lines) * LINE_H / 2 + LINE_H - 3
        out += [f'<text x="{x:.1f}" y="{top + k * LINE_H:.1f}" font-size="11" text-anchor="middle" {FONT}>'
                f"{html.escape(s)}</text>" for k, s in enumerate(lines)]
    if g.label:
        out.append(f'<text x="{width / 2:.1f}" y="{height - MARGIN / 2:.1f}" font-size="11" text-anchor="middle" '
                   f"{FONT}>{html.escape(g.label)}</text>")
    out.append("</svg>")
    return "".join(out)
