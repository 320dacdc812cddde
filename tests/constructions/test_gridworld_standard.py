"""The gridworld in standard blocks (constructions/gridworld_standard.py): two blocks, each MLP
with one hidden layer, certified end to end where its float bound allows; refused with the bound
named where not (the default build, unfolded, is then the standard shape's).

Soundness of the two checker rules the build needs (verify/certify/recency.py): a race whose
step pair is wrong for the closest last visits is refused on its order cell (a cell where the
units' signs are fixed is affine, one where a kink lies inside falls back to intervals), and a
one-hot row that errs on another code's dim -- a false match late in the input -- is refused at
the head through that row's own error bound."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import compiler
from compiler.pipeline import with_start
from constructions import gridworld, gridworld_standard as standard
from tests.constructions.test_gridworld import _flipped
from tests.verify.test_recency import _wrong_somewhere, race_unit_shifted
from verify.certify import certify

FLOAT32 = 2.0**-23


def _standard(spec: str, max_len: int):
    return compiler.compile_automaton(spec, max_len=max_len, method="gridworld", shape="standard")


@pytest.fixture(scope="module")
def grid4():
    return _standard("grid:4", 7)


@pytest.mark.slow
def test_two_standard_blocks_certified_end_to_end():
    """grid:4 at T = 100 (the paper's row): 2 blocks, one hidden layer each, nothing unfolded,
    every code one-hot over the 201 values, and the certificate proves weights and program."""
    model = _standard("grid:4", 100)
    assert len(model.blocks) == 2 and model.meta["shape"]["unfolded"] == []
    assert [len(b["mlp_hidden"]) for b in model.config.to_json()["blocks"]] == [1, 1]
    assert model.meta["gridworld"]["standard"]["codes"] == 201
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    heads = cert.layers[1]["heads"]
    assert all(h["min_score_gap"] > 15 and h["copy_error"]["floor"] < 1e-5 for h in heads)


def test_auto_in_the_standard_shape_picks_two_blocks_and_the_default_shape_is_unchanged():
    model = compiler.compile_automaton("grid:9", max_len=100, shape="standard")
    assert model.meta["method"] == "gridworld" and len(model.blocks) == 2
    default = compiler.compile_automaton("grid:9", max_len=100, method="gridworld")
    assert "standard" not in default.meta["gridworld"] and default.meta["gridworld"]["axes"][0]["modulus"] == 16


def test_exact_on_every_input_from_every_start(grid4):
    """Exhaustively, from each start (only the embedding's start column moves)."""
    assert _wrong_somewhere(grid4) == 0
    for start in grid4.automaton.states[1:]:
        assert _wrong_somewhere(with_start(grid4, start)) == 0


def test_beyond_the_float_bound_the_default_build_is_the_standard_one():
    """At T = 187 the one-hot codes' worst-case rounding leaves under half the recency step: the
    build says which bound failed and the standard shape unfolds the default build (6 blocks)."""
    assert standard.refusal(186, FLOAT32) is None
    why = standard.refusal(187, FLOAT32)
    assert why is not None and "4E <= lambda" in why and "375 dims" in why
    model = _standard("grid:9", 187)
    assert model.meta["gridworld"]["one_hidden_layer_refused"] == why
    assert len(model.blocks) == 6


def test_a_box_world_whose_joint_labels_exceed_the_program_proof_is_refused():
    """Two axes at T = 100: 9 x 201^2 pairs, over the program proof's budget; at T = 12 it fits,
    and the model is certified end to end."""
    assert "program proof" in standard.refusal(100, FLOAT32, n_axes=2, n_states=9)
    model = _standard("grid2d:3,3", 12)
    assert len(model.blocks) == 2 and model.meta["one_hidden_layer"] is True
    cert = certify(model)
    assert cert.certified is True, cert.reason


def test_the_score_error_sums_each_rows_own_dim_errors():
    """E's products of errors run over the dims below the hot one, each with its own row's bound
    (16k + 2 in live units k dims below), not M times the farthest dim's: about a third, so the
    build is taken up to T = 186 (the farthest dim's bound on every dim refused it from 144)."""
    def coarse(T: int) -> float:  # every dim at the farthest dim's bound (and the dot product's rounding)
        e0, far = standard.code_errors(T, FLOAT32)
        M, u = 2 * T + 1, FLOAT32 / 2
        return 2 * e0 + M * far**2 + 4 * (M + 3) * u / (1 - (M + 3) * u)

    dims, far = standard.dim_errors(143, FLOAT32), standard.code_errors(143, FLOAT32)[1]
    assert len(dims) == 2 * 143 and np.all(np.diff(dims) > 0) and dims[-1] <= far
    assert standard.score_error(143, FLOAT32) < coarse(143) / 2
    assert 4 * coarse(144) > 1 / (2 * 145) and 4 * standard.score_error(144, FLOAT32) < 1 / (2 * 145)


def test_constants_leave_the_derived_gap():
    """beta is Lemma 13's for lambda - 2E; BOS sits a quarter from both a match and a miss."""
    c = standard.constants(8, 100, FLOAT32)
    assert c["lambda"] == pytest.approx(1 / 202) and c["sink"] == 0.75
    assert c["beta"] * (c["lambda"] - 2 * c["score_error"]) == pytest.approx(c["score_gap"])
    assert 4 * c["score_error"] <= c["lambda"]


def test_a_step_pair_wrong_for_the_closest_last_visits_is_refused_naming_the_race(grid4):
    """Race k = 2's first unit moved by S + 1 steps: its step reads 0 when r1 - r2 <= S + 1, so
    the race is wrong when the two last visits are close; its order cell has a kink inside, so
    the affine rule does not apply and the intervals refuse it."""
    with race_unit_shifted(grid4, 4, S=3):
        cert = certify(grid4)
        assert cert.certified is False and cert.failure["where"] == "layer 2 MLP gw.boundary"
        assert "on gt" in cert.failure["detail"]
        assert _wrong_somewhere(grid4) > 0
    assert certify(grid4).certified is True


def test_a_code_row_erring_on_another_codes_dim_is_refused_at_the_head(grid4):
    """z = -1's one-hot also writes 0.45 into z = +1's dim (within the lookup's half gap, so MLP 1
    passes): a query looking for +1 while it is unvisited then finds a late visit to -1 scoring
    0.45 + lambda j, above BOS's 3/4 -- a false match.  The head is refused through that row's own
    error bound, and the model is wrong on some input."""
    T = grid4.max_len
    mlp = grid4.blocks[0].mlp
    code = list(grid4.subspace("gw0:code"))
    col_v, col_w = code[-1 + T], code[1 + T]
    with torch.no_grad():
        old = mlp.W_out[:, col_w].clone()
        mlp.W_out[:, col_w] += 0.45 * mlp.W_out[:, col_v]
    try:
        cert = certify(grid4)
        assert cert.certified is False and cert.failure["where"].startswith("layer 2 head gw0.find")
        assert _wrong_somewhere(grid4) > 0
    finally:
        with torch.no_grad():
            mlp.W_out[:, col_w] = old
    assert certify(grid4).certified is True


def test_the_declared_program_is_certified_and_a_wrong_plan_is_refused(monkeypatch, declared_then_refused):
    """One declaration in the standard build too: a letter's move reversed in weights and
    declaration alike is refused by the program proof (the one-hot's codes as a cycle, walk.py)."""
    good = gridworld.detect

    def flipped(automaton):
        world, reason = good(automaton)
        return _flipped(world), reason

    def corrupt():
        monkeypatch.setattr(gridworld, "detect", flipped)
        return _standard("grid:4", 12)
    assert declared_then_refused(_standard("grid:4", 12), gridworld.build, corrupt)


def test_one_hot_mlp_is_exact_under_noise():
    """MLP 1 alone, in float64: every z in -T..T, moved by up to a quarter, gives its one-hot."""
    from constructions.workspace import Workspace

    T = 30
    ws = Workspace()
    ws.add("gw0:z"), ws.add("gw0:code", standard.onehot_labels(T))
    mlp = standard.onehot_mlp("gw0.onehot", ws, 0, T)
    z = np.arange(-T, T + 1, dtype=np.float64)
    for noise in (-0.24, 0.0, 0.24):
        assert np.array_equal(mlp((z + noise)[:, None]), np.eye(2 * T + 1))
