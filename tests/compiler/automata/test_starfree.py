"""The since-program search (compiler/automata/starfree.py): the separation backtracks where the
first choice is a dead end, a feature's colours merge only where no state is lost, the search
reaches aperiodic automata the one-pass greedy search refused, and a refusal names the budget."""

from __future__ import annotations

import pytest

from compiler.automata import starfree
from compiler.automata.starfree import _coarsen, _separate, _Work, detect
from compiler.automata.subregular_families import random_language


def test_the_separation_backtracks_out_of_a_dead_end():
    """Configurations 0 and 1 to keep apart.  Group A: a reset merges 0~2 (one block joined), an
    identity 1~3~4 (two); group B: a reset merges 2~1, an identity 0~1.  The cheaper first choice
    (A reset) leaves B no choice; the search goes back and takes A's identity, then B's reset."""
    cons = [("A", [(0, 2)], [(1, 3), (3, 4)]), ("B", [(2, 1)], [(0, 1)])]
    got = _separate(5, cons, 0, 1, _Work())
    assert got is not None
    blocks, resets = got
    assert resets == {"B"}
    assert blocks[0] != blocks[1] and len({blocks[x] for x in (1, 2, 3, 4)}) == 1


def test_without_backtracking_the_dead_end_is_refused(monkeypatch):
    monkeypatch.setattr(starfree, "MAX_BACKTRACK", 0)
    cons = [("A", [(0, 2)], [(1, 3), (3, 4)]), ("B", [(2, 1)], [(0, 1)])]
    assert _separate(5, cons, 0, 1, _Work()) is None


def test_the_coarsening_keeps_apart_what_tells_states_apart():
    """Five configurations (state, (code below,), ()) in five blocks: blocks on other codes, or on one
    code with one state, share a colour; configurations 1 and 2 (code 1, states 1 and 2) stay apart."""
    order = [(0, (0,), ()), (1, (1,), ()), (2, (1,), ()), (1, (2,), ()), (1, (1,), ())]
    pi, flags = _coarsen(order, [0, 1, 2, 3, 4], {1: 1, 2: 3}, _Work())
    assert pi == [0, 0, 1, 0, 0] and flags == {1: 0, 2: 0}


@pytest.mark.parametrize("k,letters,seed,depth", [(3, 64, 1, 4), (5, 4, 0, 3), (4, 64, 1, 4)])
def test_languages_the_greedy_search_refused_get_a_program(k, letters, seed, depth):
    """Three generated sf languages the one-pass greedy search refused ('no since layer tells states
    apart'): the beam with backtracking finds a program, within the budget."""
    plan, why = detect(random_language("sf", k=k, letters=letters, seed=seed))
    assert plan is not None, why
    assert plan.depth == depth


def test_the_budget_is_named(monkeypatch):
    monkeypatch.setattr(starfree, "MAX_WORK", 2_000)
    plan, why = detect(random_language("sf", k=4, letters=64, seed=1))
    assert plan is None and "budget" in why and "2,000 steps" in why


def test_a_shared_budget_refuses_naming_its_share():
    """Inside ``shared_budget(n)`` the since-program search gets 1/n of its steps: over it, a refusal naming
    the budget and the share, never "not star-free"; outside, the same automaton is found."""
    from compiler.automata.shares import shared_budget
    from compiler.automata.starfree import detect
    from compiler.automata.subregular_families import random_language

    a = random_language("sf", k=3, letters=4, seed=0)
    assert detect(a)[0] is not None
    with shared_budget(1 << 30):
        plan, why = detect(a)
    assert plan is None and "(budget, 1/1073741824 of a detection's: shared" in why
