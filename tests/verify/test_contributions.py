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
from verify.certify.contributions import batches, by_classes, contributions, direct

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


def test_random_networks_of_shared_noisy_columns_give_the_row_by_row_result():
    """Random two-hidden-layer networks whose first-layer units read two or three noisy inputs
    (codes on the grid 1/8, some 0) through one of two shared columns, none, or (one unit) a third,
    and a one-hot exactly; second-layer units reading a few of them (so batches of one column,
    none, and several): by classes, the clean contribution, magnitude and exactness are the row by
    row ones, and the bound is no tighter than the propagated one allows (>= 0, finite)."""
    rng = np.random.default_rng(1)
    for trial in range(30):
        n, h0, h1, k = int(rng.integers(2, 4)), int(rng.integers(3, 9)), int(rng.integers(2, 7)), 3
        pool = rng.integers(-8, 9, (3, n)) / 4.0
        pick = rng.choice([0, 0, 1, 1, -1], h0)
        pick[0] = 2
        W0 = np.zeros((n + k, h0))
        W0[:n] = np.where(pick >= 0, pool[np.maximum(pick, 0)].T, 0.0)
        W0[n:] = rng.integers(-4, 5, (k, h0)) / 2.0
        W1 = rng.integers(-4, 5, (h0, h1)) / 2.0 * (rng.random((h0, h1)) < 0.3)
        Wg = rng.integers(-4, 5, (h1, 2)) / 4.0
        b = [rng.integers(-16, 17, h0) / 4.0, rng.integers(-4, 5, h1) / 2.0]
        c = np.arange(0, 5) / 8.0
        grids = np.meshgrid(*([c] * n), np.arange(k), indexing="ij")
        X = np.concatenate([np.stack([g.reshape(-1) for g in grids[:n]], 1), np.eye(k)[grids[n].reshape(-1)]], 1)
        r = np.concatenate([np.full(n, 1e-4), np.zeros(k)])
        new = by_classes(X, r, [W0, W1], b, Wg, U, P)
        old = direct(X, r, [W0, W1], b, Wg, U, P)
        assert np.allclose(new[0], old[0], rtol=0, atol=1e-9) and np.allclose(new[2], old[2], rtol=0, atol=1e-9)
        assert np.array_equal(new[3], old[3]), trial
        assert np.all(np.isfinite(new[1]) & (new[1] >= 0)), trial


def test_one_shared_column_of_mixed_signs_gives_the_row_by_row_bounds_too():
    """Every unit reading x_1, x_2, x_3 through w = (1, -1/2, -1/2) (one batch: nothing is split):
    rows with the same w x but other |w| |x| differ in the size their rounding is charged on, so
    the key holds both -- classes (x_1, x_2 + x_3, letter) -- and the classes' bounds are the row
    by row ones, row for row."""
    W0 = np.array([[1.0, 1.0, 1.0, 0.0], [-0.5, -0.5, -0.5, 0.0], [-0.5, -0.5, -0.5, 0.0], [0.0, 1.0, -2.0, 1.0]])
    W1 = np.array([[1.0, 0.0], [-1.0, 1.0], [0.0, 2.0], [1.0, 1.0]])
    b = [np.array([0.25, -1.5, 3.0, 0.5]), np.array([0.5, -0.25])]
    Wg = np.array([[1.0, -0.5], [0.25, 1.0]])
    c = np.arange(0, 17) / 4.0
    x1, x2, x3, a = (g.reshape(-1) for g in np.meshgrid(c, c, c, [0.0, 1.0], indexing="ij"))
    X, r = np.stack([x1, x2, x3, a], 1), np.array([1e-3, 1e-3, 1e-3, 0.0])
    keys = [len(np.unique(key, axis=0)) for _, _, key in batches(X, r, [W0, W1], P)]
    assert keys == [len(np.unique(np.stack([x1, x2 + x3, a], 1), axis=0))] and keys[0] < len(X) / 8
    new, old = by_classes(X, r, [W0, W1], b, Wg, U, P), direct(X, r, [W0, W1], b, Wg, U, P)
    assert np.array_equal(new[0], old[0]) and np.array_equal(new[3], old[3])
    for got, want in (new[1], old[1]), (new[2], old[2]):  # (the radii's float64 sums, to the last bit)
        assert np.allclose(got, want, rtol=1e-12, atol=0)

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
