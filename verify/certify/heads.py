"""Attention heads under the checker: positional heads (every score S(t, s) with its rounding
bound), most-recent-flag heads (Lemma 16, content-dependent), and averaging heads (Lemma 15's
prefix sums); each rule bounds the leaked mass and the copied code's error for every input."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from constructions.obligations import AnyFlag, Average, Fetch, Latest, Match, Recent

from .latest import latest_pattern, recency_pass
from .recency import match_head
from .scores import copy_map, positional_scores, read_dims, score_factors, Scores
from .state import CertificateFailure, Code, NotCertifiable, State, Model, get_code, merge, put_code, gamma, quantum, snaps


def _head_pattern(m: Model, l: int, h: int, key: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Leaked-mass bound per query position of a positional head, checking that ``key[t]`` wins
    every row by a positive gap after rounding (CertificateFailure otherwise)."""
    sc = positional_scores(m, l, h, name)
    T = m.T
    if np.any(key > np.arange(T + 1)) or np.any(key < 0):
        raise CertificateFailure(f"layer {l + 1} head {name}", "an obligation's key lies after its query")
    leak = np.zeros(T + 1)
    gaps = np.full(T + 1, np.inf)
    step = max(1, (1 << 21) // (T + 1))
    s_all = np.arange(T + 1)
    for lo in range(0, T + 1, step):
        t = np.arange(lo, min(T + 1, lo + step))
        centre, spread = sc.rows(t)
        low = centre[np.arange(len(t)), key[t]] - spread[np.arange(len(t)), key[t]]  # the intended key's lowest
        hi = centre + spread
        hi[s_all[None, :] > t[:, None]] = -np.inf  # causal: keys after the query do not exist
        hi[np.arange(len(t)), key[t]] = -np.inf  # the intended key itself
        worst = low - hi.max(1)
        bad = np.nonzero(worst <= 0)[0]
        if len(bad):
            i = bad[0]
            s = int(np.argmax(hi[i]))
            raise CertificateFailure(
                f"layer {l + 1} head {name}",
                f"at query position {int(t[i])} key {s} scores within the rounding bound of the intended key "
                f"{int(key[t[i]])} (gap {float(worst[i]):.3g} after rounding)")
        gaps[t] = worst
        hi -= low[:, None]
        leak[t] = np.exp(hi, out=hi).sum(1)
    return leak, gaps


def _flag_candidates(f: Recent, states: list[State], pos_class: np.ndarray,
                     where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Code]]:
    """Where a most-recent-flag head's key can be (Lemma 16): per position, whether its flag may be
    1 (some code of its class has flag 1) and whether it surely is; per query t, which classes the key's class can be (those
    with such a position at or after the last position <= t whose flag is surely 1: BOS's at
    least), as an id ``sig[t]``; per id, what the copied code can be (the src codes that go with a
    set flag in those classes, jointly where the state keeps flag and src together)."""
    may = np.zeros(len(states), dtype=bool)
    must = np.zeros(len(states), dtype=bool)
    flagged: list[Code | None] = []
    for c, st in enumerate(states):
        pair = get_code(st, f"{f.flag} + {f.src}")
        rows = pair.combos()
        flag = rows[:, 0]
        if np.any((flag != 0) & (flag != 1)):
            raise CertificateFailure(where, f"{f.flag} may hold {sorted(set(flag.tolist()) - {0.0, 1.0})[:3]}, not "
                                     f"a flag (0 or 1)")
        on = rows[flag == 1, 1:]
        may[c], must[c] = len(on) > 0, bool(np.all(flag == 1))
        flagged.append(Code.of(on, pair.radius[1:]) if len(on) else None)
    if not must[pos_class[0]]:
        raise CertificateFailure(where, f"BOS's {f.flag} is not surely 1, so a query may find no flagged key")
    t_all = np.arange(len(pos_class))
    may_pos, must_pos = may[pos_class], must[pos_class]
    surely = np.maximum.accumulate(np.where(must_pos, t_all, 0))
    latest = np.stack([np.maximum.accumulate(np.where((pos_class == c) & may_pos, t_all, -1))
                       for c in range(len(states))], axis=1)
    sets, sig = np.unique(latest >= surely[:, None], axis=0, return_inverse=True)
    codes = []
    for row in sets:
        parts = [p for p in (flagged[c] for c in np.nonzero(row)[0]) if p is not None]
        codes.append(Code.of(np.concatenate([p.combos() for p in parts]), np.max([p.radius for p in parts], axis=0)))
    return may_pos, must_pos, sig.reshape(-1), codes


def _flag_scores(m: Model, l: int, h: int, flag: int, where: str) -> tuple[Scores, Scores, np.ndarray]:
    """A most-recent-flag head's scores with every key's flag 0 and with it 1, and |W_K|'s row of
    the flag (what the flag's error moves a score by, per unit of |q|).  The query must read
    fixed dims only, the key fixed dims and the flag."""
    b = m.blocks[l]
    Wq, Wk = b["W_Q"][h], b["W_K"][h]
    if not read_dims(Wq) <= m.fixed_dims or not read_dims(Wk) <= m.fixed_dims | {flag}:
        extra = sorted((read_dims(Wq) - m.fixed_dims) | (read_dims(Wk) - m.fixed_dims - {flag}))
        raise CertificateFailure(where, f"its query or key reads input-dependent dims {extra[:6]} besides the flag")
    rows = sorted(read_dims(Wq) | read_dims(Wk) | {flag})
    cols = np.nonzero((np.abs(Wq).sum(0) > 0) & (np.abs(Wk).sum(0) > 0))[0]
    X = m.fixed[:, rows]
    X1 = X.copy()
    X1[:, rows.index(flag)] = 1.0
    return (score_factors(m, Wq, Wk, rows, cols, X, X), score_factors(m, Wq, Wk, rows, cols, X, X1),
            np.abs(Wk[flag, cols]))


def _recent_pattern(m: Model, l: int, h: int, f: Recent, states: list[State],
                    pos_class: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Code]]:
    """Leaked-mass bound per query position of a most-recent-flag head, over every input.

    For a query t and a key s* that can be the most recent flagged position (its flag may be 1,
    and no position in (s*, t] surely has flag 1), every input that makes s* the key has flag 0
    on (s*, t] and any flag before s*.  So the weight off s* is at most
    sum_{s < s*} e^(hi_any(s) - lo_1(s*)) + sum_{s* < s <= t} e^(hi_0(s) - lo_1(s*)), with hi/lo
    the score bounds for flag 0, 1 or either (rounding and the flag's error included); the bound
    at t is the largest over its possible keys.  The passes are verify/certify/latest.py's
    ``recency_pass`` (a most recent match whose codes are the flag: the flag-0 scores where the
    flag may be 0, the flag-1 scores where it may be 1), in log space, with a slack for the
    checker's own float64 rounding.  Returns the leak and smallest score gap per t, the key's
    candidate set id per t, and the copied codes per id."""
    where = f"layer {l + 1} head {f.head}"
    flag = m.dims(f.flag)
    if len(flag) != 1:
        raise CertificateFailure(where, f"the flag {f.flag} is not one dim")
    may_pos, must_pos, sig, codes = _flag_candidates(f, states, pos_class, where)
    sc0, sc1, wflag = _flag_scores(m, l, h, flag[0], where)
    r_flag = max(float(get_code(st, f.flag).radius[0]) for st in states)
    g = float(gamma(len(wflag) + 1, m.u))
    t_all = np.arange(m.T + 1)
    surely = np.maximum.accumulate(np.where(must_pos, t_all, 0))
    never = np.zeros(m.T + 1, dtype=bool)  # the flag-0 scores where the flag may be 0, flag-1 where it may be 1
    leak, gaps = recency_pass(m.T, [sc0, sc1], [never, may_pos], [~must_pos, never], may_pos, surely,
                                     r_flag * wflag, g, where)
    return leak, gaps, sig, codes


def _average_pattern(m: Model, l: int, h: int, first: int, last: int, mass: int,
                     name: str) -> tuple[np.ndarray, ...]:
    """Bounds on a positional averaging head's weights (Lemma 15), per query position t:

    ``dev``: sum over its declared keys (first..min(last, t)) of |p(t, s) - 1/mass| plus the
    weight on every other real key; ``leak``: that other weight alone; ``mag``: the weight on
    all real keys; ``p0``: BOS's weight; ``reach``: the largest |score - row maximum| of BOS and
    the declared keys (what the exponent's rounding scales with).  Every p(t, s) lies in
    [e^lo_s / (e^lo_s + sum_{s' != s} e^hi_s'), e^hi_s / (e^hi_s + sum_{s' != s} e^lo_s')] for the
    scores' rounding intervals [lo, hi] (softmax is increasing in its own score and decreasing in
    the others).  Keys whose key-side features agree (and that are declared alike) score alike
    for every query, so they are counted, not enumerated: O(T x kinds of keys), not O(T^2)."""
    sc = positional_scores(m, l, h, name)
    T = m.T
    s_all = np.arange(T + 1)
    mine_s = (s_all >= first) & (s_all <= last) & (s_all >= 1)
    feats = np.concatenate([sc.k, sc.Rk, sc.k_exact, mine_s[:, None], (s_all == 0)[:, None]], axis=1)
    kinds, inverse = np.unique(feats, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    reps = np.array([int(np.argmax(inverse == g)) for g in range(len(kinds))])
    positions = [np.nonzero(inverse == g)[0] for g in range(len(kinds))]
    rep = Scores(sc.q, sc.k[reps], sc.Rq, sc.Rk[reps], sc.q_exact, sc.k_exact[reps], sc.p)
    mine, bos = mine_s[reps], reps == 0
    real = ~bos
    w = 1.0 / mass
    dev, leak, mag, p0, reach = (np.zeros(T + 1) for _ in range(5))
    step = max(1, (1 << 21) // len(reps))
    for lo in range(0, T + 1, step):
        t = np.arange(lo, min(T + 1, lo + step))
        count = np.stack([np.searchsorted(pos, t, side="right") for pos in positions], axis=1).astype(np.float64)
        centre, spread = rep.rows(t)
        there = count > 0
        hi = np.where(there, centre + spread, -np.inf)
        low = np.where(there, centre - spread, -np.inf)
        top = hi.max(1, keepdims=True)
        e_hi, e_lo = np.exp(hi - top), np.exp(low - top)
        rest_lo = np.maximum((count * e_lo).sum(1, keepdims=True) - e_lo, 0.0)
        rest_hi = (count * e_hi).sum(1, keepdims=True) - e_hi
        p_hi = np.where(there, e_hi / (e_hi + rest_lo), 0.0)
        p_lo = np.where(there, e_lo / (e_lo + rest_hi), 0.0)
        other = (count * np.where(real & ~mine, p_hi, 0.0)).sum(1)
        dev[t] = (count * np.where(mine, np.maximum(p_hi - w, w - p_lo), 0.0)).sum(1) + other
        leak[t], mag[t] = other, (count * np.where(real, p_hi, 0.0)).sum(1)
        p0[t] = p_hi[:, bos].sum(1)
        reach[t] = np.where(there & (mine | bos), np.abs(low - top), 0.0).max(1)
    slack = 1e-12 + (s_all + 2) * 2.0**-50  # the checker's own float64 sums
    return (dev * (1 + 1e-12) + slack, leak + slack, mag * (1 + 1e-12) + slack, np.minimum(1.0, p0 + slack),
            reach)


def _average(m: Model, l: int, f: Average, index: dict[str, int], states: list[State], pos_class: np.ndarray,
             report: dict[str, Any]) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """An :class:`Average` obligation: the codes ``dst`` may hold after BOS (per dim, every
    multiple of the src codes' common step times scale / mass that T of them can sum to), its
    error bound at every position [T + 1, dims] and the largest code per dim.

    Per head: the declared output is scale/mass times the sum of src over its keys; the real one
    moves by at most scale (vmax dev + r_src mag + r_bos p0) (values within r of their codes),
    plus rounding.  Rounding of a sum in any order: each addition errs by at most u times its
    result and at most the smaller operand (round to nearest), so with B terms that matter (BOS and
    the declared keys) and the others tiny, the error is at most (B - 1) u sum|terms| plus
    (1 + n u) sum|tiny terms| -- merges of two parts holding a big term number B - 1, every other
    merge errs by at most its tiny part.  So each weight carries a relative error of
    (B + 17) u + leak (1 + n u) + u reach (the normaliser, the division, exp and an online
    softmax's rescalings within 16 ulps, the exponent's rounding), and the weighted sum adds
    (B - 1) u sum|p v| + (1 + n u) leak vmax; the heads' outputs add through W_O."""
    T = m.T
    u = m.u
    where = f"layer {l + 1} heads {', '.join(f.heads)}"
    bos = get_code(states[pos_class[0]], f.src)
    if bos.size() != 1 or np.any(bos.combos() != 0):
        raise CertificateFailure(where, f"BOS's {f.src} is not 0, so the weight BOS absorbs is not neutral")
    dims = len(m.dims(f.src))
    body = [get_code(states[c], f.src) for c in sorted(set(pos_class[1:].tolist()))] or [bos]
    codes = [np.unique(np.concatenate([c.per_dim[i] for c in body])) for i in range(dims)]
    if any(np.any(np.round(v) != v) for v in codes):
        raise NotCertifiable(f"{where}: averages of non-integer codes are not certified yet")
    vmax = np.array([np.abs(v).max() for v in codes])
    r_src = np.max([c.radius for c in body], axis=0)
    t = np.arange(T + 1)
    W_O = m.blocks[l]["W_O"]
    err, size = np.zeros((T + 1, dims)), np.zeros((T + 1, dims))
    for h, first, last in zip(f.heads, f.first, f.last):
        stored = copy_map(m, l, index[h], h, f.src, f.dst, f.scale)
        dev, leak, mag, p0, reach = _average_pattern(m, l, index[h], first, last, f.mass, h)
        keys = np.clip(np.minimum(t, last) - first + 1, 0, None)
        z = abs(stored) * ((vmax + r_src)[None] * mag[:, None] + bos.radius[None] * p0[:, None])
        e = abs(stored) * (vmax[None] * dev[:, None] + r_src[None] * mag[:, None] + bos.radius[None] * p0[:, None])
        e += abs(stored - f.scale) * vmax[None] * (keys / f.mass)[:, None]  # the stored scale's rounding
        tiny = (1 + (t + 1) * u) * leak
        rho = (keys + 18) * u + tiny + u * reach
        e += (rho + keys * u)[:, None] * z + (abs(stored) * tiny)[:, None] * (vmax + r_src)[None]
        e += gamma(2, u) * z  # the values' own product
        err, size = err + e, size + z + e
        report.setdefault("heads", []).append({"name": h, "min_score_gap": None, "max_leaked_mass": float(leak.max()),
                                               "max_weight_deviation": float(dev.max())})
    per_out = np.count_nonzero(W_O.reshape(-1, W_O.shape[-1]), axis=0)[m.dims(f.dst)]
    err = err + gamma(per_out + 1, u)[None] * size  # z @ W_O: the heads' outputs add
    grid = []
    for v in codes:
        nz = np.abs(v[v != 0]).astype(np.int64)
        step = int(np.gcd.reduce(nz)) if len(nz) else 1
        lo, hi = T * min(0, int(v.min())), T * max(0, int(v.max()))
        grid.append(np.arange(lo, hi + step, step, dtype=np.float64) * f.scale / f.mass)
    top = np.array([np.abs(g).max() for g in grid])
    return grid, err, top


def _covers_own_position(f: Average, T: int) -> bool:
    """Whether every position t >= 1 is one of the heads' declared keys (its own term is in its sum)."""
    cover = np.zeros(T + 1, dtype=np.int64)
    for first, last in zip(f.first, f.last):
        cover[max(1, first) : last + 1] += 1
    return bool(np.all(cover[1:] == 1))


def _relate(st: State, f: Average, own: State, T: int) -> None:
    """Record, per part of ``dst``, that mass/scale times it less the matching part of ``src`` is
    the sum of at most T - 1 other src codes (each part's dims in order)."""
    dst_parts, src_parts = f.dst.split(" + "), f.src.split(" + ")
    if len(dst_parts) != len(src_parts):
        return
    for d, s_ in zip(dst_parts, src_parts):
        if d not in st or s_ not in own or len(st[d].per_dim) != len(own[s_].per_dim):
            continue
        lo = np.array([(T - 1) * min(0.0, float(v.min())) for v in own[s_].per_dim])
        hi = np.array([(T - 1) * max(0.0, float(v.max())) for v in own[s_].per_dim])
        st[d] = replace(st[d], sum_of=(s_, f.mass / f.scale, lo, hi))


def _check_writes(m: Model, l: int, fetches: tuple[Fetch | Recent | Average | Match | Latest | AnyFlag, ...],
                  index: dict[str, int]) -> None:
    """Every head of layer l has an obligation and no obligation names a head the model lacks;
    the heads write disjoint dims, and the attention writes no dim outside them."""
    declared = {h for f in fetches for h in f.labels()}
    if set(index) != declared:
        raise CertificateFailure(f"layer {l + 1}", f"heads {sorted(set(index) ^ declared)} have no obligation "
                                 f"or are not in the model")
    dsts = [d for f in fetches for n in f.names_written() for d in m.dims(n)]
    if len(set(dsts)) != len(dsts):
        raise CertificateFailure(f"layer {l + 1}", "two heads' obligations write the same dims")
    W_O = m.blocks[l]["W_O"]
    written = set(np.nonzero(np.abs(W_O).sum((0, 1)))[0].tolist())
    if not written <= set(dsts):
        raise CertificateFailure(f"layer {l + 1} attention", f"writes dims {sorted(written - set(dsts))[:6]} no "
                                 f"obligation declares")


Pattern = tuple[np.ndarray, np.ndarray, np.ndarray, list[Code], list[Code]]
"""A copying head's attention, bounded at every query position: the leaked mass, the score gaps,
the key's class (or candidate set) per query, the codes it may fetch, and its source's codes per class."""


def _fetch_pattern(m: Model, l: int, h: int, f: Fetch, states: list[State], pos_class: np.ndarray) -> Pattern:
    """A positional key: the key's class at every query position (:func:`_head_pattern`)."""
    copy_map(m, l, h, f.head, f.src, f.dst)
    src = [get_code(st, f.src) for st in states]
    key = np.asarray(f.key, dtype=np.int64)
    leak, gaps = _head_pattern(m, l, h, key, f.head)
    return leak, gaps, pos_class[key], src, src


def _recent_copy(m: Model, l: int, h: int, f: Recent, states: list[State], pos_class: np.ndarray) -> Pattern:
    """The most recent flagged position (:func:`_recent_pattern`)."""
    copy_map(m, l, h, f.head, f.src, f.dst)
    return (*_recent_pattern(m, l, h, f, states, pos_class), [get_code(st, f.src) for st in states])


COPIES: dict[type, Callable[..., Pattern]] = {Fetch: _fetch_pattern, Recent: _recent_copy, Latest: latest_pattern}
"""Each copying head kind's attention pattern (the most recent match of a set of codes: latest.py)."""


@dataclass
class _Copy:
    """A copying head's bounds at every query position: the key's class (``sig``) or the index
    into ``codes`` of the codes it may fetch, the copy's error ``out`` [T+1, dims], the values'
    largest magnitude, the error when the copy snaps (``noisy``, inf where it cannot) and the
    values' quantum ``delta``."""

    f: Fetch | Recent | Latest
    sig: np.ndarray
    codes: list[Code]
    out: np.ndarray
    vmax: np.ndarray
    noisy: np.ndarray
    delta: float


def _copy(m: Model, l: int, h: int, f: Fetch | Recent | Latest, states: list[State], pos_class: np.ndarray,
          report: dict[str, Any]) -> _Copy:
    """Bounds of a copying head (a positional key, the most recent flag or the most recent
    match of a set of codes): the leaked mass times the values' spread, the softmax's and the
    output projection's rounding, and the snapping bound (the other keys' weights below u/2
    leave the key's weight exactly 1)."""
    leak, gaps, sig, codes, src = COPIES[type(f)](m, l, h, f, states, pos_class)
    # per dim, from the per-dim value sets: a wide subspace's product of sets is never enumerated
    lo = np.min([np.array([v.min() for v in c.per_dim]) - c.radius for c in src], axis=0)
    hi = np.max([np.array([v.max() for v in c.per_dim]) + c.radius for c in src], axis=0)
    vmax = np.maximum(np.abs(lo), np.abs(hi))
    n_heads, d_head = m.blocks[l]["W_O"].shape[:2]
    r_key = np.stack([codes[c].radius for c in sig])  # [T+1, dims]
    t = np.arange(m.T + 1)
    attn = (leak[:, None] * (hi - lo)[None] + gamma(4 * (t + 1) + 16, m.u)[:, None] * vmax[None]
            + gamma(2, m.u) * vmax[None])  # values' own product (one nonzero term) rounding
    out = r_key + attn
    out = out + gamma(n_heads * d_head + 1, m.u) * (vmax[None] + out)  # z @ W_O
    # snapping: when the other keys' weights sum below u/2 the intended key's weight is
    # exactly 1 (exp(0) = 1, and 1 + what leaks rounds to 1), so the copy is the key's code
    # plus at most twice the leaked weight times the values, a sum that snaps (see snaps)
    exact_weight = 2 * leak < 2.0**-m.p
    noise = (r_key + 2 * leak[:, None] * vmax[None]) * ((1 + m.u) ** (t + 4))[:, None]
    noisy = np.where(exact_weight[:, None], noise, np.inf)
    report.setdefault("heads", []).append({
        "name": f.head, "min_score_gap": float(gaps[1:].min()) if m.T else None,
        "max_leaked_mass": float(leak.max()), "max_copy_error": float(np.minimum(out, noisy).max())})
    return _Copy(f, sig, codes, out, vmax, noisy, min(quantum(np.concatenate(c.per_dim)) for c in src))


def _put_copy(m: Model, l: int, c: _Copy, own: State, st: State, members: np.ndarray, kc: int) -> None:
    """Write a copy into a new class's state: the fetched codes with the residual addition's
    radius (the snapped one where the copy snaps)."""
    old = get_code(own, c.f.dst)
    if old.size() != 1 or np.any(old.combos() != 0):
        raise CertificateFailure(f"layer {l + 1} head {c.f.head}", f"{c.f.dst} is not 0 before the head copies "
                                 f"into it")
    fetched = c.codes[kc]
    general = old.radius + c.out[members]
    general = general + np.minimum(m.u * (c.vmax + general), old.radius)  # the residual addition
    snapped = (old.radius + c.noisy[members]) * (1 + m.u) ** 2
    exact = snaps(snapped, c.vmax + snapped, c.delta, m.p)
    r = np.where(exact, np.minimum(snapped, general), general).max(0)
    put_code(st, c.f.dst, Code(list(fetched.per_dim), fetched.joint, r))


def _put_average(m: Model, l: int, a: Average, grid: list[np.ndarray], err: np.ndarray, top: np.ndarray,
                 own: State, st: State, members: np.ndarray, bos: bool) -> None:
    """Add a prefix sum onto the one code ``dst`` holds (0, or a start value every token writes) in
    a new class's state, and relate it to its own term when it has one."""
    old = get_code(own, a.dst)
    if old.size() != 1:
        raise CertificateFailure(f"layer {l + 1} heads {', '.join(a.heads)}", f"{a.dst} may hold several "
                                 f"codes before the heads add into it")
    base = old.combos()[0]  # one known code (0, or a start value every token writes)
    e = err[members].max(0)
    added = np.where(base == 0, np.minimum(m.u * (top + e), old.radius), m.u * (top + np.abs(base) + e))
    r = old.radius + e + added
    put_code(st, a.dst, Code.of(base[None], r) if bos else Code([g + v for g, v in zip(grid, base)], None, r))
    if not bos and _covers_own_position(a, m.T) and not np.any(base):
        _relate(st, a, own, m.T)


ROLES: dict[type, str] = {**dict.fromkeys(COPIES, "copy"), Average: "average", Match: "match"}
"""How each head kind's weights are checked: a copy (:func:`_copy`, by its pattern in :data:`COPIES`),
a prefix sum (:func:`_average`) or a nearest value (:func:`.recency.match_head`); an :class:`AnyFlag`
is checked with its threshold MLP (:func:`.latest.any_layer`).  A kind is added here."""


def check_heads(m: Model, l: int, fetches: tuple[Fetch | Recent | Average | Match | Latest | AnyFlag, ...],
           states: list[State],
           pos_class: np.ndarray, report: dict[str, Any]) -> tuple[list[State], np.ndarray]:
    """Apply layer l's heads: new classes by (own class, each copying head's key class -- or, for
    a most-recent-flag or most-recent-match head, the set of classes its key can be in), copied
    codes, averaged codes, radii."""
    index = {hd["name"]: hd["index"] for hd in m.blocks[l]["layout"]["heads"]}
    _check_writes(m, l, fetches, index)
    if any(isinstance(f, AnyFlag) for f in fetches):  # proved only with its Threshold MLP (latest.any_layer)
        raise CertificateFailure(f"layer {l + 1}", "a some-flag-so-far head without its threshold MLP")
    for f in fetches:
        if type(f) not in ROLES:
            raise NotCertifiable(f"layer {l + 1} head {', '.join(f.labels())}: the obligation kind {f.kind!r} has "
                                 f"no weight check")
    role: dict[str, list[Any]] = {r: [f for f in fetches if ROLES[type(f)] == r] for r in ("copy", "average", "match")}
    copied = [_copy(m, l, index[f.head], f, states, pos_class, report) for f in role["copy"]]
    averaged = [(a, *_average(m, l, a, index, states, pos_class, report)) for a in role["average"]]
    matched = [match_head(m, l, f, index[f.head], states, pos_class, report) for f in role["match"]]
    sig_all = np.stack([pos_class] + [c.sig for c in copied] + [sig for sig, _ in matched], axis=1)
    groups, inverse = np.unique(sig_all, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    new_states: list[State] = []
    for gi, row in enumerate(groups):
        members = inverse == gi
        own = states[row[0]]
        st = {n: replace(c, per_dim=list(c.per_dim), radius=c.radius.copy()) for n, c in own.items()}
        for c, kc in zip(copied, row[1:]):
            _put_copy(m, l, c, own, st, members, int(kc))
        for (_, put), kc in zip(matched, row[1 + len(copied):]):
            put(st, own, members, int(kc))
        for a, grid, err, top in averaged:
            _put_average(m, l, a, grid, err, top, own, st, members, row[0] == 0)
        new_states.append(st)
    return merge(new_states, inverse, m.phase)
