"""Minimal Moore machines by partition refinement (compiler/automata/moore.py)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from compiler.automata.errors import SpecError
from compiler.automata.load import load_spec
from compiler.automata.moore import labelling, minimise
from compiler.automata.spec import Semiautomaton


def labelled(a: Semiautomaton, f) -> Semiautomaton:
    return dataclasses.replace(a, outputs=tuple(f(s) for s in a.states))


def random_moore(rng: np.random.Generator, n: int, k: int, n_labels: int) -> Semiautomaton:
    maps = tuple(tuple(int(x) for x in rng.integers(0, n, n)) for _ in range(k))
    outputs = tuple(f"o{int(x)}" for x in rng.integers(0, n_labels, n))
    return Semiautomaton("rand", tuple(f"s{i}" for i in range(n)), tuple(f"a{j}" for j in range(k)), maps, 0, outputs)


def test_where_one_point_goes_shrinks_a_permutation_automaton() -> None:
    """S4 and S5 as automata on their elements, labelled by the image of 1: the label after a letter
    depends only on the label before it, so the minimal machine is the action on the n points."""
    for n, before in ((4, 24), (5, 120)):
        m = minimise(labelled(load_spec(f"symmetric:{n}"), lambda s: s[0]))
        assert (m.states_before, m.reachable, m.states_after) == (before, before, n)
        assert sorted(m.labels) == [str(i) for i in range(1, n + 1)]


def test_counter_labelled_mod_3_minimises_to_3_states() -> None:
    a = Semiautomaton("c6", tuple(f"c{i}" for i in range(6)), ("inc", "reset"),
                      (tuple((i + 1) % 6 for i in range(6)), (0,) * 6), 0, ("low", "mid", "high") * 2)
    m = minimise(a)
    assert m.states_after == 3 and m.classes == (("c0", "c3"), ("c1", "c4"), ("c2", "c5"))


def test_unreachable_states_are_dropped_and_labels_are_consecutive() -> None:
    a = Semiautomaton("u", ("a", "b", "c", "d"), ("x",), ((1, 0, 3, 2),), 0, ("p", "q", "p", "q"))
    m = minimise(a)
    assert (m.reachable, m.states_after) == (2, 2)
    rng = np.random.default_rng(0)
    for _ in range(50):
        m = minimise(random_moore(rng, 12, 3, 3))
        assert list(m.state_label) == sorted(m.state_label)


@pytest.mark.parametrize("seed", range(20))
def test_quotient_is_equivalent_and_minimal(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = random_moore(rng, int(rng.integers(2, 14)), int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    m = minimise(a)
    q = m.quotient
    words = [list(w) for L in range(1, 7) for w in itertools.product(range(a.n_symbols), repeat=L)][:3000]
    for w in words:  # same labels on every word
        assert [a.outputs[s] for s in a.run(w)] == [q.outputs[s] for s in q.run(w)]
    # minimal: every two quotient states are told apart by some word of length < n
    n = q.n_states
    for p, r in itertools.combinations(range(n), 2):
        assert any(q.outputs[q.run(w, p)[-1] if w else p] != q.outputs[q.run(w, r)[-1] if w else r]
                   for L in range(n) for w in itertools.product(range(q.n_symbols), repeat=L)), (p, r)


def test_no_outputs_is_refused() -> None:
    with pytest.raises(SpecError, match="no outputs"):
        minimise(load_spec("cyclic:3"))


def test_labelling_of_the_automaton_as_given_keeps_the_quotient_indices_and_adds_unreachable_labels() -> None:
    """Every state of the automaton itself gets a label index: the minimal machine's labels first
    (same indices), then labels only unreachable states carry."""
    a = Semiautomaton("u", ("p", "q", "r"), ("x",), ((1, 0, 2),), 0, ("b", "a", "c"))  # r unreachable
    m = minimise(a)
    labels, state_label = labelling(a, m)
    assert labels[: len(m.labels)] == m.labels and labels == ("b", "a", "c")
    assert [labels[i] for i in state_label] == list(a.outputs)
