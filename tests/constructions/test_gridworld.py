"""The gridworld construction (Theorem 12): the closed form, its gadgets, and end to end."""

import dataclasses
import itertools
import math
import random

import numpy as np
import pytest
import torch

import compiler
from compiler.cli import main
from compiler.automata.gridworld_detect import detect
from compiler.automata.load import load_spec
from compiler.automata.spec import from_dict
from constructions import gridworld
from constructions import krohn_rhodes_layout as layout
from constructions.gadgets import residue_range
from constructions.workspace import Workspace
from constructions.construction import BuildOptions
from verify.check import verify
from verify.layerwise import invariants

WORLDS = ["grid:4", "grid:9", "grid:16", "grid:9,noop", "grid2d:3,4", "grid2d:5,5"]


# --- the formula (*) in the module doc, on integers ------------------------------------


def clamped_walk(moves, S, q0):
    q, out = q0, []
    for m in moves:
        q = min(max(q + m, 0), S)
        out.append(q)
    return out


def closed_form(moves, S, q0, M=None):
    """(*) with r(w) = last j >= 1 with z_j = w (mod M if given), else 0."""
    z = list(itertools.accumulate(moves, initial=0))
    key = (lambda v: v % M) if M else (lambda v: v)
    last, out = {}, []
    for t in range(1, len(z)):
        last[key(z[t])] = t
        q = 0
        for k in range(1, S + 1):
            r1, r2 = last.get(key(z[t] - k), 0), last.get(key(z[t] + S + 1 - k), 0)
            q += (r1 > r2) + (r1 == r2 == 0 and z[t] + q0 >= k)
        out.append(q)
    return out


@pytest.mark.parametrize("S", [1, 2, 3, 4])
def test_closed_form_exhaustively(S):
    """Every move sequence up to length 7 from every start, exact values and residues mod S + 2."""
    for q0 in range(S + 1):
        for T in range(1, 8):
            for moves in itertools.product((-1, 0, 1), repeat=T):
                want = clamped_walk(moves, S, q0)
                assert closed_form(moves, S, q0) == want
                assert closed_form(moves, S, q0, M=S + 2) == want


def test_closed_form_random_long_walks():
    rng = random.Random(1)
    for _ in range(300):
        S, T = rng.randint(1, 15), rng.randint(1, 400)
        q0, p = rng.randint(0, S), rng.random()
        moves = [rng.choice((-1, 0, 1)) if rng.random() < 0.3 else (1 if rng.random() < p else -1) for _ in range(T)]
        M = gridworld.residue_modulus(S, T)
        assert closed_form(moves, S, q0, M) == clamped_walk(moves, S, q0)


def test_residues_mod_s_plus_1_are_not_enough():
    bad = [m for m in itertools.product((-1, 1), repeat=8) if closed_form(m, 2, 0, M=3) != clamped_walk(m, 2, 0)]
    assert bad  # so M >= S + 2 is needed, and residue_modulus guarantees it
    for S in range(1, 40):
        for T in (1, 10, 1024, 1 << 20):
            M = gridworld.residue_modulus(S, T)
            assert M >= S + 2 and M >= math.isqrt(T) and M & (M - 1) == 0


# --- gadgets ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind,T,S", [("sinusoidal", 100, 3), ("sinusoidal", 1024, 15), ("circle", 64, 4)])
def test_residue_mlp_is_exact_under_noise(kind, T, S):
    M = gridworld.residue_modulus(S, T)
    plan = gridworld.AxisPlan(0, S, residue_range(-T, T, M), gridworld.value_code(kind, M))
    ws = Workspace()
    ws.add("one"), ws.add("bos"), ws.add("gw0:z"), ws.add("gw0:code", plan.code.labels)
    declared = gridworld._residue_mlp(ws, plan, T, gridworld.stored_codes(plan, float(np.finfo(np.float64).eps)))
    assert declared.hidden_sizes == [plan.n_coarse + 2, plan.n_coarse + 2, 2 * M + 1, M]
    mlp = declared.embed(ws)  # evaluate on residual vectors
    z = np.arange(-T, T + 1)
    for noise in (0.0, 0.2, -0.2):
        x = np.zeros((len(z), ws.d_model))
        x[:, ws.dim("gw0:z")] = z + noise
        out = mlp(x)[:, list(ws["gw0:code"].dims)]
        np.testing.assert_array_equal(out, plan.code.code(np.mod(z, M)))  # bitwise: one nonzero term
        # its declared lookup on (z, bos) is what it computes (up to float64's cos(pi/2), read as 0)
        table = declared.obligation.table
        np.testing.assert_allclose(np.array([table[(int(v), 0)] for v in z]), out, rtol=0, atol=1e-15)
    bos = np.zeros((1, ws.d_model))
    bos[0, ws.dim("bos")] = 1.0
    assert not mlp(bos).any() and not declared.obligation.table[(0, 1)].any()


def test_value_codes_separate_residues():
    for kind in ("sinusoidal", "circle"):
        code = gridworld.value_code(kind, 32)
        table = code.code(np.arange(32))
        scores = table @ table.T
        off = scores[~np.eye(32, dtype=bool)]
        assert np.allclose(np.diag(scores), code.match_score)
        assert off.max() <= code.miss_score + 1e-12
        for d in (-5, 3):
            np.testing.assert_allclose(table @ code.rotation(-d), code.code(np.arange(32) + d), atol=1e-12)


def test_constants_are_derived_and_consistent():
    plan = gridworld.axis_plans(detect(load_spec("grid:9"))[0], 1024, "sinusoidal")[0]
    c = gridworld.constants(plan, 1024)
    assert c["gap"] == 2 and c["lambda"] * 1024 < c["gap"] / 2  # recency never beats a value mismatch
    assert c["score_gap"] == pytest.approx(c["beta"] * c["lambda"])
    assert c["leak_bound"] * 1024 == pytest.approx(c["tol"])  # head output error <= tol
    assert 2 * c["G"] * c["tol"] + c["z_tolerance"] == pytest.approx(0.25)
    assert c["G"] * (1 - c["tol"]) > 1024 + plan.S + 0.5  # a matched head always vetoes the start rule


# --- end to end ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", WORLDS)
def test_worlds_compile_to_two_layers_and_verify(name):
    model = compiler.compile_automaton(name, max_len=64, method="gridworld")
    info = model.info()
    assert info["method"] == "gridworld" and info["n_layers"] == 2
    assert info["mlp_hidden_by_layer"][1] == [2 * sum(n - 1 for n in model.meta["gridworld"]["sizes"])] * 2
    r = verify(model, samples=8, exhaustive_budget=2048)
    assert r.exact, r.counterexample
    assert r.invariants.failures == [] and r.invariants.sequences >= 4
    assert r.margins["readout_min_logit_margin"] == pytest.approx(1.0)
    assert {"wall-pinned", "wall-free"} <= set(r.checked["adversarial_families"])


def test_size_estimate_is_exact_and_budget_is_enforced():
    for name in ("grid:9", "grid2d:3,4"):
        m = compiler.compile_automaton(name, max_len=100)
        a, d = m.automaton, m.config.d_model
        est = gridworld.estimated_params(detect(a)[0], 100)
        assert est + (a.n_symbols + 1) * d + (d + 1) * a.n_states == m.info()["n_params"]
    with pytest.raises(compiler.ShortcutError, match="budget"):
        gridworld.build(load_spec("grid:9"), detect(load_spec("grid:9"))[0], BuildOptions(100, max_params=1000))


def test_auto_picks_gridworld_for_every_world():
    for name in WORLDS:
        assert compiler.compile_automaton(name, max_len=8).meta["method"] == "gridworld"
    assert compiler.compile_automaton("parity", max_len=8).meta["method"] != "gridworld"


def _walks(a, world, T, rng, kind):
    """Token rows: pinned against a wall for most of T, or never reaching a wall."""
    coords, sizes = world.coords, world.sizes
    rows = []
    for _ in range(4):
        q, row = a.start, []
        for t in range(T):
            if kind == "pinned":
                s = 0 if t < T // 3 else (1 if t < 2 * T // 3 else rng.randrange(a.n_symbols))
            else:
                ok = [s for s in range(a.n_symbols)
                      if all(0 < x < n - 1 for x, n in zip(coords[a.maps[s][q]], sizes))]
                s = rng.choice(ok)
            row.append(s)
            q = a.maps[s][q]
        rows.append(row)
    return torch.tensor(rows)


@pytest.mark.parametrize("name", ["grid:9", "grid2d:5,5"])
def test_long_pins_and_wall_free_walks_from_every_start(name):
    T = 300  # pinned for T/3 = 100 steps at each wall; the slow sweep pins for 512
    model = compiler.compile_automaton(name, max_len=T)
    a = model.automaton
    world = detect(a)[0]
    rng = random.Random(0)
    starts = a.states if len(a.states) < 10 else [a.states[i] for i in (0, 1, 7, 12, 18, 24)]
    for q0 in starts:
        other = compiler.with_start(model, q0)
        qi = a.state_index[q0]
        kinds = ["pinned"] + (["free"] if all(0 < x < n - 1 for x, n in zip(world.coords[qi], world.sizes)) else [])
        for kind in kinds:
            toks = _walks(other.automaton, world, T, rng, kind)
            want = [a.run(row, start=qi) for row in toks.tolist()]
            assert other.predict(toks).tolist() == want, (q0, kind)
        if name == "grid:9" and q0 == "4":
            # the wall-free walks really never touch a wall, and the pinned ones push for T/3 steps
            assert all(0 < q < 8 for row in want for q in row)


def test_three_axes_side_by_side():
    sizes = (2, 3, 2)
    cells = list(itertools.product(*(range(n) for n in sizes)))
    letters = {"a+": (0, 1), "b-": (1, -1), "b+": (1, 1), "c+": (2, 1), "c-": (2, -1), "a-": (0, -1), "z": None}
    name = lambda c: "".join(map(str, c))  # noqa: E731

    def move(c, mv):
        c = list(c)
        if mv:
            c[mv[0]] = min(max(c[mv[0]] + mv[1], 0), sizes[mv[0]] - 1)
        return tuple(c)

    spec = {"name": "box-2x3x2", "states": [name(c) for c in cells], "alphabet": list(letters), "start": "011",
            "transitions": {name(c): {s: name(move(c, mv)) for s, mv in letters.items()} for c in cells}}
    model = compiler.compile_automaton(spec, max_len=48, method="gridworld")  # auto: a product of two boxes
    assert model.info()["heads_by_layer"] == [1, 2 + 4 + 2]
    r = verify(model, samples=8, exhaustive_budget=512)
    assert r.exact and r.invariants.failures == []


def test_start_state_is_only_in_the_embedding():
    m = compiler.compile_automaton("grid2d:3,4", max_len=32)
    other = compiler.with_start(m, "2,1")
    diff = [k for k, v in m.state_dict().items() if not torch.equal(v, other.state_dict()[k])]
    assert diff == ["W_E"]
    assert m.automaton.states[m.automaton.start] == "0,0"  # the original is untouched
    spec = load_spec("grid:7").to_dict()
    spec["start"] = "5"
    r = verify(compiler.compile_automaton(spec, max_len=64), samples=8, exhaustive_budget=2048)
    assert r.exact


def test_float64_and_circle_value_code():
    assert verify(compiler.compile_automaton("grid:9,noop", max_len=64, dtype=torch.float64),
                  samples=4, exhaustive_budget=512).exact
    m = compiler.compile_automaton("grid:9,noop", max_len=64, positions="circle")
    assert m.meta["positions"] == "circle" and m.meta["gridworld"]["axes"][0]["gap"] < 0.1
    assert verify(m, samples=4, exhaustive_budget=512).exact


def test_checkpoint_round_trip_and_cli(tmp_path, capsys):
    path = tmp_path / "g.safetensors"
    assert main(["compile", "grid:5,noop", "-o", str(path), "--max-len", "32", "--method", "gridworld"]) == 0
    assert main(["run", str(path), "--input", "R R R N R R L", "--start", "2"]) == 0
    assert capsys.readouterr().out.split()[-7:] == ["3", "4", "4", "4", "4", "4", "3"]
    assert main(["info", str(path), "--json"]) == 0
    info = __import__("json").loads(capsys.readouterr().out)
    assert info["method"] == "gridworld" and info["mlp_hidden_by_layer"][1] == [8, 8]
    assert main(["compile", "parity", "-o", str(path), "--method", "gridworld"]) == 2
    assert "not one up to renaming" in capsys.readouterr().err
    model = compiler.load(path)
    assert model.meta["gridworld"]["sizes"] == [5]


def test_deterministic_build():
    a = compiler.compile_automaton("grid2d:3,4", max_len=40)
    b = compiler.compile_automaton("grid2d:3,4", max_len=40)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_broken_components_are_named():
    model = compiler.compile_automaton("grid:6", max_len=32)
    with torch.no_grad():
        model.blocks[1].mlp.b_out.zero_()  # the boundary count loses its constant S
    r = verify(model, samples=4, exhaustive_budget=256)
    assert not r.exact and any("MLP gw.boundary: gw0:state" in f for f in r.invariants.failures)
    model = compiler.compile_automaton("grid:6", max_len=32)
    with torch.no_grad():
        model.blocks[1].attn.W_Q[0].mul_(0.0)  # head find-5 forgets what to look for
    r = verify(model, samples=4, exhaustive_budget=256)
    assert any("find-5" in f for f in r.invariants.failures)


# --- the acceptance sweep (slow) -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", WORLDS + ["shuffled:9"])
def test_acceptance_at_1024(name):
    if name == "shuffled:9":
        rng = random.Random(7)
        names = [f"cell-{c}" for c in rng.sample("abcdefghi", 9)]
        spec = {"name": "shuffled-line-9", "states": rng.sample(names, 9), "alphabet": ["back", "stay", "fwd"],
                "start": names[4],
                "transitions": {names[i]: {"back": names[max(i - 1, 0)], "stay": names[i], "fwd": names[min(i + 1, 8)]}
                                for i in range(9)}}
        spec = from_dict(spec)
        model = compiler.compile_automaton(spec, max_len=1024)
    else:
        model = compiler.compile_automaton(name, max_len=1024)
    assert model.meta["method"] == "gridworld" and model.info()["n_layers"] == 2
    r = verify(model)
    assert r.exact, r.counterexample
    assert r.invariants.failures == []


# --- long inputs: layer 1's prefix sum over position blocks ----------------------------------


def _bound(T, blocks):
    return sum(layout.prefix_sum_bounds(2, T, blocks, layout.CERTIFIED_EPS))


def test_one_prefix_head_exactly_while_its_float32_bound_fits():
    """The threshold is derived: one head while eps T (T + 1) <= PREFIX_TOLERANCE (T <= 1294),
    blocks after, and the tolerance is below what both readers of z allow."""
    single = [T for T in range(1200, 1400) if gridworld.prefix_blocks(T).count == 1]
    assert single == list(range(1200, max(single) + 1)) and max(single) == 1294
    assert _bound(1294, layout.CounterBlocks(1, 1294, 0.0)) <= layout.PREFIX_TOLERANCE
    assert _bound(1295, layout.CounterBlocks(1, 1295, 0.0)) > layout.PREFIX_TOLERANCE
    plan = gridworld.axis_plans(detect(load_spec("grid:9"))[0], 4096, "sinusoidal")[0]
    assert layout.PREFIX_TOLERANCE < gridworld.constants(plan, 4096)["z_tolerance"] < 0.25


def test_below_the_threshold_the_model_is_the_single_head_one():
    world = detect(load_spec("grid:9"))[0]
    program, meta = gridworld.build(load_spec("grid:9"), world, BuildOptions(1294))
    assert [h.name for h in program.blocks[0].heads] == ["gw.prefix"] and "pos:block" not in program.workspace.subspaces
    assert "prefix_blocks" not in meta["gridworld"] and meta["gridworld"]["absorb"] == 1295
    c = meta["gridworld"]["axes"][0]
    assert c["beta"] * c["lambda"] == pytest.approx(math.log(2 * 1295 * 1294 / c["tol"]))  # Lemma 13, exact arithmetic


def test_at_4096_the_blocks_are_the_fewest_within_tolerance_and_beta_survives_rounding():
    world = detect(load_spec("grid:9"))[0]
    program, meta = gridworld.build(load_spec("grid:9"), world, BuildOptions(4096))
    blocks = gridworld.prefix_blocks(4096)
    assert meta["gridworld"]["prefix_blocks"] == {"count": blocks.count, "length": blocks.length,
                                                  "mass": blocks.mass, "beta": blocks.beta}
    assert blocks.count == 11 and _bound(4096, blocks) <= layout.PREFIX_TOLERANCE
    fewer = layout.CounterBlocks(10, -(-4096 // 10), blocks.beta)
    assert _bound(4096, fewer) > layout.PREFIX_TOLERANCE
    heads = program.blocks[0].heads
    assert [h.notes["block_keys"] for h in heads] == [[1 + 373 * h, min(4096, 373 * (h + 1))] for h in range(11)]
    assert meta["gridworld"]["precision"]["margin"] >= 1 and not meta["warnings"]
    plan = gridworld.axis_plans(world, 4096, "sinusoidal")[0]
    c = gridworld.constants(plan, 4096)
    rho = gridworld.score_rounding(plan, layout.CERTIFIED_EPS)
    assert c["beta"] * (c["lambda"] - 2 * rho) == pytest.approx(c["score_gap"])  # the gap left after rounding
    assert c["score_gap"] == pytest.approx(math.log(2 * 4097 * 4096 / c["tol"]))
    est = gridworld.estimated_params(world, 4096)
    d = meta["gridworld"]["model_sizes"]["d_model"]
    assert d == program.workspace.d_model and est == meta["gridworld"]["model_sizes"]["params_estimate"]


@pytest.mark.parametrize("name", ["grid:4", "grid2d:2,3"])
def test_forced_blocks_are_exact_certified_and_estimated_exactly(gridworld_blocks, name):
    gridworld_blocks(3)
    model = compiler.compile_automaton(name, max_len=24, method="gridworld", allow_inexact=False)
    assert [h["block_keys"] for h in model.meta["layers"][0]["heads"]] == [[1, 8], [9, 16], [17, 24]]
    r = verify(model, samples=8, exhaustive_budget=2048)  # compile checked estimate == built
    assert r.exact, r.counterexample
    assert r.invariants.failures == []
    prefix = [h for h in r.margins["heads"] if str(h["head"]).startswith("gw.prefix")]
    assert [h["keys"] for h in prefix] == [[1, 8], [9, 16], [17, 24]]
    assert all(h["worst_score_spread"] < 1e-4 for h in prefix)  # equal scores on each block's own keys
    from verify.certify import certify
    cert = certify(model)
    assert cert.certified is True or cert.weights_proved is True, cert.reason  # the program: if covered
    other = compiler.with_start(model, model.automaton.states[-1])
    toks = torch.randint(0, model.automaton.n_symbols, (4, 24))
    a = other.automaton
    assert other.predict(toks).tolist() == [a.run(t, start=a.state_index[a.states[-1]]) for t in toks.tolist()]


def test_a_block_head_leaking_outside_its_block_is_named(gridworld_blocks):
    gridworld_blocks(3)
    model = compiler.compile_automaton("grid:4", max_len=24, method="gridworld")
    with torch.no_grad():
        model.blocks[0].attn.W_Q[1].mul_(0.5)  # head 1: out-of-block keys lose beta / 2 only
    inv = invariants(model, np.zeros((2, 24), dtype=np.int64))  # the generic check of the declared program
    leaks = [f for f in inv.failures if "outside its block" in f]
    assert len(leaks) == 1 and "head gw.prefix.1 " in leaks[0]
    assert any(f.startswith("layer 1 attention") and "gw0:z deviates" in f for f in inv.failures)  # the sum it breaks



# --- one declaration: the program the gadgets declare is the one certified ----------------------


def _flipped(world):
    """The world with its first move letter's direction reversed (a wrong detector claim)."""
    s = next(i for i, mv in enumerate(world.moves) if mv is not None)
    moves = list(world.moves)
    moves[s] = (moves[s][0], -moves[s][1])
    return dataclasses.replace(world, moves=tuple(moves))


@pytest.mark.parametrize("corruption", ["move", "modulus"])
def test_the_declared_program_is_certified_and_a_wrong_plan_is_refused(monkeypatch, declared_then_refused,
                                                                       corruption):
    """The obligations certified are the program's own declaration (its gadgets' and its
    :class:`Declaration`), proved against the automaton (grid:4 at 16: residues mod 8, within the
    program proof's recency budget).  Then, in weights and declaration alike, either the detected
    world reverses one letter's move, or the residues are taken mod S + 1 = 4 (where the last
    visits to z - k and z + S + 1 - k alias, the module doc's M >= S + 2 broken): both are refused
    by the program proof, naming an input the model gets wrong."""
    good = gridworld.detect

    def flipped(automaton):
        world, reason = good(automaton)
        return _flipped(world), reason

    def corrupt():
        if corruption == "move":
            monkeypatch.setattr(gridworld, "detect", flipped)
        else:
            monkeypatch.setattr(gridworld, "residue_modulus", lambda S, max_len: S + 1)
        return compiler.compile_automaton("grid:4", max_len=16, method="gridworld")
    word = declared_then_refused(compiler.compile_automaton("grid:4", max_len=16, method="gridworld"),
                                 gridworld.build, corrupt)
    assert word


def test_a_gridworld_factor_declares_inside_a_product():
    """A flip-flop beside a 4-cell line (a locally-testable factor, one layer: the flip-flop is
    definite on its tier of set and reset letters; and a gridworld factor): the line's
    declaration, prefixed into the product's workspace (one recency dim per head, ``f2.gw0:rec[i]``),
    is the product's, certified end to end."""
    from verify.certify import certify

    ff, moves, S = {"s": lambda b: 1, "r": lambda b: 0, "k": lambda b: b}, {"L": -1, "R": 1}, 3
    trans = {f"{b}.{p}": {f"{n}{x}": f"{ff[n](b)}.{min(S, max(0, p + moves[x]))}" for n in ff for x in moves}
             for b in range(2) for p in range(S + 1)}
    spec = {"name": "ffxgrid4", "states": list(trans), "alphabet": [f"{n}{x}" for n in ff for x in moves],
            "start": "0.0", "transitions": trans}
    model = compiler.compile_automaton(load_spec(spec), max_len=16, method="product")
    factors = model.meta["product"]["factors"]
    assert [(f["method"], f["layers"]) for f in factors] == [("locally-testable", 1), ("gridworld", 2)]
    cert = certify(model, with_obligations=True)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    assert "f2.gw0:rec[0]" in cert.obligations["embedding"]
