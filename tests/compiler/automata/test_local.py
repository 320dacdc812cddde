"""Local descriptions (compiler/automata/local.py): detection on the automaton, the closure
as proof (checked here against brute-force runs), refusals and the plan's JSON form."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest

from compiler.automata import catalog
from compiler.automata.errors import SpecError
from compiler.automata.load import load_spec
from compiler.automata.local import LocalPlan, _levels, candidates, detect, window_key
from compiler.automata.spec import Semiautomaton


def features(plan: LocalPlan, start: int, word: list[int]) -> list[tuple[int, ...]]:
    """The final keys of every position of ``word`` from ``start``, computed by definition
    (window, phase, level, colour of the latest anchor) -- independently of the closure."""
    index = {key: i for i, key in enumerate(plan.local_keys)}
    rows = plan.starts[start].local
    window = [0] * plan.k
    level, colour = 0, plan.starts[start].init_class
    out = []
    for t, a in enumerate(word, 1):
        window = [a + 1, *window[:-1]]
        key = window_key((t % plan.period, *window), plan.period)
        flag, col, event = rows[index[key]]
        level = min(plan.bound, level + event)
        colour = col if flag else colour
        out.append(key + ((level,) if plan.bound else ()) + ((colour,) if plan.n_classes else ()))
    return out


def brute_check(a: Semiautomaton, plan: LocalPlan, length: int) -> int:
    """F(features) == the run, for every word up to ``length`` and every start; returns the count."""
    table = [dict(zip(plan.final_keys, st.final)) for st in plan.starts]
    n = 0
    for q0 in range(a.n_states):
        for L in range(1, length + 1):
            for word in itertools.product(range(a.n_symbols), repeat=L):
                run = a.run(word, start=q0)
                assert [table[q0][key] for key in features(plan, q0, list(word))] == run, (q0, word)
                n += 1
    return n


TARGETS = [("adder:2", "anchor", 2, 2), ("repeat:2", "count", 2, 1), ("repeat:3", "count", 2, 1),
           ("blocks:4", "count", 2, 2), ("blocks:1", "count", 1, 1), ("flipflop", "anchor", 1, 1),
           ("memory:3", "anchor", 1, 1)]


@pytest.mark.parametrize("name,mode,layers,k", TARGETS)
def test_detects_the_targets_and_the_description_holds_on_every_short_word(name, mode, layers, k):
    a = load_spec(name)
    plan, why = detect(a)
    assert plan is not None, why
    assert (plan.mode, plan.layers, plan.k) == (mode, layers, k)
    assert brute_check(a, plan, 6 if a.n_symbols <= 3 else 4) > 0


def test_three_addends_need_a_three_letter_window_and_two_colours():
    a = load_spec("adder:3")
    plan, _ = detect(a)
    assert (plan.mode, plan.k, plan.period, plan.n_classes, plan.layers) == ("anchor", 3, 1, 2, 2)
    rng = random.Random(0)
    table = [dict(zip(plan.final_keys, st.final)) for st in plan.starts]
    for _ in range(200):  # long words: the carry's one bit must survive arbitrarily long non-resetting stretches
        q0, word = rng.randrange(a.n_states), [rng.choice([1, 2, 4, 3, 5, 6]) for _ in range(rng.randrange(1, 60))]
        assert [table[q0][key] for key in features(plan, q0, word)] == a.run(word, start=q0)
    assert brute_check(a, plan, 3) > 0


@pytest.mark.parametrize("name", ["parity", "cyclic:3", "grid:4", "dihedral:4", "quaternion"])
def test_refuses_what_has_no_local_description(name):
    plan, why = detect(load_spec(name))
    assert plan is None and "no description of the state" in why


def test_refuses_large_automata_quickly():
    plan, why = detect(load_spec("symmetric:5"))
    assert plan is None and "over the local search's limit" in why


def test_levels_are_longest_paths_in_the_condensation():
    a = load_spec("blocks:4")
    maps = np.asarray(a.maps)
    assert _levels(maps, 0).tolist() == [0, 1, 2, 3, 4]
    assert _levels(maps, 2).tolist() == [-1, -1, 0, 1, 2]  # unreachable states have no level
    r = load_spec("repeat:2")
    assert _levels(np.asarray(r.maps), 0).tolist() == [0, 0, 1]  # 0 and 1 form one component


def test_candidates_grow_by_table_size():
    c = candidates(2)
    sizes = [3**k * p for k, p in c]
    assert sizes == sorted(sizes) and c[0] == (1, 1)
    assert all(9**k * p <= 4096 for k, p in candidates(8))


def test_random_automata_descriptions_hold():
    """Whatever the search accepts on random automata is right on every short word."""
    rng = random.Random(3)
    accepted = 0
    for _ in range(60):
        a = catalog.random_automaton(rng, rng.randint(2, 4), rng.randint(2, 3))
        plan, _ = detect(a, max_k=2, max_period=2)
        if plan is not None:
            accepted += 1
            brute_check(a, plan, 5)
    assert accepted >= 10


def test_plan_round_trip_and_bad_plans():
    plan, _ = detect(load_spec("blocks:4"))
    d = json.loads(json.dumps(plan.to_dict()))
    assert LocalPlan.from_dict(d) == plan
    with pytest.raises(SpecError, match="keys"):
        LocalPlan.from_dict({**d, "local_keys": [x + [0] for x in d["local_keys"]]})
    with pytest.raises(SpecError, match="tables"):
        LocalPlan.from_dict({**d, "starts": d["starts"][:-1]})
    with pytest.raises(SpecError, match="states in"):
        LocalPlan.from_dict({**d, "starts": [{**s, "final": [99] * len(s["final"])} for s in d["starts"]]})
    with pytest.raises(SpecError, match="local rows"):
        LocalPlan.from_dict({**d, "starts": [{**s, "rows": [[2, 0, 0]] * len(s["rows"])} for s in d["starts"]]})
    with pytest.raises(SpecError, match="needs k"):
        LocalPlan.from_dict({**d, "k": 0})


def test_catalog_families():
    a = catalog.build("adder:3")
    assert len(a.alphabet) == 8 and a.states[0] == "d0c0" and len(a.states) == 6
    assert [a.states[q] for q in a.run(a.symbol_ids(["111", "111", "000"]))] == ["d1c1", "d0c2", "d0c1"]
    r = catalog.build("repeat:2")
    assert [r.states[q] for q in r.run(r.symbol_ids(list("0101")))] == ["1", "0", "1", "0"]
    assert r.states[r.run(r.symbol_ids(list("011")))[-1]] == "sink"
    b = catalog.build("blocks:4")
    assert [b.states[q] for q in b.run(b.symbol_ids(list("0011001")))] == ["b0", "b0", "b1", "b1", "b2", "b2", "b3"]
    assert b.states[b.run(b.symbol_ids(list("10101")))[-1]] == "sink"
    for bad, msg in (("adder:1", "n >= 2"), ("adder:5", "n <= 4"), ("repeat:1", "n >= 2"), ("blocks:0", "n >= 1")):
        with pytest.raises(SpecError, match=msg):
            catalog.build(bad)
