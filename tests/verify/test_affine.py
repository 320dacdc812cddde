"""The weight checker's exact sums (verify/certify/affine.py): exactly known integers times weights
on a grid 2^-e sum without rounding while the terms stay below 2^(p - e); anything else is rounded."""

import numpy as np

from verify.certify.affine import affine, on_grid

U, P = 2.0**-24, 24  # float32: unit roundoff and significand bits


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
