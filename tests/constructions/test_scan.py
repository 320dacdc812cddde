"""The scan construction (Theorem 10) end to end: compile, verify, invariants, size."""

import math
import random
from pathlib import Path

import pytest
import torch

import compiler
from compiler.automata.catalog import build as catalog_build
from compiler.automata.catalog import paper_suite, random_automaton
from compiler.automata.representation import choose
from constructions import scan
from constructions.budget import MAX_PARAMS
from constructions.scan import n_scan_layers
from constructions.construction import BuildOptions
from verify.check import verify

ACCEPTANCE = paper_suite() + ["parity", "flipflop", "memory:3", "grid2d:3,4"]


@pytest.mark.parametrize("name", ACCEPTANCE)
def test_catalog_compiles_and_verifies_at_128(name):
    model = compiler.compile_automaton(name, max_len=128, method="scan")
    assert model.info()["n_layers"] == 7 == math.ceil(math.log2(128))
    # CI-sized check; the full default verification runs in the slow sweep below
    r = verify(model, samples=8, exhaustive_budget=512)
    assert r.exact, r.counterexample
    assert r.invariants.failures == []
    assert r.margins["readout_min_logit_margin"] >= 1.0 - 1e-3


@pytest.mark.parametrize("name", ["parity", "symmetric:5", "dyck:2,2", "memory:3"])
def test_every_composition_is_bit_exact(name):
    """Maps stay exact integers after every layer in float32 (the compose MLP's float claim with
    the heads' derived temperature), and the margins say so."""
    model = compiler.compile_automaton(name, max_len=40, method="scan")
    r = verify(model, samples=2, exhaustive_budget=128, family_limit=2)
    worst = r.invariants.measured["worst_deviation"]  # over every layer's heads and MLP, against the program
    assert r.exact and worst["scan:map"] == 0.0
    mlps = r.margins["mlps"]
    # the fetched maps and the whole map composed into them keep at most a sub-rounding residue
    assert worst["scan:prev"] < mlps[-1]["exact_input_noise"]
    assert len(mlps) == len(model.blocks)
    for x in mlps:
        assert x["bit_exact"] and x["worst_input_noise"] < x["exact_input_noise"] < x["input_tolerance"] == 0.25
    for h in r.margins["heads"]:
        assert h["worst_leaked_mass"] <= h["derived_leak_bound"]


@pytest.mark.parametrize("name,T,positions", [("parity", 1, "sinusoidal"), ("dyck:4,2", 100, "sinusoidal"),
                                              ("symmetric:5", 64, "sinusoidal"), ("dihedral:3", 33, "circle"),
                                              ("memory:3", 300, "sinusoidal")])
def test_estimate_is_the_built_parameter_count(name, T, positions):
    model = compiler.compile_automaton(name, max_len=T, method="scan", positions=positions)
    n = sum(p.numel() for p in model.parameters())
    rep = choose(model.automaton)
    assert scan.estimated_params(rep, T, positions) == n == scan.estimate(rep, T, positions).params
    per_layer = [sum(p.numel() for p in b.parameters()) for b in model.blocks]
    assert per_layer[:-1] == [scan.layer_params(rep.n_points, T, positions)] * (len(per_layer) - 1)
    assert per_layer[-1] == scan.layer_params(rep.n_points, T, positions, last=True)
    assert scan.layer_params(rep.n_points, T, positions, last=True) < scan.layer_params(rep.n_points, T, positions)


def test_dyck_4_2_fits_in_5m_parameters():
    """O(m^3) per layer: 2.5M at T = 100 (19.0M with Lemma 14's dense m^2-wide middle layer)."""
    model = compiler.compile_automaton("dyck:4,2", max_len=100, method="scan")
    assert model.info()["n_layers"] == 7
    assert model.info()["n_params"] <= 5_000_000
    m = model.meta["scan"]["n_points"]
    assert sum(p.numel() for p in model.blocks[0].parameters()) <= 16 * m**3


def test_random_64_state_automaton_fits_the_default_budget():
    a = random_automaton(random.Random(64), 64, 4, family="mixed")
    rep = choose(a)
    assert rep.n_points == 64
    assert scan.estimated_params(rep, 256) <= MAX_PARAMS
    model = compiler.compile_automaton(a, max_len=256, method="scan")
    assert model.info()["n_layers"] == 8
    toks = torch.randint(0, a.n_symbols, (1, 256), generator=torch.Generator().manual_seed(0))
    assert model.predict(toks)[0].tolist() == a.run(toks[0].tolist())


@pytest.mark.slow
def test_random_64_state_automaton_verifies_exact_at_256():
    a = random_automaton(random.Random(64), 64, 4, family="mixed")
    model = compiler.compile_automaton(a, max_len=256, method="scan")
    r = verify(model, samples=8, exhaustive_budget=512)
    assert r.exact and all(x["bit_exact"] for x in r.margins["mlps"])


def test_composition_beyond_the_dtype_warns():
    """When the MLP's sums exceed 1/eps the float claim no longer holds: the build says so."""
    _, meta = scan.build(catalog_build("memory:3"), choose(catalog_build("memory:3")), BuildOptions(8, 2.0**-4))
    assert not meta["scan"]["compose"]["float_exact"]
    assert any("composition MLP" in w for w in meta["warnings"])
    _, meta = scan.build(catalog_build("memory:3"), choose(catalog_build("memory:3")), BuildOptions(8))
    assert meta["scan"]["compose"]["float_exact"] and not meta["warnings"]


@pytest.mark.slow
@pytest.mark.parametrize("T", [64, 256, 1024])
@pytest.mark.parametrize("name", ACCEPTANCE)
def test_catalog_sweep_exact_and_bit_exact(name, T):
    model = compiler.compile_automaton(name, max_len=T, method="scan")
    r = verify(model, samples=2, exhaustive_budget=256, family_limit=2)
    assert r.exact, r.counterexample
    assert all(x["bit_exact"] for x in r.margins["mlps"])


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


def test_a_checkpoint_from_before_the_last_layer_composed_into_the_fetched_map():
    """cyclic:3, scan, max_len 8, saved by 691005e: every layer composes into scan:map (no
    ``into`` in its notes).  It still loads, verifies exact with its invariants, and moving its
    start state re-points the readout at scan:map, where its map is."""
    old = compiler.load(Path(__file__).parent / "data" / "cyclic3_scan_691005e.safetensors")
    assert "into" not in old.meta["layers"][-1]["mlp"]
    assert len({b.mlp.W_in.shape[1] for b in old.blocks}) == 1  # one hidden size: the old last layer
    r = verify(old, samples=4, exhaustive_budget=512)
    assert r.exact and r.invariants.failures == [] and r.invariants.measured["worst_deviation"]["scan:map"] == 0.0
    a = old.automaton
    toks = torch.randint(0, a.n_symbols, (16, 8), generator=torch.Generator().manual_seed(0))
    for q0 in a.states:
        other = compiler.with_start(old, q0)
        assert other.predict(toks).tolist() == [a.run(row, start=a.state_index[q0]) for row in toks.tolist()]
    new = compiler.compile_automaton("cyclic:3", max_len=8, method="scan")
    assert new.meta["layers"][-1]["mlp"]["into"] == "scan:prev"
    assert new.info()["n_params"] < old.info()["n_params"]


def test_oversized_scan_is_refused_with_budget_error():
    with pytest.raises(compiler.ShortcutError, match="budget"):
        compiler.compile_automaton("grid:300", max_len=64, method="scan")  # auto would pick gridworld
