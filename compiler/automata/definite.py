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

Generalised definite automata (Ginzburg, "About some properties of definite, reverse-definite
and related automata", 1966) from the start q0: there are m, k with delta(q0, u v w) the
same for every v whenever |u| = m and |w| = k, so the state after t >= m + k letters is a
function of the first m and the last k letters.  With p = delta(q0, u) and R_p the states
reachable from p, that says each R_p is collapsed by every word of length k; detection
(:func:`generalised_depth`) runs the walk above from the frontier {R_p : |u| = m}.  The
plan then depends on q0 (``m`` >= 1); m = 0 is the definite case, valid from every start.
:func:`detect` takes the (m, k) with the smallest lookup (sum_{t <= m+k} |Sigma|^t keys,
so the smallest m + k), the definite plan (m = 0) on a tie.
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
    """A k-definite (m = 0) or (m, k)-generalised-definite automaton's window table.

    ``windows[i]`` is the state delta(Q, w) for the word w = (w_1, ..., w_k) of length k
    (oldest letter first) with index i = sum_j w_j |Sigma|^(k-j) (lexicographic order);
    with m >= 1 it is delta(q0, u v w) (any v) for the word u w of the first m and the
    last k letters, indexed the same way over its m + k letters.  With m = 0 the start
    state is not part of the plan: it only matters at t < k and is read from the
    automaton (so moving the start leaves the plan unchanged); with m >= 1 the table was
    computed from the automaton's start."""

    k: int
    n_symbols: int
    n_states: int
    windows: tuple[int, ...]
    m: int = 0

    def window_state(self, word: tuple[int, ...] | list[int]) -> int:
        """The state after the m + k letters ``word`` (first m, then last k, oldest first)."""
        i = 0
        for a in word:
            i = i * self.n_symbols + int(a)
        return self.windows[i]

    def to_dict(self) -> dict[str, Any]:
        d = {"k": self.k, "n_symbols": self.n_symbols, "n_states": self.n_states, "windows": list(self.windows)}
        return {**d, "m": self.m} if self.m else d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> LookbackPlan:
        """The plan of :meth:`to_dict`; SpecError when the table does not fit its sizes."""
        k, s, n, m = int(d["k"]), int(d["n_symbols"]), int(d["n_states"]), int(d.get("m", 0))
        windows = tuple(int(x) for x in d["windows"])
        if k < (0 if m else 1) or m < 0 or s < 1 or n < 1:
            raise SpecError(f"a lookback plan needs n_symbols, n_states >= 1, m >= 0 and k >= 1 (k >= 0 when "
                            f"m >= 1), got k = {k}, m = {m}, {s}, {n}")
        if len(windows) != s ** (m + k) or any(not 0 <= q < n for q in windows):
            raise SpecError(f"a lookback plan's window table needs {s}^{m + k} states in 0..{n - 1}, "
                            f"got {len(windows)} entries")
        return LookbackPlan(k, s, n, windows, m)


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


def _collapse_depth(automaton: Semiautomaton, sets: frozenset, limit: int, max_sets: int) -> int | None:
    """The smallest j <= ``limit`` such that every word of length j sends each set of
    ``sets`` to a single state (the walk of the module docstring), or None."""
    maps = [tuple(mp) for mp in automaton.maps]
    frontier = sets
    for j in range(limit + 1):
        if all(len(X) == 1 for X in frontier):
            return j
        if len(frontier) > max_sets:
            return None
        frontier = frozenset(tuple(sorted({mp[q] for q in X})) for X in frontier for mp in maps)
    return None


def generalised_depth(automaton: Semiautomaton, m: int, max_k: int,
                      max_sets: int = MAX_IMAGE_SETS) -> int | None:
    """The smallest k <= ``max_k`` such that delta(q0, u v w) does not depend on v for
    |u| = ``m``, |w| = k (from the automaton's start), or None (module docstring)."""
    M = np.asarray(automaton.maps, dtype=np.int64)
    after = {automaton.start}
    for _ in range(m):
        after = {int(M[a, q]) for q in after for a in range(automaton.n_symbols)}
    reach = []
    for p in sorted(after):
        seen, todo = {p}, [p]
        while todo:
            q = todo.pop()
            for a in range(automaton.n_symbols):
                r = int(M[a, q])
                if r not in seen:
                    seen.add(r), todo.append(r)
        reach.append(tuple(sorted(seen)))
    return _collapse_depth(automaton, frozenset(reach), max_k, max_sets)


def window_table(automaton: Semiautomaton, k: int) -> tuple[int, ...]:
    """delta(q, w) for every word w of length k in lexicographic order (oldest letter most
    significant), from the start state; from any state when ``automaton`` is k-definite."""
    M = np.asarray(automaton.maps, dtype=np.int64)  # [letter, state]
    cur = np.array([automaton.start], dtype=np.int64)
    for _ in range(k):
        cur = M[:, cur].T.reshape(-1)  # index old * |Sigma| + a
    return tuple(int(q) for q in cur)


def lookup_keys(n_symbols: int, length: int) -> int:
    """Keys of the lookback lookup over ``length`` = m + k heads: sum_{t <= m + k} |Sigma|^t
    (every prefix shorter than m + k, then every pair of first m and last k letters)."""
    return sum(n_symbols**t for t in range(length + 1))


def detect(automaton: Semiautomaton, max_k: int = MAX_LOOKBACK,
           max_keys: int = MAX_LOOKBACK_KEYS) -> tuple[LookbackPlan | None, str]:
    """The lookback plan of ``automaton`` with the smallest lookup, or None and the reason it
    has none: neither definite nor generalised definite with m + k <= ``max_k``, or a
    window table over ``max_keys``.  The definite plan (m = 0, :func:`definite_detect`)
    wins ties; otherwise the smallest m + k, then the smallest m."""
    plan, reason = definite_detect(automaton, max_k, max_keys)
    best = (plan.k, 0) if plan is not None else None
    s = automaton.n_symbols
    for m in range(1, max_k + 1):
        limit = max_k - m if best is None else min(max_k - m, best[0] - m - 1)
        if limit < 0:
            break
        k = generalised_depth(automaton, m, limit)
        if k is not None and s ** (m + k) <= max_keys:
            best = (m + k, m)
    if best is None:
        return None, (f"{reason}; nor is it generalised definite from its start (the first m and last k letters "
                      f"decide the state) with m + k <= {max_k} and a window table of at most {max_keys:,} entries")
    length, m = best
    if m == 0:
        return plan, reason
    k = length - m
    why = (f"generalised definite from {automaton.states[automaton.start]!r}: the first {m} and last {k} "
           f"letters decide the state")
    return LookbackPlan(k, s, automaton.n_states, window_table(automaton, m + k), m), why


def definite_detect(automaton: Semiautomaton, max_k: int = MAX_LOOKBACK,
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
