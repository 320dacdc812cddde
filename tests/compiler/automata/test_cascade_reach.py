"""The vectorised reachable-configuration search against the one-at-a-time one."""

import random
from dataclasses import replace

import numpy as np
import pytest

from compiler.automata.cascade import CascadeError
from compiler.automata.cascade_reach import _reachable_one_by_one, reachable
from compiler.automata.catalog import random_automaton
from compiler.automata.decompose import decompose
from compiler.automata.load import load_spec


@pytest.mark.parametrize("name", ["dihedral:4", "symmetric:4", "quaternion", "cyclic-product:2,2,2", "grid:4"])
def test_reachable_equals_the_step_by_step_search_on_named_automata(name):
    cascade = decompose(load_spec(name))
    n = len(cascade.automaton.alphabet)
    fast = reachable(cascade, cascade.start, n)
    assert np.array_equal(fast, _reachable_one_by_one(cascade, cascade.start, n))
    assert len(fast) >= len(cascade.automaton.states)


def test_reachable_equals_the_step_by_step_search_on_random_automata():
    rng = random.Random(5)
    for trial in range(11):  # the 12th draw has an 18-component cascade: too slow one by one
        a = random_automaton(rng, rng.randint(3, 6), rng.randint(2, 3))
        cascade = decompose(a)
        n = len(a.alphabet)
        fast = reachable(cascade, cascade.start, n)
        assert np.array_equal(fast, _reachable_one_by_one(cascade, cascade.start, n)), trial
        # every reached configuration decodes to a state of the automaton
        assert {cascade.decode(tuple(c)) for c in fast} <= set(range(len(a.states)))


def test_a_missing_table_entry_is_refused_like_step():
    cascade = decompose(load_spec("symmetric:4"))
    comp = cascade.components[-1]
    key = next(iter(comp.table))
    broken = replace(cascade, components=[*cascade.components[:-1],
                                          replace(comp, table={k: v for k, v in comp.table.items() if k != key})])
    n = len(cascade.automaton.alphabet)
    with pytest.raises(CascadeError):
        _reachable_one_by_one(broken, broken.start, n)
    with pytest.raises(CascadeError):
        reachable(broken, broken.start, n)
