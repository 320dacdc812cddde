"""Reusable gadgets: small heads and MLPs over named subspaces.

* :func:`offset_head` -- select the position t - offset (Theorem 10's look-back),
  BOS winning when that position does not exist.
* :func:`compose_mlp` -- function composition of integer-coded maps in one hidden
  layer of O(n^2) units (Lemma 14's role, O(n^3) parameters), exact in float arithmetic.
* :func:`carry_units` -- ``relu(x) - relu(-x)``: move exact values through hidden layers.
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
           "attention_temperature", "carry_units", "compose_mlp", "compose_slope", "halfspace_lookup_mlp", "lookup_mlp",
           "offset_head", "onehot_bias", "PositionBlock", "prefix_mean_head", "recent_flag_head",
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
                offset: int, src: Subspace, dst: Subspace, value_range: float,
                tolerance: float = STEP_TOLERANCE / 2, *, absolute: bool = False,
                skip: Subspace | None = None) -> Head:
    """Attend from t to t - offset and copy ``src`` there into ``dst`` (Theorem 10's look-back).

    Query = beta * rotation(offset) of t's code, plus a constant BOS slot; key = the
    position code, plus ``bos``.  The wanted position scores ``match``, BOS scores
    halfway between ``match`` and ``miss``, every other position at most ``miss``;
    so BOS wins exactly when t - offset <= 0 (BOS holds the identity map).  beta keeps
    the copied values within ``tolerance`` (default: half a step unit's tolerance).

    With ``absolute`` the target is the fixed position ``offset`` (the query is the constant
    beta * code(offset), read from ``one``): BOS wins exactly when t < offset.  With
    ``skip`` (a 0/1 flag of the key positions) a flagged position loses ``match - miss``,
    so it scores at most ``miss`` and BOS wins there too, with the same gap.
    """
    match, miss = code.match_score, code.miss_score
    bos_score = (match + miss) / 2
    t = attention_temperature(code.max_len, value_range, (match - miss) / 2, tolerance)
    beta = t["beta"]
    c = code.dim
    width = c + 1 + (skip is not None)
    query = (one,) if absolute else (pos, one)
    W_Q = np.zeros((1 if absolute else c + 1, width))  # rows: [pos,] one
    if absolute:
        W_Q[0, :c] = beta * code.code(offset)
    else:
        W_Q[:c, :c] = beta * code.rotation(offset)
    W_Q[-1, c] = beta * bos_score
    W_K = np.eye(width)  # rows: pos, bos[, skip]
    key = (pos, bos)
    if skip is not None:
        W_Q[-1, c + 1] = -beta * (match - miss)
        key = (pos, bos, skip)
    W_V, W_O = _copy(src, dst)
    kind = {"kind": "absolute", "position": offset} if absolute else {"kind": "offset", "offset": offset}
    return Head(name, W_Q, W_K, W_V, W_O, {**kind, **t},
                reads={"query": names(*query), "key": names(*key), "value": src.names}, writes=dst.names)


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

    *Claim (floating point, unit roundoff u = eps/2).*  If every F[j] is an exact integer and
    |M d| (1 + u) < u/4, and the magnitude bound ``magnitude`` below is under 1/eps,
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
    u_round = eps / 2
    # largest sum of |terms| in any output (u, v at g = n-1, then r, p and the bias)
    magnitude = (2 * n - 1) * a_max + M * (n - 1) ** 2 + tail
    notes = {"kind": "compose", "n": n, "slope": M, "offset": c, "input_tolerance": c / M,
             "exact_input_noise": u_round / (4 * M * (1 + u_round)), "magnitude": magnitude,
             "float_exact": magnitude < 1 / eps, "into": G.name if into_fetched else F.name}
    return MLP(name, [W1, W2], [b1, b2], notes, reads=names(F, G), writes=writes, passes=passes)


# --- constant-depth gadgets (Theorem 11): counters, memory units, table lookups ------------


def absorb_feature(mass: int, max_len: int, start: int = 0, length: int | None = None) -> np.ndarray:
    """The :data:`ABSORB` position feature, log(mass - c(t)) for t = 0..max_len (Lemma 15),
    c(t) = clamp(t - start, 0, length) the number of positions start + 1 .. start + length
    up to t (``length`` None: every position, c(t) = t).

    Row 0 is BOS's own position: BOS only ever attends to itself, so a construction
    may store it or leave it 0.  ``mass`` > the count keeps every entry finite."""
    length = max_len if length is None else length
    assert mass > length
    return np.log(mass - np.clip(np.arange(max_len + 1) - start, 0, length).astype(np.float64))


@dataclass(frozen=True)
class PositionBlock:
    """Restrict :func:`prefix_mean_head` to the keys of one position block.

    ``member``: the blocks' one-hot over positions (BOS in none); ``index``: this block's
    column of it and of the (as many) :data:`ABSORB` columns; ``one``: the constant dim;
    ``beta``: the score every key outside the block loses; ``first``..``last``: the block's
    positions, of 1..``max_len``."""

    index: int
    member: Subspace
    one: Subspace
    beta: float
    first: int
    last: int
    max_len: int


def prefix_mean_head(name: str, absorb: Subspace, bos: Subspace, src: Subspace, dst: Subspace,
                     mass: int, value_scale: float = 1.0, block: PositionBlock | None = None) -> Head:
    """Uniform causal attention with a BOS that absorbs weight (Lemma 15).

    Every real position scores 0 and BOS scores log(mass - t) (the :data:`ABSORB`
    feature of t's position, :func:`absorb_feature`), so the weights are exactly 1/mass
    on positions 1..t and the rest on BOS, whose value is 0: ``dst`` receives
    value_scale * sum_{tau<=t} src_tau / mass, exactly proportional to the prefix sum at
    every t (``notes["scale"]`` turns it back into the sum).  Several sums share the
    head (one value dim each).

    With a ``block`` the head sums only the keys of that block: BOS scores its block's
    absorb column, log(mass - c(t)) with c(t) the block's keys up to t, an in-block key
    0 and any other real key -beta, score = absorb * bos + beta (member + bos - one)
    (exact: the key's second coordinate is 0 or -1).  The in-block keys weigh
    1/(mass + o e^-beta) for the o <= t out-of-block keys up to t; the heads of all blocks
    write into the same ``dst``, whose sum is then the whole prefix sum up to that leak."""
    W_V, W_O = _copy(src, dst, value_scale)
    notes = {"kind": "prefix-mean", "mass": mass, "value_scale": value_scale, "scale": mass / value_scale,
             "why": f"weights exactly 1/{mass} on each real position and the rest on BOS (value 0)"}
    if block is None:
        W_Q = np.ones((1, 1))  # row: absorb
        W_K = np.ones((1, 1))  # row: bos
        return Head(name, W_Q, W_K, W_V, W_O, notes,
                    reads={"query": absorb.names, "key": bos.names, "value": src.names}, writes=dst.names)
    s, h = len(block.member), block.index
    assert len(absorb) == s and len(block.one) == len(bos) == 1
    W_Q = np.zeros((s + 1, 2))  # rows: absorb (s blocks), one
    W_Q[h, 0], W_Q[s, 1] = 1.0, block.beta
    W_K = np.zeros((2 + s, 2))  # rows: bos, one, member (s blocks)
    W_K[0] = 1.0, 1.0
    W_K[1, 1] = -1.0
    W_K[2 + h, 1] = 1.0
    outside = block.max_len - (block.last - block.first + 1)  # most out-of-block keys a query sees
    notes |= {"block": h, "blocks": s, "block_keys": [block.first, block.last], "beta": block.beta,
              "leak_bound": outside * math.exp(-block.beta) / mass,
              "why": f"weights 1/{mass} on each real position of block {h} (others -beta) and the rest on BOS"}
    return Head(name, W_Q, W_K, W_V, W_O, notes,
                reads={"query": names(absorb, block.one), "key": names(bos, block.one, block.member),
                       "value": src.names}, writes=dst.names)


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


def residue_hidden(residue: Residue, bos: bool, minus_max: int | None = None, period: int = 0) -> list[int]:
    """Hidden widths of :func:`residue_mlp` (``bos``: whether it zeroes its output at BOS;
    ``minus_max``, ``period``: those of its read before an increment, None without one)."""
    b, M, Nc = int(bos), residue.modulus, residue.n_coarse
    if minus_max is None:
        return [Nc + 1 + b, Nc + 1 + b, 2 * M + b, M]
    c = 2 * minus_max  # the steps of D, carried
    return [Nc + 1 + b + c, Nc + 1 + b + c, 2 * M + b + c, M + c, period * (minus_max + 2)]


def residue_mlp(name: str, x: Subspace, residue: Residue, out: Subspace, table: np.ndarray, *,
                weights: tuple[float, ...] = (1.0,), shift: int = 0, bos: Subspace | None = None,
                minus: Subspace | None = None, minus_max: int = 0, minus_out: Subspace | None = None,
                period: int = 0, notes: dict | None = None) -> MLP:
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
    dtype.  ``table`` is [M, len(out)].  Widths :func:`residue_hidden`: about range / M + 3M,
    so M ~ sqrt(range) gives O(sqrt(range)).

    The value before an increment: with ``minus`` (a dim holding an exact integer D in
    0..``minus_max``, e.g. the increment at t) and a ``period`` p | M of ``table``, also
    writes ``table[(X - D) mod p]`` into ``minus_out``, from a fifth hidden layer:
    a_k = relu(sum_{v = k mod p} e_v) = 1[X = k mod p] and
    u_kd = relu(a_k + 1[D = d] - 1) = 1[X = k mod p, D = d] (k < p, d <= minus_max), with
    1[D = d] = g_d - g_{d+1} from the steps g_d = relu(D - d + 1) - relu(D - d) = 1[D >= d]
    (exact for an integer D; g_0 = 1) carried from layer 1; then out = sum_k a_k table[k]
    and minus_out = sum_kd u_kd table[(k - d) mod p].
    """
    M, Tp, Nc = residue.modulus, residue.offset, residue.n_coarse
    k = len(x)
    assert len(weights) == k and np.shape(table) == (M, len(out))
    has_bos, has_minus = bos is not None, minus is not None
    b = int(has_bos)
    s = 1.0 / STEP_TOLERANCE  # ramp slope
    dm = minus_max if has_minus else 0
    c = 2 * dm  # carried steps of D: relu(D - d + 1), relu(D - d) for d = 1..dm
    h12 = Nc + 1 + b + c
    # hidden 1: ramps u_i; carries y = X + T' (>= 0), bos and D's steps.  Local rows: x, minus, bos
    W1, b1 = np.zeros((k + int(has_minus) + b, h12)), np.zeros(h12)
    for i in range(1, Nc + 1):
        W1[:k, i - 1], b1[i - 1] = [s * w for w in weights], s * (Tp + shift - i * M) + 2.0
    W1[:k, Nc], b1[Nc] = weights, float(Tp + shift)
    if has_bos:
        W1[k + int(has_minus), Nc + 1] = 1.0
    for d in range(1, dm + 1):
        W1[k, Nc + b + 2 * d - 1], b1[Nc + b + 2 * d - 1] = 1.0, 1.0 - d
        W1[k, Nc + b + 2 * d], b1[Nc + b + 2 * d] = 1.0, -float(d)
    # hidden 2: h_i = relu(1 - u_i) = 1[y < iM] exactly
    W2, b2 = np.zeros((h12, h12)), np.zeros(h12)
    W2[np.arange(Nc), np.arange(Nc)], b2[:Nc] = -1.0, 1.0
    W2[np.arange(Nc, h12), np.arange(Nc, h12)] = 1.0
    # hidden 3: r = y - M (Nc - sum h); p_v, m_v; carry bos, D's steps
    h3 = 2 * M + b + c
    W3, b3 = np.zeros((h12, h3)), np.zeros(h3)
    for v in range(M):
        W3[Nc, v], W3[:Nc, v], b3[v] = s, s * M, -s * M * Nc - s * v - 1.0
        W3[Nc, M + v], W3[:Nc, M + v], b3[M + v] = -s, -s * M, s * M * Nc + s * v - 1.0
    if has_bos:
        W3[Nc + 1, 2 * M] = 1.0
    W3[Nc + 1 + b + np.arange(c), 2 * M + b + np.arange(c)] = 1.0
    # hidden 4: e_v = relu(1 - p_v - m_v - 2 bos) = 1[r = v]; carry D's steps
    W4, b4 = np.zeros((h3, M + c)), np.concatenate([np.ones(M), np.zeros(c)])
    W4[np.arange(M), np.arange(M)] = -1.0
    W4[M + np.arange(M), np.arange(M)] = -1.0
    if has_bos:
        W4[2 * M, :M] = -2.0
    W4[2 * M + b + np.arange(c), M + np.arange(c)] = 1.0
    if not has_minus:
        W5 = np.array(table, dtype=np.float64)  # rows: residues; columns: out
        weights_, biases_ = [W1, W2, W3, W4, W5], [b1, b2, b3, b4, np.zeros(len(out))]
    else:
        p = period
        table = np.asarray(table, dtype=np.float64)
        assert p >= 1 and M % p == 0 and np.array_equal(table, table[np.arange(M) % p]), "table needs period p | M"
        assert minus_out is not None and len(minus_out) == len(out)
        # hidden 5: a_k, then u_kd (k-major)
        W5, b5 = np.zeros((M + c, p * (dm + 2))), np.zeros(p * (dm + 2))
        step = np.zeros((c, dm + 1))  # 1[D = d] = g_d - g_{d+1} (g_0 = 1 from the bias) from the carried pairs
        for d in range(1, dm + 1):
            g = np.zeros(c)
            g[2 * d - 2], g[2 * d - 1] = 1.0, -1.0  # g_d = relu(D - d + 1) - relu(D - d)
            step[:, d] += g
            step[:, d - 1] -= g
        onehot_const = np.zeros(dm + 1)
        onehot_const[0] = 1.0
        for kk in range(p):
            members = np.arange(kk, M, p)
            W5[members, kk] = 1.0
            for d in range(dm + 1):
                col = p + kk * (dm + 1) + d
                W5[members, col] = 1.0
                W5[M:, col] = step[:, d]
                b5[col] = onehot_const[d] - 1.0
        W6 = np.zeros((p * (dm + 2), 2 * len(out)))  # columns: out, minus_out
        W6[:p, : len(out)] = table[:p]
        for kk in range(p):
            for d in range(dm + 1):
                W6[p + kk * (dm + 1) + d, len(out) :] = table[(kk - d) % p]
        weights_, biases_ = [W1, W2, W3, W4, W5, W6], [b1, b2, b3, b4, b5, np.zeros(2 * len(out))]
    info = {"kind": "residue-code", **(notes or {}), "modulus": M, "offset": Tp, "coarse_steps": Nc,
            "input_tolerance": STEP_TOLERANCE, "slope": s,
            "hidden": residue_hidden(residue, has_bos, dm if has_minus else None, period)}
    if tuple(weights) != (1.0,) or shift or has_minus:
        info |= {"weights": list(weights), "shift": shift, "minus_max": dm if has_minus else None,
                 "period": period if has_minus else None}
    return MLP(name, weights_, biases_, info,
               reads=names(x, minus, bos), writes=names(out, minus_out if has_minus else None))


def residue_margin(residue: Residue, eps: float) -> float:
    """How far the rounding of a dtype with machine epsilon ``eps`` stays inside the ramps of
    :func:`residue_mlp` (> 1 is safe; a worst-case bound).

    A ramp's pre-activation tolerates 1 (a quarter of a residue step at slope s = 4); the
    third hidden layer sums three terms (s y, s M sum h and the bias), each of size up to
    s Nc M, each rounded with relative error up to 2 eps."""
    s = 1.0 / STEP_TOLERANCE
    return 1.0 / (2 * eps * 3 * s * residue.span)


def round_mlp(name: str, src: Subspace, n_values: int, dst: Subspace) -> MLP:
    """Write the exact integer nearest to each noisy code in ``src`` (|noise| < STEP_TOLERANCE)
    into ``dst`` and clear ``src`` (scratch filled by attention).

    Lemma 10's thresholds, clipped so that they saturate *exactly*: hidden layer 1 holds ramps
    r_c = relu(s(x - c) + 2), c = 1..n-1, s = 1/STEP_TOLERANCE (>= 1 for x >= c - 1/4, 0 for
    x <= c - 3/4); hidden layer 2 holds k_c = relu(1 - r_c), which is exactly 0 or exactly 1
    whatever the noise, and the integer is (n - 1) - sum_c k_c, a sum of exact 0s and 1s.  So
    the code comes out with no rounding error at all, which a most-recent-flag head reading a
    flag computed from it needs (its scores compare flags at a precision of 1/(4(T + 1))).
    ``src`` is carried as relu(x), relu(-x) through both layers and subtracted."""
    n, k = len(src), n_values - 1
    assert len(dst) == n
    s = 1.0 / STEP_TOLERANCE
    width = n * k + 2 * n
    W1, b1 = np.zeros((n, width)), np.zeros(width)  # rows: src
    W2, b2 = np.zeros((width, width)), np.zeros(width)
    W3, b3 = np.zeros((width, 2 * n)), np.zeros(2 * n)  # columns: dst, src
    for i in range(n):
        ramps = slice(i * k, (i + 1) * k)
        W1[i, ramps] = s
        b1[ramps] = -s * np.arange(1, n_values) + 2.0
        W2[ramps, ramps] = -np.eye(k)
        b2[ramps] = 1.0
        W3[ramps, i] = -1.0
        b3[i] = float(k)
    carry = slice(n * k, width)
    W1[:, carry] = carry_units(n)
    W2[carry, carry] = np.eye(2 * n)
    W3[n * k : n * k + n, n:] = -np.eye(n)
    W3[n * k + n :, n:] = np.eye(n)
    return MLP(name, [W1, W2, W3], [b1, b2, b3], {"kind": "round", "input_tolerance": STEP_TOLERANCE},
               reads=src.names, writes=names(dst, src))


@dataclass(frozen=True)
class CodeInput:
    """An integer code in 0..n_values-1 (noise below STEP_TOLERANCE) in dim ``index`` of ``sub``
    (a one-dim subspace, or one dim of a wider one)."""

    sub: Subspace
    n_values: int
    index: int = 0


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
                W[rows[inp.index]] = w
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


def code_function_mlp(name: str, inp: CodeInput, out: Subspace, values: np.ndarray) -> MLP:
    """A function of one integer code in one hidden layer (Lemma 11 for a single input), exact
    for x within STEP_TOLERANCE of 0..n-1: ``values[x]`` (a vector over ``out``) is
    values[0] + sum over c of (values[c] - values[c-1]) 1[x >= c], each threshold a pair of
    :func:`step_units`, and only the thresholds where the value changes get units."""
    values = np.asarray(values, dtype=np.float64)
    w, b, _ = step_units(len(values))
    jumps = [c for c in range(1, len(values)) if np.any(values[c] != values[c - 1])]
    units = [2 * (c - 1) + i for c in jumps for i in (0, 1)]
    row = _local_rows([inp.sub])
    rows = [row[(leaf.name, j)] for leaf in inp.sub.leaves for j in range(len(leaf))]
    W1 = np.zeros((len(row), len(units)))
    W1[rows[inp.index]] = w[units]
    writes, kept = _written(out, list(values))
    W2 = np.zeros((len(units), len(kept)))
    for k, c in enumerate(jumps):  # 1[x >= c] = relu(unit 2k) - relu(unit 2k + 1)
        W2[2 * k] = values[c][kept] - values[c - 1][kept]
        W2[2 * k + 1] = -W2[2 * k]
    return MLP(name, [W1, W2], [b[units], values[0][kept]],
               {"kind": "code function", "thresholds": len(jumps), "input_tolerance": STEP_TOLERANCE},
               reads=inp.sub.names, writes=writes)


def separation(inside: np.ndarray, outside: np.ndarray, max_updates: int = 10_000, max_pairs: int = 250_000):
    """An integer direction w with min over ``inside`` of <w, c> above max over ``outside``
    (rows are integer codes), as (w, min inside, max outside), the one of smallest
    |w|_1 / gap among: every w in {-1, 0, 1}^d (d <= 6), the centroid direction
    n c - sum(all) for a single inside point, and a perceptron's over the differences
    c_in - c_out (exact integer updates, at most ``max_updates``, over at most ``max_pairs``
    differences; it finds one whenever the sets are strictly separable by a hyperplane,
    given enough updates).  None when none of them separates."""
    d = inside.shape[1]
    cands = [np.array(w, dtype=np.int64) - 1 for w in np.ndindex(*([3] * d))] if d <= 6 else []
    if len(inside) == 1:
        allc = np.concatenate([inside, outside])
        cands.append(len(allc) * inside[0] - allc.sum(0))
    if len(outside) and len(inside) * len(outside) <= max_pairs:
        D = (inside[:, None, :] - outside[None, :, :]).reshape(-1, d).astype(np.int64)
        w = np.zeros(d, dtype=np.int64)
        for _ in range(max_updates):  # perceptron: <w, c_in - c_out> > 0 for every pair
            bad = np.flatnonzero(D @ w <= 0)
            if not len(bad):
                cands.append(w)
                break
            w = w + D[bad[0]]
    W = np.array([c for c in cands if np.any(c)], dtype=np.int64).reshape(-1, d)
    lo = (inside @ W.T).min(0)
    hi = (outside @ W.T).max(0) if len(outside) else lo - 1
    ok = np.flatnonzero(lo > hi)
    if not len(ok):
        return None
    i = ok[np.argmin(np.abs(W[ok]).sum(1) / (lo[ok] - hi[ok]))]  # the first of the most tolerant
    return W[i].astype(np.float64), int(lo[i]), int(hi[i])


def interpolated_code_function_mlp(name: str, inp: CodeInput, out: Subspace, values: np.ndarray) -> MLP:
    """A function of one integer code in one hidden layer, linear between the codes: for x in
    [-1/2, n-1] (exact at x = 0..n-1), ``values[x]`` (a vector over ``out``) is

        values[0] + s_0 (relu(x + 1/2) - 1/2) + sum over c = 1..n-2 of (s_c - s_(c-1)) relu(x - c),

    with s_c = values[c+1] - values[c] the slope after code c; a unit only where the slope
    changes (and for s_0 when it is not 0), so at most as many units as
    :func:`code_function_mlp`'s two per value change, half as many where the value changes at
    neighbouring codes (0, 1, 0: 2 units, not 4).  Not flat near the codes: a code error e moves
    the output by at most L e (L the steepest |s_c|), so ``input_tolerance`` is
    STEP_TOLERANCE / L, within which the output stays within STEP_TOLERANCE of the value."""
    values = np.asarray(values, dtype=np.float64)
    slopes = np.diff(values, axis=0)  # [n-1, dims]
    units: list[tuple[float, np.ndarray]] = []  # (bias of relu(x + bias), output weights)
    if len(slopes) and np.any(slopes[0]):
        units.append((0.5, slopes[0]))
    for c in range(1, len(slopes)):
        if np.any(slopes[c] != slopes[c - 1]):
            units.append((-float(c), slopes[c] - slopes[c - 1]))
    row = _local_rows([inp.sub])
    rows = [row[(leaf.name, j)] for leaf in inp.sub.leaves for j in range(len(leaf))]
    writes, kept = _written(out, list(values))
    W1 = np.zeros((len(row), len(units)))
    W1[rows[inp.index]] = 1.0
    W2 = np.array([w[kept] for _, w in units]).reshape(len(units), len(kept))
    b2 = values[0][kept] - (0.5 * slopes[0][kept] if len(slopes) else 0.0)  # relu(x + 1/2) - 1/2 = x
    steepest = float(np.abs(slopes).max()) if slopes.size else 0.0
    return MLP(name, [W1, W2], [np.array([b for b, _ in units]), b2],
               {"kind": "interpolated code function", "units": len(units),
                "input_tolerance": STEP_TOLERANCE / max(steepest, 1.0)},
               reads=inp.sub.names, writes=writes)


def halfspace_lookup_mlp(name: str, inputs: list[CodeInput], out: Subspace, index: dict[tuple[int, ...], int],
                         domain: np.ndarray) -> MLP | None:
    """A lookup in one hidden layer: the integer ``index`` of each code in ``domain`` (rows:
    the codes that occur; a code not in ``index`` has index 0) into the one-dim ``out``, when
    halfspaces cut the keys off.  For each index value j >= 1, with K_j its codes:

    * a *step* 1[<w, x> >= lo] (two :func:`step_units`) when one hyperplane puts K_j above every
      other code of the domain (<w, c> <= lo - 1 there): exact for x within
      STEP_TOLERANCE / |w|_1 of the codes;
    * else a *cap* per code p of K_j, one unit relu((<w, x> - hi) / (<w, p> - hi)) that is
      1 at p and <= 0 at every other code (p a vertex of the domain's hull): off by at most
      |w|_1 e / (<w, p> - hi) for a code error e.

    The output is sum_j j (its steps or caps), exact at exact codes.  ``input_tolerance`` is the
    code error within which the output stays within STEP_TOLERANCE of the index.  None when some
    K_j is cut off neither way (then :func:`lookup_mlp` in two hidden layers)."""
    domain = np.asarray(domain, dtype=np.int64)
    units: list[tuple[np.ndarray, float, float]] = []  # (w over the inputs, bias, output weight)
    exact_slope, cap_slope = 0.0, 0.0
    for j in sorted(set(index.values()) - {0}):
        inside = np.array([k for k, v in index.items() if v == j], dtype=np.int64)
        key = {tuple(c) for c in inside.tolist()}
        outside = np.array([c for c in domain.tolist() if tuple(c) not in key], dtype=np.int64).reshape(-1, len(inputs))
        step = separation(inside, outside) if len(inside) > 1 else None
        if step is not None:
            w, lo, _ = step
            sw, sb, _ = step_units(2)  # 1[z >= 1], shifted to 1[z >= lo]
            units += [(w * sw[i], sb[i] - sw[i] * (lo - 1), j * (1.0 if i == 0 else -1.0)) for i in range(2)]
            exact_slope = max(exact_slope, float(np.abs(w).sum()))
            continue
        for p in inside:
            cap = separation(p[None], np.array([c for c in domain.tolist() if tuple(c) != tuple(p)],
                                                dtype=np.int64).reshape(-1, len(inputs)))
            if cap is None:
                return None
            w, top, hi = cap
            units.append((w / (top - hi), -hi / (top - hi), float(j)))
            cap_slope += j * float(np.abs(w).sum()) / (top - hi)
    used = [i.sub for i in inputs]
    row = _local_rows(used)
    W1 = np.zeros((len(row), len(units)))
    for i, inp in enumerate(inputs):
        r = [row[(leaf.name, k)] for leaf in inp.sub.leaves for k in range(len(leaf))][inp.index]
        W1[r] += [u[0][i] for u in units]
    tol = min(STEP_TOLERANCE / exact_slope if exact_slope else math.inf,
              STEP_TOLERANCE / cap_slope if cap_slope else math.inf)
    return MLP(name, [W1, np.array([[u[2]] for u in units]).reshape(len(units), 1)],
               [np.array([u[1] for u in units]), np.zeros(1)],
               {"kind": "halfspace lookup", "units": len(units), "input_tolerance": tol},
               reads=names(*used), writes=out.names)


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
