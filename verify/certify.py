"""Certificates: a proof that a compiled model is exact on every input up to max_len.

Sampling can miss a model that is wrong on one rare input; a certificate cannot.  It is an
abstract interpretation of the model's forward pass over *all* inputs of every length
<= max_len, computed from the tensors alone, against the construction's obligations
(``constructions/obligations.py``: the discrete program the weights must run).

Abstract state.  Every residual dim is either *fixed* (input-independent and never written:
the position code, ``one``, ``bos``; its value at position t is known exactly) or *tracked*
(a subspace the obligations name).  Positions fall into *classes*; for each class and tracked
subspace the state holds the finite set of codes the subspace may hold there (per dim, and
jointly where the set is small) and an error radius per dim: at every position of the class,
for every input, the residual is within the radius of one of the codes -- the one the
obligations' program computes.  Position 0 (BOS) is a class of its own.

Rules (each a lemma the checker applies to the tensors):

* Embedding: each token's row on the tracked dims is its declared code (the difference, if
  any, becomes the radius); the position table is 0 there.
* A head whose query and key read only fixed dims (positional): its scores depend on (t, s)
  alone.  For every t the declared key must beat every other causal key by a positive gap
  after the scores' rounding bound; the leaked mass is at most sum_s exp(-gap_s), so the
  copied code is within r_key + leak * (spread + 2R) + rounding of the key's code.  A head
  must copy its source subspace into its destination exactly (W_V W_O the identity there).
* MLP, :class:`~constructions.obligations.Lookup`: for every combination of the codes it reads
  (per class: the product of the fetched sets, so exactly the windows that occur), the
  network is evaluated with affine error bounds -- the error of each hidden unit is kept as
  a linear form in the inputs' errors while its activation is fixed, so a pair of step units
  cancels exactly as in exact arithmetic; a unit whose sign the error could flip adds its
  whole possible deviation as fresh noise -- and the result must be the table's code.
* MLP, :class:`~constructions.obligations.Compose`: per output point q and value g of the
  fetched code, every hidden unit reads g and at most one other dim, so the deviation from
  the declared f(g(q)) and the error's coefficients are sums of one-variable terms; their
  extremes over every map are sums of per-term extremes (m^4 small checks, not one per pair
  of maps).
* Readout: for every final code the declared output's logit, less its error bound, beats
  every other logit plus its bound.

Floating point: every dot product of n terms carries gamma_n = n u / (1 - n u) times the sum
of its terms' magnitudes (any summation order or blocking), every addition u times its
result; softmax and the weighted sum of values carry gamma_(4(T+1)+16) times the largest
value (exp, max-subtraction, the normalising sum, the division and an online softmax's
rescalings, each within a few ulps).  u is the model dtype's unit roundoff plus float64's
(the checker's own sums).  This holds for the fused (``scaled_dot_product_attention``) and
the explicit path alike, on hardware with IEEE round-to-nearest arithmetic (no TF32 or other
reduced-precision matrix products).

A certificate that fails names the obligation (layer, head or MLP, position or code
combination) and the bound that does not hold; nothing falls back to sampling.
"""

from __future__ import annotations

import math
import re
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np
import torch

from compiler.automata.errors import ShortcutError
from compiler.automata.spec import Semiautomaton, from_dict
from constructions import registry
from constructions.checkpoint import weights_sha256
from constructions.labels import readout_of
from constructions.model import input_independent_dims
from constructions.obligations import (Average, Beside, Compose, Fetch, Joint, Latest, Lookup, Modular, Obligations,
                                      Readout, Recent, Round, Steps, Threshold, Undeclared)
from verify import latest

SCHEMA = "shortcut-certificate/1"
JOINT_BUDGET = 200_000
"""Largest joint code set tracked for one subspace (beyond it only the per-dim sets are kept)."""
COMBINATION_BUDGET = 2_000_000
"""Largest number of code combinations one lookup or readout check evaluates."""
AFFINE_CHUNK = 1 << 22
"""Floats in one chunk of affine coefficients (combinations x units x input dims)."""

PRECISION = {torch.float32: 24, torch.float64: 53, torch.float16: 11, torch.bfloat16: 8}
"""Significand bits p of each dtype: its unit roundoff is 2^-p."""
PATHS = ["fused (scaled_dot_product_attention)", "explicit (scores, softmax, pattern @ values)"]
ASSUMPTIONS = ("IEEE round-to-nearest arithmetic in the model's dtype, any summation order or blocking; "
               "exp within a few ulps; no TF32 or other reduced-precision matrix products")


class CertificateFailure(ShortcutError):
    """An obligation the tensors do not meet; ``where`` names it (layer, head or MLP, inputs)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.detail = message


class NotCertifiable(ShortcutError):
    """The model's construction (or one of its parts) declares no obligations the checker reads."""


def quantum(values: np.ndarray) -> float:
    """The largest power of two dividing every value (inf when all are 0)."""
    v = np.abs(np.asarray(values, dtype=np.float64)).ravel()
    v = v[(v != 0) & np.isfinite(v)]
    if not len(v):
        return math.inf
    mant, exp = np.frexp(v)  # v = mant 2^exp, mant in [1/2, 1): an integer of 53 bits times 2^(exp - 53)
    ints = (mant * 2.0**53).astype(np.int64)
    low = ints & -ints  # the lowest set bit
    return float(np.min(np.ldexp(low.astype(np.float64), exp - 53)))


def snaps(noise: np.ndarray, magnitude: np.ndarray, delta: float, p: int) -> np.ndarray:
    """Where a float sum of terms that are multiples of ``delta`` (their exact parts, magnitudes
    summing to ``magnitude``) plus errors summing to at most ``noise`` is *exact* when its exact
    part is nonzero (Lemma, float snapping): every exact partial sum is then representable
    (magnitude < 2^p delta) and the nearest float to (exact part + noise) is the exact part,
    since the noise stays below half the spacing of floats at delta, 2^-(p+1) delta; a partial
    sum whose exact part is 0 keeps its noise, times (1 + u) per rounding.  So the sum's error
    is at most ``noise`` (grown by (1 + u) per addition) and 0 wherever its exact part is not."""
    if not delta or math.isinf(delta):
        return np.zeros(np.shape(noise), dtype=bool) if not delta else np.ones(np.shape(noise), dtype=bool)
    return (np.asarray(noise) < 2.0 ** -(p + 1) * delta) & (np.asarray(magnitude) < 2.0**p * delta)


def gamma(n: int | np.ndarray, u: float) -> np.ndarray:
    """gamma_n = n u / (1 - n u): the relative error bound of a sum of n rounded terms."""
    n = np.asarray(n, dtype=np.float64)
    return n * u / (1 - n * u)


# --- the abstract state ---------------------------------------------------------------------


@dataclass
class Code:
    """What one tracked subspace may hold at the positions of a class: per dim the set of clean
    codes, jointly the set of code vectors (``None`` when too large: the product of the per-dim
    sets stands for it), and per dim an error radius."""

    per_dim: list[np.ndarray]
    joint: np.ndarray | None
    radius: np.ndarray
    sum_of: tuple[str, float, np.ndarray, np.ndarray] | None = None
    """(src, f, lo, hi): f times this clean code less src's clean code at the same position lies
    in [lo, hi] per dim -- a prefix sum that includes its own position's term (:class:`Average`)."""

    @staticmethod
    def of(joint: np.ndarray, radius: np.ndarray) -> Code:
        joint = np.unique(np.asarray(joint, dtype=np.float64).reshape(len(joint), -1), axis=0)
        return Code([np.unique(joint[:, i]) for i in range(joint.shape[1])], joint, np.asarray(radius, float))

    def combos(self) -> np.ndarray:
        """Every code vector (the joint set, or the product of the per-dim sets)."""
        if self.joint is not None:
            return self.joint
        return _product_rows([v[:, None] for v in self.per_dim])

    def size(self) -> int:
        return len(self.joint) if self.joint is not None else math.prod(len(v) for v in self.per_dim)

    def key(self) -> tuple:
        """What identifies the value sets (not the radius): classes with equal keys merge."""
        joint = None if self.joint is None else self.joint.tobytes()
        rel = None if self.sum_of is None else (self.sum_of[0], self.sum_of[1], self.sum_of[2].tobytes(),
                                                self.sum_of[3].tobytes())
        return (joint, tuple(v.tobytes() for v in self.per_dim), rel)


State = dict[str, Code]


def _get(st: State, name: str) -> Code:
    """The code of a subspace, of one of its dims (``name[i]``), or of several joined by `` + ``
    (jointly: the product of the parts' joint sets, where small, unless the state keeps their joint
    set under the joined name -- see :func:`_put`)."""
    if name in st:
        if " + " in name:  # a kept joint set, with its parts' current radii
            return replace(st[name], radius=np.concatenate([st[p].radius for p in name.split(" + ")]))
        return st[name]
    if " + " in name:
        parts = [_get(st, p) for p in name.split(" + ")]
        joint = None
        if all(p.joint is not None for p in parts) and math.prod(p.size() for p in parts) <= JOINT_BUDGET:
            joint = _product_rows([p.joint for p in parts])
        return Code([v for p in parts for v in p.per_dim], joint, np.concatenate([p.radius for p in parts]))
    base = re.fullmatch(r"(.*)\[(\d+)\]", name)
    if base and base.group(1) in st and int(base.group(2)) < len(st[base.group(1)].per_dim):
        code, i = st[base.group(1)], int(base.group(2))
        return Code([code.per_dim[i]], code.per_dim[i][:, None], code.radius[i : i + 1])
    raise CertificateFailure("obligations", f"name {name!r}, which no obligation tracks")


def _put(st: State, name: str, code: Code) -> None:
    """Set a subspace's code (several joined by `` + ``: each part its share, and their joint set
    kept under the joined name, so that a reader of them together sees which codes occur
    together); a relation or joint set another entry holds with a part written here no longer
    holds."""
    parts = name.split(" + ")
    for other in [k for k in st if " + " in k and set(k.split(" + ")) & set(parts)]:
        del st[other]
    at = 0
    for part in parts:
        for other, c in st.items():
            if c.sum_of is not None and c.sum_of[0] == part:
                st[other] = replace(c, sum_of=None)
        k = len(st[part].per_dim) if part in st else len(code.per_dim) - at
        joint = None if code.joint is None else np.unique(code.joint[:, at : at + k], axis=0)
        st[part] = Code(code.per_dim[at : at + k], joint, code.radius[at : at + k])
        at += k
    if len(parts) > 1 and code.joint is not None:
        st[name] = Code(list(code.per_dim), code.joint, code.radius.copy())


def _first_positions(pos_class: np.ndarray, n: int) -> np.ndarray:
    """The first position of each of ``n`` classes (0 for a class no position is in)."""
    first = np.zeros(n, dtype=np.int64)
    seen, where = np.unique(pos_class, return_index=True)
    first[seen] = where
    return first


def _merge(states: list[State], pos_class: np.ndarray,
           phase: np.ndarray | None = None) -> tuple[list[State], np.ndarray]:
    """Merge classes whose value sets agree (radius: the larger) -- and, with ``phase``, whose
    positions hold the same values on the positional dims an MLP reads; renumber the positions."""
    index: dict[tuple, int] = {}
    merged: list[State] = []
    new_id = np.zeros(len(states), dtype=np.int64)
    first = _first_positions(pos_class, len(states))
    for c, st in enumerate(states):
        k = (c == 0, 0 if phase is None else int(phase[first[c]]),
             tuple((name, st[name].key()) for name in sorted(st)))  # BOS stays apart
        if k in index:
            tgt = merged[index[k]]
            for name in st:
                tgt[name].radius = np.maximum(tgt[name].radius, st[name].radius)
        else:
            index[k] = len(merged)
            merged.append({n: replace(v, per_dim=list(v.per_dim), radius=v.radius.copy()) for n, v in st.items()})
        new_id[c] = index[k]
    return merged, new_id[pos_class]


# --- the model as arrays ----------------------------------------------------------------------


@dataclass
class _Model:
    """The tensors, in float64 (exact copies of the stored values), and the layout."""

    model: Any
    u: float
    p: int
    T: int
    subspaces: dict[str, list[int]]
    fixed: np.ndarray  # [T + 1, d] exact residual values on the fixed dims (0 elsewhere)
    fixed_dims: set[int]
    blocks: list[dict[str, Any]] = field(default_factory=list)
    phase: np.ndarray | None = None
    """Per position, which values the positional dims an MLP reads hold there (:func:`_phases`)."""

    def dims(self, name: str) -> list[int]:
        """Residual dims of a subspace, of one dim of it (``name[i]``), or of several joined by
        `` + `` (in order)."""
        if " + " in name:
            return [d for part in name.split(" + ") for d in self.dims(part)]
        if name in self.subspaces:
            return list(self.subspaces[name])
        m = re.fullmatch(r"(.*)\[(\d+)\]", name)
        if m and m.group(1) in self.subspaces and int(m.group(2)) < len(self.subspaces[m.group(1)]):
            return [self.subspaces[m.group(1)][int(m.group(2))]]
        raise CertificateFailure("obligations", f"names a subspace {name!r} the model's layout does not have")


def _arrays(model) -> _Model:
    dtype = model.W_E.dtype
    p = PRECISION[dtype]
    u = 2.0**-p + 2.0**-52  # the model's unit roundoff, plus float64's for the checker's own sums
    T = model.max_len
    with torch.no_grad():
        rows = model.W_E.detach()
        body = rows[0] if rows.shape[0] > 1 else rows[-1]
        fixed = torch.cat([(rows[-1] + model.W_pos[0])[None], body[None] + model.W_pos[1:]]).double().cpu().numpy()
    dims = sorted(input_independent_dims(model))
    mask = np.zeros(fixed.shape[1], dtype=bool)
    mask[dims] = True
    fixed[:, ~mask] = 0.0
    layout = model.layout()
    out = _Model(model, u, p, T, {k: list(v["dims"]) for k, v in layout["subspaces"].items()}, fixed, set(dims))
    for l, block in enumerate(model.blocks):
        a = block.attn
        b = {"layout": layout["blocks"][l],
             "W_Q": a.W_Q.detach().double().cpu().numpy(), "W_K": a.W_K.detach().double().cpu().numpy(),
             "W_V": a.W_V.detach().double().cpu().numpy(), "W_O": a.W_O.detach().double().cpu().numpy(),
             "mlp": None}
        if block.mlp is not None:
            mlp = block.mlp
            b["mlp"] = ([getattr(mlp, mlp.weight_name(i)).detach().double().cpu().numpy()
                         for i in range(mlp.n_hidden + 1)],
                        [getattr(mlp, mlp.bias_name(i)).detach().double().cpu().numpy()
                         for i in range(mlp.n_hidden + 1)])
        out.blocks.append(b)
    return out


# --- embedding --------------------------------------------------------------------------------


def _embedding(m: _Model, ob: Obligations) -> tuple[list[State], np.ndarray]:
    """The two classes at layer 0 (BOS, every other position) from the token rows; every
    non-fixed dim must be tracked and the position table 0 on tracked dims."""
    W_E = m.model.W_E.detach().double().cpu().numpy()
    W_pos = m.model.W_pos.detach().double().cpu().numpy()
    tracked: set[int] = set()
    bos: State = {}
    body: State = {}
    for name, codes in ob.embedding.codes.items():
        dims = m.dims(name)
        tracked |= set(dims)
        codes = np.asarray(codes, dtype=np.float64).reshape(W_E.shape[0], len(dims))
        if np.any(W_pos[:, dims] != 0):
            raise CertificateFailure(f"embedding {name}", "the position table writes this tracked subspace")
        err = np.abs(W_E[:, dims] - codes)
        bos[name] = Code.of(codes[-1:], err[-1])
        body[name] = Code.of(codes[:-1], err[:-1].max(0))
    for f in (f for layer in ob.layers for f in layer.fetches if isinstance(f, Recent)):
        pair = f"{f.flag} + {f.src}"  # which target goes with a set flag: each token's row says
        if f.flag in ob.embedding.codes and f.src in ob.embedding.codes:
            rows = np.concatenate([np.asarray(ob.embedding.codes[n], dtype=np.float64).reshape(W_E.shape[0], -1)
                                   for n in (f.flag, f.src)], axis=1)
            for st, joint in ((bos, rows[-1:]), (body, rows[:-1])):
                st[pair] = Code.of(joint, np.concatenate([st[f.flag].radius, st[f.src].radius]))
    # a tracked dim that happens to be input-independent (every letter writes the same code) is
    # tracked, not fixed: counted once, as its subspace
    m.fixed_dims -= tracked
    m.fixed[:, sorted(tracked)] = 0.0
    missing = [d for d in range(W_E.shape[1]) if d not in tracked and d not in m.fixed_dims]
    if missing:
        raise CertificateFailure("embedding", f"residual dims {missing[:8]} depend on the input or are written, "
                                 f"but no obligation tracks them")
    return [bos, body], np.array([0] + [1] * m.T, dtype=np.int64)


# --- positional heads ---------------------------------------------------------------------------


def _log2_quanta(values: np.ndarray) -> np.ndarray:
    """Elementwise log2 of the largest power of two dividing each value (inf for 0)."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    out = np.full(v.shape, np.inf)
    nz = (v != 0) & np.isfinite(v)
    mant, exp = np.frexp(v[nz])
    ints = (mant * 2.0**53).astype(np.int64)
    out[nz] = np.log2((ints & -ints).astype(np.float64)) + exp - 53
    return out


def _abs_products(x: np.ndarray, W: np.ndarray, u: float, p: int) -> tuple[np.ndarray, np.ndarray]:
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
class _Scores:
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


def _score_factors(m: _Model, Wq: np.ndarray, Wk: np.ndarray, rows: list[int], cols: np.ndarray,
                   Xq: np.ndarray, Xk: np.ndarray) -> _Scores:
    """The scores of queries ``Xq`` against keys ``Xk`` (residual values on ``rows``) as
    :class:`_Scores`, with the rounding of q, k and their product."""
    q, eq = _abs_products(Xq, Wq[rows][:, cols], m.u, m.p)
    k, ek = _abs_products(Xk, Wk[rows][:, cols], m.u, m.p)
    g = gamma(len(cols) + 1, m.u)
    # |S - q k| <= eq |k| + |q| ek + eq ek + g (|q| + eq)(|k| + ek) = A B^T + |q| ek^T
    A, B = eq * (1 + g) + g * np.abs(q), np.abs(k) + ek
    return _Scores(q, k, np.concatenate([A, np.abs(q)], axis=1), np.concatenate([B, ek], axis=1),
                   eq == 0, ek == 0, m.p)


def _reads(W: np.ndarray) -> set[int]:
    """The residual dims a query or key map reads (its nonzero rows)."""
    return set(np.nonzero(np.abs(W).sum(1))[0].tolist())


def _positional_scores(m: _Model, l: int, h: int, name: str) -> _Scores:
    """A positional head's scores (:class:`_Scores`).  NotCertifiable when the query or key reads
    an input-dependent dim."""
    b = m.blocks[l]
    Wq, Wk = b["W_Q"][h], b["W_K"][h]
    used = _reads(Wq) | _reads(Wk)
    if not used <= m.fixed_dims:
        raise NotCertifiable(f"layer {l + 1} head {name}: its query or key reads input-dependent dims "
                             f"{sorted(used - m.fixed_dims)[:6]}; content-dependent heads are not certified yet")
    cols = np.nonzero((np.abs(Wq).sum(0) > 0) & (np.abs(Wk).sum(0) > 0))[0]
    rows = sorted(used)
    X = m.fixed[:, rows]
    return _score_factors(m, Wq, Wk, rows, cols, X, X)


def _head_pattern(m: _Model, l: int, h: int, key: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Leaked-mass bound per query position of a positional head, checking that ``key[t]`` wins
    every row by a positive gap after rounding (CertificateFailure otherwise)."""
    sc = _positional_scores(m, l, h, name)
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
        pair = _get(st, f"{f.flag} + {f.src}")
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
        parts = [flagged[c] for c in np.nonzero(row)[0]]
        codes.append(Code.of(np.concatenate([p.combos() for p in parts]), np.max([p.radius for p in parts], axis=0)))
    return may_pos, must_pos, sig.reshape(-1), codes


def _flag_scores(m: _Model, l: int, h: int, flag: int, where: str) -> tuple[_Scores, _Scores, np.ndarray]:
    """A most-recent-flag head's scores with every key's flag 0 and with it 1, and |W_K|'s row of
    the flag (what the flag's error moves a score by, per unit of |q|).  The query must read
    fixed dims only, the key fixed dims and the flag."""
    b = m.blocks[l]
    Wq, Wk = b["W_Q"][h], b["W_K"][h]
    if not _reads(Wq) <= m.fixed_dims or not _reads(Wk) <= m.fixed_dims | {flag}:
        extra = sorted((_reads(Wq) - m.fixed_dims) | (_reads(Wk) - m.fixed_dims - {flag}))
        raise CertificateFailure(where, f"its query or key reads input-dependent dims {extra[:6]} besides the flag")
    rows = sorted(_reads(Wq) | _reads(Wk) | {flag})
    cols = np.nonzero((np.abs(Wq).sum(0) > 0) & (np.abs(Wk).sum(0) > 0))[0]
    X = m.fixed[:, rows]
    X1 = X.copy()
    X1[:, rows.index(flag)] = 1.0
    return (_score_factors(m, Wq, Wk, rows, cols, X, X), _score_factors(m, Wq, Wk, rows, cols, X, X1),
            np.abs(Wk[flag, cols]))


def _recent_pattern(m: _Model, l: int, h: int, f: Recent, states: list[State],
                    pos_class: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Code]]:
    """Leaked-mass bound per query position of a most-recent-flag head, over every input.

    For a query t and a key s* that can be the most recent flagged position (its flag may be 1,
    and no position in (s*, t] surely has flag 1), every input that makes s* the key has flag 0
    on (s*, t] and any flag before s*.  So the weight off s* is at most
    sum_{s < s*} e^(hi_any(s) - lo_1(s*)) + sum_{s* < s <= t} e^(hi_0(s) - lo_1(s*)), with hi/lo
    the score bounds for flag 0, 1 or either (rounding and the flag's error included); the bound
    at t is the largest over its possible keys.  The passes are verify/latest.py's
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
    r_flag = max(float(_get(st, f.flag).radius[0]) for st in states)
    g = float(gamma(len(wflag) + 1, m.u))
    t_all = np.arange(m.T + 1)
    surely = np.maximum.accumulate(np.where(must_pos, t_all, 0))
    never = np.zeros(m.T + 1, dtype=bool)  # the flag-0 scores where the flag may be 0, flag-1 where it may be 1
    leak, gaps = latest.recency_pass(m.T, [sc0, sc1], [never, may_pos], [~must_pos, never], may_pos, surely,
                                     r_flag * wflag, g, where)
    return leak, gaps, sig, codes


def _copy_map(m: _Model, l: int, h: int, head: str, src_name: str, dst_name: str, scale: float = 1.0) -> float:
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


def _average_pattern(m: _Model, l: int, h: int, first: int, last: int, mass: int,
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
    sc = _positional_scores(m, l, h, name)
    T = m.T
    s_all = np.arange(T + 1)
    mine_s = (s_all >= first) & (s_all <= last) & (s_all >= 1)
    feats = np.concatenate([sc.k, sc.Rk, sc.k_exact, mine_s[:, None], (s_all == 0)[:, None]], axis=1)
    kinds, inverse = np.unique(feats, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    reps = np.array([int(np.argmax(inverse == g)) for g in range(len(kinds))])
    positions = [np.nonzero(inverse == g)[0] for g in range(len(kinds))]
    rep = _Scores(sc.q, sc.k[reps], sc.Rq, sc.Rk[reps], sc.q_exact, sc.k_exact[reps], sc.p)
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


def _average(m: _Model, l: int, f: Average, index: dict[str, int], states: list[State], pos_class: np.ndarray,
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
    bos = _get(states[pos_class[0]], f.src)
    if bos.size() != 1 or np.any(bos.combos() != 0):
        raise CertificateFailure(where, f"BOS's {f.src} is not 0, so the weight BOS absorbs is not neutral")
    dims = len(m.dims(f.src))
    body = [_get(states[c], f.src) for c in sorted(set(pos_class[1:].tolist()))] or [bos]
    codes = [np.unique(np.concatenate([c.per_dim[i] for c in body])) for i in range(dims)]
    if any(np.any(np.round(v) != v) for v in codes):
        raise NotCertifiable(f"{where}: averages of non-integer codes are not certified yet")
    vmax = np.array([np.abs(v).max() for v in codes])
    r_src = np.max([c.radius for c in body], axis=0)
    t = np.arange(T + 1)
    W_O = m.blocks[l]["W_O"]
    err, size = np.zeros((T + 1, dims)), np.zeros((T + 1, dims))
    for h, first, last in zip(f.heads, f.first, f.last):
        stored = _copy_map(m, l, index[h], h, f.src, f.dst, f.scale)
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


def _feasible(X: np.ndarray, names: list[str], sets: list[Code], widths: list[int]) -> np.ndarray:
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


def _heads(m: _Model, l: int, fetches: tuple[Fetch | Recent | Average | Latest, ...], states: list[State],
           pos_class: np.ndarray, report: dict[str, Any]) -> tuple[list[State], np.ndarray]:
    """Apply layer l's heads: new classes by (own class, each copying head's key class -- or, for
    a most-recent-flag head, the set of classes its key can be in), copied codes, averaged codes,
    radii."""
    layout = m.blocks[l]["layout"]["heads"]
    index = {hd["name"]: hd["index"] for hd in layout}
    copies = [f for f in fetches if isinstance(f, (Fetch, Recent, Latest))]
    averages = [f for f in fetches if isinstance(f, Average)]
    declared = {f.head for f in copies} | {h for a in averages for h in a.heads}
    if set(index) != declared:
        raise CertificateFailure(f"layer {l + 1}", f"heads {sorted(set(index) ^ declared)} have no obligation "
                                 f"or are not in the model")
    dsts = [d for f in fetches for d in m.dims(f.dst)]
    if len(set(dsts)) != len(dsts):
        raise CertificateFailure(f"layer {l + 1}", "two heads' obligations write the same dims")
    W_O = m.blocks[l]["W_O"]
    written = set(np.nonzero(np.abs(W_O).sum((0, 1)))[0].tolist())
    dst_dims = {d for f in fetches for d in m.dims(f.dst)}
    if not written <= dst_dims:
        raise CertificateFailure(f"layer {l + 1} attention", f"writes dims {sorted(written - dst_dims)[:6]} no "
                                 f"obligation declares")
    n_heads, d_head = W_O.shape[0], W_O.shape[1]
    T = m.T
    per_fetch = []
    for f in copies:
        h = index[f.head]
        if isinstance(f, Latest):  # the most recent match (verify/latest.py)
            leak, gaps, sig, codes, src = latest.pattern(m, l, h, f, states, pos_class)
        else:
            _copy_map(m, l, h, f.head, f.src, f.dst)
            src = [_get(st, f.src) for st in states]
            if isinstance(f, Fetch):
                key = np.asarray(f.key, dtype=np.int64)
                leak, gaps = _head_pattern(m, l, h, key, f.head)
                sig, codes = pos_class[key], src
            else:
                leak, gaps, sig, codes = _recent_pattern(m, l, h, f, states, pos_class)
        lo = np.min([c.combos().min(0) - c.radius for c in src], axis=0)
        hi = np.max([c.combos().max(0) + c.radius for c in src], axis=0)
        vmax = np.maximum(np.abs(lo), np.abs(hi))
        r_key = np.stack([codes[c].radius for c in sig])  # [T+1, dims]
        t = np.arange(T + 1)
        attn = (leak[:, None] * (hi - lo)[None] + gamma(4 * (t + 1) + 16, m.u)[:, None] * vmax[None]
                + gamma(2, m.u) * vmax[None])  # values' own product (one nonzero term) rounding
        out = r_key + attn
        out = out + gamma(n_heads * d_head + 1, m.u) * (vmax[None] + out)  # z @ W_O
        # snapping: when the other keys' weights sum below u/2 the intended key's weight is
        # exactly 1 (exp(0) = 1, and 1 + what leaks rounds to 1), so the copy is the key's code
        # plus at most twice the leaked weight times the values, a sum that snaps (see snaps)
        exact_weight = 2 * leak < 2.0**-m.p
        noise = (r_key + 2 * leak[:, None] * vmax[None]) * ((1 + m.u) ** (t + 4))[:, None]
        delta = min(quantum(c.combos()) for c in src)
        noisy = np.where(exact_weight[:, None], noise, np.inf)
        per_fetch.append((f, sig, codes, out, vmax, noisy, delta))
        report.setdefault("heads", []).append({
            "name": f.head, "min_score_gap": float(gaps[1:].min()) if T else None,
            "max_leaked_mass": float(leak.max()), "max_copy_error": float(np.minimum(out, noisy).max())})
    averaged = [(a, *_average(m, l, a, index, states, pos_class, report)) for a in averages]
    sig_all = np.stack([pos_class] + [sig for _, sig, *_ in per_fetch], axis=1)
    groups, inverse = np.unique(sig_all, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    new_states: list[State] = []
    for gi, row in enumerate(groups):
        members = inverse == gi
        own = states[row[0]]
        st = {n: replace(c, per_dim=list(c.per_dim), radius=c.radius.copy()) for n, c in own.items()}
        for (f, _, codes, out, vmax, noisy, delta), kc in zip(per_fetch, row[1:]):
            old = _get(own, f.dst)
            if old.size() != 1 or np.any(old.combos() != 0):
                raise CertificateFailure(f"layer {l + 1} head {f.head}", f"{f.dst} is not 0 before the head copies "
                                         f"into it")
            fetched = codes[kc]
            general = old.radius + out[members]
            general = general + np.minimum(m.u * (vmax + general), old.radius)  # the residual addition
            snapped = (old.radius + noisy[members]) * (1 + m.u) ** 2
            exact = snaps(snapped, vmax + snapped, delta, m.p)
            r = np.where(exact, np.minimum(snapped, general), general).max(0)
            _put(st, f.dst, Code(list(fetched.per_dim), fetched.joint, r))
        for a, grid, err, top in averaged:
            old = _get(own, a.dst)
            if old.size() != 1:
                raise CertificateFailure(f"layer {l + 1} heads {', '.join(a.heads)}", f"{a.dst} may hold several "
                                         f"codes before the heads add into it")
            base = old.combos()[0]  # one known code (0, or a start value every token writes)
            e = err[members].max(0)
            added = np.where(base == 0, np.minimum(m.u * (top + e), old.radius), m.u * (top + np.abs(base) + e))
            r = old.radius + e + added
            _put(st, a.dst, Code.of(base[None], r) if row[0] == 0 else Code([g + v for g, v in zip(grid, base)], None, r))
            if row[0] != 0 and _covers_own_position(a, m.T) and not np.any(base):
                _relate(st, a, own, m.T)
        new_states.append(st)
    return _merge(new_states, inverse, m.phase)


# --- MLPs --------------------------------------------------------------------------------------


def _mlp_weights(m: _Model, l: int, name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    b = m.blocks[l]
    lay = b["layout"]["mlp"]
    if b["mlp"] is None or lay is None:
        raise CertificateFailure(f"layer {l + 1}", f"has no MLP, but the obligations name {name!r}")
    if lay["name"] != name:
        raise NotCertifiable(f"layer {l + 1} MLP {lay['name']!r}: the obligations describe {name!r} "
                             f"(a readout fused into the last MLP is not certified yet)")
    return b["mlp"]


def _check_io(m: _Model, l: int, name: str, weights: list[np.ndarray], biases: list[np.ndarray],
              reads: list[int], writes: list[int], const: set[int]) -> None:
    """The MLP reads only ``reads`` (and constant fixed dims) and writes only ``writes``."""
    used = set(np.nonzero(np.abs(weights[0]).sum(1))[0].tolist())
    extra = used - set(reads) - const
    if extra:
        raise CertificateFailure(f"layer {l + 1} MLP {name}", f"reads dims {sorted(extra)[:6]} its obligation "
                                 f"does not declare (or positional dims, not certified yet)")
    out = set(np.nonzero(np.abs(weights[-1]).sum(0) + np.abs(biases[-1]))[0].tolist())
    extra = out - set(writes)
    if extra:
        raise CertificateFailure(f"layer {l + 1} MLP {name}", f"writes dims {sorted(extra)[:6]} its obligation "
                                 f"does not declare")


PHASES = 64
"""Most distinct values of the positional dims MLPs read that split the positions into classes."""


def _phases(m: _Model, states: list[State], pos_class: np.ndarray) -> tuple[list[State], np.ndarray]:
    """Split the positions after BOS by the values of the fixed dims some MLP reads that vary with
    the position (a phase t mod p): within a class they are then constants the MLP checks use.
    Left as they are beyond :data:`PHASES` values (such an MLP is then refused: it reads
    positional dims)."""
    read = set()
    for b in m.blocks:
        if b["mlp"] is not None:
            read |= set(np.nonzero(np.abs(b["mlp"][0][0]).sum(1))[0].tolist())
    dims = sorted(d for d in read & m.fixed_dims if np.any(m.fixed[1:, d] != m.fixed[1:2, d]))
    if not dims or m.T == 0:
        return states, pos_class
    values, phase = np.unique(m.fixed[1:, dims], axis=0, return_inverse=True)
    if len(values) > PHASES:
        return states, pos_class
    m.phase = np.concatenate([[0], 1 + phase.reshape(-1)])
    split = [states[0]] + [{n: replace(c, per_dim=list(c.per_dim), radius=c.radius.copy()) for n, c in states[1].items()}
                           for _ in values]
    return split, m.phase.copy()


def _class_fixed(m: _Model, pos_class: np.ndarray, n: int) -> tuple[set[int], np.ndarray]:
    """Fixed dims constant over the positions of every class, and each class's values there."""
    first = _first_positions(pos_class, n)
    same = np.all(m.fixed == m.fixed[first[pos_class]], axis=0)
    return {d for d in m.fixed_dims if same[d]}, m.fixed[first]


def _affine(x: np.ndarray, r: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray],
            u: float, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evaluate a ReLU network on clean inputs ``x`` [N, n] whose errors are at most ``r`` [n].

    Returns the clean output [N, k], its coefficients on the input errors [N, k, n] (exact while
    every unit's sign is fixed) and an independent error bound [N, k] (rounding, and the whole
    possible deviation of units whose sign the error could flip).

    Exact integers: a unit whose inputs are exactly known integers, whose weights and bias are
    integers and whose terms' magnitudes sum below 2^p computes its integer exactly (every
    partial sum is representable), so it adds no rounding, and a ReLU at its kink (0 exactly)
    flips nothing; a unit surely off is exactly 0 whatever its inputs' errors -- so the step
    units and one-hots of a lookup are exact once the steps before them have saturated.  With
    one noisy term among such integers, the partial sums that hold it are that term plus an
    integer: adding an integer is exact unless the sum reaches a binade it never reached, which
    rounds it to that binade's grid (half an ulp, and the grid only coarsens), so in any order
    the sum errs by at most one ulp of its largest partial sum, 2 u sum|terms|, and the noisy
    product by u |term|: 4 u sum|terms| in all, whatever the number of terms."""
    h = x
    A = np.broadcast_to(np.eye(x.shape[1]), (x.shape[0], x.shape[1], x.shape[1]))
    nu = np.zeros_like(x)
    exact = (r[None, :] == 0) & (np.round(x) == x)
    for i, (W, b) in enumerate(zip(weights, biases)):
        z = h @ W + b
        Az = np.einsum("Nhn,hk->Nkn", A, W)
        mag = np.abs(h) + np.abs(A) @ r + nu
        size = mag @ np.abs(W) + np.abs(b)
        integral = np.all(np.round(W) == W, axis=0) & (np.round(b) == b) & (size < 2.0**p)
        inexact_terms = (~exact).astype(np.float64) @ (W != 0).astype(np.float64)
        one = (inexact_terms == 1) & integral  # one noisy term among integers: 4 u, not gamma_n
        rounding = np.where(one, 4 * u, gamma(np.count_nonzero(W, axis=0) + 1, u)[None]) * size
        exact = (inexact_terms == 0) & integral
        nz = np.where(exact, 0.0, nu @ np.abs(W) + rounding)
        if i == len(weights) - 1:
            return z, Az, nz
        err = np.abs(Az) @ r + nz
        on = z > 0
        flip = (err >= np.abs(z)) & ~exact
        eta = np.where(flip, np.maximum(0.0, err - np.abs(z)), 0.0)
        exact = exact | (~on & ~flip)  # a unit surely off is exactly 0
        h = np.maximum(z, 0.0)
        A = Az * on[:, :, None]
        nu = nz * on + eta
    raise AssertionError("unreachable")


def _declared(steps: tuple[Lookup | Modular | Round, ...], values: dict[str, np.ndarray], where: str) -> None:
    """Run the declared steps on every row of ``values`` (name -> [N, dims] codes), in place: each
    step reads what the earlier ones left (CertificateFailure on a key a table lacks).  A
    :class:`Round` leaves in its src what the MLP must write there: minus the code, clearing it."""
    for st in steps:
        if isinstance(st, Round):
            x = values[st.src]
            if np.any(np.round(x) != x):
                raise CertificateFailure(f"{where} {st.name}", f"{st.src} holds a code that is not an integer")
            values[st.dst], values[st.src] = x.copy(), -x
        elif isinstance(st, Lookup):
            K = np.concatenate([values[r] for r in st.reads], axis=1) if st.reads else np.zeros((len(
                next(iter(values.values()))), 0))
            if np.any(np.round(K) != K):
                raise CertificateFailure(f"{where} {st.mlp}", "reads a code that is not an integer")
            keys, inverse = np.unique(K, axis=0, return_inverse=True)
            rows = []
            for key in keys:
                k = tuple(int(v) for v in key)
                if k not in st.table and st.default is None:
                    raise CertificateFailure(f"{where} {st.mlp}",
                                             f"the code combination {k} reaches the lookup but is not in its table")
                rows.append(np.asarray(st.table.get(k, st.default), dtype=np.float64).reshape(-1))
            values[st.out] = np.stack(rows)[inverse.reshape(-1)]
        else:
            x = st.scale * values[st.reads][:, 0] + st.shift
            X = np.round(x)
            if np.any(np.abs(x - X) > 1e-6):
                raise CertificateFailure(f"{where} {st.name}", f"{st.reads} times {st.scale:g} is not an integer")
            table = np.asarray(st.table, dtype=np.float64).reshape(len(st.table), -1)
            p = len(table)
            values[st.out] = table[np.mod(X, p).astype(np.int64)]
            if st.minus is not None:
                D = values[st.minus][:, 0]
                if np.any(np.round(D) != D):
                    raise CertificateFailure(f"{where} {st.name}", f"{st.minus} is not an integer")
                values[st.minus_out] = table[np.mod(X - D, p).astype(np.int64)]


def _jointly(m: _Model, joint: tuple[Joint, ...], values: dict[str, np.ndarray], written: set[str],
             n: int) -> np.ndarray:
    """Rows of declared ``values`` the program can hold together (:class:`Joint`): for each claim,
    the codes of its names written by now must be a projection of one of its rows."""
    ok = np.ones(n, dtype=bool)
    for j in joint:
        at = np.cumsum([0] + [len(m.dims(name)) for name in j.names])
        idx = [i for i, name in enumerate(j.names) if name in values and name in written]
        if not idx:
            continue
        cols = [c for i in idx for c in range(at[i], at[i + 1])]
        allowed = np.unique(np.asarray(j.rows, dtype=np.float64)[:, cols], axis=0)
        have = np.concatenate([values[j.names[i]] for i in idx], axis=1)
        both = np.concatenate([allowed, have])
        _, inverse = np.unique(both, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        ok &= np.isin(inverse[len(allowed):], inverse[: len(allowed)])
    return ok


def _decodable(steps: tuple[Lookup | Modular | Round, ...], states: list[State], where: str) -> None:
    """A decode's X = scale x + shift must be within 1/2 of its integer for any network to tell
    consecutive integers apart (they have different residues): refuse at once, with the bound,
    when the error x carries into the MLP already reaches that (rather than after enumerating)."""
    for st in steps:
        if isinstance(st, Modular) and len(st.table) > 1:
            r = max((float(_get(s_, st.reads).radius.max()) for s_ in states if st.reads in s_), default=0.0)
            if abs(st.scale) * r >= 0.5:
                raise CertificateFailure(f"{where} {st.name}", f"{st.reads} may be off by {r:.3g}, so X = "
                                         f"{st.scale:g} x may be off by {abs(st.scale) * r:.3g} >= 1/2: its integer "
                                         f"(a count mod {len(st.table)}) is not determined")


def _written(steps: tuple[Lookup | Modular | Round, ...]) -> list[str]:
    """The subspaces the steps write, each once, in order."""
    return list(dict.fromkeys(n for st in steps for n in _step_io(st)[1]))


def _read(steps: tuple[Lookup | Modular | Round, ...]) -> list[str]:
    """The subspaces the steps read, each once, in order."""
    return list(dict.fromkeys(n for st in steps for n in _step_io(st)[0]))


Keep = Callable[[dict[str, np.ndarray], int], np.ndarray]
"""Which rows of declared values (name -> [N, dims]) the program can produce (:func:`_jointly`)."""

SPLIT_ABOVE = 20_000
"""Code combinations above which an MLP is checked group by group (:func:`_split`)."""


def _step_io(st: Lookup | Modular | Round) -> tuple[list[str], list[str]]:
    """A step's reads and writes (a :class:`Round` writes its src too: it clears it)."""
    if isinstance(st, Round):
        return [st.src], [st.dst, st.src]
    if isinstance(st, Lookup):
        return list(st.reads), [st.out]
    return [n for n in (st.reads, st.minus) if n], [n for n in (st.out, st.minus_out) if n]


class _Partition:
    """Disjoint sets of 0..n-1 (union-find with path halving): which units an MLP joins."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _groups(W0: np.ndarray, row_input: list[int | None], Ws: list[np.ndarray],
            cut: int) -> list[tuple[set[int], list[np.ndarray]]]:
    """The independent parts of an MLP's first ``cut`` + 1 hidden layers: hidden units joined by a
    nonzero weight, or reading a common input, are one group.  Returns, per group that reaches
    hidden layer ``cut``, the inputs it reads and its units in each layer 0..cut."""
    sizes = [W0.shape[1]] + [W.shape[1] for W in Ws[1 : cut + 1]]
    base = np.cumsum([0] + sizes)
    n_inputs = 1 + max((i for i in row_input if i is not None), default=-1)
    sets = _Partition(base[-1] + n_inputs)
    find, union = sets.find, sets.union
    for d, k in zip(*np.nonzero(W0)):
        if row_input[d] is not None:
            union(int(k), int(base[-1] + row_input[d]))
    for j in range(1, cut + 1):
        for a_, b_ in zip(*np.nonzero(Ws[j])):
            union(int(base[j - 1] + a_), int(base[j] + b_))
    roots = sorted({find(int(base[cut] + k)) for k in range(sizes[cut])})
    out = []
    for root in roots:
        units = [np.array([k for k in range(sizes[j]) if find(int(base[j] + k)) == root], dtype=np.int64)
                 for j in range(cut + 1)]
        reads = {i for i in range(n_inputs) if find(int(base[-1] + i)) == root}
        out.append((reads, units))
    return out


def _split(m: _Model, Ws: list[np.ndarray], biases: list[np.ndarray], sets: list[Code], names: list[str],
           widths: list[int], const_vals: np.ndarray, steps: tuple[Lookup | Modular | Round, ...], writes: list[str],
           out: list[int], where: str, keep: Keep) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray] | None:
    """An MLP checked in two stages, or None when it has no independent parts.

    Stage A: the first hidden layers fall into independent groups (:func:`_groups`; a counter's
    decode, a carried code); each group's inputs are enumerated alone, with affine error forms,
    and the declared steps that read only its inputs run with it.  What the rest of the MLP can
    see of a group is its *signature*: the declared values it hands on (the subspaces later steps
    read or the MLP writes).  Its contribution to the next layer, for each signature, is the hull
    over every input combination with that signature.  Stage B: every combination of the groups'
    signatures, the next layer's pre-activation the sum of the contributions' intervals, then the
    remaining layers with affine error forms; the declared result comes from the signatures.  Sound
    because each input combination of a group lies in its signature's hull, and every combination
    of signatures is checked.  Returns (rows describing each stage-B combination, the declared
    outputs, the network's outputs, their error bounds, and the signature names)."""
    row_input: list[int | None] = [i for i, w in enumerate(widths) for _ in range(w)] + [None] * len(const_vals)
    H = len(Ws) - 1
    best = None
    for cut in range(H - 1, -1, -1):  # the cut whose signatures pin the next layer down best
        groups = _groups(Ws[0], row_input, Ws, cut)
        if len(groups) < 2:
            continue
        parts, outside = _stage_a(m, Ws, biases, sets, names, widths, const_vals, steps, writes, cut, groups,
                                  where, keep)
        width = max(float((p[3] - p[2]).max(initial=0.0)) for p in parts)
        n = math.prod(len(p[1]) for p in parts)
        if best is None or (width > 0, width, n) < (best[0] > 0, best[0], best[1]):
            best = (width, n, cut, parts, outside)
        if width == 0 and n <= SPLIT_ABOVE:
            break
    if best is None:
        return None
    _, _, cut, parts, outside = best
    W_next, b_next = Ws[cut + 1], biases[cut + 1]
    cols = W_next.shape[1]
    n = math.prod(len(p[1]) for p in parts)
    if n > COMBINATION_BUDGET:
        raise NotCertifiable(f"{where}: {n:,} combinations of its parts' signatures, over the budget "
                             f"{COMBINATION_BUDGET:,}")
    grid = np.array(list(np.ndindex(*[len(p[1]) for p in parts])), dtype=np.int64).reshape(n, len(parts))
    lo = sum(p[2][grid[:, g]] for g, p in enumerate(parts))
    hi = sum(p[3][grid[:, g]] for g, p in enumerate(parts))
    big = sum(p[4][grid[:, g]] for g, p in enumerate(parts))
    ex = np.logical_and.reduce([p[5][grid[:, g]] for g, p in enumerate(parts)])
    centre, half = (lo + hi) / 2 + b_next, (hi - lo) / 2
    integral = np.all(np.round(W_next) == W_next, axis=0) & (np.round(b_next) == b_next)
    exact = ex & integral[None] & (np.round(centre) == centre) & (big + np.abs(b_next) < 2.0**m.p)
    rounding = np.where(exact, 0.0, gamma(np.count_nonzero(W_next, axis=0) + 1, m.u) * (big + np.abs(b_next)))
    values: dict[str, np.ndarray] = {}
    for g, p in enumerate(parts):  # inputs first, then what a group's own steps computed
        at = 0
        for name in p[0]:
            k = len(m.dims(name))
            if name not in values or name in p[6]:
                values[name] = p[1][grid[:, g], at : at + k]
            at += k
    _declared(tuple(steps[j] for j in outside), values, where)
    mask = keep(values, n)
    grid, centre, half, rounding = grid[mask], centre[mask], half[mask], rounding[mask]
    values = {k: v[mask] for k, v in values.items()}
    n = len(grid)
    want = np.concatenate([values[nm] for nm in writes], axis=1)
    sig_all = [nm for p in parts for nm in p[0]]
    desc = np.concatenate([p[1][grid[:, g]] for g, p in enumerate(parts)], axis=1)
    if cut + 1 == H:
        return desc, want, centre[:, out], (half + rounding)[:, out], sig_all
    r = (half + rounding).max(0)
    rest_w, rest_b = [np.eye(cols), *Ws[cut + 2 :]], [np.zeros(cols), *biases[cut + 2 :]]
    z_out, err_out = np.zeros((n, len(out))), np.zeros((n, len(out)))
    step = max(1, AFFINE_CHUNK // max(1, max(w.shape[1] for w in rest_w) * cols))
    for lo_ in range(0, n, step):
        sl = slice(lo_, lo_ + step)
        z, A, nu = _affine(centre[sl], r, rest_w, rest_b, m.u, m.p)
        z_out[sl], err_out[sl] = z[:, out], (np.abs(A) @ r + nu)[:, out]
    return desc, want, z_out, err_out, sig_all


def _stage_a(m: _Model, Ws: list[np.ndarray], biases: list[np.ndarray], sets: list[Code], names: list[str],
             widths: list[int], const_vals: np.ndarray, steps: tuple[Lookup | Modular | Round, ...], writes: list[str],
             cut: int, groups: list[tuple[set[int], list[np.ndarray]]], where: str,
             keep: Keep) -> tuple[list[tuple], list[int]]:
    """:func:`_split`'s stage A at hidden layer ``cut``: per group (and per input no unit reads),
    its signatures and their contributions' hulls; and the steps left for stage B."""
    n_rows = sum(widths)
    offsets = np.cumsum([0] + widths)
    io = [_step_io(st) for st in steps]
    inside: list[list[int]] = []
    avail: list[set[str]] = []
    taken: set[int] = set()
    for reads, _ in groups:
        have = {names[i] for i in reads}
        mine = []
        for j, (rd, wr) in enumerate(io):
            if j not in taken and rd and set(rd) <= have:
                mine.append(j)
                have |= set(wr)
        taken |= set(mine)
        inside.append(mine)
        avail.append(have)
    outside = [j for j in range(len(steps)) if j not in taken]
    needed = set(writes) | {n for j in outside for n in io[j][0]}
    in_group = set().union(*avail)
    free = [i for i, n in enumerate(names) if n in needed and n not in in_group]
    W_next = Ws[cut + 1]
    cols = W_next.shape[1]
    parts = []  # per group: (signature names, signature rows, contribution lo, hi, magnitude, exact)
    for (reads, units), mine, have in zip(groups, inside, avail):
        idx = sorted(reads)
        X = _product_rows([sets[i].combos() for i in idx]) if idx else np.zeros((1, 0))
        X = X[_feasible(X, [names[i] for i in idx], [sets[i] for i in idx], [widths[i] for i in idx])]
        values, at = {}, 0
        for i in idx:
            values[names[i]] = X[:, at : at + widths[i]]
            at += widths[i]
        _declared(tuple(steps[j] for j in mine), values, where)
        mask = keep(values, len(X))
        X, values = X[mask], {k: v[mask] for k, v in values.items()}
        sig_names = [n for n in names + writes if n in have and n in needed]
        sig_names = list(dict.fromkeys(sig_names))
        outputs = {n for j in mine for n in io[j][1]}
        sig = np.concatenate([values[n] for n in sig_names], axis=1) if sig_names else np.zeros((len(X), 0))
        rows = [r for i in idx for r in range(offsets[i], offsets[i + 1])] + list(range(n_rows, n_rows + len(const_vals)))
        Xc = np.concatenate([X, np.tile(const_vals, (len(X), 1))], axis=1)
        r = np.concatenate([sets[i].radius for i in idx] + [np.zeros(len(const_vals))])
        layer_w = [Ws[0][rows][:, units[0]]] + [Ws[j][units[j - 1]][:, units[j]] for j in range(1, cut + 1)]
        layer_b = [biases[j][units[j]] for j in range(cut + 1)]
        k = len(units[cut])
        Wg = W_next[units[cut]]
        centre, err, mag = (np.empty((len(X), cols)) for _ in range(3))
        exact = np.empty((len(X), cols), dtype=bool)
        step = max(1, AFFINE_CHUNK // max(1, max(w.shape[1] for w in layer_w) * len(r)))
        for lo_ in range(0, len(X), step):
            sl = slice(lo_, lo_ + step)
            h, A, nu = _affine(Xc[sl], r, [*layer_w, np.eye(k)], [*layer_b, np.zeros(k)], m.u, m.p)
            e = np.abs(A) @ r + nu
            centre[sl], err[sl], mag[sl] = h @ Wg, e @ np.abs(Wg), (np.abs(h) + e) @ np.abs(Wg)
            exact[sl] = ((e > 0) | (np.round(h) != h)).astype(np.float64) @ (Wg != 0).astype(np.float64) == 0
        keys, inverse = np.unique(sig, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        lo = np.full((len(keys), cols), np.inf)
        hi = np.full((len(keys), cols), -np.inf)
        np.minimum.at(lo, inverse, centre - err)
        np.maximum.at(hi, inverse, centre + err)
        big = np.zeros((len(keys), cols))
        np.maximum.at(big, inverse, mag)
        ex = np.ones((len(keys), cols), dtype=bool)
        np.logical_and.at(ex, inverse, exact)
        parts.append((sig_names, keys, lo, hi, big, ex & (lo == hi), outputs))
    for i in free:
        c = sets[i].combos()
        zero = np.zeros((len(c), cols))
        parts.append(([names[i]], c, zero, zero, zero, np.ones((len(c), cols), dtype=bool), set()))
    return parts, outside


def _joint(m: _Model, Ws: list[np.ndarray], biases: list[np.ndarray], sets: list[Code], names: list[str],
           const_vals: np.ndarray, steps: tuple[Lookup | Modular | Round, ...], writes: list[str],
           out: list[int], where: str, keep: Keep) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Every combination of the codes an MLP reads (the product of their sets) through the whole
    network with affine error forms; the declared result of each."""
    n = math.prod(s.size() for s in sets)
    if n > COMBINATION_BUDGET:
        raise NotCertifiable(f"{where}: {n:,} code combinations, over the budget {COMBINATION_BUDGET:,}")
    X = _product_rows([s.combos() for s in sets])
    X = X[_feasible(X, names, sets, [len(s.radius) for s in sets])]
    values, at = {}, 0
    for name, s_ in zip(names, sets):
        values[name] = X[:, at : at + len(s_.radius)]
        at += len(s_.radius)
    _declared(steps, values, where)
    mask = keep(values, len(X))
    X, values = X[mask], {k: v[mask] for k, v in values.items()}
    Xc = np.concatenate([X, np.tile(const_vals, (len(X), 1))], axis=1)
    r = np.concatenate([np.concatenate([s.radius for s in sets]), np.zeros(len(const_vals))])
    want = np.concatenate([values[name] for name in writes], axis=1)
    z_all, err_all = np.zeros((len(X), len(out))), np.zeros((len(X), len(out)))
    step = max(1, AFFINE_CHUNK // max(1, max(w.shape[1] for w in Ws) * len(r)))
    for lo in range(0, len(X), step):
        sl = slice(lo, lo + step)
        z, A, nu = _affine(Xc[sl], r, Ws, biases, m.u, m.p)
        z_all[sl], err_all[sl] = z[:, out], (np.abs(A) @ r + nu)[:, out]
    return X, want, z_all, err_all, names


def _lookup(m: _Model, l: int, ob: Lookup | Steps, states: list[State], pos_class: np.ndarray, report: dict[str, Any],
            joint: tuple[Joint, ...] = (), written: set[str] = frozenset(),
            mlp: tuple[list[np.ndarray], list[np.ndarray]] | None = None) -> list[State]:
    """An MLP of :class:`Lookup` or :class:`Steps`: every class, every combination of the codes it
    reads through the network (:func:`_joint`, or part by part, :func:`_split`), against the
    declared steps' result -- after BOS, only the combinations the program can hold together
    (``joint``'s claims on the subspaces ``written`` by the end of this MLP)."""
    steps = ob.steps if isinstance(ob, Steps) else (ob,)
    where = f"layer {l + 1} MLP {ob.mlp}"
    weights, biases = mlp or _mlp_weights(m, l, ob.mlp)
    writes = _written(steps)
    inputs_names = [n for n in _read(steps) if n not in writes] + writes
    reads = [d for name in inputs_names for d in m.dims(name)]
    out = [d for name in writes for d in m.dims(name)]
    const, class_fixed = _class_fixed(m, pos_class, len(states))
    positional = [n for n in inputs_names if set(m.dims(n)) <= m.fixed_dims]  # a phase: constant per class
    if any(d not in const for n in positional for d in m.dims(n)):
        raise NotCertifiable(f"{where}: reads positional dims that vary within a class of positions")
    const -= set(reads)
    _check_io(m, l, ob.mlp, weights, biases, reads, out, const)
    _decodable(steps, states, where)
    Ws = [weights[0][reads + sorted(const)], *weights[1:]]
    cleared = {st.src for st in steps if isinstance(st, Round)}
    worst = 0.0
    new_states = []
    for c, st in enumerate(states):
        base = []  # what each write holds before: one known code (0, or BOS's own), to which the MLP adds
        for name in writes:
            old = _get(st, name)
            if name not in cleared and old.size() != 1:
                raise CertificateFailure(where, f"{name} may hold several codes before the MLP writes it")
            base.append(np.zeros(len(old.radius)) if name in cleared else old.combos()[0])
        st = {**st, **{n: Code.of(class_fixed[c][m.dims(n)][None], np.zeros(len(m.dims(n)))) for n in positional}}
        sets = [_get(st, name) for name in inputs_names]
        const_vals = class_fixed[c][sorted(const)]
        widths = [len(s.radius) for s in sets]
        split = None
        def keep(values: dict[str, np.ndarray], n: int, bos: bool = c == 0) -> np.ndarray:
            return np.ones(n, dtype=bool) if bos else _jointly(m, joint, values, written, n)
        if math.prod(s.size() for s in sets) > SPLIT_ABOVE:
            split = _split(m, Ws, biases, sets, inputs_names, widths, const_vals, steps, writes, out, where, keep)
        if split is None:
            split = _joint(m, Ws, biases, sets, inputs_names, const_vals, steps, writes, out, where, keep)
        desc, want, z, err, desc_names = split
        # the old values (0, or a cleared scratch's code, which the MLP's declared output cancels) are
        # within their radius, which adds; adding them rounds by at most u |sum| and at most the
        # smaller operand (round to nearest), so by at most their radius
        old_r = np.concatenate([_get(st, name).radius for name in writes])
        bound = np.abs(z - want) + err + old_r
        bound = bound + np.minimum(m.u * (np.abs(want) + bound), old_r)
        gap = _half_gaps(want)
        gap[[i for i, d in enumerate(out) if any(d in m.dims(nm) for nm in cleared)]] = np.inf  # 0 up to the radius
        bad = np.argwhere(bound >= gap)
        if len(bad):
            i, k = bad[0]
            key = tuple(float(v) if v != round(v) else int(v) for v in desc[i])
            name = next(nm for nm in writes if out[k] in m.dims(nm))
            raise CertificateFailure(where, f"on the code combination {key} of {', '.join(desc_names)} output dim "
                                     f"{out[k]} ({name}) is {z[i, k]:.6g} (error bound {bound[i, k]:.3g}), not "
                                     f"within half the gap {2 * gap[k]:.3g} of the declared {want[i, k]:g}")
        rad = bound.max(0) if len(bound) else np.zeros(len(out))
        worst = max(worst, float(rad.max()) if len(rad) else 0.0)
        st = {n: code for n, code in st.items() if n not in positional}
        at = 0
        for i, name in enumerate(writes):
            k = len(m.dims(name))
            _put(st, name, Code.of(want[:, at : at + k] * (name not in cleared) + base[i], rad[at : at + k]))
            at += k
        new_states.append(st)
    report["mlp"] = {"name": ob.mlp, "kind": "steps" if isinstance(ob, Steps) else "lookup", "max_error": worst}
    return new_states


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


def _part_io(m: _Model, part: Compose | Lookup | Steps) -> tuple[set[int], set[int]]:
    """The residual dims one part of a :class:`Beside` MLP reads (and writes) and writes."""
    if isinstance(part, Compose):
        dims = set(m.dims(part.maps)) | set(m.dims(part.fetched))
        return dims, dims
    steps = part.steps if isinstance(part, Steps) else (part,)
    writes = {d for n in _written(steps) for d in m.dims(n)}
    return writes | {d for n in _read(steps) for d in m.dims(n)}, writes


def _beside_parts(m: _Model, l: int, ob: Beside, weights: list[np.ndarray],
                  biases: list[np.ndarray]) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """Each part's own sub-network of a :class:`Beside` MLP: hidden units joined by a weight, or
    to a non-fixed dim a part reads or writes, belong together, and every unit that reaches a
    part's dims must belong to that part alone (CertificateFailure otherwise)."""
    where = f"layer {l + 1} MLP {ob.mlp}"
    sizes = [W.shape[1] for W in weights[:-1]]
    base = np.cumsum([0] + sizes)
    d = weights[0].shape[0]
    sets = _Partition(base[-1] + d)  # hidden units, then residual dims
    find = sets.find
    for i, k in zip(*np.nonzero(weights[0])):
        if i not in m.fixed_dims:
            sets.union(int(k), int(base[-1] + i))
    for j in range(1, len(weights) - 1):
        for a, b in zip(*np.nonzero(weights[j])):
            sets.union(int(base[j - 1] + a), int(base[j] + b))
    for a, o in zip(*np.nonzero(weights[-1])):
        sets.union(int(base[-2] + a), int(base[-1] + o))
    io = [_part_io(m, part) for part in ob.parts]
    roots = [{find(int(base[-1] + x)) for x in dims} for dims, _ in io]
    for i in range(len(roots)):
        for j in range(i):
            if roots[i] & roots[j]:
                raise CertificateFailure(where, f"its parts {ob.parts[j]!r:.40} and {ob.parts[i]!r:.40} share hidden "
                                         f"units: they are not side by side")
    out = []
    for r, (_, writes) in zip(roots, io):
        units = [np.array([k for k in range(sizes[j]) if find(int(base[j] + k)) in r], dtype=np.int64)
                 for j in range(len(sizes))]
        Ws = [weights[0][:, units[0]]] + [weights[j][units[j - 1]][:, units[j]] for j in range(1, len(sizes))]
        Ws.append(weights[-1][units[-1]])
        keep = np.zeros(d, dtype=bool)
        keep[sorted(writes)] = True
        out.append((Ws, [biases[j][units[j]] for j in range(len(sizes))] + [np.where(keep, biases[-1], 0.0)]))
    stray = set(np.nonzero(biases[-1])[0].tolist()) - set().union(*(w for _, w in io))
    if stray:
        raise CertificateFailure(where, f"its output bias writes dims {sorted(stray)[:6]} no part declares")
    return out


def _beside(m: _Model, l: int, ob: Beside, states: list[State], pos_class: np.ndarray, report: dict[str, Any],
            joint: tuple[Joint, ...], written: set[str], closures: dict[str, np.ndarray | None]) -> list[State]:
    """A :class:`Beside` MLP: each part checked on its own sub-network, one after another (they
    read and write disjoint subspaces, so the order does not matter)."""
    weights, biases = _mlp_weights(m, l, ob.mlp)
    parts = []
    for part, sub in zip(ob.parts, _beside_parts(m, l, ob, weights, biases)):
        rep: dict[str, Any] = {}
        if isinstance(part, Compose):
            states = _compose(m, l, part, states, pos_class, closures.get(part.maps), rep, sub)
        else:
            states = _lookup(m, l, part, states, pos_class, rep, joint, written, sub)
        parts.append(rep["mlp"])
    report["mlp"] = {"name": ob.mlp, "kind": "beside", "parts": parts,
                     "max_error": max((p_["max_error"] for p_ in parts), default=0.0)}
    return states


def _product_rows(parts: list[np.ndarray]) -> np.ndarray:
    """Every concatenation of one row of each part."""
    out = np.zeros((1, 0))
    for p in parts:
        out = np.concatenate([np.repeat(out, len(p), axis=0), np.tile(p, (len(out), 1))], axis=1)
    return out


def _half_gaps(codes: np.ndarray) -> np.ndarray:
    """Per dim, half the smallest gap between distinct codes (inf for a dim with one code)."""
    out = np.full(codes.shape[1], np.inf)
    for i in range(codes.shape[1]):
        v = np.unique(codes[:, i])
        if len(v) > 1:
            out[i] = np.diff(v).min() / 2
    return out


def _distinguishable(codes: np.ndarray, radius: np.ndarray, where: str) -> None:
    """The radius must stay below half the smallest gap between distinct codes of each dim."""
    gap = _half_gaps(codes)
    bad = np.nonzero(radius >= gap)[0]
    if len(bad):
        i = bad[0]
        raise CertificateFailure(where, f"output dim {i} may be off by {radius[i]:.3g}, at least half the gap "
                                 f"{2 * gap[i]:.3g} between its codes")


def _compose(m: _Model, l: int, ob: Compose, states: list[State], pos_class: np.ndarray, closure: np.ndarray | None,
             report: dict[str, Any], mlp: tuple[list[np.ndarray], list[np.ndarray]] | None = None) -> list[State]:
    """The composition MLP, checked per output point by separable bounds (module docstring)."""
    weights, biases = _unpadded(*(mlp or _mlp_weights(m, l, ob.mlp)))
    if len(weights) != 2:
        raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}", "a composition MLP has one hidden layer")
    W1, W2 = weights
    b1, b2 = biases
    F, G = m.dims(ob.maps), m.dims(ob.fetched)
    if len(F) != len(G):
        raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}", "maps and fetched maps differ in width")
    into_maps = ob.into == ob.maps
    writes = F + G if into_maps else G
    const, class_fixed = _class_fixed(m, pos_class, len(states))
    _check_io(m, l, ob.mlp, weights, biases, F + G, writes, const)
    n = len(F)
    worst = 0.0
    new_states = []
    cache: dict[tuple, tuple[float, np.ndarray]] = {}
    structs: dict[tuple, tuple] = {}
    for c, st in enumerate(states):
        fixed = class_fixed[c]
        cF, cG = (Code(st[name].per_dim, None, _round_up(st[name].radius)) for name in (ob.maps, ob.fetched))
        radius = {}
        values = {}
        for q in range(n):
            outs = [(F[q], True), (G[q], False)] if into_maps else [(G[q], True)]
            for o, gets_result in outs:
                key = (fixed[sorted(const)].tobytes(), q, o, cF.key(), cF.radius.tobytes(), cG.per_dim[q].tobytes(), cG.radius[q])
                if key not in cache:
                    cache[key] = _compose_output(m, W1, b1, W2[:, o], b2[o], F, G, q, o, gets_result, cF, cG,
                                                 const, fixed, f"layer {l + 1} MLP {ob.mlp}", structs)
                radius[o], values[o] = cache[key]
        st = dict(st)
        for name, dims in ((ob.maps, F), (ob.fetched, G)):
            if dims[0] not in radius:
                continue
            per_dim = [values[d] for d in dims]
            r = np.array([radius[d] for d in dims])
            joint = _composed_joint(st[ob.maps], st[ob.fetched], closure) if name == ob.into else None
            if name != ob.into:  # cleared
                joint = np.zeros((1, n))
            st[name] = Code(per_dim, joint, r)
            _distinguishable(np.concatenate(per_dim)[:, None], np.array([r.max()]), f"layer {l + 1} MLP {ob.mlp}")
            worst = max(worst, float(r.max()))
        new_states.append(st)
    report["mlp"] = {"name": ob.mlp, "kind": "compose", "max_error": worst}
    return new_states


def _round_up(r: np.ndarray) -> np.ndarray:
    """Radii rounded up to a grid of eight steps per power of two (larger, so still sound), so
    that classes whose radii differ in the last digits share one check."""
    r = np.asarray(r, dtype=np.float64)
    with np.errstate(divide="ignore"):
        up = np.exp2(np.ceil(8 * np.log2(np.where(r > 0, r, 1.0))) / 8)
    return np.where(r > 0, np.maximum(up, r), 0.0)


def _composed_joint(cF: Code, cG: Code, closure: np.ndarray | None) -> np.ndarray | None:
    """The joint set of f o g: every pair when few, else the transition semigroup (a superset)."""
    if cF.joint is not None and cG.joint is not None and len(cF.joint) * len(cG.joint) <= JOINT_BUDGET:
        f = cF.joint.astype(np.int64)
        g = cG.joint.astype(np.int64)
        comp = f[np.arange(len(f))[:, None, None], g[None, :, :]]  # [a, b, q] = f_a(g_b(q))
        return np.unique(comp.reshape(-1, f.shape[1]).astype(np.float64), axis=0)
    return closure


def _compose_units(W1: np.ndarray, b1: np.ndarray, w2: np.ndarray, F: tuple[int, ...], c: int, o: int,
                   const_l: tuple[int, ...], fixed_bytes: bytes, where: str, cache: dict) -> tuple:
    """The units feeding output ``o`` grouped by the one point of F each reads besides the
    selector ``c`` (-1: none), as padded arrays [groups, units]: input weights on the point and
    on the selector, bias (with the constant dims), its magnitude, output weight, term count."""
    key = (c, o, fixed_bytes)
    if key in cache:
        return cache[key]
    fixed = np.frombuffer(fixed_bytes)
    pos = set(F)
    units = np.nonzero(w2)[0]
    groups: dict[int, list[int]] = {}
    for h in units:
        other = [d for d in np.nonzero(W1[:, h])[0].tolist() if d != c and d not in const_l]
        if len(other) > 1 or (other and other[0] not in pos):
            raise CertificateFailure(where, f"hidden unit {h} reads {other}: not a sum of one-point terms")
        groups.setdefault(other[0] if other else -1, []).append(h)
    if o in pos:
        groups.setdefault(o, [])  # the residual's own term, even if no unit reads the point
    keys = list(groups)
    U = max(1, max(len(hs) for hs in groups.values()))
    Wx, Wc, bb, cmag, w, nnz = (np.zeros((len(keys), U)) for _ in range(6))
    const_W = W1[list(const_l)] if const_l else np.zeros((0, W1.shape[1]))
    for i, j in enumerate(keys):
        hs = groups[j]
        k = len(hs)
        if j >= 0:
            Wx[i, :k] = W1[j, hs]
        Wc[i, :k] = W1[c, hs]
        bb[i, :k] = b1[hs] + fixed @ const_W[:, hs]
        cmag[i, :k] = np.abs(b1[hs]) + np.abs(fixed) @ np.abs(const_W[:, hs])
        w[i, :k] = w2[hs]
        nnz[i, :k] = np.count_nonzero(W1[:, hs], axis=0) + 1
    cache[key] = (units, keys, Wx, Wc, bb, cmag, w, nnz)
    return cache[key]


def _compose_output(m: _Model, W1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: float, F: list[int],
                    G: list[int], q: int, o: int, gets_result: bool, cF: Code, cG: Code, const: set[int],
                    fixed: np.ndarray, where: str, structs: dict) -> tuple[float, np.ndarray]:
    """Radius and value set of output dim ``o`` (point q): the new value is f(g(q)) when
    ``gets_result``, else 0; every unit feeding it reads G[q] and at most one dim of F, so for
    each fetched code g the output is a sum of one-point terms and its deviation, error
    coefficients and magnitudes are bounded by sums of per-term extremes.  Two bounds, the
    smaller kept: affine (coefficients on the inputs' errors, rounding as gamma_n times the
    magnitudes) and, where the codes are multiples of a quantum and the noise is small,
    snapping (:func:`snaps`: the hidden units and the output are then exact but for the
    noise of results whose exact part is 0)."""
    c = G[q]
    pos = {d: i for i, d in enumerate(F)}
    const_l = sorted(const)
    units, keys, Wx, Wc, bb, cmag, w, nnz = _compose_units(W1, b1, w2, tuple(F), c, o, tuple(const_l),
                                                           fixed[const_l].tobytes(), where, structs)
    gs = cG.per_dim[q]
    if np.any(gs != np.round(gs)) or np.any(gs < 0) or np.any(gs >= len(F)):
        raise CertificateFailure(where, f"a fetched code at point {q} is not a point: {gs.tolist()}")
    r_c = cG.radius[q]
    J = len(keys)
    X = max(len(cF.per_dim[pos[j]]) if j >= 0 else 1 for j in keys)
    xs, rj = np.zeros((J, X)), np.zeros(J)
    own = np.array([j == o for j in keys])
    want_point = np.array([pos[j] if (gets_result and j >= 0) else -1 for j in keys])
    for i, j in enumerate(keys):
        if j >= 0:
            v = cF.per_dim[pos[j]]
            xs[i] = np.concatenate([v, np.full(X - len(v), v[0])])  # repeats change no extreme
            rj[i] = cF.radius[pos[j]]
    const_W = W1[const_l] if const_l else np.zeros((0, W1.shape[1]))
    X4, G4 = xs[:, None, :, None], gs[None, :, None, None]  # [J, g, x, U]
    Wx4, Wc4, w4 = Wx[:, None, None], Wc[:, None, None], w[:, None, None]
    r4 = rj[:, None, None, None]
    z = X4 * Wx4 + G4 * Wc4 + bb[:, None, None]  # the units' exact parts
    mag_in = (np.abs(X4) + r4) * np.abs(Wx4) + (np.abs(G4) + r_c) * np.abs(Wc4) + cmag[:, None, None]
    rz = gamma(nnz, m.u)[:, None, None] * mag_in
    noise_in = np.abs(Wx4) * r4 + np.abs(Wc4) * r_c
    err = noise_in + rz
    on = z > 0
    eta = np.where(err >= np.abs(z), np.maximum(0.0, err - np.abs(z)), 0.0)
    relu = np.maximum(z, 0)
    val = (relu * w4).sum(3) + own[:, None, None] * xs[:, None, :]  # [J, g, x]; the residual's own term
    kx = (on * Wx4 * w4).sum(3) + own[:, None, None]
    kc = (on * Wc4 * w4).sum(3)
    want = np.where(want_point[:, None, None] == gs[None, :, None], xs[:, None, :], 0.0)
    d = val - want
    absw = np.abs(w4)
    acc = {"dmax": d.max(2).sum(0), "dmin": d.min(2).sum(0), "xerr": (np.abs(kx).max(2) * rj[:, None]).sum(0),
           "cmax": kc.max(2).sum(0), "cmin": kc.min(2).sum(0),
           "nu": (absw * (on * rz + eta)).sum(3).max(2).sum(0), "mag": (absw * (relu + err)).sum(3).max(2).sum(0)}
    # snapping of the hidden units: their exact parts are sums of multiples of the quantum
    grown = noise_in * (1 + m.u) ** nnz[:, None, None]
    delta = quantum(np.concatenate([(X4 * Wx4).ravel(), (G4 * Wc4).ravel(), b1[units],
                                    (fixed[const_l, None] * const_W[:, units]).ravel()]))
    unit_ok = bool(np.all(snaps(np.broadcast_to(grown, z.shape), mag_in, delta, m.p)))
    acc["noise1"] = (absw * np.where(z == 0, grown, 0.0)).sum(3).max(2).sum(0)
    acc["mag1"] = (absw * relu).sum(3).max(2).sum(0)
    terms1 = [np.array([b2]), (relu * w4).ravel()]
    if o == c:  # the selector's own residual: x_o = g
        acc["dmax"] += gs
        acc["dmin"] += gs
        acc["cmax"] += 1.0
        acc["cmin"] += 1.0
    acc["dmax"] += b2
    acc["dmin"] += b2
    results = [cF.per_dim[int(g)] if gets_result else np.zeros(1) for g in gs]
    top = np.array([np.abs(r).max() for r in results])
    dev = np.maximum(np.abs(acc["dmax"]), np.abs(acc["dmin"]))
    cerr = np.maximum(np.abs(acc["cmax"]), np.abs(acc["cmin"])) * r_c
    out_round = gamma(len(units) + 1, m.u) * (acc["mag"] + abs(b2))
    rad = dev + acc["xerr"] + cerr + acc["nu"] + out_round
    rad = rad + m.u * (top + rad)  # the residual addition
    if unit_ok and np.all(dev == 0):  # snapping: the output sum, then the residual addition
        noise1 = acc["noise1"] * (1 + m.u) ** (len(units) + 1)
        ok1 = snaps(noise1, acc["mag1"] + abs(b2), quantum(np.concatenate(terms1)), m.p)
        x_own = cF.per_dim[pos[o]] if o in pos else gs
        noise2 = ((cF.radius[pos[o]] if o in pos else r_c) + noise1) * (1 + m.u) ** 2
        ok2 = snaps(noise2, top + np.abs(x_own).max() + noise2, quantum(np.concatenate([*results, x_own])), m.p)
        rad = np.where(ok1 & ok2, np.minimum(rad, noise2), rad)
    return float(rad.max()), np.unique(np.concatenate(results))


def _closure(codes: np.ndarray, budget: int = JOINT_BUDGET) -> np.ndarray | None:
    """The maps generated by ``codes`` (rows) under composition, identity included; None when
    more than ``budget``."""
    gens = [tuple(int(v) for v in row) for row in codes]
    n = len(gens[0])
    seen = {tuple(range(n))} | set(gens)
    frontier = list(seen)
    while frontier:
        nxt = []
        for f in frontier:
            for a in gens:
                h = tuple(f[a[i]] for i in range(n))
                if h not in seen:
                    seen.add(h)
                    nxt.append(h)
                    if len(seen) > budget:
                        return None
        frontier = nxt
    return np.array(sorted(seen), dtype=np.float64)


# --- readout -----------------------------------------------------------------------------------


def _readout(m: _Model, ob: Obligations, states: list[State], pos_class: np.ndarray,
             report: dict[str, Any], written: set[str] = frozenset()) -> None:
    W_U = m.model.W_U.detach().double().cpu().numpy()
    b_U = m.model.b_U.detach().double().cpu().numpy()
    reads = [d for name in ob.readout.reads for d in m.dims(name)]
    const, class_fixed = _class_fixed(m, pos_class, len(states))
    used = set(np.nonzero(np.abs(W_U).sum(1))[0].tolist())
    if used - set(reads) - const:
        raise CertificateFailure("readout", f"the unembedding reads dims {sorted(used - set(reads) - const)[:6]} "
                                 f"the obligation does not declare")
    const_l = sorted(const)
    worst = math.inf
    for c in sorted(set(pos_class[1:].tolist())):
        st = states[c]
        codes = [_get(st, name) for name in ob.readout.reads]
        parts, radii = [c.combos() for c in codes], [c.radius for c in codes]
        X = _product_rows(parts)
        if len(X) > COMBINATION_BUDGET:
            raise NotCertifiable(f"readout: {len(X):,} final codes, over the budget {COMBINATION_BUDGET:,}")
        at = np.cumsum([0] + [p_.shape[1] for p_ in parts])
        X = X[_jointly(m, ob.joint, {n: X[:, at[i] : at[i + 1]] for i, n in enumerate(ob.readout.reads)}, written,
                       len(X))]
        r = np.concatenate(radii)
        fixed = class_fixed[c][const_l]
        logits = X @ W_U[reads] + fixed @ W_U[const_l] + b_U
        mag = (np.abs(X) + r) @ np.abs(W_U[reads]) + np.abs(fixed) @ np.abs(W_U[const_l]) + np.abs(b_U)
        err = r @ np.abs(W_U[reads]) + gamma(np.count_nonzero(W_U, axis=0) + 1, m.u) * mag
        for i, row in enumerate(X):
            key = tuple(int(round(v)) for v in row)
            if key not in ob.readout.table:
                raise CertificateFailure("readout", f"the final code {key} is not in the readout's table")
            want = ob.readout.table[key]
            low = logits[i, want] - err[i, want]
            others = np.delete(logits[i] + err[i], want)
            margin = low - (others.max() if len(others) else -math.inf)
            if margin <= 0:
                raise CertificateFailure("readout", f"on the final code {key} output {want} wins by {margin:.3g} "
                                         f"after the error bound (its logit {logits[i, want]:.6g}, error "
                                         f"{err[i, want]:.3g})")
            worst = min(worst, margin)
    report["readout"] = {"min_margin": float(worst)}


# --- the certificate ---------------------------------------------------------------------------


def obligations_of(model) -> Obligations:
    """The obligations of a compiled model's construction (NotCertifiable when it declares none);
    for a label model, its readout must put the largest logit on each state's label."""
    construction, plan = registry.plan_of(model)
    if construction.obligations is None:
        raise NotCertifiable(f"the {construction.name} construction declares no obligations yet: "
                             f"not certified (sampled verification only)")
    try:
        ob = construction.obligations(model, plan)
    except Undeclared as e:
        raise NotCertifiable(f"the {construction.name} construction declares no obligations for this model yet: "
                             f"{e}; not certified (sampled verification only)") from None
    labels = readout_of(model.meta)
    if labels is None:
        return ob
    if "last MLP" in str(labels.get("form", "")):
        raise NotCertifiable(f"its label readout is a lookup fused into the last MLP ({labels['form']}), which "
                             f"declares no obligations yet: not certified (sampled verification only)")
    state_label = _state_labels(model.automaton, labels)
    table = {code: state_label[q] for code, q in ob.readout.table.items()}
    return replace(ob, readout=Readout(ob.readout.reads, table), notes={**ob.notes, "labels": labels["labels"]})


def _state_labels(compiled: Semiautomaton, readout: dict[str, Any]) -> list[int]:
    """The label index of each compiled state, proved against the labels' source automaton: on
    every pair of states a common input reaches from the two starts (the product's reachable
    pairs, so every input), the source's output must be the label the readout gives the compiled
    state (CertificateFailure otherwise).  States no input reaches keep the readout's label."""
    source = from_dict(readout["source"])
    if source.alphabet != compiled.alphabet or source.outputs is None:
        raise CertificateFailure("readout labels", "the labels' source automaton has another alphabet or no outputs")
    index = {x: i for i, x in enumerate(readout["labels"])}
    state_label = [int(x) for x in readout["state_label"]]
    seen = {(source.start, compiled.start)}
    frontier = list(seen)
    while frontier:
        nxt = []
        for p, q in frontier:
            want = index.get(source.outputs[p])
            if want != state_label[q]:
                raise CertificateFailure("readout labels", f"state {compiled.states[q]!r} is read out as "
                                         f"{readout['labels'][state_label[q]]!r}, but an input that reaches it reaches "
                                         f"the source's {source.states[p]!r}, labelled {source.outputs[p]!r}")
            for a in range(compiled.n_symbols):
                pair = (source.maps[a][p], compiled.maps[a][q])
                if pair not in seen:
                    seen.add(pair)
                    nxt.append(pair)
        frontier = nxt
    return state_label


def certify(model, with_obligations: bool = False) -> dict[str, Any]:
    """Prove ``model`` exact on every input up to its max_len, or say precisely why not.

    Returns the certificate (``certified`` True) or a refusal (``certified`` False with
    ``failure``: the obligation, and ``reason``); see the module docstring for the method.
    ``with_obligations``: include the obligations themselves (their canonical JSON), as the
    certificate file ``shortcut certify -o`` writes does."""
    start = time.perf_counter()
    out: dict[str, Any] = {"schema": SCHEMA, "method": model.meta.get("method"), "max_len": model.max_len,
                           "dtype": model.config["dtype"], "paths": PATHS, "assumptions": ASSUMPTIONS,
                           "weights_sha256": weights_sha256(model)}
    try:
        if model.W_E.dtype == torch.float64:
            raise NotCertifiable("float64 models are not certified yet (the checker's own arithmetic is float64, "
                                 "so it cannot bound their rounding); compile with --dtype float32")
        ob = obligations_of(model)
        out["obligations_sha256"] = ob.digest()
        if ob.promise is not None:
            out["promise"] = ob.promise.text
        if with_obligations:
            out["obligations"] = ob.to_json()
        out["layers"] = _run(model, ob)
        out["readout"] = out["layers"].pop()["readout"]
        out["certified"] = True
    except NotCertifiable as e:
        out.update(certified=False, supported=False, reason=str(e))
    except CertificateFailure as e:
        out.update(certified=False, supported=True, failure={"where": e.where, "detail": e.detail}, reason=str(e))
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out


def _mlp_writes(o: Compose | Lookup | Steps | Beside | Threshold | None) -> set[str]:
    """The subspaces an MLP obligation writes."""
    if o is None:
        return set()
    if isinstance(o, Threshold):
        return {o.dst}
    if isinstance(o, Compose):
        return {o.maps, o.fetched}
    if isinstance(o, Beside):
        return {n for part in o.parts for n in _mlp_writes(part)}
    return set(_written(o.steps if isinstance(o, Steps) else (o,)))


def _run(model, ob: Obligations) -> list[dict[str, Any]]:
    if ob.promise is not None:  # on legal inputs only: the promise's claims restrict the value sets
        ob = replace(ob, joint=ob.joint + ob.promise.claims)
    m = _arrays(model)
    if len(ob.layers) != len(m.blocks):
        raise CertificateFailure("obligations", f"{len(ob.layers)} layers declared, the model has {len(m.blocks)}")
    states, pos_class = _phases(m, *_embedding(m, ob))
    composes = [o for layer in ob.layers for o in
                ((layer.mlp,) if isinstance(layer.mlp, Compose) else layer.mlp.parts if isinstance(layer.mlp, Beside)
                 else ()) if isinstance(o, Compose)]
    closures = {o.maps: _closure(ob.embedding.codes[o.maps]) for o in composes if o.maps in ob.embedding.codes}
    layers = []
    later = {f.dst for layer in ob.layers for f in layer.fetches} | {n for layer in ob.layers
                                                                      for n in _mlp_writes(layer.mlp)}
    written = (set(ob.embedding.codes) - later) | {  # the token's own codes, and the position's
        n for n, dims in m.subspaces.items() if set(dims) <= m.fixed_dims}
    for l, layer in enumerate(ob.layers):
        report: dict[str, Any] = {"layer": l + 1}
        if latest.is_any_layer(layer):  # "some flag so far", head and threshold MLP together
            states, pos_class = latest.any_layer(m, l, layer, states, pos_class, report)
        else:
            states, pos_class = _heads(m, l, layer.fetches, states, pos_class, report)
        written |= {f.dst for f in layer.fetches} | _mlp_writes(layer.mlp)
        if isinstance(layer.mlp, Threshold):
            pass  # checked with its head
        elif isinstance(layer.mlp, (Lookup, Steps)):
            states = _lookup(m, l, layer.mlp, states, pos_class, report, ob.joint, written)
        elif isinstance(layer.mlp, Compose):
            states = _compose(m, l, layer.mlp, states, pos_class, closures.get(layer.mlp.maps), report)
        elif isinstance(layer.mlp, Beside):
            states = _beside(m, l, layer.mlp, states, pos_class, report, ob.joint, written, closures)
        elif m.blocks[l]["mlp"] is not None:
            raise CertificateFailure(f"layer {l + 1}", "has an MLP no obligation describes")
        states, pos_class = _merge(states, pos_class, m.phase)
        report["classes"] = len(states)
        report["radius"] = {name: float(max(st[name].radius.max() for st in states))
                            for name in states[0] if " + " not in name}
        layers.append(report)
    final: dict[str, Any] = {}
    _readout(m, ob, states, pos_class, final, written)
    layers.append(final)
    return layers



# --- stored certificates ---------------------------------------------------------------------


def certificate_summary(cert: dict[str, Any]) -> dict[str, Any]:
    """The part of a certificate a checkpoint stores (``meta["verification"]["certificate"]``):
    the verdict, what it is bound to (weights, obligations, max_len, dtype), the margins."""
    keep = ("schema", "certified", "supported", "reason", "failure", "method", "max_len", "dtype", "paths",
            "weights_sha256", "obligations_sha256", "promise", "readout")  # no timing: checkpoints stay deterministic
    out = {k: cert[k] for k in keep if k in cert}
    if "layers" in cert:
        out["max_radius"] = max((max(layer["radius"].values(), default=0.0) for layer in cert["layers"]), default=0.0)
        heads = [h for layer in cert["layers"] for h in layer.get("heads", [])]
        out["max_leaked_mass"] = max((h["max_leaked_mass"] for h in heads), default=None)
        out["min_score_gap"] = min((h["min_score_gap"] for h in heads if h["min_score_gap"] is not None), default=None)
    return out


def certificate_text(cert: dict[str, Any] | None) -> str:
    """One line: certified (with the smallest readout margin and the time), or why not."""
    if not isinstance(cert, dict):
        return "not certified (no certificate)"
    if cert.get("certified") is True:
        margin = (cert.get("readout") or {}).get("min_margin")
        took = f", {cert['seconds']} s" if isinstance(cert.get("seconds"), (int, float)) else ""
        inputs = "every legal input (under the promise of legal inputs)" if cert.get("promise") else "every input"
        return (f"certified exact on {inputs} up to max_len {cert.get('max_len')} ({cert.get('dtype')}, "
                f"both attention paths; readout margin after error bounds {margin:.4g}{took})"
                if isinstance(margin, (int, float)) else f"certified exact on {inputs} up to max_len "
                f"{cert.get('max_len')}")
    return f"not certified: {cert.get('reason')}"


def recheck(model, stored: dict[str, Any], with_obligations: bool = False) -> dict[str, Any]:
    """Re-run the checker on ``model`` and compare with a stored certificate: the same weights,
    obligations, max_len and dtype, and a passing proof.  Returns the new certificate with
    ``matches`` (bool) and ``mismatch`` (what differs, if anything)."""
    new = certify(model, with_obligations)
    differ = [k for k in ("weights_sha256", "obligations_sha256", "max_len", "dtype", "certified")
              if stored.get(k) != new.get(k)]
    new["matches"] = not differ and new.get("certified") is True
    new["mismatch"] = differ
    return new


latest.core = sys.modules[__name__]  # the most-recent-match rules use this module's primitives
