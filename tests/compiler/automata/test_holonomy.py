"""Tests for compiler.automata.holonomy: images, tiles, classes, depths, representatives, groups, exploration."""

from __future__ import annotations

import random

import pytest

from compiler.automata.catalog import random_maps
from compiler.automata.errors import BudgetError
from compiler.automata.groups import generate, is_identity
from compiler.automata.exploration import Exploration
from compiler.automata.holonomy import Holonomy, members, popcount, set_image
from compiler.automata.semigroup import then


def full_transformation_generators(n: int) -> list[tuple[int, ...]]:
    """An n-cycle, a transposition and a rank-(n-1) collapse: they generate T_n."""
    return [tuple(list(range(1, n)) + [0]), (1, 0) + tuple(range(2, n)), (0, 0) + tuple(range(2, n))]




def crosscheck(h: Holonomy) -> None:
    """The level-by-level exploration agrees with whole-chain steps on every reachable tuple."""
    ex = Exploration(h)
    for leaf in ex.leaves:
        path = ex.path[leaf]
        ancestors = [leaf]
        while ex.parent[ancestors[-1]] >= 0:
            ancestors.append(ex.parent[ancestors[-1]])
        ancestors.reverse()
        for a in range(len(h.maps)):
            new, actions = h.chain_step(path, a)
            assert new == ex.path[ex.trans[(leaf, a)]]
            for d in range(1, h.levels + 1):
                assert ex.actions[d][(ancestors[d - 1], a)] == actions[d - 1]


@pytest.mark.parametrize("n,levels", [(2, 1), (3, 2), (4, 3), (5, 4), (6, 5)])
def test_full_transformation_monoid(n, levels):
    h = Holonomy(n, full_transformation_generators(n))
    assert len(h.images) == 2 ** n - 1  # every non-empty subset is an image
    assert h.levels == levels
    # one class per size, depth = n - size + 1
    for b in h.blocks:
        assert b.depth == n - popcount(b.rep) + 1
        assert len(b.tiles) == popcount(b.rep)
        order = len(generate(b.generators, len(b.tiles)))
        assert order == [1, 1, 2, 6, 24, 120, 720][popcount(b.rep)]  # S_k on the k tiles of a k-set
    ex = Exploration(h)
    assert len(ex.leaves) == [1, 1, 2, 6, 24, 120, 720][n]  # one full chain per ordering


def test_tiles_cover_and_are_maximal():
    h = Holonomy(5, full_transformation_generators(5))
    x = h.full
    tiles = h.tiles(x)
    assert sorted(popcount(t) for t in tiles) == [4] * 5
    union = 0
    for t in tiles:
        union |= t
    assert union == x
    for t in tiles:
        assert not any(t != u and t & ~u == 0 for u in tiles)


def test_representatives_round_trip():
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(2, 7)
        h = Holonomy(n, random_maps(rng, n, rng.randint(1, 4)))
        for mem in h.class_members:
            r = mem[0]
            for p in mem:
                assert set_image(r, h.from_rep[p]) == p
                assert set_image(p, h.to_rep[p]) == r
                loop = then(h.from_rep[p], h.to_rep[p])
                assert all(loop[i] == i for i in members(r))


def test_depth_increases_along_tiles_and_images():
    rng = random.Random(4)
    for _ in range(50):
        n = rng.randint(2, 7)
        h = Holonomy(n, random_maps(rng, n, rng.randint(1, 4)))
        for p in h.images:
            if popcount(p) < 2:
                continue
            for t in h.tiles(p):
                assert h.depth_of(t) > h.depth_of(p)
            for a in range(len(h.maps)):
                q = h.mapper.image(p, a)
                same = h.class_of.get(q) == h.class_of[p]
                assert h.depth_of(q) > h.depth_of(p) or same


def test_no_singleton_image_needs_the_extra_level():
    # 0<->1, 2<->3 swaps and a collapse onto {0, 1}: the smallest images have two states.
    maps = [(1, 0, 3, 2), (0, 1, 0, 1)]
    h = Holonomy(4, maps)
    assert not any(popcount(p) == 1 for p in h.images)
    assert h.levels == 2  # X, then {0,1}; the singletons below are one more level down
    ex = Exploration(h)
    assert {ex.state_of_leaf(leaf) for leaf in ex.leaves} == set(range(4))
    crosscheck(h)


def test_holonomy_group_acts_on_tiles_not_points():
    # <s, t> is C2 x C2 on the points, but on the tiles {0,1}, {2,3} of X only t acts: C2.
    s, t, r = (1, 0, 3, 2), (2, 3, 0, 1), (0, 1, 0, 1)
    h = Holonomy(4, [s, t, r])
    top = h.blocks[0]
    assert top.rep == h.full
    assert sorted(top.tiles) == [0b0011, 0b1100]
    assert len(generate(top.generators, len(top.tiles))) == 2
    second = h.level_blocks[1]
    assert len(second) == 1 and len(generate(second[0].generators, 2)) == 2
    crosscheck(h)


def test_permutation_automaton_is_one_level_on_points():
    h = Holonomy(5, [(1, 2, 3, 4, 0), (1, 0, 2, 3, 4)])
    assert h.images == [h.full]
    assert h.levels == 1
    assert h.tiles(h.full) == tuple(1 << q for q in range(5))
    assert len(generate(h.blocks[0].generators, 5)) == 120


def test_counter_free_automaton_has_trivial_groups():
    # clamped moves on a line (the gridworld)
    n = 6
    left = tuple(max(q - 1, 0) for q in range(n))
    right = tuple(min(q + 1, n - 1) for q in range(n))
    h = Holonomy(n, [left, right])
    assert all(not b.generators for b in h.blocks)
    crosscheck(h)


def test_exploration_matches_whole_chain_semantics_on_random_automata():
    rng = random.Random(11)
    for _ in range(400):
        n = rng.randint(1, 6)
        h = Holonomy(n, random_maps(rng, n, rng.randint(1, 4)))
        crosscheck(h)


def test_one_state_automaton_has_no_levels():
    h = Holonomy(1, [(0,)])
    assert h.levels == 0
    ex = Exploration(h)
    assert ex.leaves == [0] and ex.state_of_leaf(0) == 0


def test_encode_decode_round_trip():
    h = Holonomy(5, full_transformation_generators(5))
    for x in range(5):
        assert h.decode(h.encode(x)) == x


def test_budgets():
    with pytest.raises(BudgetError, match="image budget"):
        Holonomy(8, full_transformation_generators(8), image_budget=100)
    with pytest.raises(BudgetError, match="chain budget"):
        Exploration(Holonomy(7, full_transformation_generators(7)), budget=500)
    hol = Holonomy(7, full_transformation_generators(7))  # the work budget: prefixes x letter maps
    with pytest.raises(BudgetError, match=f"more than {1500 // len(hol.maps)} reachable .* at most 1,500 prefixes x"):
        Exploration(hol, work=1500)


def test_round_trips_are_identity_for_identity_letter():
    h = Holonomy(3, [(1, 2, 0), (0, 0, 2)])
    for b in h.blocks:
        assert all(not is_identity(g) for g in b.generators)
