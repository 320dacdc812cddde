"""The piecewise-local search's proposals (compiler/automata/piecewise_local_levels.py): ambiguity
ranks the generator's subsequences first, and an ordered pair holds the same factors in both words."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from compiler.automata.piecewise import embeds
from compiler.automata.piecewise_local import beside_tracker
from compiler.automata.piecewise_local_levels import (GAP, Levels, access_words, neutral_letters, ordered_conflicts,
                                                     told_apart)
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
