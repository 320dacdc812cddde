"""Tests for compiler.automata.groups: solvability, derived series, abelian factors, counter coordinates."""

from __future__ import annotations

import itertools
import random

import pytest

from compiler.automata import groups as G
from compiler.automata import perms
from compiler.automata.errors import BudgetError


def cyc(n: int, *cycle: int) -> G.Perm:
    """The permutation of 0..n-1 with one cycle."""
    p = list(range(n))
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        p[a] = b
    return tuple(p)


def sym(n: int) -> list[G.Perm]:
    return [cyc(n, *range(n)), cyc(n, 0, 1)]


def regular(elements: list, mul) -> list[G.Perm]:
    """The right regular representation: each element as a permutation of the elements."""
    index = {g: i for i, g in enumerate(elements)}
    return [tuple(index[mul(x, g)] for x in elements) for g in elements]


def quaternion_perms() -> list[G.Perm]:
    """Q8 = {±1, ±i, ±j, ±k} in its regular representation."""

    def ham(a, b):
        a1, b1, c1, d1 = a
        a2, b2, c2, d2 = b
        return (a1 * a2 - b1 * b2 - c1 * c2 - d1 * d2, a1 * b2 + b1 * a2 + c1 * d2 - d1 * c2,
                a1 * c2 - b1 * d2 + c1 * a2 + d1 * b2, a1 * d2 + b1 * c2 - c1 * b2 + d1 * a2)

    els = [tuple(s if j == k else 0 for j in range(4)) for k in range(4) for s in (1, -1)]
    return regular(els, ham)


def dihedral(n: int) -> list[G.Perm]:
    rot = cyc(n, *range(n))
    ref = tuple((-x) % n for x in range(n))
    return [rot, ref]


def product(*factors: int) -> list[G.Perm]:
    """Generators of C_n1 x C_n2 x ... acting on disjoint cycles."""
    n = sum(factors)
    gens, start = [], 0
    for f in factors:
        gens.append(cyc(n, *range(start, start + f)))
        start += f
    return gens


# --- arithmetic (compiler.automata.perms) ----------------------------------------


def test_mul_is_apply_left_then_right():
    p, q = cyc(3, 0, 1), cyc(3, 1, 2)
    # 0 -p-> 1 -q-> 2
    assert perms.mul(p, q)[0] == 2
    assert perms.mul(p, perms.inverse(p)) == perms.identity(3)
    assert perms.power(cyc(5, 0, 1, 2, 3, 4), 5) == perms.identity(5)
    assert perms.perm_order(perms.mul(cyc(5, 0, 1), cyc(5, 2, 3, 4))) == 6


def test_generate_counts_and_reduces_generators():
    kept, els = G.closure_with_generators(regular(list(range(12)), lambda a, b: (a + b) % 12), 12)
    assert len(els) == 12
    assert len(kept) < 11  # redundant generators skipped
    assert len(G.generate(sym(4), 4)) == 24
    with pytest.raises(BudgetError, match="group budget"):
        G.generate(sym(8), 8, budget=1000)


# --- solvability and series -------------------------------------------------------


@pytest.mark.parametrize("gens,degree,order,derived_length,name", [
    (product(5), 5, 5, 1, "C5"),
    (product(2, 2), 4, 4, 1, "C2 x C2"),
    (product(2, 2, 2), 6, 8, 1, "C2 x C2 x C2"),
    (product(2, 3), 5, 6, 1, "C6"),
    (product(4, 2), 6, 8, 1, "C4 x C2"),
    (sym(3), 3, 6, 2, "S3"),
    (dihedral(4), 4, 8, 2, "D8"),
    (quaternion_perms(), 8, 8, 2, "Q8"),
    ([cyc(4, 0, 1, 2), cyc(4, 1, 2, 3)], 4, 12, 2, "A4"),
    (sym(4), 4, 24, 3, "S4"),
])
def test_solvable_groups(gens, degree, order, derived_length, name):
    gs = G.analyse(gens, degree)
    assert gs.order == order
    assert gs.solvable
    assert gs.derived_length == derived_length
    if name is not None:
        assert gs.name == name
    # every factor is written as cyclic groups whose orders multiply to the index
    for lvl, (big, small) in zip(gs.levels, zip(gs.series_orders, gs.series_orders[1:])):
        assert lvl.order == big // small
        assert all(m >= 2 for m in lvl.moduli)
        # invariant factors: each modulus divides the next one... in reverse (largest first)
        assert all(b % a == 0 for a, b in zip(lvl.moduli[1:], lvl.moduli))
    assert G.check_coordinates(gs, gs.elements) == order * order


@pytest.mark.parametrize("seed", range(12))
def test_the_explicit_series_agrees_with_sympys_schreier_sims(seed):
    """The independent check the analysis leaves to the tests (sympy costs half a second to
    import): order and derived series of random permutation groups, solvable or not."""
    from sympy.combinatorics import Permutation, PermutationGroup

    rng = random.Random(seed)
    degree = rng.randint(3, 7)
    gens = [tuple(rng.sample(range(degree), degree)) for _ in range(rng.randint(1, 3))]
    gs = G.analyse(gens, degree)
    ref = PermutationGroup([Permutation(list(g)) for g in gens])
    assert gs.order == int(ref.order())
    assert gs.series_orders == tuple(int(N.order()) for N in ref.derived_series())
    assert gs.solvable == ref.is_solvable


def test_s4_factors_are_c2_c3_then_klein():
    gs = G.analyse(sym(4), 4)
    assert [lvl.moduli for lvl in gs.levels] == [(2,), (3,), (2, 2)]


@pytest.mark.parametrize("gens,degree,name", [
    ([cyc(5, 0, 1, 2), cyc(5, 0, 1, 3), cyc(5, 0, 1, 4)], 5, "A5"),
    (sym(5), 5, "S5"),
    (sym(6), 6, "S6"),
])
def test_non_solvable_groups_are_named(gens, degree, name):
    gs = G.analyse(gens, degree)
    assert not gs.solvable
    assert gs.derived_length is None
    assert gs.name == name
    assert len(gs.elements) == gs.order


def test_regular_s5_is_named_s5_not_just_contains_a5():
    els = list(itertools.permutations(range(5)))
    gens = regular(els, G.mul)
    gs = G.analyse([gens[els.index(cyc(5, 0, 1))], gens[els.index(cyc(5, 0, 1, 2, 3, 4))]], 120)
    assert gs.name == "S5"


def test_a5_x_c2_contains_a5():
    a5 = [cyc(7, 0, 1, 2), cyc(7, 0, 1, 3), cyc(7, 0, 1, 4)]
    gs = G.analyse(a5 + [cyc(7, 5, 6)], 7)
    assert not gs.solvable
    assert "A5" in gs.name and gs.order == 120


def test_encode_decode_and_increments_depend_only_on_upper_levels():
    gs = G.analyse(sym(4), 4)
    for g in gs.elements:
        c = gs.encode(g)
        assert gs.decode(c) == g
        for h in sym(4):
            incs = gs.increments(c, h)
            # changing the coordinates of level i and below does not change level i's increment
            for i in range(len(gs.levels)):
                other = list(c[:i]) + [tuple(0 for _ in lvl.moduli) for lvl in gs.levels[i:]]
                assert gs.increments(other, h)[i] == incs[i]
    assert gs.encode(G.identity(4)) == tuple(tuple(0 for _ in lvl.moduli) for lvl in gs.levels)


def test_trivial_group():
    gs = G.analyse([G.identity(3)], 3)
    assert gs.order == 1 and gs.solvable and gs.derived_length == 0 and gs.name == "1"


def test_budget_error_names_the_group():
    with pytest.raises(BudgetError, match="non-solvable group of order 3628800"):
        G.analyse(sym(10), 10, budget=1000)


def test_normality_is_checked_by_conjugation():
    s3 = G.generate(sym(3), 3)
    transposition = {G.identity(3), cyc(3, 0, 1)}
    a3 = set(G.generate([cyc(3, 0, 1, 2)], 3))
    assert not G._normal_in(sym(3), [cyc(3, 0, 1)], transposition)
    assert G._normal_in(sym(3), [cyc(3, 0, 1, 2)], a3)
    assert len(s3) == 6
