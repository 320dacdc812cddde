"""Residues and rounding: x mod M for an integer x read off a prefix sum (coarse steps, then a
one-hot over the M residues; Lemma 10's steps), and rounding a noisy integer code."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..budget import STEP_TOLERANCE
from ..obligations import Modular, Round
from ..program import MLP, obligation_name
from ..workspace import Subspace, names
from .compose import carry_units


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
    W3, b3, W4, b4 = _fine_one_hot(M, Nc, s, b, c)
    if not has_minus:
        W5 = np.array(table, dtype=np.float64)  # rows: residues; columns: out
        weights_, biases_ = [W1, W2, W3, W4, W5], [b1, b2, b3, b4, np.zeros(len(out))]
    else:
        table = np.asarray(table, dtype=np.float64)
        assert minus_out is not None and len(minus_out) == len(out)
        W5, b5, W6 = _before_increment(table, M, dm, period)
        weights_, biases_ = [W1, W2, W3, W4, W5, W6], [b1, b2, b3, b4, b5, np.zeros(2 * len(out))]
    info = {"kind": "residue-code", **(notes or {}), "modulus": M, "offset": Tp, "coarse_steps": Nc,
            "input_tolerance": STEP_TOLERANCE, "slope": s,
            "hidden": residue_hidden(residue, has_bos, dm if has_minus else None, period)}
    if tuple(weights) != (1.0,) or shift or has_minus:
        info |= {"weights": list(weights), "shift": shift, "minus_max": dm if has_minus else None,
                 "period": period if has_minus else None}
    decode = None
    if len(x) == 1:  # the obligation states a decode of one dim, over the table's ``period`` where it has one
        rows = np.asarray(table, dtype=np.float64)
        if period and M % period == 0 and np.array_equal(np.tile(rows[:period], (M // period, 1)), rows):
            rows = rows[:period]  # table[X mod M] = table[X mod p] for p | M
        decode = Modular(name, obligation_name(x), float(weights[0]), shift, rows,
                         obligation_name(out), None if minus is None else obligation_name(minus),
                         None if minus_out is None or not has_minus else obligation_name(minus_out))
    return MLP(name, weights_, biases_, info,
               reads=names(x, minus, bos), writes=names(out, minus_out if has_minus else None), obligation=decode)


def _fine_one_hot(M: int, Nc: int, s: float, b: int, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hidden layers 3 and 4 of :func:`residue_mlp`, from layer 2's h_i (Nc), y, ``b`` bos dims
    and ``c`` carried steps of D: r = y - M (Nc - sum h); p_v, m_v (v < M), carrying bos and the
    steps; then e_v = relu(1 - p_v - m_v - 2 bos) = 1[r = v], carrying the steps."""
    h12, h3 = Nc + 1 + b + c, 2 * M + b + c
    W3, b3 = np.zeros((h12, h3)), np.zeros(h3)
    for v in range(M):
        W3[Nc, v], W3[:Nc, v], b3[v] = s, s * M, -s * M * Nc - s * v - 1.0
        W3[Nc, M + v], W3[:Nc, M + v], b3[M + v] = -s, -s * M, s * M * Nc + s * v - 1.0
    if b:
        W3[Nc + 1, 2 * M] = 1.0
    W3[Nc + 1 + b + np.arange(c), 2 * M + b + np.arange(c)] = 1.0
    W4, b4 = np.zeros((h3, M + c)), np.concatenate([np.ones(M), np.zeros(c)])
    W4[np.arange(M), np.arange(M)] = -1.0
    W4[M + np.arange(M), np.arange(M)] = -1.0
    if b:
        W4[2 * M, :M] = -2.0
    W4[2 * M + b + np.arange(c), M + np.arange(c)] = 1.0
    return W3, b3, W4, b4


def _before_increment(table: np.ndarray, M: int, dm: int, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fifth hidden layer and the output of :func:`residue_mlp` with ``minus``: from the
    one-hot e_v over M residues and the 2 ``dm`` carried steps of D, a_k = 1[X = k mod p] and
    u_kd = 1[X = k mod p, D = d] (k-major), then the columns ``out`` (``table[k]``) and
    ``minus_out`` (``table[(k - d) mod p]``).  ``table`` [M, n] must have period p | M."""
    assert p >= 1 and M % p == 0 and np.array_equal(table, table[np.arange(M) % p]), "table needs period p | M"
    c, n = 2 * dm, table.shape[1]
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
    W6 = np.zeros((p * (dm + 2), 2 * n))  # columns: out, minus_out
    W6[:p, :n] = table[:p]
    for kk in range(p):
        for d in range(dm + 1):
            W6[p + kk * (dm + 1) + d, n:] = table[(kk - d) % p]
    return W5, b5, W6


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
               reads=src.names, writes=names(dst, src),
               obligation=Round(name, obligation_name(src), obligation_name(dst)))


