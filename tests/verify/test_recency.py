"""Certificates of recency codes (verify/certify/recency.py): Theorem 12's nearest-value heads
(:class:`Match`) and its boundary count (:class:`Races`), proved for every input.

Soundness first: a gridworld model made wrong on some inputs -- one key position that scores
like an old one, a boundary unit wrong only when the two last visits are S + 1 apart (the
closest they can be), the start rule shifted at one level -- is refused with the head or the
race (and the cell, and the level) named, and the exhaustive check confirms the model is wrong.
Then the certified models, the partial (walls illegal) world, and the slow random sweep."""

from __future__ import annotations

import contextlib
import dataclasses
import json

import pytest
import torch

from compiler.automata.load import load_spec
from compiler.pipeline import compile_automaton
from verify.certify import Certificate, certify
from verify.check import verify
from verify.certify.recency import _pair_vertices


def weights_hold(cert: Certificate) -> bool:
    """The weights are proved to run the declared program: a gridworld's program itself is not
    proved against the automaton yet (its races compare positions), so its certificate says
    "weights proved" and not "certified exact"."""
    return cert.certified is True or cert.weights_proved is True


def _compile(spec, max_len: int):
    return compile_automaton(load_spec(spec), max_len=max_len, method="gridworld")


def _wrong_somewhere(model) -> int:
    """Errors of the exhaustive check over every input up to max_len (two letters)."""
    budget = model.automaton.n_symbols ** (model.max_len + 1)
    result = verify(model, samples=0, seed=0, exhaustive_budget=budget, family_limit=1)
    assert result.checked["exhaustive_length"] == model.max_len
    return result.n_errors


@pytest.fixture(scope="module")
def grid4():
    return _compile("grid:4", 10)


@pytest.mark.parametrize("spec, max_len", [("grid:4", 100), ("grid:9", 64), ("grid2d:3,4", 48),
                                           ("grid:2", 32)])
def test_gridworld_models_are_certified(spec, max_len):
    cert = certify(_compile(spec, max_len))
    assert weights_hold(cert), cert.reason
    heads = cert.layers[1]["heads"]
    assert heads and all(h["min_score_gap"] > 0 and h["max_leaked_mass"] < 1e-6 for h in heads)
    assert all(h["copy_error"]["floor"] < 1e-3 for h in heads)
    assert cert.layers[1]["mlp"]["kind"] == "races" and cert.layers[1]["mlp"]["max_error"] < 0.5
    assert cert.readout["min_margin"] > 0.5


def test_a_key_that_scores_like_an_old_position_is_refused_naming_the_head(grid4):
    """Position 9's index (its recency and the value the heads copy) set to 1: a visit there
    loses to any earlier visit since 1, so the last visit is misread."""
    pos = grid4.subspace("pos:index")
    with torch.no_grad():
        grid4.W_pos[9, pos] = 1.0
    try:
        cert = certify(grid4)
        assert cert.certified is False and cert.supported is True
        assert cert.failure["where"].startswith("layer 2 head gw0.find")
        assert "when 9 is the most recent match" in cert.failure["detail"]
        assert _wrong_somewhere(grid4) > 0
    finally:
        with torch.no_grad():
            grid4.W_pos[9, pos] = 9.0
    assert weights_hold(certify(grid4))


@contextlib.contextmanager
def race_unit_shifted(model, unit: int, S: int):
    """Layer 2 MLP's hidden ``unit`` moved by S + 1 steps of slope 4 (a race's step wrong exactly
    when the two last visits are S + 1 apart), restored afterwards."""
    b = model.blocks[1].mlp.b_in
    with torch.no_grad():
        b[unit] -= 4.0 * (S + 1)
    try:
        yield
    finally:
        with torch.no_grad():
            b[unit] += 4.0 * (S + 1)


def test_a_boundary_unit_wrong_for_the_closest_last_visits_is_refused_naming_the_race(grid4):
    """u_2 = relu(s(r1 - r2) - 1 - s(S + 1)): wrong exactly when r(z - 2) = r(z + 2) + S + 1."""
    with race_unit_shifted(grid4, 1, S=3):
        cert = certify(grid4)
        assert cert.failure["where"] == "layer 2 MLP gw.boundary"
        assert "race gw0:rec[1] vs gw0:rec[4]" in cert.failure["detail"] and "on gt" in cert.failure["detail"]
        assert _wrong_somewhere(grid4) > 0


def _walls(spec: str, max_len: int):
    """``spec`` labelled "wall" at its two ends: a label lookup fused after the races."""
    a = load_spec(spec)
    ends = (a.states[0], a.states[-1])
    return compile_automaton(dataclasses.replace(a, outputs=tuple("wall" if s in ends else "inside" for s in a.states)),
                             max_len=max_len, method="gridworld", readout="labels")


def test_a_label_lookup_fused_after_the_races_is_certified_and_a_wrong_boundary_refused():
    """grid:4 "at a wall": the lookup reads the count inside the boundary MLP.  The boundary unit
    broken as above (wrong only for the closest last visits) is refused naming the fused MLP, and
    so is a lookup output scaled down."""
    model = _walls("grid:4", 10)
    assert model.meta["readout"]["notes"]["placed"] == "after the last MLP"
    cert = certify(model)
    assert weights_hold(cert), cert.reason
    assert cert.layers[-1]["mlp"]["kind"] == "races, then steps"
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.blocks[1].mlp.b_in[1] -= 4.0 * (3 + 1)
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "layer 2 MLP gw.boundary+labels.lookup"
    assert _wrong_somewhere(model) > 0
    model.load_state_dict(state)
    notes = model.meta["readout"]["notes"]
    index = [sub["dims"][sub["labels"].index(notes["label_dim"])] for sub in model.layout()["subspaces"].values()
             if notes["label_dim"] in sub["labels"]][0]
    with torch.no_grad():
        model.blocks[1].mlp.W_out[:, index] *= 0.4
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "layer 2 MLP gw.boundary+labels.lookup"
    assert _wrong_somewhere(model) > 0


def test_a_start_rule_shifted_at_one_level_is_refused_naming_the_level(grid4):
    """v_3's threshold moved by one: wrong only when neither level was visited and z + q0 = 3."""
    b = grid4.blocks[1].mlp.b_in
    with torch.no_grad():
        b[5] += 4.0
    try:
        cert = certify(grid4)
        assert cert.failure["where"] == "layer 2 MLP gw.boundary"
        assert "both 0 at gw0:z, gw0:start = [3, 0]" in cert.failure["detail"]
        assert _wrong_somewhere(grid4) > 0
    finally:
        with torch.no_grad():
            b[5] -= 4.0


def test_a_block_whose_weight_is_off_at_the_last_position_is_refused(gridworld_blocks):
    """Layer 1 over three position blocks (as above T = 1294, forced at T = 12): block 1's absorb
    feature at position 12 set so that its keys weigh 1.1/8 there, not 1/8.  z_12 is then off by
    0.1 times block 1's sum of moves: wrong where that sum is large, at the last position only."""
    import math
    gridworld_blocks(3)
    model = _compile("grid:4", 12)
    assert [h["block_keys"] for h in model.meta["layers"][0]["heads"]] == [[1, 4], [5, 8], [9, 12]]
    assert weights_hold(certify(model))
    col = model.subspace("pos:absorb")[1]
    with torch.no_grad():
        model.W_pos[12, col] = math.log(8 / 1.1 - 4)  # BOS's weight e^a / (e^a + 4) leaves 1.1/8 per key
    cert = certify(model)
    assert cert.certified is False and cert.supported is True
    assert cert.failure["where"] == "layer 1 MLP gw.residue" and "gw0:z" in cert.failure["detail"]
    assert _wrong_somewhere(model) > 0


def test_a_block_head_that_copies_more_than_its_moves_is_refused_naming_it(gridworld_blocks):
    gridworld_blocks(3)
    model = _compile("grid:4", 12)
    with torch.no_grad():
        model.blocks[0].attn.W_V[1] *= 1.1
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "layer 1 head gw.prefix.1"
    assert _wrong_somewhere(model) > 0


@pytest.mark.slow
def test_grid9_at_4096_is_certified_and_refused_with_one_block_head_broken():
    """The long-input build for real (11 blocks, beta charged with float32's score rounding)."""
    model = _compile("grid:9", 4096)
    assert model.meta["gridworld"]["prefix_blocks"]["count"] == 11
    cert = certify(model)
    assert weights_hold(cert), cert.reason
    assert [h["name"] for h in cert.layers[0]["heads"]] == [f"gw.prefix.{h}" for h in range(11)]
    with torch.no_grad():
        model.blocks[0].attn.W_Q[5].mul_(0.5)  # head 5: keys outside its block lose beta / 2 only
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "layer 1 MLP gw.residue"


def test_a_partial_world_with_walls_illegal_is_certified_as_a_gridworld():
    spec = load_spec("grid2d:3,3").to_dict()
    spec["transitions"] = {q: {a: r for a, r in row.items() if r != q} for q, row in spec["transitions"].items()}
    model = compile_automaton(load_spec(json.loads(json.dumps(spec)), promise="legal"), max_len=64)
    assert model.meta["method"] == "gridworld"
    assert weights_hold(certify(model))


def test_a_product_with_a_gridworld_factor_is_certified():
    """A 3-cycle beside a 4-cell line: the line's residue lookup is one part of the product's first MLP,
    its boundary count the second MLP."""
    gens, moves, S = {"c": [1, 2, 0], "i": [0, 1, 2]}, {"L": -1, "R": 1}, 3
    trans = {f"{i}.{p}": {f"{n}{x}": f"{gens[n][i]}.{min(S, max(0, p + moves[x]))}" for n in gens for x in moves}
             for i in range(3) for p in range(S + 1)}
    spec = {"name": "c3xgrid4", "states": list(trans), "alphabet": [f"{n}{x}" for n in gens for x in moves],
            "start": "0.0", "transitions": trans}
    model = compile_automaton(load_spec(spec), max_len=32, method="product")
    assert [f["method"] for f in model.meta["product"]["factors"]] == ["krohn-rhodes", "gridworld"]
    cert = certify(model)
    assert weights_hold(cert), cert.reason
    kinds = [mlp["kind"] for layer in cert.layers for mlp in [layer["mlp"], *layer["mlp"].get("parts", [])]]
    assert "races" in kinds and "beside" in kinds


def test_order_cells_have_the_vertices_of_their_polygons():
    assert sorted(map(tuple, _pair_vertices(0, 5, 0, 5, "gt").tolist())) == [(1, 0), (5, 0), (5, 4)]
    assert sorted(map(tuple, _pair_vertices(0, 5, 0, 5, "lt").tolist())) == [(0, 1), (0, 5), (4, 5)]
    assert _pair_vertices(0, 5, 0, 5, "eq").tolist() == [[1, 1], [5, 5]]
    assert len(_pair_vertices(0, 0, 0, 0, "gt")) == 0 and len(_pair_vertices(0, 0, 0, 0, "eq")) == 0
    assert sorted(map(tuple, _pair_vertices(3, 4, 0, 9, "gt").tolist())) == [(3, 0), (3, 2), (4, 0), (4, 3)]


SWEEP = [("grid:3", 8, 1), ("grid:4", 7, 1), ("grid2d:2,2", 4, 1), ("grid:3", 9, 3)]


@pytest.mark.slow
@pytest.mark.parametrize("spec, max_len, blocks", SWEEP)
def test_random_perturbations_certified_only_when_exact_on_every_input(spec, max_len, blocks, perturbation_sweep,
                                                                      gridworld_blocks):
    """Soundness sweep: random perturbations of one weight tensor (a few entries, relative sizes
    1e-7 .. 1e-1); whenever the certificate passes, the exhaustive check over every input up to
    max_len finds no error.  Both outcomes must occur.  ``blocks`` > 1: layer 1 split into position
    blocks (the build above T = 1294, forced at a length every input of which can be checked)."""
    if blocks > 1:
        gridworld_blocks(blocks)
    outcomes = perturbation_sweep(_compile(spec, max_len), _wrong_somewhere, seed=0)
    assert outcomes["certified"] and outcomes["refused"], outcomes


@pytest.mark.slow
@pytest.mark.parametrize("spec, max_len", [("grid:4", 8), ("grid2d:2,3", 5)])
def test_random_perturbations_of_a_label_lookup_fused_after_the_races(spec, max_len, perturbation_sweep):
    """The sweep above on a wall labelling, perturbing only the last (fused) MLP."""
    model = _walls(spec, max_len)
    assert model.meta["readout"]["notes"]["placed"] == "after the last MLP"
    last = f"blocks.{len(model.blocks) - 1}.mlp."
    outcomes = perturbation_sweep(model, _wrong_somewhere, seed=0,
                                  skip=tuple(k for k in model.state_dict() if not k.startswith(last)))
    assert outcomes["certified"] and outcomes["refused"], outcomes
