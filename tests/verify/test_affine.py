"""The weight checker's error forms (verify/certify/affine.py): the compact coefficients (each
input reaching one unit) are the dense ones; a step unit rounds once relative to
its result, a value within its float's spacing is that float, noise on a zero code is rounded off
by a nonzero exact part -- and each bound still covers what float32 computes where the rule does
not apply."""

import numpy as np
import pytest

from verify.certify.affine import Coefficients, affine, affine_rows, on_grid, possibly_on, row_floats

P = 24
U = 2.0**-P + 2.0**-52  # as verify.certify.state.arrays: float32's unit roundoff and the checker's own


def _held(x: np.ndarray, r: np.ndarray, noisy: np.ndarray) -> np.ndarray:
    """``noisy`` as float32 holds it, where that float is within ``r`` of the clean ``x``
    (what the checker assumes of its inputs), else the clean code (also a float32)."""
    x32 = noisy.astype(np.float32).astype(np.float64)
    return np.where(np.abs(x32 - x) <= r, x32, x)


def _float32(x: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray]) -> np.ndarray:
    """The network in float32 (numpy's BLAS: its own order, FMA or not)."""
    h = x.astype(np.float32)
    for i, (W, b) in enumerate(zip(weights, biases)):
        h = h @ W.astype(np.float32) + b.astype(np.float32)
        if i < len(weights) - 1:
            h = np.maximum(h, np.float32(0))
    return h.astype(np.float64)


def test_a_step_unit_rounds_once_relative_to_its_result():
    """4 x - 4 c + 2 at x = c = 22: one rounding of about 2, not of 4 x + |b| = 174."""
    x, r = np.array([[22.0]]), np.array([1e-6])
    W, b = [np.array([[4.0, 4.0]])], [np.array([-86.0, -87.0])]
    z, err = affine(x, r, W, b, U, P)
    assert z.tolist() == [[2.0, 1.0]]
    assert np.all(err < 4e-6 + 1e-6)  # the carried 4 r and a rounding of u (|z| + 4 r); was ~4.2e-5
    r = np.array([1e-5])  # a few floats around 22 (spacing 1.9e-6)
    z, err = affine(x, r, W, b, U, P)
    for noise in np.linspace(-1e-5, 1e-5, 41):
        assert np.all(np.abs(_float32(_held(x, r, x + noise), W, b) - z) <= err)


def test_the_one_rounding_is_charged_where_the_sum_leaves_the_products_binade():
    """4 x + 100 at x = 0.75 held within 1.2e-6: 4 x's low bits fall off at 103 (spacing 7.6e-6),
    so float32 can land a whole spacing from the clean 103 -- more than the carried 4 r -- and
    the one rounding u |z| covers it."""
    x, r = np.array([[0.75]]), np.array([1.2e-6])
    W, b = [np.array([[4.0]])], [np.array([100.0])]
    z, err = affine(x, r, W, b, U, P)
    worst = 0.0
    for noise in np.linspace(-1.2e-6, 1.2e-6, 201):
        worst = max(worst, float(np.abs(_float32(_held(x, r, x + noise), W, b) - z).max()))
    assert worst > 4 * 1.2e-6  # the rounding matters here
    assert worst <= err[0, 0]


def test_a_value_within_its_floats_spacing_is_that_float():
    """3 held within 1e-8 (< 2^-23, the distance to 3's neighbours) is 3: 0.5 x + 0.25 exact;
    within 2e-7 it may be another float and the bound says so."""
    W, b = [np.array([[0.5]])], [np.array([0.25])]
    z, err = affine(np.array([[3.0]]), np.array([1e-8]), W, b, U, P)
    assert z.tolist() == [[1.75]] and err.tolist() == [[0.0]]
    z, err = affine(np.array([[3.0]]), np.array([2e-7]), W, b, U, P)
    assert err[0, 0] >= 0.5 * 2e-7
    x32 = np.nextafter(np.float32(3.0), np.float32(4.0))  # a float within 2e-7 of 3
    assert abs(_float32(np.array([[x32]], dtype=np.float64), W, b)[0, 0] - z[0, 0]) <= err[0, 0]


@pytest.mark.parametrize("noise", [1e-12, -3e-12])
def test_noise_on_a_zero_code_is_rounded_off_by_a_nonzero_exact_part(noise):
    """40 g + f + 1/2 at g = 0 (noisy), f = 5: the result is 5.5 exactly (a composition's unit)."""
    W, b = [np.array([[40.0], [1.0]])], [np.array([0.5])]
    z, err = affine(np.array([[0.0, 5.0]]), np.array([1e-12, 0.0]), W, b, U, P)
    assert z.tolist() == [[5.5]] and err.tolist() == [[0.0]]
    assert _float32(np.array([[noise, 5.0]]), W, b).tolist() == [[5.5]]


def test_noise_the_exact_part_cannot_absorb_is_bounded():
    """The same unit with noise 1e-7 on g (40 g = 4e-6, past half the spacing at 5.5), and with
    a zero exact part: not exact, and the bound covers float32's result."""
    W, b = [np.array([[40.0], [1.0]])], [np.array([0.5])]
    z, err = affine(np.array([[0.0, 5.0]]), np.array([1e-7, 0.0]), W, b, U, P)
    assert err[0, 0] >= 40 * 1e-7
    assert abs(_float32(np.array([[1e-7, 5.0]]), W, b)[0, 0] - z[0, 0]) <= err[0, 0]
    z, err = affine(np.array([[0.0, 0.0]]), np.array([1e-12, 0.0]), W, [np.array([0.0])], U, P)
    assert z.tolist() == [[0.0]] and err[0, 0] >= 40e-12


def test_random_dyadic_networks_stay_within_their_bounds():
    """Random two-layer networks with weights and biases on the grid 2^-2 and integer codes
    held within radii from 1e-12 to 1e-3 (zero and nonzero codes): float32's result, at noisy
    inputs drawn within the radii, never leaves the checker's bound."""
    rng = np.random.default_rng(0)
    for trial in range(60):
        n, h, k = rng.integers(1, 5), rng.integers(1, 7), rng.integers(1, 4)
        W = [rng.integers(-40, 41, (n, h)) / 4.0, rng.integers(-8, 9, (h, k)) / 2.0]
        b = [rng.integers(-60, 61, h) / 4.0, rng.integers(-8, 9, k) / 4.0]
        x = rng.integers(0, 4, (8, n)).astype(np.float64)
        r = 10.0 ** rng.uniform(-12, -3, n) * (rng.random(n) < 0.8)
        z, err = affine(x, r, W, b, U, P)
        for _ in range(20):
            noisy = _held(x, r, x + rng.uniform(-1, 1, x.shape) * r)
            assert np.all(np.abs(_float32(noisy, W, b) - z) <= err), trial


def _dense(A: Coefficients, n: int) -> np.ndarray:
    """The coefficients as [N, inputs, units]."""
    if A.dense is not None:
        return A.dense
    out = np.zeros((A.c.shape[0], n, A.units))
    for i, h in enumerate(A.at):
        if h >= 0:
            out[:, i, h] = A.c[:, i]
    return out


def test_compact_coefficients_are_the_dense_ones():
    """A box read through an identity layer, a ReLU, then a dense layer: the compact form stays
    compact through the identity, turns dense at the dense layer, and every product, mask and
    weighted sum equals the one on the dense array."""
    rng = np.random.default_rng(0)
    N, n = 5, 7
    live = np.array([0, 2, 3, 6])
    rl = rng.random(len(live))
    A = Coefficients.inputs(N, live, n)
    D = Coefficients.of(_dense(A, len(live)))
    for W in (np.eye(n), rng.integers(-2, 3, size=(n, 4)).astype(float)):
        A, D = A.times(W), D.times(W)
        assert np.array_equal(_dense(A, len(live)), D.dense)
        assert np.allclose(A.weighted(rl), D.weighted(rl), rtol=1e-15, atol=0)
        on = rng.random((N, W.shape[1])) < 0.6
        A, D = A.masked(on), D.masked(on)
        assert np.array_equal(_dense(A, len(live)), D.dense)
    assert A.dense is not None


def test_the_bound_holds_on_the_corners_of_the_box():
    """Random integer networks (some with an identity layer after the inputs) on inputs known up to
    a radius: the network at every sampled corner of the error box is within the bound of the
    clean output."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 6))
        dims = [n, *rng.integers(1, 7, size=int(rng.integers(1, 4)))]
        Ws = [rng.integers(-2, 3, size=(a, b)).astype(float) for a, b in zip(dims, dims[1:])]
        if rng.random() < 0.5:
            Ws, dims = [np.eye(n), *Ws], [n, *dims]
        bs = [rng.integers(-2, 3, size=b).astype(float) for b in dims[1:]]
        x = rng.integers(-3, 4, size=(4, n)) + 0.5 * (rng.random((4, n)) < 0.3)
        r = 0.3 * rng.random(n) * (rng.random(n) < 0.7)
        z, err = affine(x, r, Ws, bs, U, P)
        for _ in range(16):
            h = x + r * rng.choice([-1.0, 1.0], size=x.shape)
            for i, (W, b) in enumerate(zip(Ws, bs)):
                h = h @ W + b
                h = np.maximum(h, 0.0) if i < len(Ws) - 1 else h
            assert np.all(np.abs(h - z) <= err * (1 + 1e-12) + 1e-12)


def test_on_grid_takes_integers_and_dyadic_weights_within_their_range_only():
    W = np.array([[0.25, 1.0, 1 / 3, 0.25], [-0.5, 2.0, 0.0, 0.5]])
    b = np.array([0.75, 0.0, 0.0, 0.0])
    size = np.array([[10.0, 10.0, 10.0, 2.0**23]])
    assert on_grid(W, b, size, P).tolist() == [[True, True, False, False]]  # 1/3: no grid; 2^23 * 4 >= 2^24


def test_an_output_of_quarter_weights_on_exact_units_has_no_error_and_a_third_has_some():
    """The last layer of a network on exact 0/1 units: quarter weights (a Walsh combination) add
    no error bound; a weight of 1/3 is rounded, so it keeps one."""
    x = np.array([[1.0, 0.0, 1.0]])
    r = np.zeros(3)
    hidden = (np.eye(3), np.zeros(3))
    for w, exact in ((np.array([[0.25], [-0.5], [0.75]]), True), (np.array([[1 / 3], [0.5], [0.25]]), False)):
        z, err = affine(x, r, [hidden[0], w], [hidden[1], np.zeros(1)], U, P)
        assert z[0, 0] == x[0] @ w[:, 0]
        assert bool(err[0, 0] == 0) == exact


def test_units_surely_off_are_left_out_with_the_same_outputs_and_no_looser_bounds():
    """Pre-activations known within a radius through an identity (their ReLU) then a dense layer,
    as stage B runs them: leaving out the units :func:`possibly_on` drops (each negative beyond
    its bound in every row, one at the margin kept) gives the same outputs and bounds no looser;
    the dropped units are the ones the whole network finds surely off, and the float32 network
    stays within the bound."""
    rng = np.random.default_rng(2)
    for trial in range(40):
        N, k = 6, int(rng.integers(2, 12))
        r = 10.0 ** rng.uniform(-9, -2, k) * (rng.random(k) < 0.9)
        x = rng.integers(-3, 4, (N, k)).astype(np.float64)
        x[:, rng.random(k) < 0.5] = -1.0  # units off in every row
        x[0, 0] = -r[0] * (1 + 2 * U)  # at the margin: the error bound reaches |z|, so it may flip: kept
        W, b = rng.integers(-4, 5, (k, 3)) / 2.0, rng.integers(-4, 5, 3) / 4.0
        on = possibly_on(x, r, U)
        assert 0 in on
        z, err = affine(x, r, [np.eye(k), W], [np.zeros(k), b], U, P)
        z_on, err_on = affine(x[:, on], r[on], [np.eye(len(on)), W[on]], [np.zeros(len(on)), b], U, P)
        assert np.array_equal(z_on, z) and np.all(err_on <= err), trial
        off = np.setdiff1d(np.arange(k), on)
        assert np.all(x[:, off] + r[off] < 0)
        for _ in range(10):
            noisy = _held(x, r, x + rng.uniform(-1, 1, x.shape) * r)
            assert np.all(np.abs(_float32(noisy, [np.eye(k), W], [np.zeros(k), b]) - z_on) <= err_on), trial


def test_rows_go_through_in_chunks_of_their_coefficients_own_size():
    """An identity over 300 noisy inputs then a one-hot layer keeps one coefficient per input
    and row (the compact form), so a chunk holds AFFINE_CHUNK / (300 + 300) rows, not
    AFFINE_CHUNK / (300 x 300) (one row per chunk); a dense layer after a fan-out counts inputs x
    units; the results are the same as row by row."""
    n = 300
    r = np.full(n, 1e-6)
    one_hot = np.zeros((n, 4))
    one_hot[np.arange(n), np.arange(n) % 4] = 1.0
    assert row_floats(r, [np.eye(n), one_hot]) == n + n
    fan = np.ones((n, 5))
    assert row_floats(r, [np.eye(n), fan, np.ones((5, 7))]) == n * 7
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (40, n)).astype(np.float64)

    class M:
        u, p = U, P
    z, err = affine_rows(M(), x, r, [np.eye(n), one_hot], [np.zeros(n), np.zeros(4)], [0, 1, 2, 3])
    for i in range(0, 40, 13):
        zi, ei = affine(x[i : i + 1], r, [np.eye(n), one_hot], [np.zeros(n), np.zeros(4)], U, P)
        assert np.array_equal(zi, z[i : i + 1]) and np.array_equal(ei, err[i : i + 1])
