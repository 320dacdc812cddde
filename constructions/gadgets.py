"""Reusable gadgets: small heads and MLPs over named subspaces.

* :func:`offset_head` -- select the position t - offset (Theorem 10's look-back),
  BOS winning when that position does not exist.
* :func:`compose_mlp` -- the function-composition MLP (Lemma 14), built from the
  robust step units of :func:`step_units` (Lemma 10 with Delta = 1).
* :func:`carry_units` -- ``relu(x) - relu(-x)``: move exact values through hidden layers.
* :func:`distance_units` -- ``relu(x - v)`` and ``relu(v - x)`` for integer v, whose sums
  are L1 distances; used by element readouts.

Every gadget returns plain float64 matrices over the full residual width and
records its derived constants in ``notes``.
"""

from __future__ import annotations

import math

import numpy as np

from .positions import PositionCode
from .program import MLP, Head
from .workspace import Subspace

STEP_TOLERANCE = 0.25
"""Input noise a step unit absorbs: a quarter of the unit gap between integer codes (Lemma 10)."""


def attention_temperature(max_len: int, value_range: float, score_gap: float, tolerance: float) -> dict:
    """Inverse temperature beta so that a head's output is within ``tolerance`` of the hard choice.

    Lemma 13: with every other score at least ``score_gap`` below the winner,
    ||softmax - e||_1 <= 2 T exp(-beta * gap); the output then moves by at most
    that times ``value_range``.  Returns beta and the resulting bounds.
    """
    T = max_len + 1
    gamma = math.log(2 * T * max(value_range, 1.0) / tolerance)
    beta = gamma / score_gap
    return {"beta": beta, "score_gap": score_gap * beta, "leak_bound": 2 * T * math.exp(-gamma),
            "output_error_bound": tolerance}


def offset_head(name: str, d_model: int, pos: Subspace, code: PositionCode, bos: int, one: int,
                offset: int, src: Subspace, dst: Subspace, value_range: float) -> Head:
    """Attend from t to t - offset and copy ``src`` there into ``dst`` (Theorem 10's look-back).

    Query = beta * rotation(offset) of t's code, plus a constant BOS slot; key = the
    position code, plus ``bos``.  The wanted position scores ``match``, BOS scores
    halfway between ``match`` and ``miss``, every other position at most ``miss``;
    so BOS wins exactly when t - offset <= 0 (BOS holds the identity map).
    """
    match, miss = code.match_score, code.miss_score
    bos_score = (match + miss) / 2
    t = attention_temperature(code.max_len, value_range, (match - miss) / 2, STEP_TOLERANCE / 2)
    beta = t["beta"]
    dq = code.dim + 1
    W_Q = np.zeros((d_model, dq))
    W_K = np.zeros((d_model, dq))
    W_Q[list(pos.dims), : code.dim] = beta * code.rotation(offset)
    W_Q[one, code.dim] = beta * bos_score
    W_K[list(pos.dims), : code.dim] = np.eye(code.dim)
    W_K[bos, code.dim] = 1.0
    W_V = np.zeros((d_model, len(src)))
    W_V[list(src.dims), np.arange(len(src))] = 1.0
    W_O = np.zeros((len(src), d_model))
    W_O[np.arange(len(src)), list(dst.dims)] = 1.0
    return Head(name, W_Q, W_K, W_V, W_O, {"kind": "offset", "offset": offset, **t})


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


def onehot_bias(n_values: int) -> np.ndarray:
    """Constant term of the one-hot read from :func:`step_units` (the implicit step_0 = 1)."""
    e = np.zeros(n_values)
    e[0] = 1.0
    return e


def carry_units(d_model: int, dims: list[int]) -> np.ndarray:
    """Input weights [d_model, 2k] of units relu(x), relu(-x); their difference is x exactly."""
    W = np.zeros((d_model, 2 * len(dims)))
    W[dims, np.arange(len(dims))] = 1.0
    W[dims, len(dims) + np.arange(len(dims))] = -1.0
    return W


def compose_mlp(name: str, d_model: int, F: Subspace, G: Subspace) -> MLP:
    """Function composition (Lemma 14): F <- F o G, and clear the scratch G.

    F[q] holds (exactly) the integer code of f(q), G[q] the code of g(q) up to
    noise below STEP_TOLERANCE (it was fetched by attention).  Writes
    F[G[q]] - F[q] into F and -G into G, so afterwards F holds "g then f" and G is 0.

    Hidden 1: step units of every G[q] (2n(n-1)), carries of F and G (2n + 2n).
    Hidden 2: v[q,q'] = relu(n*1[G[q]=q'] + F[q'] - n) = F[q'] * 1[G[q]=q'] (n^2),
              carries passed on (relu of a non-negative unit is itself).
    """
    n = len(F)
    assert len(G) == n
    w, b, to_onehot = step_units(n)
    k = len(w)  # step units per G coordinate
    n_steps = n * k
    carry = carry_units(d_model, list(F.dims) + list(G.dims))
    n_carry = carry.shape[1]
    W1 = np.zeros((d_model, n_steps + n_carry))
    b1 = np.zeros(n_steps + n_carry)
    for q in range(n):
        W1[G[q], q * k : (q + 1) * k] = w
        b1[q * k : (q + 1) * k] = b
    W1[:, n_steps:] = carry
    # hidden 2
    big = float(n)  # exceeds every code value F[q'] <= n - 1
    W2 = np.zeros((n_steps + n_carry, n * n + n_carry))
    b2 = np.zeros(n * n + n_carry)
    ob = onehot_bias(n)
    for q in range(n):
        for qq in range(n):
            col = q * n + qq
            W2[q * k : (q + 1) * k, col] = big * to_onehot[:, qq]
            W2[n_steps + qq, col] += 1.0  # + F[q'] = relu(F[q']) - relu(-F[q'])
            W2[n_steps + 2 * n + qq, col] -= 1.0
            b2[col] = big * ob[qq] - big
    W2[n_steps:, n * n :] = np.eye(n_carry)
    # output
    W3 = np.zeros((n * n + n_carry, d_model))
    for q in range(n):
        W3[q * n : (q + 1) * n, F[q]] = 1.0
    off = n * n
    # carry layout: [relu(F) (n), relu(G) (n), relu(-F) (n), relu(-G) (n)]
    Fp, Gp, Fm, Gm = (off + i * n + np.arange(n) for i in range(4))
    W3[Fp, list(F.dims)] -= 1.0
    W3[Fm, list(F.dims)] += 1.0
    W3[Gp, list(G.dims)] -= 1.0
    W3[Gm, list(G.dims)] += 1.0
    b3 = np.zeros(d_model)
    notes = {"kind": "compose", "n": n, "step_slope": 1 / STEP_TOLERANCE,
             "input_tolerance": STEP_TOLERANCE, "selector_weight": big}
    return MLP(name, [W1, W2, W3], [b1, b2, b3], notes)


def distance_units(name: str, d_model: int, X: Subspace, n_values: int, out: Subspace) -> MLP:
    """Write a[i,v] = relu(X[i] - v) and b[i,v] = relu(v - X[i]) into ``out`` (2 n n_values dims).

    For an exact integer vector X, sum_i a[i,s_i] + b[i,s_i] = ||X - s||_1, which is 0
    for s = X and at least 1 otherwise: a linear unembedding of these units picks the
    matching element with logit margin 1.
    """
    n = len(X)
    assert len(out) == 2 * n * n_values
    W1 = np.zeros((d_model, 2 * n * n_values))
    b1 = np.zeros(2 * n * n_values)
    for i in range(n):
        for v in range(n_values):
            ja, jb = (i * n_values + v) * 2, (i * n_values + v) * 2 + 1
            W1[X[i], ja], b1[ja] = 1.0, -float(v)
            W1[X[i], jb], b1[jb] = -1.0, float(v)
    W2 = np.zeros((2 * n * n_values, d_model))
    W2[np.arange(2 * n * n_values), list(out.dims)] = 1.0
    return MLP(name, [W1, W2], [b1, np.zeros(d_model)], {"kind": "distance", "n": n, "values": n_values})
