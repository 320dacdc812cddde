"""Exact MLP units: robust steps (Lemma 10), one-hot biases, carries (``relu(x) - relu(-x)``) and
the composition of integer-coded maps in one hidden layer (Lemma 14's role).

:func:`compose_mlp` in floating point, and into the fetched map (its docstring proves the
exact-arithmetic claim and names the units u, v, r, p, the slope M and the offset c):

*Claim (floating point, unit roundoff u = eps/2).*  If every F[j] is an exact integer and
|M d| (1 + u) < u/4, and the magnitude bound ``magnitude`` it records is under 1/eps,
the MLP computes f(g) - F[q] exactly in that arithmetic, whatever the summation order.
*Proof.*  Every weight is an integer and every bias a multiple of 1/2, so each
pre-activation is an exact multiple of 1/2 (its *exact part*, what it would be at
d = 0) plus at most one small term from the product G[q] * M, itself rounded to
M g or to (M d)(1 + theta), |theta| <= u.  Every partial sum is then an exact part
(a multiple of 1/2 below 1/eps in magnitude, hence representable) plus a small part
under u/4: adding to an exact part of magnitude >= 1/2, whose neighbouring floats are
>= u/2 away, rounds the small part off; an exact part of 0 keeps it unchanged.  The
final exact parts are nonzero (at least c >= 1/2 in magnitude for u, v, and >= 1/2 for
r, p), so every hidden unit is its exact part; the output then sums integer multiples
of multiples of 1/2 below 1/eps, exactly.  QED.  Then the new F is again exact
integers, and the scratch keeps at most the small part (for g = 0).
``exact_input_noise`` records u / (4 M (1 + u)); the scan sets its attention
temperature so that the fetched codes stay within it over all its layers.

*Into the fetched map* (``into_fetched``, the scan's last layer): without the p units,
the update  G[q] += sum_j (u[q,j] - v[q,j]) - (M + 1) r[q] + (M + 1)/2 - c,  F unchanged.
By the proof above sum_j (u - v) = M G[q] + F[g] + c and r = G[q] + 1/2, so the update is
F[g] - G[q] and G[q] becomes f(g) + e_g, in exact arithmetic.  In floating point every
unit is again its exact part, so the update is the integer f(g) - g exactly; G[q] was
the integer g exactly when g >= 1 (|d| is below half its spacing), so it becomes f(g)
exactly, and for g = 0 it becomes f(0) + d rounded: f(0) when f(0) >= 1, else the
sub-rounding residue d the clearing version leaves in the scratch.  Saves n units where
nothing fetches into G afterwards.
"""

from __future__ import annotations

import math

import numpy as np

from ..budget import STEP_TOLERANCE
from ..obligations import Compose
from ..program import MLP, obligation_name
from ..workspace import Subspace, names


def step_units(n_values: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Robust thresholds 1[x >= c], c = 1..n_values-1, for x within STEP_TOLERANCE of an integer.

    Each threshold is relu(s(x-c) + 2) - relu(s(x-c) + 1) with slope s = 1/STEP_TOLERANCE:
    exactly 1 for x >= c - 1/4 and exactly 0 for x <= c - 3/4.  Returns (w, b, combine):
    hidden pre-activations are ``x * w + b`` (2(n-1) units) and ``combine`` [2(n-1), n]
    maps them to the one-hot of the value (1[x = v] = step_v - step_{v+1}, with
    step_0 = 1 supplied as ``onehot_bias``).
    """
    s = 1.0 / STEP_TOLERANCE
    cs = np.arange(1, n_values, dtype=np.float64)
    w = np.repeat(np.full(len(cs), s), 2)
    b = np.stack([-s * cs + 2.0, -s * cs + 1.0], axis=1).reshape(-1)
    step = np.zeros((2 * len(cs), len(cs)))
    step[2 * np.arange(len(cs)), np.arange(len(cs))] = 1.0
    step[2 * np.arange(len(cs)) + 1, np.arange(len(cs))] = -1.0
    # one-hot: v=0 -> 1 - step_1 ; v -> step_v - step_{v+1} ; v=n-1 -> step_{n-1}
    onehot = np.zeros((len(cs), n_values))
    for i in range(len(cs)):  # step_{i+1}
        onehot[i, i + 1] += 1.0
        onehot[i, i] -= 1.0
    return w, b, step @ onehot


def capped_step_units(n_values: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`step_units` for a code that may exceed n_values - 1 and reads as min(x, n_values - 1)
    (a count saturating at a cap): thresholds 1[x <= c], c = 0..n_values-2, each
    relu(s(c - x) + 3) - relu(s(c - x) + 2) with s = 1/STEP_TOLERANCE, exactly 1 for x <= c + 1/4
    and exactly 0 for x >= c + 3/4.  Past the cap every unit is off (exactly 0 whatever the
    input's error or size), so large counts add no rounding.  Returns (w, b, combine) as
    :func:`step_units`; the one-hot's constant term is :func:`capped_onehot_bias`."""
    s = 1.0 / STEP_TOLERANCE
    cs = np.arange(0, n_values - 1, dtype=np.float64)
    w = np.repeat(np.full(len(cs), -s), 2)
    b = np.stack([s * cs + 3.0, s * cs + 2.0], axis=1).reshape(-1)
    step = np.zeros((2 * len(cs), len(cs)))
    step[2 * np.arange(len(cs)), np.arange(len(cs))] = 1.0
    step[2 * np.arange(len(cs)) + 1, np.arange(len(cs))] = -1.0
    # one-hot: v=0 -> d_0 ; v -> d_v - d_{v-1} ; v=n-1 -> 1 - d_{n-2}
    onehot = np.zeros((len(cs), n_values))
    for i in range(len(cs)):  # d_i
        onehot[i, i] += 1.0
        onehot[i, i + 1] -= 1.0
    return w, b, step @ onehot


def capped_onehot_bias(n_values: int) -> np.ndarray:
    """Constant term of the one-hot read from :func:`capped_step_units` (the top value's 1)."""
    e = np.zeros(n_values)
    e[-1] = 1.0
    return e


def onehot_bias(n_values: int) -> np.ndarray:
    """Constant term of the one-hot read from :func:`step_units` (the implicit step_0 = 1)."""
    e = np.zeros(n_values)
    e[0] = 1.0
    return e


def carry_units(k: int) -> np.ndarray:
    """Local input weights [k, 2k] of units relu(x), relu(-x) over k input dims;
    their difference is x exactly."""
    W = np.zeros((k, 2 * k))
    W[np.arange(k), np.arange(k)] = 1.0
    W[np.arange(k), k + np.arange(k)] = -1.0
    return W


def compose_slope(n: int) -> tuple[int, float]:
    """Slope M and offset c of :func:`compose_mlp` on ``n`` points: the smallest integer M
    whose input tolerance c / M, with c = (M - n + 1) / 2, is at least STEP_TOLERANCE
    (M = 2(n-1); 1 for a single point)."""
    M = max(1, math.ceil((n - 1) / (1 - 2 * STEP_TOLERANCE)))
    return M, (M - n + 1) / 2


def compose_mlp(name: str, F: Subspace, G: Subspace, eps: float = 2.0**-23, into_fetched: bool = False) -> MLP:
    """Function composition in one hidden layer of 2n^2 + 2n units: F <- F o G, and clear G
    (``into_fetched``: 2n^2 + n units, G <- F o G and F left as it is; see the end).

    F[q] holds the integer code of f(q), G[q] the code of g(q) up to noise (it was fetched
    by attention); afterwards F[q] holds f(g(q)) ("g, then f") and G holds 0.  Replaces
    Lemma 14's indicators followed by a dense n^2-wide layer (~2n^4 parameters as dense
    matrices) by O(n^3).  Units, with slope M and offset c from :func:`compose_slope`
    (M >= 2(n-1), c = (M-n+1)/2, a multiple of 1/2):

        u[q,j] = relu(F[j] + c + M (G[q] - j)),   v[q,j] = relu(F[j] + c + M (G[q] - j - 1)),
        r[q] = relu(G[q] + 1/2),                  p[q] = relu(F[q] + c),

    and the update  F[q] += sum_j (u[q,j] - v[q,j]) - M r[q] - p[q] + M/2,  G[q] -= r[q] - 1/2.

    *Claim (exact arithmetic).*  Let F[j] = f(j) + e_j with f(j) in 0..n-1 and G[q] = g + d
    with g = g(q) an integer in 0..n-1, and M|d| + |e_j| <= c for every j.  Then the new
    F[q] is f(g) + e_g exactly (the noise d of the fetched code cancels; F's own noise is
    passed on unamplified) and G is cleared exactly.

    *Proof.*  Write a_j = F[j] + c, so |e_j| <= c - M|d| gives M|d| <= a_j <= n - 1 + 2c - M|d|
    = M - M|d| (as 2c = M - n + 1).  For j < g both units are active (their arguments are
    at least a_j + M(1 + d) - M >= 0), and u - v = M.  For j = g, u = a_g + M d >= 0 and
    v = relu(a_g + M d - M) = 0.  For j > g, u <= relu(a_j + M d - M) = 0 and v = 0.  So
    sum_j (u - v) = M g + a_g + M d = M G[q] + F[g] + c.  As G[q] >= -c/M >= -1/2 and
    F[q] + c >= 0, M r = M G[q] + M/2 and p = F[q] + c; the update is
    F[g] + c - M/2 - F[q] - c + M/2 = F[g] - F[q].  Likewise G[q] - (r - 1/2) = 0.  QED.
    With exact F this is an input tolerance |d| <= c / M (>= 1/4) on G, recorded as
    ``input_tolerance``.

    Its exactness in floating point (``float_exact``, ``exact_input_noise``) and the variant
    ``into_fetched`` are proved in the module docstring.

    *Pass-through units* (``MLP.passes``): p[q] = F[q] + c and r[q] = G[q] + 1/2 wherever
    the claim's inputs are (F[q] >= -c, G[q] >= -1/2), so an MLP fused after this one reads
    F and G from them instead of carrying them (:func:`constructions.program.fuse`).
    """
    n = len(F)
    assert len(G) == n
    M, c = compose_slope(n)
    j = np.arange(n, dtype=np.float64)
    H = 2 * n * n + (n if into_fetched else 2 * n)
    W1 = np.zeros((2 * n, H))  # rows: F, G
    b1 = np.zeros(H)
    W2 = np.zeros((H, 2 * n))  # columns: F, G
    b2 = np.concatenate([np.full(n, M / 2), np.full(n, 0.5)])
    for q in range(n):
        u = 2 * n * q + 2 * np.arange(n)  # u[q, j]; v[q, j] follows it
        for cols, shift in ((u, 0.0), (u + 1, 1.0)):
            W1[np.arange(n), cols] = 1.0  # F[j]
            W1[n + q, cols] = M  # G[q]
            b1[cols] = c - M * (j + shift)
        W2[u, q] = 1.0
        W2[u + 1, q] = -1.0
    r = 2 * n * n + np.arange(n)
    W1[n + np.arange(n), r] = 1.0
    b1[r] = 0.5
    passes = tuple((G.name, q, int(r[q]), 0.5) for q in range(n))
    a_max = (n - 1) + c
    if into_fetched:  # G += sum (u - v) - (M + 1) r + (M + 1)/2 - c
        W2 = W2[:, :n].copy()
        W2[r, np.arange(n)] = -(M + 1.0)
        b2 = np.full(n, (M + 1) / 2 - c)
        writes, tail = names(G), (M + 1) * (n - 0.5) + (M + 1) / 2 + c
    else:  # F += sum (u - v) - M r - p + M/2, G -= r - 1/2
        p = 2 * n * n + n + np.arange(n)
        W1[np.arange(n), p] = 1.0
        b1[p] = c
        W2[r, np.arange(n)] = -M
        W2[p, np.arange(n)] = -1.0
        W2[r, n + np.arange(n)] = -1.0
        passes += tuple((F.name, q, int(p[q]), c) for q in range(n))
        writes, tail = names(F, G), M * (n - 0.5) + a_max + M / 2
    u_round, into = eps / 2, G if into_fetched else F
    magnitude = (2 * n - 1) * a_max + M * (n - 1) ** 2 + tail  # largest sum of |terms| in an output (u, v, r, p, bias)
    notes = {"kind": "compose", "n": n, "slope": M, "offset": c, "input_tolerance": c / M,
             "exact_input_noise": u_round / (4 * M * (1 + u_round)), "magnitude": magnitude,
             "float_exact": magnitude < 1 / eps, "into": into.name}
    declared = Compose(name, obligation_name(F), obligation_name(G), obligation_name(into))
    return MLP(name, [W1, W2], [b1, b2], notes, reads=names(F, G), writes=writes, passes=passes, obligation=declared)


# --- constant-depth gadgets (Theorem 11): counters, memory units, table lookups ------------
