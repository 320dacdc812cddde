"""Recency codes: certificates for heads that find the last matching key and MLPs that compare
two such recencies (``constructions/obligations/``: :class:`Match`, :class:`Races`).

A recency is 0 ("never": BOS) or a position 1..T.  Enumerating recencies, or pairs of them, would
cost T^2 per pair and T^3 with a level beside them; the rules here cost prefix passes instead.

**Most recent match** (:class:`Match`, Theorem 12's nearest value).  The query reads its code
subspace and dims that are constant after BOS; the key its code subspace and fixed dims.  So a
score is q(a) . k(b, s) = C[a, b] + P[a, s] for query code a, key code b at position s:
C = q(a) . kc(b) (the key's code part), P = q(a) . kf(s) (its positional part), each bounded
with the dtype's rounding, which splits the same way (:func:`_score_parts`).  For a query code a
let m = match[a]; a position s may be the key when m is one of its class's codes.  For every input
that makes s* the key at t, every s in (s*, t] holds another code and every s < s* any code, so
the weight off s* is at most

    e^(before(s*) - lo1(s*)) + sum_{1 <= s <= t} e^(hi0(s) - lo1(s*)),

before(s*) = log sum_{s < s*} e^(hi_any(s)) (BOS included), with lo1 the lowest score of a match
at s*, hi0 the highest of a mismatch at s, hi_any of either.  Over the possible keys s* <= t
this is at most max_{s* <= t} e^(before(s*) - lo1(s*)) + e^(LC0(t) - min_{s* <= t} lo1(s*)),
LC0 the log prefix sum of e^hi0: prefix passes per query code, O(codes x T) in all.  Every
possible key must beat each rival by a positive gap: lo1(s*) > hi_any(s) for s < s* and
lo1(s*) > hi0(s) for s* < s <= T (a suffix maximum).

The copy then errs, at most, by a part that grows with the copied value v* and a floor.  In
exact arithmetic on the computed scores, |sum_s p_s v_s - v*| <= L spread (L the weight off the
key).  In floating point one weight matters (the key's, exp(0) = 1 after the row maximum, which
its score is): it carries a relative error of 18 u plus L (1 + n u) (the tiny terms' lemma of
``docs/certificates.md``), its product u and an online softmax's rescalings of the accumulator
16 ulps; the other weights sum to at most L (1 + n u) of values up to vmax, and summing them in
adds as much again.  So |out - v*| <= gamma_40 |v*| + L spread + 3 (1 + n u) L vmax, and the
output projection and the residual addition their own ulps.  The head's report keeps the two
parts (``copy_error``) so that a comparison of recencies in the same layer sees 0 within the floor
alone.

**Races** (:class:`Races`, Algorithm 1 / Lemma 22 as a count).  Hidden units joined by a weight,
or reading a common recency, form one group; each group must read the two recencies of one race
(and its levels) and write only its output.  Its contribution is proved on the cells of the
pair's order: first > second, second > first, equal and nonzero (each a polygon of integer
vertices inside the code ranges: a linear form's range over it is exact at the vertices, the
levels range over their boxes), and both 0 (the levels enumerated, the only cell where the
declared term depends on them).  Through the hidden layers the values are intervals with the
inputs' errors and rounding (a unit surely off is exactly 0; one with integer inputs, weights
and bias below 2^p is exact).  The contribution must be the declared term plus one constant per
race, within a spread e_k; the outputs then differ from the declared sums by at most
|bias + sum of the constants| + sum e_k (+ rounding, 0 when every term is an exact integer),
which must stay below half the gap between integer codes.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from compiler.automata.partitions import DisjointSets
from constructions.obligations import Match, Race, Races

from .lookups import check_io, fixed_by_class, mlp_weights
from .scores import abs_products, copy_map, read_dims, recency_gaps
from .state import CertificateFailure, Code, NotCertifiable, get_code, product_rows, put_code, gamma


# --- most recent match ---------------------------------------------------------------------------


def _code_index(codes: np.ndarray, rows: np.ndarray, what: str, where: str) -> np.ndarray:
    """The index in ``codes`` of each of ``rows`` (CertificateFailure on a row that is not one)."""
    out = np.empty(len(rows), dtype=np.int64)
    for i, row in enumerate(rows):
        hit = np.nonzero(np.all(codes == row[None], axis=1))[0]
        if not len(hit):
            raise CertificateFailure(where, f"{what} may hold {np.round(row, 4).tolist()[:6]}, not one of the "
                                          f"declared codes")
        out[i] = hit[0]
    return out


def _row_radii(codes: np.ndarray, states: list[dict], classes: list[int], name: str, where: str) -> np.ndarray:
    """Per code of ``codes`` [n, dims], the largest error ``name`` may carry where it holds that code,
    over ``classes``: a row's own bound (``Code.row_slack``: a lookup's output errs on each dim as
    that row's inputs make it) where the class keeps one, else the class's radius; 0 for a code no
    class holds (it is never a query, and never a key of these classes)."""
    out = np.zeros(codes.shape)
    for c in classes:
        code = get_code(states[c], name)
        rows = code.combos()
        own = code.radius[None] - code.row_slack if code.row_slack is not None and code.joint is not None else \
            np.broadcast_to(code.radius, rows.shape)
        idx = _code_index(codes, rows, name, where)
        np.maximum.at(out, idx, own)
    return out


def _score_parts(m: Any, Wq: np.ndarray, Wk: np.ndarray, q_rows: list[int], Xq: np.ndarray, rq: np.ndarray,
                 kc_rows: list[int], Yk: np.ndarray, rk: np.ndarray,
                 kf_rows: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Scores q(a) . k(b, s) = C[a, b] + P[a, s] and their error bounds E1[a, b] + E2[a, s].

    q(a) = fl(Xq[a] W_Q) (the query's code and constant dims, code radius ``rq[a]`` per query
    code); the key is fl([Yk[b], fixed(s)] W_K) (code radius ``rk[b]`` per key code: a row's own
    bound, :func:`_row_radii`).  Every error term is linear in |k| and the key's
    error with nonnegative coefficients, and both split into a code part and a positional part
    (|k| <= |kc(b)| + |kf(s)|), so the bound of :func:`certify._score_factors` splits too."""
    u = m.u
    cols = np.nonzero((np.abs(Wq).sum(0) > 0) & (np.abs(Wk).sum(0) > 0))[0]
    q, eq = abs_products(Xq, Wq[q_rows][:, cols], u, m.p)
    q_code = [i for i, r in enumerate(q_rows) if np.any(rq[:, i] > 0)]
    eq = eq + (rq[:, q_code] @ np.abs(Wq[q_rows][:, cols][q_code]) if q_code else 0.0) * (1 + u)
    Kc, Kf = Wk[kc_rows][:, cols], Wk[kf_rows][:, cols]
    n_key = np.count_nonzero(Wk[kc_rows + kf_rows][:, cols], axis=0) + 1
    g_key = gamma(n_key, u)
    kc, kf = Yk @ Kc, m.fixed[:, kf_rows] @ Kf
    ekc = g_key * ((np.abs(Yk) + rk) @ np.abs(Kc)) + rk @ np.abs(Kc)
    ekf = g_key * (np.abs(m.fixed[:, kf_rows]) @ np.abs(Kf))
    g = float(gamma(len(cols) + 1, u))
    aq, A = np.abs(q), eq + g * (np.abs(q) + eq)  # coefficient of |k| and of the key's error
    B = aq + eq + g * (np.abs(q) + eq)
    slack = 2.0**-50
    C, P = q @ kc.T, q @ kf.T
    E1 = A @ np.abs(kc).T + B @ ekc.T + slack * (aq @ np.abs(kc).T)
    E2 = A @ np.abs(kf).T + B @ ekf.T + slack * (aq @ np.abs(kf).T)
    return C, P, E1, E2


def _match_scores(m: Any, l: int, h: int, f: Match, states: list[dict], pos_class: np.ndarray,
                  where: str) -> tuple[np.ndarray, ...]:
    """Per query code a (rows) and position s (columns): lo1 (a match at s, lowest), hi0 (any
    other code at s, highest) and hi_any; and which query codes each position may hold."""
    b = m.blocks[l]
    Wq, Wk = b["W_Q"][h], b["W_K"][h]
    qd, kd = m.dims(f.query), m.dims(f.key)
    q_fixed = sorted(read_dims(Wq) - set(qd))
    k_fixed = sorted(read_dims(Wk) - set(kd))
    if not set(q_fixed) <= m.fixed_dims or not set(k_fixed) <= m.fixed_dims:
        extra = sorted((set(q_fixed) | set(k_fixed)) - m.fixed_dims)
        raise CertificateFailure(where, f"its query or key reads input-dependent dims {extra[:6]} besides "
                                      f"{f.query} and {f.key}")
    if m.T and np.any(m.fixed[1:, q_fixed] != m.fixed[1:2, q_fixed]):
        raise NotCertifiable(f"{where}: its query reads positional dims; a match head whose query moves "
                                  f"with the position is not certified yet")
    codes = np.asarray(f.codes, dtype=np.float64).reshape(len(f.codes), -1)
    match = np.asarray(f.match, dtype=np.int64)
    n = len(codes)
    if codes.shape[1] != len(qd) or len(kd) != len(qd) or len(match) != n or np.any((match < 0) | (match >= n)):
        raise CertificateFailure(where, "its declared codes or matches do not fit the query and key subspaces")
    bos_class = pos_class[0]
    key_sets: list[np.ndarray | None] = []
    query_sets: list[np.ndarray] = []
    for c, st in enumerate(states):
        kcode = get_code(st, f.key)
        if c == bos_class:
            key_sets.append(None)
            query_sets.append(np.zeros(0, dtype=np.int64))
            continue
        key_sets.append(_code_index(codes, kcode.combos(), f.key, where))
        query_sets.append(_code_index(codes, get_code(st, f.query).combos(), f.query, where))
    bos_code = get_code(states[bos_class], f.key)
    bos_keys = bos_code.combos()
    Yk = np.concatenate([codes, bos_keys])  # key codes: the declared ones, then BOS's own
    body = [c for c in range(len(states)) if c != bos_class]
    rk = np.concatenate([_row_radii(codes, states, body, f.key, where), _row_radii(bos_keys, states, [bos_class],
                                                                                    f.key, where)])
    rq = _row_radii(codes, states, body, f.query, where)
    const = m.fixed[1 if m.T else 0, q_fixed]
    Xq = np.concatenate([codes, np.tile(const, (n, 1))], axis=1)
    C, P, E1, E2 = _score_parts(m, Wq, Wk, list(qd) + q_fixed, Xq, np.concatenate([rq, np.zeros((n, len(q_fixed)))],
                                                                                axis=1), list(kd), Yk, rk, k_fixed)
    hiC, loC = C + E1, C - E1
    rows = np.arange(n)
    # per class: the best mismatching code's score part, and whether the match can occur
    n_cls = len(states)
    best_mis = np.full((n_cls, n), -np.inf)
    can = np.zeros((n_cls, n), dtype=bool)
    for c, ks in enumerate(key_sets):
        if ks is None:
            continue
        inset = np.zeros(n, dtype=bool)
        inset[ks] = True
        can[c] = inset[match]
        masked = np.where(inset[None, :n], hiC[:, :n], -np.inf)
        masked[rows, match] = -np.inf
        best_mis[c] = masked.max(1)
    hi_match, lo_match = hiC[rows, match], loC[rows, match]
    cls = pos_class[1:]
    lo1 = np.full((n, m.T + 1), -np.inf)
    hi1 = np.full((n, m.T + 1), -np.inf)
    lo1[:, 1:] = np.where(can[cls].T, lo_match[:, None] + P[:, 1:] - E2[:, 1:], -np.inf)
    hi1[:, 1:] = np.where(can[cls].T, hi_match[:, None] + P[:, 1:] + E2[:, 1:], -np.inf)
    hi0 = np.full((n, m.T + 1), -np.inf)
    hi0[:, 1:] = best_mis[cls].T + P[:, 1:] + E2[:, 1:]
    # BOS: always a possible key (there is no match), scored with its own code
    lo1[:, 0] = loC[:, n:].min(1) + P[:, 0] - E2[:, 0]
    hi_any = np.maximum(hi0, hi1)
    hi_any[:, 0] = hiC[:, n:].max(1) + P[:, 0] + E2[:, 0]
    queries = np.zeros((n, m.T + 1), dtype=bool)
    for c, qs in enumerate(query_sets):
        queries[np.ix_(qs, np.nonzero(pos_class == c)[0])] = True
    return lo1, hi0, hi_any, queries


def _match_pattern(m: Any, l: int, h: int, f: Match, states: list[dict], pos_class: np.ndarray,
                   where: str) -> tuple[np.ndarray, float, np.ndarray]:
    """Leaked-mass bound per query position over every query code and input (module doc), the
    smallest score gap, and which positions may be the key (BOS always)."""
    lo1, hi0, hi_any, queries = _match_scores(m, l, h, f, states, pos_class, where)
    n, T1 = lo1.shape
    none = np.full((n, 1), -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        before = np.concatenate([none, np.logaddexp.accumulate(hi_any, axis=1)[:, :-1]], axis=1)
        lc0 = np.logaddexp.accumulate(hi0, axis=1)
        first = np.maximum.accumulate(np.where(np.isfinite(lo1), before - lo1, -np.inf), axis=1)
        low = np.minimum.accumulate(np.where(np.isfinite(lo1), lo1, np.inf), axis=1)
        log_leak = np.logaddexp(first, lc0 - low)
    # gaps: every possible key beats each earlier key and each later mismatch up to the last query
    last_query = np.array([np.nonzero(row)[0].max() if row.any() else -1 for row in queries])
    later = np.where(np.arange(T1)[None, :] <= last_query[:, None], hi0, -np.inf)
    relevant = np.isfinite(lo1) & (np.arange(T1)[None, :] <= last_query[:, None])
    gap, bad = recency_gaps(hi_any, later, lo1, relevant)
    if bad is not None:
        a, s, rival = bad
        raise CertificateFailure(where, f"for the query code {a} (looking for code {int(f.match[a])}), when {s} "
                                      f"is the most recent match, key {rival} may score as high (gap "
                                      f"{float(gap[a, s]):.3g} after rounding)")
    top = float(np.abs(np.where(np.isfinite(hi_any), hi_any, 0)).max())
    slack = math.exp(4 * (T1 + 2) * 2.0**-52 * (1 + top)) * (1 + 2.0**-50)  # the checker's own float64 sums
    leak = np.exp(np.where(queries, log_leak, -np.inf).max(0)) * slack
    leak[0] = 0.0  # BOS attends to itself alone
    return leak, float(gap.min()), np.isfinite(lo1).any(0)


def match_head(m: Any, l: int, f: Match, h: int, states: list[dict], pos_class: np.ndarray,
               report: dict[str, Any]) -> tuple[np.ndarray, Callable[[dict, dict, np.ndarray, int], None]]:
    """A :class:`Match` obligation: the pattern's bound (:func:`_match_pattern`), the copy's error
    as floor + relative part (module doc), and how a class of query positions gets its ``dst``.
    Returns the key signature per position (BOS: 0, every other position: 1) and the writer."""
    where = f"layer {l + 1} head {f.head}"
    copy_map(m, l, h, f.head, f.src, f.dst)
    leak, gap, possible = _match_pattern(m, l, h, f, states, pos_class, where)
    src = m.dims(f.src)
    T1 = m.T + 1
    if set(src) <= m.fixed_dims:  # a positional value, e.g. the position itself
        values = m.fixed[:, src]
        r_key = np.zeros(len(src))
        body = np.unique(values[possible], axis=0)
    else:
        values = None
        classes = sorted(set(pos_class[possible].tolist()))
        body_codes = [get_code(states[c], f.src) for c in classes]
        body = np.unique(np.concatenate([c.combos() for c in body_codes]), axis=0)
        r_key = np.max([c.radius for c in body_codes], axis=0)
    bos = values[:1] if values is not None else get_code(states[pos_class[0]], f.src).combos()
    lo = np.minimum(body.min(0), bos.min(0)) - r_key
    hi = np.maximum(body.max(0), bos.max(0)) + r_key
    vmax = np.maximum(np.abs(lo), np.abs(hi))
    W_O = m.blocks[l]["W_O"]
    t = np.arange(T1)
    g_out = float(gamma(W_O.shape[0] * W_O.shape[1] + 1, m.u))
    rel = (float(gamma(40, m.u)) + g_out) * (1 + g_out)
    r_old = np.max([get_code(st, f.dst).radius for st in states], axis=0)
    floor = (r_key[None] * (1 + rel) + leak[:, None] * ((hi - lo)[None] + 3 * (1 + (t + 1) * m.u)[:, None]
                                                         * vmax[None])) * (1 + g_out)
    floor = floor + 2 * r_old[None]  # the residual addition errs by at most the old radius
    report.setdefault("heads", []).append({
        "name": f.head, "dst": f.dst, "min_score_gap": gap, "max_leaked_mass": float(leak.max()),
        "max_copy_error": float((floor + rel * vmax[None]).max()),
        "copy_error": {"floor": float(floor[1:].max(initial=0.0)), "relative": rel}})
    sig = np.minimum(t, 1)
    sets = [bos, body]

    def put(st: dict, own: dict, members: np.ndarray, key: int) -> None:
        old = get_code(own, f.dst)
        if old.size() != 1 or np.any(old.combos() != 0):
            raise CertificateFailure(where, f"{f.dst} is not 0 before the head copies into it")
        put_code(st, f.dst, Code.of(sets[key], floor[members].max(0) + rel * np.abs(sets[key]).max(0)))
    return sig, put


def copy_error(report: dict[str, Any], name: str) -> tuple[float, float] | None:
    """(floor, relative part) of the error of ``name`` when a :class:`Match` head of this layer
    wrote it (its entry in the layer's ``report``), else None."""
    entry = next((e for e in report.get("heads", []) if e.get("dst") == name and "copy_error" in e), None)
    return None if entry is None else (entry["copy_error"]["floor"], entry["copy_error"]["relative"])


# --- races -----------------------------------------------------------------------------------------


def unit_groups(weights: list[np.ndarray], joins: list[int]) -> list[list[np.ndarray]]:
    """Hidden units joined by a weight, or by reading a common input dim of ``joins``: per group,
    its units in each hidden layer."""
    sizes = [W.shape[1] for W in weights[:-1]]
    base = np.cumsum([0] + sizes)
    sets = DisjointSets(int(base[-1]) + weights[0].shape[0])
    for d, k in zip(*np.nonzero(weights[0])):
        if d in joins:
            sets.union(int(k), int(base[-1] + d))
    for j in range(1, len(sizes)):
        for a, b in zip(*np.nonzero(weights[j])):
            sets.union(int(base[j - 1] + a), int(base[j] + b))
    roots = sorted({sets.find(int(base[j] + k)) for j in range(len(sizes)) for k in range(sizes[j])})
    return [[np.array([k for k in range(sizes[j]) if sets.find(int(base[j] + k)) == r], dtype=np.int64)
             for j in range(len(sizes))] for r in roots]


def _pair_vertices(lo1: int, hi1: int, lo2: int, hi2: int, cell: str) -> np.ndarray:
    """The vertices (integer points) of one order cell of the box [lo1, hi1] x [lo2, hi2]:
    ``gt`` r1 >= r2 + 1, ``lt`` r2 >= r1 + 1, ``eq`` r1 = r2 >= 1; empty when the cell is."""
    if cell == "eq":
        a, b = max(lo1, lo2, 1), min(hi1, hi2)
        return np.array([[a, a], [b, b]], dtype=np.float64) if a <= b else np.zeros((0, 2))
    if cell == "lt":
        return _pair_vertices(lo2, hi2, lo1, hi1, "gt")[:, ::-1]
    cand = [(x, y) for x in (lo1, hi1) for y in (lo2, hi2)] + [(y + 1, y) for y in (lo2, hi2)] + \
        [(x, x - 1) for x in (lo1, hi1)]
    pts = [(x, y) for x, y in cand if lo1 <= x <= hi1 and lo2 <= y <= hi2 and x >= y + 1]
    return np.unique(np.array(pts, dtype=np.float64).reshape(-1, 2), axis=0)


def _intervals(m: Any, lo: np.ndarray, hi: np.ndarray, integral: np.ndarray, Ws: list[np.ndarray],
               bs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Hidden layers after the first pre-activation [lo, hi] (float values, errors included; N
    points x units) through ReLU and the next layers: the last hidden layer's [lo, hi], whether
    each unit's float value is an integer, and its largest value (they are >= 0).  A unit surely off is
    exactly 0; a unit whose inputs are integers, with integer weights and bias and terms below
    2^p, rounds to nothing; any other rounds by gamma_(n+1) times its terms' magnitudes."""
    for W, b in zip(Ws, bs):
        off = hi <= 0
        lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
        integral = integral | off
        pos, neg = np.maximum(W, 0.0), np.minimum(W, 0.0)
        zlo, zhi = lo @ pos + hi @ neg + b, hi @ pos + lo @ neg + b
        mag = np.maximum(np.abs(lo), np.abs(hi)) @ np.abs(W) + np.abs(b)
        whole = np.all(np.round(W) == W, axis=0) & (np.round(b) == b)
        inexact = (~integral).astype(np.float64) @ (W != 0).astype(np.float64)
        exact = (inexact == 0) & whole[None] & (mag < 2.0**m.p)
        rnd = np.where(exact, 0.0, gamma(np.count_nonzero(W, axis=0) + 1, m.u)[None] * mag)
        lo, hi, integral = zlo - rnd, zhi + rnd, exact
    off = hi <= 0
    return np.maximum(lo, 0.0), np.maximum(hi, 0.0), integral | off, np.maximum(hi, 0.0)


def _affine_cell(region: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], Wp: np.ndarray, Wl: np.ndarray,
                 cst: np.ndarray, w: np.ndarray, z_lo: np.ndarray, z_hi: np.ndarray, rnd: np.ndarray,
                 lr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A one-hidden-layer race's contribution on a cell where each unit is surely on or surely off
    (its pre-activation's bounds ``z_lo``, ``z_hi`` [rows, units], input errors and rounding in):
    sum over the units on of w_i (pair . Wp_i + levels . Wl_i + cst_i) is affine in the pair and
    the levels, so its range over the cell is exact at the pair's vertices and the levels' box;
    the inputs' errors enter once through the combined coefficients (a step pair's two units
    cancel them), each unit's rounding by |w_i| times its bound.  ``region``: (the pair's
    vertices, the levels' lower and upper bounds per row, the pair's error bounds).  Returns the
    contribution's lower and upper bounds per row and which rows have every sign fixed."""
    V, lv_lo, lv_hi, e_pair = region
    on, off = z_lo > 0, z_hi <= 0
    fixed = np.all(on | off, axis=1)
    c = w[None] * on  # [rows, units]: the output weights of the units on
    ap, al = c @ Wp.T, c @ Wl.T  # the pair's and the levels' combined coefficients per row
    pair = V @ ap.T  # [vertices, rows]
    lv = np.minimum(lv_lo * al, lv_hi * al).sum(1), np.maximum(lv_lo * al, lv_hi * al).sum(1)
    base = c @ cst
    err = np.abs(ap) @ e_pair + np.abs(al) @ lr + (np.abs(c) * rnd).sum(1)
    return pair.min(0) + lv[0] + base - err, pair.max(0) + lv[1] + base + err, fixed


def _pair_codes(st: dict, name: str, where: str) -> tuple[np.ndarray, float]:
    """A recency's codes (nonnegative integers) and radius in one class."""
    c = get_code(st, name)
    v = c.combos()[:, 0]
    if c.radius.shape != (1,) or np.any(v < 0) or np.any(np.round(v) != v):
        raise CertificateFailure(where, f"{name} is not a recency (one dim holding 0 or a position)")
    return v, float(c.radius[0])


def check_race(m: Any, race: Race, st: dict, const: np.ndarray, group: list[np.ndarray],
                Ws: list[np.ndarray], bs: list[np.ndarray], out_col: np.ndarray, errs: dict[str, Any],
                where: str, scale: float = 1.0) -> tuple[float, float, float, bool, str, str]:
    """One race's group on every order cell of its pair in one class: the range of (its
    contribution - ``scale`` times the declared term), whether every contribution is an exact integer, its
    largest magnitude, and where the extremes are.  Returns (lowest, highest deviation, largest
    magnitude of its output terms, all exact integers, the cells (and levels) of the two)."""
    names = [race.first, race.second, *race.level]
    v1, r1 = _pair_codes(st, race.first, where)
    v2, r2 = _pair_codes(st, race.second, where)
    levels = [get_code(st, n) for n in race.level]
    if any(len(c.radius) != 1 for c in levels):
        raise CertificateFailure(where, f"the levels {', '.join(race.level)} are not one dim each")
    lv = [c.combos()[:, 0] for c in levels]
    if any(np.any(np.round(v) != v) for v in lv):
        raise CertificateFailure(where, f"the levels {', '.join(race.level)} are not integer codes")
    lr = np.array([float(c.radius[0]) for c in levels])

    def err(name: str, r: float, value: np.ndarray) -> np.ndarray:
        e = errs.get(name)
        return np.full(np.shape(value), r) if e is None else np.minimum(r, e[0] + e[1] * np.abs(value))

    W0 = Ws[0][:, group[0]]
    b0 = bs[0][group[0]]
    Wp, Wl, Wc = W0[:2], W0[2 : 2 + len(names) - 2], W0[len(names):]
    cst = const @ Wc + b0
    whole0 = np.all(np.round(W0) == W0, axis=0) & (np.round(b0) == b0)
    g0 = gamma(np.count_nonzero(W0, axis=0) + 1, m.u)
    rest_W = [Ws[j][group[j - 1]][:, group[j]] for j in range(1, len(group))]
    rest_b = [bs[j][group[j]] for j in range(1, len(group))]
    lo_dev, hi_dev, at_lo, at_hi = math.inf, -math.inf, "", ""
    mag_out, exact_all = 0.0, True
    cells = []
    lo1, hi1, lo2, hi2 = int(v1.min()), int(v1.max()), int(v2.min()), int(v2.max())
    for cell, held in (("gt", 1.0), ("lt", 0.0), ("eq", 0.0)):
        P = _pair_vertices(lo1, hi1, lo2, hi2, cell)
        if not len(P):
            continue
        pair = P @ Wp  # [vertices, units]
        e_pair = np.array([err(race.first, r1, P[:, 0]).max(), err(race.second, r2, P[:, 1]).max()])
        lvl_lo = np.array([v.min() for v in lv])
        lvl_hi = np.array([v.max() for v in lv])
        lvl = np.minimum(lvl_lo[:, None] * Wl, lvl_hi[:, None] * Wl), np.maximum(lvl_lo[:, None] * Wl,
                                                                                   lvl_hi[:, None] * Wl)
        z_lo = pair.min(0) + lvl[0].sum(0) + cst
        z_hi = pair.max(0) + lvl[1].sum(0) + cst
        e = e_pair @ np.abs(Wp) + lr @ np.abs(Wl)
        mag = np.abs(P).max(0) @ np.abs(Wp) + np.maximum(np.abs(lvl_lo), np.abs(lvl_hi)) @ np.abs(Wl) + \
            np.abs(const) @ np.abs(Wc) + np.abs(b0)
        cells.append((cell, (z_lo - e)[None], (z_hi + e)[None], (mag + e)[None], np.array([held]),
                      np.zeros((1, 0)), not e_pair.any() and not lr.any(), (P, lvl_lo[None], lvl_hi[None], e_pair)))
    if lo1 <= 0 <= hi1 and lo2 <= 0 <= hi2 and 0 in v1 and 0 in v2:  # both never: the levels enumerated
        X = product_rows([v[:, None] for v in lv])
        term = (X.sum(1) >= race.threshold).astype(np.float64)
        e_pair = np.array([err(race.first, r1, np.zeros(1))[0], err(race.second, r2, np.zeros(1))[0]])
        z = X @ Wl + cst
        e = e_pair @ np.abs(Wp) + lr @ np.abs(Wl)
        mag = np.abs(X) @ np.abs(Wl) + np.abs(const) @ np.abs(Wc) + np.abs(b0)
        cells.append(("both 0", z - e, z + e, mag + e, term, X, not e_pair.any() and not lr.any(),
                      (np.zeros((1, 2)), X, X, e_pair)))
    w = out_col[group[-1]]
    pos, neg = np.maximum(w, 0.0), np.minimum(w, 0.0)
    for cell, z_lo, z_hi, mag, term, X, exact_in, region in cells:
        exact = exact_in & whole0[None] & (mag < 2.0**m.p)
        rnd = np.where(exact, 0.0, g0[None] * mag)
        lo, hi, integral, size = _intervals(m, z_lo - rnd, z_hi + rnd, exact, rest_W, rest_b)
        d_lo, d_hi = lo @ pos + hi @ neg - scale * term, hi @ pos + lo @ neg - scale * term
        if not rest_W:  # one hidden layer: where every unit's sign is fixed, the race is affine
            a_lo, a_hi, fixed = _affine_cell(region, Wp, Wl, cst, w, z_lo - rnd, z_hi + rnd, rnd, lr)
            d_lo = np.where(fixed, np.maximum(d_lo, a_lo - scale * term), d_lo)
            d_hi = np.where(fixed, np.minimum(d_hi, a_hi - scale * term), d_hi)
        name = lambda i: f"{cell} at {', '.join(race.level)} = {X[i].astype(int).tolist()}" if X.shape[1] else cell
        i, j = int(np.argmin(d_lo)), int(np.argmax(d_hi))
        if d_lo[i] < lo_dev:
            lo_dev, at_lo = float(d_lo[i]), name(i)
        if d_hi[j] > hi_dev:
            hi_dev, at_hi = float(d_hi[j]), name(j)
        exact_all &= bool(np.all(integral[:, w != 0]))
        mag_out = max(mag_out, float((size @ np.abs(w)).max()))
    return lo_dev, hi_dev, mag_out, exact_all, at_lo, at_hi


def _race_owners(m: Any, ob: Races, Ws: list[np.ndarray], inputs: list[str], pairs: dict[str, int],
                 where: str) -> dict[int, list[np.ndarray]]:
    """The group of hidden units of each race: a group must read the pair of exactly one race
    (and its levels), one group per race, and write only the race's output."""
    owner: dict[int, list[np.ndarray]] = {}
    for g in unit_groups(Ws, [inputs.index(n) for n in pairs]):
        rows = set(np.nonzero(np.abs(Ws[0][:, g[0]]).sum(1))[0].tolist())
        read = {inputs[i] for i in rows if i < len(inputs)}
        races = {pairs[n] for n in read if n in pairs}
        if len(races) != 1:
            raise CertificateFailure(where, f"a group of hidden units reads {sorted(read)[:6]}: not the pair of "
                                          f"exactly one race")
        k = races.pop()
        race = ob.races[k]
        if not read <= {race.first, race.second, *race.level} or k in owner:
            raise CertificateFailure(where, f"the hidden units of the race {race.first} vs {race.second} read "
                                          f"{sorted(read - {race.first, race.second, *race.level})[:6]} or are not "
                                          f"one group")
        writes = set(np.nonzero(np.abs(Ws[-1][g[-1]]).sum(0))[0].tolist())
        if not writes <= {m.dims(race.out)[0]}:
            raise CertificateFailure(where, f"the hidden units of the race {race.first} vs {race.second} write "
                                          f"dims {sorted(writes - {m.dims(race.out)[0]})[:6]} besides {race.out}")
        owner[k] = g
    return owner


def races_mlp(m: Any, l: int, ob: Races, states: list[dict], pos_class: np.ndarray, report: dict[str, Any],
              mlp: tuple[list[np.ndarray], list[np.ndarray]] | None = None) -> list[dict]:
    """A :class:`Races` MLP (module doc): per class, each race's group on the cells of its pair's
    order; each output within half a step of its declared count.  ``report`` is the layer's (its
    heads' copy errors); ``mlp``: a part's own sub-network (a product's factor)."""
    where = f"layer {l + 1} MLP {ob.mlp}"
    weights, biases = mlp or mlp_weights(m, l, ob.mlp)
    inputs = list(dict.fromkeys(n for r in ob.races for n in (r.first, r.second, *r.level)))
    outs = list(dict.fromkeys(r.out for r in ob.races))
    if any(len(m.dims(n)) != 1 for n in inputs + outs):
        raise CertificateFailure(where, "its recencies, levels and outputs must be one dim each")
    reads = [m.dims(n)[0] for n in inputs]
    out = [m.dims(n)[0] for n in outs]
    const, class_fixed = fixed_by_class(m, pos_class, len(states))
    const -= set(reads)
    check_io(m, l, ob.mlp, weights, biases, reads, out, const)
    const_rows = sorted(const)
    Ws = [weights[0][reads + const_rows], *weights[1:]]
    pairs = {n: i for i, r in enumerate(ob.races) for n in (r.first, r.second)}
    owner = _race_owners(m, ob, Ws, inputs, pairs, where)
    errs = {n: e for n in pairs if (e := copy_error(report, n)) is not None}
    worst_all = 0.0
    new_states = []
    for c, st in enumerate(states):
        st = dict(st)
        const_vals = class_fixed[c][const_rows]
        for name, d in zip(outs, out):
            old = get_code(st, name)
            if old.size() != 1 or np.any(old.combos() != 0):
                raise CertificateFailure(where, f"{name} is not 0 before the MLP writes it")
            mine = [k for k, r in enumerate(ob.races) if r.out == name]
            offset, spread, mag, exact = float(biases[-1][d]), 0.0, abs(float(biases[-1][d])), True
            worst = (-1.0, "")  # the race whose contribution less its term varies most, and where
            for k in mine:
                if k not in owner:
                    raise CertificateFailure(where, f"no hidden unit reads the race {ob.races[k].first} vs "
                                                  f"{ob.races[k].second}")
                race = ob.races[k]
                idx = [inputs.index(n) for n in (race.first, race.second, *race.level)] + \
                    list(range(len(inputs), len(inputs) + len(const_rows)))
                sub = [Ws[0][idx], *Ws[1:]]
                lo_d, hi_d, mg, ex, at_lo, at_hi = check_race(m, race, st, const_vals, owner[k], sub, biases,
                                                                Ws[-1][:, d], errs, where)
                offset += (lo_d + hi_d) / 2
                spread += (hi_d - lo_d) / 2
                mag += mg
                exact &= ex
                if hi_d - lo_d > worst[0]:
                    worst = (hi_d - lo_d, f"race {race.first} vs {race.second}: its contribution less the declared "
                                          f"term is {lo_d:.3g} on {at_lo} but {hi_d:.3g} on {at_hi}")
            col = Ws[-1][:, d]
            whole = bool(np.all(np.round(col) == col)) and float(biases[-1][d]).is_integer()
            n_terms = int(np.count_nonzero(col)) + 1
            rnd = 0.0 if exact and whole and mag < 2.0**m.p else float(gamma(n_terms, m.u)) * mag
            bound = abs(offset) + spread + rnd + 2 * float(old.radius[0])
            if bound >= 0.5:
                raise CertificateFailure(where, f"{name} may be off its declared count by {bound:.3g} >= 1/2 "
                                              f"(offset {offset:.3g}; {worst[1]})")
            worst_all = max(worst_all, bound)
            put_code(st, name, Code.of(np.arange(len(mine) + 1, dtype=np.float64)[:, None], np.array([bound])))
        new_states.append(st)
    report["mlp"] = {"name": ob.mlp, "kind": "races", "max_error": worst_all}
    return new_states


