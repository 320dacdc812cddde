"""Theorem 11 end to end: cascades compiled to constant-depth Transformers."""

import random

import pytest
import torch

import compiler
from compiler.automata.errors import BudgetError
from compiler.automata.catalog import paper_suite, random_automaton
from verify.check import verify

SOLVABLE = [n for n in paper_suite() if n not in ("alternating:5", "symmetric:5")] + [
    "parity", "flipflop", "memory:3", "grid2d:3,4"]
DERIVED_LENGTH = {"cyclic:2": 1, "cyclic:5": 1, "cyclic:8": 1, "cyclic-product:2,2": 1, "cyclic-product:2,2,2": 1,
                  "dihedral:3": 2, "dihedral:4": 2, "quaternion": 2, "alternating:4": 2, "symmetric:4": 3}


@pytest.mark.parametrize("name", SOLVABLE)
def test_solvable_catalog_compiles_exact_with_constant_depth(name):
    small = compiler.compile_automaton(name, max_len=32, method="krohn-rhodes")
    big = compiler.compile_automaton(name, max_len=96, method="krohn-rhodes")
    assert small.info()["n_layers"] == big.info()["n_layers"]
    assert small.info()["method"] == "krohn-rhodes"
    r = verify(big, samples=6, exhaustive_budget=256)
    assert r.exact, (r.counterexample, r.invariants.get("failures"))
    assert r.invariants["failures"] == [] and r.invariants["components"]


@pytest.mark.slow
@pytest.mark.parametrize("name", SOLVABLE)
@pytest.mark.parametrize("T", [256, 1024])
def test_acceptance_at_256_and_1024(name, T):
    model = compiler.compile_automaton(name, max_len=T, method="krohn-rhodes")
    ref = compiler.compile_automaton(name, max_len=256, method="krohn-rhodes")
    assert model.info()["n_layers"] == ref.info()["n_layers"]
    r = verify(model, samples=32 if T <= 256 else 16)
    assert r.exact, (r.counterexample, r.invariants.get("failures"))


@pytest.mark.parametrize("name,depth", sorted(DERIVED_LENGTH.items()))
def test_group_depth_is_the_derived_length(name, depth):
    assert compiler.compile_automaton(name, max_len=16, method="krohn-rhodes").info()["n_layers"] == depth


def test_non_solvable_is_refused_naming_the_group():
    with pytest.raises(compiler.ShortcutError, match="A5"):
        compiler.compile_automaton("alternating:5", max_len=16, method="krohn-rhodes")


def test_auto_prefers_the_shallower_construction():
    assert compiler.compile_automaton("symmetric:4", max_len=100).info()["method"] == "krohn-rhodes"
    assert compiler.compile_automaton("symmetric:5", max_len=100).info()["method"] == "scan"
    assert compiler.compile_automaton("grid:9", max_len=100).info()["method"] == "gridworld"
    m = compiler.compile_automaton("dyck:4,2", max_len=100)  # 9 cascade layers vs 7 for the scan
    assert m.info()["method"] == "scan" and "krohn-rhodes" in m.info()["why"].lower()


def test_other_start_states():
    model = compiler.compile_automaton("dihedral:4", max_len=24, method="krohn-rhodes")
    a = model.automaton
    toks = torch.randint(0, a.n_symbols, (6, 24))
    for q0 in ("r2-", "r3+"):
        other = compiler.with_start(model, q0)
        assert other.predict(toks).tolist() == [a.run(r, start=a.state_index[q0]) for r in toks.tolist()]


def test_broken_component_is_named():
    model = compiler.compile_automaton("symmetric:4", max_len=32, method="krohn-rhodes")
    with torch.no_grad():
        model.blocks[1].attn.W_V.mul_(0.5)
    r = verify(model, samples=4, exhaustive_budget=128)
    assert not r.exact and r.counterexample is not None
    assert any("h1.b0.count1.0" in f for f in r.invariants["failures"])


def _random_solvable(rng, n_states, n_letters):
    while True:
        a = random_automaton(rng, n_states, n_letters)
        if compiler.decompose(a).solvable:
            return a


def _check_random(count, seed, T, **checks):
    """Every random solvable automaton compiles (no budget refusal) and verifies exact."""
    rng = random.Random(seed)
    for _ in range(count):
        a = _random_solvable(rng, rng.randint(2, 5), rng.randint(1, 3))
        model = compiler.compile_automaton(a, max_len=T, method="krohn-rhodes")
        r = verify(model, **checks)
        assert r.exact, (a, r.counterexample, r.invariants.get("failures"))
        assert r.invariants["failures"] == []


def test_random_solvable_automata():
    _check_random(25, seed=0, T=64, samples=4, exhaustive_budget=512, families=False)


@pytest.mark.slow
def test_random_solvable_automata_200():
    _check_random(200, seed=1, T=64, samples=16)  # the full default verify: ~5 min here


# A deep holonomy cascade (random, seed 1, #50 of the sweep above): every level reads the
# tiles of the levels above; folded into the tables they reached 518,400 rows.
DEEP = compiler.Semiautomaton("deep-holonomy", ("0", "1", "2", "3", "4"), ("a0", "a1", "a2"),
                              ((1, 4, 3, 4, 0), (2, 0, 3, 1, 4), (0, 2, 3, 4, 1)), 0)


def test_views_evaluated_in_the_network_when_folding_is_costlier():
    model = compiler.compile_automaton(DEEP, max_len=48, method="krohn-rhodes")
    views = model.meta["krohn_rhodes"]["views"]
    assert any(v["old"] for v in views) and any(v["new"] for v in views)
    assert model.info()["n_params"] < 2_000_000  # folded, the last MLP alone had 172,804 units
    r = verify(model, samples=4, exhaustive_budget=512)
    assert r.exact, (r.counterexample, r.invariants.get("failures"))
    checked = [row for row in r.invariants["components"] if "view" in row]
    assert len(checked) == len(views)


def test_broken_view_is_named():
    model = compiler.compile_automaton(DEEP, max_len=24, method="krohn-rhodes")
    view = next(v["name"] for v in model.meta["krohn_rhodes"]["views"] if v["old"])
    col = model.meta["residual_labels"].index(f"kr:{view}.old")
    with torch.no_grad():
        for block in model.blocks:  # the lookup writing the view: scale its output
            if block.mlp is not None:
                block.mlp.W_out[:, col] *= 1.5
    r = verify(model, samples=4, exhaustive_budget=128, families=False)
    assert any(f.startswith(f"view {view}") for f in r.invariants["failures"])

