"""AALpy and pyformlang automaton objects load as specs and compile to exact models (the test
extra installs both; automata-lib objects are covered in tests/compiler/test_hardening.py)."""

from __future__ import annotations

import pytest

import compiler
from compiler.automata.errors import SpecError

aalpy = pytest.importorskip("aalpy.automata", reason="AALpy is in the test extra")
fa = pytest.importorskip("pyformlang.finite_automaton", reason="pyformlang is in the test extra")


def _aalpy_parity():
    """Even number of 'b' over {a, b} (accepting: even), built state by state as AALpy does."""
    even, odd = aalpy.DfaState("even", is_accepting=True), aalpy.DfaState("odd")
    even.transitions, odd.transitions = {"a": even, "b": odd}, {"a": odd, "b": even}
    return aalpy.Dfa(even, [even, odd])


def _aalpy_moore():
    """Counts 'x' mod 3; each state outputs its count."""
    states = [aalpy.MooreState(f"s{i}", output=f"c{i}") for i in range(3)]
    for i, s in enumerate(states):
        s.transitions = {"x": states[(i + 1) % 3], "y": s}
    return aalpy.MooreMachine(states[0], states)


def _pyformlang_mod3():
    """Binary numbers read left to right, the value mod 3; final: divisible by 3."""
    dfa = fa.DeterministicFiniteAutomaton()
    for r in range(3):
        for bit in (0, 1):
            dfa.add_transition(fa.State(r), fa.Symbol(str(bit)), fa.State((2 * r + bit) % 3))
    dfa.add_start_state(fa.State(0))
    dfa.add_final_state(fa.State(0))
    return dfa


def test_aalpy_dfa_loads_with_its_states_and_acceptance():
    a = compiler.load_spec(_aalpy_parity())
    assert a.states == ("even", "odd") and a.alphabet == ("a", "b") and a.start == 0
    assert [a.outputs[q] for q in a.run(a.symbol_ids("b a b b".split()))] == ["reject", "reject", "accept", "reject"]


def test_aalpy_moore_machine_keeps_its_outputs():
    a = compiler.load_spec(_aalpy_moore())
    assert [a.outputs[q] for q in a.run(a.symbol_ids("x y x x".split()))] == ["c1", "c1", "c2", "c0"]


def test_pyformlang_dfa_loads_in_a_deterministic_order():
    a = compiler.load_spec(_pyformlang_mod3())
    assert a.states == ("0", "1", "2") and a.alphabet == ("0", "1")
    assert [a.states[q] for q in a.run(a.symbol_ids("1 1 0".split()))] == ["1", "0", "0"]


@pytest.mark.parametrize("make", [_aalpy_parity, _aalpy_moore, _pyformlang_mod3])
def test_objects_compile_to_exact_models(make):
    a = compiler.load_spec(make())
    model = compiler.compile_automaton(a, max_len=12)
    words = [[a.alphabet[(i * 7 + j * j) % a.n_symbols] for j in range(12)] for i in range(16)]
    expected = [[a.states[q] for q in a.run(a.symbol_ids(w))] for w in words]
    assert model.simulate(words) == expected


def test_other_objects_of_those_libraries_are_refused_with_the_conversion():
    nfa = fa.NondeterministicFiniteAutomaton()
    nfa.add_transition(fa.State(0), fa.Symbol("a"), fa.State(1))
    with pytest.raises(SpecError, match="to_deterministic"):
        compiler.load_spec(nfa)
    s = aalpy.OnfsmState("s")
    with pytest.raises(SpecError, match="a MooreMachine or a MealyMachine"):
        compiler.load_spec(aalpy.Onfsm(s, [s]))
    with pytest.raises(SpecError, match="AALpy Dfa, MooreMachine or MealyMachine"):
        compiler.load_spec(object())


def test_a_partial_pyformlang_dfa_needs_complete():
    dfa = fa.DeterministicFiniteAutomaton()
    dfa.add_transition(fa.State("p"), fa.Symbol("a"), fa.State("q"))
    dfa.add_start_state(fa.State("p"))
    with pytest.raises(SpecError, match="missing|no transitions"):
        compiler.load_spec(dfa)
    assert compiler.load_spec(dfa, complete=True).n_states == 3
