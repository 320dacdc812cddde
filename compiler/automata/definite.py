"""Definite automata: the state is a function of the last k letters.

An automaton is *k-definite* when every word of length k sends all states to one state:
|delta(Q, w)| = 1 for every w in Sigma^k (Perles, Rabin and Shamir, "The theory of
definite automata", 1963).  Then the state after t >= k letters is delta(Q, last k
letters), whatever the start, and after t < k letters it is delta(q0, letters so far).

Detection (:func:`detect`) walks the images of the whole state set: F_0 = {Q} and
F_{j+1} = {delta(X, a) : X in F_j, a in Sigma} is the set of images delta(Q, w) over
words of length j + 1 (images only shrink, and singletons stay singletons).  The
smallest k with only singletons in F_k is the answer.  The walk stops with "not
definite" when F_j repeats an earlier F_i (the sequence is deterministic, so it cycles
without ever collapsing) or when j reaches n - 1 without collapsing (a definite
n-state automaton is (n-1)-definite, Perles-Rabin-Shamir); it gives up, with a reason,
when a frontier grows past :data:`MAX_IMAGE_SETS`.  The plan (:class:`LookbackPlan`)
carries the state of every window of length k, so nothing downstream repeats the walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SpecError
from .spec import Semiautomaton

MAX_LOOKBACK = 8
"""Largest k the lookback construction accepts (one offset head per letter looked back)."""

MAX_LOOKBACK_KEYS = 1 << 14
"""Largest window table |Sigma|^k the lookback construction accepts (one MLP unit per window)."""

MAX_IMAGE_SETS = 100_000
"""Largest frontier of image sets :func:`definite_depth` holds before giving up."""


@dataclass(frozen=True)
class LookbackPlan:
    """A k-definite automaton's window table.

    ``windows[i]`` is the state delta(Q, w) for the word w = (w_1, ..., w_k) of length k
    (oldest letter first) with index i = sum_j w_j |Sigma|^(k-j) (lexicographic order).
    The start state is not part of the plan: it only matters at t < k and is read from
    the automaton (so moving the start leaves the plan unchanged)."""

    k: int
    n_symbols: int
    n_states: int
    windows: tuple[int, ...]

    def window_state(self, word: tuple[int, ...] | list[int]) -> int:
        """The state after the k letters ``word`` (oldest first), from any start."""
        i = 0
        for a in word:
            i = i * self.n_symbols + int(a)
        return self.windows[i]

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "n_symbols": self.n_symbols, "n_states": self.n_states, "windows": list(self.windows)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> LookbackPlan:
        """The plan of :meth:`to_dict`; SpecError when the table does not fit its sizes."""
        k, s, n = int(d["k"]), int(d["n_symbols"]), int(d["n_states"])
        windows = tuple(int(x) for x in d["windows"])
        if k < 1 or s < 1 or n < 1:
            raise SpecError(f"a lookback plan needs k, n_symbols, n_states >= 1, got {k}, {s}, {n}")
        if len(windows) != s**k or any(not 0 <= q < n for q in windows):
            raise SpecError(f"a lookback plan's window table needs {s}^{k} states in 0..{n - 1}, "
                            f"got {len(windows)} entries")
        return LookbackPlan(k, s, n, windows)


def definite_depth(automaton: Semiautomaton, max_sets: int = MAX_IMAGE_SETS) -> tuple[int | None, str]:
    """The smallest k >= 1 such that ``automaton`` is k-definite, or None and why not.

    A single state is 1-definite.  See the module docstring for the walk and its stops."""
    n = automaton.n_states
    maps = [tuple(m) for m in automaton.maps]
    frontier = frozenset({tuple(range(n))})
    seen = {frontier}
    j = 0
    while True:
        j += 1
        frontier = frozenset(tuple(sorted({m[q] for q in X})) for X in frontier for m in maps)
        if all(len(X) == 1 for X in frontier):
            return j, f"{j}-definite"
        if frontier in seen or j >= max(n - 1, 1):
            widest = max(len(X) for X in frontier)
            return None, (f"not definite: after {j} letter{'s' * (j > 1)} some word still leaves {widest} "
                          f"states possible, and no longer word collapses them all")
        if len(frontier) > max_sets:
            return None, (f"gave up after {j} letters: more than {max_sets:,} distinct image sets "
                          f"(is it definite? unknown within the budget)")
        seen.add(frontier)


def window_table(automaton: Semiautomaton, k: int) -> tuple[int, ...]:
    """delta(q, w) for every word w of length k in lexicographic order (oldest letter most
    significant), from the start state; from any state when ``automaton`` is k-definite."""
    M = np.asarray(automaton.maps, dtype=np.int64)  # [letter, state]
    cur = np.array([automaton.start], dtype=np.int64)
    for _ in range(k):
        cur = M[:, cur].T.reshape(-1)  # index old * |Sigma| + a
    return tuple(int(q) for q in cur)


def detect(automaton: Semiautomaton, max_k: int = MAX_LOOKBACK,
           max_keys: int = MAX_LOOKBACK_KEYS) -> tuple[LookbackPlan | None, str]:
    """The lookback plan of ``automaton`` (smallest k), or None and the reason it has none:
    not definite, definite only beyond ``max_k``, or a window table over ``max_keys``."""
    k, reason = definite_depth(automaton)
    name = automaton.name or "the automaton"
    if k is None:
        return None, f"{name} is {reason}"
    if k > max_k:
        return None, f"{name} is {k}-definite, beyond the lookback limit k <= {max_k}"
    keys = automaton.n_symbols**k
    if keys > max_keys:
        return None, (f"{name} is {k}-definite, but its window table has {automaton.n_symbols}^{k} = {keys:,} "
                      f"entries, over the budget of {max_keys:,}")
    return LookbackPlan(k, automaton.n_symbols, automaton.n_states, window_table(automaton, k)), reason
