"""Random languages of the subregular classes, built from their definitions.

Each class is drawn as a *definition* (the factors, subsequences, tier, threshold, counted letters
or temporal formula that define it) and compiled into its minimal complete DFA by running small
trackers side by side -- a factor matcher (the Aho-Corasick automaton of the patterns), capped
occurrence counters, subsequence-progress counters, a residue counter, the truth values of a
formula's subformulas -- exploring only the reachable tuples and minimising the result.  The same
definition also decides membership directly (:meth:`Language.accepts`, by the definition and not
by the trackers), which is what the tests compare the DFA against.

Classes (:data:`CLASSES`), over letters ``a0 .. a{n-1}``; the local classes read the word between
the boundary markers ``>`` (start) and ``<`` (end), written ⋊w⋉ below, and a *k-factor* is a
contiguous block of k symbols of ⋊w⋉ (a factor may hold ⋊ first or ⋉ last: anchored at the start
or the end; a word with ``|⋊w⋉| < k`` has no k-factor):

* ``sl`` strictly k-local: w is in L iff no forbidden k-factor occurs in ⋊w⋉;
* ``lt`` locally k-testable: a random Boolean function of *which* of a few k-factors occur;
* ``ltt`` locally threshold (k, t)-testable: a random Boolean function of each factor's number of
  occurrences capped at t (``threshold``);
* ``tsl`` / ``tlt``: ``sl`` / ``lt`` on the projection of w onto a tier (a random set of ``tier``
  letters; the other letters are erased);
* ``sp`` strictly k-piecewise: no forbidden subsequence (a scattered subword of length k) occurs;
* ``pt`` piecewise k-testable: a random Boolean function of which of a few subsequences of length
  at most k occur (at least one of length k);
* ``plt`` piecewise locally k-testable: a random Boolean combination of an ``lt`` condition and a
  ``pt`` condition (each drawn as above, ``factors`` factors and ``factors`` subsequences), so
  membership is a function of which k-factors occur in ⋊w⋉ and which subsequences of length at
  most k occur in w.  This is the Boolean closure of LT_k and PT_k, the class where the local and
  the piecewise branches of the subregular hierarchy meet (Rogers et al. 2013, "Cognitive and
  sub-regular complexity"; LT after McNaughton and Papert 1971, PT after Simon 1975): w ~ v iff
  ⋊w⋉ and ⋊v⋉ have the same k-factors and w and v the same subsequences of length <= k, and a
  PLT_k language is a union of classes of ~;
* ``zp`` modular counting: the number of letters of a random set, mod p = k, lies in a random
  proper non-empty set of residues;
* ``sf`` star-free: a random past-time LTL formula of temporal nesting depth k, true at the last
  position (the empty word is rejected).  Atoms are sets of letters; the operators are not, and,
  or, Y (the previous position satisfies f) and S (f since g: g held at some position j and f at
  every position after j).  Past LTL on finite words is first-order logic with order (Kamp), and
  first-order definable languages are exactly the star-free ones (McNaughton and Papert): the
  DFA is aperiodic.

Every language is drawn so that its minimal DFA accepts some word and rejects another (up to
:data:`TRIES` draws).  The draw is a function of all the arguments: the same seed gives the same
automaton.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .errors import SpecError
from .moore import minimise, reachable_states
from .spec import Semiautomaton

CLASSES: tuple[str, ...] = ("sl", "lt", "ltt", "tsl", "tlt", "sp", "pt", "plt", "zp", "sf")
"""The classes :func:`random_language` draws, by their usual abbreviations."""

START, END = -1, -2
"""The boundary markers ⋊ and ⋉ as pattern symbols (letters are 0 .. n-1)."""

DEFAULT_FACTORS = {"sl": 4, "tsl": 4, "lt": 3, "tlt": 3, "ltt": 3, "sp": 4, "pt": 4, "plt": 2}
"""How many factors / subsequences a class draws unless ``factors`` says: small enough that the
acceptance table stays small, large enough to reach the issue's sizes (``sp`` with k = 6: a few
hundred states)."""

MAX_FACTORS = 12
"""Most factors / subsequences one language may draw (acceptance tables are 2^m or (t+1)^m)."""
MAX_K = 8
MAX_LETTERS = 256
MAX_STATES = 200_000
"""Largest product explored before minimisation (a definition that needs more is refused)."""
TRIES = 32
"""Draws before :func:`draw` gives up looking for a non-trivial language (the last one is kept)."""

State = Any
"""A tracker's state (hashable: a tuple of the trackers' parts)."""


def letter_names(letters: int) -> tuple[str, ...]:
    """The alphabet ``a0 .. a{n-1}`` (valid symbols: non-empty, no whitespace)."""
    return tuple(f"a{j}" for j in range(letters))


# --- factor languages: SL, LT, LTT and their tier-based versions -------------------------------


def _capped_counts(text: Sequence[int], patterns: Sequence[tuple[int, ...]], cap: int) -> tuple[int, ...]:
    """How often each pattern occurs as a contiguous block of ``text``, capped at ``cap``."""
    out = []
    for p in patterns:
        n = sum(1 for i in range(len(text) - len(p) + 1) if tuple(text[i:i + len(p)]) == p)
        out.append(min(n, cap))
    return tuple(out)


@dataclass(frozen=True)
class FactorLanguage:
    """w in L iff the capped occurrence counts of ``patterns`` in ⋊proj(w)⋉ lie in ``accepted``.

    ``tier``: the letters the projection keeps (all letters for the non-tier classes);
    ``threshold``: the cap t (1: which factors occur); ``accepted``: the count vectors accepted
    (for a strictly local language, the zero vector alone: every pattern is forbidden)."""

    letters: int
    tier: frozenset[int]
    patterns: tuple[tuple[int, ...], ...]
    threshold: int
    accepted: frozenset[tuple[int, ...]]

    def accepts(self, word: Sequence[int]) -> bool:
        """Membership by the definition: count the factors of the bracketed projection."""
        text = [START, *(a for a in word if a in self.tier), END]
        return _capped_counts(text, self.patterns, self.threshold) in self.accepted

    @functools.cached_property
    def _prefixes(self) -> frozenset[tuple[int, ...]]:
        return frozenset(p[:i] for p in self.patterns for i in range(len(p) + 1))

    def start(self) -> State:
        return self._advance(((), (0,) * len(self.patterns)), START)

    def _advance(self, state: State, symbol: int) -> State:
        """The Aho-Corasick step: the longest suffix of (matched + symbol) that begins a pattern,
        and each pattern ending here counted (capped)."""
        matched, counts = state
        text = (*matched, symbol)
        prefixes = self._prefixes
        longest = next(text[i:] for i in range(len(text) + 1) if text[i:] in prefixes)
        ends = [longest[len(longest) - len(p):] == p if len(p) <= len(longest) else False for p in self.patterns]
        return longest, tuple(min(c + e, self.threshold) for c, e in zip(counts, ends))

    def step(self, state: State, letter: int) -> State:
        return self._advance(state, letter) if letter in self.tier else state

    def final(self, state: State) -> bool:
        return self._advance(state, END)[1] in self.accepted


# --- subsequence languages: SP and PT ----------------------------------------------------------


def is_subsequence(pattern: Sequence[int], word: Sequence[int]) -> bool:
    """Whether ``pattern`` is a scattered subword of ``word``."""
    it = iter(word)
    return all(any(a == b for b in it) for a in pattern)


@dataclass(frozen=True)
class SubsequenceLanguage:
    """w in L iff the set of ``patterns`` that are subsequences of w (as a 0/1 vector) is in
    ``accepted`` (strictly piecewise: the zero vector alone)."""

    letters: int
    patterns: tuple[tuple[int, ...], ...]
    accepted: frozenset[tuple[int, ...]]

    def accepts(self, word: Sequence[int]) -> bool:
        return tuple(int(is_subsequence(p, word)) for p in self.patterns) in self.accepted

    def start(self) -> State:
        return (0,) * len(self.patterns)

    def step(self, state: State, letter: int) -> State:
        """Greedy embedding: each pattern's progress advances when its next letter comes."""
        return tuple(j + (j < len(p) and p[j] == letter) for j, p in zip(state, self.patterns))

    def final(self, state: State) -> bool:
        return tuple(int(j == len(p)) for j, p in zip(state, self.patterns)) in self.accepted


# --- piecewise locally testable: LT and PT combined -------------------------------------------

BOTH = tuple((x, y) for x in (False, True) for y in (False, True))
"""The four truth-value pairs (LT condition, PT condition)."""

COMBINATIONS: tuple[frozenset[tuple[bool, bool]], ...] = tuple(
    frozenset(p for p, keep in zip(BOTH, bits) if keep) for bits in itertools.product((0, 1), repeat=4)
    if bits[0:2] != bits[2:4] and bits[0::2] != bits[1::2])
"""The ten Boolean functions of two arguments that depend on both (as their true pairs): x and y,
x or y, x xor y, x and not y, ... -- a function of one argument would leave an LT or a PT language."""


@dataclass(frozen=True)
class PiecewiseLocalLanguage:
    """w in L iff (``local`` accepts w, ``piecewise`` accepts w) is in ``combination``."""

    local: FactorLanguage
    piecewise: SubsequenceLanguage
    combination: frozenset[tuple[bool, bool]]

    @property
    def letters(self) -> int:
        return self.local.letters

    def accepts(self, word: Sequence[int]) -> bool:
        return (self.local.accepts(word), self.piecewise.accepts(word)) in self.combination

    def start(self) -> State:
        return self.local.start(), self.piecewise.start()

    def step(self, state: State, letter: int) -> State:
        return self.local.step(state[0], letter), self.piecewise.step(state[1], letter)

    def final(self, state: State) -> bool:
        return (self.local.final(state[0]), self.piecewise.final(state[1])) in self.combination


# --- modular counting --------------------------------------------------------------------------


@dataclass(frozen=True)
class ModularLanguage:
    """w in L iff the number of letters of w in ``counted``, mod ``modulus``, is in ``residues``."""

    letters: int
    modulus: int
    counted: frozenset[int]
    residues: frozenset[int]

    def accepts(self, word: Sequence[int]) -> bool:
        return sum(a in self.counted for a in word) % self.modulus in self.residues

    def start(self) -> State:
        return 0

    def step(self, state: State, letter: int) -> State:
        return (state + (letter in self.counted)) % self.modulus

    def final(self, state: State) -> bool:
        return state in self.residues


# --- star-free: past-time LTL ------------------------------------------------------------------

Formula = tuple
"""``("atom", letters)``, ``("not", f)``, ``("and", f, g)``, ``("or", f, g)``, ``("Y", f)``,
``("S", f, g)`` (f since g)."""


def holds(f: Formula, word: Sequence[int], t: int) -> bool:
    """Whether ``f`` holds at position t (0-based) of ``word``: the semantics, quantifiers spelled out."""
    op = f[0]
    if op == "atom":
        return word[t] in f[1]
    if op == "not":
        return not holds(f[1], word, t)
    if op == "and":
        return holds(f[1], word, t) and holds(f[2], word, t)
    if op == "or":
        return holds(f[1], word, t) or holds(f[2], word, t)
    if op == "Y":
        return t > 0 and holds(f[1], word, t - 1)
    return any(holds(f[2], word, j) and all(holds(f[1], word, i) for i in range(j + 1, t + 1)) for j in range(t + 1))


def subformulas(f: Formula) -> list[Formula]:
    """The subformulas of ``f``, children before parents (each once)."""
    out: list[Formula] = []
    for child in (f[1:] if f[0] != "atom" else ()):
        for g in subformulas(child):
            if g not in out:
                out.append(g)
    if f not in out:
        out.append(f)
    return out


def depth(f: Formula) -> int:
    """The temporal nesting depth (Y and S count one)."""
    if f[0] == "atom":
        return 0
    below = max(depth(g) for g in f[1:])
    return below + (f[0] in ("Y", "S"))


@dataclass(frozen=True)
class TemporalLanguage:
    """w in L iff w is non-empty and ``formula`` holds at its last position."""

    letters: int
    formula: Formula

    def accepts(self, word: Sequence[int]) -> bool:
        return bool(word) and holds(self.formula, word, len(word) - 1)

    @functools.cached_property
    def _nodes(self) -> list[Formula]:
        return subformulas(self.formula)

    def start(self) -> State:
        return None

    def step(self, state: State, letter: int) -> State:
        """Every subformula's value at the new position, from the letter and the previous values
        (Y f: f before; f S g: g now, or f now and f S g before)."""
        nodes = self._nodes
        before = dict(zip(nodes, state)) if state is not None else {}
        now: dict[Formula, bool] = {}
        for g in nodes:
            op = g[0]
            now[g] = (letter in g[1] if op == "atom" else not now[g[1]] if op == "not"
                      else now[g[1]] and now[g[2]] if op == "and" else now[g[1]] or now[g[2]] if op == "or"
                      else before.get(g[1], False) if op == "Y"
                      else now[g[2]] or (now[g[1]] and before.get(g, False)))
        return tuple(now[g] for g in nodes)

    def final(self, state: State) -> bool:
        return state is not None and state[-1]


Language = FactorLanguage | SubsequenceLanguage | PiecewiseLocalLanguage | ModularLanguage | TemporalLanguage


# --- drawing definitions -----------------------------------------------------------------------


def _random_table(rng: random.Random, vectors: list[tuple[int, ...]]) -> frozenset[tuple[int, ...]]:
    """A random Boolean function on ``vectors`` (its accepted set), neither empty nor everything."""
    while True:
        chosen = frozenset(v for v in vectors if rng.random() < 0.5)
        if 0 < len(chosen) < len(vectors):
            return chosen


def _factor(rng: random.Random, k: int, alphabet: Sequence[int]) -> tuple[int, ...]:
    """A random k-factor: k letters, or anchored: ⋊ and k-1 letters, or k-1 letters and ⋉."""
    kind = rng.random()
    if k >= 2 and kind < 0.2:
        return (START, *(rng.choice(alphabet) for _ in range(k - 1)))
    if k >= 2 and kind < 0.4:
        return (*(rng.choice(alphabet) for _ in range(k - 1)), END)
    return tuple(rng.choice(alphabet) for _ in range(k))


def _factor_language(rng: random.Random, cls: str, k: int, letters: int, m: int, threshold: int,
                     tier: int) -> FactorLanguage:
    visible = sorted(rng.sample(range(letters), tier)) if cls in ("tsl", "tlt") else list(range(letters))
    patterns = tuple(dict.fromkeys(_factor(rng, k, visible) for _ in range(m)))
    cap = threshold if cls == "ltt" else 1
    if cls in ("sl", "tsl"):
        accepted = frozenset({(0,) * len(patterns)})
    else:
        accepted = _random_table(rng, list(itertools.product(range(cap + 1), repeat=len(patterns))))
    return FactorLanguage(letters, frozenset(visible), patterns, cap, accepted)


def _subsequence_language(rng: random.Random, cls: str, k: int, letters: int, m: int) -> SubsequenceLanguage:
    lengths = [k] * m if cls == "sp" else [k, *(rng.randint(1, k) for _ in range(m - 1))]
    patterns = tuple(dict.fromkeys(tuple(rng.randrange(letters) for _ in range(n)) for n in lengths))
    if cls == "sp":
        return SubsequenceLanguage(letters, patterns, frozenset({(0,) * len(patterns)}))
    return SubsequenceLanguage(letters, patterns,
                               _random_table(rng, list(itertools.product((0, 1), repeat=len(patterns)))))


def _modular_language(rng: random.Random, k: int, letters: int) -> ModularLanguage:
    counted = frozenset(rng.sample(range(letters), rng.randint(1, letters)))
    residues = frozenset(r for r in range(k) if rng.random() < 0.5) or frozenset({0})
    if len(residues) == k:
        residues = frozenset({0})
    return ModularLanguage(letters, k, counted, residues)


def _atom(rng: random.Random, letters: int) -> Formula:
    return ("atom", frozenset(rng.sample(range(letters), rng.randint(1, max(1, letters // 3)))))


def _formula(rng: random.Random, d: int, letters: int) -> Formula:
    """A random past-LTL formula of temporal depth exactly d: one temporal operator per level,
    its other argument an atom (so the formula's size stays linear in d), with a random Boolean
    twist (negation, or a conjunction / disjunction with an atom) now and then."""
    if d == 0:
        return _atom(rng, letters)
    inner = _formula(rng, d - 1, letters)
    choice = rng.random()
    f: Formula = (("Y", inner) if choice < 0.2 else ("S", _atom(rng, letters), inner) if choice < 0.6
                  else ("S", inner, _atom(rng, letters)))
    twist = rng.random()
    if twist < 0.2:
        return ("not", f)
    if twist < 0.5:
        return (rng.choice(("and", "or")), f, _atom(rng, letters))
    return f


def _check(cls: str, k: int, letters: int, threshold: int, tier: int | None, factors: int | None) -> None:
    if cls not in CLASSES:
        raise SpecError(f"unknown subregular class {cls!r}; choose one of {list(CLASSES)}")
    if not (type(k) is int and 1 <= k <= MAX_K and (cls != "zp" or k >= 2)):
        raise SpecError(f"k must be an integer from {2 if cls == 'zp' else 1} to {MAX_K}, got {k!r}")
    if not (type(letters) is int and 1 <= letters <= MAX_LETTERS):
        raise SpecError(f"letters must be an integer from 1 to {MAX_LETTERS}, got {letters!r}")
    if not (type(threshold) is int and threshold >= 1):
        raise SpecError(f"threshold must be a positive integer, got {threshold!r}")
    if tier is not None and (cls not in ("tsl", "tlt") or not (type(tier) is int and 1 <= tier <= letters)):
        raise SpecError(f"tier applies to tsl and tlt only, as a number of letters from 1 to {letters}; got {tier!r}")
    if factors is not None and not (type(factors) is int and 1 <= factors <= MAX_FACTORS):
        raise SpecError(f"factors must be an integer from 1 to {MAX_FACTORS}, got {factors!r}")


def draw(cls: str, *, k: int, letters: int, seed: int, threshold: int = 2, tier: int | None = None,
         factors: int | None = None) -> tuple[Language, Semiautomaton]:
    """A random language of class ``cls`` (its definition) and its minimal DFA (see
    :func:`random_language`); redrawn up to :data:`TRIES` times until the DFA both accepts and
    rejects something."""
    _check(cls, k, letters, threshold, tier, factors)
    rng = random.Random(f"{cls}:{k}:{letters}:{seed}:{threshold}:{tier}:{factors}")
    m = factors if factors is not None else DEFAULT_FACTORS.get(cls, 0)
    width = tier if tier is not None else max(1, letters // 2)
    name = f"{cls}:k={k},letters={letters},seed={seed}"
    for _ in range(TRIES):
        lang: Language
        if cls in ("sl", "lt", "ltt", "tsl", "tlt"):
            lang = _factor_language(rng, cls, k, letters, m, threshold, width)
        elif cls in ("sp", "pt"):
            lang = _subsequence_language(rng, cls, k, letters, m)
        elif cls == "plt":
            lang = PiecewiseLocalLanguage(_factor_language(rng, "lt", k, letters, m, 1, letters),
                                          _subsequence_language(rng, "pt", k, letters, m), rng.choice(COMBINATIONS))
        elif cls == "zp":
            lang = _modular_language(rng, k, letters)
        else:
            lang = TemporalLanguage(letters, _formula(rng, k, letters))
        dfa = to_dfa(lang, name)
        if dfa.outputs is not None and len(set(dfa.outputs)) == 2:
            break
    return lang, dfa


def random_language(cls: str, *, k: int, letters: int, seed: int, threshold: int = 2, tier: int | None = None,
                    factors: int | None = None) -> Semiautomaton:
    """The minimal complete DFA of a random language of class ``cls`` (one of :data:`CLASSES`)
    with parameter ``k`` (factor / subsequence width -- both for ``plt`` --, the modulus for ``zp``,
    the temporal depth for ``sf``) over ``letters`` letters ``a0 ..``; states named ``q0 ..`` breadth first from the
    start, outputs ``accept`` / ``reject``.  ``threshold`` is t for ``ltt``; ``tier`` the tier's
    size for ``tsl`` / ``tlt`` (default half the letters); ``factors`` how many factors or
    subsequences to draw (for ``plt``: that many of each; default :data:`DEFAULT_FACTORS`).
    Deterministic per argument tuple."""
    return draw(cls, k=k, letters=letters, seed=seed, threshold=threshold, tier=tier, factors=factors)[1]


# --- trackers to a minimal DFA -----------------------------------------------------------------


def explore(start: State, step: Callable[[State, int], State], letters: int,
            budget: int = MAX_STATES) -> tuple[list[State], list[list[int]]]:
    """The states reachable from ``start`` (breadth first, letters in order) and the table
    ``maps[a][i]``; SpecError past ``budget`` states."""
    index: dict[State, int] = {start: 0}
    order, todo = [start], deque([start])
    rows: list[list[int]] = []
    while todo:
        s = todo.popleft()
        row = []
        for a in range(letters):
            t = step(s, a)
            if t not in index:
                if len(index) >= budget:
                    raise SpecError(f"the definition's trackers reach more than {budget} states; draw fewer factors")
                index[t] = len(order)
                order.append(t)
                todo.append(t)
            row.append(index[t])
        rows.append(row)
    return order, [[rows[i][a] for i in range(len(order))] for a in range(letters)]


def bfs_renamed(a: Semiautomaton, name: str) -> Semiautomaton:
    """``a`` restricted to the states reachable from its start, renamed ``q0 ..`` breadth first
    (letters in alphabet order), the start ``q0``."""
    order = reachable_states(a)
    seen = {q: i for i, q in enumerate(order)}
    maps = tuple(tuple(seen[m[q]] for q in order) for m in a.maps)
    outputs = None if a.outputs is None else tuple(a.outputs[q] for q in order)
    return Semiautomaton(name, tuple(f"q{i}" for i in range(len(order))), a.alphabet, maps, 0, outputs)


def to_dfa(lang: Language, name: str) -> Semiautomaton:
    """The minimal complete DFA of ``lang`` (outputs accept / reject), states breadth first."""
    order, maps = explore(lang.start(), lang.step, lang.letters)
    outputs = tuple("accept" if lang.final(s) else "reject" for s in order)
    product = Semiautomaton(name, tuple(map(str, range(len(order)))), letter_names(lang.letters),
                            tuple(map(tuple, maps)), 0, outputs)
    return bfs_renamed(minimise(product).quotient, name)
