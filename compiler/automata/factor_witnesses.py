"""Refusal witnesses of the factor search (compiler/automata/factors.py): proofs that no factor
description exists, found by sampling.

* A letter whose map has a cycle: no power of it is idempotent, and every locally threshold
  testable automaton is aperiodic.
* Two class words with the same last k - 1 letters and the same count of every k-factor (capped
  at t) that reach different states from the start: no description with this k (and any t, or
  this t) exists.  :func:`refuted` samples swaps A s B s C s D / A s C s B s D and pumps of random
  words, then (:func:`_refuted_by_blocks`) the identity of Therien and Weiss for locally threshold
  testable semigroups, e x f y e z f = e z f y e x f, with blocks -- powers of short words -- for
  its idempotents, and pumps of blocks, and (:func:`_separated_pairs`) the runs split and pumped
  between repetitions of one letter.  Both words of a pair hold the same windows, so a pair
  reaching different states is a proof; the rules only propose.  :func:`refuting_pairs` returns
  every such pair the samples see (the PLT detector's conflicts), and ``given`` (label, free
  feature per state) compares labels among states of one free feature.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def letter_with_a_cycle(maps: np.ndarray) -> int | None:
    """A class whose map has a cycle longer than 1 (a^N a != a^N for N = 2^m >= n), or None: an
    aperiodic automaton has none, and every locally threshold testable one is aperiodic."""
    power = maps.copy()
    for _ in range(max(1, int(maps.shape[1]).bit_length())):
        power = np.take_along_axis(power, power, axis=1)
    after = np.take_along_axis(maps, power, axis=1)  # a after a^N
    bad = np.flatnonzero(np.any(after != power, axis=1))
    return int(bad[0]) if len(bad) else None


SAMPLES = 256
"""Random word pairs each refutation test (:func:`refuted`) tries per k and t (a fixed seed:
detection is deterministic)."""


BLOCK_SAMPLES = 1024
"""Word pairs :func:`_refuted_by_blocks` tries per k and t (about 30 letters each, run together)."""
BLOCKS = 16
"""How many blocks :func:`_refuted_by_blocks` keeps: of :data:`SAMPLES` random p, those whose power
p^r keeps the most states apart (largest image)."""


def _run(maps: np.ndarray, q: int, word: list[int]) -> int:
    for c in word:
        q = int(maps[c - 1, q])
    return q


def _differ(ends: np.ndarray, given: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """Per pair of end states ([n, 2]): whether they differ -- with ``given`` (label, free: the
    search's factors.Given), whether their labels differ while their free features agree."""
    if given is None:
        return ends[:, 0] != ends[:, 1]
    label, free = given
    return (label[ends[:, 0]] != label[ends[:, 1]]) & (free[ends[:, 0]] == free[ends[:, 1]])


def refuted(maps: np.ndarray, q0: int, k: int, threshold: int | None,
            given: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[list[int], list[int]] | None:
    """Two class words with the same last k - 1 letters and the same count of every k-factor
    (``threshold`` None: exactly, A s B s C s D against A s C s B s D with |s| = k - 1) or the same
    count capped at ``threshold`` (A s (B s)^t D against A s (B s)^(t+1) D: a factor of a block
    s B s occurs at least t times in both, the rest equally often) that reach different states
    from q0 -- a proof that no description with this k (and t) exists -- or None.  ``given``: states
    whose labels differ and whose free features agree (:func:`_differ`)."""
    rng = np.random.default_rng(k * 7 + (threshold or 0))
    n = maps.shape[0]

    def word(lo: int, hi: int) -> list[int]:
        return [int(c) for c in rng.integers(1, n + 1, int(rng.integers(lo, hi + 1)))]
    for i in range(SAMPLES):
        A, s_, B, C, D = word(0, k + 2), word(k - 1, k - 1), word(0, k + 2), word(0, k + 2), word(0, k + 2)
        if i % 2:  # every other sample: s one letter repeated, D empty (a letter that changes nothing)
            s_, D = s_[:1] * (k - 1), []
        if threshold is None:
            w1, w2 = A + s_ + B + s_ + C + s_ + D, A + s_ + C + s_ + B + s_ + D
        else:
            w1, w2 = A + s_ + (B + s_) * threshold + D, A + s_ + (B + s_) * (threshold + 1) + D
        if _differ(np.array([[_run(maps, q0, w1), _run(maps, q0, w2)]]), given)[0]:
            return w1, w2
    return _refuted_by_runs(maps, q0, k, threshold, given) or _refuted_by_blocks(maps, q0, k, threshold, given) \
        or _first_differing(maps, q0, _separated_pairs(maps, q0, k, threshold), given)


def shortest_words(maps: np.ndarray, q0: int) -> list[list[int]]:
    """A shortest class word from q0 to each reachable state (breadth first, classes in order)."""
    words: dict[int, list[int]] = {q0: []}
    frontier = [q0]
    while frontier:
        nxt = []
        for q in frontier:
            for c in range(maps.shape[0]):
                r = int(maps[c, q])
                if r not in words:
                    words[r] = words[q] + [c + 1]
                    nxt.append(r)
        frontier = nxt
    return list(words.values())


def _refuted_by_runs(maps: np.ndarray, q0: int, k: int, threshold: int | None,
                     given: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[list[int], list[int]] | None:
    """:func:`refuted`'s threshold test on the automaton's own runs (:func:`_run_pairs`)."""
    return _first_differing(maps, q0, _run_pairs(maps, q0, k, threshold), given)


def _first_differing(maps: np.ndarray, q0: int, pairs: list[tuple[list[int], list[int]]],
                     given: tuple[np.ndarray, np.ndarray] | None) -> tuple[list[int], list[int]] | None:
    differ = differing(maps, q0, pairs, given)
    return pairs[int(differ[0])] if len(differ) else None


def differing(maps: np.ndarray, q0: int, pairs: list[tuple[list[int], list[int]]],
               given: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
    """The indices of the pairs whose words (codes 1.. of the rows of ``maps``) reach different states
    (:func:`_differ`), run together."""
    ends = _runs(maps, q0, [w for pair in pairs for w in pair]).reshape(-1, 2) if pairs else np.zeros((0, 2), int)
    return np.flatnonzero(_differ(ends, given))


def _run_pairs(maps: np.ndarray, q0: int, k: int, threshold: int | None) -> list[tuple[list[int], list[int]]]:
    """For w a shortest word to a state (repeated to at least k - 1 letters) and s its last k - 1
    letters, s w^t against s w^(t+1) (A and D empty, B s = w): a count that matters is one of a
    factor the runs read (random blocks rarely hold a given 6-factor of 16 letters); none without a
    threshold."""
    if threshold is None:
        return []
    pairs = []
    for w in shortest_words(maps, q0):
        if w:
            w = w * -(-(k - 1) // len(w))
            s = w[len(w) - (k - 1):]
            pairs.append((s + w * threshold, s + w * (threshold + 1)))
    return pairs


SEPARATED = 1 << 14
"""Most word pairs :func:`_separated_pairs` runs (shortest words x splits x letter classes, sampled above it:
about 0.1 CPU s)."""


def _separated_pairs(maps: np.ndarray, q0: int, k: int, threshold: int | None) -> list[tuple[list[int], list[int]]]:
    """For A B a shortest word to a state (B not empty) and s = c^(k-1) for a letter class c,
    A s (B s)^t against A s (B s)^(t+1): every k-factor that ends in a block B s reads the k - 1
    letters s before it, so each occurs at least t times in both and the rest equally often (a
    proof, as :func:`_run_pairs`').  Where B is as short as a factor counted twice (the word to the
    state where it occurred once), :func:`_run_pairs`' s, a suffix of B, already holds it: its pair
    counts it t + 1 against t + 2, this one t against t + 1; and A keeps what the run read first
    (a factor anchored at the start under which the count matters).  At most :data:`SEPARATED`
    pairs (a fixed sample of the (word, split, class) triples above it); none without a threshold."""
    if threshold is None:
        return []
    words = shortest_words(maps, q0)
    triples = [(u, i) for u in words for i in range(len(u))]
    n_cls = maps.shape[0]
    picks: Iterable[int] = range(len(triples) * n_cls)
    if len(triples) * n_cls > SEPARATED:
        picks = np.sort(np.random.default_rng(k * 13 + threshold).choice(len(triples) * n_cls, SEPARATED,
                                                                             replace=False)).tolist()
    pairs = []
    for j in picks:
        (u, i), s = triples[j // n_cls], [j % n_cls + 1] * (k - 1)
        A, B = u[:i], u[i:]
        pairs.append((A + s + (B + s) * threshold, A + s + (B + s) * (threshold + 1)))
    return pairs


def _blocks(maps: np.ndarray, k: int, rng: np.random.Generator) -> list[list[int]]:
    """:data:`BLOCKS` words p^r (p of 2..3 class codes, r so that |p^r| >= k - 1): of :data:`SAMPLES`
    random p, those whose power's map has the largest image (a power that sends almost every state
    to one sink -- most of a stack's -- tells no order apart)."""
    n_cls, n = maps.shape
    blocks, ranks = [], []
    for _ in range(SAMPLES):
        p = [int(c) for c in rng.integers(1, n_cls + 1, int(rng.integers(2, 4)))]
        word = p * -(-(k - 1) // len(p))
        image = np.arange(n)
        for c in word:
            image = maps[c - 1, image]
        blocks.append(word)
        ranks.append(len(np.unique(image)))
    order = np.argsort(-np.asarray(ranks), kind="stable")[:BLOCKS]
    return [blocks[i] for i in order]


def _runs(maps: np.ndarray, q0: int, words: list[list[int]]) -> np.ndarray:
    """The state each class word reaches from q0, all words at once (padded with the identity)."""
    ext = np.concatenate([np.arange(maps.shape[1])[None, :], maps])  # class code c -> row c; 0 the identity
    W = np.zeros((len(words), max(map(len, words), default=0)), dtype=np.int64)
    for i, w in enumerate(words):
        W[i, : len(w)] = w
    q = np.full(len(words), q0, dtype=np.int64)
    for j in range(W.shape[1]):
        q = ext[W[:, j], q]
    return q


def _refuted_by_blocks(maps: np.ndarray, q0: int, k: int, threshold: int | None,
                       given: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[list[int], list[int]] | None:
    """:func:`refuted`'s test on :func:`_block_pairs` (run together)."""
    return _first_differing(maps, q0, _block_pairs(maps, k, threshold), given)


def refuting_pairs(maps: np.ndarray, q0: int, k: int,
                   given: tuple[np.ndarray, np.ndarray] | None = None) -> list[tuple[list[int], list[int]]]:
    """Every pair of the blocks' swaps and the runs' and blocks' pumps at threshold 1
    (:func:`_block_pairs`, :func:`_run_pairs`) that :func:`refuted` would take: two words with the
    same window and the same set of k-factors reaching different states (or labels, ``given``), all
    the conflicts those samples see."""
    pairs = _block_pairs(maps, k, None) + _run_pairs(maps, q0, k, 1) + _block_pairs(maps, k, 1)
    return [pairs[int(i)] for i in differing(maps, q0, pairs, given)]


def _block_pairs(maps: np.ndarray, k: int, threshold: int | None) -> list[tuple[list[int], list[int]]]:
    """:data:`BLOCK_SAMPLES` word pairs with blocks e, f (half of them
    :func:`_blocks`', half fresh powers of a random p; |e|, |f| >= k - 1) between short words x, z
    (1..2 letters) and y (0..1) after a short A (0..2); ``threshold`` None: A e x f y e z f against
    A e z f y e x f (the identity of Therien and Weiss for locally threshold testable semigroups,
    powers standing for its idempotents: both words hold the same k-factors, each within e x f,
    f y e, e z f or a block, and end in f); else A e (x e)^t against A e (x e)^(t+1).  A stack's
    refusal: a random s is rarely balanced, so :func:`refuted`'s swaps seldom see the order of a
    push and a pop; a balanced block keeps the stack's level."""
    rng = np.random.default_rng(k * 11 + (threshold or 0) + 1)
    n, S = maps.shape[0], BLOCK_SAMPLES
    kept = _blocks(maps, k, rng)
    lens = rng.integers([0, 1, 0, 1, 2, 2], [3, 3, 2, 3, 4, 4], (S, 6)).tolist()  # A, x, y, z, p (e), p (f)
    L, P = rng.integers(1, n + 1, (S, 7)).tolist(), rng.integers(1, n + 1, (S, 2, 3)).tolist()
    pick = rng.integers(0, len(kept), (S, 2)).tolist()
    pairs = []
    for i in range(S):
        (a, lx, ly, lz, pe, pf), row = lens[i], L[i]
        A, x, y, z = row[:a], row[2 : 2 + lx], row[4 : 4 + ly], row[5 : 5 + lz]
        e, f = (kept[pick[i][0]], kept[pick[i][1]]) if i % 4 < 2 else \
            (P[i][0][:pe] * -(-(k - 1) // pe), P[i][1][:pf] * -(-(k - 1) // pf))  # kept blocks, or fresh powers
        f = e if i % 2 else f
        if threshold is None:
            pairs.append((A + e + x + f + y + e + z + f, A + e + z + f + y + e + x + f))
        else:
            pairs.append((A + e + (x + e) * threshold, A + e + (x + e) * (threshold + 1)))
    return pairs


def witness(pair: tuple[list[int], list[int]], k: int, threshold: int | None) -> str:
    w1, w2 = pair
    capped = "" if threshold is None else f" (capped at {threshold})"
    return (f"the class words {w1} and {w2} end in the same {k - 1} letters and hold every {k}-factor equally "
            f"often{capped}, yet reach different states")
