"""Directed graphs on hashable nodes: strongly connected components."""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, Sequence, TypeVar

Node = TypeVar("Node", bound=Hashable)


def strongly_connected(nodes: Iterable[Node], succ: Callable[[Node], Sequence[Node]]) -> list[list[Node]]:
    """The strongly connected components of the graph reached from ``nodes`` along ``succ`` (Tarjan's
    algorithm, iterative), in the order Tarjan completes them (a component before any that reaches it)."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    on_stack: set[Node] = set()
    stack: list[Node] = []
    comps: list[list[Node]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = len(index)
                stack.append(v)
                on_stack.add(v)
            nexts = succ(v)
            if i < len(nexts):
                work.append((v, i + 1))
                w = nexts[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(comp)
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return comps
