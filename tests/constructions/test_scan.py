"""The scan construction (Theorem 10) end to end: compile, verify, invariants, size."""

import math

import pytest
import torch

import compiler
from compiler.automata.catalog import paper_suite
from constructions.scan import n_scan_layers
from verify.check import verify

ACCEPTANCE = paper_suite() + ["parity", "flipflop", "memory:3", "grid2d:3,4"]


@pytest.mark.parametrize("name", ACCEPTANCE)
def test_catalog_compiles_and_verifies_at_128(name):
    model = compiler.compile_automaton(name, max_len=128, method="scan")
    assert model.info()["n_layers"] == 7 == math.ceil(math.log2(128))
    # CI-sized check; the full default verification runs in the slow sweep below
    r = verify(model, samples=8, exhaustive_budget=512)
    assert r.exact, r.counterexample
    assert r.invariants["failures"] == []
    assert r.margins["readout_min_logit_margin"] >= 1.0 - 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("name", ACCEPTANCE)
def test_catalog_full_verification_at_128(name):
    model = compiler.compile_automaton(name, max_len=128, method="scan")
    assert verify(model).exact


@pytest.mark.parametrize("T,layers", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (100, 7), (4096, 12)])
def test_depth_is_ceil_log2(T, layers):
    assert n_scan_layers(T) == layers


@pytest.mark.parametrize("T", [1, 2, 3, 5, 17])
def test_short_and_odd_lengths_are_exact(T):
    for name in ("parity", "dihedral:3", "dyck:2,1"):
        assert verify(compiler.compile_automaton(name, max_len=T, method="scan"), samples=8, exhaustive_budget=4096).exact


def test_group_automata_scan_a_small_faithful_action():
    assert compiler.compile_automaton("symmetric:5", max_len=8, method="scan").meta["scan"]["n_points"] == 5
    assert compiler.compile_automaton("alternating:5", max_len=8, method="scan").meta["scan"]["n_points"] == 5
    assert compiler.compile_automaton("dihedral:4", max_len=8, method="scan").meta["scan"]["n_points"] == 4
    # non-group automata keep the natural action
    assert compiler.compile_automaton("dyck:4,2", max_len=8, method="scan").meta["scan"]["natural"]


def test_circle_positions_are_exact_at_small_length():
    model = compiler.compile_automaton("quaternion", max_len=64, positions="circle", method="scan")
    assert model.meta["positions"] == "circle"
    assert verify(model, samples=8, exhaustive_budget=1024).exact


def test_float64_models_are_exact():
    model = compiler.compile_automaton("alternating:4", max_len=64, dtype=torch.float64, method="scan")
    assert model.info()["dtype"] == "float64"
    assert verify(model, samples=8, exhaustive_budget=1024).exact


def test_perturbed_model_is_caught_with_a_counterexample():
    model = compiler.compile_automaton("cyclic:3", max_len=32, method="scan")
    with torch.no_grad():
        model.blocks[2].mlp.W_out.mul_(0.0)  # break layer 3's composition
    r = verify(model, samples=8, exhaustive_budget=256)
    assert not r.exact
    ce = r.counterexample
    assert ce is not None and ce.expected != ce.got
    a = model.automaton
    assert a.states[a.run(a.symbol_ids(ce.input))[-1]] == ce.expected
    assert len(ce.trace) == ce.position


def test_simulate_and_info_interfaces():
    model = compiler.compile_automaton("parity", max_len=16, method="scan")
    assert model.simulate([["1", "1", "0", "1"], []]) == [["odd", "even", "even", "odd"], []]
    info = model.info()
    for key in ("method", "max_len", "dtype", "n_layers", "d_model", "n_heads", "d_head", "d_mlp",
                "mlp_hidden_layers", "n_params", "automaton", "n_states", "n_symbols"):
        assert key in info
    assert info["n_params"] == sum(p.numel() for p in model.parameters())
    logits = model(torch.tensor([[1, 0, 1]]))
    assert logits.shape == (1, 3, 2)


def test_unknown_symbol_and_too_long_inputs_raise():
    model = compiler.compile_automaton("parity", max_len=4, method="scan")
    with pytest.raises(compiler.ShortcutError, match="unknown symbol"):
        model.simulate([["2"]])
    with pytest.raises(compiler.ShortcutError, match="longer than"):
        model.simulate([["1"] * 5])


def test_circle_positions_warn_where_float32_cannot_resolve_them():
    bad = compiler.compile_automaton("parity", max_len=4096, positions="circle", method="scan")
    assert bad.meta["position_precision_margin"] < 1 and bad.meta["warnings"]
    good = compiler.compile_automaton("parity", max_len=4096, method="scan")
    assert good.meta["position_precision_margin"] > 1e4 and not good.meta["warnings"]
    f64 = compiler.compile_automaton("parity", max_len=4096, positions="circle", dtype=torch.float64, method="scan")
    assert not f64.meta["warnings"]


def test_one_model_reads_out_every_start_state():
    for name in ("symmetric:4", "dyck:2,2"):  # element readout and natural readout
        model = compiler.compile_automaton(name, max_len=32, method="scan")
        a = model.automaton
        toks = torch.randint(0, a.n_symbols, (8, 32))
        for q0 in a.states[:5]:
            other = compiler.with_start(model, q0)
            want = [a.run(row, start=a.state_index[q0]) for row in toks.tolist()]
            assert other.predict(toks).tolist() == want
            assert other.automaton.states[other.automaton.start] == q0
        assert model.automaton.start == a.start  # the original is untouched


def test_oversized_scan_is_refused_with_budget_error():
    with pytest.raises(compiler.ShortcutError, match="budget"):
        compiler.compile_automaton("grid:300", max_len=64, method="scan")  # auto would pick gridworld
