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
(:func:`~.factor_closure.closure_of`).  A description is accepted only when q is a function of (omega, counts)
on that whole set: then q_t = F(omega_t, counts_t) for every input by induction on t.

**Finding P, R and the groups** (:func:`detect`, at k = :data:`MAX_K`, thresholds 1, 2, ...)
is conflict driven: while the closure holds two nodes with equal features and different states,
take their shortest words (a minority state's, a majority state's): candidates are either word's
window suffix up to where the two differ and -- unless both states lie in one strongly connected
component, whose states the window tells apart -- the factors whose capped counts differ that end
where a run enters its last component (else anywhere a run changes component, else the
shortest); the one that leaves the least confusion is added (a score: :data:`SCORES`; each score
is a try, in rounds of budgets).  When nothing differs (same window, same capped count of every
k-factor) the automaton is not in LTT_{k,t}:
the two words are the refusal's witness, as are the sampled swaps and pumps of :func:`~.factor_witnesses.refuted`
(random words, the automaton's own runs pumped, then blocks: powers of short words, most of them
the powers that keep the most states apart -- a balanced block keeps a stack's level, so a stack
is refused in tens of milliseconds instead of the search's budget -- and the runs split and
pumped between repetitions of one letter, which count a factor t against t + 1 where a run's own
pump counts it t + 1 against t + 2: a threshold-2 language is refused at t = 1 before its search).
Then unneeded factors and windows are dropped, groups merged and factors shortened while the
closure stays a function.  The rules only propose; every candidate is checked by a closure.

**Given features** (:class:`Given`, :func:`given_description`): the same search on an automaton
whose states carry a label and a free feature -- the PLT detector's automaton run beside a
subsequence tracker (compiler/automata/piecewise_local.py) -- makes the label a function of
(window, counts, free feature) instead of the state a function of (window, counts).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import SpecError
from .factor_closure import (Closure, TooBig, Tracker, capped_factors, closure_of, conflict, conflicts, confused_pairs,
                             confused_share, tracker, word_of)
from .factor_witnesses import letter_with_a_cycle, refuted, witness
from .graphs import strongly_connected
from .shares import share, share_text
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
MAX_WORK = 36 << 20
"""Most work (:func:`closure_work`) the closures of one detection may do together, every threshold
and try (its time budget: about 3 CPU s, at 8.5e-8 s a unit).  Three times the 12 << 20 closure rows
it was when a closure cost only its rows: the fixed cost per closure (:data:`CLOSURE_COST`) made the
searches of small automata -- many closures of a few rows -- run out at a third of that (a tier's
search on the 17-state TSL_6 language on 16 letters ran out at 1x and 2x, and found its description
at 3x with the same try as before)."""
CLOSURE_COST = 1 << 12
"""The fixed work of computing one closure, in closure rows times letter classes: the tracker and
one vectorised step per breadth-first level, whatever the rows (``benchmarks/factor_closure_cost.py``:
a least-squares fit of CPU time over 527 closures of four generated LT/LTT/SL languages, two runs:
4.2e-4 to 5.2e-4 s per closure and 8.5e-8 to 8.7e-8 s per row x class, i.e. 4,800 to 6,100 units;
the 817-state LTT language alone about 1,100)."""
MAX_CELLS = 1 << 22
"""Largest transition table (letters x states) the search reads."""
SHARE, ROWS, PAIRS = SCORES = ("share", "rows", "pairs")
"""How a refinement scores a candidate (:meth:`_Search._left`): the share of closure rows no function
of the features gets right, the number of conflicting rows, or the number of pairs of states some
feature leaves together.  No one score finds every description quickly (a sink's forbidden factors
lower the rows and the share one by one, the pairs only when the last is in; a count copies the
conflicting rows): each is a try."""
TRIES = ((False, SHARE), (False, ROWS), (False, PAIRS), (True, ROWS))
"""The searches of one threshold, in order: (``merge``, score)."""
FEW_GROUPS = 8
"""A description with more groups than this does not end the tries (a score that took a count per
factor, where another finds a few: its closure and its tables are larger by far)."""
MEMO_ROWS = 1 << 19
"""Most closure rows one detection keeps for reuse (:class:`_Memo`: the tries, thresholds and scores meet the
same descriptions again; about 40 MB)."""
ROUNDS = (1, 4)
"""Each try's budget in the first round of tries, then in the second (a try that ran out is run
again with the larger budget), in sixteenths of the detection's (the second round's last tries
get what is left)."""


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
    def definite(self) -> bool:
        """Whether the window alone decides the state (no factor: a tier's only, compiler/automata/tiers.py)."""
        return not self.factors

    @property
    def layers(self) -> int:
        """The counts in one layer when k = 1 (the factors are letters: token features), else the
        window's heads and flags first: 2; a tier's most recent letters first: 3.  When the tier's
        window alone decides, the first lookup writes the state: 2, or 1 when that window is the
        most recent tier letter (k = 2)."""
        if self.tier and self.definite:
            return 1 if self.k == 2 else 2
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
        if k < 1 or t < 1 or s < 1 or n < 1 or len(classes) != s or not (factors or tier):
            raise SpecError("a factor plan needs k, threshold, n_symbols, n_states >= 1, a class per letter "
                            "and at least one factor (or a tier)")
        top = max(classes)
        if min(classes) < 1 or any(len(p) > k - 1 or not p or any(not 0 <= v <= top for v in p) for p in windows) \
                or any(not 1 <= len(f) <= k or any(not 0 <= v <= top for v in f) for f in factors):
            raise SpecError("a factor plan's patterns need codes of its classes, windows shorter than k, "
                            "factors up to k")
        G = len(set(groups))
        if len(groups) != len(factors) or sorted(set(groups)) != list(range(G)):
            raise SpecError("a factor plan needs a group per factor, numbered 0..G-1")
        if len(keys) != len(states) or any(len(x) != 1 + G or not 0 <= x[0] <= len(windows) + bool(tier)
                                           or any(not 0 <= c <= t for c in x[1:]) for x in keys):
            raise SpecError("a factor plan's keys need (window class, a capped count per group)")
        if any(not 0 <= q < n for q in states) or any(not 0 <= a < s for a in tier) or (tier and k < 2):
            raise SpecError(f"a factor plan's states must lie in 0..{n - 1}, its tier's letters in 0..{s - 1} "
                            f"(a tier with k >= 2)")
        return FactorPlan(k, t, s, n, classes, windows, factors, groups, keys, states, tier)


# ---------------------------------------------------------------------------------------
# the search (the tracker and its closure: compiler/automata/factor_closure.py)


def closure_work(rows: int, n_classes: int, kept: bool) -> int:
    """What a closure of ``rows`` rows costs the search's budget (:data:`MAX_WORK`): computed,
    :data:`CLOSURE_COST` plus its rows times the letter classes (one step per row and class);
    kept (:class:`_Memo`), its rows: the conflict and score passes read each row once (measured
    with :data:`CLOSURE_COST`: 1.25 to 1.33 units per row, plus about 1e-4 s a pass that is not
    counted)."""
    return rows if kept else CLOSURE_COST + rows * n_classes


@dataclass
class _Memo:
    """The closures one detection computed, by description (k, threshold, windows, factors, groups: with the
    detection's class maps and start, all a closure depends on), None for one over its size; up to
    :data:`MEMO_ROWS` rows kept.  A closure found here counts as the work of reading it
    (:func:`closure_work`), not of computing it: the tries meet the early descriptions of one another
    again and again, and a kept closure counted in full spent most of a 64-letter detection's budget
    on closures it never computed."""

    found: dict[tuple, tuple[Closure, Tracker] | None] = field(default_factory=dict)
    rows: int = 0

    def closure(self, maps: np.ndarray, q0: int, key: tuple) -> tuple[Closure, Tracker]:
        """The closure of the description ``key`` (computed, or kept); TooBig when it outgrows its size."""
        if key in self.found:
            kept = self.found[key]
            if kept is None:
                raise TooBig
            return kept
        k, threshold, windows, factors, groups = key
        tr = tracker(k, maps.shape[0] + 1, windows, factors, groups)
        try:
            cl = closure_of(maps, tr, q0, max(groups) + 1 if groups else 0, threshold)
        except TooBig:
            self.found[key] = None
            raise
        if self.rows + len(cl.q) <= MEMO_ROWS:
            self.found[key] = (cl, tr)
            self.rows += len(cl.q)
        return cl, tr


def components(maps: np.ndarray) -> np.ndarray:
    """The strongly connected component of every state (numbered in Tarjan's completion order)."""
    n = maps.shape[1]
    succ = [sorted(set(int(x) for x in maps[:, q])) for q in range(n)]
    comp = np.zeros(n, dtype=np.int64)
    for c, members in enumerate(strongly_connected(range(n), succ.__getitem__)):
        comp[members] = c
    return comp


@dataclass
class Given:
    """What a search's description need not explain (compiler/automata/piecewise_local.py: the
    automaton run beside a subsequence tracker): per state of the searched maps, ``label`` the state
    the features must determine and ``free`` a feature given with them.  The closure's rows then
    hold the label, and its features join ``free``; :func:`_search` leaves in ``stuck`` the class
    words of a conflict nothing of the search's tells apart."""

    label: np.ndarray
    free: np.ndarray
    stuck: list[list[int]] = field(default_factory=list)

    def view(self, cl: Closure) -> Closure:
        """``cl`` with each row's label for its state and the free feature joined to its features."""
        span = int(self.free.max()) + 1
        return replace(cl, q=self.label[cl.q], feature=cl.feature * span + self.free[cl.q])


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
    work: list[int]  # closure work (closure_work) so far, shared by the searches of one detection
    comp: np.ndarray  # the strongly connected component of each state
    merge: bool = False  # whether a new factor may join a group entering the same component
    score: str = SHARE  # what a candidate is scored by (SCORES, :meth:`_left`)
    limit: int = MAX_WORK  # the work (``work[0]``) at which this search gives up
    memo: _Memo = field(default_factory=_Memo)  # the closures computed so far, shared like ``work``
    entered: dict[int, int] = field(default_factory=dict)  # per group: the component its first factor entered
    given: Given | None = None  # features the description need not explain (Given)

    def same_component(self, w1: list[int], w2: list[int]) -> bool:
        """Whether the runs of ``w1`` and ``w2`` end in one component: its states are reached with the
        same counts (its cycles saturate them), so their window tells them apart, not a count."""
        q1, q2 = self.q0, self.q0
        for c in w1:
            q1 = int(self.maps[c - 1, q1])
        for c in w2:
            q2 = int(self.maps[c - 1, q2])
        return bool(self.comp[q1] == self.comp[q2])

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
                groups: list[int] | None = None) -> tuple[Closure, Tracker]:
        factors = self.factors if factors is None else factors
        groups = self.groups if groups is None else groups
        if self.work[0] > self.limit:
            raise TooBig
        key = (self.k, self.threshold, tuple(self.windows), tuple(factors), tuple(groups))
        kept = key in self.memo.found
        cl, tr = self.memo.closure(self.maps, self.q0, key)
        self.work[0] += closure_work(len(cl.q), self.maps.shape[0], kept)
        return (cl if self.given is None else self.given.view(cl)), tr

    def works(self, factors: list[tuple[int, ...]], groups: list[int]) -> bool:
        try:
            cl, tr = self.closure(factors, groups)
        except TooBig:
            return False
        return conflict(cl) is None

    def refine(self, w1: list[int], w2: list[int]) -> bool:
        """Add what tells w1 and w2 apart (module docstring): of the candidates -- either word's window's
        suffixes up to the shortest the other's lacks (w1: the minority state's word), each factor
        whose capped counts differ and that ends where a run enters its last component (else where
        it changes component, else the shortest such; none when both end in one component and a
        window differs) -- the one that leaves the least confusion (:meth:`_left`); False when
        nothing tells them apart."""
        k = self.k
        cands: list[tuple[list[tuple[int, ...]], list[tuple[tuple[int, ...], int]]]] = []  # (windows, (factor, group))
        u1, u2 = ([0] * (k - 1) + w1)[len(w1):], ([0] * (k - 1) + w2)[len(w2):]
        if u1 != u2:
            j = next(j for j in range(1, k) if u1[-j:] != u2[-j:])
            for u in (u1, u2):  # either word's window may be the one that matters (a pad: the start's)
                new = [p for p in (tuple(u[-i:]) for i in range(1, j + 1)) if p not in self.windows]
                if new:
                    cands.append((new, []))
        differ: list[tuple[int, ...]] = []
        for j in range(1, k + 1):
            c1, c2 = capped_factors(w1, k, j, self.threshold), capped_factors(w2, k, j, self.threshold)
            differ += [f for f in sorted(set(c1) | set(c2)) if c1.get(f, 0) != c2.get(f, 0) and f not in self.factors]
        ends = {tuple(([0] * (k - 1) + w)[p - j + k - 1 : p + k - 1]): c for w in (w1, w2)
                for p, c in self.crossings(w) for j in range(1, k + 1)}  # windows ending where a run changes component
        last = {tuple(([0] * (k - 1) + w)[p - j + k - 1 : p + k - 1]) for w in (w1, w2)
                for p, _ in self.crossings(w)[-1:] for j in range(1, k + 1)}  # ... where it enters its last one
        at = [f for f in differ if f in last] or [f for f in differ if f in ends]
        shortest = [f for f in differ if len(f) == min(map(len, differ))] if differ else []
        fresh = max(self.groups, default=-1) + 1
        if not (cands and self.same_component(w1, w2)):
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

    def _left(self, cand: tuple[list[tuple[int, ...]], list[tuple[tuple[int, ...], int]]]) -> tuple[int, float]:
        """How much confusion is left with ``cand`` added, by this search's score (:data:`SCORES`; least
        first, ties to the earlier -- the shorter -- candidate; over budget last)."""
        windows, factors = cand
        old = self.windows
        self.windows = old + windows
        try:
            cl, _ = self.closure(self.factors + [f for f, _ in factors], self.groups + [g for _, g in factors])
        except TooBig:
            return (1, 0)
        finally:
            self.windows = old
        return (0, confused_share(cl) if self.score == SHARE else float(confused_pairs(cl)) if self.score == PAIRS
                else float(len(conflicts(cl))))


def class_maps(a: Semiautomaton) -> tuple[np.ndarray, tuple[int, ...]]:
    """The distinct letter maps [class, state] (first occurrence order) and each letter's class code."""
    maps = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    _, first, inverse = np.unique(maps, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return maps[np.sort(first)], tuple(int(rank[i]) + 1 for i in inverse.reshape(-1))


def _search(maps: np.ndarray, q0: int, k: int, threshold: int, work: list[int], merge: bool = False,
            score: str = SHARE, limit: int = MAX_WORK, memo: _Memo | None = None,
            given: Given | None = None) -> tuple[_Search | None, str]:
    """The refinement loop for one (k, t): the search with a description that works, or None and why
    (``merge``: a new factor joins a group whose factors enter the same component when that leaves
    no more conflicts -- the closure stays small when many factors do one thing, as forbidden ones)."""
    s = _Search(maps, q0, k, threshold, [], [], [], work, components(maps), merge, score, limit, memo or _Memo(),
                given=given)
    for _ in range(MAX_ROUNDS):
        cl, tr = s.closure()
        pair = conflict(cl)
        if pair is None:
            return s, ""
        w1, w2 = word_of(cl, pair[0]), word_of(cl, pair[1])
        if not s.refine(w1, w2):
            if given is not None:
                given.stuck[:] = [w1, w2]
            return None, (f"the class words {w1} and {w2} end in the same {k - 1} letters and hold every "
                          f"{k}-factor equally often (capped at {threshold}), yet reach different states")
        if len(s.windows) + len(s.factors) > MAX_PATTERNS:
            raise TooBig
    raise TooBig


def _tries(maps: np.ndarray, q0: int, k: int, threshold: int, work: list[int],
           total: int = MAX_WORK, memo: _Memo | None = None,
           given: Given | None = None) -> tuple[_Search | None, str]:
    """:func:`_search` with each of :data:`TRIES` in turn, in rounds of budgets (:data:`ROUNDS`), all
    within the detection's (``work`` up to ``total``): the first that ends with a pair of words
    nothing tells apart, or with a description of at most :data:`FEW_GROUPS` groups (else the one
    with the fewest groups the tries found); TooBig when none ends."""
    best: _Search | None = None
    for part, (merge, score) in itertools.product(ROUNDS, TRIES):
        if work[0] >= total:
            break
        try:
            s, reason = _search(maps, q0, k, threshold, work, merge, score, min(total, work[0] + total * part // 16),
                                memo, given)
        except TooBig:
            continue
        if s is None or len(set(s.groups)) <= FEW_GROUPS:
            return s, reason
        best = s if best is None or len(set(s.groups)) < len(set(best.groups)) else best
    if best is None:
        raise TooBig
    return best, ""


def given_description(maps: np.ndarray, q0: int, given: Given, k: int = MAX_K,
                      budget: int = MAX_WORK) -> tuple[_Search | None, str]:
    """The search at threshold 1 (which factors occurred) with ``given`` features: the simplified
    search whose closure makes ``given.label`` a function of (window, counts, ``given.free``), or
    None and why (``given.stuck`` holds the class words when nothing tells two apart)."""
    work = [0]
    given.stuck.clear()
    try:
        s, reason = _tries(maps, q0, k, 1, work, budget, given=given)
    except TooBig:
        return None, f"the factor search's budget ({budget:,} work units, {MAX_PATTERNS} patterns)"
    if s is None:
        return None, reason
    s.limit = s.work[0] + budget * ROUNDS[-1] // 16
    _simplify(s)
    s.work[0], s.limit = 0, MAX_WORK
    return s, ""


def _renumber(groups: list[int]) -> list[int]:
    """Groups numbered 0..G-1 in order of first appearance."""
    order: dict[int, int] = {}
    return [order.setdefault(g, len(order)) for g in groups]


def _simplify(s: _Search) -> None:
    """Drop the factors and windows the closure does not need, then merge groups while it stays a
    function, then drop and shorten factors again (a merged group may hold one factor inside another;
    module docstring)."""
    _drop_factors(s)
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
    _drop_factors(s)


def _drop_factors(s: _Search) -> None:
    """Drop each factor the closure does not need, then shorten each while it stays a function (the
    plan's k is its longest factor's)."""
    for i in range(len(s.factors) - 1, -1, -1):
        rest, groups = s.factors[:i] + s.factors[i + 1 :], _renumber(s.groups[:i] + s.groups[i + 1 :])
        if rest and s.works(rest, groups):
            s.factors, s.groups = rest, groups
    s.groups = _renumber(s.groups)
    for i, f in enumerate(s.factors):
        while len(f) > 1 and f[1:] not in s.factors and s.works(s.factors[:i] + [f[1:]] + s.factors[i + 1 :], s.groups):
            f = s.factors[i] = f[1:]


def _plan(a: Semiautomaton, s: _Search, classes: tuple[int, ...]) -> FactorPlan:
    """The plan of a search that works, with k its longest factor (or window + 1): more leading pads
    change no node of the tracker (every pattern ends in a letter), so the closure stands."""
    cl, tr = s.closure()
    k = max([len(f) for f in s.factors] + [len(p) + 1 for p in s.windows], default=1)
    keys = np.concatenate([tr.omega[cl.node][:, None], cl.counts], axis=1)[1:]
    rows = sorted({tuple(int(v) for v in key): int(q) for key, q in zip(keys, cl.q[1:])}.items())
    return FactorPlan(k, s.threshold, a.n_symbols, a.n_states, classes, tuple(s.windows), tuple(s.factors),
                      tuple(s.groups), tuple(k for k, _ in rows), tuple(q for _, q in rows))


def detect(a: Semiautomaton, max_k: int = MAX_K, max_threshold: int = MAX_THRESHOLD,
           budget: int = MAX_WORK, definite: bool = False) -> tuple[FactorPlan | None, str]:
    """The factor description with the smallest threshold, searched at k = ``max_k`` (a description
    with factors up to k holds with any larger k; the plan's k is its longest pattern's), or None
    and why there is none (module docstring).  Refusals: a letter with a cycle (not aperiodic),
    two words with equal features at ``max_k`` (a proof for every smaller k and threshold), the
    search's ``budget`` (:func:`closure_work`, every threshold's tries together), or a description
    without factors (definite: the lookback construction's case) unless ``definite`` accepts one
    (a tier's, compiler/automata/tiers.py: no construction looks back over a tier but this one's)."""
    name = a.name or "the automaton"
    if a.partial:
        return None, f"{name} is partial (factor descriptions are searched on complete automata)"
    if a.n_states * a.n_symbols > MAX_CELLS:
        return None, f"{name}: its {a.n_states:,} x {a.n_symbols:,} table is over the budget of {MAX_CELLS:,} cells"
    maps, classes = class_maps(a)
    cycle = letter_with_a_cycle(maps)
    if cycle is not None:
        letter = a.alphabet[classes.index(cycle + 1)]
        return None, (f"{name} is not locally threshold testable: no power of the letter {letter!r} is idempotent "
                      f"(a^n != a^(n+1) for every n: a cycle, which no capped count sees)")
    k, budget = max_k, budget // share()  # a share of it where many automata are planned together
    pair = refuted(maps, a.start, k, None)
    if pair is not None:
        return None, f"{name} is not locally threshold testable with k <= {k}: {witness(pair, k, None)}"
    why, proved, over, work, memo = "", 0, [], [0], _Memo()  # the last proof and its threshold; thresholds over budget
    for t in range(1, max_threshold + 1):
        pair = refuted(maps, a.start, k, t)
        if pair is not None:
            why, proved = witness(pair, k, t), t
            continue
        try:
            s, reason = _tries(maps, a.start, k, t, work, budget, memo)
        except TooBig:
            over.append(t)
            continue
        if s is None:
            why, proved = reason, t
            continue
        if not s.factors and not definite:
            return None, f"{name} is definite: its last {k - 1} letters decide the state (no factor counts)"
        s.limit = s.work[0] + budget * ROUNDS[-1] // 16  # simplifying has a try's budget of its own
        _simplify(s)
        s.work[0], s.limit = 0, MAX_WORK  # the final closure is the proof: it runs whatever the search spent
        plan = _plan(a, s, classes)
        if plan.definite:
            return plan, f"definite: its last {plan.k - 1} letters decide the state"
        return plan, (f"locally {'threshold ' * (t > 1)}testable with k = {plan.k}" + (f", t = {t}" if t > 1 else ""))
    return None, f"{name} is not locally threshold testable with k <= {max_k}, t <= {max_threshold}: " + \
        _refusal(why, proved, over, budget)


def _refusal(why: str, proved: int, over: list[int], budget: int) -> str:
    """Why no threshold has a description: the proof at the largest threshold refuted (two words with equal
    counts capped at t have them equal capped at every smaller threshold), and the thresholds above it
    whose searches ran out of the budget (one budget for all: an earlier one may have spent it)."""
    over = [t for t in over if t > proved]
    gave_up = f"gave up at threshold{'s' * (len(over) > 1)} {', '.join(map(str, over))} over the search's budget " \
              f"({budget:,} work units{share_text()}, {MAX_PATTERNS} patterns)" if over else ""
    return "; ".join(x for x in (gave_up, f"at threshold {proved}: {why}" if why and over else why) if x)
