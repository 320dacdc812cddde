"""A fast reader of the DOT subset AALpy and LearnLib write: one ``digraph``, node statements
``ID [k=v, ...]``, edge statements ``ID -> ID [k=v, ...]``, graph attributes ``k=v`` and the
``graph``/``node``/``edge`` default statements, IDs bare, numeric, double-quoted or HTML strings ``<...>`` (LearnLib's
Mealy labels ``<a<br />x>``).

One regular-expression pass over the text and one over its tokens: linear in the file's size
(a 3,000-state file of 150 kB in well under a second, where pydot's general grammar takes about
30 s).  Anything outside the subset (comments, subgraphs, ports, edge chains,
``strict``, an undirected ``graph``) is not an error here: :func:`parse` returns None and the
caller hands the text to pydot.  The graph it returns answers what :mod:`.formats` asks of
pydot's (``get_nodes``, ``get_edges``, names and attribute values as written, quotes kept).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r'\s*(?:(->)|("(?:[^"\\]|\\.)*")|([A-Za-z_\x80-\uffff][\w\x80-\uffff]*|-?(?:\.\d+|\d+(?:\.\d*)?))'
                    r"|([\[\]{};,=]))", re.S)
"""One token after optional white space: the edge operator, a quoted string, a bare or numeric
ID, or one punctuation mark (the groups say which)."""

_SPACE = re.compile(r"\s*")

KEYWORDS = ("graph", "node", "edge")
"""Default-attribute statements: not nodes."""


@dataclass
class Item:
    """A node (``name``) or an edge (``name`` -> ``target``) and its attributes, as written."""

    name: str
    attrs: dict[str, str] = field(default_factory=dict)
    target: str = ""

    def get_name(self) -> str:
        return self.name

    def get_source(self) -> str:
        return self.name

    def get_destination(self) -> str:
        return self.target

    def get_attributes(self) -> dict[str, str]:
        return self.attrs


@dataclass
class Graph:
    """The digraph: its node and edge statements in the file's order."""

    nodes: list[Item]
    edges: list[Item]

    def get_type(self) -> str:
        return "digraph"

    def get_nodes(self) -> list[Item]:
        return self.nodes

    def get_edges(self) -> list[Item]:
        return self.edges


def tokens(text: str) -> list[tuple[str, str]] | None:
    """(kind, text) per token -- kind ``->``, ``id`` or the punctuation mark itself -- or None
    where the text holds anything else (a comment, ``<``, ``:``, ``+``...)."""
    out, pos, end = [], 0, len(text.rstrip())
    while pos < end:
        start = _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches
        if text.startswith("<", start):  # an HTML string (LearnLib's Mealy labels): to its matching >
            close = _html_end(text, start)
            if close is None:
                return None
            out.append(("id", text[start:close]))
            pos = close
            continue
        m = _TOKEN.match(text, pos)
        if m is None:
            return None
        arrow, quoted, bare, mark = m.groups()
        out.append(("->", arrow) if arrow else ("id", quoted or bare) if quoted or bare else (mark, mark))
        pos = m.end()
    return out


def _html_end(text: str, start: int) -> int | None:
    """The index after the ``>`` that closes the ``<`` at ``start`` (nested pairs counted), or None."""
    depth = 0
    for i in range(start, len(text)):
        depth += (text[i] == "<") - (text[i] == ">")
        if depth == 0:
            return i + 1
    return None


def _attrs(toks: list[tuple[str, str]], i: int) -> tuple[dict[str, str], int] | None:
    """The attribute lists ``[k=v, ...]`` from ``toks[i]`` on (several in a row merge), and the index after."""
    attrs: dict[str, str] = {}
    while i < len(toks) and toks[i][0] == "[":
        i += 1
        while i < len(toks) and toks[i][0] != "]":
            if i + 2 >= len(toks) or toks[i][0] != "id" or toks[i + 1][0] != "=" or toks[i + 2][0] != "id":
                return None
            attrs[toks[i][1]] = toks[i + 2][1]
            i += 3
            if i < len(toks) and toks[i][0] in ",;":
                i += 1
        if i >= len(toks):
            return None
        i += 1
    return attrs, i


def _statement(toks: list[tuple[str, str]], i: int, g: Graph) -> int | None:
    """Read the statement at ``toks[i]`` into ``g``; the index after it, or None outside the subset."""
    if toks[i][0] != "id":
        return None
    name = toks[i][1]
    if i + 2 < len(toks) and toks[i + 1][0] == "=" and toks[i + 2][0] == "id":
        return i + 3  # a graph attribute
    if i + 2 < len(toks) and toks[i + 1][0] == "->":
        if toks[i + 2][0] != "id" or (i + 3 < len(toks) and toks[i + 3][0] == "->"):
            return None  # a chain a -> b -> c, or a subgraph as an end
        read = _attrs(toks, i + 3)
        if read is None:
            return None
        g.edges.append(Item(name, read[0], toks[i + 2][1]))
        return read[1]
    read = _attrs(toks, i + 1)
    if read is None:
        return None
    if name.lower() not in KEYWORDS:  # DOT's keywords are case-insensitive; a quoted "node" is a node
        g.nodes.append(Item(name, read[0]))
    return read[1]


def parse(text: str) -> Graph | None:
    """The one digraph of ``text`` when the whole text lies in the subset, else None."""
    toks = tokens(text)
    if not toks or toks[0] != ("id", "digraph"):
        return None
    i = 2 if len(toks) > 1 and toks[1][0] == "id" else 1
    if i >= len(toks) or toks[i][0] != "{":
        return None
    g, i = Graph([], []), i + 1
    while i < len(toks) and toks[i][0] != "}":
        if toks[i][0] == ";":
            i += 1
            continue
        after = _statement(toks, i, g)
        if after is None:
            return None
        i = after
    return g if i == len(toks) - 1 else None
