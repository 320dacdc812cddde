"""Staircases: a function of a prefix sum X (an integer up to noise) and of exact discrete gates
in *two* hidden layers, exact -- a residue decode and the lookups that read it fused, wide
instead of deep (every threshold of X, not coarse then fine steps)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..budget import STEP_TOLERANCE
from ..program import MLP
from ..workspace import Subspace, names
from .compose import onehot_bias, step_units
from .lookups import CodeInput, OneHotInput, _local_dims, _local_rows

RAMP_SLOPE = 2.0 / (1.0 - 2.0 * STEP_TOLERANCE)
"""Slope s of a staircase's ramps: relu(s(X - j) + s(1 - STEP_TOLERANCE)) is exactly 0 for
X <= j - 1 + STEP_TOLERANCE and at least 2 for X >= j - STEP_TOLERANCE (s = 4 at a quarter)."""


@dataclass(frozen=True)
class Ramp:
    """A scalar X = ``scale`` * (the dim of ``sub``) + ``shift``: an integer in 0..``high`` up to
    noise below STEP_TOLERANCE (a prefix sum, Lemma 15); with ``more``, plus ``scale_i`` * (the dim
    of ``sub_i``) for each pair there (a sum of prefix sums, whose noises add: the caller's bound)."""

    sub: Subspace
    scale: float
    shift: int
    high: int
    more: tuple[tuple[Subspace, float], ...] = ()

    @property
    def terms(self) -> list[tuple[Subspace, float]]:
        """Every (subspace, scale) the ramp reads."""
        return [(self.sub, self.scale), *self.more]


@dataclass(frozen=True)
class Stair:
    """One output of :func:`staircase_mlp`: ``out`` gets ``values[g][X]`` ([high + 1, len(out)])
    where g holds the codes of the gate inputs ``gates`` (indices) and X is ramp ``ramp``'s
    integer; with ``ramp`` None, ``values[g]`` is one row ([1, len(out)]): a lookup of the gates.
    A gate combination missing from ``values`` writes 0."""

    out: Subspace
    ramp: int | None
    gates: tuple[int, ...]
    values: dict[tuple[int, ...], np.ndarray]


@dataclass(frozen=True)
class StairLookup:
    """A lookup (Lemma 11) after the stairs, for a table of several ramps' codes: ``out`` gets
    ``table[key]`` (0 for a key not in it), the key's codes read from ``reads``: ``("stair", k)``
    the code stair k writes (one dim), ``("gate", i)`` gate i's code (a one-hot's hot dim)."""

    out: Subspace
    reads: tuple[tuple[str, int], ...]
    table: dict[tuple[int, ...], np.ndarray]


def staircase_mlp(name: str, ramps: list[Ramp], gates: list[CodeInput | OneHotInput], stairs: list[Stair],
                  obligation=None, notes: dict | None = None, joints: tuple[StairLookup, ...] = ()) -> MLP:
    """Every :class:`Stair` exactly, in two hidden layers (Lemma 10's steps at every threshold of
    X, gated as Lemma 11's lookup units):

    1. ramps u_j = relu(s(X - j) + s(1 - tau)), j = 1..high (exactly 0 for X <= j - 1 + tau,
       >= 2 for X >= j - tau; tau = STEP_TOLERANCE, s = :data:`RAMP_SLOPE`); each code gate's
       step units and each one-hot gate copied, from which 1[gate = v] is a sum with integer
       weights (exact for exact gates);
    2. per (ramp, gates, gate codes g) that some stair reads, with k gates:
       m_g = relu(1 - 2(k - sum_i 1[gate_i = g_i])) = 1[gates = g] and
       h_gj = relu(1 - u_j - 2(k - sum_i 1[gate_i = g_i])) = 1[X < j and gates = g]:
       1, or at most -1 (never at the kink), so exact 0 or 1 whatever the noise on X.

    out = sum_g F_g(high) m_g + sum_j (F_g(j - 1) - F_g(j)) h_gj = F_g(X) at the gates' codes g:
    a sum of exact 0s and 1s with the table's integer codes as weights, so exact in any dtype.
    Width: high + 1 units per gate combination (O(T) per counter), less the units no output reads
    (thresholds where no stair's table changes, ramps no such unit reads: :meth:`MLP.pruned`); the
    obligation is the caller's (the decode and lookups it replaces, which compute the same function).

    With ``joints`` (tables of several ramps, which one gated staircase cannot read: its units are
    per combination of every threshold), a third hidden layer (:func:`_joint_layer`): the stairs'
    codes carried (relu(c) = c for codes >= 0) and one AND unit per key of each :class:`StairLookup`,
    relu(2 sum_i 1[code_i = key_i] - (2m - 1)), its one-hots read off the exact second layer."""
    s = RAMP_SLOPE
    used_gates = [g for g in gates if (g.n_values > 1 if isinstance(g, CodeInput) else len(g.sub))]
    subs = list({s_.name: s_ for s_ in [t for r in ramps for t, _ in r.terms] + [g.sub for g in used_gates]}.values())
    row = _local_rows(subs)
    W1_cols: list[np.ndarray] = []
    b1_parts: list[np.ndarray] = []
    at = 0
    ramp_at: list[int] = []
    for r in ramps:  # ramp j at unit ramp_at + j - 1
        w = np.zeros((len(row), r.high))
        for sub, scale in r.terms:
            w[_local_dims(row, sub)[0]] += s * scale
        W1_cols.append(w)
        b1_parts.append(s * (r.shift - np.arange(1, r.high + 1)) + s * (1 - STEP_TOLERANCE))
        ramp_at.append(at)
        at += r.high
    match: list[tuple[int, np.ndarray, np.ndarray]] = []  # per gate: first unit, [units, values] weights, constants
    for g in gates:
        if g not in used_gates:
            match.append((at, np.zeros((0, 1)), np.ones(1)))
            continue
        if isinstance(g, CodeInput):
            w_, b_, combine = step_units(g.n_values)
            const = onehot_bias(g.n_values)
            w = np.zeros((len(row), len(w_)))
            w[_local_dims(row, g.sub)[g.index]] = w_
        else:  # a one-hot, copied: relu(x) = x
            k = len(g.sub)
            b_, combine, const = np.zeros(k), np.eye(k), np.zeros(k)
            w = np.zeros((len(row), k))
            w[_local_dims(row, g.sub), np.arange(k)] = 1.0
        W1_cols.append(w)
        b1_parts.append(b_)
        match.append((at, combine, const))
        at += len(b_)
    W1, b1 = np.concatenate(W1_cols, axis=1), np.concatenate(b1_parts)
    units, W2, b2 = _gated_units(ramps, ramp_at, gates, match, stairs, at)
    out_rows = _local_rows([st.out for st in stairs])
    W3 = np.zeros((len(b2), len(out_rows)))
    for st in stairs:
        cols = _local_dims(out_rows, st.out)
        for gv, F in st.values.items():
            F = np.asarray(F, dtype=np.float64).reshape(-1, len(st.out))
            base = units[(st.ramp, st.gates, gv)]
            W3[base, cols] += F[-1]
            if st.ramp is not None:
                W3[base + 1 : base + 1 + len(F) - 1, cols] += F[:-1] - F[1:]
    info = {"kind": "staircase", **(notes or {}), "thresholds": [r.high for r in ramps], "slope": s,
            "gate_combinations": len(units), "input_tolerance": STEP_TOLERANCE}
    outs = [st.out for st in stairs]
    Ws, bs = [W1, W2, W3], [b1, b2, np.zeros(len(out_rows))]
    if joints:
        Ws, bs = _joint_layer(Ws, bs, gates, match, stairs, units, joints)
        outs += [j.out for j in joints]
        info["joint_keys"] = sum(len(j.table) for j in joints)
    return MLP(name, Ws, bs, info, reads=names(*subs), writes=names(*outs), obligation=obligation).pruned()


def _one_hot(st: Stair, units: dict[tuple, int], width: int, v: int) -> np.ndarray:
    """Weights on the second layer giving 1[stair ``st``'s code = v] exactly (its units' 0s and 1s)."""
    w = np.zeros(width)
    for g, F in st.values.items():
        F = np.asarray(F).reshape(-1)
        base = units[(st.ramp, st.gates, g)]
        w[base] += float(F[-1] == v)
        if st.ramp is not None:
            w[base + 1 : base + len(F)] += (F[:-1] == v).astype(np.float64) - (F[1:] == v)
    return w


def _joint_layer(Ws: list[np.ndarray], bs: list[np.ndarray], gates: list, match: list, stairs: list[Stair],
                 units: dict[tuple, int], joints: tuple[StairLookup, ...]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """:func:`staircase_mlp`'s third hidden layer: second-layer one-hot units of the gates the
    joints read, the stairs' codes carried, one AND unit per joint key; the output."""
    W1, W2, W3 = Ws
    b2 = bs[1]
    assert all(np.all(np.asarray(F) >= 0) for st in stairs for F in st.values.values()), "codes must be >= 0"
    hot: dict[tuple[int, int], int] = {}  # (gate, value) -> second-layer unit
    extra: list[np.ndarray] = []
    extra_b: list[float] = []
    for j in joints:
        for kind, i in j.reads:
            if kind != "gate":
                continue
            first, combine, const = match[i]
            for v in range(combine.shape[1]):
                if (i, v) not in hot:
                    col = np.zeros(W1.shape[1])
                    col[first : first + combine.shape[0]] = combine[:, v]
                    hot[(i, v)] = len(b2) + len(extra)
                    extra.append(col)
                    extra_b.append(const[v])
    W2 = np.concatenate([W2, np.stack(extra, axis=1)], axis=1) if extra else W2
    b2 = np.concatenate([b2, extra_b])
    H2, n_carry = len(b2), W3.shape[1]
    keys = [(j, key) for j in joints for key in sorted(j.table)]
    W3n = np.zeros((H2, n_carry + len(keys)))
    W3n[: W3.shape[0], :n_carry] = W3
    b3 = np.zeros(n_carry + len(keys))
    out_rows = _local_rows([j.out for j in joints])
    W4 = np.zeros((n_carry + len(keys), n_carry + len(out_rows)))
    W4[np.arange(n_carry), np.arange(n_carry)] = 1.0
    for u, (j, key) in enumerate(keys):
        col = n_carry + u
        for (kind, i), v in zip(j.reads, key):
            if kind == "gate":
                W3n[hot[(i, v)], col] += 2.0
            else:
                W3n[:, col] += 2.0 * _one_hot(stairs[i], units, H2, v)
        b3[col] = -(2.0 * len(key) - 1.0)
        W4[col, n_carry + np.array(_local_dims(out_rows, j.out))] = j.table[key]
    return [W1, W2, W3n, W4], [bs[0], b2, b3, np.zeros(W4.shape[1])]


def _gated_units(ramps: list[Ramp], ramp_at: list[int], gates: list, match: list, stairs: list[Stair],
                 width1: int) -> tuple[dict[tuple, int], np.ndarray, np.ndarray]:
    """:func:`staircase_mlp`'s second hidden layer: per (ramp, gates, codes) some stair reads, the
    match unit m_g then h_gj for j = 1..high (the stairs sharing them add their weights)."""
    units: dict[tuple, int] = {}
    cols: list[np.ndarray] = []
    bias: list[float] = []
    for st in stairs:
        for g in st.values:
            key = (st.ramp, st.gates, g)
            if key in units:
                continue
            units[key] = len(bias)
            pre, b = np.zeros(width1), 1.0 - 2.0 * len(st.gates)
            for i, v in zip(st.gates, g):
                first, combine, const = match[i]
                pre[first : first + combine.shape[0]] += 2.0 * combine[:, v]
                b += 2.0 * const[v]
            cols.append(pre)
            bias.append(b)
            if st.ramp is not None:
                for j in range(1, ramps[st.ramp].high + 1):
                    col = pre.copy()
                    col[ramp_at[st.ramp] + j - 1] -= 1.0
                    cols.append(col)
                    bias.append(b)
    return units, np.stack(cols, axis=1), np.array(bias)


def staircase_margin(ramps: list[Ramp], eps: float) -> float:
    """How far the rounding of a dtype with machine epsilon ``eps`` stays inside the ramps of
    :func:`staircase_mlp` (> 1 is safe; a worst-case bound): a ramp's pre-activation tolerates
    s tau = 1 beyond the input's own noise and sums two terms, s X and the bias, each of size up
    to s high, each rounded with relative error up to 2 eps."""
    top = max((r.high for r in ramps), default=0)
    return 1.0 / (2 * eps * 2 * RAMP_SLOPE * max(top, 1))


def interpolation_mlp(name: str, parts: list[tuple[Ramp, list[tuple[Subspace, np.ndarray]]]],
                      obligation=None, notes: dict | None = None) -> MLP:
    """Functions F of ramps' integers X in ONE hidden layer (per part: a ramp and its outputs, each
    with values [high + 1, len(out)]): F's piecewise-linear interpolation through the integers,
    two-sided about the middle m = high // 2 (:func:`_interpolation_units`):

        F(m) + a relu(X - m) - b relu(m - X) + sum_(m<j<high) c_j relu(X - j) + sum_(0<j<m) c_j relu(j - X)

    (a, b: F's slopes right and left of m; c_j: its slope's change at j), so F(X) at every integer
    X, off by at most the largest slope times X's noise near it.  Each unit is active on the half-line
    away from m only, so the active units at X sum to about |c| d^2 / 2 at distance d from m -- a
    quarter of a one-sided sum's, where the units at the top of the range add up to |c| high^2 / 2.
    Its float rounding still grows as high^3 (:func:`interpolation_error`), so a caller takes it only
    where that bound is small -- a readout, whose argmax has margin."""
    subs = list({r.sub.name: r.sub for r, _ in parts}.values())
    row = _local_rows(subs)
    outs = [o for _, po in parts for o, _ in po]
    out_rows = _local_rows(outs)
    W1_cols, b1, W2_rows = [], [], []
    b2 = np.zeros(len(out_rows))
    for r, po in parts:
        assert not r.more, "one counter's prefix sum per part"
        F = np.concatenate([np.asarray(v, dtype=np.float64).reshape(r.high + 1, len(o)) for o, v in po], axis=1)
        sign, centre, W2 = _interpolation_units(F)
        w = np.zeros((len(row), len(sign)))
        w[_local_dims(row, r.sub)[0]] = sign * r.scale
        W1_cols.append(w)
        b1.append(sign * (r.shift - centre))
        cols = [c for o, _ in po for c in _local_dims(out_rows, o)]
        W2_full = np.zeros((len(sign), len(out_rows)))
        W2_full[:, cols] = W2
        W2_rows.append(W2_full)
        b2[cols] = F[r.high // 2]
    info = {"kind": "interpolation", **(notes or {}), "thresholds": [r.high for r, _ in parts]}
    return MLP(name, [np.concatenate(W1_cols, axis=1), np.concatenate(W2_rows, axis=0)],
               [np.concatenate(b1), b2], info, reads=names(*subs), writes=names(*outs), obligation=obligation)


def _interpolation_units(F: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`interpolation_mlp`'s units for values F [high + 1, k] (high >= 1): each unit
    relu(sign (X - centre)) with its output weights [units, k] -- the slopes either side of
    m = high // 2, then each kink's change of slope, on the side of m it lies."""
    high = len(F) - 1
    m = high // 2
    slopes = np.diff(F, axis=0)  # slope on [i, i + 1]
    units = ([(1.0, m, slopes[m])] if m < high else []) + ([(-1.0, m, -slopes[m - 1])] if m > 0 else [])
    units += [(1.0 if j > m else -1.0, j, slopes[j] - slopes[j - 1]) for j in range(1, high) if j != m]
    W2 = np.array([w for _, _, w in units]).reshape(len(units), F.shape[1])
    return np.array([u[0] for u in units]), np.array([u[1] for u in units], dtype=np.float64), W2


def interpolation_error(F: np.ndarray, eps: float) -> float:
    """A worst-case bound on :func:`interpolation_mlp`'s float rounding for values F [high + 1, k]
    with machine epsilon ``eps`` (unit roundoff u = eps / 2), the largest over the integers X: the
    output's sum of its n = units + 1 terms, at most gamma_n times their size there (F(m) and each
    active unit's |weight| times its distance from its centre), plus each unit's pre-activation
    (X - j: two terms up to 2 high, rounded twice) times its |weight|."""
    F = np.asarray(F, dtype=np.float64).reshape(len(F), -1)
    high, u = len(F) - 1, eps / 2
    if high == 0:
        return 0.0
    sign, centre, W2 = _interpolation_units(F)
    X = np.arange(high + 1, dtype=np.float64)
    size = np.abs(F[high // 2])[None] + _active_size(sign > 0, centre, np.abs(W2), X)
    size = size + _active_size(sign < 0, high - centre, np.abs(W2), high - X)  # mirrored: relu(c - X)
    n = len(sign) + 1
    return float(np.max(n * u / (1 - n * u) * size + 2 * u * 2 * high * np.abs(W2).sum(0)))


def _active_size(which: np.ndarray, centre: np.ndarray, W: np.ndarray, X: np.ndarray) -> np.ndarray:
    """sum over the units ``which`` of W_u relu(X - centre_u) at every X ([len(X), k]; centres and X
    integers in 0..len(X) - 1), by prefix sums: X sum_(c <= X) W - sum_(c <= X) c W."""
    n = len(X)
    w = np.zeros((n, W.shape[1]))
    wc = np.zeros((n, W.shape[1]))
    at = centre[which].astype(np.int64)
    np.add.at(w, at, W[which])
    np.add.at(wc, at, W[which] * centre[which][:, None])
    order = X.astype(np.int64)
    return X[:, None] * np.cumsum(w, axis=0)[order] - np.cumsum(wc, axis=0)[order]

