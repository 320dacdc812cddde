"""Faithful small actions for the scan construction.

Theorem 10 composes transition maps on Q, so its MLPs grow like |Q|^2.  Group
automata given by their regular action (|Q| = |G|, e.g. S5 with 120 states) have
the same semigroup acting faithfully on far fewer points (S5 on 5).  We look for
a congruence ~ of the automaton (p ~ q implies delta(p,a) ~ delta(q,a)) whose
quotient action is still faithful, and scan maps on Q/~ instead.

Reading the state back needs the element: for a group acting freely on Q (every
non-identity element moves every state), s -> q0.s is injective for each start
q0, so the unembedding can score each state by its unique element.  Other
automata keep the natural action (points = states, readout = f(q0)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import BudgetError
from .partitions import congruence
from .semigroup import closure, identity
from .spec import Map, Semiautomaton

ELEMENT_BUDGET = 5040
"""Largest group for which the quotient search and the element readout are tried."""

CLOSURE_WORK = 1 << 23
"""Most element-letter-state operations (|group| x |letters| x |Q|, a few seconds) spent
enumerating the group for the quotient search; beyond it the natural action is used."""

EXPLORE_LIMIT = 500
"""Most congruences visited by the quotient search."""


@dataclass(frozen=True)
class Representation:
    """The set the scan composes maps on.

    ``letter_maps[a]`` is letter a acting on ``n_points`` points.  For the natural
    action ``elements`` is None and the state is the point f(q0).  Otherwise
    ``elements[i] = (map on points, map on states)`` lists the whole group and
    ``block_of[q]`` is the point of state q.
    """

    n_points: int
    letter_maps: tuple[Map, ...]
    elements: tuple[tuple[Map, Map], ...] | None = None
    block_of: tuple[int, ...] | None = None

    @property
    def natural(self) -> bool:
        return self.elements is None

    def to_dict(self) -> dict:
        """JSON-able and lossless (the plan a scan checkpoint carries)."""
        return {"n_points": self.n_points, "letter_maps": [list(m) for m in self.letter_maps],
                "elements": None if self.elements is None else [[list(p), list(s)] for p, s in self.elements],
                "block_of": None if self.block_of is None else list(self.block_of)}

    @staticmethod
    def from_dict(d: dict) -> "Representation":
        """Inverse of :meth:`to_dict`."""
        elements = None if d["elements"] is None else tuple((tuple(p), tuple(s)) for p, s in d["elements"])
        return Representation(d["n_points"], tuple(tuple(m) for m in d["letter_maps"]), elements,
                              None if d["block_of"] is None else tuple(d["block_of"]))


def natural(automaton: Semiautomaton) -> Representation:
    return Representation(automaton.n_states, automaton.maps)


def _project(parent: list[int], s: Map) -> tuple[Map, list[int]]:
    """Map s induced on the blocks of ``parent`` (blocks numbered by first state)."""
    roots = sorted(set(parent))
    num = {r: i for i, r in enumerate(roots)}
    return tuple(num[parent[s[r]]] for r in roots), [num[parent[x]] for x in range(len(parent))]


def _faithful(part: list[int], elems: np.ndarray) -> bool:
    """Whether distinct elements (rows of ``elems``) stay distinct on the blocks of ``part``."""
    P = np.asarray(part)
    roots = np.unique(P)
    projected = P[elems[:, roots]]
    return len(np.unique(projected, axis=0)) == len(elems)


def _smallest_faithful_congruence(automaton: Semiautomaton, elems: np.ndarray) -> list[int]:
    """Search the congruences obtained by joining state 0's block with others.

    Coarsening a non-faithful quotient never makes it faithful, so the search only
    extends faithful ones; at most EXPLORE_LIMIT partitions are visited.
    For a group acting regularly these are the actions on cosets of subgroups,
    and the result is the largest core-free subgroup reachable this way.
    """
    n = automaton.n_states
    best = list(range(n))
    seen = {tuple(best)}
    stack = [best]
    while stack and len(seen) < EXPLORE_LIMIT:
        part = stack.pop()
        for q in sorted(set(part)):
            if part[q] == part[0]:
                continue
            new = congruence(automaton, part, 0, q)
            key = tuple(new)
            if key in seen:
                continue
            seen.add(key)
            if _faithful(new, elems):
                stack.append(new)
                if (len(set(new)), key) < (len(set(best)), tuple(best)):
                    best = new
    return best


def choose(automaton: Semiautomaton, budget: int = ELEMENT_BUDGET) -> Representation:
    """The smallest faithful quotient found greedily, or the natural action.

    Only tried for permutation automata whose group acts freely on Q (so the
    element readout is exact) and whose enumeration fits :data:`CLOSURE_WORK`; deterministic.
    """
    n = automaton.n_states
    if n <= 2 or not all(sorted(m) == list(range(n)) for m in automaton.maps):
        return natural(automaton)
    budget = min(budget, CLOSURE_WORK // (automaton.n_symbols * n))
    try:
        elems = closure(automaton.maps, budget)
    except BudgetError:
        return natural(automaton)
    ident = identity(n)
    if any(s != ident and any(s[q] == q for q in range(n)) for s in elems):
        return natural(automaton)  # not free: readout by element would be ambiguous
    best = _smallest_faithful_congruence(automaton, np.asarray(elems))
    if len(set(best)) == n:
        return natural(automaton)
    letter_maps = tuple(_project(best, m)[0] for m in automaton.maps)
    _, block_of = _project(best, ident)
    elements = tuple((_project(best, s)[0], s) for s in sorted(elems))
    return Representation(len(set(best)), letter_maps, elements, tuple(block_of))
