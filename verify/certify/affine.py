"""A ReLU network on inputs known up to a radius: the clean outputs and their error bounds, with
the input errors carried as exact linear coefficients while every unit's sign is fixed (the
weight checker's one evaluation rule for lookups, steps and their parts)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .state import AFFINE_CHUNK, Model, gamma, quanta


BLAS_ABOVE = 1 << 27
"""Multiply-adds above which a dense error-coefficient product goes through BLAS (a wide
staircase's layers), not einsum (whose loops are the faster for the small products of most MLPs,
and a threaded BLAS stalls on a busy machine)."""


def _product(x: np.ndarray, M: np.ndarray) -> np.ndarray:
    """x @ M ([N, n] x [n, k]): by einsum up to :data:`BLAS_ABOVE` multiply-adds, else BLAS."""
    if x.size * M.shape[1] <= BLAS_ABOVE:
        return np.einsum("Nn,nk->Nk", x, M)
    return np.asarray(x @ M)


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


def reached(at: np.ndarray, W: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray]:
    """Where inputs at units ``at`` (-1: none) go through W: when each reaches one unit at most,
    (None, that unit or -1, its weight or 0); else (the row each reaches [inputs, k], None, an
    empty array).  A function of ``at`` and W's pattern alone, the same for every row."""
    src = np.maximum(at, 0)
    reach = np.count_nonzero(W, axis=1)[src] * (at >= 0)
    if reach.max(initial=0) > 1:
        return W[src] * (at >= 0)[:, None], None, np.zeros(0)
    if not W.shape[1]:
        return None, np.full(len(at), -1), np.zeros(len(at))
    new = np.where(reach == 1, np.argmax(W != 0, axis=1)[src], -1)
    return None, new, W[src, np.maximum(new, 0)] * (new >= 0)


def row_floats(r: np.ndarray, weights: list[np.ndarray]) -> int:
    """Floats one row's error coefficients take at most in :func:`affine`, layer by layer: the
    inputs with an error, and the layer's units, while each input reaches one unit at most
    (:class:`Coefficients`, compact) or just past it (:class:`Outer`); inputs times units once
    dense.  The form depends on ``r`` and the weights' nonzero pattern alone (a mask only zeroes
    coefficients), so it is the same for every row."""
    live = np.flatnonzero(r)
    at: np.ndarray | None = live
    most, before = 1, len(r)
    for W in weights:
        if at is None:  # dense: the product's operand and result
            most = max(most, len(live) * max(before, W.shape[1]))
        else:
            at = reached(at, W)[1]
            most = max(most, len(live) + W.shape[1])
        before = W.shape[1]
    return most


@dataclass(frozen=True)
class Coefficients:
    """The output's coefficients on the input errors, A [N, inputs, units].  While each input
    reaches one unit at most (an input's own unit; a box read through an identity layer), they are
    kept as that unit (``at``, -1: none) and its coefficient per row (``c`` [N, inputs]): the same
    numbers without the zeros, whose products and sums :func:`affine` would otherwise run over
    every (input, unit) pair.  Otherwise ``dense`` holds A, or, just past such a form, its factors
    (:class:`Outer`)."""

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

    def times(self, W: np.ndarray, memo: dict[bytes, tuple] | None = None) -> "Coefficients | Outer":
        """A @ W (each entry one product while compact, as the dense sum over its one nonzero term).
        ``memo``: where each input goes through W (:func:`reached`), kept by ``at`` (the same for
        every chunk of rows a layer sees)."""
        if self.dense is not None:
            return Coefficients.of(_times(self.dense, W))
        key = self.at.tobytes()
        found = memo.get(key) if memo is not None else None
        if found is None:
            found = reached(self.at, W)
            if memo is not None:
                memo[key] = found
        rows, at, weight = found
        if rows is None:
            return Coefficients(at, self.c * weight, None, W.shape[1])
        assert at is None
        return Outer(self.c, rows, np.ones((len(self.c), W.shape[1]), dtype=bool))

    def weighted(self, rl: np.ndarray) -> np.ndarray:
        """sum_inputs rl[i] |A[:, i, :]| ([N, units])."""
        if self.dense is not None:
            return np.asarray(np.matmul(rl, np.abs(self.dense)))
        ok = np.flatnonzero(self.at >= 0)
        order = ok[np.argsort(self.at[ok], kind="stable")]  # by unit, then input: each unit's terms summed alone
        units, starts = np.unique(self.at[order], return_index=True)
        out = np.zeros((len(self.c), self.units))
        if len(order):
            out[:, units] = np.add.reduceat((np.abs(self.c) * rl)[:, order], starts, axis=1)
        return out

    def masked(self, on: np.ndarray) -> "Coefficients":
        """A with the units off (``on`` [N, units] False) zeroed."""
        if self.dense is not None:
            return Coefficients.of(self.dense * on[:, None, :])
        return Coefficients(self.at, self.c * (on[:, np.maximum(self.at, 0)] & (self.at >= 0)[None]), None, self.units)


@dataclass(frozen=True)
class Outer:
    """Coefficients A [N, inputs, units] held as factors, A[n, i, k] = c[n, i] rows[i, k] keep[n, k]:
    the compact form (each input reaching one unit, with coefficient c) times a layer where it
    reaches several (``rows``, each input's unit's weights), masked (``keep``).  The same numbers
    as the dense array, whose weighted sums and masks cost [N, units] here instead of [N, inputs,
    units] (a lookup's 82 decodes times its 2438 key units), and a product runs over the units some
    row keeps alone (after the ReLU a few per row): the others' coefficients are exact zeros."""

    c: np.ndarray
    rows: np.ndarray
    keep: np.ndarray

    @property
    def dense(self) -> np.ndarray:
        """A as the dense array [N, inputs, units]."""
        return self.c[:, :, None] * (self.rows[None] * self.keep[:, None, :])

    def times(self, W: np.ndarray, memo: dict[bytes, tuple] | None = None) -> Coefficients:
        """A @ W, over the units some row keeps (``memo`` unused: the kept units vary by chunk)."""
        kept = np.flatnonzero(self.keep.any(0))
        part = self.c[:, :, None] * (self.rows[None, :, kept] * self.keep[:, None, kept])
        return Coefficients.of(_times(part, W[kept]))

    def weighted(self, rl: np.ndarray) -> np.ndarray:
        """sum_inputs rl[i] |A[:, i, :]| ([N, units]): (rl |c|) @ |rows|, masked."""
        return _product(np.abs(self.c) * rl, np.abs(self.rows)) * self.keep

    def masked(self, on: np.ndarray) -> "Outer":
        """A with the units off (``on`` [N, units] False) zeroed."""
        return Outer(self.c, self.rows, self.keep & on)


SPARSE_BELOW = 1 / 8
"""Fraction of nonzero weights below which a layer's products go over its nonzeros alone
(:class:`Layer`): a gathered term costs a few times a dense multiply-add, so the gather pays
once most terms are zeros -- the same cut as :func:`_times` (a lookup's one-hot output layer
has one nonzero per row: 1 in 854)."""


@dataclass(frozen=True)
class Layer:
    """One layer's weights as :func:`affine` reads them, computed once for all its calls: W and
    b, |W| and W's nonzero pattern as 0/1 (its sums count terms), the units that round once
    (:func:`_single_power_of_two`), the weights' and bias's quanta (:func:`_weight_grid`), and,
    where W is sparse (:data:`SPARSE_BELOW`), its nonzeros ordered by column (``gather``: their
    rows, columns, each column's first and the columns that have any) so that :meth:`dot` sums
    those terms alone: a term left out is an exact zero, which adds nothing to a float sum; and
    ``memo``, what a compact form's product with W needs (:meth:`Coefficients.times`)."""

    W: np.ndarray
    b: np.ndarray
    abs_w: np.ndarray
    nonzero: np.ndarray
    single: np.ndarray
    qw: np.ndarray
    qb: np.ndarray
    gather: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None
    memo: dict[bytes, tuple] = field(default_factory=dict)

    def dot(self, x: np.ndarray, M: np.ndarray) -> np.ndarray:
        """x @ M for M one of W, |W| or the 0/1 pattern (the same nonzeros)."""
        if self.gather is None:
            return _product(x, M)
        rows, cols, starts, present = self.gather
        out = np.zeros((len(x), M.shape[1]))
        if len(rows):
            out[:, present] = np.add.reduceat(x[:, rows] * M[rows, cols], starts, axis=1)
        return out


def prepared(weights: list[np.ndarray], biases: list[np.ndarray], p: int) -> list[Layer]:
    """Each layer's :class:`Layer`, for :func:`affine`."""
    out = []
    for W, b in zip(weights, biases):
        nonzero = W != 0
        gather = None
        if np.count_nonzero(nonzero) < SPARSE_BELOW * W.size:
            cols, rows = np.nonzero(nonzero.T)  # by column, then row
            present, starts = np.unique(cols, return_index=True)
            gather = (rows, cols, starts, present)
        out.append(Layer(W, b, np.abs(W), nonzero.astype(np.float64), _single_power_of_two(W, b, p),
                         *_weight_grid(W, b), gather))
    return out


def affine(x: np.ndarray, r: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray],
           u: float, p: int, layers: list[Layer] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Evaluate a ReLU network on clean inputs ``x`` [N, n] whose errors are at most ``r`` [n].

    Returns the clean output [N, k] and its error bound [N, k]: sum_n |A[k, n]| r[n] for A the
    output's coefficients on the input errors (exact while every unit's sign is fixed), plus an
    independent bound (rounding, and the whole possible deviation of units whose sign the error
    could flip).  Only the inputs with an error (r > 0) get coefficients, kept as [N, inputs,
    units] (:class:`Coefficients`) so each layer's update is one matrix product.  ``layers``:
    the weights :func:`prepared` once for many calls (computed here when not given).

    Exact integers: a unit whose inputs are exactly known integers, whose weights and bias are
    integers and whose terms' magnitudes sum below 2^p computes its integer exactly (every
    partial sum is representable), so it adds no rounding, and a ReLU at its kink (0 exactly)
    flips nothing; a unit surely off is exactly 0 whatever its inputs' errors -- so the step
    units and one-hots of a lookup are exact once the steps before them have saturated.  With
    one noisy term among such integers, the partial sums that hold it are that term plus an
    integer: adding an integer is exact unless the sum reaches a binade it never reached, which
    rounds it to that binade's grid (half an ulp, and the grid only coarsens), so in any order
    the sum errs by at most one ulp of its largest partial sum, 2 u sum|terms|, and the noisy
    product by u |term|: 4 u sum|terms| in all, whatever the number of terms.

    Exact zeros: a term whose input is exactly 0 (a unit surely off) adds nothing to a float sum,
    so a sum's gamma counts the other nonzero terms alone.  One rounding: a unit with a single
    nonzero weight, a power of two 2^j (j >= 0), and an integer bias computes w x + b with an exact
    product and one rounded addition, in any order (the other terms are exact zeros): it errs by
    u |w x + b| <= u (|z| + |w| |x - x_clean|) -- relative to the result, not to |w x| + |b|
    (a step unit's 4 x - 4 c + 2 at a code x near c: u 2, not u 8 x).

    On a grid, not only integers: the rules above are scale-free, so they hold for exact terms
    that are multiples of a power of two delta (:func:`_grid`: the exact inputs' quantum times
    the weights', or the bias's) with magnitudes summing below 2^p delta (a composition's
    half-integer offsets).  Snapped: a value whose clean code c is a float of the dtype and whose
    error bound is below the distance to c's neighbouring floats (2^(e - 1 - p) for |c| in
    [2^(e-1), 2^e)) *is* c -- the float it holds can be no other (:func:`_snap`).  Absorbed: a
    unit whose noisy terms all have clean input 0 and whose clean value is not 0 is exact when
    those terms (with their roundings) stay below 2^-(p+1) delta -- the float snapping lemma
    (``state.snaps``) for an MLP unit, the composition gadget's claim (:func:`_absorbed`)."""
    layers = layers or prepared(weights, biases, p)
    h = x
    live = np.flatnonzero(r)
    rl = r[live]
    A: Coefficients | Outer = Coefficients.inputs(x.shape[0], live, x.shape[1])
    nu = np.zeros_like(x)
    exact = (r[None, :] == 0) & _fits(x, p)
    A, nu, exact, rho = _snap(h, np.broadcast_to(r, x.shape), A, nu, exact, p)  # rho: each input's error bound
    for i, L in enumerate(layers):
        z = L.dot(h, L.W) + L.b
        Az = A.times(L.W, L.memo)
        size = L.dot(np.abs(h) + rho, L.abs_w) + np.abs(L.b)
        delta = _grid(h, exact, L.qw, L.qb)
        integral = size < 2.0**p * delta
        inexact_terms = L.dot((~exact).astype(np.float64), L.nonzero)
        live_terms = L.dot((~(exact & (h == 0))).astype(np.float64), L.nonzero)  # exact zeros add nothing
        one = (inexact_terms == 1) & integral  # one noisy term among integers: 4 u, not gamma_n
        rounding = np.where(one, 4 * u, gamma(live_terms + 1, u)) * size
        ein = Az.weighted(rl)
        carried = L.dot(nu, L.abs_w)
        rounding = np.where(L.single[None], np.minimum(rounding, u * (np.abs(z) + ein + carried)), rounding)
        exact = ((inexact_terms == 0) & integral) | _absorbed(z, h, rho, exact, L, delta, size, live_terms, u, p)
        Az = Az.masked(~exact)
        nz = np.where(exact, 0.0, carried + rounding)
        err = np.where(exact, 0.0, ein + nz)
        if i == len(layers) - 1:
            return z, err
        on = z > 0
        flip = (err >= np.abs(z)) & ~exact
        eta = np.where(flip, np.maximum(0.0, err - np.abs(z)), 0.0)
        exact = exact | (~on & ~flip)  # a unit surely off is exactly 0
        h = np.maximum(z, 0.0)
        A = Az.masked(on)
        nu = nz * on + eta
        A, nu, exact, rho = _snap(h, A.weighted(rl) + nu, A, nu, exact, p)
    raise AssertionError("unreachable")


def _fits(v: np.ndarray, p: int) -> np.ndarray:
    """Which values are floats of p bits (0, or a mantissa of p bits): what a dtype holds exactly."""
    mant, _ = np.frexp(v)
    return np.isfinite(v) & (np.round(mant * 2.0**p) == mant * 2.0**p)


def _weight_grid(W: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per unit, the least quantum of its nonzero weights and its bias's (``state.quanta``)."""
    return np.where(W != 0, quanta(W), math.inf).min(0, initial=math.inf), quanta(b)


def on_grid(W: np.ndarray, b: np.ndarray, size: np.ndarray, p: int) -> np.ndarray:
    """Per column of W (and b): whether a sum of exactly known integers times these weights plus
    the bias is computed exactly -- every term a multiple of the column's least weight or bias
    quantum delta (:func:`_weight_grid`) and the terms' magnitudes ``size`` (any leading shape)
    summing below 2^p delta, so every product and partial sum is representable in p bits (the
    grid rule of :func:`affine` with integer inputs; a Walsh combination's quarter weights are on
    the grid 1/4)."""
    qw, qb = _weight_grid(W, b)
    return size < 2.0**p * np.minimum(qw, qb)


def _grid(h: np.ndarray, exact: np.ndarray, qw: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """Per row and unit, a power of two every exact term is a multiple of (:func:`affine`): the
    exact inputs' least quantum times the unit's weights' ``qw``, and its bias's ``qb`` (inf
    where every exact term is 0)."""
    qx = np.where(exact & (h != 0), quanta(h), math.inf).min(1, initial=math.inf)
    with np.errstate(invalid="ignore"):
        terms = np.where(np.isinf(qx)[:, None] | np.isinf(qw)[None], math.inf, qx[:, None] * qw[None])
    return np.minimum(terms, qb[None])


def _snap(h: np.ndarray, rho: np.ndarray, A: "Coefficients | Outer", nu: np.ndarray, exact: np.ndarray,
          p: int) -> tuple["Coefficients | Outer", np.ndarray, np.ndarray, np.ndarray]:
    """Values that are their clean code (:func:`affine`, snapped): c != 0 a float of p bits
    (c 2^(p - e) an integer for |c| in [2^(e-1), 2^e)) within an error bound ``rho`` below
    2^(e - 1 - p), the distance to c's nearest other float (toward zero at a power of two):
    no error coefficients, exact.  Returns A, nu, exact and rho updated."""
    snap = (~exact) & (rho < np.abs(h) * 2.0**-p)  # (2^(e - 1 - p) <= |c| 2^-p: a cheap first cut)
    if not snap.any():
        return A, nu, exact, rho
    _, e = np.frexp(h)
    snap &= _fits(h, p) & (rho < np.ldexp(1.0, e - 1 - p))
    return A.masked(~snap), np.where(snap, 0.0, nu), exact | snap, np.where(snap, 0.0, rho)


def _absorbed(z: np.ndarray, h: np.ndarray, rho: np.ndarray, exact: np.ndarray, L: Layer, delta: np.ndarray,
              size: np.ndarray, live_terms: np.ndarray, u: float, p: int) -> np.ndarray:
    """Units that compute their clean value z exactly though some inputs are noisy (:func:`affine`,
    absorbed): every noisy input's clean value is 0, so z is the exact terms' sum, a nonzero
    multiple of ``delta``; their terms' bound (each product and sum rounded: a factor (1 + u) per
    term) is the noise of ``state.snaps``."""
    noisy = ~exact
    clean_zero = L.dot((noisy & (h != 0)).astype(np.float64), L.nonzero) == 0
    small = L.dot(np.where(noisy, rho, 0.0), L.abs_w) * (1 + u) ** (live_terms + 2)
    finite = np.isfinite(delta)
    snapped = (small < 2.0 ** -(p + 1) * np.where(finite, delta, 0.0)) & (size < 2.0**p * delta)
    return clean_zero & (z != 0) & finite & snapped


def _single_power_of_two(W: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """The units that round once (:func:`affine`): one nonzero weight, a power of two 2^j with
    0 <= j (its product is exact), and an integer bias below 2^p (exact in the dtype)."""
    mant, _ = np.frexp(np.abs(W))
    ok = (np.count_nonzero(W, axis=0) == 1) & np.all((W == 0) | ((mant == 0.5) & (np.abs(W) >= 1)), axis=0)
    return ok & (np.round(b) == b) & (np.abs(b) < 2.0**p)


def possibly_on(x: np.ndarray, r: np.ndarray, u: float) -> np.ndarray:
    """The units (columns of pre-activations ``x`` [N, units] known within ``r`` [units]) that
    some row may hold positive after a ReLU: :func:`affine` on an identity layer over them finds
    every other unit surely off -- its clean value z = x < 0 and its error bound at most
    r + u (|x| + r) (the error carried, plus one rounding: a single weight 1), grown by (1 + 8 u)
    for the floats that sum it, below |z| -- so an exact zero, which adds nothing to any later
    sum, changes no later unit's rules (its terms are left out of every count, size and grid)
    and is left out of the network with its row of the next layer's weights."""
    bound = (r + u * (np.abs(x) + r)) * (1 + 8 * u)
    return np.flatnonzero(~np.all(bound < -x, axis=0))


def affine_rows(m: Model, X: np.ndarray, r: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray],
                out: list[int], layers: list[Layer] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`affine` on every row of ``X`` (in chunks of at most :data:`AFFINE_CHUNK` floats of
    error coefficients, :func:`row_floats`): the outputs ``out`` of each row and their error
    bounds, [rows, len(out)] each.  ``layers``: the weights :func:`prepared` (here when not given)."""
    z_out, err_out = np.zeros((len(X), len(out))), np.zeros((len(X), len(out)))
    step = max(1, AFFINE_CHUNK // row_floats(r, weights))
    layers = layers or prepared(weights, biases, m.p)
    for lo in range(0, len(X), step):
        sl = slice(lo, lo + step)
        z, err = affine(X[sl], r, weights, biases, m.u, m.p, layers)
        z_out[sl], err_out[sl] = z[:, out], err[:, out]
    return z_out, err_out
