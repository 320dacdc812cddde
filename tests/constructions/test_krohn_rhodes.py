"""Theorem 11 end to end: cascades compiled to constant-depth Transformers."""

import random

import pytest
import torch

import compiler
from compiler.automata.catalog import paper_suite, random_automaton
from constructions.construction import BuildOptions
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
    assert r.exact, (r.counterexample, r.invariant_failures)
    assert r.invariants.failures == [] and any(n.startswith("kr:") for n in r.invariants.measured["worst_deviation"])


@pytest.mark.slow
@pytest.mark.parametrize("name", SOLVABLE)
@pytest.mark.parametrize("T", [256, 1024])
def test_acceptance_at_256_and_1024(name, T):
    model = compiler.compile_automaton(name, max_len=T, method="krohn-rhodes")
    ref = compiler.compile_automaton(name, max_len=256, method="krohn-rhodes")
    assert model.info()["n_layers"] == ref.info()["n_layers"]
    r = verify(model, samples=32 if T <= 256 else 16)
    assert r.exact, (r.counterexample, r.invariant_failures)


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
    m = compiler.compile_automaton("dyck:4,2", max_len=4)  # 9 cascade layers (and the stack's 3) vs 2 for the scan
    assert m.info()["method"] == "scan" and "krohn-rhodes" in m.info()["why"].lower()
    assert compiler.compile_automaton("dyck:4,2", max_len=100).info()["method"] == "bounded-stack"  # 3 layers vs 7


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
    assert any("h1.b0.count1.0" in f for f in r.invariants.failures)


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
        assert r.exact, (a, r.counterexample, r.invariant_failures)
        assert r.invariants.failures == []


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
    assert r.exact, (r.counterexample, r.invariant_failures)
    compared = r.invariants.measured["worst_deviation"]  # every view subspace against the declared program
    assert all(f"kr:{v['name']}.{when}" in compared for v in views for when in ("old", "new") if v[when])


def test_broken_view_is_named():
    model = compiler.compile_automaton(DEEP, max_len=24, method="krohn-rhodes")
    view = next(v["name"] for v in model.meta["krohn_rhodes"]["views"] if v["old"])
    col = model.meta["residual_labels"].index(f"kr:{view}.old")
    with torch.no_grad():
        for block in model.blocks:  # the lookup writing the view: scale its output
            if block.mlp is not None:
                block.mlp.W_out[:, col] *= 1.5
    r = verify(model, samples=4, exhaustive_budget=128, families=False)
    assert any("MLP" in f and f"kr:{view}.old deviates" in f for f in r.invariants.failures)



# --- the split steps: schedule (no weights), allocate (subspaces), embed (gadgets -> blocks) ---------------


def _cascade(name):
    from compiler.automata.catalog import build as catalog_build

    a = catalog_build(name)
    return a, compiler.decompose(a)


@pytest.mark.parametrize("name", ["parity", "flipflop", "symmetric:4", "grid:4", "dyck:4,2"])
def test_schedule_places_every_component_after_what_it_reads(name):
    from constructions.krohn_rhodes import schedule

    _, cascade = _cascade(name)
    s = schedule(cascade)
    for c in cascade.components:
        bases = s.inputs[c.name].bases
        assert s.block_of[c.name] == 1 + max((s.ready[b] for b in bases), default=0)
        assert s.ready[c.name] == s.block_of[c.name] + bool(s.needs_old.get(c.name))
    assert s.n_blocks == max(list(s.block_of.values()) + list(s.ready.values()))
    assert s.needs_positions == any(s.needs_old.values())


def test_schedule_depth_and_old_values():
    from constructions.krohn_rhodes import schedule

    assert schedule(_cascade("symmetric:4")[1]).n_blocks == DERIVED_LENGTH["symmetric:4"]
    flip = schedule(_cascade("flipflop")[1])
    assert flip.n_blocks == 1 and not flip.needs_positions  # nothing reads the reset's old value
    grid = schedule(_cascade("grid:4")[1])
    assert grid.needs_positions and any(grid.needs_old.values())


def test_allocate_gives_each_role_a_subspace():
    from constructions.gadgets import ABSORB
    from constructions.krohn_rhodes import allocate, schedule

    for name in ("parity", "grid:4", "quaternion"):
        a, cascade = _cascade(name)
        s = schedule(cascade)
        lay = allocate(a, cascade, s, 16)
        ws = lay.ws
        assert ABSORB in ws.subspaces and len(set(ws.labels)) == ws.d_model
        assert ("pos" in ws.subspaces) == s.needs_positions == (lay.code is not None)
        for c in cascade.components:
            roles = set(lay.subs[c.name])
            if c.kind == "counter":
                # the value before the update only where some table reads it (quaternion's first level)
                assert roles == {"new", "inc", "mean"} | ({"old"} if s.read_before_update(c.name) else set())
            else:
                assert roles == {"new", "flag", "target", "fetched"} | ({"old", "prev"} if s.needs_old[c.name]
                                                                        else set())
            assert lay.value(c.name) is lay.subs[c.name].get("old", lay.subs[c.name]["new"])
        assert list(lay.state.labels) == [f"kr:state:{q}" for q in a.states]


def test_embed_builds_one_block_per_scheduled_block():
    from constructions.krohn_rhodes import allocate, embed, schedule

    a, cascade = _cascade("grid:4")
    s = schedule(cascade)
    lay = allocate(a, cascade, s, 16)
    init = dict(zip((c.name for c in cascade.components), cascade.encode(a.start)))
    blocks = embed(cascade, s, lay, init, 16)
    assert len(blocks) == s.n_blocks
    for b, block in enumerate(blocks, start=1):
        resets = [c for c in cascade.components if s.block_of[c.name] == b and c.kind == "reset"]
        fetches = [r for r, on in s.needs_old.items() if on and s.block_of[r] + 1 == b]
        counters = any(s.block_of[c.name] == b and c.kind == "counter" for c in cascade.components)
        assert len(block.heads) == counters + len(resets) + len(fetches)
    assert "kr:state" in blocks[-1].mlp.writes


def test_build_honours_eps():
    from constructions.krohn_rhodes import build

    a, cascade = _cascade("cyclic:8")
    _, f32 = build(a, cascade, BuildOptions(64, 2.0**-23))
    _, coarse = build(a, cascade, BuildOptions(64, 2.0**-12))
    _, f64 = build(a, cascade, BuildOptions(4096, 2.0**-52))
    assert f32["krohn_rhodes"]["precision"]["margin"] > 1 and not f32["warnings"]
    assert coarse["krohn_rhodes"]["precision"]["prefix_sum_margin"] < 1
    assert coarse["warnings"] and "prefix sums" in coarse["warnings"][0]
    assert not f64["warnings"]
    a, cascade = _cascade("flipflop")
    _, coarse = build(a, cascade, BuildOptions(4096, 2.0**-12))
    assert "most-recent-flag" in coarse["warnings"][0]


def test_positions_used_only_by_offset_heads():
    from constructions.krohn_rhodes import build

    a, cascade = _cascade("grid:4")  # needs offset-1 heads
    _, meta = build(a, cascade, BuildOptions(16, positions="sinusoidal"))
    assert meta["positions"] == "sinusoidal"
    with pytest.raises(compiler.ShortcutError, match="sinusoidal"):
        build(a, cascade, BuildOptions(16, positions="circle"))
    with pytest.raises(compiler.ShortcutError, match="unknown positions"):
        build(a, cascade, BuildOptions(16, positions="rope"))
    a, cascade = _cascade("parity")  # no position code at all: the kind does not matter
    _, meta = build(a, cascade, BuildOptions(16, positions="circle"))
    assert meta["positions"] is None
    with pytest.raises(compiler.ShortcutError, match="offset-1"):
        compiler.compile_automaton("grid:4", max_len=16, method="krohn-rhodes", positions="circle")
    m = compiler.compile_automaton("memory:3", max_len=16, method="krohn-rhodes", positions="circle")
    assert m.meta["method"] == "krohn-rhodes" and m.meta["positions"] is None


def test_counter_decode_grows_like_sqrt_T():
    """The residue gadget (coarse steps, then a one-hot over M residues, n | M) keeps a counter's
    decode O(sqrt(n T)) wide: cyclic:2 at T = 4096 within 1,024 units (4(n-1)(T+1) = 16,388 steps
    before), quaternion's cascade smaller than its scan."""
    from constructions.krohn_rhodes import counter_hidden, counter_residue

    for n in (2, 3, 8):
        for T in (1, 100, 4096):
            r = counter_residue(n, T)
            assert r.modulus % n == 0 and r.offset == 0 and r.span >= (n - 1) * (T + 1)
    widths = {T: compiler.compile_automaton("cyclic:2", max_len=T, method="krohn-rhodes").info()["d_mlp"]
              for T in (1024, 4096)}
    assert widths[4096] <= 1024 and widths[4096] < 2.2 * widths[1024]
    assert max(counter_hidden(2, 4096, old=True)) < 2.2 * max(counter_hidden(2, 1024, old=True))
    kr = compiler.compile_automaton("quaternion", max_len=4096, method="krohn-rhodes")
    scan = compiler.compile_automaton("quaternion", max_len=4096, method="scan")
    assert kr.info()["n_params"] < scan.info()["n_params"]
    decodes = [p for layer in kr.meta["layers"] for p in layer["mlp"].get("parallel", [layer["mlp"]])
               if p.get("kind") == "residue-code"]
    assert len(decodes) == 3 and all(p["hidden"] == counter_hidden(2, 4096, p["minus_max"] is not None)
                                     for p in decodes)


def test_the_depth_floor_is_at_most_the_estimate():
    """``Construction.floor`` (the tables' dependency chain) never exceeds the layers the estimate counts
    (the planner skips an estimate on it), on the paper's solvable automata and random ones."""
    from compiler.automata.load import load_spec
    from constructions import registry
    from constructions.construction import Refusal

    kr = registry.get("krohn-rhodes")
    autos = [load_spec(n) for n in SOLVABLE] + [random_automaton(random.Random(i), 5, 3) for i in range(12)]
    tight = 0
    for a in autos:
        plan = kr.applies(a)
        if isinstance(plan, Refusal):
            continue
        layers = kr.estimate(plan, 32, "sinusoidal").layers
        assert 1 <= kr.floor(plan) <= layers, a.name
        tight += kr.floor(plan) == layers
    assert tight > 0
