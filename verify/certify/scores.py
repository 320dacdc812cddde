"""What the head rules share: a head's scores with their rounding bounds (every query row
against every key row, split into factors), the dims a weight reads, a positional head's scores,
the 0/1 copy a head must make, and the code combinations a joint claim allows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .state import CertificateFailure, Code, NotCertifiable, Model, gamma


def _log2_quanta(values: np.ndarray) -> np.ndarray:
    """Elementwise log2 of the largest power of two dividing each value (inf for 0)."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    out = np.full(v.shape, np.inf)
    nz = (v != 0) & np.isfinite(v)
    mant, exp = np.frexp(v[nz])
    ints = (mant * 2.0**53).astype(np.int64)
    out[nz] = np.log2((ints & -ints).astype(np.float64)) + exp - 53
    return out


def abs_products(x: np.ndarray, W: np.ndarray, u: float, p: int) -> tuple[np.ndarray, np.ndarray]:
    """x @ W in float64 and the rounding bound of the model's dot products: gamma_(n+1) times the
    terms' magnitudes, or 0 where every term is a multiple of a power of two q and their
    magnitudes sum below 2^p q (every product and partial sum is then representable)."""
    # einsum, not BLAS: these products are small, and a threaded BLAS stalls on a busy machine
    prod = np.einsum("td,de->te", x, W)
    mag = np.einsum("td,de->te", np.abs(x), np.abs(W))
    lx, lW = _log2_quanta(x), _log2_quanta(W)
    low = np.full(prod.shape, np.inf)
    for d in range(x.shape[1]):
        low = np.minimum(low, lx[:, d : d + 1] + lW[d][None, :])
    exact = mag < np.exp2(p + low)
    return prod, np.where(exact, 0.0, gamma(np.count_nonzero(W, axis=0) + 1, u) * mag)


@dataclass
class Scores:
    """A positional head's scores as factors: S(t, s) = q_t . k_s, up to Rq_t . Rk_s (the rounding
    of q, k and their product) except where the product is exact (:meth:`rows`)."""

    q: np.ndarray
    k: np.ndarray
    Rq: np.ndarray
    Rk: np.ndarray
    q_exact: np.ndarray
    k_exact: np.ndarray
    p: int

    def __post_init__(self) -> None:
        self.lq, self.lk = _log2_quanta(self.q), _log2_quanta(self.k)
        # a score can be exact only where every nonzero coordinate of q_t and of k_s is
        self.q_clean = np.all(self.q_exact | (self.q == 0), axis=1)
        self.k_clean = np.nonzero(np.all(self.k_exact | (self.k == 0), axis=1))[0]

    def rows(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Centre and rounding bound of S(t, s) for the queries ``t`` and every key: 0 where q_t
        and k_s are exact and every product and partial sum of q_t . k_s is representable."""
        centre, spread = self.q[t] @ self.k.T, self.Rq[t] @ self.Rk.T
        ti = np.nonzero(self.q_clean[t])[0]
        si = self.k_clean
        if not len(ti) or not len(si):
            return centre, spread
        q, k = self.q[t[ti]], self.k[si]
        low = np.full((len(ti), len(si)), np.inf)
        mag = np.zeros((len(ti), len(si)))
        lq, lk = self.lq[t[ti]], self.lk[si]
        for i in range(q.shape[1]):
            a, b = q[:, i][:, None], k[:, i][None, :]
            nz = (a != 0) & (b != 0)
            low = np.minimum(low, np.where(nz, lq[:, i][:, None] + lk[:, i][None, :], np.inf))
            mag += np.abs(a * b)
        sub = spread[np.ix_(ti, si)]
        spread[np.ix_(ti, si)] = np.where(mag < np.exp2(self.p + low), 0.0, sub)
        return centre, spread


def score_factors(m: Model, Wq: np.ndarray, Wk: np.ndarray, rows: list[int], cols: np.ndarray,
                   Xq: np.ndarray, Xk: np.ndarray) -> Scores:
    """The scores of queries ``Xq`` against keys ``Xk`` (residual values on ``rows``) as
    :class:`Scores`, with the rounding of q, k and their product."""
    q, eq = abs_products(Xq, Wq[rows][:, cols], m.u, m.p)
    k, ek = abs_products(Xk, Wk[rows][:, cols], m.u, m.p)
    g = gamma(len(cols) + 1, m.u)
    # |S - q k| <= eq |k| + |q| ek + eq ek + g (|q| + eq)(|k| + ek) = A B^T + |q| ek^T
    A, B = eq * (1 + g) + g * np.abs(q), np.abs(k) + ek
    return Scores(q, k, np.concatenate([A, np.abs(q)], axis=1), np.concatenate([B, ek], axis=1),
                   eq == 0, ek == 0, m.p)


def read_dims(W: np.ndarray) -> set[int]:
    """The residual dims a query or key map reads (its nonzero rows)."""
    return set(np.nonzero(np.abs(W).sum(1))[0].tolist())


def positional_scores(m: Model, l: int, h: int, name: str) -> Scores:
    """A positional head's scores (:class:`Scores`).  NotCertifiable when the query or key reads
    an input-dependent dim."""
    b = m.blocks[l]
    Wq, Wk = b["W_Q"][h], b["W_K"][h]
    used = read_dims(Wq) | read_dims(Wk)
    if not used <= m.fixed_dims:
        raise NotCertifiable(f"layer {l + 1} head {name}: its query or key reads input-dependent dims "
                             f"{sorted(used - m.fixed_dims)[:6]}; content-dependent heads are not certified yet")
    cols = np.nonzero((np.abs(Wq).sum(0) > 0) & (np.abs(Wk).sum(0) > 0))[0]
    rows = sorted(used)
    X = m.fixed[:, rows]
    return score_factors(m, Wq, Wk, rows, cols, X, X)


def copy_map(m: Model, l: int, h: int, head: str, src_name: str, dst_name: str, scale: float = 1.0) -> float:
    """The head must copy ``src`` into ``dst`` (times ``scale``) and nothing else: W_V has one entry
    per value dim, all equal to the stored ``scale`` (the dtype's nearest value), W_O one 1 per
    value dim, and W_V W_O maps each src dim to its dst dim.  Returns the stored scale (so the
    copy of a code is exact in floating point when it is 1, or a power of two)."""
    b = m.blocks[l]
    src, dst = m.dims(src_name), m.dims(dst_name)
    if len(src) != len(dst):
        raise CertificateFailure(f"layer {l + 1} head {head}", f"{src_name} and {dst_name} differ in width")
    WV, WO = b["W_V"][h], b["W_O"][h]
    stored = float(np.asarray(scale, dtype=m.model.W_E.detach().cpu().numpy().dtype))
    if (np.count_nonzero(WV, axis=0) > 1).any() or (np.count_nonzero(WO, axis=1) > 1).any() or \
            np.any((WV != 0) & (WV != stored)) or np.any((WO != 0) & (WO != 1)):
        raise CertificateFailure(f"layer {l + 1} head {head}", f"a copying head's W_V must hold only 0 and "
                                 f"{stored:g}, and W_O only 0 and 1, one entry per value dim (so the copy itself "
                                 f"is exact in floating point)")
    VO = WV @ WO
    want = np.zeros_like(VO)
    want[src, dst] = stored
    if not np.array_equal(VO, want):
        i, j = np.argwhere(VO != want)[0]
        raise CertificateFailure(f"layer {l + 1} head {head}",
                                 f"does not copy {src_name} into {dst_name}: W_V W_O[{i}, {j}] = {VO[i, j]:.6g}, "
                                 f"not {want[i, j]:g}")
    return stored


def feasible(X: np.ndarray, names: list[str], sets: list[Code], widths: list[int]) -> np.ndarray:
    """Rows of enumerated codes that satisfy every relation among them (:attr:`Code.sum_of`)."""
    ok = np.ones(len(X), dtype=bool)
    at = np.cumsum([0] + widths)
    for i, c in enumerate(sets):
        if c.sum_of is None or c.sum_of[0] not in names:
            continue
        j = names.index(c.sum_of[0])
        if widths[i] != widths[j]:
            continue
        diff = c.sum_of[1] * X[:, at[i] : at[i + 1]] - X[:, at[j] : at[j + 1]]
        ok &= np.all((diff >= c.sum_of[2] - 1e-6) & (diff <= c.sum_of[3] + 1e-6), axis=1)
    return ok


def recency_gaps(earlier: np.ndarray, later: np.ndarray, lo1: np.ndarray,
                 ok: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int] | None]:
    """A most-recent key's score gaps (Lemma 16's flag, a most recent match): per row (a query)
    and possible key s, its lowest score ``lo1`` less the highest rival's -- any earlier key's
    (``earlier[:, :s]``) or a later one's (``later[:, s + 1:]``); inf where ``ok`` is False.  Also
    the first (row, key, rival) whose gap is not positive, or None."""
    none = np.full((earlier.shape[0], 1), -np.inf)
    best_before = np.concatenate([none, np.maximum.accumulate(earlier, axis=1)[:, :-1]], axis=1)
    best_later = np.concatenate([np.maximum.accumulate(later[:, ::-1], axis=1)[:, ::-1][:, 1:], none], axis=1)
    gap = np.where(ok, lo1 - np.maximum(best_before, best_later), np.inf)
    bad = np.argwhere(gap <= 0)
    if not len(bad):
        return gap, None
    i, key = (int(v) for v in bad[0])
    rival = np.concatenate([earlier[i, :key], [-np.inf], later[i, key + 1:]])
    return gap, (i, key, int(np.argmax(rival)))
