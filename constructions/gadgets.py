"""Reusable gadgets: small heads and MLPs over named subspaces.

* :func:`offset_head` -- select the position t - offset (Theorem 10's look-back),
  BOS winning when that position does not exist.
* :func:`compose_mlp` -- the function-composition MLP (Lemma 14), built from the
  robust step units of :func:`step_units` (Lemma 10 with Delta = 1).
* :func:`carry_units` -- ``relu(x) - relu(-x)``: move exact values through hidden layers.
* :func:`distance_units` -- ``relu(x - v)`` and ``relu(v - x)`` for integer v, whose sums
  are L1 distances; used by element readouts.
* :func:`prefix_mean_head` with :func:`absorb_feature` -- uniform causal attention
  with a weight-absorbing BOS (Lemma 15), shared by the counters of Theorem 11 and
  the prefix sums of Theorem 12.
* :func:`residue_mlp` with :func:`residue_range` and :func:`residue_margin` -- an exact
  table of x mod M for an integer x read off such a prefix sum, coarse steps then a
  one-hot over the M residues (width O(range / M + M), O(sqrt(range)) for M ~ sqrt(range)).

Every gadget takes only the :class:`Subspace` s it reads and writes and constants
(never ``d_model`` or raw residual dims), declares them in ``reads``/``writes``
(workspace subspace names) and returns *local* float64 matrices: one row (or column)
per dim of those subspaces, in declaration order (constructions/program.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .budget import STEP_TOLERANCE
from .positions import PositionCode
from .program import MLP, Head
from .workspace import Subspace, names

ABSORB = "pos:absorb"
"""The position feature log(mass - t) that lets BOS absorb weight in :func:`prefix_mean_head`."""

__all__ = ["ABSORB", "STEP_TOLERANCE", "CodeInput", "OneHotInput", "Residue", "absorb_feature",
           "attention_temperature", "carry_units", "compose_mlp", "distance_units", "lookup_mlp",
           "modular_count_mlp", "offset_head", "onehot_bias", "prefix_mean_head", "recent_flag_head",
           "residue_hidden", "residue_margin", "residue_mlp", "residue_range", "round_mlp", "step_units"]


def _copy(src: Subspace, dst: Subspace, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A head's local ``W_V``, ``W_O`` copying ``src`` (times ``scale``) into ``dst``, one value dim each."""
    assert len(src) == len(dst)
    k = np.arange(len(src))
    W_V = np.zeros((len(src), len(src)))
    W_V[k, k] = scale
    W_O = np.zeros((len(src), len(dst)))
    W_O[k, k] = 1.0
    return W_V, W_O


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


def offset_head(name: str, pos: Subspace, code: PositionCode, bos: Subspace, one: Subspace,
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
    c = code.dim
    W_Q = np.zeros((c + 1, c + 1))  # rows: pos, one
    W_K = np.zeros((c + 1, c + 1))  # rows: pos, bos
    W_Q[:c, :c] = beta * code.rotation(offset)
    W_Q[c, c] = beta * bos_score
    W_K[:c, :c] = np.eye(c)
    W_K[c, c] = 1.0
    W_V, W_O = _copy(src, dst)
    return Head(name, W_Q, W_K, W_V, W_O, {"kind": "offset", "offset": offset, **t},
                reads={"query": names(pos, one), "key": names(pos, bos), "value": src.names}, writes=dst.names)


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


def carry_units(k: int) -> np.ndarray:
    """Local input weights [k, 2k] of units relu(x), relu(-x) over k input dims;
    their difference is x exactly."""
    W = np.zeros((k, 2 * k))
    W[np.arange(k), np.arange(k)] = 1.0
    W[np.arange(k), k + np.arange(k)] = -1.0
    return W


def compose_mlp(name: str, F: Subspace, G: Subspace) -> MLP:
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
    carry = carry_units(2 * n)
    n_carry = carry.shape[1]
    W1 = np.zeros((2 * n, n_steps + n_carry))  # rows: F, G
    b1 = np.zeros(n_steps + n_carry)
    for q in range(n):
        W1[n + q, q * k : (q + 1) * k] = w
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
    # output; columns: F, G
    W3 = np.zeros((n * n + n_carry, 2 * n))
    for q in range(n):
        W3[q * n : (q + 1) * n, q] = 1.0
    off = n * n
    # carry layout: [relu(F) (n), relu(G) (n), relu(-F) (n), relu(-G) (n)]
    Fp, Gp, Fm, Gm = (off + i * n + np.arange(n) for i in range(4))
    Fc, Gc = np.arange(n), n + np.arange(n)
    W3[Fp, Fc] -= 1.0
    W3[Fm, Fc] += 1.0
    W3[Gp, Gc] -= 1.0
    W3[Gm, Gc] += 1.0
    b3 = np.zeros(2 * n)
    notes = {"kind": "compose", "n": n, "step_slope": 1 / STEP_TOLERANCE,
             "input_tolerance": STEP_TOLERANCE, "selector_weight": big}
    return MLP(name, [W1, W2, W3], [b1, b2, b3], notes, reads=names(F, G), writes=names(F, G))


def distance_units(name: str, X: Subspace, n_values: int, out: Subspace) -> MLP:
    """Write a[i,v] = relu(X[i] - v) and b[i,v] = relu(v - X[i]) into ``out`` (2 n n_values dims).

    For an exact integer vector X, sum_i a[i,s_i] + b[i,s_i] = ||X - s||_1, which is 0
    for s = X and at least 1 otherwise: a linear unembedding of these units picks the
    matching element with logit margin 1.
    """
    n = len(X)
    assert len(out) == 2 * n * n_values
    W1 = np.zeros((n, 2 * n * n_values))
    b1 = np.zeros(2 * n * n_values)
    for i in range(n):
        for v in range(n_values):
            ja, jb = (i * n_values + v) * 2, (i * n_values + v) * 2 + 1
            W1[i, ja], b1[ja] = 1.0, -float(v)
            W1[i, jb], b1[jb] = -1.0, float(v)
    W2 = np.zeros((2 * n * n_values, len(out)))
    W2[np.arange(2 * n * n_values), np.arange(len(out))] = 1.0
    return MLP(name, [W1, W2], [b1, np.zeros(len(out))], {"kind": "distance", "n": n, "values": n_values},
               reads=X.names, writes=out.names)


# --- constant-depth gadgets (Theorem 11): counters, memory units, table lookups ------------


def absorb_feature(mass: int, max_len: int) -> np.ndarray:
    """The :data:`ABSORB` position feature, log(mass - t) for t = 0..max_len (Lemma 15).

    Row 0 is BOS's own position: BOS only ever attends to itself, so a construction
    may store it or leave it 0.  ``mass`` > max_len keeps every entry finite."""
    assert mass > max_len
    return np.log(mass - np.arange(max_len + 1, dtype=np.float64))


def prefix_mean_head(name: str, absorb: Subspace, bos: Subspace, src: Subspace, dst: Subspace,
                     mass: int, value_scale: float = 1.0) -> Head:
    """Uniform causal attention with a BOS that absorbs weight (Lemma 15).

    Every real position scores 0 and BOS scores log(mass - t) (the :data:`ABSORB`
    feature of t's position, :func:`absorb_feature`), so the weights are exactly 1/mass
    on positions 1..t and the rest on BOS, whose value is 0: ``dst`` receives
    value_scale * sum_{tau<=t} src_tau / mass, exactly proportional to the prefix sum at
    every t (``notes["scale"]`` turns it back into the sum).  Several sums share the
    head (one value dim each)."""
    W_Q = np.ones((1, 1))  # row: absorb
    W_K = np.ones((1, 1))  # row: bos
    W_V, W_O = _copy(src, dst, value_scale)
    notes = {"kind": "prefix-mean", "mass": mass, "value_scale": value_scale, "scale": mass / value_scale,
             "why": f"weights exactly 1/{mass} on each real position and the rest on BOS (value 0)"}
    return Head(name, W_Q, W_K, W_V, W_O, notes,
                reads={"query": absorb.names, "key": bos.names, "value": src.names}, writes=dst.names)


def recent_flag_head(name: str, flag: Subspace, recency: Subspace, one: Subspace, src: Subspace,
                     dst: Subspace, max_len: int, value_range: float) -> Head:
    """Attend to the most recent position whose ``flag`` is 1 (Lemma 16); BOS is flagged.

    Score = beta * (flag + recency / 2) with recency = tau/(T+1) from the position code:
    any flagged position beats any unflagged one by >= beta/2, and among flagged ones the
    latest wins by beta/(2(T+1)); beta is derived from that gap (Lemma 13)."""
    gap = 1.0 / (2 * (max_len + 1))
    t = attention_temperature(max_len, value_range, gap, STEP_TOLERANCE / 2)
    W_Q = np.zeros((1, 2))  # row: one
    W_K = np.zeros((2, 2))  # rows: flag, recency
    W_Q[0, 0], W_Q[0, 1] = t["beta"], t["beta"] / 2
    W_K[0, 0], W_K[1, 1] = 1.0, 1.0
    W_V, W_O = _copy(src, dst)
    return Head(name, W_Q, W_K, W_V, W_O, {"kind": "most-recent-flag", **t},
                reads={"query": one.names, "key": names(flag, recency), "value": src.names}, writes=dst.names)


def modular_count_mlp(name: str, mean: Subspace, new: Subspace, *, scale: float, initial: int,
                      modulus: int, max_count: int, increment: Subspace | None = None,
                      old: Subspace | None = None) -> MLP:
    """Decode a prefix mean into the counter value (Lemma 15's MLP, via Lemma 10 steps).

    x = scale * mean + initial is an integer in [initial, initial + max_count] up to noise.
    With steps s_j = 1[x >= j] for j = 1..M, x mod n = sum_j (1 - n [n | j]) s_j exactly,
    written as an integer code into ``new``.  With ``increment``/``old`` given, a second
    bank of steps on x - increment_t writes the value before step t into ``old``.
    Width 2M (4M with ``old``): it grows like n*T, as the paper's does.
    """
    s = 1.0 / STEP_TOLERANCE
    M = initial + max_count
    j = np.arange(1, M + 1, dtype=np.float64)
    weights_out = 1.0 - modulus * (j % modulus == 0)
    banks = [(new, None)] + ([(old, increment)] if old is not None else [])
    # local rows: mean (and increment); columns: new (and old) -- one bank per column
    reads = names(mean, increment if old is not None else None)
    W1 = np.zeros((len(reads), 2 * M * len(banks)))
    b1 = np.zeros(2 * M * len(banks))
    W2 = np.zeros((2 * M * len(banks), len(banks)))
    for k, (_, minus) in enumerate(banks):
        cols = slice(2 * M * k, 2 * M * (k + 1))
        W1[0, cols] = s * scale
        if minus is not None:
            W1[1, cols] = -s
        b1[cols] = np.stack([s * (initial - j) + 2.0, s * (initial - j) + 1.0], axis=1).reshape(-1)
        W2[cols, k] = np.stack([weights_out, -weights_out], axis=1).reshape(-1)
    return MLP(name, [W1, W2], [b1, np.zeros(len(banks))],
               {"kind": "modular-count", "modulus": modulus, "steps": M, "input_tolerance": STEP_TOLERANCE / scale,
                "scale": scale}, reads=reads, writes=names(new, old))


@dataclass(frozen=True)
class Residue:
    """Constants of :func:`residue_mlp` for integers x in a known range, read mod ``modulus``.

    ``offset`` T' is a multiple of M with x + T' >= 0 over the range (so x + T' = x mod M);
    ``n_coarse`` Nc: the coarse thresholds are iM, i = 1..Nc, with x + T' <= Nc M."""

    modulus: int
    offset: int
    n_coarse: int

    @property
    def span(self) -> int:
        """Nc M: the largest x + T' the coarse steps cover (and the size bound of every term)."""
        return self.n_coarse * self.modulus


def residue_range(low: int, high: int, modulus: int) -> Residue:
    """The :class:`Residue` for integers low <= x <= high mod M: T' = M ceil(-low / M), the
    smallest such multiple of M, and Nc = ceil((high + T') / M)."""
    assert low <= high and modulus >= 1
    offset = modulus * -(low // modulus)
    return Residue(modulus, offset, -(-(high + offset) // modulus))


def residue_hidden(residue: Residue, bos: bool) -> list[int]:
    """Hidden widths of :func:`residue_mlp` (``bos``: whether it zeroes its output at BOS)."""
    b = int(bos)
    return [residue.n_coarse + 1 + b, residue.n_coarse + 1 + b, 2 * residue.modulus + b, residue.modulus]


def residue_mlp(name: str, x: Subspace, residue: Residue, out: Subspace, table: np.ndarray, *,
                weights: tuple[float, ...] = (1.0,), shift: int = 0, bos: Subspace | None = None,
                notes: dict | None = None) -> MLP:
    """Write ``table[X mod M]`` into ``out`` exactly, X = sum_k weights[k] x[k] + shift an
    integer in the range of ``residue`` up to noise below STEP_TOLERANCE (Lemma 10's steps,
    coarse then fine; the decode of Theorem 12's prefix sums and Lemma 15's counters).

    With y = X + T' (>= 0) and slope s = 1/STEP_TOLERANCE (4 hidden layers):

    1. u_i = relu(s(y - iM) + 2), i = 1..Nc (0 for y <= iM - 1/2, >= 1 for y >= iM - 1/4);
       carries y (>= 0) and ``bos``;
    2. h_i = relu(1 - u_i) = 1[y < iM] exactly;
    3. r = y - M (Nc - sum_i h_i) = y mod M (an integer in 0..M-1 up to the input noise);
       p_v = relu(s(r - v) - 1), m_v = relu(s(v - r) - 1), v = 0..M-1; carries ``bos``;
    4. e_v = relu(1 - p_v - m_v - 2 bos) = 1[r = v] exactly (all 0 at BOS);

    out = sum_v e_v table[v]: one nonzero term, so the output is exactly ``table[v]`` in any
    dtype.  Widths :func:`residue_hidden`: Nc + M*3 units ~ (range / M) + 3M, so
    M ~ sqrt(range) gives O(sqrt(range)).  ``table`` is [M, len(out)].
    """
    M, Tp, Nc = residue.modulus, residue.offset, residue.n_coarse
    k = len(x)
    assert len(weights) == k and np.shape(table) == (M, len(out))
    has_bos = bos is not None
    b = int(has_bos)
    s = 1.0 / STEP_TOLERANCE  # ramp slope
    # hidden 1: ramps u_i; carries y = X + T' (>= 0) and bos.  Local rows: x, bos
    W1, b1 = np.zeros((k + b, Nc + 1 + b)), np.zeros(Nc + 1 + b)
    for i in range(1, Nc + 1):
        W1[:k, i - 1], b1[i - 1] = [s * w for w in weights], s * (Tp + shift - i * M) + 2.0
    W1[:k, Nc], b1[Nc] = weights, float(Tp + shift)
    if has_bos:
        W1[k, Nc + 1] = 1.0
    # hidden 2: h_i = relu(1 - u_i) = 1[y < iM] exactly
    W2, b2 = np.zeros((Nc + 1 + b, Nc + 1 + b)), np.zeros(Nc + 1 + b)
    W2[np.arange(Nc), np.arange(Nc)], b2[:Nc] = -1.0, 1.0
    W2[np.arange(Nc, Nc + 1 + b), np.arange(Nc, Nc + 1 + b)] = 1.0
    # hidden 3: r = y - M (Nc - sum h); p_v, m_v; carry bos
    W3, b3 = np.zeros((Nc + 1 + b, 2 * M + b)), np.zeros(2 * M + b)
    for v in range(M):
        W3[Nc, v], W3[:Nc, v], b3[v] = s, s * M, -s * M * Nc - s * v - 1.0
        W3[Nc, M + v], W3[:Nc, M + v], b3[M + v] = -s, -s * M, s * M * Nc + s * v - 1.0
    if has_bos:
        W3[Nc + 1, 2 * M] = 1.0
    # hidden 4: e_v = relu(1 - p_v - m_v - 2 bos) = 1[r = v]
    W4, b4 = np.zeros((2 * M + b, M)), np.ones(M)
    W4[np.arange(M), np.arange(M)] = -1.0
    W4[M + np.arange(M), np.arange(M)] = -1.0
    if has_bos:
        W4[2 * M, :] = -2.0
    W5 = np.array(table, dtype=np.float64)  # rows: residues; columns: out
    info = {"kind": "residue-code", **(notes or {}), "modulus": M, "offset": Tp, "coarse_steps": Nc,
            "input_tolerance": STEP_TOLERANCE, "slope": s, "hidden": residue_hidden(residue, has_bos)}
    if tuple(weights) != (1.0,) or shift:
        info |= {"weights": list(weights), "shift": shift}
    return MLP(name, [W1, W2, W3, W4, W5], [b1, b2, b3, b4, np.zeros(len(out))], info,
               reads=names(x, bos), writes=out.names)


def residue_margin(residue: Residue, eps: float) -> float:
    """How far the rounding of a dtype with machine epsilon ``eps`` stays inside the ramps of
    :func:`residue_mlp` (> 1 is safe; a worst-case bound).

    A ramp's pre-activation tolerates 1 (a quarter of a residue step at slope s = 4); the
    third hidden layer sums three terms (s y, s M sum h and the bias), each of size up to
    s Nc M, each rounded with relative error up to 2 eps."""
    s = 1.0 / STEP_TOLERANCE
    return 1.0 / (2 * eps * 3 * s * residue.span)


def round_mlp(name: str, src: Subspace, n_values: int, dst: Subspace) -> MLP:
    """Write the exact integer nearest to each noisy code in ``src`` (|noise| < 1/4) into
    ``dst`` and clear ``src`` (scratch filled by attention)."""
    w, b, _ = step_units(n_values)
    k = len(w)
    n = len(src)
    assert len(dst) == n
    W1 = np.zeros((n, n * k + 2 * n))  # rows: src
    b1 = np.zeros(n * k + 2 * n)
    W2 = np.zeros((n * k + 2 * n, 2 * n))  # columns: dst, src
    for i in range(n):
        W1[i, i * k : (i + 1) * k] = w
        b1[i * k : (i + 1) * k] = b
        W2[i * k : (i + 1) * k : 2, i] = 1.0  # sum of steps = the integer
        W2[i * k + 1 : (i + 1) * k : 2, i] = -1.0
    W1[:, n * k :] = carry_units(n)
    W2[n * k : n * k + n, n:] = -np.eye(n)
    W2[n * k + n :, n:] = np.eye(n)
    return MLP(name, [W1, W2], [b1, np.zeros(2 * n)], {"kind": "round", "input_tolerance": STEP_TOLERANCE},
               reads=src.names, writes=names(dst, src))


@dataclass(frozen=True)
class CodeInput:
    """A one-dim subspace holding an integer code in 0..n_values-1 (noise below STEP_TOLERANCE)."""

    sub: Subspace
    n_values: int


@dataclass(frozen=True)
class OneHotInput:
    """A subspace holding an exact one-hot (e.g. the current token); all zero matches nothing."""

    sub: Subspace


def lookup_mlp(name: str, inputs: list, out: Subspace,
               table: dict[tuple[int, ...], np.ndarray]) -> MLP:
    """A finite function of several discrete inputs (Lemma 11), exact on its table.

    Hidden 1: the one-hot of every input (step units for codes, a copy for one-hots).
    Hidden 2: one unit per table key, relu(sum_i onehot_i[key_i] - (m - 1)) = 1[input == key].
    Output: sum over keys of unit * table[key], a vector over ``out`` (len(out) entries).
    Inputs matching no key (e.g. BOS, whose token one-hot is zero) produce no output.
    Declares the inputs that have units (a code of one value has none) and the parts
    of ``out`` some row writes.
    """
    used = [i.sub for i in inputs if (i.n_values > 1 if isinstance(i, CodeInput) else len(i.sub))]
    reads = names(*used)
    row = _local_rows(used)  # local row of each (leaf name, index)
    cols: list[np.ndarray] = []  # per input: matrix [hidden1, n_values] giving its one-hot
    consts: list[np.ndarray] = []
    W1_parts, b1_parts = [], []
    offset = 0
    for inp in inputs:
        rows = [row.get((leaf.name, j)) for leaf in inp.sub.leaves for j in range(len(leaf))]
        if isinstance(inp, CodeInput):
            w, b, to_onehot = step_units(inp.n_values)
            W = np.zeros((len(row), len(w)))
            if len(w):
                W[rows[0]] = w
            W1_parts.append(W)
            b1_parts.append(b)
            cols.append((offset, to_onehot))
            consts.append(onehot_bias(inp.n_values))
            offset += len(w)
        else:
            k = len(inp.sub)
            W = np.zeros((len(row), k))
            W[rows, np.arange(k)] = 1.0
            W1_parts.append(W)
            b1_parts.append(np.zeros(k))
            cols.append((offset, np.eye(k)))
            consts.append(np.zeros(k))
            offset += k
    W1 = np.concatenate(W1_parts, axis=1) if W1_parts else np.zeros((len(row), 0))
    b1 = np.concatenate(b1_parts) if b1_parts else np.zeros(0)
    keys = sorted(table)
    m = len(inputs)
    W2 = np.zeros((offset, len(keys)))
    b2 = np.full(len(keys), -(m - 1.0))
    writes, kept = _written(out, [table[k] for k in keys])
    W3 = np.zeros((len(keys), len(kept)))  # columns: the written parts of ``out``
    for u, key in enumerate(keys):
        for i, v in enumerate(key):
            off, onehot = cols[i]
            W2[off : off + onehot.shape[0], u] += onehot[:, v]
            b2[u] += consts[i][v]
        W3[u] = table[key][kept]
    return MLP(name, [W1, W2, W3], [b1, b2, np.zeros(len(kept))],
               {"kind": "lookup", "keys": len(keys), "inputs": m, "input_tolerance": STEP_TOLERANCE},
               reads=reads, writes=writes)


def _local_rows(subspaces: list[Subspace]) -> dict[tuple[str, int], int]:
    """Local row of dim j of each allocated subspace behind ``subspaces`` (each leaf once, in order)."""
    out: dict[tuple[str, int], int] = {}
    for leaf in (leaf for s in subspaces for leaf in s.leaves):
        for j in range(len(leaf)):
            out.setdefault((leaf.name, j), len(out))
    return out


def _written(out: Subspace, rows: list[np.ndarray]) -> tuple[tuple[str, ...], list[int]]:
    """The parts of ``out`` that some row of a table writes (nonzero), and the positions
    of their dims within ``out``."""
    if not rows:
        return (), []
    hit = np.any(np.stack(rows) != 0, axis=0)
    written, kept, at = [], [], 0
    for leaf in out.leaves:
        if hit[at : at + len(leaf)].any():
            written.append(leaf.name)
            kept.extend(range(at, at + len(leaf)))
        at += len(leaf)
    return tuple(written), kept
