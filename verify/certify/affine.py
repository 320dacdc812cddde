"""A ReLU network on inputs known up to a radius: the clean outputs and their error bounds, with
the input errors carried as exact linear coefficients while every unit's sign is fixed (the
weight checker's one evaluation rule for lookups, steps and their parts)."""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Coefficients:
    """The output's coefficients on the input errors, A [N, inputs, units].  While each input
    reaches one unit at most (an input's own unit; a box read through an identity layer), they are
    kept as that unit (``at``, -1: none) and its coefficient per row (``c`` [N, inputs]): the same
    numbers without the zeros, whose products and sums :func:`affine` would otherwise run over
    every (input, unit) pair.  Otherwise ``dense`` holds A."""

    at: np.ndarray
    c: np.ndarray
    dense: np.ndarray | None
    units: int

    @staticmethod
    def inputs(N: int, live: np.ndarray, units: int) -> "Coefficients":
        """Input ``live[i]``'s error has coefficient 1 on its own dim."""
        return Coefficients(live.copy(), np.ones((N, len(live))), None, units)

    @staticmethod
    def of(dense: np.ndarray) -> "Coefficients":
        """Coefficients held as the dense array A."""
        return Coefficients(np.zeros(0, dtype=np.int64), np.zeros((0, 0)), dense, dense.shape[2])

    def times(self, W: np.ndarray) -> "Coefficients":
        """A @ W (each entry one product while compact, as the dense sum over its one nonzero term)."""
        if self.dense is not None:
            return Coefficients.of(_times(self.dense, W))
        rows = W[np.maximum(self.at, 0)] * (self.at >= 0)[:, None]  # [inputs, k]: the row each input reaches
        reach = np.count_nonzero(rows, axis=1)
        if reach.max(initial=0) <= 1:
            at = np.where(reach == 1, np.argmax(rows != 0, axis=1), -1) if W.shape[1] else np.full(len(rows), -1)
            c = self.c * rows[np.arange(len(at)), np.maximum(at, 0)] * (at >= 0)
            return Coefficients(at, c, None, W.shape[1])
        return Coefficients.of(self.c[:, :, None] * rows[None])

    def weighted(self, rl: np.ndarray) -> np.ndarray:
        """sum_inputs rl[i] |A[:, i, :]| ([N, units])."""
        if self.dense is not None:
            return np.asarray(np.matmul(rl, np.abs(self.dense)))
        P = np.zeros((len(self.at), self.units))
        P[np.flatnonzero(self.at >= 0), self.at[self.at >= 0]] = 1.0
        return np.asarray((np.abs(self.c) * rl) @ P)

    def masked(self, on: np.ndarray) -> "Coefficients":
        """A with the units off (``on`` [N, units] False) zeroed."""
        if self.dense is not None:
            return Coefficients.of(self.dense * on[:, None, :])
        return Coefficients(self.at, self.c * (on[:, np.maximum(self.at, 0)] & (self.at >= 0)[None]), None, self.units)


def affine(x: np.ndarray, r: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray],
            u: float, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Evaluate a ReLU network on clean inputs ``x`` [N, n] whose errors are at most ``r`` [n].

    Returns the clean output [N, k] and its error bound [N, k]: sum_n |A[k, n]| r[n] for A the
    output's coefficients on the input errors (exact while every unit's sign is fixed), plus an
    independent bound (rounding, and the whole possible deviation of units whose sign the error
    could flip).  Only the inputs with an error (r > 0) get coefficients, kept as [N, inputs,
    units] (:class:`Coefficients`) so each layer's update is one matrix product.

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
    A = Coefficients.inputs(x.shape[0], live, x.shape[1])
    nu = np.zeros_like(x)
    exact = (r[None, :] == 0) & (np.round(x) == x)
    for i, (W, b) in enumerate(zip(weights, biases)):
        z = h @ W + b
        Az = A.times(W)
        mag = np.abs(h) + A.weighted(rl) + nu
        size = mag @ np.abs(W) + np.abs(b)
        integral = np.all(np.round(W) == W, axis=0) & (np.round(b) == b) & (size < 2.0**p)
        inexact_terms = (~exact).astype(np.float64) @ (W != 0).astype(np.float64)
        one = (inexact_terms == 1) & integral  # one noisy term among integers: 4 u, not gamma_n
        rounding = np.where(one, 4 * u, gamma(np.count_nonzero(W, axis=0) + 1, u)[None]) * size
        exact = (inexact_terms == 0) & integral
        nz = np.where(exact, 0.0, nu @ np.abs(W) + rounding)
        ein = Az.weighted(rl)
        err = ein + nz
        if i == len(weights) - 1:
            return z, err
        on = z > 0
        flip = (err >= np.abs(z)) & ~exact
        eta = np.where(flip, np.maximum(0.0, err - np.abs(z)), 0.0)
        exact = exact | (~on & ~flip)  # a unit surely off is exactly 0
        h = np.maximum(z, 0.0)
        A = Az.masked(on)
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
