"""The most recent match: certifying heads whose key is the latest position whose codes match.

A :class:`~constructions.obligations.Latest` head attends, from every query t, to the most recent
position 1 <= s <= t whose key-side codes (the input-dependent dims its key reads) are one of a
declared set -- BOS when there is none -- and copies a sum of subspaces there.  Which key wins
depends on the input (a bounded stack's level head: the last push that raised the depth to its
level), so, as for :class:`~constructions.obligations.Recent` (Lemma 16's most-recent flag,
``verify/certify/``), the checker bounds the pattern for every position the key can be:

* the query reads fixed dims only, the key fixed dims and the declared ones, so for every code c
  the key side can hold, S_c(t, s) is a positional score (computed with its rounding bound,
  widened by the codes' error through |W_K|);
* a position s *may match* when some code its class can hold matches, *surely matches* when all
  do (BOS always counts as a match: it is the fallback);
* for a query t and a key s* that may be the most recent match (it may match, and no position in
  (s*, t] surely does), every input that makes it so has no match on (s*, t] and anything before
  s*.  So the weight off s* is at most
  sum_{s < s*} e^(hi_any(s) - lo_match(s*)) + sum_{s* < s <= t} e^(hi_nomatch(s) - lo_match(s*)),
  two prefix sums in log space: all O(T^2) pairs (t, s*) cost two cumulative passes per query,
  and s* must beat every rival by a positive gap;
* the copied code is the sum of the src codes that go with a matching key code in the classes s*
  can be in (the class's joint set of key and src codes: a product where no joint is kept).

An :class:`~constructions.obligations.AnyFlag` head with its
:class:`~constructions.obligations.Threshold` MLP ("some flag so far", the bounded stack's
error bit) is certified as one step, :func:`any_layer`: with every flag 0 at and before t the head's
output is exactly 0 (each value is an exact 0: the weighted sum of zeros); with some flag, the
flagged keys' weight is at least 1 / (1 + sum_s e^(hi_0(s) - lo_flag(s*))) for the worst single
flagged key s* (more flags only add weight to flagged keys), so the output is at least that
times the least nonzero flag, less rounding; the MLP is then evaluated on both intervals.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from constructions.obligations import AnyFlag, Latest, Layer, Threshold

from .affine import affine
from .lookups import check_io, mlp_weights
from .scores import read_dims, score_factors, recency_gaps
from .state import CertificateFailure, Code, get_code, put_code, gamma

ROWS = 1 << 20
"""Score entries (queries x keys) per chunk of a pattern's pass."""


def _copy_sum(m: Any, l: int, h: int, parts: tuple[str, ...], dst_name: str, where: str) -> None:
    """The head must copy the sum of ``f.src`` into ``f.dst`` and nothing else: W_V and W_O hold
    only 0 and 1, each src part's dims go to the dst dims in order (W_V W_O the identity from each
    part), and no other dim is read or written -- so the value is an exact sum of the parts."""
    b = m.blocks[l]
    WV, WO = b["W_V"][h], b["W_O"][h]
    dst = m.dims(dst_name)
    if np.any((WV != 0) & (WV != 1)) or np.any((WO != 0) & (WO != 1)) or (np.count_nonzero(WO, axis=1) > 1).any():
        raise CertificateFailure(where, "a copying head's W_V and W_O must hold only 0 and 1 (W_O one entry "
                                      "per value dim), so the copy is exact in floating point")
    VO = WV @ WO
    want = np.zeros_like(VO)
    for part in parts:
        src = m.dims(part)
        if len(src) != len(dst):
            raise CertificateFailure(where, f"{part} and {dst_name} differ in width")
        want[src, dst] += 1.0
    if not np.array_equal(VO, want):
        i, j = np.argwhere(VO != want)[0]
        raise CertificateFailure(where, f"does not copy {' + '.join(parts)} into {dst_name}: W_V W_O[{i}, {j}] = "
                                      f"{VO[i, j]:.6g}, not {want[i, j]:g}")


def _rows(st: Any, f: Latest, kd: int, width: int, bos: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A class's key codes and the summed src codes that go with them, and which rows match (at
    BOS every row: BOS is the fallback key)."""
    rows = get_code(st, " + ".join([f.keys, *f.src])).combos()
    keys = rows[:, :kd]
    srcs = rows[:, kd:].reshape(len(rows), len(f.src), width).sum(1)
    match = np.ones(len(rows), dtype=bool) if bos else np.array(
        [tuple(int(v) for v in k) in set(f.match) if np.all(np.round(k) == k) else False for k in keys], dtype=bool)
    return keys, srcs, match


def latest_pattern(m: Any, l: int, h: int, f: Latest, states: list[Any],
            pos_class: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Any], list[Any]]:
    """Leaked-mass bound and smallest score gap per query position of a :class:`Latest` head,
    over every input (module doc); the key's candidate set id per query, the copied codes per
    id, and each class's summed src codes (what the head's value can be there)."""
    where = f"layer {l + 1} head {f.head}"
    _copy_sum(m, l, h, f.src, f.dst, where)
    kd = m.dims(f.keys)
    width = len(m.dims(f.dst))
    bos_class = int(pos_class[0])
    n = len(states)
    per_class = [_rows(st, f, len(kd), width, c == bos_class) for c, st in enumerate(states)]
    radius = [get_code(st, " + ".join([f.keys, *f.src])).radius for st in states]
    r_key = np.max([r[: len(kd)] for r in radius], axis=0)
    r_src = [r[len(kd):].reshape(len(f.src), width).sum(0) + gamma(len(f.src) + 1, m.u) * np.abs(s_).max(0)
             for r, (_, s_, _) in zip(radius, per_class)]
    src_codes = [Code.of(s_, r_) for (_, s_, _), r_ in zip(per_class, r_src)]
    may = np.array([bool(mt.any()) for _, _, mt in per_class])
    must = np.array([bool(mt.all()) for _, _, mt in per_class])
    flagged = [Code.of(s_[mt], r_) if mt.any() else None for (_, s_, mt), r_ in zip(per_class, r_src)]
    T = m.T
    t_all = np.arange(T + 1)
    may_pos, must_pos = may[pos_class], must[pos_class]
    surely = np.maximum.accumulate(np.where(must_pos, t_all, 0))
    latest = np.stack([np.maximum.accumulate(np.where((pos_class == c) & may_pos, t_all, -1)) for c in range(n)],
                      axis=1)
    sets, sig = np.unique(latest >= surely[:, None], axis=0, return_inverse=True)
    codes = []
    for row in sets:
        parts = [p for p in (flagged[c] for c in np.nonzero(row)[0]) if p is not None]
        codes.append(Code.of(np.concatenate([p.combos() for p in parts]),
                                  np.max([p.radius for p in parts], axis=0)))
    # the scores of every key code the key side can hold, and where each may occur (matching or not)
    kc = np.unique(np.concatenate([k for k, _, _ in per_class]), axis=0)
    scores, wk, g = _code_scores(m, l, h, kd, kc, r_key, where)
    on_match = [np.array([bool(np.any(np.all(k == code, axis=1) & mt)) for k, _, mt in per_class])[pos_class]
                for code in kc]
    on_other = [np.array([bool(np.any(np.all(k == code, axis=1) & ~mt)) for k, _, mt in per_class])[pos_class]
                for code in kc]
    leak, gaps = recency_pass(T, scores, on_match, on_other, may_pos, surely, wk, g, where)
    return leak, gaps, sig.reshape(-1), codes, src_codes


def _constant_query(sc: Any) -> bool:
    """Whether every query position has the same query (and rounding): its scores then do not
    depend on t, only which keys exist does."""
    return bool(np.all(sc.q == sc.q[0]) and np.all(sc.Rq == sc.Rq[0]) and np.all(sc.q_exact == sc.q_exact[0]))


def _bounds(scores: list[Any], on_match: list[np.ndarray], on_other: list[np.ndarray], wk: np.ndarray,
            g: float, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """For the queries ``t`` and every key: the highest score the key can have without a match
    (``on_other`` says where each code may occur so), with one, the lowest with one, and the
    largest |score| of the highest and the lowest, added (the size of the checker's own float64 sums);
    the codes' error moves a score by up to
    (1 + 4g) |q_t| . ``wk``."""
    extra = ((1 + 4 * g) * (np.abs(scores[0].q[t]) @ wk))[:, None]
    shape = (len(t), len(on_match[0]))
    hi0, hi1, lo1 = np.full(shape, -np.inf), np.full(shape, -np.inf), np.full(shape, np.inf)
    top = 0.0
    for sc, hit, miss in zip(scores, on_match, on_other):
        centre, spread = sc.rows(t)
        up, down = centre + spread + extra, centre - spread - extra
        top = max(top, float(np.abs(up).max()) + float(np.abs(down).max()))
        hi0 = np.where(miss[None, :], np.maximum(hi0, up), hi0)
        hi1 = np.where(hit[None, :], np.maximum(hi1, up), hi1)
        lo1 = np.where(hit[None, :], np.minimum(lo1, down), lo1)
    return hi0, hi1, lo1, top


def _sweep(T: int, scores: list[Any], on_match: list[np.ndarray], on_other: list[np.ndarray],
           may_pos: np.ndarray, surely: np.ndarray, wk: np.ndarray, g: float,
           where: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_pass` when the query does not depend on t: the rivals before s* are a prefix sum
    over keys alone (one cumulative pass), those in (s*, t] are updated key by key as t grows
    (later_t = logaddexp(later_(t-1), hi0(t)) on the keys before t): O(T) per query, no T x T
    array."""
    (hi0,), (hi1,), (lo1,), top = _bounds(scores, on_match, on_other, wk, g, np.array([0]))
    prior = np.maximum(hi0, hi1)
    before = np.concatenate([[-np.inf], np.logaddexp.accumulate(prior)[:-1]])
    best_before = np.concatenate([[-np.inf], np.maximum.accumulate(prior)[:-1]])
    slack = math.exp(4 * (T + 2) * 2.0**-52 * (1 + top)) * (1 + 2.0**-50)  # the checker's own sums
    leak = np.zeros(T + 1)
    gaps = np.full(T + 1, np.inf)
    later = np.full(T + 1, -np.inf)
    best_later = np.full(T + 1, -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        for t in range(T + 1):
            if t:
                np.logaddexp(later[:t], hi0[t], out=later[:t])
                np.maximum(best_later[:t], hi0[t], out=best_later[:t])
            keys = np.nonzero(may_pos[surely[t] : t + 1])[0] + surely[t]
            leak[t] = np.exp((np.logaddexp(before[keys], later[keys]) - lo1[keys]).max()) * slack  # inf past float range
            gap = lo1[keys] - np.maximum(best_before[keys], best_later[keys])
            gaps[t] = gap.min()
            if gaps[t] <= 0:
                key = int(keys[np.argmin(gap)])
                rival = np.concatenate([prior[:key], [-np.inf], hi0[key + 1 : t + 1]])
                raise CertificateFailure(where, f"at query position {t}, when {key} is the most recent "
                                              f"match, key {int(np.argmax(rival))} may score as high (gap "
                                              f"{float(gaps[t]):.3g} after rounding and the codes' error)")
    return leak, gaps


def _code_scores(m: Any, l: int, h: int, kd: list[int], kc: np.ndarray, r_key: np.ndarray,
                 where: str) -> tuple[list[Any], np.ndarray, float]:
    """A head's positional scores with its key's input-dependent dims ``kd`` set to each code of
    ``kc`` (the query must read fixed dims only, the key fixed dims and ``kd``); and what the
    codes' error (``r_key``) moves a score by per unit of |q|, with the factor its rounding adds."""
    b = m.blocks[l]
    Wq, Wk = b["W_Q"][h], b["W_K"][h]
    if not read_dims(Wq) <= m.fixed_dims or not read_dims(Wk) <= m.fixed_dims | set(kd):
        extra = sorted((read_dims(Wq) - m.fixed_dims) | (read_dims(Wk) - m.fixed_dims - set(kd)))
        raise CertificateFailure(where, f"its query or key reads input-dependent dims {extra[:6]} besides "
                                      f"the declared ones")
    rows = sorted(read_dims(Wq) | read_dims(Wk) | set(kd))
    cols = np.nonzero((np.abs(Wq).sum(0) > 0) & (np.abs(Wk).sum(0) > 0))[0]
    X = m.fixed[:, rows]
    at = [rows.index(d) for d in kd]
    scores = []
    for code in kc:
        Xc = X.copy()
        Xc[:, at] = code
        scores.append(score_factors(m, Wq, Wk, rows, cols, X, Xc))
    return scores, np.abs(Wk[kd][:, cols]).T @ r_key, float(gamma(len(cols) + 1, m.u))


def recency_pass(T: int, scores: list[Any], on_match: list[np.ndarray], on_other: list[np.ndarray],
          may_pos: np.ndarray, surely: np.ndarray, wk: np.ndarray, g: float,
          where: str) -> tuple[np.ndarray, np.ndarray]:
    """The leak and the smallest gap per query (module doc), by chunks of queries: per key the
    highest score it can have without a match (``hi0``), with one (``hi1``) and the lowest with
    one (``lo1``), then the two cumulative passes in log space."""
    if all(_constant_query(sc) for sc in scores):
        return _sweep(T, scores, on_match, on_other, may_pos, surely, wk, g, where)
    s_all = np.arange(T + 1)
    leak = np.zeros(T + 1)
    gaps = np.full(T + 1, np.inf)
    step = max(1, ROWS // (T + 1))
    with np.errstate(invalid="ignore", over="ignore"):
        for lo in range(0, T + 1, step):
            t = np.arange(lo, min(T + 1, lo + step))
            hi0, hi1, lo1, top = _bounds(scores, on_match, on_other, wk, g, t)
            future = s_all[None, :] > t[:, None]
            prior = np.where(future, -np.inf, np.maximum(hi0, hi1))
            after = np.where(future, -np.inf, hi0)
            none = np.full((len(t), 1), -np.inf)
            before = np.concatenate([none, np.logaddexp.accumulate(prior, axis=1)[:, :-1]], axis=1)
            later = np.concatenate([np.logaddexp.accumulate(after[:, ::-1], axis=1)[:, ::-1][:, 1:], none], axis=1)
            ok = ~future & may_pos[None, :] & (s_all[None, :] >= surely[t][:, None])
            log_leak = np.where(ok, np.logaddexp(before, later) - lo1, -np.inf)
            slack = math.exp(4 * (T + 2) * 2.0**-52 * (1 + top)) * (1 + 2.0**-50)  # the checker's own sums
            leak[t] = np.exp(log_leak.max(1)) * slack
            gap, bad = recency_gaps(prior, after, lo1, ok)
            gaps[t] = gap.min(1)
            if bad is not None:
                i, key, rival = bad
                raise CertificateFailure(where, f"at query position {int(t[i])}, when {key} is the most recent "
                                              f"match, key {rival} may score as high (gap "
                                              f"{float(gap[i, key]):.3g} after rounding and the codes' error)")
    return leak, gaps


def is_any_layer(layer: Layer) -> bool:
    """Whether ``layer`` is an "any flag so far" step (:func:`any_layer` checks it whole)."""
    return any(isinstance(f, AnyFlag) for f in layer.fetches)


def any_layer(m: Any, l: int, layer: Layer, states: list[Any], pos_class: np.ndarray,
              report: dict, mlp: tuple[list[np.ndarray], list[np.ndarray]] | None = None) -> tuple[list[Any], np.ndarray]:
    """An :class:`AnyFlag` head and its :class:`Threshold` MLP (module doc): per query t, the
    head's output where no flag can have occurred (exactly 0 up to the flags' radius) and where one
    has (at least the flagged keys' least weight times the least flag), then the MLP on both
    intervals, which must give exactly the bit's code up to less than half its gap.  ``mlp``: the
    threshold's own sub-network, when it is one part of a side-by-side MLP."""
    f, th = layer.fetches[0], layer.mlp
    if len(layer.fetches) != 1 or not isinstance(f, AnyFlag) or not isinstance(th, Threshold) or th.src != f.dst:
        raise CertificateFailure(f"layer {l + 1}", "an any-flag head must be the layer's only head, and its "
                                      "MLP the threshold that reads it")
    where = f"layer {l + 1} head {f.head}"
    index = {hd["name"]: hd["index"] for hd in m.blocks[l]["layout"]["heads"]}
    if set(index) != {f.head}:
        raise CertificateFailure(f"layer {l + 1}", f"heads {sorted(set(index) ^ {f.head})} have no obligation "
                                      f"or are not in the model")
    h = index[f.head]
    parts = tuple(f.flags.split(" + "))
    if len(m.dims(f.dst)) != 1 or any(len(m.dims(p)) != 1 for p in parts):
        raise CertificateFailure(where, "the flags and their sum must be one dim each")
    _copy_sum(m, l, h, parts, f.dst, where)
    kd = m.dims(f.flags)
    rows = [get_code(st, f.flags) for st in states]
    if any(np.any(r.combos() < 0) or np.any(np.round(r.combos()) != r.combos()) for r in rows):
        raise CertificateFailure(where, f"{f.flags} may hold a code that is not a non-negative integer")
    for st in states:
        for name, what in ((f.dst, "head"), (th.dst, "MLP")):
            old = get_code(st, name)
            if old.size() != 1 or np.any(old.combos() != 0) or np.any(old.radius != 0):
                raise CertificateFailure(where, f"{name} is not exactly 0 before the {what} writes it")
    r_key = np.max([r.radius for r in rows], axis=0)
    r_val = float(r_key.sum())
    kc = np.unique(np.concatenate([r.combos() for r in rows]), axis=0)
    scores, wk, g = _code_scores(m, l, h, kd, kc, r_key, where)
    flag = kc.sum(1) > 0
    has = [np.array([bool(np.any(np.all(r.combos() == code, axis=1))) for r in rows])[pos_class] for code in kc]
    must = np.array([bool(np.all(r.combos().sum(1) > 0)) for r in rows])[pos_class]
    may = np.array([bool(np.any(r.combos().sum(1) > 0)) for r in rows])[pos_class]
    fmin = float(kc.sum(1)[flag].min()) if flag.any() else 0.0
    vmax = float(kc.sum(1).max()) + r_val
    T = m.T
    t_all = np.arange(T + 1)
    can0 = np.cumsum(must) == 0  # no position <= t surely flagged
    can1 = np.cumsum(may) > 0
    weight = _flag_weight(T, scores, flag, has, wk, g)
    n_heads, d_head = m.blocks[l]["W_O"].shape[:2]
    rounding = (gamma(4 * (t_all + 1) + 16, m.u) + gamma(2, m.u)) * vmax
    rounding = rounding + gamma(n_heads * d_head + 1, m.u) * (vmax + rounding)
    y0 = r_val + rounding  # no flag: every value is 0 up to the flags' radius
    y1_lo = weight * (fmin - r_val) - (1 - weight) * r_val - rounding
    y1_hi = vmax + rounding
    report.setdefault("heads", []).append({"name": f.head, "min_score_gap": None,
                                           "max_leaked_mass": float(np.max(1 - weight[can1], initial=0.0)),
                                           "min_flag_output": float(np.min(y1_lo[can1], initial=np.inf))})
    zero = _threshold(m, l, th, 0.0, float(np.max(y0[can0], initial=0.0)), 0.0, mlp)
    one_lo, one_hi = float(np.min(y1_lo[can1], initial=1.0)), float(np.max(y1_hi[can1], initial=1.0))
    if one_lo <= 0:
        raise CertificateFailure(where, f"with a flag at or before a query, the flagged keys' weight may be "
                                      f"{float(np.min(weight[can1])):.3g}, so the output may be {one_lo:.3g} <= 0")
    one = _threshold(m, l, th, (one_lo + one_hi) / 2, (one_hi - one_lo) / 2, 1.0, mlp)
    sig = np.stack([pos_class, can0, can1], axis=1)
    groups, inverse = np.unique(sig, axis=0, return_inverse=True)
    new_states = []
    spread = max(float(np.max(y0[can0], initial=0.0)), one_hi - 1, 1 - one_lo)
    for c, c0, c1 in groups:
        st = dict(states[c])
        bits = np.array([[0.0]] * bool(c0) + [[1.0]] * bool(c1))
        put_code(st, f.dst, Code.of(bits, np.array([spread])))  # the head's output: near 0, or near 1
        put_code(st, th.dst, Code.of(bits, np.array([max(zero, one)])))
        new_states.append(st)
    report["mlp"] = {"name": th.mlp, "kind": "threshold", "max_error": max(zero, one)}
    return new_states, inverse.reshape(-1)


def _flag_weight(T: int, scores: list[Any], flag: np.ndarray, has: list[np.ndarray], wk: np.ndarray,
                 g: float) -> np.ndarray:
    """Per query t, the least total weight on flagged keys when some key s* <= t is flagged:
    1 / (1 + sum_{s <= t} e^(hi_0(s) - lo_flag(s*))) for the worst s* (one flagged key; more only
    add weight to flagged keys), 1 when no key can be flagged; hi_0 the highest unflagged score."""
    hit = [there & fl for there, fl in zip(has, flag)]
    miss = [there & ~fl for there, fl in zip(has, flag)]
    with np.errstate(invalid="ignore", over="ignore"):
        if all(_constant_query(sc) for sc in scores):  # scores independent of t: two cumulative passes
            (hi0,), _, (lo1,), _ = _bounds(scores, hit, miss, wk, g, np.array([0]))
            total, worst = np.logaddexp.accumulate(hi0), np.minimum.accumulate(lo1)
            return np.where(np.isfinite(worst), 1 / (1 + np.exp(total - worst) * (1 + 2.0**-40)), 1.0)
        s_all = np.arange(T + 1)
        out = np.ones(T + 1)
        step = max(1, ROWS // (T + 1))
        for lo in range(0, T + 1, step):
            t = np.arange(lo, min(T + 1, lo + step))
            hi0, _, lo1, _ = _bounds(scores, hit, miss, wk, g, t)
            future = s_all[None, :] > t[:, None]
            total = np.logaddexp.reduce(np.where(future, -np.inf, hi0), axis=1)
            worst = np.where(future, np.inf, lo1).min(1)
            out[t] = np.where(np.isfinite(worst), 1 / (1 + np.exp(total - worst) * (1 + 2.0**-40)), 1.0)
    return out


def _threshold(m: Any, l: int, th: Threshold, x: float, r: float, want: float,
               mlp: tuple[list[np.ndarray], list[np.ndarray]] | None = None) -> float:
    """The threshold MLP (or its sub-network ``mlp``) on every input within ``r`` of ``x``: its
    output's distance from ``want`` (with its error bound), which must stay below 1/2
    (CertificateFailure otherwise)."""
    where = f"layer {l + 1} MLP {th.mlp}"
    weights, biases = mlp or mlp_weights(m, l, th.mlp)
    src, dst = m.dims(th.src), m.dims(th.dst)
    check_io(m, l, th.mlp, weights, biases, src, dst, set())
    z, err = affine(np.array([[x]]), np.array([r]), [weights[0][src], *weights[1:]], biases, m.u, m.p)
    bound = float((np.abs(z[0, dst] - want) + err[0, dst]).max())
    if bound >= 0.5:
        raise CertificateFailure(where, f"on inputs within {r:.3g} of {x:.3g} the output may be {bound:.3g} "
                                      f"away from {want:g}, not within half the gap 1")
    return bound
