"""Theorem 12 in standard blocks: the gridworld's two layers, each MLP with ONE hidden layer.

The default build (constructions/gridworld.py) decodes the prefix sum z into a residue code in
four hidden layers and evaluates the races in two, so in standard blocks (one attention sublayer
and one one-hidden-layer MLP each) it takes 6.  Here, per axis:

* **MLP 1: a one-hot of z over all 2T + 1 values** (T = max_len), not of a residue.  Value v's
  dim is step_v - step_(v+1), each step a pair of :func:`gadgets.step_units` on x = z + T
  (relu(4(x - c) + 2) - relu(4(x - c) + 1): exactly 1 for x >= c - 1/4, 0 for x <= c - 3/4), so
  z's own noise (below the prefix sum's tolerance) cancels exactly and each output dim reads
  only its own four units: its float error is at most e_far = 4 u V + gamma_5 (4 V + 1),
  V = 8T + 2 the largest unit (u the unit roundoff), and at its hot dim far less.  Declared as a
  :class:`~constructions.obligations.Lookup` on z: the one-hot of index z + T, which is z's
  residue mod M = 2T + 1 shifted (every z in -T..T has its own index, so nothing aliases; the
  walk's aliasing lemma covers it anyway).  BOS holds z = 0 and its code; its key cancels it.
* **Layer 2: 2S heads per axis match one-hot keys** against the query's one-hot shifted by d
  (a cyclic permutation, scaled by beta): a match scores 1, a miss 0 -- gap 1 -- plus the
  recency lambda j, lambda = 1/(2(T + 1)); BOS scores 3/4 (its key's code column cancelled by
  ``bos``), a quarter from both.  The one-hots' errors enter a match's score through the hot dims
  (2 e0) and the sum over the dims below the hot one of products of errors (the query's row errs
  as the key's: the sum of :func:`dim_errors` squared, each dim's bound from its own four units,
  about a third of M e_far^2), plus the dot product's rounding: E per unit of beta
  (:func:`score_error`).  beta is Lemma 13's for the gap lambda - 2E that survives them, and the
  build is refused where 4E > lambda (the gap would be under half the recency step): from
  T = 187 in float32, where the default build (unfolded) is used.
* **MLP 2: the races in one hidden layer**: [r(z - k) > r(z + S + 1 - k)] is one step pair on the
  difference of the two recencies, and the start rule [both 0][z + q0 >= k] one step pair on
  z + q0 - k + 1 - G (r1 + r2) (G = 2(T + S + 1): a matched head pushes it below 1/2), 4S units
  per axis: q = sum_k (step(r1 - r2) + step(x_k)).  The certificate proves each race on the cells
  of its pair's order (verify/certify/recency.py; where every unit of a race is surely on or
  surely off on a cell the race is affine there, so a step pair's two units cancel exactly).

Width: per axis 4T hidden units in MLP 1, 2T + 1 residual dims and heads of width 2T + 3.  The
obligations are the default build's kinds (Average, Lookup, Match, Races), so the certificate
and the program proof (verify/certify/walk.py: an M-cycle of one-hot codes) read them unchanged.

Why not a one-hot of z mod a small M (the default build's residue): the same hidden layer with
its output dims summed per residue class gives it, but a residue dim then sums about 8T / M step
units of size up to 8T, in an order a bound may not assume, so its proved error grows as
T^3 / M^2 and the scores' E grows as M shrinks -- every M < 2T + 1 is worse than none
(benchmarks/gridworld_residue_fold.py, measured with the certificate's own lookup bound).  The
find heads all read one key and copy one value, so TransformerLens holds them with one
key-value head per block (compiler.export.kv_heads).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .budget import STEP_TOLERANCE
from .gadgets import attention_temperature, onehot_bias, step_units
from .obligations import Lookup, Match, Race, Races
from .program import MLP, Head
from .workspace import Workspace


def onehot_size(max_len: int) -> int:
    """M = 2T + 1: one code per value of z in -max_len..max_len."""
    return 2 * max_len + 1


def onehot_labels(max_len: int) -> list[str]:
    """The residual labels of a one-hot code's dims: the value of z each stands for."""
    return [f"z={v:+d}" for v in range(-max_len, max_len + 1)]


def rec_name(axis: int, offsets: list[int], offset: int) -> str:
    """The obligations' name of the ``gw{a}:rec`` dim that the head of ``offset`` writes."""
    return f"gw{axis}:rec[{offsets.index(offset)}]"


def code_errors(max_len: int, eps: float) -> tuple[float, float]:
    """(e0, e_far): worst-case float errors of a one-hot dim of :func:`onehot_mlp` in a dtype with
    machine epsilon ``eps`` -- at the hot dim (its two live units are at most 2 + 1 apart from
    z's noise, which cancels) and anywhere (four units of size up to V = 8T + 2, each rounded
    once -- a power-of-two weight and an integer bias -- and their sum of five terms)."""
    u = eps / 2
    g5 = 5 * u / (1 - 5 * u)
    V = 8.0 * max_len + 2.0
    return 4 * u * 3 + g5 * 6, 4 * u * V + g5 * (4 * V + 1)


def dim_errors(max_len: int, eps: float) -> np.ndarray:
    """The float error bound of a one-hot dim k = 1..2T values below the hot one (the dims above it
    are exactly 0: every unit surely off): its four live units, 4k + 2, 4k + 1, 4k - 2, 4k - 3 (each
    up to 1 more from z's tolerance of 1/4), each rounded once, and their sum of five terms --
    :func:`code_errors`'s e_far with the row's own sizes, as the certificate bounds each row."""
    u = eps / 2
    g5 = 5 * u / (1 - 5 * u)
    size = 16.0 * np.arange(1, onehot_size(max_len)) + 2.0
    return u * size + g5 * (size + 1)


def score_error(max_len: int, eps: float) -> float:
    """E: a layer-2 score's worst-case error per unit of beta from the one-hot codes (query and
    key) when they match: the hot dims' errors (2 e0), the products of errors over the dims below
    the hot one, where the query's and the key's rows err alike (the query's code is the key's
    shifted by the head's offset, so its dim k below the match is its own k below: the sum of
    :func:`dim_errors` squared), and the dot product's rounding over M + 3 terms of total size at
    most 2 (twice, generously)."""
    e0, _ = code_errors(max_len, eps)
    M, u = onehot_size(max_len), eps / 2
    return 2 * e0 + float(np.sum(dim_errors(max_len, eps) ** 2)) + 4 * (M + 3) * u / (1 - (M + 3) * u)


PROOF_PAIRS = 50_000
"""The most (automaton state, program memory) pairs the certificate's program proof searches
(verify/certify/program.py).  Its memory keeps each axis's last-visit label, one of 2T + 1 one-hot
codes, so a box world's axes take their product: a build whose |Q| prod_a (2T + 1) exceeds this
would be weight-proved but not proved against the automaton, and is not taken."""


def refusal(max_len: int, eps: float, n_axes: int = 1, n_states: int = 1) -> str | None:
    """Why the one-hidden-layer build is not taken at ``max_len`` in this dtype, or None: the
    scores' error E (:func:`score_error`) must leave at least half the recency step lambda, and a
    box world's joint one-hot labels must fit the program proof (:data:`PROOF_PAIRS`)."""
    lam = 1.0 / (2.0 * (max_len + 1))
    E = score_error(max_len, eps)
    labels = n_states * onehot_size(max_len) ** n_axes
    if n_axes > 1 and labels > PROOF_PAIRS:
        return (f"one-hidden-layer gridworld at max_len {max_len}: the program proof would keep {n_axes} axes' "
                f"one-hot labels jointly ({n_states} states x {onehot_size(max_len)}^{n_axes} = {labels:,}, over its "
                f"{PROOF_PAIRS:,} pairs)")
    if 4 * E > lam:
        _, far = code_errors(max_len, eps)
        return (f"one-hidden-layer gridworld at max_len {max_len}: the one-hot codes' worst-case rounding "
                f"(up to {far:.3g} per dim, {E:.3g} per score over {onehot_size(max_len)} dims) leaves under half "
                f"the recency step {lam:.3g} (needs 4E <= lambda)")
    return None


def constants(S: int, max_len: int, eps: float) -> dict[str, float]:
    """The standard build's head and MLP 2 constants (gridworld.constants' roles: G, tol, lambda,
    sink, beta), for one-hot codes: match 1, miss 0, and beta for the gap lambda - 2E.  BOS scores
    3/4, midway between a miss's largest score lambda T < 1/2 and a match's smallest, 1 + lambda:
    a margin of 1/4 either way, which the codes' error e_far away from the hot dims cannot reach
    (the default build's BOS, half a gap below a match, is one recency step above the latest miss)."""
    G = 2.0 * (max_len + S + 1)
    tol = 1.0 / (64.0 * G)
    lam = 1.0 / (2.0 * (max_len + 1))
    E = score_error(max_len, eps)
    t = attention_temperature(max_len, value_range=max_len, score_gap=lam - 2 * E, tolerance=tol)
    return {"P": 1.0, "gap": 1.0, "G": G, "tol": tol, "lambda": lam, "sink": 0.75, "score_error": E, **t,
            "z_tolerance": STEP_TOLERANCE - 2 * G * tol}


def onehot_mlp(name: str, ws: Workspace, axis: int, max_len: int) -> MLP:
    """MLP 1 of one axis in one hidden layer: ``gw{a}:code`` gets the one-hot of index z + T
    (module doc).  Obligation: a :class:`~constructions.obligations.Lookup` on z."""
    M = onehot_size(max_len)
    w, b, combine = step_units(M)  # thresholds c = 1..M-1 on x = z + T
    W1, b1 = w[None, :], b + w * max_len
    z, code = f"gw{axis}:z", f"gw{axis}:code"
    table: dict[tuple[int, ...], np.ndarray] = {(v,): np.eye(M)[v + max_len] for v in range(-max_len, max_len + 1)}
    return MLP(name, [W1, combine], [b1, onehot_bias(M)], {"kind": "one-hot", "axis": axis, "values": M},
               reads=ws[z].names, writes=ws[code].names, obligation=Lookup(name, (z,), code, table))


def onehot_head(ws: Workspace, axis: int, offsets: list[int], offset: int, c: dict[str, float],
                max_len: int) -> Head:
    """Layer 2: the last position j >= 1 with z_j = z_t + offset, or BOS; copies j (module doc).
    Obligation: a :class:`~constructions.obligations.Match` over the M one-hot codes, query code i
    looking for code i + offset (mod M)."""
    M = onehot_size(max_len)
    beta = c["beta"]
    W_Q = np.zeros((M + 1, M + 2))  # rows: code, one
    W_K = np.zeros((M + 2, M + 2))  # rows: code, pos:index, bos
    shift = (np.arange(M) + offset) % M
    W_Q[np.arange(M), shift] = beta  # one-hot(i) -> one-hot(i + offset)
    W_Q[M, M], W_Q[M, M + 1] = beta * c["lambda"], beta * c["sink"]
    W_K[:M, :M] = np.eye(M)
    W_K[M, M] = 1.0
    W_K[M + 1, M + 1] = 1.0
    W_K[M + 1, max_len] = -1.0  # BOS holds z = 0's code: its key drops it
    W_V, W_O = np.ones((1, 1)), np.zeros((1, len(offsets)))
    W_O[0, offsets.index(offset)] = 1.0
    code, name = f"gw{axis}:code", f"gw{axis}.find{offset:+d}"
    notes = {"kind": "nearest-value", "axis": axis, "offset": offset, "codes": M, "beta": beta,
             "lambda": c["lambda"], "sink": c["sink"], "score_gap": c["score_gap"], "leak_bound": c["leak_bound"],
             "output_error_bound": c["tol"], "score_error": c["score_error"]}
    declared = Match(name, code, code, np.eye(M), shift, "pos:index", rec_name(axis, offsets, offset))
    return Head(name, W_Q, W_K, W_V, W_O, notes,
                reads={"query": (code, "one"), "key": (code, "pos:index", "bos"), "value": ("pos:index",)},
                writes=(f"gw{axis}:rec",), obligation=declared)


def boundary_mlp(axis: int, S: int, offsets: list[int], c: dict[str, float]) -> MLP:
    """MLP 2 of one axis in one hidden layer (module doc): per k a step pair on r1 - r2 and one on
    z + q0 - k + 1 - G (r1 + r2), G = ``c["G"]``.  Obligation: :class:`Races`, as the default build's."""
    G = c["G"]
    w, b, combine = step_units(2)  # [x >= 1] = relu(4x - 2) - relu(4x - 3) for x near an integer
    step = combine[:, 1]
    z, q0 = 2 * S, 2 * S + 1  # local rows: rec (one per offset), z, start
    W1, b1 = np.zeros((2 * S + 2, 4 * S)), np.zeros(4 * S)
    W2 = np.zeros((4 * S, 1))
    for k in range(1, S + 1):
        r1, r2 = offsets.index(-k), offsets.index(S + 1 - k)
        race, start = slice(4 * (k - 1), 4 * (k - 1) + 2), slice(4 * (k - 1) + 2, 4 * k)
        W1[r1, race], W1[r2, race] = w, -w  # x = r1 - r2
        b1[race] = b
        W1[z, start], W1[q0, start] = w, w  # x = z + q0 - k + 1 - G (r1 + r2)
        W1[r1, start], W1[r2, start] = -G * w, -G * w
        b1[start] = b + w * (1 - k)
        W2[race, 0], W2[start, 0] = step, step
    notes = {"kind": "boundary-count", "axis": axis, "S": S, "G": G, "input_tolerance": STEP_TOLERANCE,
             "z_tolerance": c["z_tolerance"], "head_output_tolerance": c["tol"], "hidden": [4 * S]}
    level = (f"gw{axis}:z", f"gw{axis}:start")
    races = tuple(Race(rec_name(axis, offsets, -k), rec_name(axis, offsets, S + 1 - k), level, k, f"gw{axis}:state")
                  for k in range(1, S + 1))
    return MLP(f"gw{axis}.boundary", [W1, W2], [b1, np.zeros(1)], notes,
               reads=(f"gw{axis}:rec", f"gw{axis}:z", f"gw{axis}:start"), writes=(f"gw{axis}:state",),
               obligation=Races(f"gw{axis}.boundary", races))


def meta(max_len: int, eps: float, consts: list[dict[str, float]]) -> dict[str, Any]:
    """What a standard build records: the codes' error bounds and each axis's score error and beta."""
    e0, far = code_errors(max_len, eps)
    return {"codes": onehot_size(max_len), "hot_dim_error": e0, "code_error": far,
            "score_error": score_error(max_len, eps), "recency_step": 1.0 / (2.0 * (max_len + 1)),
            "beta": [c["beta"] for c in consts]}
