"""The paper's Dyck under the promise of legal inputs: two attention layers (bounded_stack.py's
legal variant), recognised from shuffled tables, exact on legal inputs only; partial gridworlds
and definite automata compile no deeper and no larger than their completions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build
from compiler.automata.errors import InputError
from compiler.automata.formats import MISSING, from_table
from compiler.automata.partitions import is_sp, parallel_pairs
from compiler.automata.promise import legal_mask, sample_legal
from compiler.automata.spec import LEGAL, from_dict
from compiler.automata.stack_detect import detect_legal
from compiler.pipeline import with_start
from constructions import bounded_stack as stack
from constructions import lookback, product, registry
from verify.check import verify as full_verify

SMALL = {"samples": 8, "exhaustive_budget": 1024, "family_limit": 4}
"""A small verification (the benchmark, benchmarks/bench_dyck_legal.py, runs the full one)."""


def verify(model, **options):
    return full_verify(model, **{**SMALL, **options})

SHAPES = [(4, 2), (2, 3), (3, 2), (6, 1)]
"""(D, k) of dyck-legal:D,k: the paper's Dyck_{4,2} and the issue's others."""


def shuffled(name: str, seed: int):
    """``name`` as a bare integer table, states and letters permuted, -1 where undefined."""
    a = build(name)
    rng = np.random.default_rng(seed)
    perm, cols = rng.permutation(a.n_states), rng.permutation(a.n_symbols)
    table = np.full((a.n_states, a.n_symbols), MISSING)
    for q in range(a.n_states):
        for c, s in enumerate(cols):
            if a.defined[s][q]:
                table[perm[q], c] = perm[a.maps[s][q]]
    return from_table(table, start=int(perm[a.start]), promise=LEGAL)


def forward(model, tokens: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(tokens)).argmax(-1).numpy()


@pytest.mark.parametrize("D,k", [SHAPES[0], *(pytest.param(*s, marks=pytest.mark.slow) for s in SHAPES[1:])])
def test_auto_compiles_the_legal_stack_in_two_layers_at_every_length(D, k):
    a = build(f"dyck-legal:{D},{k}")
    assert a.n_states == sum(k**i for i in range(D + 1))
    for T in (100, 1024, 4096):
        d = compiler.pipeline.decide(a, "auto", T)
        legal_stack = next(c for c in d.candidates if c.name == stack.NAME)
        assert legal_stack.applies and legal_stack.layers == 2 and d.chosen.layers <= 2
        # (6, 1), 7 states: a product of depth mod 2 and depth mod 5 counters (CRT), one layer
        assert d.method == stack.NAME or (D, k) == (6, 1) and d.chosen.layers == 1
    m = compiler.compile_automaton(a, max_len=100, method=stack.NAME)
    assert m.info()["n_layers"] == 2 and m.meta["warnings"] == []
    assert m.info()["n_params"] == stack.estimate(registry.plan_of(m)[1], 100).params
    assert m.info()["n_params"] < compiler.compile_automaton(f"dyck:{D},{k}", max_len=100).info()["n_params"]


@pytest.mark.parametrize("D,k", [SHAPES[0], *(pytest.param(*s, marks=pytest.mark.slow) for s in SHAPES[1:])])
def test_exact_on_legal_inputs(D, k):
    m = compiler.compile_automaton(f"dyck-legal:{D},{k}", max_len=100)
    r = verify(m, samples=32)
    assert r.exact and r.invariants.failures == [] and r.checked["promise"] == "legal inputs only"
    assert r.checked["exhaustive_length"] >= 6


def test_a_shuffled_table_is_recognised():
    for seed in range(3):
        a = shuffled("dyck-legal:4,2", seed)
        plan, reason = detect_legal(a)
        assert plan is not None and (plan.depth, plan.symbols) == (4, 2) and plan.legal, reason
        m = compiler.compile_automaton(a, max_len=64)
        assert m.meta["method"] == stack.NAME and m.info()["n_layers"] == 2
        tokens, mask = sample_legal(a, np.random.default_rng(seed), 64, 64)
        assert mask.all() and (forward(m, tokens) == np.array([a.run(r) for r in tokens.tolist()])).all()


def test_detection_refuses_what_is_not_a_legal_stack():
    assert detect_legal(build("dyck:2,2"))[0] is None  # complete: its errors are a state
    d = build("dyck-legal:2,2").to_dict()
    d["transitions"]["ε"]["("] = "ε"  # a push that does nothing
    plan, reason = detect_legal(from_dict(d))
    assert plan is None and reason


def test_a_broken_level_head_is_caught_on_legal_inputs():
    m = compiler.compile_automaton("dyck-legal:4,2", max_len=32)
    with torch.no_grad():
        m.blocks[1].attn.W_O[1].zero_()  # level 2's head writes nothing
    assert not verify(m, layerwise=False).exact


def test_illegal_inputs_are_refused_by_simulate_and_unspecified_in_forward():
    m = compiler.compile_automaton("dyck-legal:2,2", max_len=16)
    with pytest.raises(InputError, match=r"word 2 leaves the domain at position 3: '\)' from state 'ε'"):
        m.simulate([["(", ")"], ["(", ")", ")"]])
    tokens = torch.tensor([m.automaton.symbol_ids(["(", ")", ")"])])
    assert m(tokens).shape == (1, 3, m.automaton.n_states)  # forward computes something; legal_mask says what counts
    assert legal_mask(m.domain, tokens.numpy()).tolist() == [[True, True, False]]


def test_another_start_stack():
    m = with_start(compiler.compile_automaton("dyck-legal:3,2", max_len=32), "([")
    assert m.simulate([["]", ")", "("]]) == [["(", "ε", "("]]
    assert verify(m).exact


def grid_without_walls(name: str):
    """``name`` with every move into a wall left undefined (walking into a wall is illegal)."""
    a = build(name)
    d = a.to_dict()
    for i, q in enumerate(a.states):
        for j, x in enumerate(a.alphabet):
            if a.maps[j][i] == i:
                del d["transitions"][q][x]
    return d


@pytest.mark.parametrize("name", ["grid:5", "grid2d:3,3"])
def test_a_partial_gridworld_is_no_deeper_and_no_larger_than_its_completions(name):
    d = grid_without_walls(name)
    partial = compiler.compile_automaton(from_dict(d, promise=LEGAL), max_len=64)
    assert verify(partial).exact
    for completion in (from_dict(d, complete=True), build(name)):  # a sink; the clamped walls
        other = compiler.compile_automaton(completion, max_len=64).info()
        assert partial.info()["n_layers"] <= other["n_layers"] and partial.info()["n_params"] <= other["n_params"]


def test_a_partial_definite_automaton_is_no_deeper_and_no_larger_than_its_completion():
    d = build("nth-last:3").to_dict()
    for q in d["transitions"]:
        if q.endswith("b"):
            del d["transitions"][q]["b"]
    partial = compiler.compile_automaton(from_dict(d, promise=LEGAL), max_len=64)
    assert partial.meta["method"] == lookback.NAME and partial.info()["n_layers"] == 1
    assert verify(partial).exact
    sink = compiler.compile_automaton(from_dict(d, complete=True), max_len=64).info()
    assert partial.info()["n_layers"] <= sink["n_layers"] and partial.info()["n_params"] <= sink["n_params"]


def test_a_regex_dfa_without_its_dead_state_compiles_under_the_promise():
    pytest.importorskip("automata")
    m = compiler.compile_automaton(compiler.load_spec("regex:a(a|b)*b", alphabet="a,b", promise=LEGAL), max_len=32)
    assert "sink" not in m.automaton.states and m.meta["promise"]["kind"] == LEGAL
    assert verify(m).exact
    with pytest.raises(InputError, match="position 1"):
        m.simulate([["b"]])


def test_a_label_readout_under_the_promise_is_exact_on_legal_inputs():
    m = compiler.compile_automaton("dyck-legal:3,2", max_len=32, readout="labels")
    r = m.meta["readout"]
    assert r["states_after"] == 4 and m.meta["promise"]["kind"] == LEGAL  # the minimal machine: the depth
    assert m.domain.partial and verify(m).exact
    with pytest.raises(InputError, match="leaves the domain"):
        m.simulate([[")"]])


def test_a_partial_definite_model_moves_its_start_on_legal_words():
    d = build("nth-last:3").to_dict()
    for q in d["transitions"]:
        if q.endswith("b"):
            del d["transitions"][q]["b"]
    a = from_dict(d, promise=LEGAL)
    m = with_start(compiler.compile_automaton(a, max_len=16), "aab")
    assert m.automaton.states[m.automaton.start] == "aab"
    want = [a.states[q] for q in a.run(a.symbol_ids(["a", "b", "a"]), a.state_index["aab"])]
    assert m.simulate([["a", "b", "a"]]) == [want]
    assert verify(m).exact


def counter_beside_parity() -> dict:
    """A depth-2 counter (under- and overflow undefined) beside the parity of every letter: a
    product on its legal words only (its self-loops, or a sink, break the parity partition)."""
    tr = {}
    for d in range(3):
        for p in range(2):
            row = {"x": f"{d}{1 - p}"}
            if d < 2:
                row["("] = f"{d + 1}{1 - p}"
            if d > 0:
                row[")"] = f"{d - 1}{1 - p}"
            tr[f"{d}{p}"] = row
    return {"states": list(tr), "alphabet": ["(", ")", "x"], "transitions": tr}


def test_a_product_on_legal_words():
    spec = counter_beside_parity()
    a = from_dict(spec, promise=LEGAL)
    pairs = parallel_pairs(a)
    assert pairs and all(is_sp(a, p1) and is_sp(a, p2) for p1, p2 in pairs)
    assert parallel_pairs(from_dict(spec, complete=True)) == []
    m = compiler.compile_automaton(a, max_len=64)
    assert m.meta["method"] == product.NAME and verify(m).exact
    sink = compiler.compile_automaton(from_dict(spec, complete=True), max_len=64).info()
    assert m.info()["n_layers"] <= sink["n_layers"] and m.info()["n_params"] <= sink["n_params"]
