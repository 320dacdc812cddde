"""A group's contribution to the next layer evaluated once per class of rows its units cannot tell
apart (verify/certify/contributions.py): on a staircase reading two prefix sums and a ramp of their
sum (a Walsh table's), the same as row by row -- intact, and broken at one rare sum, where only the
pairs with that sum change -- in O(T) classes per batch; where a key could round (inputs off a
dyadic grid) the classes are the inputs' own values.  And through the checker: Q8 at T = 80,
whose first MLP is checked part by part, refused when that sum ramp misses one sum."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build
from constructions.gadgets import OneHotInput, Ramp, Stair, staircase_mlp
from constructions.gadgets.staircase import RAMP_SLOPE
from constructions.workspace import Workspace
from verify.certify import contributions as contributions_module
from verify.certify import lookups
from verify.certify.certificate import certify
from verify.certify.contributions import batches, contributions, direct

T = 24
MASS = 32.0
U, P = 2.0**-24, 24


def _walsh(mass: float = MASS):
    """Two counters' prefix means m_1, m_2 (X_i = mass m_i in 0..T), a letter one-hot; stairs:
    X_1 + a mod 2, X_2 mod 2, and (-1)^(X_1 + X_2 + a) / 4 off a ramp of X_1 + X_2 (0..2T)."""
    ws = Workspace()
    m1, m2, tok, out = ws.add("m1"), ws.add("m2"), ws.add("tok", ["a", "b"]), ws.add("out", ["p", "q", "w"])
    X, Y = np.arange(T + 1), np.arange(2 * T + 1)
    ramps = [Ramp(m1, mass, 0, T), Ramp(m2, mass, 0, T), Ramp(m1, mass, 0, 2 * T, ((m2, mass),))]
    stairs = [Stair(out, 0, (0,), {(a,): np.eye(3)[:, 0][None] * ((X + a) % 2)[:, None] for a in (0, 1)}),
              Stair(out, 1, (), {(): np.eye(3)[:, 1][None] * (X % 2)[:, None]}),
              Stair(out, 2, (0,), {(a,): np.eye(3)[:, 2][None] * ((-1.0) ** (Y + a) / 4)[:, None] for a in (0, 1)})]
    return staircase_mlp("walsh", ramps, [OneHotInput(tok)], stairs)


def _rows(mass: float = MASS):
    """Every (m_1, m_2, letter) and the radii: 0.05 / mass on the means (well within the ramps'
    tolerance), 0 on the one-hot."""
    c = np.arange(T + 1) / mass
    x1, x2, a = (g.reshape(-1) for g in np.meshgrid(c, c, [0, 1], indexing="ij"))
    X = np.concatenate([x1[:, None], x2[:, None], np.eye(2)[a]], axis=1)
    return X, np.array([0.05 / mass, 0.05 / mass, 0.0, 0.0])


def _both(mlp, X, r, monkeypatch):
    """The contribution by classes, row by row, and the rows the classes evaluated."""
    Ws, bs = mlp.weights, mlp.biases
    evaluated: list[int] = []
    monkeypatch.setattr(contributions_module, "direct", lambda X_, *a: evaluated.append(len(X_)) or direct(X_, *a))
    new = contributions(X, r, Ws[:2], bs[:2], Ws[2], U, P)
    monkeypatch.undo()
    return new, direct(X, r, Ws[:2], bs[:2], Ws[2], U, P), evaluated


def _same(new, old):
    centre, err, mag, exact = new
    assert np.allclose(centre, old[0], rtol=0, atol=1e-12) and np.allclose(mag, old[2], rtol=1e-12, atol=1e-12)
    assert np.array_equal(exact, old[3])
    assert np.all(err <= old[1] + 1e-15)


def test_classes_of_a_sum_ramp_give_the_row_by_row_contribution_in_O_T_evaluations(monkeypatch):
    mlp, (X, r) = _walsh(), _rows()
    new, old, evaluated = _both(mlp, X, r, monkeypatch)
    _same(new, old)
    assert len(evaluated) == 4 and sum(evaluated) < len(X) / 4  # 4 batches, O(T) classes each
    assert new[3].all() and np.all(new[1] == 0)  # the staircase's units are exact 0s and 1s
    keys = {len(reads): len(np.unique(key, axis=0)) for reads, _, key in batches(X, r, mlp.weights[:2], P)}
    assert keys[4] <= 2 * (2 * T + 1) < len(X)  # the sum ramp's batch: (x_1 + x_2, letter), not the pairs


def test_a_sum_ramp_missing_one_sum_changes_exactly_those_pairs_and_the_classes_see_it(monkeypatch):
    """The sum ramp's unit j lowered by 3/4 of a step stays off at X_1 + X_2 = j: the classes'
    contribution is still the row-by-row one, and differs from the intact network's on exactly
    the pairs with that sum (T - |j - T| + 1 of (T + 1)^2)."""
    mlp, (X, r) = _walsh(), _rows()
    intact = contributions(X, r, mlp.weights[:2], mlp.biases[:2], mlp.weights[2], U, P)
    j = 2 * T - 3
    b0 = mlp.biases[0].copy()
    b0[2 * T + j - 1] -= RAMP_SLOPE * 0.75
    mlp.biases[0] = b0
    new, old, evaluated = _both(mlp, X, r, monkeypatch)
    _same(new, old)
    assert sum(evaluated) < len(X) / 4
    changed = np.any(new[0] != intact[0], axis=1)
    sums = np.round(MASS * (X[:, 0] + X[:, 1]))
    assert np.array_equal(changed, sums == j) and 0 < changed.sum() < len(X) / 50


def test_inputs_off_a_dyadic_grid_are_classed_by_their_own_values(monkeypatch):
    """Means of X / 24 (not dyadic): x_1 + x_2 may round, so the sum ramp's rows are not merged by
    it -- each pair its own class -- and the result is still the row-by-row one."""
    mlp, (X, r) = _walsh(24.0), _rows(24.0)
    new, old, _ = _both(mlp, X, r, monkeypatch)
    _same(new, old)
    keys = {len(reads): len(np.unique(key, axis=0)) for reads, _, key in batches(X, r, mlp.weights[:2], P)}
    assert keys[4] == len(X)


@pytest.mark.slow
def test_q8_whose_sum_ramp_misses_one_sum_is_refused_part_by_part(monkeypatch):
    """Q8 at T = 80 (the model its standard shape unfolds): block 1's MLP reads two mod-2
    counters' prefix sums and a ramp of their sum, 81^2 x 4 letters rows, over the direct check's
    limit: checked part by part (stage A).  Certified; its sum ramp's unit j lowered by 3/4 of a
    step (wrong only where X_1 + X_2 = j): refused there."""
    T_ = 80
    model = compiler.compile_automaton(build("quaternion"), max_len=T_, method="krohn-rhodes", one_hidden_layer=True)
    seen = []
    stage_a = lookups._stage_a
    monkeypatch.setattr(lookups, "_stage_a", lambda *a, **k: seen.append(a[-2]) or stage_a(*a, **k))
    assert certify(model).certified is True
    assert any("block1.mlp" in w for w in seen)
    block = model.blocks[0]
    highs = model.meta["layers"][0]["mlp"]["thresholds"]
    assert highs[-1] == 2 * (T_ + 1)
    j = 2 * (T_ + 1) - 3
    with torch.no_grad():
        block.mlp.b_in[sum(highs[:-1]) + j - 1] -= RAMP_SLOPE * 0.75
    cert = certify(model)
    assert cert.certified is False and "block1.mlp" in cert.failure["where"], cert.failure
