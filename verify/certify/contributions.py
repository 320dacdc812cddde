"""A group's contribution to the next layer (the lookup rule's stage A, ``lookups._stage_a``):
every row of the group's input codes through its hidden layers with affine error forms, then
through the next layer's weights -- evaluated once per class of rows its units cannot tell apart.

Why classes.  A staircase reading a sum of two prefix sums X_1 + X_2 (a Walsh table of two mod-2
counters) joins both counters' inputs in one group, so the group's rows are every pair (x_1, x_2)
and each row runs through every unit: O(T^2) rows times O(T) units.  But the units reading the
sum see a pair only through x_1 + x_2, the units of one counter only through its own x_i.  So the
group's last hidden layer is split into *batches* (:func:`batches`): the units whose ancestors in
the first layer read the noisy inputs (those with an error radius) through one and the same
weight column w, those that read none, and the rest.  A batch is its own sub-network (its units
and their ancestors, reading the inputs its first layer reads), and its rows are classed by a
*key* (:func:`_keys`) that fixes everything :func:`~verify.certify.affine.affine` computes for them:

- the exact inputs' values (the first layer's exact terms, its exact zeros and its grid), and for
  the noisy ones, s_1 = sum_i w_i x_i and s_2 = sum_i |w_i| |x_i| (each unit's clean
  pre-activation s_1 plus exact terms and bias, the size of its terms s_2 plus exact terms and the
  radii's, and s_2 = 0 where every noisy input it reads is 0: the absorbed rule's clean zeros):
  the first layer's clean values, error coefficients (w: row-free), roundings and flags (a noisy
  input is never exact, so the exact zeros and the grid are the exact inputs') are functions of
  the key;
- every later layer of the sub-network is a function of the layer before (the checker's rules are
  per row and per unit, the grid's least quantum taken over the sub-network's own units: still a
  quantum of every exact term a unit reads, so sound).

Keys are used only where they are exact: s_1 and s_2 summed exactly in float64 (every x_i and w_i
on a grid whose sums stay within 53 bits) and no noisy input ever within its float's spacing (the
snapping rule would make it exact, a row-dependent flag); otherwise the key is the noisy inputs'
own values.  Rows with equal keys then have equal results, so each class is evaluated once and its
result given to every row in it; the group's contribution is the sum of its batches' (each
batch's error bound its own: the triangle inequality).  A staircase on a sum of two prefix sums:
O(T) classes per batch, O(T^2) cheap row sums."""

from __future__ import annotations

import numpy as np

from .affine import affine, prepared
from .state import AFFINE_CHUNK, quanta

Contribution = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Per row and column of the next layer: the clean contribution, its error bound, the magnitude of
its terms, and whether it is exact (every unit feeding the column exact and an integer)."""


def contributions(X: np.ndarray, r: np.ndarray, layer_w: list[np.ndarray], layer_b: list[np.ndarray],
                  Wg: np.ndarray, u: float, p: int) -> Contribution:
    """The contribution to the next layer (weights ``Wg`` from the last hidden layer) of a network
    with hidden layers ``layer_w``, ``layer_b`` on the rows ``X`` [N, inputs] with input radii
    ``r``: per batch (:func:`batches`), once per class of rows (:func:`_keys`), summed -- or row by
    row (:func:`direct`) where the classes would save nothing (units times rows evaluated, plus the
    sums)."""
    N, cols = len(X), Wg.shape[1]
    if N == 0:
        return direct(X, r, layer_w, layer_b, Wg, u, p)
    parts = [(reads, units, *_classes(key)) for reads, units, key in batches(X, r, layer_w, p)]
    width = lambda units: sum(map(len, units)) + len(units[-1]) + cols  # noqa: E731 (units a row runs through)
    batched = sum(len(first) * width(units) for _, units, first, _ in parts) + N * cols * len(parts)
    if batched >= N * (sum(w.shape[1] for w in layer_w) + Wg.shape[0] + cols):  # no gain: row by row
        return direct(X, r, layer_w, layer_b, Wg, u, p)
    return by_classes(X, r, layer_w, layer_b, Wg, u, p, parts)


def by_classes(X: np.ndarray, r: np.ndarray, layer_w: list[np.ndarray], layer_b: list[np.ndarray],
               Wg: np.ndarray, u: float, p: int, parts: list | None = None) -> Contribution:
    """:func:`contributions` by classes whatever the cost: per batch (given in ``parts``: its
    inputs, units, each class's first row and each row's class), the class representatives
    through :func:`direct`, given to every row of their class and summed over the batches."""
    if parts is None:
        parts = [(reads, units, *_classes(key)) for reads, units, key in batches(X, r, layer_w, p)]
    out = [np.zeros((len(X), Wg.shape[1])) for _ in range(3)]
    exact = np.ones((len(X), Wg.shape[1]), dtype=bool)
    for reads, units, first, inverse in parts:
        sub_w = [layer_w[0][reads][:, units[0]]] + [layer_w[j][units[j - 1]][:, units[j]]
                                                    for j in range(1, len(units))]
        sub_b = [b[units[j]] for j, b in enumerate(layer_b)]
        part = direct(X[first][:, reads], r[reads], sub_w, sub_b, Wg[units[-1]], u, p)
        for acc, got in zip(out, part[:3]):
            acc += got[inverse]
        exact &= part[3][inverse]
    return out[0], out[1], out[2], exact


def direct(X: np.ndarray, r: np.ndarray, layer_w: list[np.ndarray], layer_b: list[np.ndarray],
           Wg: np.ndarray, u: float, p: int) -> Contribution:
    """:func:`contributions` row by row (in chunks of at most AFFINE_CHUNK error coefficients):
    the hidden layers then [Wg | I], the contribution with its input-error coefficients through Wg
    (a step pair's units cancel there) and the last hidden layer's units; its bound the smaller of
    that and the units' bounds times |Wg|."""
    N, (k, cols) = len(X), Wg.shape
    centre, err, mag = (np.zeros((N, cols)) for _ in range(3))
    exact = np.ones((N, cols), dtype=bool)
    weights, biases = [*layer_w, np.hstack([Wg, np.eye(k)])], [*layer_b, np.zeros(cols + k)]
    layers = prepared(weights, biases, p)  # the weights' data once for every chunk
    step = max(1, AFFINE_CHUNK // max(1, max(w.shape[1] for w in weights) * np.count_nonzero(r)))
    for lo in range(0, N, step):
        sl = slice(lo, lo + step)
        z, e_all = affine(X[sl], r, weights, biases, u, p, layers)
        h, e, e_signed = z[:, cols:], e_all[:, cols:], e_all[:, :cols]
        centre[sl], mag[sl] = h @ Wg, (np.abs(h) + e) @ np.abs(Wg)
        err[sl] = np.minimum(e @ np.abs(Wg), e_signed)
        exact[sl] = ((e > 0) | (np.round(h) != h)).astype(np.float64) @ (Wg != 0).astype(np.float64) == 0
    return centre, err, mag, exact


def _classes(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``key`` [N, k]: the first row of each and each row's class.  Each
    column's values numbered (a 1-d unique), the numbers combined into one integer per row while
    they fit in 62 bits (else the rows compared whole)."""
    N, k = key.shape
    code = np.zeros(N, dtype=np.int64)
    size = 1
    for j in range(k):
        values, number = np.unique(key[:, j], return_inverse=True)
        if size * len(values) >= 2**62:
            _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
            return first, inverse.reshape(-1)
        code, size = code * len(values) + number.reshape(-1), size * len(values)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def batches(X: np.ndarray, r: np.ndarray, layer_w: list[np.ndarray],
            p: int) -> list[tuple[np.ndarray, list[np.ndarray], np.ndarray]]:
    """The last hidden layer's units split by the noisy weight columns of their first-layer
    ancestors (one column w, none, or several): per batch, the inputs its first layer reads, its
    units in each layer (the ancestors of its last-layer units) and each row's key (:func:`_keys`)."""
    noisy = r > 0
    W0 = layer_w[0]
    if noisy.any():
        cols, cls = np.unique(W0[noisy].T, axis=0, return_inverse=True)  # each first-layer unit's noisy column
    else:
        cols, cls = np.zeros((1, 0)), np.zeros(W0.shape[1], dtype=np.int64)
    cls = cls.reshape(-1)
    seen = np.zeros((len(cols), W0.shape[1]))  # [noisy columns, units]: which columns a unit's ancestors read
    seen[cls, np.arange(W0.shape[1])] = 1.0
    seen[[i for i, c in enumerate(cols) if not np.any(c)]] = 0.0
    for W in layer_w[1:]:
        seen = ((seen @ (W != 0)) > 0).astype(np.float64)
    n_seen = (seen > 0).sum(0)
    label = np.where(n_seen == 1, seen.argmax(0), np.where(n_seen == 0, -1, -2))
    out = []
    for lab in np.unique(label):
        units = [np.flatnonzero(label == lab)]
        for W in reversed(layer_w[1:]):
            units.insert(0, np.flatnonzero(np.any(W[:, units[0]] != 0, axis=1)))
        reads = np.flatnonzero(np.any(W0[:, units[0]] != 0, axis=1))
        w = cols[lab] if lab >= 0 else None
        out.append((reads, units, _keys(X, r, reads, w, lab == -2, p)))
    return out


def _keys(X: np.ndarray, r: np.ndarray, reads: np.ndarray, w_all: np.ndarray | None, mixed: bool,
          p: int) -> np.ndarray:
    """Each row's key for a batch reading inputs ``reads`` (the module's rule): the exact inputs'
    values, then s_1 and s_2 of the noisy ones, read through the one column ``w_all`` (over every
    noisy input); or, where those sums may round, an input may snap or the batch reads several
    columns (``mixed``), the noisy inputs' own values."""
    exact_in = [i for i in reads if r[i] == 0]
    noisy_in = [i for i in reads if r[i] > 0]
    exact_part = X[:, exact_in]
    if not noisy_in:
        return exact_part
    x = X[:, noisy_in]
    raw = np.concatenate([exact_part, x], axis=1)
    if mixed or w_all is None or np.any(r[noisy_in] < np.abs(x).max(0) * 2.0**-p):
        return raw
    w = w_all[np.cumsum(r > 0)[noisy_in] - 1]
    qx = quanta(x).min(initial=np.inf)
    qw = quanta(w).min(initial=np.inf)
    s2 = np.abs(x) @ np.abs(w)
    if not np.isfinite(qx * qw) or s2.max(initial=0.0) >= 2.0**53 * qx * qw:
        return raw
    return np.concatenate([exact_part, (x @ w)[:, None], s2[:, None]], axis=1)
