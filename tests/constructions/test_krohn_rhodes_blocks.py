"""Theorem 11's counters with their prefix sums split over position blocks (krohn_rhodes_layout.CounterBlocks)."""

import math

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.decompose import decompose
from compiler.automata.load import load_spec
from constructions import krohn_rhodes as kr
from constructions import krohn_rhodes_layout as layout
from constructions import registry
from constructions.assemble import assemble
from constructions.budget import STEP_TOLERANCE
from constructions.gadgets import ABSORB, absorb_feature
from constructions.construction import BuildOptions
from verify.check import verify
from verify.layerwise import invariants

PARAMS_BEFORE_BLOCKS = {("quaternion", 100): 14564, ("quaternion", 1024): 72396, ("cyclic:2", 100): 2291,
                        ("cyclic:2", 1024): 17843, ("dihedral:4", 1024): 66764, ("symmetric:4", 100): 23801}
"""Parameters of krohn-rhodes models before the split, where float32 needs one block."""


def _cascade(name):
    a = load_spec(name)
    return a, decompose(a)


def _model(a, cascade, T):
    program, meta = kr.build(a, cascade, BuildOptions(T))
    return assemble(program, max_len=T, dtype=torch.float32, meta=meta), meta


@pytest.mark.parametrize("name,T", sorted(PARAMS_BEFORE_BLOCKS))
def test_one_block_is_the_unsplit_head(name, T):
    a, cascade = _cascade(name)
    model, meta = _model(a, cascade, T)
    assert layout.counter_blocks(cascade, T).count == 1
    assert sum(p.numel() for p in model.parameters()) == PARAMS_BEFORE_BLOCKS[name, T]
    assert meta["krohn_rhodes"]["prefix_blocks"] == {"count": 1, "length": T, "mass": 2 * T, "beta": 0.0}
    assert "pos:block" not in model.meta["subspaces"] and "prefix_leak_margin" not in meta["krohn_rhodes"]["precision"]
    col = model.subspace(ABSORB)
    assert len(col) == 1 and torch.equal(model.W_pos[:, col[0]], torch.from_numpy(absorb_feature(2 * T, T)).float())
    counters = [h for layer in meta["layers"] for h in layer["heads"] if h["kind"] == "prefix-mean"]
    assert counters and all("block" not in h and h["mass"] == 2 * T for h in counters)


def test_without_a_split_within_tolerance_the_least_error_split_is_taken_and_warned():
    """A mod-8 counter at max_len 4096: no split keeps the sum within tolerance, so the blocks
    are the split with the least bound (not the unsplit head, 20x worse), and the model warns."""
    a, cascade = _cascade("cyclic:8")
    T = 4096
    blocks = layout.counter_blocks(cascade, T)
    bound = sum(layout.prefix_sum_bounds(8, T, blocks, 2.0**-23))
    one = sum(layout.prefix_sum_bounds(8, T, layout.CounterBlocks(1, T, 0.0), 2.0**-23))
    assert blocks.count > 1 and layout.PREFIX_TOLERANCE < bound < one / 20
    for count in range(2, math.isqrt(T // 2) + 2):
        L = -(-T // count)
        other = layout.CounterBlocks(-(-T // L), L, blocks.beta)
        assert sum(layout.prefix_sum_bounds(8, T, other, 2.0**-23)) >= bound
    _, meta = kr.build(a, cascade, BuildOptions(T))
    assert meta["warnings"] and "prefix sums" in meta["warnings"][0]


@pytest.mark.parametrize("name,n,T", [(q, 2, T) for q in ("quaternion", "cyclic:2") for T in (1024, 4096)]
                         + [("cyclic:5", 5, 1024), ("cyclic:5", 5, 2048)])
def test_blocks_are_the_fewest_that_certify_float32(name, n, T):
    a, cascade = _cascade(name)
    blocks = layout.counter_blocks(cascade, T)
    _, meta = kr.build(a, cascade, BuildOptions(T))
    prec = meta["krohn_rhodes"]["precision"]
    rounding, leak = layout.prefix_sum_bounds(n, T, blocks, 2.0**-23)
    assert rounding + leak <= layout.PREFIX_TOLERANCE < STEP_TOLERANCE
    assert prec["prefix_sum_margin"] >= 1 and not meta["warnings"]
    assert blocks.count * blocks.length >= T > (blocks.count - 1) * blocks.length  # no empty block
    if blocks.count > 1:
        assert math.exp(-blocks.beta) == pytest.approx(2.0**-23 / 3)
        assert leak == pytest.approx(2.0**-23 * blocks.count * (n - 1) * T)
        fewer = layout.CounterBlocks(blocks.count - 1, -(-T // (blocks.count - 1)), blocks.beta)
        assert sum(layout.prefix_sum_bounds(n, T, fewer, 2.0**-23)) > layout.PREFIX_TOLERANCE
    assert kr.estimate(cascade, T).params == kr.count_params(
        *_layout_blocks(a, cascade, T), n_symbols=a.n_symbols, n_out=a.n_states, max_len=T)


def _layout_blocks(a, cascade, T):
    program, _ = kr.build(a, cascade, BuildOptions(T))
    return program.workspace, program.blocks


def test_quaternion_at_4096_is_certified_and_smaller_than_its_scan():
    a, cascade = _cascade("quaternion")
    _, meta = kr.build(a, cascade, BuildOptions(4096))
    blocks = meta["krohn_rhodes"]["prefix_blocks"]
    assert blocks["count"] == 11 and blocks["length"] == 373 and blocks["mass"] == 746
    assert meta["krohn_rhodes"]["precision"]["margin"] >= 1 and not meta["warnings"]
    heads = [h for h in meta["layers"][0]["heads"] if h["kind"] == "prefix-mean"]
    assert [h["block_keys"] for h in heads] == [[1 + 373 * h, min(4096, 373 * (h + 1))] for h in range(11)]
    scan = registry.get("scan")
    scan_params = scan.estimate(scan.applies(a), 4096, "sinusoidal").params
    assert kr.estimate(cascade, 4096).params == 344_679 < scan_params == 413_612


def _forced(monkeypatch, count):
    real = layout.counter_blocks

    def blocks(cascade, max_len):
        if count == 1:
            return real(cascade, max_len)
        L = -(-max_len // count)
        return layout.CounterBlocks(-(-max_len // L), L, math.log(3 / layout.CERTIFIED_EPS))
    monkeypatch.setattr(layout, "counter_blocks", blocks)


@pytest.mark.parametrize("name", ["quaternion", "cyclic:5", "symmetric:4"])
def test_forced_blocks_are_exact_and_estimated_exactly(monkeypatch, name):
    _forced(monkeypatch, 4)
    model = compiler.compile_automaton(name, max_len=48, method="krohn-rhodes", allow_inexact=False)
    assert model.meta["krohn_rhodes"]["prefix_blocks"]["count"] == 4  # compile checks estimate == built
    r = verify(model, samples=8, exhaustive_budget=512)
    assert r.exact, (r.counterexample, r.invariant_failures)
    blocks = [h for h in r.margins["heads"] if "allowed_outside_weight" in h]  # each block head's leak, measured
    assert r.invariants.failures == [] and len(blocks) == 4 * model.info()["n_layers"]
    assert all(h["worst_outside_weight"] <= h["allowed_outside_weight"] for h in blocks)
    other = compiler.with_start(model, model.automaton.states[-1])  # set_start rebuilds with the same blocks
    toks = torch.randint(0, model.automaton.n_symbols, (4, 48))
    a = other.automaton
    assert other.predict(toks).tolist() == [a.run(t, start=a.state_index[a.states[-1]]) for t in toks.tolist()]


def test_each_block_head_weighs_only_its_block(monkeypatch):
    _forced(monkeypatch, 3)
    model = compiler.compile_automaton("cyclic:2", max_len=30, method="krohn-rhodes")
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.zeros((1, 30), dtype=torch.long))
    pattern = cache["blocks.0.attn.hook_pattern"][0].double()
    for h, notes in enumerate(model.meta["layers"][0]["heads"]):
        first, last = notes["block_keys"]
        assert (first, last) == (1 + 10 * h, 10 * (h + 1))
        inside = pattern[h, :, first : last + 1]
        t = torch.arange(31)[:, None]
        keys = torch.arange(first, last + 1)[None, :]
        want = torch.where(keys <= t, 1.0 / notes["mass"], 0.0).double()
        assert torch.allclose(inside, want, rtol=1e-6, atol=0)  # 1/(2L) per in-block key up to t
        outside = pattern[h, :, 1:].sum(-1) - inside.sum(-1)
        assert float(outside.max()) <= notes["leak_bound"] * (1 + 1e-5)


def test_a_leaking_block_head_is_named(monkeypatch):
    _forced(monkeypatch, 3)
    model = compiler.compile_automaton("cyclic:2", max_len=30, method="krohn-rhodes")
    with torch.no_grad():
        model.blocks[0].attn.W_Q[1].mul_(0.5)  # head 1: out-of-block keys lose beta / 2 only
    names = [h["name"] for h in model.layout()["blocks"][0]["heads"]]
    inv = invariants(model, np.zeros((2, 30), dtype=np.int64))  # the generic check of the declared program
    leaks = [f for f in inv.failures if "outside its block" in f]
    assert len(leaks) == 1 and f"head {names[1]} " in leaks[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quaternion", "cyclic:2"])
def test_exact_at_4096_on_random_full_length_inputs(name):
    model = compiler.compile_automaton(name, max_len=4096, method="krohn-rhodes", allow_inexact=False)
    assert model.meta["krohn_rhodes"]["prefix_blocks"]["count"] > 1
    r = verify(model, samples=200, exhaustive_budget=256)
    assert r.exact and r.n_sequences >= 200, r.counterexample
    assert r.invariants.failures == []
