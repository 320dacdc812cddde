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
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from compiler.automata.errors import ShortcutError
from compiler.automata.spec import Semiautomaton, from_dict
from constructions import registry
from constructions.checkpoint import weights_sha256
from constructions.labels import readout_of
from constructions.model import input_independent_dims
from constructions.obligations import Compose, Fetch, Lookup, Obligations, Readout

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
        return (joint, tuple(v.tobytes() for v in self.per_dim))


State = dict[str, Code]


def _merge(states: list[State], pos_class: np.ndarray) -> tuple[list[State], np.ndarray]:
    """Merge classes whose value sets agree (radius: the larger); renumber the positions."""
    index: dict[tuple, int] = {}
    merged: list[State] = []
    new_id = np.zeros(len(states), dtype=np.int64)
    for c, st in enumerate(states):
        k = (c == 0, tuple((name, st[name].key()) for name in sorted(st)))  # BOS stays apart
        if k in index:
            tgt = merged[index[k]]
            for name in st:
                tgt[name].radius = np.maximum(tgt[name].radius, st[name].radius)
        else:
            index[k] = len(merged)
            merged.append({n: Code(list(v.per_dim), v.joint, v.radius.copy()) for n, v in st.items()})
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

    def dims(self, name: str) -> list[int]:
        """Residual dims of a subspace, or of one dim of it (``name[i]``)."""
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
    missing = [d for d in range(W_E.shape[1]) if d not in tracked and d not in m.fixed_dims]
    if missing:
        raise CertificateFailure("embedding", f"residual dims {missing[:8]} depend on the input or are written, "
                                 f"but no obligation tracks them")
    return [bos, body], np.array([0] + [1] * m.T, dtype=np.int64)


# --- positional heads ---------------------------------------------------------------------------


def _abs_products(x: np.ndarray, W: np.ndarray, u: float) -> tuple[np.ndarray, np.ndarray]:
    """x @ W in float64 and the rounding bound of the model's dot products."""
    nnz = np.count_nonzero(W, axis=0)
    # einsum, not BLAS: these products are small, and a threaded BLAS stalls on a busy machine
    return np.einsum("td,de->te", x, W), gamma(nnz + 1, u) * np.einsum("td,de->te", np.abs(x), np.abs(W))


def _head_pattern(m: _Model, l: int, h: int, key: np.ndarray, name: str) -> np.ndarray:
    """Leaked-mass bound per query position of a positional head, checking that ``key[t]`` wins
    every row by a positive gap after rounding (CertificateFailure otherwise)."""
    b = m.blocks[l]
    Wq, Wk = b["W_Q"][h], b["W_K"][h]
    used = set(np.nonzero(np.abs(Wq).sum(1) + np.abs(Wk).sum(1))[0].tolist())
    if not used <= m.fixed_dims:
        raise NotCertifiable(f"layer {l + 1} head {name}: its query or key reads input-dependent dims "
                             f"{sorted(used - m.fixed_dims)[:6]}; content-dependent heads are not certified yet")
    cols = np.nonzero((np.abs(Wq).sum(0) > 0) & (np.abs(Wk).sum(0) > 0))[0]
    rows = sorted(used)
    X = m.fixed[:, rows]
    q, eq = _abs_products(X, Wq[rows][:, cols], m.u)
    k, ek = _abs_products(X, Wk[rows][:, cols], m.u)
    g = gamma(len(cols) + 1, m.u)
    # score bound |S - q k| <= eq |k| + |q| ek + eq ek + g (|q| + eq)(|k| + ek) = A B^T + |q| ek^T, so the
    # highest possible score of every pair is one product of stacked factors
    A, B = eq * (1 + g) + g * np.abs(q), np.abs(k) + ek
    top_q, top_k = np.concatenate([q, A, np.abs(q)], axis=1), np.concatenate([k, B, ek], axis=1)
    T = m.T
    if np.any(key > np.arange(T + 1)) or np.any(key < 0):
        raise CertificateFailure(f"layer {l + 1} head {name}", "an obligation's key lies after its query")
    # the lowest possible score of each query's intended key
    low = (q * k[key]).sum(1) - (A * B[key]).sum(1) - (np.abs(q) * ek[key]).sum(1)
    leak = np.zeros(T + 1)
    gaps = np.full(T + 1, np.inf)
    step = max(1, (1 << 22) // (T + 1))
    s_all = np.arange(T + 1)
    for lo in range(0, T + 1, step):
        t = np.arange(lo, min(T + 1, lo + step))
        hi = top_q[t] @ top_k.T
        hi[s_all[None, :] > t[:, None]] = -np.inf  # causal: keys after the query do not exist
        hi[np.arange(len(t)), key[t]] = -np.inf  # the intended key itself
        worst = low[t] - hi.max(1)
        bad = np.nonzero(worst <= 0)[0]
        if len(bad):
            i = bad[0]
            s = int(np.argmax(hi[i]))
            raise CertificateFailure(
                f"layer {l + 1} head {name}",
                f"at query position {int(t[i])} key {s} scores within the rounding bound of the intended key "
                f"{int(key[t[i]])} (gap {float(worst[i]):.3g} after rounding)")
        gaps[t] = worst
        hi -= low[t][:, None]
        leak[t] = np.exp(hi, out=hi).sum(1)
    return leak, gaps


def _copy_map(m: _Model, l: int, h: int, f: Fetch) -> None:
    """The head must copy ``src`` into ``dst`` exactly: W_V W_O is the identity between them,
    and 0 from and to every other dim."""
    b = m.blocks[l]
    VO = b["W_V"][h] @ b["W_O"][h]
    src, dst = m.dims(f.src), m.dims(f.dst)
    want = np.zeros_like(VO)
    if len(src) != len(dst):
        raise CertificateFailure(f"layer {l + 1} head {f.head}", f"{f.src} and {f.dst} differ in width")
    want[src, dst] = 1.0
    WV, WO = b["W_V"][h], b["W_O"][h]
    if (np.count_nonzero(WV, axis=0) > 1).any() or (np.count_nonzero(WO, axis=1) > 1).any() or \
            np.any((WV != 0) & (WV != 1)) or np.any((WO != 0) & (WO != 1)):
        raise CertificateFailure(f"layer {l + 1} head {f.head}", "a copying head's W_V and W_O must be 0/1 with one "
                                 "entry per value dim (so the copy itself is exact in floating point)")
    if not np.array_equal(VO, want):
        i, j = np.argwhere(VO != want)[0]
        raise CertificateFailure(f"layer {l + 1} head {f.head}",
                                 f"does not copy {f.src} into {f.dst}: W_V W_O[{i}, {j}] = {VO[i, j]:.6g}, "
                                 f"not {want[i, j]:g}")


def _heads(m: _Model, l: int, fetches: tuple[Fetch, ...], states: list[State], pos_class: np.ndarray,
           report: dict[str, Any]) -> tuple[list[State], np.ndarray]:
    """Apply layer l's heads: new classes by (own class, each key's class), copied codes, radii."""
    layout = m.blocks[l]["layout"]["heads"]
    index = {hd["name"]: hd["index"] for hd in layout}
    declared = {f.head for f in fetches}
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
    for f in fetches:
        h = index[f.head]
        _copy_map(m, l, h, f)
        key = np.asarray(f.key, dtype=np.int64)
        leak, gaps = _head_pattern(m, l, h, key, f.head)
        src = [st[f.src] for st in states]
        lo = np.min([c.combos().min(0) - c.radius for c in src], axis=0)
        hi = np.max([c.combos().max(0) + c.radius for c in src], axis=0)
        vmax = np.maximum(np.abs(lo), np.abs(hi))
        r_key = np.stack([src[c].radius for c in pos_class[key]])  # [T+1, dims]
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
        per_fetch.append((f, key, out, vmax, noisy, delta))
        report.setdefault("heads", []).append({
            "name": f.head, "min_score_gap": float(gaps[1:].min()) if T else None,
            "max_leaked_mass": float(leak.max()), "max_copy_error": float(np.minimum(out, noisy).max())})
    sig = np.stack([pos_class] + [pos_class[key] for _, key, *_ in per_fetch], axis=1)
    groups, inverse = np.unique(sig, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    new_states: list[State] = []
    for gi, row in enumerate(groups):
        members = inverse == gi
        own = states[row[0]]
        st = {n: Code(list(c.per_dim), c.joint, c.radius.copy()) for n, c in own.items()}
        for (f, key, out, vmax, noisy, delta), kc in zip(per_fetch, row[1:]):
            old = own[f.dst]
            if old.size() != 1 or np.any(old.combos() != 0):
                raise CertificateFailure(f"layer {l + 1} head {f.head}", f"{f.dst} is not 0 before the head copies "
                                         f"into it")
            fetched = states[kc][f.src]
            general = old.radius + out[members]
            general = general + m.u * (vmax + general)  # the residual addition
            snapped = (old.radius + noisy[members]) * (1 + m.u) ** 2
            exact = snaps(snapped, vmax + snapped, delta, m.p)
            r = np.where(exact, np.minimum(snapped, general), general).max(0)
            st[f.dst] = Code(list(fetched.per_dim), fetched.joint, r)
        new_states.append(st)
    return _merge(new_states, inverse)


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


def _const_dims(m: _Model) -> tuple[set[int], np.ndarray, np.ndarray]:
    """Fixed dims whose value is the same at every position after BOS, with BOS's and the
    others' values."""
    body = m.fixed[1:] if m.T else m.fixed[:1]
    same = np.all(body == body[:1], axis=0)
    dims = {d for d in m.fixed_dims if same[d]}
    return dims, m.fixed[0], body[0]


def _affine(x: np.ndarray, r: np.ndarray, weights: list[np.ndarray], biases: list[np.ndarray],
            u: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Evaluate a ReLU network on clean inputs ``x`` [N, n] whose errors are at most ``r`` [n].

    Returns the clean output [N, k], its coefficients on the input errors [N, k, n] (exact while
    every unit's sign is fixed) and an independent error bound [N, k] (rounding, and the whole
    possible deviation of units whose sign the error could flip)."""
    h = x
    A = np.broadcast_to(np.eye(x.shape[1]), (x.shape[0], x.shape[1], x.shape[1]))
    nu = np.zeros_like(x)
    for i, (W, b) in enumerate(zip(weights, biases)):
        z = h @ W + b
        Az = np.einsum("Nhn,hk->Nkn", A, W)
        mag = np.abs(h) + np.abs(A) @ r + nu
        nz = nu @ np.abs(W) + gamma(np.count_nonzero(W, axis=0) + 1, u) * (mag @ np.abs(W) + np.abs(b))
        if i == len(weights) - 1:
            return z, Az, nz
        err = np.abs(Az) @ r + nz
        on = z > 0
        flip = err >= np.abs(z)
        eta = np.where(flip, np.maximum(0.0, err - np.abs(z)), 0.0)
        h = np.maximum(z, 0.0)
        A = Az * on[:, :, None]
        nu = nz * on + eta
    raise AssertionError("unreachable")


def _lookup(m: _Model, l: int, ob: Lookup, states: list[State], report: dict[str, Any]) -> list[State]:
    """Every class: every combination of the read codes through the MLP, against the table."""
    weights, biases = _mlp_weights(m, l, ob.mlp)
    reads = [d for name in ob.reads for d in m.dims(name)]
    out = m.dims(ob.out)
    const, bos_fixed, body_fixed = _const_dims(m)
    _check_io(m, l, ob.mlp, weights, biases, reads, out, const)
    inputs = reads + sorted(const)
    W0 = weights[0][inputs]
    worst = 0.0
    new_states = []
    for c, st in enumerate(states):
        sets = [st[name] for name in ob.reads]
        n = math.prod(s.size() for s in sets)
        if n > COMBINATION_BUDGET:
            raise NotCertifiable(f"layer {l + 1} MLP {ob.mlp}: {n:,} code combinations, over the budget "
                                 f"{COMBINATION_BUDGET:,}")
        X = _product_rows([s.combos() for s in sets])
        fixed = bos_fixed if c == 0 else body_fixed
        old = st[ob.out]
        if old.size() != 1 or np.any(old.combos() != 0):
            raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}", f"{ob.out} is not 0 before the lookup")
        Xc = np.concatenate([X, np.tile(fixed[sorted(const)], (len(X), 1))], axis=1)
        r = np.concatenate([np.concatenate([s.radius for s in sets]), np.zeros(len(const))])
        want = np.empty((len(X), len(out)))
        for i, row in enumerate(X):
            key = tuple(int(round(v)) for v in row)
            if key not in ob.table or np.any(np.round(row) != row):
                raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}",
                                         f"the code combination {key} reaches the lookup but is not in its table")
            want[i] = np.asarray(ob.table[key], dtype=np.float64)
        gap = _half_gaps(want)
        rad = np.zeros(len(out))
        step = max(1, AFFINE_CHUNK // max(1, max(w.shape[1] for w in weights) * len(inputs)))
        for lo in range(0, len(X), step):
            sl = slice(lo, lo + step)
            z, A, nu = _affine(Xc[sl], r, [W0, *weights[1:]], biases, m.u)
            z, A, nu = z[:, out], A[:, out], nu[:, out]
            # the old value is exactly 0 (checked above); its radius adds, and the residual addition rounds
            bound = np.abs(z - want[sl]) + np.abs(A) @ r + nu + old.radius
            bound = bound + m.u * (np.abs(want[sl]) + bound)
            bad = np.argwhere(bound >= gap)
            if len(bad):
                i, k = bad[0]
                key = tuple(int(round(v)) for v in X[lo + i])
                raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}",
                                         f"on the code combination {key} output dim {k} of {ob.out} is "
                                         f"{z[i, k]:.6g} (error bound {bound[i, k]:.3g}), not within half the gap "
                                         f"{2 * gap[k]:.3g} of the table's {want[lo + i, k]:g}")
            rad = np.maximum(rad, bound.max(0))
        worst = max(worst, float(rad.max()))
        st = dict(st)
        st[ob.out] = Code.of(want, rad)
        new_states.append(st)
    report["mlp"] = {"name": ob.mlp, "kind": "lookup", "max_error": worst}
    return new_states


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


def _compose(m: _Model, l: int, ob: Compose, states: list[State], closure: np.ndarray | None,
             report: dict[str, Any]) -> list[State]:
    """The composition MLP, checked per output point by separable bounds (module docstring)."""
    weights, biases = _mlp_weights(m, l, ob.mlp)
    if len(weights) != 2:
        raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}", "a composition MLP has one hidden layer")
    W1, W2 = weights
    b1, b2 = biases
    F, G = m.dims(ob.maps), m.dims(ob.fetched)
    if len(F) != len(G):
        raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}", "maps and fetched maps differ in width")
    into_maps = ob.into == ob.maps
    writes = F + G if into_maps else G
    const, bos_fixed, body_fixed = _const_dims(m)
    _check_io(m, l, ob.mlp, weights, biases, F + G, writes, const)
    n = len(F)
    worst = 0.0
    new_states = []
    cache: dict[tuple, tuple[float, np.ndarray]] = {}
    structs: dict[tuple, tuple] = {}
    for c, st in enumerate(states):
        fixed = bos_fixed if c == 0 else body_fixed
        cF, cG = (Code(st[name].per_dim, None, _round_up(st[name].radius)) for name in (ob.maps, ob.fetched))
        radius = {}
        values = {}
        for q in range(n):
            outs = [(F[q], True), (G[q], False)] if into_maps else [(G[q], True)]
            for o, gets_result in outs:
                key = (c == 0, q, o, cF.key(), cF.radius.tobytes(), cG.per_dim[q].tobytes(), cG.radius[q])
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
             report: dict[str, Any]) -> None:
    W_U = m.model.W_U.detach().double().cpu().numpy()
    b_U = m.model.b_U.detach().double().cpu().numpy()
    reads = [d for name in ob.readout.reads for d in m.dims(name)]
    const, _, body_fixed = _const_dims(m)
    used = set(np.nonzero(np.abs(W_U).sum(1))[0].tolist())
    if used - set(reads) - const:
        raise CertificateFailure("readout", f"the unembedding reads dims {sorted(used - set(reads) - const)[:6]} "
                                 f"the obligation does not declare")
    const_l = sorted(const)
    worst = math.inf
    for c in sorted(set(pos_class[1:].tolist())):
        st = states[c]
        parts, radii = [], []
        for name in ob.readout.reads:
            base = re.fullmatch(r"(.*)\[(\d+)\]", name)
            if name in st:
                parts.append(st[name].combos())
                radii.append(st[name].radius)
            elif base and base.group(1) in st:
                code, i = st[base.group(1)], int(base.group(2))
                parts.append(code.per_dim[i][:, None])
                radii.append(code.radius[i : i + 1])
            else:
                raise CertificateFailure("readout", f"reads {name!r}, which no obligation tracks")
        X = _product_rows(parts)
        if len(X) > COMBINATION_BUDGET:
            raise NotCertifiable(f"readout: {len(X):,} final codes, over the budget {COMBINATION_BUDGET:,}")
        r = np.concatenate(radii)
        logits = X @ W_U[reads] + body_fixed[const_l] @ W_U[const_l] + b_U
        mag = (np.abs(X) + r) @ np.abs(W_U[reads]) + np.abs(body_fixed[const_l]) @ np.abs(W_U[const_l]) + np.abs(b_U)
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
    ob = construction.obligations(model, plan)
    labels = readout_of(model.meta)
    if labels is None:
        return ob
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


def _run(model, ob: Obligations) -> list[dict[str, Any]]:
    m = _arrays(model)
    if len(ob.layers) != len(m.blocks):
        raise CertificateFailure("obligations", f"{len(ob.layers)} layers declared, the model has {len(m.blocks)}")
    states, pos_class = _embedding(m, ob)
    maps = [o.mlp for o in ob.layers if isinstance(o.mlp, Compose)]
    closure = _closure(ob.embedding.codes[maps[0].maps]) if maps else None
    layers = []
    for l, layer in enumerate(ob.layers):
        report: dict[str, Any] = {"layer": l + 1}
        states, pos_class = _heads(m, l, layer.fetches, states, pos_class, report)
        if isinstance(layer.mlp, Lookup):
            states = _lookup(m, l, layer.mlp, states, report)
        elif isinstance(layer.mlp, Compose):
            states = _compose(m, l, layer.mlp, states, closure, report)
        elif m.blocks[l]["mlp"] is not None:
            raise CertificateFailure(f"layer {l + 1}", "has an MLP no obligation describes")
        states, pos_class = _merge(states, pos_class)
        report["classes"] = len(states)
        report["radius"] = {name: float(max(st[name].radius.max() for st in states)) for name in states[0]}
        layers.append(report)
    final: dict[str, Any] = {}
    _readout(m, ob, states, pos_class, final)
    layers.append(final)
    return layers



# --- stored certificates ---------------------------------------------------------------------


def certificate_summary(cert: dict[str, Any]) -> dict[str, Any]:
    """The part of a certificate a checkpoint stores (``meta["verification"]["certificate"]``):
    the verdict, what it is bound to (weights, obligations, max_len, dtype), the margins."""
    keep = ("schema", "certified", "supported", "reason", "failure", "method", "max_len", "dtype", "paths",
            "weights_sha256", "obligations_sha256", "readout")  # no timing: checkpoints stay deterministic
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
        return (f"certified exact on every input up to max_len {cert.get('max_len')} ({cert.get('dtype')}, "
                f"both attention paths; readout margin after error bounds {margin:.4g}{took})"
                if isinstance(margin, (int, float)) else f"certified exact up to max_len {cert.get('max_len')}")
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
