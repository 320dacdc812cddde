"""Definite automata: the state is a function of the last k letters.

An automaton is *k-definite* when every word of length k sends all states to one state:
|delta(Q, w)| = 1 for every w in Sigma^k (Perles, Rabin and Shamir, "The theory of
definite automata", 1963).  Then the state after t >= k letters is delta(Q, last k
letters), whatever the start, and after t < k letters it is delta(q0, letters so far).

Detection (:func:`definite_depth`) works on pairs of states: the automaton is k-definite
exactly when every word of length k merges every pair.  A_0 is the set of pairs {p, q},
p != q, and A_{j+1} the pairs some letter sends into A_j (the pairs some word of length j + 1
keeps apart); the sets only shrink, so the smallest k with A_k empty is the answer, and A_j
= A_{j+1} non-empty means "not definite" (some pair is kept apart forever).  Each step is one
vectorised gather per letter over the pairs still apart, in an n x n boolean matrix, so the
test holds O(n^2) bytes, never a list of image sets.  Before it, a letter with two states on
its cycles (a permutation, a no-op, two fixed points) proves the automaton is not definite in
O(n |Sigma| log n).  The cost is declared: more than :data:`MAX_PAIRS` pairs, or more than
:data:`MAX_PAIR_STEPS` pair images in all, and the test gives up with a reason naming it.
The plan (:class:`LookbackPlan`) carries the state of every window of length k, so nothing
downstream repeats the walk.

A partial automaton under the promise of legal inputs (compiler/automata/promise.py) is
k-definite *on its legal words* when every word of length k that is defined from two states
reachable from q0 sends them to one state: the same pair walk over the legally reachable
states, where a letter keeps a pair apart only if it is defined on both (an undefined step is
a word no input takes).  The window of a word is then its unique defined image (any state
when it has none).  Its completions need not be definite at all; only the definite plan
(m = 0) is searched for partial automata.

Generalised definite automata (Ginzburg, "About some properties of definite, reverse-definite
and related automata", 1966) from the start q0: there are m, k with delta(q0, u v w) the
same for every v whenever |u| = m and |w| = k, so the state after t >= m + k letters is a
function of the first m and the last k letters.  With p = delta(q0, u) and R_p the states
reachable from p, that says each R_p is collapsed by every word of length k; detection
(:func:`generalised_depth`) runs the pair walk above on the pairs inside each R_p (only the
largest R_p matter: R_p is inside R_q when p is reachable from q, and a subset of a collapsed
set collapses).  The
plan then depends on q0 (``m`` >= 1); m = 0 is the definite case, valid from every start.
:func:`detect` takes the (m, k) with the smallest lookup (sum_{t <= m+k} |Sigma|^t keys,
so the smallest m + k), the definite plan (m = 0) on a tie.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SpecError
from .promise import defined_table, legal_reachable
from .spec import Semiautomaton

MAX_LOOKBACK = 8
"""Largest k the lookback construction accepts (one offset head per letter looked back)."""

MAX_LOOKBACK_KEYS = 1 << 14
"""Largest window table |Sigma|^k the lookback construction accepts (one MLP unit per window)."""

MAX_PAIRS = 1 << 23
"""Largest number of pairs of states n(n-1)/2 the pair walk of :func:`definite_depth` takes on
(an n x n boolean matrix and the pairs still apart: about 100 MB at the limit, n = 4096)."""

MAX_PAIR_STEPS = 1 << 28
"""Largest number of pair images (pairs still apart x letters, summed over the steps) the pair
walk computes before giving up (a few seconds of vectorised gathers)."""

MAX_TABLE_CELLS = 1 << 22
"""Largest transition table (letters x states) the definiteness tests read: each looks at every
cell several times (the cycles of every letter, the reachable sets)."""


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


def _over_table_budget(automaton: Semiautomaton) -> str | None:
    """Why the definiteness tests refuse ``automaton`` before allocating (a table over
    :data:`MAX_TABLE_CELLS`), or None."""
    cells = automaton.n_states * automaton.n_symbols
    if cells > MAX_TABLE_CELLS:
        return (f"gave up: the definiteness test reads the {automaton.n_states:,} x {automaton.n_symbols:,} transition "
                f"table ({cells:,} cells), over the budget of {MAX_TABLE_CELLS:,}")
    return None


def cyclic_states(maps: np.ndarray) -> np.ndarray:
    """[letter, state] boolean: state q lies on a cycle of the letter's map (is in the image of
    its n-th power, computed by repeated squaring)."""
    n = maps.shape[1]
    power = maps.copy()
    for _ in range(max(1, int(n - 1).bit_length())):
        power = np.take_along_axis(power, power, axis=1)
    out = np.zeros(maps.shape, dtype=bool)
    np.put_along_axis(out, power, True, axis=1)
    return out


def _kept_apart_by_a_letter(automaton: Semiautomaton, cyclic: np.ndarray, states: np.ndarray) -> str | None:
    """A letter with two of ``states`` on its cycles (no power of it merges them), as a phrase, or None."""
    inside = cyclic[:, states].sum(axis=1)
    over = np.flatnonzero(inside >= 2)
    if not len(over):
        return None
    a = int(over[0])
    p, q = (int(x) for x in states[np.flatnonzero(cyclic[a, states])[:2]])
    return (f"the letter {automaton.alphabet[a]!r} alone never merges the states {automaton.states[p]!r} and "
            f"{automaton.states[q]!r} (both lie on its cycles)")


@dataclass
class _PairWalk:
    """The outcome of :func:`_pair_walk`: ``depth`` (every word of that length collapses the set),
    or None with ``steps`` walked and whether it ``gave_up`` (over :data:`MAX_PAIR_STEPS`) or hit
    ``limit``; ``apart``: pairs still apart after ``steps`` letters."""

    depth: int | None
    steps: int
    apart: int = 0
    gave_up: bool = False


def _pair_walk(maps: np.ndarray, states: np.ndarray, limit: int, defined: np.ndarray | None = None) -> _PairWalk:
    """The smallest j <= ``limit`` such that every word of length j sends the set ``states``
    (closed under every letter) to one state, by the pair walk of the module docstring
    (giving up past :data:`MAX_PAIR_STEPS` pair images); with ``defined`` ([letter, state]
    bool, a partial automaton), every *legal* word: a letter keeps a pair apart only where it
    is defined on both states."""
    r = len(states)
    if r <= 1:
        return _PairWalk(0, 0)
    pos = np.full(maps.shape[1], -1, dtype=np.int32)
    pos[states] = np.arange(r, dtype=np.int32)
    local = pos[maps[:, states]]  # [letter, index in states] -> index in states (the set is closed)
    ok = np.ones(local.shape, dtype=bool) if defined is None else defined[:, states]
    apart = np.ones((r, r), dtype=bool)
    np.fill_diagonal(apart, False)
    i, j = (x.astype(np.int32) for x in np.triu_indices(r, 1))
    work, step = 0, 0
    while len(i):
        if step >= limit:
            return _PairWalk(None, step, len(i))
        work += len(i) * maps.shape[0]
        if work > MAX_PAIR_STEPS:
            return _PairWalk(None, step, len(i), gave_up=True)
        keep = np.zeros(len(i), dtype=bool)
        for row, row_ok in zip(local, ok):
            if defined is None:  # complete: every letter is defined on both states (half the gathers)
                keep |= apart[row[i], row[j]]
            else:
                keep |= apart[row[i], row[j]] & row_ok[i] & row_ok[j]
        step += 1
        if keep.all():
            return _PairWalk(None, step, len(i))
        apart[i[~keep], j[~keep]] = apart[j[~keep], i[~keep]] = False
        i, j = i[keep], j[keep]
    return _PairWalk(step, step)


WalkCache = dict[bytes, tuple[int, _PairWalk]]
"""Pair walks already made, by the (sorted) set they walked: the limit used and the outcome."""


def _cached_walk(maps: np.ndarray, states: np.ndarray, limit: int, cache: WalkCache | None) -> _PairWalk:
    """:func:`_pair_walk`, reusing an earlier walk of the same set whenever its outcome
    answers this ``limit`` too (an exact depth, a fixpoint, or a limit at least as far)."""
    if cache is None:
        return _pair_walk(maps, states, limit)
    key = np.sort(states).tobytes()
    if key in cache:
        old_limit, w = cache[key]
        if w.depth is not None:
            return w if w.depth <= limit else _PairWalk(None, limit, w.apart)
        if not w.gave_up and (w.steps < old_limit or w.steps >= limit):
            return w
    w = _pair_walk(maps, states, limit)
    cache[key] = (limit, w)
    return w


def definite_depth(automaton: Semiautomaton, max_pairs: int = MAX_PAIRS,
                   cache: WalkCache | None = None) -> tuple[int | None, str]:
    """The smallest k >= 1 such that ``automaton`` is k-definite, or None and why not (not
    definite, or a declared budget: :data:`MAX_TABLE_CELLS`, ``max_pairs``, :data:`MAX_PAIR_STEPS`).

    A single state is 1-definite.  See the module docstring for the test and its stops."""
    n = automaton.n_states
    if n == 1:
        return 1, "1-definite"
    over = _over_table_budget(automaton)
    if over:
        return None, over
    maps = np.asarray(automaton.maps, dtype=np.int32)
    if automaton.partial:  # on legal words: the legally reachable states, defined steps only
        return _legal_definite_depth(automaton, maps, max_pairs)
    everything = np.arange(n, dtype=np.int32)
    kept = _kept_apart_by_a_letter(automaton, cyclic_states(maps), everything)
    if kept:
        return None, f"not definite: {kept}"
    pairs = n * (n - 1) // 2
    if pairs > max_pairs:
        return None, (f"gave up: the definiteness test walks the {pairs:,} pairs of {n:,} states, over the budget of "
                      f"{max_pairs:,} (is it definite? unknown within the budget)")
    walk = _cached_walk(maps, everything, n, cache)
    if walk.depth is not None:
        return max(walk.depth, 1), f"{max(walk.depth, 1)}-definite"
    if walk.gave_up:
        return None, (f"gave up after {walk.steps} letters: {walk.apart:,} pairs of states still apart, over the budget "
                      f"of {MAX_PAIR_STEPS:,} pair images (is it definite? unknown within the budget)")
    return None, (f"not definite: after {walk.steps} letter{'s' * (walk.steps > 1)} some word still keeps "
                  f"{walk.apart:,} pairs of states apart, and no longer word merges them all")


def _legal_definite_depth(automaton: Semiautomaton, maps: np.ndarray, max_pairs: int) -> tuple[int | None, str]:
    """:func:`definite_depth` of a partial automaton on its legal words (module docstring)."""
    states = legal_reachable(automaton)
    pairs = len(states) * (len(states) - 1) // 2
    if pairs > max_pairs:
        return None, f"gave up: the definiteness test walks {pairs:,} pairs, over the budget of {max_pairs:,}"
    walk = _pair_walk(maps, states, len(states), defined_table(automaton))
    if walk.depth is not None:
        return max(walk.depth, 1), f"{max(walk.depth, 1)}-definite on its legal words"
    if walk.gave_up:
        return None, f"gave up after {walk.steps} letters: {walk.apart:,} pairs of states still apart"
    return None, (f"not definite on its legal words: after {walk.steps} letter{'s' * (walk.steps > 1)} some legal "
                  f"word still keeps {walk.apart:,} pairs of reachable states apart")


def _reach(maps: np.ndarray, p: int) -> np.ndarray:
    """The states reachable from ``p`` (itself first), in breadth-first order."""
    seen = np.zeros(maps.shape[1], dtype=bool)
    seen[p] = True
    frontier = np.array([p], dtype=np.int32)
    levels = [frontier]
    while len(frontier):
        nxt = np.unique(maps[:, frontier])
        frontier = nxt[~seen[nxt]]
        seen[frontier] = True
        levels.append(frontier)
    return np.concatenate(levels).astype(np.int32)


def _largest_reach_sets(maps: np.ndarray, sources: list[int]) -> list[np.ndarray]:
    """The sets R_p of the states reachable from each source p, except those inside one already
    found (a source in a found set reaches a subset of it): the sets whose collapse decides."""
    covered = np.zeros(maps.shape[1], dtype=bool)
    sets = []
    for p in sources:
        if covered[p]:
            continue
        r = _reach(maps, p)
        covered[r] = True
        sets.append(r)
    return sets


def generalised_depth(automaton: Semiautomaton, m: int, max_k: int, cache: WalkCache | None = None) -> int | None:
    """The smallest k <= ``max_k`` such that delta(q0, u v w) does not depend on v for
    |u| = ``m``, |w| = k (from the automaton's start), or None (module docstring; None too
    beyond a declared budget)."""
    if _over_table_budget(automaton) or automaton.partial:  # partial automata: the definite plan only
        return None
    maps = np.asarray(automaton.maps, dtype=np.int32)
    order = _reach(maps, automaton.start)  # sources in breadth-first order: the upstream ones first
    after = np.array([automaton.start], dtype=np.int32)
    for _ in range(m):
        after = np.unique(maps[:, after])
    rank = np.full(automaton.n_states, automaton.n_states, dtype=np.int64)
    rank[order] = np.arange(len(order))
    sources = [int(p) for p in after[np.argsort(rank[after], kind="stable")]]
    cyclic = cyclic_states(maps)
    depth = 0
    for states in _largest_reach_sets(maps, sources):
        if len(states) > 1 and _kept_apart_by_a_letter(automaton, cyclic, states):
            return None
        if len(states) * (len(states) - 1) // 2 > MAX_PAIRS:
            return None
        walk = _cached_walk(maps, states, max_k, cache)
        if walk.depth is None:
            return None
        depth = max(depth, walk.depth)
    return depth


def window_table(automaton: Semiautomaton, k: int) -> tuple[int, ...]:
    """delta(q, w) for every word w of length k in lexicographic order (oldest letter most
    significant), from the start state; from any state when ``automaton`` is k-definite."""
    M = np.asarray(automaton.maps, dtype=np.int64)  # [letter, state]
    if automaton.partial:
        return _legal_window_table(automaton, M, k)
    cur = np.array([automaton.start], dtype=np.int64)
    for _ in range(k):
        cur = M[:, cur].T.reshape(-1)  # index old * |Sigma| + a
    return tuple(int(q) for q in cur)


def _legal_window_table(automaton: Semiautomaton, M: np.ndarray, k: int) -> tuple[int, ...]:
    """:func:`window_table` of a partial automaton k-definite on its legal words: each window's
    one image from the legally reachable states where it is defined (the start state where it is
    defined from none: no legal input ends in it)."""
    ok = defined_table(automaton)
    cur = legal_reachable(automaton)[None, :]  # [windows, reachable states], -1 once undefined
    for _ in range(k):
        nxt = np.where(cur[:, None, :] >= 0, M[:, np.maximum(cur, 0)].transpose(1, 0, 2), -1)
        legal = np.where(cur[:, None, :] >= 0, ok[:, np.maximum(cur, 0)].transpose(1, 0, 2), False)
        cur = np.where(legal, nxt, -1).reshape(-1, cur.shape[1])  # index old * |Sigma| + a
    best = cur.max(axis=1)
    return tuple(int(q) if q >= 0 else automaton.start for q in best)


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
    cache: WalkCache = {}
    plan, reason = definite_detect(automaton, max_k, max_keys, cache)
    best = (plan.k, 0) if plan is not None else None
    s = automaton.n_symbols
    for m in range(1, max_k + 1):
        limit = max_k - m if best is None else min(max_k - m, best[0] - m - 1)
        if limit < 0 or s**m > max_keys:
            break
        k = generalised_depth(automaton, m, limit, cache)
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


def definite_detect(automaton: Semiautomaton, max_k: int = MAX_LOOKBACK, max_keys: int = MAX_LOOKBACK_KEYS,
                    cache: WalkCache | None = None) -> tuple[LookbackPlan | None, str]:
    """The lookback plan of ``automaton`` (smallest k), or None and the reason it has none:
    not definite, definite only beyond ``max_k``, a window table over ``max_keys``, or a test
    over its budget."""
    k, reason = definite_depth(automaton, cache=cache)
    name = automaton.name or "the automaton"
    if k is None:
        return None, f"{name} is {reason}" if reason.startswith("not") else f"{name}: {reason}"
    if k > max_k:
        return None, f"{name} is {k}-definite, beyond the lookback limit k <= {max_k}"
    keys = automaton.n_symbols**k
    if keys > max_keys:
        return None, (f"{name} is {k}-definite, but its window table has {automaton.n_symbols}^{k} = {keys:,} "
                      f"entries, over the budget of {max_keys:,}")
    return LookbackPlan(k, automaton.n_symbols, automaton.n_states, window_table(automaton, k)), reason
