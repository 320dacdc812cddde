"""The weight checker's evaluation of a ReLU network with affine error forms (verify/certify/affine.py):
the compact coefficients (each input reaching one unit) are the dense ones, and the bound holds."""

import numpy as np

from verify.certify.affine import Coefficients, affine

U, P = 2.0**-24, 24  # float32


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
