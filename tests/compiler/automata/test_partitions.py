"""Partitions with the substitution property and parallel decompositions (compiler/automata/partitions.py)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.automata.catalog import build
from compiler.automata.partitions import (
    canonical,
    is_sp,
    meet_is_trivial,
    n_blocks,
    parallel_pairs,
    quotient,
    sp_partition,
    sp_partitions,
)
from compiler.automata.simulate import simulate


def _all_partitions(n: int):
    """Every partition of range(n), canonical (restricted growth strings)."""
    def grow(prefix):
        if len(prefix) == n:
            yield tuple(prefix)
            return
        for b in range(max(prefix, default=-1) + 2):
            yield from grow(prefix + [b])
    yield from grow([])


def _coarser(big, small) -> bool:
    return all(big[p] == big[q] for p, q in itertools.combinations(range(len(small)), 2) if small[p] == small[q])


@pytest.mark.parametrize("spec", ["cyclic-product:2,2", "dihedral:3", "grid:4", "flipflop"])
def test_sp_partition_is_the_smallest_sp_partition_joining_two_states(spec) -> None:
    """Against every partition of the states: the closure has the substitution property, joins
    p and q, and every SP partition joining them is at least as coarse."""
    a = build(spec)
    sps = [pi for pi in _all_partitions(a.n_states) if is_sp(a, pi)]
    for p, q in itertools.combinations(range(a.n_states), 2):
        pi = sp_partition(a, p, q)
        assert is_sp(a, pi) and pi[p] == pi[q] and pi == canonical(pi)
        assert all(_coarser(other, pi) for other in sps if other[p] == other[q])


def test_parallel_pairs_have_a_trivial_meet_and_their_quotients_track_the_blocks() -> None:
    """Z2 x Z2: three 2-block SP partitions, any two of which decompose it; on random words each
    quotient's state is the block of the automaton's state."""
    a = build("cyclic-product:2,2")
    pairs = parallel_pairs(a)
    assert len(pairs) == 3 and all(n_blocks(p1) == n_blocks(p2) == 2 for p1, p2 in pairs)
    words = np.random.default_rng(0).integers(0, a.n_symbols, (20, 12))
    states = simulate(a, words)
    for p1, p2 in pairs:
        assert meet_is_trivial(p1, p2)
        for pi in (p1, p2):
            qa = quotient(a, pi)
            assert qa.alphabet == a.alphabet and qa.n_states == n_blocks(pi)
            assert np.array_equal(simulate(qa, words), np.asarray(pi)[states])


def test_no_pair_where_the_sp_partitions_are_a_chain() -> None:
    """A counter mod 4: its SP partitions (mod 2, and the one-block one) form a chain; no pair."""
    a = build("cyclic:4")
    assert [n_blocks(pi) for pi in sp_partitions(a)] == [2]
    assert parallel_pairs(a) == []
    assert parallel_pairs(build("parity")) == []  # 2 states: nothing to split
