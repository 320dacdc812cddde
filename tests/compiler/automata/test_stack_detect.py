"""Recognising bounded-stack (Dyck) automata up to renaming, and the plan that follows."""

import random

import pytest

from compiler.automata.load import load_spec
from compiler.automata.spec import from_dict
from compiler.automata.stack_detect import NOOP, POP, PUSH, BoundedStack, detect


def as_spec(a, start=None):
    """The plain transition table of ``a`` (a JSON-able dict)."""
    return {"name": a.name, "states": list(a.states), "alphabet": list(a.alphabet),
            "start": a.states[a.start] if start is None else start,
            "transitions": {q: {s: a.states[a.maps[i][j]] for i, s in enumerate(a.alphabet)}
                            for j, q in enumerate(a.states)}}


def renamed(spec, seed=0):
    """The same automaton with states and letters renamed and reordered (a plain table)."""
    rng = random.Random(seed)
    states, alphabet = list(spec["states"]), list(spec["alphabet"])
    snew = {s: f"q{i}" for i, s in enumerate(rng.sample(states, len(states)))}
    anew = {a: f"x{i}" for i, a in enumerate(rng.sample(alphabet, len(alphabet)))}
    order, letters = rng.sample(states, len(states)), rng.sample(alphabet, len(alphabet))
    return {"name": "renamed", "states": [snew[s] for s in order], "alphabet": [anew[a] for a in letters],
            "start": snew[spec["start"]],
            "transitions": {snew[q]: {anew[a]: snew[spec["transitions"][q][a]] for a in letters} for q in order}}


@pytest.mark.parametrize("name, depth, k", [("dyck:4,2", 4, 2), ("dyck:2,2", 2, 2), ("dyck:3,3", 3, 3),
                                            ("dyck:6,1", 6, 1), ("dyck:1,1", 1, 1), ("dyck:2,5", 2, 5)])
def test_catalog_dyck_is_recognised_with_its_depth_and_symbols(name, depth, k):
    a = load_spec(name)
    plan, reason = detect(a)
    assert plan is not None, reason
    assert (plan.depth, plan.symbols) == (depth, k)
    assert plan.stacks[a.start] == ()
    assert a.states[plan.sink] == "error"
    for q, st in enumerate(plan.stacks):  # the catalog names stacks by their brackets
        if st is not None and k <= 4:
            assert a.states[q] == ("".join("([{<"[b] for b in st) or "ε")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_renamed_dyck_is_recognised_and_the_transitions_agree(seed):
    a = from_dict(renamed(as_spec(load_spec("dyck:4,2")), seed))
    plan, reason = detect(a)
    assert plan is not None, reason
    assert (plan.depth, plan.symbols) == (4, 2)
    index = {st: q for q, st in enumerate(plan.stacks)}
    for s in range(a.n_symbols):
        for q in range(a.n_states):
            assert index[plan.step(plan.stacks[q], s)] == a.maps[s][q]


def test_a_no_op_letter_is_allowed_and_any_start_roots_the_stacks():
    spec = as_spec(load_spec("dyck:2,2"))
    spec["alphabet"].append("_")
    for q in spec["transitions"]:
        spec["transitions"][q]["_"] = q
    a = from_dict(spec)
    plan, _ = detect(a)
    assert plan is not None and plan.letters[a.symbol_index["_"]] == (NOOP, -1)
    b = from_dict({**spec, "start": "(["})
    plan_b, _ = detect(b)
    assert plan_b is not None and plan_b.depth == 2  # the empty stack is found beyond the start


@pytest.mark.parametrize("name", ["grid:4", "parity", "symmetric:3", "memory:3", "flipflop", "cyclic:4"])
def test_other_automata_are_refused_with_a_reason(name):
    plan, reason = detect(load_spec(name))
    assert plan is None and reason


def test_a_tampered_transition_is_refused():
    spec = as_spec(load_spec("dyck:3,2"))
    spec["transitions"]["(["]["]"] = "[["  # should pop back to "("
    plan, reason = detect(from_dict(spec))
    assert plan is None and ("does not push or pop" in reason or "reached by two" in reason)


def test_plan_round_trips_through_json():
    plan, _ = detect(load_spec("dyck:3,3"))
    assert BoundedStack.from_dict(plan.to_dict()) == plan
    assert {kind for kind, _ in plan.letters} == {PUSH, POP}
