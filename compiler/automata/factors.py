"""Factor descriptions: the state as a function of the last k - 1 letters and capped counts of
the k-factors that matter (strictly local, locally testable and locally threshold testable
automata, SL_k, LT_k, LTT_{k,t}).

A *factor description* of an automaton (from its start q0) is

* a *letter class* per letter: letters whose maps are equal (delta(., a) = delta(., b)) share
  one; everything below reads class codes 1..s (0 is the pad before the start), and the
  padded text of a word w is 0^(k-1) followed by its class codes;
* *window patterns* P (strings of codes of length 1..k-1, leading pads allowed, closed under
  suffixes): the *window class* omega_t is the index (1-based, 0: none) of the longest
  pattern that the padded text ends with at t;
* *factors* R (strings of k codes, leading pads allowed) in *groups*: the count of group g at
  t is the number of positions 1 <= s <= t whose last k codes are a factor of g, capped at t
  (the *threshold*; t = 1 is "occurred");
* a table F with q_t = F(omega_t, capped counts) for every input and every t >= 1.

SL_k, LT_k and LTT_{k,t} automata are those whose (minimal) state is such a function with
every window of length k - 1 a pattern and every k-factor counted alone; the description
keeps only the patterns and factors the automaton tells apart, so its size follows the
automaton, not |Sigma|^k.

**The proof is a product reachability.**  The tracker (omega, counts) is run by an
Aho-Corasick machine over P and R (its node: the longest suffix of the padded text that is a
prefix of a pattern or factor, which determines omega and the factor ending at t), so the
pair (q_t, node_t, counts_t) evolves deterministically with the letters; the set reached from
(q0, node_0, 0) over all inputs is finite and computed by a breadth-first search
(:func:`_closure`).  A description is accepted only when q is a function of (omega, counts)
on that whole set: then q_t = F(omega_t, counts_t) for every input by induction on t.

**Finding P, R and the groups** (:func:`detect`, at k = :data:`MAX_K`, thresholds 1, 2, ...)
is conflict driven: while the closure holds two nodes with equal features and different states,
take their shortest words (a minority state's, a majority state's): candidates are the first's
window suffix the second lacks and the factors whose capped counts differ that end where a run
changes strongly connected component; the one leaving fewest conflicts is added.  When nothing
differs (same window, same capped count of every k-factor) the automaton is not in LTT_{k,t}:
the two words are the refusal's witness, as are the sampled swaps and pumps of :func:`~.factor_witnesses.refuted`
(random words, then blocks: powers of short words, most of them the powers that keep the most
states apart -- a balanced block keeps a stack's level, so a stack is refused in tens of
milliseconds instead of the search's budget).
Then unneeded factors and windows are dropped and groups merged while the closure stays a
function.  The rules only propose; every candidate is checked by a closure.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import SpecError
from .factor_witnesses import letter_with_a_cycle, refuted, witness
from .graphs import strongly_connected
from .spec import Semiautomaton

MAX_K = 6
"""Largest factor width the search tries."""
MAX_THRESHOLD = 3
"""Largest threshold the search tries."""
MAX_PATTERNS = 160
"""Most window patterns plus factors a description may hold while it is searched."""
MAX_CANDIDATES = 12
"""Most factors a refinement weighs (one trial closure each)."""
MAX_ROUNDS = 400
"""Most refinements (closures) per (k, t)."""
MAX_NODES = 1 << 19
"""Largest closure (reachable (state, node, counts)) before giving up."""
MAX_WORK = 1 << 21
"""Most closure rows (times letter classes) the closures of one threshold's search may compute
together (its time budget)."""
MAX_CELLS = 1 << 22
"""Largest transition table (letters x states) the search reads."""


@dataclass(frozen=True)
class FactorPlan:
    """A factor description (module docstring), from the automaton's start.

    ``classes[a]``: the class code (1..n_classes) of letter a; ``windows``: the window patterns
    in index order (omega = i + 1 for ``windows[i]``); ``factors`` with ``groups[i]`` the group of
    ``factors[i]``; ``keys``: every (omega, capped count of each group) reached, with ``states``
    the state there."""

    k: int
    threshold: int
    n_symbols: int
    n_states: int
    classes: tuple[int, ...]
    windows: tuple[tuple[int, ...], ...]
    factors: tuple[tuple[int, ...], ...]
    groups: tuple[int, ...]
    keys: tuple[tuple[int, ...], ...]
    states: tuple[int, ...]
    tier: tuple[int, ...] = ()  # the tier's letters (compiler/automata/tiers.py); () when every letter is
    # one, else keys[0] = (len(windows) + 1, 0, ..) is the start's: no tier letter yet

    @property
    def n_groups(self) -> int:
        return max(self.groups) + 1 if self.groups else 0

    @property
    def layers(self) -> int:
        """The counts in one layer when k = 1 (the factors are letters: token features), else the
        window's heads and flags first: 2; a tier's most recent letters first: 3."""
        return 3 if self.tier else 1 if self.k == 1 else 2

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "threshold": self.threshold, "n_symbols": self.n_symbols, "n_states": self.n_states,
                "classes": list(self.classes), "windows": [list(p) for p in self.windows],
                "factors": [list(f) for f in self.factors], "groups": list(self.groups),
                "keys": [list(x) for x in self.keys], "states": list(self.states), "tier": list(self.tier)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> FactorPlan:
        """The plan of :meth:`to_dict`; SpecError when its parts do not fit together."""
        k, t, s, n = int(d["k"]), int(d["threshold"]), int(d["n_symbols"]), int(d["n_states"])
        classes = tuple(int(c) for c in d["classes"])
        windows = tuple(tuple(int(v) for v in p) for p in d["windows"])
        factors = tuple(tuple(int(v) for v in f) for f in d["factors"])
        groups = tuple(int(g) for g in d["groups"])
        keys = tuple(tuple(int(v) for v in x) for x in d["keys"])
        states, tier = tuple(int(q) for q in d["states"]), tuple(int(a) for a in d.get("tier", ()))
        if k < 1 or t < 1 or s < 1 or n < 1 or len(classes) != s or not factors:
            raise SpecError("a factor plan needs k, threshold, n_symbols, n_states >= 1, a class per letter "
                            "and at least one factor")
        top = max(classes)
        if min(classes) < 1 or any(len(p) > k - 1 or not p or any(not 0 <= v <= top for v in p) for p in windows) \
                or any(not 1 <= len(f) <= k or any(not 0 <= v <= top for v in f) for f in factors):
            raise SpecError("a factor plan's patterns need codes of its classes, windows shorter than k, "
                            "factors up to k")
        if len(groups) != len(factors) or sorted(set(groups)) != list(range(max(groups) + 1)):
            raise SpecError("a factor plan needs a group per factor, numbered 0..G-1")
        G = max(groups) + 1
        if len(keys) != len(states) or any(len(x) != 1 + G or not 0 <= x[0] <= len(windows) + bool(tier)
                                           or any(not 0 <= c <= t for c in x[1:]) for x in keys):
            raise SpecError("a factor plan's keys need (window class, a capped count per group)")
        if any(not 0 <= q < n for q in states) or any(not 0 <= a < s for a in tier) or (tier and k < 2):
            raise SpecError(f"a factor plan's states must lie in 0..{n - 1}, its tier's letters in 0..{s - 1} "
                            f"(a tier with k >= 2)")
        return FactorPlan(k, t, s, n, classes, windows, factors, groups, keys, states, tier)


# ---------------------------------------------------------------------------------------
# the tracker: an Aho-Corasick machine over the patterns and factors


@dataclass(frozen=True)
class Tracker:
    """``step[node, code]``: the next node (codes 0..s, 0 the pad); ``omega[node]``: the window
    class; ``inc[node, g]``: how many factors of group g end there (the node's suffixes);
    ``start``: the node after the k - 1 pads."""

    step: np.ndarray
    omega: np.ndarray
    inc: np.ndarray
    start: int


def tracker(k: int, n_codes: int, windows: tuple[tuple[int, ...], ...], factors: tuple[tuple[int, ...], ...],
            groups: tuple[int, ...]) -> Tracker:
    """The Aho-Corasick machine of the windows and factors over codes 0..n_codes - 1."""
    prefixes: set[tuple[int, ...]] = {()}
    for p in (*windows, *factors):
        prefixes.update(p[:i] for i in range(1, len(p) + 1))
    nodes = sorted(prefixes, key=lambda p: (len(p), p))
    index = {p: i for i, p in enumerate(nodes)}
    step = np.zeros((len(nodes), n_codes), dtype=np.int64)
    for i, p in enumerate(nodes):
        for c in range(n_codes):
            x: tuple[int, ...] = p + (c,)
            while x not in index:
                x = x[1:]
            step[i, c] = index[x]
    where = {p: i + 1 for i, p in enumerate(windows)}
    fac = dict(zip(factors, groups))
    omega = np.array([next((where[p[-j:]] for j in range(min(len(p), k - 1), 0, -1) if p[-j:] in where), 0)
                      for p in nodes], dtype=np.int64)
    inc = np.zeros((len(nodes), max(groups, default=-1) + 1), dtype=np.int64)
    for i, p in enumerate(nodes):
        for j in range(1, len(p) + 1):
            if p[-j:] in fac:
                inc[i, fac[p[-j:]]] += 1
    node = 0
    for _ in range(k - 1):
        node = int(step[node, 0])
    return Tracker(step, omega, inc, node)


class _TooBig(Exception):
    """A closure or a description outgrew its budget."""


@dataclass
class _Closure:
    """Every (q, node, counts) reached after the start (row 0: the start itself, t = 0), as arrays,
    with each row's parent row, letter class and feature code (omega and the counts, one integer)."""

    q: np.ndarray
    node: np.ndarray
    counts: np.ndarray  # [N, G]
    parent: np.ndarray
    letter: np.ndarray
    feature: np.ndarray


def _closure(maps: np.ndarray, tr: Tracker, q0: int, n_groups: int, threshold: int) -> _Closure:
    """The breadth-first closure from (q0, start node, 0) over the letter classes (``maps``:
    [class, state], class c has code c + 1); counts capped at ``threshold``.  The start is its own
    row (t = 0 reads no key), apart from the same triple reached by a word."""
    n_cls, n_nodes = maps.shape[0], len(tr.omega)
    radix = threshold + 1
    if radix ** n_groups * n_nodes * maps.shape[1] * 2 >= 1 << 62:
        raise _TooBig
    inc = tr.inc
    weights = np.array([radix**g for g in range(n_groups)], dtype=np.int64)
    span = radix**n_groups
    q = np.array([q0])
    node = np.array([tr.start])
    counts = np.zeros((1, n_groups), dtype=np.int64)
    seen = np.array([-1], dtype=np.int64)  # the start's code: no word reaches it
    qs, nodes, cs, parents, letters = [q], [node], [counts], [np.array([-1])], [np.array([-1])]
    base, total = 0, 1
    while len(q):
        nq = maps[:, q].T.reshape(-1)  # [row * n_cls + class]
        nn = tr.step[np.repeat(node, n_cls), np.tile(np.arange(1, n_cls + 1), len(q))]
        nc = np.minimum(threshold, np.repeat(counts, n_cls, axis=0) + inc[nn])
        codes = (nq * n_nodes + nn) * span + nc @ weights
        order = np.argsort(codes, kind="stable")
        lead = np.ones(len(order), dtype=bool)
        lead[1:] = codes[order[1:]] != codes[order[:-1]]
        first = np.sort(order[lead])  # each new code's first row
        at = np.minimum(np.searchsorted(seen, codes[first]), len(seen) - 1)
        fresh = first[seen[at] != codes[first]]
        if not len(fresh):
            break
        seen = np.sort(np.concatenate([seen, codes[fresh]]))
        total += len(fresh)
        if total > MAX_NODES:
            raise _TooBig
        q, node, counts = nq[fresh], nn[fresh], nc[fresh]
        qs.append(q)
        nodes.append(node)
        cs.append(counts)
        parents.append(base + fresh // n_cls)
        letters.append(fresh % n_cls + 1)
        base += len(qs[-2])
    node_all, counts_all = np.concatenate(nodes), np.concatenate(cs)
    return _Closure(np.concatenate(qs), node_all, counts_all, np.concatenate(parents), np.concatenate(letters),
                    tr.omega[node_all] * span + counts_all @ weights)


def _conflicts(cl: _Closure) -> np.ndarray:
    """Pairs of rows (after the start, [n, 2]) with equal features and different states, adjacent
    in the order by (feature, state)."""
    f, q = cl.feature[1:], cl.q[1:]
    order = np.lexsort((q, f))
    a, b = order[:-1], order[1:]
    bad = np.flatnonzero((f[a] == f[b]) & (q[a] != q[b]))
    return np.stack([a[bad], b[bad]], 1) + 1


def _conflict(cl: _Closure) -> tuple[int, int] | None:
    """A pair of rows with equal features and different states, or None: in the first feature
    class (by its earliest row) that holds several states, the earliest row of a state other than
    the class's most common one, then the earliest row of the most common state (the minority's
    word is the one whose suffix matters)."""
    pairs = _conflicts(cl)
    if not len(pairs):
        return None
    f = cl.feature[int(pairs[0, 0])]
    rows = np.flatnonzero(cl.feature == f)
    rows = rows[rows > 0]
    states, counts = np.unique(cl.q[rows], return_counts=True)
    common = states[np.argmax(counts)]
    return int(rows[cl.q[rows] != common][0]), int(rows[cl.q[rows] == common][0])


def _word(cl: _Closure, row: int) -> list[int]:
    """The (shortest) class codes leading to ``row``."""
    out = []
    while cl.parent[row] >= 0:
        out.append(int(cl.letter[row]))
        row = int(cl.parent[row])
    return out[::-1]


def _capped_factors(word: list[int], k: int, j: int, threshold: int) -> dict[tuple[int, ...], int]:
    """Every j-factor ending at a position of ``word`` in its padded text, and its count, capped."""
    x = [0] * (k - 1) + word
    return {f: min(c, threshold) for f, c in Counter(tuple(x[i + k - j : i + k]) for i in range(len(word))).items()}


# ---------------------------------------------------------------------------------------
# the search


def components(maps: np.ndarray) -> np.ndarray:
    """The strongly connected component of every state (numbered in Tarjan's completion order)."""
    n = maps.shape[1]
    succ = [sorted(set(int(x) for x in maps[:, q])) for q in range(n)]
    comp = np.zeros(n, dtype=np.int64)
    for c, members in enumerate(strongly_connected(range(n), succ.__getitem__)):
        comp[members] = c
    return comp


@dataclass
class _Search:
    """One (k, t) search's state: the automaton's class maps, the start, the patterns found."""

    maps: np.ndarray
    q0: int
    k: int
    threshold: int
    windows: list[tuple[int, ...]]
    factors: list[tuple[int, ...]]
    groups: list[int]
    work: list[int]  # closure rows computed so far, shared by the searches of one detection
    comp: np.ndarray  # the strongly connected component of each state
    merge: bool = False  # whether a new factor may join a group entering the same component
    entered: dict[int, int] = field(default_factory=dict)  # per group: the component its first factor entered

    def crossings(self, word: list[int]) -> list[tuple[int, int]]:
        """The positions (1-based) where the run of ``word`` from q0 enters another component (where
        a count that matters can have grown), with the component entered."""
        q, out = self.q0, []
        for i, c in enumerate(word):
            nq = int(self.maps[c - 1, q])
            if self.comp[nq] != self.comp[q]:
                out.append((i + 1, int(self.comp[nq])))
            q = nq
        return out

    def closure(self, factors: list[tuple[int, ...]] | None = None,
                groups: list[int] | None = None) -> tuple[_Closure, Tracker]:
        factors = self.factors if factors is None else factors
        groups = self.groups if groups is None else groups
        if self.work[0] > MAX_WORK:
            raise _TooBig
        tr = tracker(self.k, self.maps.shape[0] + 1, tuple(self.windows), tuple(factors), tuple(groups))
        cl = _closure(self.maps, tr, self.q0, max(groups) + 1 if groups else 0, self.threshold)
        self.work[0] += len(cl.q) * self.maps.shape[0]
        return cl, tr

    def works(self, factors: list[tuple[int, ...]], groups: list[int]) -> bool:
        try:
            cl, tr = self.closure(factors, groups)
        except _TooBig:
            return False
        return _conflict(cl) is None

    def refine(self, w1: list[int], w2: list[int]) -> bool:
        """Add what tells w1 and w2 apart (module docstring): of the candidates -- w1's window's
        shortest suffix that w2's lacks (w1: the minority state's word), each factor whose capped
        counts differ and that ends where a run changes component (else the shortest such) -- the one
        that leaves the fewest conflicts; False when nothing tells them apart."""
        k = self.k
        cands: list[tuple[list[tuple[int, ...]], list[tuple[tuple[int, ...], int]]]] = []  # (windows, (factor, group))
        u1, u2 = ([0] * (k - 1) + w1)[len(w1):], ([0] * (k - 1) + w2)[len(w2):]
        if u1 != u2:
            j = next(j for j in range(1, k) if u1[-j:] != u2[-j:])
            new = [p for p in (tuple(u1[-i:]) for i in range(1, j + 1)) if p not in self.windows]
            cands.append((new, []))
        differ: list[tuple[int, ...]] = []
        for j in range(1, k + 1):
            c1, c2 = _capped_factors(w1, k, j, self.threshold), _capped_factors(w2, k, j, self.threshold)
            differ += [f for f in sorted(set(c1) | set(c2)) if c1.get(f, 0) != c2.get(f, 0) and f not in self.factors]
        ends = {tuple(([0] * (k - 1) + w)[p - j + k - 1 : p + k - 1]): c for w in (w1, w2)
                for p, c in self.crossings(w) for j in range(1, k + 1)}  # windows ending where a run changes component
        at = [f for f in differ if f in ends]
        shortest = [f for f in differ if len(f) == min(map(len, differ))] if differ else []
        fresh = max(self.groups, default=-1) + 1
        cands += [([], [(f, fresh)]) for f in (at or shortest)[:MAX_CANDIDATES]]
        if not cands:
            return False
        scores = [self._left(c) for c in cands] if len(cands) > 1 else [(0, 0)]
        best = min(range(len(cands)), key=lambda i: scores[i])
        windows, factors = cands[best]
        for (f, _), g in itertools.product(factors, range(fresh) if self.merge else ()):  # join a group entering
            if ends.get(f) is not None and self.entered.get(g) == ends[f] and \
                    self._left((windows, [(f, g)])) <= scores[best]:
                factors = [(f, g)]
                break
        for f, g in factors:
            self.entered.setdefault(g, ends.get(f, -1))
        self.windows += windows
        self.factors += [f for f, _ in factors]
        self.groups += [g for _, g in factors]
        return True

    def _left(self, cand: tuple[list[tuple[int, ...]], list[tuple[tuple[int, ...], int]]]) -> tuple[int, int]:
        """How many conflicts are left with ``cand`` added (fewest first, ties to the earlier -- the
        shorter -- candidate; over budget last)."""
        windows, factors = cand
        old = self.windows
        self.windows = old + windows
        try:
            cl, _ = self.closure(self.factors + [f for f, _ in factors], self.groups + [g for _, g in factors])
        except _TooBig:
            return (1, 0)
        finally:
            self.windows = old
        return (0, len(_conflicts(cl)))


def _class_maps(a: Semiautomaton) -> tuple[np.ndarray, tuple[int, ...]]:
    """The distinct letter maps [class, state] (first occurrence order) and each letter's class code."""
    maps = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    _, first, inverse = np.unique(maps, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return maps[np.sort(first)], tuple(int(rank[i]) + 1 for i in inverse.reshape(-1))


def _search(maps: np.ndarray, q0: int, k: int, threshold: int, work: list[int],
            merge: bool = False) -> tuple[_Search | None, str]:
    """The refinement loop for one (k, t): the search with a description that works, or None and why
    (``merge``: a new factor joins a group whose factors enter the same component when that leaves
    no more conflicts -- the closure stays small when many factors do one thing, as forbidden ones)."""
    s = _Search(maps, q0, k, threshold, [], [], [], work, components(maps), merge)
    for _ in range(MAX_ROUNDS):
        cl, tr = s.closure()
        pair = _conflict(cl)
        if pair is None:
            return s, ""
        w1, w2 = _word(cl, pair[0]), _word(cl, pair[1])
        if not s.refine(w1, w2):
            return None, (f"the class words {w1} and {w2} end in the same {k - 1} letters and hold every "
                          f"{k}-factor equally often (capped at {threshold}), yet reach different states")
        if len(s.windows) + len(s.factors) > MAX_PATTERNS:
            raise _TooBig
    raise _TooBig


def _renumber(groups: list[int]) -> list[int]:
    """Groups numbered 0..G-1 in order of first appearance."""
    order: dict[int, int] = {}
    return [order.setdefault(g, len(order)) for g in groups]


def _simplify(s: _Search) -> None:
    """Drop the factors and windows the closure does not need, then merge groups while it stays a
    function (module docstring)."""
    for i in range(len(s.factors) - 1, -1, -1):
        rest, groups = s.factors[:i] + s.factors[i + 1 :], _renumber(s.groups[:i] + s.groups[i + 1 :])
        if rest and s.works(rest, groups):
            s.factors, s.groups = rest, groups
    s.groups = _renumber(s.groups)
    for p in sorted(s.windows, key=len, reverse=True):
        if not any(len(o) > len(p) and o[-len(p):] == p for o in s.windows):
            s.windows.remove(p)
            if not s.works(s.factors, s.groups):
                s.windows.append(p)
    for g in range(max(s.groups, default=-1), 0, -1):
        for h in range(g):
            trial = _renumber([h if x == g else x for x in s.groups])
            if s.works(s.factors, trial):
                s.groups = trial
                break


def _plan(a: Semiautomaton, s: _Search, classes: tuple[int, ...]) -> FactorPlan:
    """The plan of a search that works, with k its longest factor (or window + 1): more leading pads
    change no node of the tracker (every pattern ends in a letter), so the closure stands."""
    cl, tr = s.closure()
    k = max([len(f) for f in s.factors] + [len(p) + 1 for p in s.windows])
    keys = np.concatenate([tr.omega[cl.node][:, None], cl.counts], axis=1)[1:]
    rows = sorted({tuple(int(v) for v in key): int(q) for key, q in zip(keys, cl.q[1:])}.items())
    return FactorPlan(k, s.threshold, a.n_symbols, a.n_states, classes, tuple(s.windows), tuple(s.factors),
                      tuple(s.groups), tuple(k for k, _ in rows), tuple(q for _, q in rows))


def detect(a: Semiautomaton, max_k: int = MAX_K, max_threshold: int = MAX_THRESHOLD) -> tuple[FactorPlan | None, str]:
    """The factor description with the smallest threshold, searched at k = ``max_k`` (a description
    with factors up to k holds with any larger k; the plan's k is its longest pattern's), or None
    and why there is none (module docstring).  Refusals: a letter with a cycle (not aperiodic),
    two words with equal features at ``max_k`` (a proof for every smaller k and threshold), or the
    search's budget."""
    name = a.name or "the automaton"
    if a.partial:
        return None, f"{name} is partial (factor descriptions are searched on complete automata)"
    if a.n_states * a.n_symbols > MAX_CELLS:
        return None, f"{name}: its {a.n_states:,} x {a.n_symbols:,} table is over the budget of {MAX_CELLS:,} cells"
    maps, classes = _class_maps(a)
    cycle = letter_with_a_cycle(maps)
    if cycle is not None:
        letter = a.alphabet[classes.index(cycle + 1)]
        return None, (f"{name} is not locally threshold testable: no power of the letter {letter!r} is idempotent "
                      f"(a^n != a^(n+1) for every n: a cycle, which no capped count sees)")
    k = max_k
    pair = refuted(maps, a.start, k, None)
    if pair is not None:
        return None, f"{name} is not locally threshold testable with k <= {k}: {witness(pair, k, None)}"
    why = ""
    for t in range(1, max_threshold + 1):
        pair = refuted(maps, a.start, k, t)
        if pair is not None:
            why = witness(pair, k, t)
            continue
        for merge in (False, True):  # factors in groups of their own, then merged as they go
            try:
                s, reason = _search(maps, a.start, k, t, [0], merge)  # a budget per try
                break
            except _TooBig:
                why = f"gave up at threshold {t} over the search's budget ({MAX_WORK:,} closure rows, " \
                      f"{MAX_PATTERNS} patterns)"
        else:
            continue
        if s is None:
            why = reason
            continue
        if not s.factors:
            return None, f"{name} is definite: its last {k - 1} letters decide the state (no factor counts)"
        _simplify(s)
        s.work[0] = 0  # the final closure is the proof: it runs whatever the search spent
        plan = _plan(a, s, classes)
        return plan, (f"locally {'threshold ' * (t > 1)}testable with k = {plan.k}" + (f", t = {t}" if t > 1 else ""))
    return None, f"{name} is not locally threshold testable with k <= {max_k}, t <= {max_threshold}: {why}"
