"""The scan's composition MLP (Theorem 10, :class:`~constructions.obligations.Compose`): at every
class of positions, for every pair of maps the class may hold, each output point must get f(g(q))
(or 0 where the MLP clears the fetched map) within half the gap between the codes it can hold.

*Separable bounds.*  An output o (point q) has a selector, the fetched code G[q]; every hidden
unit feeding o reads the selector and at most one point F[j] (else the check refuses), so for a
fixed fetched code g the output is a sum over *groups* of units (those reading one point F[j],
those reading none) of one-variable terms in x = F[j].  Its deviation from the declared value, its
coefficients on the inputs' errors, its rounding and magnitudes are then bounded by sums over the
groups of per-group extremes over the codes x that F[j] may hold: O(groups x codes) evaluations
per (output, g), not one per pair of maps.  Two bounds, the smaller kept: affine (coefficients on
the inputs' errors, rounding as gamma_n times the magnitudes) and, where the codes are multiples
of a quantum and the noise is small, snapping (:func:`.state.snaps`: the hidden units and the
output are then exact but for the noise of results whose exact part is 0).

*Shared tables.*  A group's terms at one fetched code g and one code x of its point, with its
inputs exact (radius 0), depend only on its own weights (input weights on its point and on the
selector, bias with the class's constant dims, output weights) and on which g makes its point the
declared value -- not on the output it feeds, the class or the layer.  The composition MLP's units
u[q, j], v[q, j] have the same weights for every output q and every layer, so a scan has ~2n
distinct groups, not 2n^2 per layer: each is tabulated once over (g, x) (:func:`code_tables`), its
extremes over a set of codes once per set (:func:`_class_rows`).  The radii enter per output and
class afterwards, through bounds that hold for every code (:func:`_group_sums`: a unit's input
noise nu = |w_x| r_x + |w_g| r_g adds nu (1 + gamma) to its error exactly, so to the magnitude; to
the rounding noise gamma nu, and nu (1 + gamma) more only where nu (1 + gamma) may reach the unit's
slack |z| - err, where its sign could flip).  So a class costs O(n^2) array elements per
output, O(n^3) in all, not O(n^4); the tables O(n^3) once per model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from constructions.obligations import Compose

from .lookups import MLPWeights, check_io, fixed_by_class, mlp_weights
from .state import CertificateFailure, Code, JOINT_BUDGET, Model, State, gamma, half_gaps, quanta, unique_rows

PER_CODE = ("d", "kx", "kc", "nu", "mag", "at_x", "at_g", "mag1", "mag_in", "slack", "q_in", "q_out")
"""A group's terms at one fetched code g and one code x of its point, its inputs exact: deviation
from the declared value, coefficients on its point's and the selector's errors, rounding noise,
magnitude, the units at their kink (0 exactly) weighted by their noise growth and |w_x|, |w_g| (the
snapping path's noise per unit of radius), the magnitude on the snapping path, the largest
hidden-unit magnitude, the least slack |z| - err of a unit, the quanta of the hidden units' input
terms and of their outputs' terms."""
STATS = ("dmax", "dmin", "kx", "cmax", "cmin", "nu", "mag", "at_x", "at_g", "mag1", "mag_in", "slack", "q_in",
         "q_out")
"""A group's extremes over its point's codes, per fetched code g (of :data:`PER_CODE`: the
deviation and selector coefficient up and down, the slack and quanta down, the others up)."""
LOW = ("d", "kc", "slack", "q_in", "q_out")
"""The terms of :data:`PER_CODE` whose least value matters."""
CHUNK = 1 << 22
"""Floats in one temporary of the group tables ([groups, points, codes, units])."""


@dataclass
class Outputs:
    """A composition MLP's outputs as sums of unit groups (one layer, one set of constant values).

    Per output (the ``dims`` it writes, in order): its ``point`` q, whether it gets f(g(q)) (else
    0), whether it is its selector G[q] itself (the residual then adds g), the index of its own
    point in F (-1: not a point of F), its number of units, output bias and the quantum of its
    units' biases and constant terms, and its ``group`` rows (padded with K, an empty group).  Per
    distinct group (K): its weights [K, 6, U] (point, selector, bias, bias magnitude, output, terms
    per unit), the point it reads (-1: none), whether it carries the output's own residual term,
    the fetched code at which its point is the declared value (-1: never), and its ``signature``
    (all of these, as bytes: what its tables depend on)."""

    dims: list[int]
    point: np.ndarray
    gets: np.ndarray
    selects: np.ndarray
    own: np.ndarray
    units: np.ndarray
    bias: np.ndarray
    delta: np.ndarray
    group: np.ndarray
    params: np.ndarray
    reads: np.ndarray
    adds_own: np.ndarray
    wants: np.ndarray
    signature: list[bytes]


def _round_up(r: np.ndarray) -> np.ndarray:
    """Radii rounded up to a grid of eight steps per power of two (larger, so still sound), so
    that classes whose radii differ in the last digits share one check."""
    r = np.asarray(r, dtype=np.float64)
    with np.errstate(divide="ignore"):
        up = np.exp2(np.ceil(8 * np.log2(np.where(r > 0, r, 1.0))) / 8)
    return np.where(r > 0, np.maximum(up, r), 0.0)


def _output_groups(W1: np.ndarray, b1: np.ndarray, w2: np.ndarray, F: list[int], c: int, o: int,
                   const_l: list[int], fixed: np.ndarray, where: str) -> tuple[np.ndarray, list[int], np.ndarray]:
    """The units feeding output ``o`` grouped by the one point of F each reads besides the
    selector ``c`` (-1: none), in the order of their first units: the units, the groups' points
    and their weights [groups, 6, units] (input weight on the point and on the selector, bias with
    the constant dims, its magnitude, output weight, term count)."""
    pos = np.zeros(len(W1), dtype=bool)
    pos[F] = True
    units = np.nonzero(w2)[0]
    reads = W1[:, units] != 0
    reads[[c, *const_l]] = False
    count, other = reads.sum(0), reads.argmax(0)
    bad = np.nonzero((count > 1) | ((count == 1) & ~pos[other]))[0]
    if len(bad):
        raise CertificateFailure(where, f"hidden unit {units[bad[0]]} reads {np.nonzero(reads[:, bad[0]])[0].tolist()}: "
                                 f"not a sum of one-point terms")
    other = np.where(count == 1, other, -1)
    keys, first = np.unique(other, return_index=True)
    keys = keys[np.argsort(first)].tolist()
    if pos[o] and o not in keys:
        keys.append(o)  # the residual's own term, even if no unit reads the point
    perm = np.argsort(keys)
    gid = perm[np.searchsorted(np.asarray(keys)[perm], other)]  # each unit's position in ``keys``
    order = np.argsort(gid, kind="stable")
    sizes = np.bincount(gid, minlength=len(keys))
    rank = np.empty(len(units), dtype=np.int64)
    rank[order] = np.arange(len(units)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    P = np.zeros((len(keys), 6, max(1, int(sizes.max(initial=0)))))
    const_W = W1[const_l][:, units]
    P[gid, 0, rank] = np.where(other >= 0, W1[np.maximum(other, 0), units], 0.0)
    P[gid, 1, rank] = W1[c, units]
    P[gid, 2, rank] = b1[units] + (fixed[:, None] * const_W).sum(0)
    P[gid, 3, rank] = np.abs(b1[units]) + (np.abs(fixed[:, None]) * np.abs(const_W)).sum(0)
    P[gid, 4, rank] = w2[units]
    P[gid, 5, rank] = np.count_nonzero(W1[:, units], axis=0) + 1
    return units, keys, P


def outputs(W1: np.ndarray, b1: np.ndarray, W2: np.ndarray, b2: np.ndarray, F: list[int], G: list[int],
            into_maps: bool, const_l: list[int], fixed: np.ndarray, where: str) -> Outputs:
    """The layer's outputs and their distinct unit groups (:class:`Outputs`)."""
    pos = {d: i for i, d in enumerate(F)}
    dims, rows, per_out = [], [], []
    for q in range(len(F)):
        for o, gets in ([(F[q], True), (G[q], False)] if into_maps else [(G[q], True)]):
            units, keys, P = _output_groups(W1, b1, W2[:, o], F, G[q], o, const_l, fixed, where)
            terms = np.concatenate([b1[units], (fixed[:, None] * W1[const_l][:, units]).ravel()])
            dims.append(o)
            per_out.append((q, gets, o == G[q], pos.get(o, -1), len(units), b2[o], quanta(terms).min(initial=np.inf)))
            rows.append((P, np.array([(pos.get(j, -1), j == o, pos[j] if gets and j >= 0 else -1) for j in keys],
                                     dtype=np.float64).reshape(len(keys), 3)))
    U = max(P.shape[2] for P, _ in rows)
    flat = np.concatenate([np.concatenate([np.pad(P, ((0, 0), (0, 0), (0, U - P.shape[2]))).reshape(len(P), -1), rest],
                                          axis=1) for P, rest in rows])
    distinct, index = np.unique(flat, axis=0, return_inverse=True)
    J = max(len(P) for P, _ in rows)
    group = np.full((len(rows), J), len(distinct))
    at = 0
    for i, (P, _) in enumerate(rows):
        group[i, : len(P)] = index.reshape(-1)[at : at + len(P)]
        at += len(P)
    cols = [np.array(c) for c in zip(*per_out)]
    signature = [row.tobytes() + np.int64(len(F)).tobytes() for row in distinct]
    return Outputs(dims, cols[0].astype(np.int64), cols[1].astype(bool), cols[2].astype(bool), cols[3].astype(np.int64),
                   cols[4].astype(np.int64), cols[5].astype(np.float64), cols[6].astype(np.float64), group,
                   distinct[:, : 6 * U].reshape(-1, 6, U), distinct[:, 6 * U].astype(np.int64),
                   distinct[:, 6 * U + 1].astype(bool), distinct[:, 6 * U + 2].astype(np.int64), signature)


def code_tables(m: Model, S: Outputs, ks: list[int], axis: np.ndarray, n: int) -> np.ndarray:
    """[len(ks), PER_CODE, n, V]: the groups ``ks``' terms for every fetched code g = 0..n-1 and
    every code x in ``axis`` [V] of their point, their inputs exact (:data:`PER_CODE`).  The
    units' exact parts z, their rounding gamma_terms times their input magnitudes; a unit whose
    rounding could flip it adds its whole deviation (eta).  Chunked over the groups (O(groups n V)
    floats: a scan's n is at most ~120 within the parameter budget)."""
    U = S.params.shape[2]
    step = max(1, CHUNK // max(1, n * len(axis) * U))
    out = np.empty((len(ks), len(PER_CODE), n, len(axis)))
    for i in range(0, len(ks), step):
        k = np.asarray(ks[i : i + step], dtype=np.int64)
        out[i : i + step] = _code_terms(m, S.params[k], axis, S.adds_own[k], S.wants[k], n)
    return out


def _code_terms(m: Model, params: np.ndarray, axis: np.ndarray, adds_own: np.ndarray, wants: np.ndarray,
                n: int) -> np.ndarray:
    """:func:`code_tables` for one chunk of groups."""
    Wx, Wc, bb, cmag, w, nnz = (params[:, k, None, None, :] for k in range(6))  # [K, 1, 1, U]
    X4, G4 = axis[None, None, :, None], np.arange(n, dtype=np.float64)[None, :, None, None]  # [K, g, x, U]
    z = X4 * Wx + G4 * Wc + bb  # the units' exact parts
    mag_in = np.abs(X4) * np.abs(Wx) + np.abs(G4) * np.abs(Wc) + cmag
    err = gamma(nnz, m.u) * mag_in  # rounding only: the inputs are exact here
    on = z > 0
    relu = np.maximum(z, 0)
    own = adds_own[:, None, None]
    absw = np.abs(w)
    kink = absw * (z == 0) * (1 + m.u) ** nnz
    d = (relu * w).sum(3) + own * axis[None, None, :]  # [K, g, x]; the residual's own term
    d = d - np.where(wants[:, None, None] == np.arange(n)[None, :, None], axis[None, None, :], 0.0)
    terms = [d, np.abs((on * Wx * w).sum(3) + own), (on * Wc * w).sum(3),
             (absw * (on * err + np.maximum(0.0, err - np.abs(z)))).sum(3), (absw * (relu + err)).sum(3),
             (kink * np.abs(Wx)).sum(3), (kink * np.abs(Wc)).sum(3), (absw * relu).sum(3), mag_in.max(3),
             np.where(w != 0, np.abs(z) - err, np.inf).min(3),
             np.minimum(quanta(X4 * Wx).min(3), quanta(G4 * Wc).min(3)), quanta(relu * w).min(3)]
    return np.stack([np.broadcast_to(t, d.shape) for t in terms], axis=1)


def _class_rows(m: Model, S: Outputs, axis: np.ndarray, cF: Code, shared: dict[tuple, np.ndarray]) -> np.ndarray:
    """[groups + 1, STATS, n]: each group's extremes over the codes its point holds at this class,
    and an empty last row (nothing added, no quantum).  ``shared`` keeps the groups' tables (by
    signature and codes axis) and their extremes (by signature and code set) for every class and
    layer."""
    K, n = len(S.params), len(cF.per_dim)
    keys = [("rows", sig, cF.per_dim[j].tobytes() if j >= 0 else b"") for sig, j in zip(S.signature, S.reads)]
    todo = [k for k in range(K) if keys[k] not in shared]
    fresh = [k for k in todo if ("table", S.signature[k], axis.tobytes()) not in shared]
    for k, t in zip(fresh, code_tables(m, S, fresh, axis, n) if fresh else []):
        shared["table", S.signature[k], axis.tobytes()] = t
    low = [PER_CODE.index(s) for s in LOW]
    for k in todo:
        t = shared["table", S.signature[k], axis.tobytes()]
        pick = np.isin(axis, cF.per_dim[S.reads[k]]) if S.reads[k] >= 0 else np.arange(len(axis)) == 0
        hi, lo = t[:, :, pick].max(2), t[low][:, :, pick].min(2)  # (a group reading no point: the same at every x)
        shared[keys[k]] = np.stack([hi[0], lo[0], hi[1], hi[2], lo[1], *hi[3:9], lo[2], lo[3], lo[4]])
    empty = np.zeros((1, len(STATS), n))
    empty[0, STATS.index("slack"):] = np.inf
    return np.concatenate([np.stack([shared[key] for key in keys]), empty])


def _group_sums(m: Model, T: np.ndarray, S: Outputs, o: np.ndarray, g: np.ndarray, r_point: np.ndarray,
                rc: np.ndarray) -> dict[str, np.ndarray]:
    """Per pair (output ``o``, fetched code ``g``) [N]: the sums over the output's groups
    (deviation up and down, error through the points, selector coefficient up and down, rounding
    noise, magnitude, snapping noise and magnitude) and its hidden units' largest magnitude and
    grown noise and least quanta, with the radii: of each point ``r_point`` (-1: none, 0) and of
    each output's selector ``rc`` [O].  A unit's input noise nu = |w_x| r_x + |w_g| r_g (module
    docstring).  One gather per group slot (no matrix product: a threaded BLAS call is slow on a
    loaded machine)."""
    P = np.concatenate([S.params, np.zeros((1, *S.params.shape[1:]))])[S.group]  # [O, J, 6, U]; K: the empty group
    rx = r_point[np.append(S.reads, -1)[S.group]]  # [O, J]
    nu = np.abs(P[:, :, 0]) * rx[..., None] + np.abs(P[:, :, 1]) * rc[:, None, None]  # [O, J, U]
    gam, absw = gamma(P[:, :, 5], m.u), np.abs(P[:, :, 4])
    spread = (absw * nu * (1 + gam)).sum(2)  # what the noise adds to the error of the group's units, as weighted
    fixed = {"nu": (absw * nu * gam).sum(2), "flip": (nu * (1 + gam)).max(2), "mag": spread,
             "mag_in": nu.max(2), "grown": (nu * (1 + m.u) ** P[:, :, 5]).max(2)}
    i = {s: STATS.index(s) for s in STATS}
    acc = {s: np.zeros(len(o)) for s in ("dmax", "dmin", "xerr", "cmax", "cmin", "nu", "mag", "noise1", "mag1",
                                         "mag_in", "grown")}
    acc.update(q_in=np.full(len(o), np.inf), q_out=np.full(len(o), np.inf))
    rg = rc[o]
    for j in range(S.group.shape[1]):
        rows, x = T[S.group[o, j], :, g], rx[o, j]  # [N, STATS], [N]
        for s in ("dmax", "dmin", "cmax", "cmin", "mag1"):
            acc[s] += rows[:, i[s]]
        acc["xerr"] += rows[:, i["kx"]] * x
        flip = fixed["flip"][o, j] >= rows[:, i["slack"]]  # the noise may flip a unit: its whole deviation counts
        acc["nu"] += rows[:, i["nu"]] + fixed["nu"][o, j] + flip * spread[o, j]
        acc["mag"] += rows[:, i["mag"]] + spread[o, j]
        acc["noise1"] += rows[:, i["at_x"]] * x + rows[:, i["at_g"]] * rg
        acc["mag_in"] = np.maximum(acc["mag_in"], rows[:, i["mag_in"]] + fixed["mag_in"][o, j])
        acc["grown"] = np.maximum(acc["grown"], fixed["grown"][o, j])
        acc["q_in"] = np.minimum(acc["q_in"], rows[:, i["q_in"]])
        acc["q_out"] = np.minimum(acc["q_out"], rows[:, i["q_out"]])
    return acc


def class_bounds(m: Model, S: Outputs, rows: np.ndarray, cF: Code, cG: Code,
                 where: str) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """Each output's radius, value set and worst fetched code at one class (maps ``cF``, fetched
    maps ``cG``, its groups' ``rows``): per fetched code g its selector may hold, the affine bound
    and the snapping bound where it applies, the smaller kept (module docstring); the largest over
    those g, and the g where it is."""
    n, u, p = len(cF.per_dim), m.u, m.p
    mask = np.zeros((n, n), dtype=bool)  # [q, g]: g is a code G[q] may hold
    for q, gs in enumerate(cG.per_dim):
        if np.any(gs != np.round(gs)) or np.any(gs < 0) or np.any(gs >= n):
            raise CertificateFailure(where, f"a fetched code at point {q} is not a point: {gs.tolist()}")
        mask[q, gs.astype(np.int64)] = True
    mask, rc = mask[S.point], cG.radius[S.point]
    o, g = np.nonzero(mask)  # the pairs (output, fetched code), by output
    starts = np.searchsorted(o, np.arange(len(S.dims)))  # every selector holds some code
    a = _group_sums(m, rows, S, o, g, np.append(cF.radius, 0.0), rc)
    per_out = lambda ufunc, x: ufunc.reduceat(x, starts)  # noqa: E731  (over an output's pairs)
    b2, sel = S.bias[o], S.selects[o]
    dmax, dmin = a["dmax"] + sel * g + b2, a["dmin"] + sel * g + b2  # the selector's own residual: x_o = g
    cmax, cmin = a["cmax"] + sel, a["cmin"] + sel
    top_f, q_f = _extremes(cF.per_dim)  # per point: the largest code, the least quantum
    top_g, q_g = _extremes(cG.per_dim)
    top = np.where(S.gets[o], top_f[g], 0.0)
    dev = np.maximum(np.abs(dmax), np.abs(dmin))
    rad = (dev + a["xerr"] + np.maximum(np.abs(cmax), np.abs(cmin)) * rc[o] + a["nu"]
           + gamma(S.units + 1, u)[o] * (a["mag"] + np.abs(b2)))
    rad = rad + u * (top + rad)  # the residual addition
    # snapping: the hidden units (their exact parts are sums of multiples of the quantum), the output sum, the residual
    delta = np.minimum(per_out(np.minimum, a["q_in"]), S.delta)
    snap = ((per_out(np.maximum, a["grown"]) < 2.0 ** -(p + 1) * delta)
            & (per_out(np.maximum, a["mag_in"]) < 2.0**p * delta) & (per_out(np.maximum, dev) == 0))
    noise1 = a["noise1"] * (1 + u) ** (S.units + 1)[o]
    d1 = np.minimum(per_out(np.minimum, a["q_out"]), quanta(S.bias))[o]
    ok1 = (noise1 < 2.0 ** -(p + 1) * d1) & (a["mag1"] + np.abs(b2) < 2.0**p * d1)
    own = S.own >= 0  # the output's old value: its point of F, else the fetched code
    noise2 = (np.where(own, cF.radius[S.own], rc)[o] + noise1) * (1 + u) ** 2
    d2 = np.minimum(per_out(np.minimum, np.where(S.gets[o], q_f[g], np.inf)), np.where(own, q_f[S.own], q_g[S.point]))[o]
    top_own = np.where(own, top_f[S.own], top_g[S.point])[o]
    ok2 = (noise2 < 2.0 ** -(p + 1) * d2) & (top + top_own + noise2 < 2.0**p * d2)
    rad = np.where(snap[o] & ok1 & ok2, np.minimum(rad, noise2), rad)
    worst = per_out(np.maximum, rad)
    at = g[np.flatnonzero(rad == worst[o])]  # the fetched code of each output's largest radius (the first)
    return worst, _images(cF, mask, S.gets), at[np.searchsorted(o[rad == worst[o]], np.arange(len(S.dims)))]


def _extremes(per_dim: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per dim, the largest |code| and the least quantum of its codes (inf when all are 0)."""
    values = np.concatenate(per_dim)
    starts = np.cumsum([0] + [len(v) for v in per_dim[:-1]])
    return np.maximum.reduceat(np.abs(values), starts), np.minimum.reduceat(quanta(values), starts)


def _images(cF: Code, mask: np.ndarray, gets: np.ndarray) -> list[np.ndarray]:
    """Each output's value set: the codes f(g) for the fetched codes g its selector may hold (0
    for a cleared output)."""
    values = np.unique(np.concatenate(cF.per_dim))
    holds = np.zeros((len(cF.per_dim), len(values)), dtype=bool)  # [g, value]
    for g, v in enumerate(cF.per_dim):
        holds[g, np.searchsorted(values, v)] = True
    reach = np.any(mask[:, :, None] & holds[None], axis=1).reshape(len(gets), len(values))
    return [values[row] if get else np.zeros(1) for row, get in zip(reach, gets)]


def _unpadded(weights: list[np.ndarray], biases: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Without the identity hidden layers that pad an MLP to a deeper one's depth (relu of a
    hidden layer, already >= 0, is itself: dropping them changes nothing)."""
    Ws, bs = [weights[0]], [biases[0]]
    for W, b in zip(weights[1:-1], biases[1:-1]):
        if W.shape[0] == W.shape[1] and np.array_equal(W, np.eye(len(W))) and not np.any(b):
            continue
        Ws.append(W)
        bs.append(b)
    return Ws + [weights[-1]], bs + [biases[-1]]


def _distinguishable(name: str, per_dim: list[np.ndarray], radius: np.ndarray, fetched: np.ndarray, where: str) -> None:
    """The radius must stay below half the smallest gap between distinct codes of the subspace
    (CertificateFailure naming its worst point and the fetched code there otherwise)."""
    gap = half_gaps(np.concatenate(per_dim)[:, None])[0]
    q = int(np.argmax(radius))
    if radius[q] >= gap:
        raise CertificateFailure(where, f"{name}[{q}] may be off by {radius[q]:.3g} where the fetched map sends "
                                 f"point {q} to {int(fetched[q])}: at least half the gap {2 * gap:.3g} between its "
                                 f"codes")


def compose_mlp(m: Model, l: int, ob: Compose, states: list[State], pos_class: np.ndarray, closure: np.ndarray | None,
                report: dict[str, Any], mlp: MLPWeights | None = None,
                shared: dict[tuple, np.ndarray] | None = None) -> list[State]:
    """The composition MLP, checked per output point by separable bounds on group tables
    (module docstring); ``shared`` keeps the tables for the other layers (and scans) of the model.
    Classes holding the same value sets and radii share one check."""
    where = f"layer {l + 1} MLP {ob.mlp}"
    weights, biases = _unpadded(*(mlp or mlp_weights(m, l, ob.mlp)))
    if len(weights) != 2:
        raise CertificateFailure(where, "a composition MLP has one hidden layer")
    (W1, W2), (b1, b2) = weights, biases
    F, G = m.dims(ob.maps), m.dims(ob.fetched)
    if len(F) != len(G):
        raise CertificateFailure(where, "maps and fetched maps differ in width")
    into_maps = ob.into == ob.maps
    const, class_fixed = fixed_by_class(m, pos_class, len(states))
    check_io(m, l, ob.mlp, weights, biases, F + G, F + G if into_maps else G, const)
    const_l = [d for d in sorted(const) if np.any(W1[d])]  # the constant dims it reads
    shared = {} if shared is None else shared
    held = [tuple(Code(st[name].per_dim, None, _round_up(st[name].radius)) for name in (ob.maps, ob.fetched))
            for st in states]
    axis = np.unique(np.concatenate([v for cF, _ in held for v in cF.per_dim]))  # every code a point holds
    n, worst, new_states = len(F), 0.0, []
    layouts: dict[bytes, Outputs] = {}
    done: dict[tuple, tuple[np.ndarray, list[np.ndarray], np.ndarray]] = {}
    joints: dict[tuple[bytes, bytes], np.ndarray] = {}
    for c, (st, (cF, cG)) in enumerate(zip(states, held)):
        fixed = class_fixed[c][const_l]
        if fixed.tobytes() not in layouts:
            layouts[fixed.tobytes()] = outputs(W1, b1, W2, b2, F, G, into_maps, const_l, fixed, where)
        S = layouts[fixed.tobytes()]
        key = (fixed.tobytes(), tuple(v.tobytes() for v in cF.per_dim), cF.radius.tobytes(),
               tuple(v.tobytes() for v in cG.per_dim), cG.radius.tobytes())
        if key not in done:
            done[key] = class_bounds(m, S, _class_rows(m, S, axis, cF, shared), cF, cG, where)
        radius, values, fetched = (dict(zip(S.dims, x)) for x in done[key])
        st = dict(st)
        for name, dims in ((ob.maps, F), (ob.fetched, G)):
            if dims[0] not in radius:
                continue
            per_dim = [values[d] for d in dims]
            r = np.array([radius[d] for d in dims])
            joint = _composed_joint(st[ob.maps], st[ob.fetched], closure, joints) if name == ob.into else None
            if name != ob.into:  # cleared
                joint = np.zeros((1, n))
            st[name] = Code(per_dim, joint, r)
            _distinguishable(name, per_dim, r, np.array([fetched[d] for d in dims]), where)
            worst = max(worst, float(r.max()))
        new_states.append(st)
    report["mlp"] = {"name": ob.mlp, "kind": "compose", "max_error": worst}
    return new_states


def _composed_joint(cF: Code, cG: Code, closure: np.ndarray | None,
                    cache: dict[tuple[bytes, bytes], np.ndarray] | None = None) -> np.ndarray | None:
    """The joint set of f o g: every pair when few, else the transition semigroup (a superset).
    Classes that hold the same maps share one result (``cache``); f o id is f."""
    if cF.joint is None or cG.joint is None or len(cF.joint) * len(cG.joint) > JOINT_BUDGET:
        return closure
    if len(cG.joint) == 1 and np.array_equal(cG.joint[0], np.arange(cG.joint.shape[1])):
        return cF.joint
    key = (cF.joint.tobytes(), cG.joint.tobytes())
    if cache is not None and key in cache:
        return cache[key]
    g = cG.joint.astype(np.int64)
    out = unique_rows(cF.joint[np.arange(len(cF.joint))[:, None, None], g[None, :, :]].reshape(-1, g.shape[1]))
    if cache is not None:
        cache[key] = out
    return out
