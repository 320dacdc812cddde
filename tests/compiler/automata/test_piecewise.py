"""Detection of piecewise testable automata (compiler/automata/piecewise.py): the relevant
subsequences come from the automaton, the product walk proves the state a function of their
progress, and a refusal names the property that fails."""

from __future__ import annotations

import random

import pytest

from compiler.automata.load import load_spec
from compiler.automata.piecewise import PiecewisePlan, detect, runs
from compiler.automata.spec import Semiautomaton
from compiler.automata.subregular_families import draw, is_subsequence


def _word(chain) -> tuple[int, ...]:
    return tuple(a for a, m in chain for _ in range(m))


def _progress(plan: PiecewisePlan, word: list[int]) -> tuple[int, ...]:
    out = []
    for ch in plan.chains:
        w = _word(ch)
        out.append(max(j for j in range(len(w) + 1) if is_subsequence(w[:j], word)))
    return tuple(out)


def test_strictly_piecewise_chains_are_the_forbidden_subsequences():
    lang, a = draw("sp", k=4, letters=16, seed=1)
    plan, why = detect(a)
    assert plan is not None, why
    assert sorted(_word(c) for c in plan.chains) == sorted(lang.patterns)
    assert plan.k == 4 and plan.layers == 4


@pytest.mark.parametrize("cls,k,letters,seed", [("sp", 2, 4, 0), ("pt", 2, 4, 2), ("pt", 3, 16, 1), ("pt", 5, 4, 2),
                                                ("sp", 6, 4, 1), ("pt", 6, 4, 1)])
def test_the_state_is_the_table_of_the_progress_on_random_words(cls, k, letters, seed):
    lang, a = draw(cls, k=k, letters=letters, seed=seed)
    plan, why = detect(a)
    assert plan is not None, why
    assert plan.layers <= k
    table = dict(zip(plan.keys, plan.states))
    rng = random.Random(seed)
    for _ in range(200):
        word = [rng.randrange(letters) for _ in range(rng.randrange(0, 30))]
        q = a.start
        for s in word:
            q = a.maps[s][q]
        assert table[_progress(plan, word)] == q
        assert (a.outputs[q] == "accept") == lang.accepts(word)


def test_runs_and_the_plan_round_trip():
    assert runs((1, 1, 2, 1)) == ((1, 2), (2, 1), (1, 1))
    _, a = draw("pt", k=4, letters=4, seed=2)
    plan, _ = detect(a)
    assert PiecewisePlan.from_dict(plan.to_dict()) == plan


def test_a_cycle_is_refused_by_name():
    plan, why = detect(load_spec("parity"))
    assert plan is None and "is not a self-loop: not piecewise testable" in why


def test_a_partially_ordered_automaton_that_is_not_locally_confluent_is_refused():
    starts_with_a = Semiautomaton("starts-a", ("q0", "q1", "q2"), ("a", "b"), ((1, 1, 2), (2, 1, 2)))
    plan, why = detect(starts_with_a)
    assert plan is None and "not locally confluent" in why


@pytest.mark.parametrize("cls", ["sl", "lt", "zp", "sf"])
def test_other_classes_are_refused(cls):
    _, a = draw(cls, k=3, letters=4, seed=0)
    assert detect(a)[0] is None
