"""A ReLU network on inputs known up to a radius: the clean outputs and their error bounds, with
the input errors carried as exact linear coefficients while every unit's sign is fixed (the
weight checker's one evaluation rule for lookups, steps and their parts)."""

from __future__ import annotations

import numpy as np

from .state import AFFINE_CHUNK, Model, gamma


BLAS_ABOVE = 1 << 27
"""Multiply-adds above which a dense error-coefficient product goes through BLAS (a wide
staircase's layers), not einsum (whose loops are the faster for the small products of most MLPs,
and a threaded BLAS stalls on a busy machine)."""


def _times(A: np.ndarray, W: np.ndarray) -> np.ndarray:
    """The error coefficients' product A @ W ([N, inputs, units] x [units, k]), each entry's sum
    taken over its nonzero terms in ascending unit order.  Where each input reaches few units (a
    lookup's first layer, a stage reading a hull through an identity layer) the terms are
    gathered per input; a term left out is an exact zero, which adds nothing to a float sum."""
    support = np.any(A != 0, axis=0)  # [inputs, units]
    if 8 * int(support.sum()) > support.size:
        if A.size * W.shape[1] <= BLAS_ABOVE:
            return np.einsum("Nnh,hk->Nnk", A, W)
        N, n, h = A.shape
        return (A.reshape(N * n, h) @ W).reshape(N, n, W.shape[1])
    out = np.zeros((A.shape[0], A.shape[1], W.shape[1]))
    for n in np.flatnonzero(support.any(1)):
        hs = np.flatnonzero(support[n])
        acc = A[:, n, hs[0], None] * W[hs[0]]
        for h in hs[1:]:
            acc = acc + A[:, n, h, None] * W[h]
        out[:, n] = acc
    return out


GRID_BITS = 8
"""Finest grid 2^-e (e <= GRID_BITS) on which :func:`on_grid` accepts an output's weights."""


def on_grid(W: np.ndarray, b: np.ndarray, size: np.ndarray, p: int) -> np.ndarray:
    """Per column of W (and b): whether a sum of exactly known integers times these weights is
    computed exactly -- every weight and the bias a multiple of some 2^-e (e <= GRID_BITS) and the
    terms' magnitudes ``size`` (any leading shape) summing below 2^(p - e): each product and
    partial sum is then a multiple of 2^-e below 2^(p - e), representable in p bits (integers,
    e = 0, are the special case).  A Walsh combination's quarter weights (Z_2^2) are one."""
    ok = np.zeros(size.shape, dtype=bool)
    for e in range(GRID_BITS + 1):
        k = 2.0**e
        fits = np.all(np.round(W * k) == W * k, axis=0) & (np.round(b * k) == b * k)
        ok |= fits & (size * k < 2.0**p)
    return ok


def affine(x: np.ndarray, r: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray],
            u: float, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Evaluate a ReLU network on clean inputs ``x`` [N, n] whose errors are at most ``r`` [n].

    Returns the clean output [N, k] and its error bound [N, k]: sum_n |A[k, n]| r[n] for A the
    output's coefficients on the input errors (exact while every unit's sign is fixed), plus an
    independent bound (rounding, and the whole possible deviation of units whose sign the error
    could flip).  Only the inputs with an error (r > 0) get coefficients, kept as [N, inputs,
    units] so each layer's update is one matrix product.

    Exact integers: a unit whose inputs are exactly known integers, whose weights and bias are
    integers and whose terms' magnitudes sum below 2^p computes its integer exactly (every
    partial sum is representable), so it adds no rounding, and a ReLU at its kink (0 exactly)
    flips nothing; a unit surely off is exactly 0 whatever its inputs' errors -- so the step
    units and one-hots of a lookup are exact once the steps before them have saturated.  With
    one noisy term among such integers, the partial sums that hold it are that term plus an
    integer: adding an integer is exact unless the sum reaches a binade it never reached, which
    rounds it to that binade's grid (half an ulp, and the grid only coarsens), so in any order
    the sum errs by at most one ulp of its largest partial sum, 2 u sum|terms|, and the noisy
    product by u |term|: 4 u sum|terms| in all, whatever the number of terms."""
    h = x
    live = np.flatnonzero(r)
    rl = r[live]
    A = np.zeros((x.shape[0], len(live), x.shape[1]))
    A[:, np.arange(len(live)), live] = 1.0
    nu = np.zeros_like(x)
    exact = (r[None, :] == 0) & (np.round(x) == x)
    for i, (W, b) in enumerate(zip(weights, biases)):
        z = h @ W + b
        Az = _times(A, W)
        mag = np.abs(h) + np.matmul(rl, np.abs(A)) + nu
        size = mag @ np.abs(W) + np.abs(b)
        integral = np.all(np.round(W) == W, axis=0) & (np.round(b) == b) & (size < 2.0**p)
        inexact_terms = (~exact).astype(np.float64) @ (W != 0).astype(np.float64)
        one = (inexact_terms == 1) & integral  # one noisy term among integers: 4 u, not gamma_n
        rounding = np.where(one, 4 * u, gamma(np.count_nonzero(W, axis=0) + 1, u)[None]) * size
        last = i == len(weights) - 1  # an output need not be an integer to be exact: a grid
        exact = (inexact_terms == 0) & (on_grid(W, b, size, p) if last else integral)
        nz = np.where(exact, 0.0, nu @ np.abs(W) + rounding)
        ein = np.matmul(rl, np.abs(Az))
        err = ein + nz
        if i == len(weights) - 1:
            return z, err
        on = z > 0
        flip = (err >= np.abs(z)) & ~exact
        eta = np.where(flip, np.maximum(0.0, err - np.abs(z)), 0.0)
        exact = exact | (~on & ~flip)  # a unit surely off is exactly 0
        h = np.maximum(z, 0.0)
        A = Az * on[:, None, :]
        nu = nz * on + eta
    raise AssertionError("unreachable")


def affine_rows(m: Model, X: np.ndarray, r: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray],
                out: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """:func:`affine` on every row of ``X`` (in chunks of at most :data:`AFFINE_CHUNK` error
    coefficients): the outputs ``out`` of each row and their error bounds, [rows, len(out)] each."""
    z_out, err_out = np.zeros((len(X), len(out))), np.zeros((len(X), len(out)))
    step = max(1, AFFINE_CHUNK // max(1, max(w.shape[1] for w in weights) * np.count_nonzero(r)))
    for lo in range(0, len(X), step):
        sl = slice(lo, lo + step)
        z, err = affine(X[sl], r, weights, biases, m.u, m.p)
        z_out[sl], err_out[sl] = z[:, out], err[:, out]
    return z_out, err_out
