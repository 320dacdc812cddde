"""Piecewise locally testable automata (PLT): the state as a function of which k-factors and which
subsequences occurred.

A language is *piecewise locally k-testable* (PLT_k) when membership depends only on the set of
k-factors of the bracketed word ⋊w⋉ and the set of subsequences of length <= k of w: the Boolean
closure of the locally k-testable languages (McNaughton and Papert) and the piecewise k-testable
ones (Simon), where the local and the piecewise branches of the subregular hierarchy meet (Rogers
et al. 2013).  Its minimal DFA is in general *not* a parallel product of an LT and a PT quotient
(``constructions/product.py``): L = L_1 and L_2 merges every state of L_1's automaton paired with
L_2's rejecting sink, so neither factor's state is a function of the merged one.  What holds is
weaker and is what the construction needs: the state after w is a function of the two sets of
features of w together.

**The description** (:class:`PiecewiseLocalPlan`): a factor description of threshold 1 (letter
classes, window patterns P, factors R in groups: compiler/automata/factors.py) and a prefix-closed
set S of words, kept as its chains (compiler/automata/piecewise.py), with a table
q_t = F(omega_t, [some factor of group g occurred by t]_g, progress of each chain at t) for every
input and every t >= 1.

**The proof is a product closure.**  Let T_S be the subsequence tracker of S (its state after w:
X(w) = {u in S : u is a subsequence of w}) and A_S the part of A x T_S reachable from (q0, {}).
The factor search's closure over (A_S state, Aho-Corasick node, capped counts) holds every triple
any input reaches; the description is accepted only when the A-state of its rows is a function of
(omega, counts, X) on that whole set (factors.Given: X is a feature given for free, the A-state
the label to determine).  By induction on t, q_t = F(omega_t, counts_t, X_t) for every input.
A chain's progress determines the flags of its prefixes and every word of S is a prefix of a
chain, so the table on (omega, counts, progress) is the same function.

**The search** (:func:`detect`) alternates the two detectors' own refinements: S starts empty;
on A_S, sampled conflicts -- two words with equal factors (k <= 6) and equal X that reach
different states: the factor detector's swaps and pumps (factor_witnesses.refuting_pairs), and
the ordered pairs P c^5 x c^5 z c^5 / P c^5 z c^5 x c^5 after each word P of S, then after each
state's access word (and it followed by S's words) within a budget
(compiler/automata/piecewise_local_levels.py: they ask for S's words extended by one letter, which
random samples over 64 letters seldom hold, and reach past a prefix pattern) -- each need a
subsequence.  For the shortest, the
distinguishing subsequences the automaton's states tell apart best (least *ambiguity*: the extra
(state, progress) pairs of A run beside the word's progress counter, 0 when the progress is a
function of the state; a subsequence the language ignores doubles the states at each letter) are
weighed, and the one that tells apart the most sampled conflicts joins S.  When the samples see
none, S's leaves they do not miss are pruned, then the factor search runs on A_S; stuck -- two
words with the same last k - 1 letters and the same k-factors, the same X, different states -- a
subsequence that tells them apart joins S (never pruned) and the loop goes on.  No such
subsequence (up to length 8) refuses with the two words as the witness: they have the same
k-factors and the same short subsequences, yet reach different states.  A letter with a cycle
refuses at once (PLT languages are star-free: every letter's power is idempotent), and so do a
failing word identity (:func:`identity_witness`) and a counted pair: two words with the same factors
and subsequences that count a factor once against twice and reach different states
(piecewise_local_levels.counted_conflict; a locally threshold testable language that counts to 2 is
refused in milliseconds, where its search ran out of its budget in 7-11 CPU s).

Budgets: S holds at most :data:`MAX_WORDS` words, A_S at most :data:`MAX_PRODUCT` states, each
factor search its own closure budget (factors.MAX_WORK); past one the refusal names it.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SpecError
from .factor_witnesses import letter_with_a_cycle, refuting_pairs
from .factors import MAX_K, FactorPlan, Given, class_maps, given_description
from .factors import MAX_WORK as MAX_FACTOR_WORK
from .moore import reachable_states
from .piecewise import MAX_K as MAX_SUBSEQUENCE
from .piecewise import Budget, Run, Trie, confluence_witness, cycle_witness, distinguishers, embeds, runs
from .spec import Semiautomaton
from .piecewise_local_levels import (NEUTRAL, Levels, access_words, counted_conflict, neutral_letters,
                                     ordered_conflicts, told_apart)

MAX_WORDS = 48
"""Most words the subsequence set S may hold."""
MAX_PRODUCT = 20_000
"""Most states of the automaton run beside the subsequence tracker (A_S)."""
MAX_WORK = 2_000_000
"""Most transitions of the automaton beside its subsequence trackers one detection computes (every
candidate's and pruning's walk together: seconds)."""
FACTOR_WORK = MAX_FACTOR_WORK
"""Each factor search's budget (work units, ``factors.closure_work``): the factor detector's own.
It was a quarter while non-PLT automata that satisfy the first identities (flipflop, memory:3)
spent it on every search; the alternation identity now refuses those in a few compositions, and
the sampled conflicts settle S before the search runs (once, on the languages measured).  A
quarter refused PLT_6 on 64 letters: the factor part of its A_S (840 states) needs 30 window
patterns and two factors (measured)."""
CANDIDATES = 8
"""Most distinguishing subsequences weighed per conflict (the least ambiguous: a pumped conflict
differs in many subsequences the states do not track before the one that matters)."""
SEEN = 256
"""Most sampled conflicts a candidate subsequence is scored on."""


@dataclass(frozen=True)
class PiecewiseLocalPlan:
    """A PLT description from the automaton's start (module docstring).

    ``local``: the factor part (its classes are A_S's letter classes; its keys and states are the
    (window, counts) the closure reached, each with state 0: the joint table is ``keys``);
    ``chains``: the relevant subsequences, run-length encoded; ``keys``: every (window class,
    capped count per group, progress per chain) reached, with ``states`` the state there."""

    local: FactorPlan
    chains: tuple[tuple[Run, ...], ...]
    keys: tuple[tuple[int, ...], ...]
    states: tuple[int, ...]
    start: int

    @property
    def k(self) -> int:
        """The longest factor, window + 1 or subsequence."""
        return max([self.local.k] + [sum(m for _, m in c) for c in self.chains])

    @property
    def layers(self) -> int:
        """The factor part's layers and the chains' runs side by side: the deeper of the two."""
        return max([self.local.layers] + [len(c) for c in self.chains])

    def to_dict(self) -> dict[str, Any]:
        return {"factor_part": self.local.to_dict(), "chains": [[list(r) for r in c] for c in self.chains],
                "keys": [list(x) for x in self.keys], "states": list(self.states), "start": self.start}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> PiecewiseLocalPlan:
        """The plan of :meth:`to_dict`; SpecError when its parts do not fit together."""
        local = FactorPlan.from_dict(d["factor_part"])
        chains = tuple(tuple((int(a), int(m)) for a, m in c) for c in d["chains"])
        keys = tuple(tuple(int(v) for v in x) for x in d["keys"])
        states, start = tuple(int(q) for q in d["states"]), int(d["start"])
        width = 1 + local.n_groups + len(chains)
        lengths = [sum(m for _, m in c) for c in chains]
        if not chains or any(not 0 <= a < local.n_symbols or m < 1 for c in chains for a, m in c):
            raise SpecError("a piecewise-local plan needs at least one chain of runs (letter, repeat >= 1)")
        if len(keys) != len(states) or any(len(x) != width or any(not 0 <= p <= n for p, n in zip(x[width - len(
                chains):], lengths)) for x in keys) or any(not 0 <= q < local.n_states for q in states):
            raise SpecError("a piecewise-local plan's keys need (window class, a count per group, a progress per "
                            "chain) and a state each")
        if not 0 <= start < local.n_states:
            raise SpecError("a piecewise-local plan's start must be a state")
        return PiecewiseLocalPlan(local, chains, keys, states, start)


def beside_tracker(a: Semiautomaton, words: list[tuple[int, ...]],
                   work: list[int] | None = None) -> tuple[Semiautomaton, np.ndarray, np.ndarray]:
    """A_S: ``a`` run beside the subsequence tracker of ``words`` from (start, {}), breadth first;
    with, per state of A_S, its state of ``a`` (the label) and its tracker set X (bitmask, the free
    feature).  SpecError past :data:`MAX_PRODUCT` states, or when ``work`` (transitions computed so
    far, added to) passes :data:`MAX_WORK`."""
    trie = Trie(words)
    index = {(a.start, 0): 0}
    order = [(a.start, 0)]
    rows: list[list[int]] = []
    for q, x in order:  # grows while it is read: breadth first
        if work is not None:
            work[0] += a.n_symbols
            if work[0] > MAX_WORK:
                raise SpecError(f"the detection's budget ({MAX_WORK:,} transitions of the automaton beside its "
                                f"subsequence trackers)")
        row = []
        for s, m in enumerate(a.maps):
            nxt = (m[q], trie.step(x, s))
            if nxt not in index:
                if len(index) >= MAX_PRODUCT:
                    raise SpecError(f"the automaton beside the subsequence tracker passes {MAX_PRODUCT:,} states")
                index[nxt] = len(order)
                order.append(nxt)
            row.append(index[nxt])
        rows.append(row)
    maps = tuple(tuple(r[s] for r in rows) for s in range(a.n_symbols))
    prod = Semiautomaton(f"{a.name}|S", tuple(map(str, range(len(order)))), a.alphabet, maps, 0)
    return prod, np.array([q for q, _ in order]), np.array([x for _, x in order], dtype=object)


def _prefixes(u: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [u[:i] for i in range(1, len(u) + 1)]


def _letters(classes: tuple[int, ...], word: list[int]) -> list[int]:
    """A letter word for a class word (each class's first letter: letters of one class act alike
    on A_S, so the run and the tracker are the class word's)."""
    first = {c: a for a, c in reversed(list(enumerate(classes)))}
    return [first[c] for c in word]


def _show(a: Semiautomaton, w: list[int]) -> str:
    return repr(" ".join(a.alphabet[s] for s in w)) if w else "the empty word"


def _conflicts(a: Semiautomaton, words: list[tuple[int, ...]], work: list[int], neutral: list[int]) -> tuple[
        Semiautomaton, np.ndarray, np.ndarray, np.ndarray, tuple[int, ...], Given, list[tuple[list[int], list[int]]]]:
    """A_S for ``words``, its labels, tracker sets, class maps, letter classes, the given features,
    and the conflicts the samples see: two words with equal factors and tracker sets that reach
    different states (factor_witnesses.refuting_pairs, and the ordered pairs after each tracked
    word, piecewise_local_levels.ordered_conflicts), as letter words."""
    prod, label, free = beside_tracker(a, words, work)
    maps, classes = class_maps(prod)
    _, dense = np.unique(free, return_inverse=True)  # the tracker sets X, numbered
    given = Given(label, dense.astype(np.int64))
    seen = [(_letters(classes, x), _letters(classes, y))
            for x, y in refuting_pairs(maps, 0, MAX_K, (given.label, given.free))]
    letter_maps = np.asarray(prod.maps, dtype=np.int64).reshape(prod.n_symbols, prod.n_states)
    contexts = access_words(np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states), a.start)
    after = [c + w for c in contexts[1:] for w in [(), *words]]  # S's words first: the budget cuts the rest
    seen += ordered_conflicts(letter_maps, 0, given.label, given.free, words + after, neutral)
    return prod, label, free, maps, classes, given, seen


def _search(a: Semiautomaton) -> tuple[Any, list[tuple[int, ...]], Semiautomaton, np.ndarray, np.ndarray,
                                        tuple[int, ...]] | str:
    """The alternating search (module docstring): the factor search that works, S, A_S, its labels,
    tracker sets and letter classes; or the reason there is none."""
    words: list[tuple[int, ...]] = []
    work = [0]
    stuck: set[tuple[int, ...]] = set()
    levels = Levels(np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states), a.start)
    neutral = neutral_letters(levels, NEUTRAL)
    while True:
        try:
            prod, label, free, maps, classes, given, seen = _conflicts(a, words, work, neutral)
            fewer = _pruned(a, words, work, stuck, neutral) if not seen else words
        except SpecError as e:
            return str(e)
        if words != fewer:
            words = fewer
            continue
        pair = min(seen, key=lambda p: len(p[0]) + len(p[1])) if seen else None
        if pair is None:
            s, reason = given_description(maps, 0, given, budget=FACTOR_WORK)
            if s is not None:
                return s, words, prod, label, free, classes
            if not given.stuck:
                return reason
            pair = (_letters(classes, given.stuck[0]), _letters(classes, given.stuck[1]))
        w, v = pair
        proven = given.stuck != []  # the factor search's own conflict: its subsequence is never pruned
        try:
            u = _best_subsequence(levels, w, v, seen)
        except (Budget, SpecError) as e:
            return str(e)
        if u is None:
            return _inseparable(a, w, v)
        words = list(dict.fromkeys(words + _prefixes(u)))
        if proven:
            stuck.add(u)
        if len(words) > MAX_WORDS:
            return f"more than {MAX_WORDS} relevant subsequences"


def _inseparable(a: Semiautomaton, w: list[int], v: list[int]) -> str:
    """The refusal for two letter words with the same features that reach different states."""
    return (f"the words {_show(a, w)} and {_show(a, v)} end in the same letters, hold the same k-factors "
            f"(k <= {MAX_K}) and the same subsequences (up to length {MAX_SUBSEQUENCE}), yet reach different states: "
            f"not piecewise locally testable")


def _best_subsequence(levels: Levels, w: list[int], v: list[int],
                      seen: list[tuple[list[int], list[int]]]) -> tuple[int, ...] | None:
    """What tells ``w`` and ``v`` apart: of the distinguishing subsequences the automaton's states
    tell apart best (the :data:`CANDIDATES` of least ambiguity, piecewise_local_levels.told_apart; else
    the shortest ones), the one that tells apart the most of the sampled conflicts ``seen``, ties
    to the least ambiguous (a subsequence that matters is one the states track and many conflicts
    differ in)."""
    told = told_apart(levels, w, v, CANDIDATES) or [(u, 0) for u in distinguishers(w, v, 1)]
    if len(told) < 2:
        return told[0][0] if told else None
    sample = seen[:SEEN]
    scores = [(sum(embeds(u, x) != embeds(u, y) for x, y in sample), -amb) for u, amb in told]
    return told[max(range(len(told)), key=lambda i: scores[i])][0]


def _pruned(a: Semiautomaton, words: list[tuple[int, ...]], work: list[int],
            keep: set[tuple[int, ...]], neutral: list[int]) -> list[tuple[int, ...]]:
    """S without the leaves (longest first) the sampled conflicts do not miss: a conflict's
    distinguishing subsequence may be one of several, and a later one may make it redundant; those
    in ``keep`` (added for the factor search's own conflicts) stay.  Only a proposal: the factor
    search's closure is the proof."""
    for leaf in sorted(set(_leaves(words)) - keep, key=lambda w: (-len(w), w)):
        fewer = [w for w in words if w != leaf]
        if leaf in _leaves(words) and not _conflicts(a, fewer, work, neutral)[-1]:
            words = fewer
    return words


def _leaves(words: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    inner = {w[:-1] for w in words}
    return [w for w in words if w not in inner]


def _progress(words: list[tuple[int, ...]], chains: list[tuple[int, ...]], x: int) -> tuple[int, ...]:
    """Each chain's progress (its longest prefix in X) for the tracker set ``x`` (a bitmask over
    Trie(words).words)."""
    index = {w: i for i, w in enumerate(Trie(words).words)}
    return tuple(max([i for i in range(1, len(c) + 1) if x >> index[c[:i]] & 1], default=0) for c in chains)


IDENTITY_WORDS = 4096
"""At most this many two-letter words x are tried by :func:`identity_witness` (every letter, then
pairs of letters in order): a bound on the refutation's work, not on what it can refute."""


def _idempotent_power(f: np.ndarray, live: np.ndarray, rounds: int) -> np.ndarray | None:
    """x^omega for the map ``f`` of x (squared until idempotent on the ``live`` states, a set the
    maps keep), or None if ``rounds`` squarings do not reach one (a cycle: never star-free)."""
    for _ in range(rounds):
        if np.array_equal(f[f][live], f[live]):
            return f
        f = f[f]
    return None


def identity_witness(a: Semiautomaton) -> str | None:
    """A word identity every piecewise locally testable automaton satisfies, failing here, or None.

    Lemma: for K >= k and content(y), content(z) within content(x), the words u x^K y x^K v and
    u x^K y x^K y x^K v have the same k-factors (a window of k letters cannot span two of the y's:
    an x^K of length >= k lies between them) and the same subsequences of length <= k (x^K holds
    every word of length <= K over content(x)), and so do u x^K y x^K z x^K v and
    u x^K z x^K y x^K v.  So on the reachable states, e y e = e y e y e and e y e z e = e z e y e
    for e = x^omega (x^K for K past both k and the index).  Checked on every letter and pair of
    letters x (at most :data:`IDENTITY_WORDS`): a failure refutes the class in a few map
    compositions -- the gridworld (x = left right, y = left), a counter with a sink -- where the
    description search would spend its budget.  Then :func:`_alternation_witness`."""
    M = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    live = np.asarray(sorted(reachable_states(a)), dtype=np.int64)
    rounds = max(1, int(a.n_states).bit_length() + 1)
    xs = [(i,) for i in range(a.n_symbols)] + [(i, j) for i in range(a.n_symbols) for j in range(a.n_symbols) if i != j]
    for x in xs[:IDENTITY_WORDS]:
        f = np.arange(a.n_states)
        for letter in x:
            f = M[letter][f]
        e = _idempotent_power(f, live, rounds)
        if e is None:
            return f"the word {_show(a, list(x))} has a cycle: not star-free"
        eye = {y: e[M[y][e]] for y in set(x)}
        for y, m in eye.items():
            if not np.array_equal(m[live], m[m][live]):
                return (f"e y e != e y e y e for e = ({_show(a, list(x))})^omega, y = {_show(a, [y])} (a piecewise "
                        f"locally testable automaton satisfies it for every y within x's letters)")
        if len(eye) == 2:
            (y, my), (z, mz) = sorted(eye.items())
            if not np.array_equal(mz[my][live], my[mz][live]):
                return (f"e y e z e != e z e y e for e = ({_show(a, list(x))})^omega, y = {_show(a, [y])}, "
                        f"z = {_show(a, [z])} (a piecewise locally testable automaton satisfies it)")
    return _alternation_witness(a, M, live, rounds)


def _alternation_witness(a: Semiautomaton, M: np.ndarray, live: np.ndarray, rounds: int) -> str | None:
    """The alternation identity, failing here, or None.

    Lemma: for any words x, y, z and K >= k, W = (x^K y x^K z)^K x^K and W y x^K have the same
    k-factors of the bracketed words (each lies within the bracketed x^K at either end or within
    one x^K y x^K or x^K z x^K, and both words hold all of those) and the same subsequences of length
    <= k (every word of length <= k over their common content: each of the K blocks x^K y x^K z holds
    every letter of it).  So a PLT automaton satisfies f = f y e for e = x^omega and
    f = (e y e z)^omega e, with no condition on the letters -- the identity the flip-flop (the last of
    set and reset: x = read, y = set, z = reset), a register and a carry fail, which the identities
    of :func:`identity_witness` do not see.  Checked on letters x, y, z in order, at most
    :data:`IDENTITY_WORDS` triples (a refutation's bound)."""
    n = a.n_symbols
    for t, (x, y) in enumerate(itertools.product(range(n), repeat=2)):
        if t * n >= IDENTITY_WORDS:
            break
        e = _idempotent_power(M[x], live, rounds)
        if e is None:
            return f"the letter {_show(a, [x])} has a cycle: not star-free"
        eye = e[M[y][e]]
        for z in range(n):
            f = _idempotent_power(e[M[z][eye]], live, rounds)
            if f is None:
                return f"the word {_show(a, [x, y, x, z])} has a cycle: not star-free"
            f = e[f]
            if not np.array_equal(f[live], e[M[y][f]][live]):
                return (f"f != f y e for e = {_show(a, [x])}^omega, f = (e y e z)^omega e, y = {_show(a, [y])}, "
                        f"z = {_show(a, [z])} (a piecewise locally testable automaton satisfies it for any x, y, z)")
    return None


@functools.lru_cache(maxsize=8)
def detect(a: Semiautomaton) -> tuple[PiecewiseLocalPlan | None, str]:
    """The plan (module docstring), or None and the failing property; cached per automaton (the
    planner asks again at each max_len, and compiling plans again)."""
    if a.partial:
        return None, "the automaton is partial (descriptions are searched on complete automata)"
    if letter_with_a_cycle(np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)) is not None:
        return None, ("a letter has a cycle (no power of it is idempotent): not star-free, so not piecewise locally "
                      "testable")
    refuted = identity_witness(a)
    if refuted is not None:
        return None, refuted
    states = reachable_states(a)
    if cycle_witness(a, states) is None and confluence_witness(a, states) is None:
        return None, ("partially ordered and locally confluent: piecewise testable (Klima and Polak), which the "
                      "piecewise construction builds")
    pair = counted_conflict(np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states), a.start)
    if pair is not None:
        return None, _inseparable(a, *pair)
    found = _search(a)
    if isinstance(found, str):
        return None, found
    s, words, prod, label, free, classes = found
    if not words:
        return None, "the state is a function of the factors alone (locally testable: no subsequence is needed)"
    if not s.factors:
        return None, ("no factor's occurrence matters (a window beside subsequences): the factor part needs a factor "
                      "to count")
    s.given = None  # the raw closure: A_S states, whose tracker sets give the progress
    cl, tr = s.closure()
    chains = sorted(_leaves(words), key=lambda w: (len(w), w))
    progress = {x: _progress(words, chains, x) for x in set(free.tolist())}
    table: dict[tuple[int, ...], int] = {}
    local_keys = set()
    for row in range(1, len(cl.q)):
        lt = (int(tr.omega[cl.node[row]]), *(int(c) for c in cl.counts[row]))
        key = (*lt, *progress[int(free[cl.q[row]])])
        local_keys.add(lt)
        if table.setdefault(key, int(label[cl.q[row]])) != int(label[cl.q[row]]):
            return None, "the features do not determine the state (the closure disagrees with the search)"
    k = max([len(f) for f in s.factors] + [len(p) + 1 for p in s.windows])
    keys = sorted(local_keys)
    local = FactorPlan(k, 1, a.n_symbols, a.n_states, classes, tuple(s.windows), tuple(s.factors), tuple(s.groups),
                       tuple(keys), (0,) * len(keys))
    rows = sorted(table.items())
    plan = PiecewiseLocalPlan(local, tuple(runs(c) for c in chains), tuple(x for x, _ in rows),
                              tuple(q for _, q in rows), a.start)
    return plan, f"piecewise locally testable with k = {plan.k}"
