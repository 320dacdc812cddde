"""Which subsequences an automaton's states tell apart, and conflicts that need one more of them:
the proposals of the piecewise-local search (compiler/automata/piecewise_local.py).

**Ambiguity.**  Run the automaton A beside the progress counter of one word u (0..|u|: the
longest prefix of u that is a subsequence so far), from (q0, 0).  The reached pairs split into
levels R_0, ..., R_|u| (the states reached with progress p; R_p is closed under the letters other
than u[p], R_|u| under every letter).  The *ambiguity* of u is sum_p |R_p| - |R|, R the states A
reaches: the number of extra (state, progress) pairs, 0 exactly when the progress is a function
of the state.  A subsequence a PLT automaton tracks is (nearly) a function of its state; one it
ignores doubles the states at each level.  Monotone: the levels of u x are u's, except that R_|u|
splits into R'_|u| (closed under the letters other than x) and R'_|u|+1 (from x's image, closed
under every letter), which together cover it; so a best-first search in order of ambiguity
(:func:`told_apart`) meets every word after its prefixes.

**Ordered pairs.**  For a word P and letters x, z, c (c not x or z) and K = MAX_K - 1:
P c^K x c^K z c^K and P c^K z c^K x c^K hold the same factors of every length <= MAX_K, each
counted equally often, and end in the same K letters (a factor of length <= MAX_K cannot span x
and z, which K letters c apart; every factor holding x is one of c^i x c^j in both words, and
so for z).  They differ only in the order of x and z after P: if they reach different states
while the subsequences already tracked agree, a subsequence that orders x and z must join them
(:func:`ordered_conflicts`, with P each tracked word: the extensions of what is tracked by one
letter, which random samples over many letters seldom hit).  These pairs are proposals: the
factor search's closure is the proof.

**Counted pairs.**  For A B a shortest word to a state (B not empty), a letter c, s = c^K and Z the
letters of B and c in order, repeated L = 8 times (the longest subsequence searched,
compiler/automata/piecewise.py): A s B s Z s and A s B s Z s B s end in the same K letters and hold
the same factors of every length <= MAX_K (one that ends in the appended B s lies in s B s, which
both hold after A), and the same subsequences of length <= L (the first is a subsequence of the
second; the part of an embedding in the second after A s B s is a word over Z's letters of at most L
letters, which Z holds).  They differ only in how often the factors of s B s occur: once against
twice.  If they reach different states, no PLT description of these widths exists -- a proof, which
the detector refuses with before its search (:func:`counted_conflict`: a locally threshold testable
language that counts a factor to 2 is refused in milliseconds instead of the search's budget).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from .factor_witnesses import differing
from .factors import MAX_K
from .piecewise import MAX_K as MAX_SUBSEQUENCE
from .piecewise import embeds

GAP = MAX_K - 1
"""Letters c between x and z in an ordered pair (no factor of the searched width spans two)."""
NEUTRAL = 2
"""Letters c tried per ordered pair (the two the states track least: the highest ambiguity)."""
MAX_PAIRS = 200_000
"""Most ordered pairs one call runs (each a few dozen map lookups, vectorised)."""
COUNTED = 1 << 12
"""Most counted pairs :func:`counted_conflict` runs (access words x splits x letters c; a fixed sample
above it: a few hundredths of a CPU second)."""
COUNTED_ACCESS = 32
"""Longest access word a counted pair is made of (the pairs' words stay a few hundred letters long: a
long chain's access words would make the batch hundreds of megabytes)."""
MAX_CLOSURES = 4_000
"""Most level closures one :func:`told_apart` search computes (each a breadth-first search of the
automaton under a set of letters)."""


class Levels:
    """The level closures of the automaton's maps ``M`` [letter, state] from ``q0`` (module
    docstring)."""

    def __init__(self, maps: np.ndarray, q0: int) -> None:
        self.M = np.asarray(maps, dtype=np.int64)
        self.q0 = q0
        self.letters = np.arange(self.M.shape[0])
        self.computed = 0
        self.reached = int(self.closure(np.array([q0]), self.letters).sum())

    def closure(self, seed: np.ndarray, letters: np.ndarray) -> np.ndarray:
        """The states reached from ``seed`` by words over ``letters`` (a boolean mask)."""
        self.computed += 1
        seen = np.zeros(self.M.shape[1], dtype=bool)
        seen[seed] = True
        front = np.flatnonzero(seen)
        sub = self.M[letters]
        while front.size:
            nxt = sub[:, front].ravel()
            nxt = np.unique(nxt[~seen[nxt]])
            seen[nxt] = True
            front = nxt
        return seen

    def extend(self, fixed: int, entry: np.ndarray, x: int) -> tuple[int, np.ndarray, int]:
        """From a word's closed levels' total ``fixed`` and the states entering its last level
        (``entry``), the word extended by ``x``: its closed total, its last level's entry, its
        ambiguity."""
        level = self.closure(entry, np.delete(self.letters, x))
        fixed += int(level.sum())
        nxt = np.unique(self.M[x][level])
        return fixed, nxt, fixed + int(self.closure(nxt, self.letters).sum()) - self.reached

    def ambiguity(self, u: Sequence[int]) -> int:
        """The ambiguity of ``u`` (module docstring; 0 for the empty word)."""
        fixed, entry, amb = 0, np.array([self.q0]), 0
        for x in u:
            fixed, entry, amb = self.extend(fixed, entry, x)
        return amb


def told_apart(levels: Levels, w: list[int], v: list[int], most: int) -> list[tuple[tuple[int, ...], int]]:
    """Up to ``most`` words (<= 8 letters) that are subsequences of exactly one of ``w``, ``v``, in
    order of ambiguity (least first), each with its ambiguity: a best-first search over the words
    that are a subsequence of one of them (ambiguity is monotone along extensions, module
    docstring), within :data:`MAX_CLOSURES` closures ([] or fewer past it)."""
    letters = list(dict.fromkeys(w + v))
    heap: list[tuple[int, tuple[int, ...], int, np.ndarray]] = [(0, (), 0, np.array([levels.q0]))]
    found: list[tuple[tuple[int, ...], int]] = []
    start = levels.computed
    while heap and len(found) < most and levels.computed - start < MAX_CLOSURES:
        amb, u, fixed, entry = heapq.heappop(heap)
        if u and embeds(u, w) != embeds(u, v):
            found.append((u, amb))
            continue
        if len(u) >= 8:
            continue
        for x in letters:
            c = u + (x,)
            if embeds(c, w) or embeds(c, v):
                f, e, a = levels.extend(fixed, entry, x)
                heapq.heappush(heap, (a, c, f, e))
    return found


def neutral_letters(levels: Levels, most: int) -> list[int]:
    """The ``most`` letters of highest ambiguity (the states track them least), most first."""
    amb = [levels.ambiguity((x,)) for x in range(levels.M.shape[0])]
    return sorted(range(len(amb)), key=lambda x: (-amb[x], x))[:most]


def access_words(maps: np.ndarray, q0: int) -> list[tuple[int, ...]]:
    """A shortest word reaching each state from ``q0`` (breadth first over the maps [letter,
    state]), in the order reached: contexts for the ordered pairs (a prefix pattern or a sink the
    samples' own starts never reach past)."""
    words: dict[int, tuple[int, ...]] = {q0: ()}
    order = [q0]
    for q in order:  # grows while it is read: breadth first
        for letter in range(maps.shape[0]):
            r = int(maps[letter, q])
            if r not in words:
                words[r] = (*words[q], letter)
                order.append(r)
    return [words[q] for q in order]


def ordered_conflicts(maps: np.ndarray, q0: int, label: np.ndarray, free: np.ndarray,
                      prefixes: list[tuple[int, ...]], neutral: list[int]) -> list[tuple[list[int], list[int]]]:
    """The ordered pairs (module docstring) after each word of ``prefixes`` (and the empty word)
    that reach states of different ``label`` with the same ``free`` feature, on the maps
    [letter, state] from ``q0``: per P, every pair of letters x < z and each c of ``neutral``
    other than both; at most :data:`MAX_PAIRS` pairs in all."""
    M = np.asarray(maps, dtype=np.int64)
    n = M.shape[0]
    x, z = (a.ravel() for a in np.triu_indices(n, 1))
    out: list[tuple[list[int], list[int]]] = []
    budget = MAX_PAIRS
    for p in [(), *prefixes]:
        q = q0
        for letter in p:
            q = int(M[letter, q])
        for c in neutral:
            keep = (x != c) & (z != c)
            xs, zs = x[keep][:budget], z[keep][:budget]
            budget -= len(xs)
            ends = []
            for first, second in ((xs, zs), (zs, xs)):
                at = np.full(len(xs), q, dtype=np.int64)
                for col in (c, first, c, second, c):
                    for _ in range(1 if isinstance(col, np.ndarray) else GAP):
                        at = M[col, at]
                ends.append(at)
            hit = np.flatnonzero((label[ends[0]] != label[ends[1]]) & (free[ends[0]] == free[ends[1]]))
            gap = [c] * GAP
            out += [(list(p) + gap + [int(xs[i])] + gap + [int(zs[i])] + gap,
                     list(p) + gap + [int(zs[i])] + gap + [int(xs[i])] + gap) for i in hit.tolist()]
            if budget <= 0:
                return out
    return out


def counted_pairs(maps: np.ndarray, q0: int) -> list[tuple[list[int], list[int]]]:
    """The counted pairs (module docstring) on the maps [letter, state] from ``q0``, as letter words:
    every (access word of at most :data:`COUNTED_ACCESS` letters, split, letter c), or :data:`COUNTED` of
    them (a fixed sample) above that."""
    M = np.asarray(maps, dtype=np.int64)
    splits = [(u, i) for u in access_words(M, q0) if len(u) <= COUNTED_ACCESS for i in range(len(u))]
    n = M.shape[0]
    picks: Sequence[int] = range(len(splits) * n)
    if len(picks) > COUNTED:
        picks = np.sort(np.random.default_rng(len(splits)).choice(len(picks), COUNTED, replace=False)).tolist()
    pairs = []
    for j in picks:
        (u, i), c = splits[j // n], j % n
        s, A, B = [c] * GAP, list(u[:i]), list(u[i:])
        head = A + s + B + s + sorted({*B, c}) * MAX_SUBSEQUENCE + s
        pairs.append((head, head + B + s))
    return pairs


def counted_conflict(maps: np.ndarray, q0: int) -> tuple[list[int], list[int]] | None:
    """A counted pair (module docstring) whose words reach different states from ``q0``, or None."""
    pairs = counted_pairs(maps, q0)
    hit = differing(maps, q0, [([x + 1 for x in w], [x + 1 for x in v]) for w, v in pairs], None)
    return pairs[int(hit[0])] if len(hit) else None
