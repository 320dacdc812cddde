"""The piecewise-local search's proposals (compiler/automata/piecewise_local_levels.py): ambiguity
ranks the generator's subsequences first, and an ordered pair holds the same factors in both words."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from compiler.automata.piecewise import embeds
from compiler.automata.piecewise_local import beside_tracker, detect
from compiler.automata.piecewise_local_levels import (GAP, Levels, access_words, counted_conflict, counted_pairs,
                                                     neutral_letters, ordered_conflicts, told_apart)
from compiler.automata.subregular_families import draw


def _levels(a):
    return Levels(np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states), a.start)


def _factors(word: list[int], k: int) -> Counter:
    """Every factor of length <= k of the bracketed word, counted."""
    x = [-1, *word, -2]
    return Counter(tuple(x[i:i + j]) for j in range(1, k + 1) for i in range(len(x) - j + 1))


@pytest.fixture(scope="module")
def plt6():
    return draw("plt", k=6, letters=16, seed=0)


def test_the_generators_subsequences_are_the_least_ambiguous(plt6):
    """Each prefix of a drawn subsequence is (nearly) a function of the state; a word the language
    ignores roughly doubles the states at each of its levels; ambiguity never falls along a word."""
    lang, a = plt6
    levels = _levels(a)
    chain = lang.piecewise.patterns[0]  # type: ignore[union-attr]
    ambs = [levels.ambiguity(chain[:i]) for i in range(len(chain) + 1)]
    assert ambs == sorted(ambs) and ambs[-1] <= len(chain)
    junk = (2, 4, 9)  # letters of no pattern
    assert not set(junk) & {x for p in lang.piecewise.patterns + lang.local.patterns for x in p}  # type: ignore
    assert levels.ambiguity(junk) > 2 * a.n_states


def test_told_apart_finds_distinguishers_least_ambiguous_first(plt6):
    lang, a = plt6
    levels = _levels(a)
    w, v = [10, 14, 14, 10, 13, 1], [10, 14, 14, 10, 1, 13]
    found = told_apart(levels, w, v, 4)
    assert found and [amb for _, amb in found] == sorted(amb for _, amb in found)
    assert all(embeds(u, w) != embeds(u, v) for u, _ in found)
    assert found[0][0] == (10, 14, 14, 10, 13, 1)


def test_ordered_pairs_hold_the_same_factors_and_are_conflicts(plt6):
    """Every pair returned holds the same factors (up to the searched width) in both words, the same
    tracked subsequences, and reaches different states; with the generator's subsequences tracked
    there are none."""
    lang, a = plt6
    neutral = neutral_letters(_levels(a), 2)
    for words, some in (([(10,), (10, 14), (10, 14, 14)], True), ([p[:i] for p in lang.piecewise.patterns  # type: ignore[union-attr]
                                                   for i in range(1, len(p) + 1)], False)):
        prod, label, free = beside_tracker(a, words)
        _, dense = np.unique(free, return_inverse=True)
        maps = np.asarray(prod.maps, dtype=np.int64).reshape(prod.n_symbols, prod.n_states)
        pairs = ordered_conflicts(maps, 0, label, dense, words, neutral)
        assert bool(pairs) is some
        for w, v in pairs[:50]:
            assert _factors(w, GAP + 1) == _factors(v, GAP + 1)
            assert {u for u in words if embeds(u, w)} == {u for u in words if embeds(u, v)}
            assert a.run(w)[-1] != a.run(v)[-1]


def test_access_words_reach_every_state_once_shortest_first(plt6):
    _, a = plt6
    maps = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    words = access_words(maps, a.start)
    ends = [a.run(list(w))[-1] if w else a.start for w in words]
    assert len(set(ends)) == len(ends) == a.n_states
    assert [len(w) for w in words] == sorted(len(w) for w in words)


def _subsequences(word: list[int], most: int, letters: set[int]) -> set[tuple[int, ...]]:
    """Every subsequence of ``word`` over ``letters`` of at most ``most`` letters (a breadth-first walk
    over the greedy embeddings: the next occurrence of each letter after a position)."""
    found, frontier = {()}, {(): 0}
    for _ in range(most):
        nxt: dict[tuple[int, ...], int] = {}
        for u, at in frontier.items():
            for x in letters & set(word[at:]):
                nxt.setdefault(u + (x,), word.index(x, at) + 1)
        found.update(nxt)
        frontier = nxt
    return found


@pytest.mark.parametrize("spec", [("ltt", 5, 16, 1), ("ltt", 4, 4, 0)])
def test_a_counted_pair_is_a_proof(spec):
    """A threshold language's counted pair (a factor once against twice): the same padded factors of
    every length up to MAX_K and the same subsequences up to length 8 (checked here, not assumed),
    different states; the detector refuses with it before its search."""
    cls, k, letters, seed = spec
    _, a = draw(cls, k=k, letters=letters, seed=seed)
    maps = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    pair = counted_conflict(maps, a.start)
    assert pair is not None
    w, v = pair
    assert set(_factors(w, GAP + 1)) == set(_factors(v, GAP + 1)) and w[-GAP:] == v[-GAP:]
    small = set(sorted(set(w))[:3])  # length 8 over every letter is too many words: over 3 of them, and length 4
    assert _subsequences(w, 8, small) == _subsequences(v, 8, small)
    assert _subsequences(w, 4, set(w)) == _subsequences(v, 4, set(v))
    ends = []
    for word in pair:
        q = a.start
        for x in word:
            q = int(maps[x, q])
        ends.append(q)
    assert ends[0] != ends[1]
    plan, why = detect(a)
    assert plan is None and "the same subsequences (up to length 8)" in why


def test_a_piecewise_locally_testable_language_has_no_counted_conflict(plt6):
    """The pairs are proofs: on a PLT language none reaches different states."""
    _, a = plt6
    assert counted_conflict(np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states), a.start) is None
    assert len(counted_pairs(np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states), a.start)) > 0
