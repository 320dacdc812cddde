"""Random automata by class: each generator gives its class, deterministically per seed."""

from __future__ import annotations

import random

import pytest

from compiler.automata.definite import definite_depth
from compiler.automata.errors import SpecError
from compiler.automata.families import CLASSES, Sizes, random_of_class
from compiler.automata.groups import analyse
from compiler.automata.semigroup import closure, is_permutation
from compiler.automata.stack_detect import bounded_stack
from compiler.automata.gridworld_detect import box_world


def _draws(kind: str, n: int = 12, sizes: Sizes = Sizes((2, 5), (2, 3))):
    return [random_of_class(kind, random.Random(i), sizes, f"{kind}{i}") for i in range(n)]


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_the_same_seed_gives_the_same_automaton_and_the_sizes_hold(kind):
    sizes = Sizes((2, 4), (2, 3))
    a, b = (random_of_class(kind, random.Random(7), sizes, "x") for _ in range(2))
    assert a == b and a.name == "x"
    assert all(len(m) == a.n_states for m in a.maps) and 0 <= a.start < a.n_states


def test_group_and_solvable_letters_are_permutations_and_solvable_ones_solvable():
    for a in _draws("group"):
        assert all(is_permutation(m) for m in a.maps)
    for a in _draws("solvable", sizes=Sizes((4, 6), (2, 3))):
        assert analyse(a.maps, a.n_states, enumerate_non_solvable=False).solvable


def _aperiodic(maps) -> bool:
    """No element s of the semigroup with s^k = s for some k > 1 unless s^2 = s (no nontrivial group)."""
    def power(s, k):
        out = s
        for _ in range(k - 1):
            out = tuple(s[q] for q in out)
        return out
    n = len(maps[0])
    return all(power(s, n + 1) == power(s, n + 2) for s in closure(maps))


def test_aperiodic_automata_are_counter_free():
    assert all(_aperiodic(a.maps) for a in _draws("aperiodic"))
    assert not _aperiodic(((1, 0),))  # the check itself can fail: parity is a group


def test_definite_automata_are_decided_by_their_last_letters():
    for a in _draws("definite", sizes=Sizes((2, 9), (2, 3))):
        assert definite_depth(a) is not None


def test_local_letters_reset_or_keep_and_stacks_and_grids_are_recognised():
    for a in _draws("local"):
        assert all(len(set(m)) == 1 or m == tuple(range(a.n_states)) for m in a.maps)
        assert any(len(set(m)) == 1 for m in a.maps)
    assert all(bounded_stack(a) is not None for a in _draws("stack", 6, Sizes((1, 3), (2, 4))))
    assert all(box_world(a) is not None for a in _draws("gridworld", 6, Sizes((3, 6), (2, 4))))


def test_products_have_a_product_of_state_counts_and_bad_requests_are_refused():
    sizes = Sizes((2, 3), (2, 3))
    assert all(a.n_states in (4, 6, 9) for a in _draws("product", 4, sizes))
    with pytest.raises(SpecError, match="unknown class"):
        random_of_class("nope", random.Random(0), Sizes(), "x")
    with pytest.raises(SpecError, match="states must be a range"):
        random_of_class("group", random.Random(0), Sizes((5, 2), (2, 3)), "x")


@pytest.mark.parametrize("kind", [k for k in sorted(CLASSES) if k.startswith("subregular-")])
def test_subregular_families_keep_their_language(kind):
    """Relabelling keeps the start of a subregular language: the zoo's automaton accepts what the
    generator's minimal DFA accepts (a random start would compile another language)."""
    sizes = Sizes((2, 4), (2, 4))
    rng = random.Random(5)
    for seed in range(4):
        dfa = CLASSES[kind](random.Random(seed), sizes)
        a = random_of_class(kind, random.Random(seed), sizes, "x")
        assert a.outputs is not None and dfa.outputs is not None and a.n_states == dfa.n_states
        for _ in range(50):
            w = [rng.randrange(a.n_symbols) for _ in range(rng.randint(0, 10))]
            assert a.outputs[([a.start] + a.run(w))[-1]] == dfa.outputs[([dfa.start] + dfa.run(w))[-1]]
