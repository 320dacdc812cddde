"""The checker's abstract state and numerics: codes with error radii per class of positions, the
model's tensors as float64 arrays, the embedding's codes, and the floating-point lemmas (gamma_n,
quanta, snapping) every rule uses."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from compiler.automata.errors import ShortcutError
from constructions.model import CompiledTransformer, input_independent_dims
from constructions.obligations import Obligations, Recent


SCHEMA = "shortcut-certificate/1"
JOINT_BUDGET = 200_000
"""Largest joint code set tracked for one subspace (beyond it only the per-dim sets are kept)."""
COMBINATION_BUDGET = 2_000_000
"""Largest number of code combinations one lookup or readout check evaluates."""
AFFINE_CHUNK = 1 << 22
"""Floats in one chunk of affine coefficients (combinations x units x input dims)."""

ROW_FLOAT_BUDGET = 1 << 24
"""Most floats in one array over a lookup check's code combinations (combinations x the dims it
writes): the check holds about ten such arrays at once (the declared values, the network's
outputs, their bounds, the settled bounds and their temporaries), so 2^24 float64s (128 MB each)
keep it near 1 GB, a quarter of the 4 GB a 700-state compile and certify may use.  (Arrays over a
hidden layer's width go through in chunks, :data:`AFFINE_CHUNK`.)"""

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
    return float(quanta(values).min(initial=math.inf))


def quanta(values: np.ndarray) -> np.ndarray:
    """Elementwise, the largest power of two dividing each value (inf for 0 and non-finite
    values): :func:`quantum` of a set is the least of its elements'."""
    v = np.abs(np.asarray(values, dtype=np.float64))
    ok = (v != 0) & np.isfinite(v)
    mant, exp = np.frexp(np.where(ok, v, 1.0))  # v = mant 2^exp, mant in [1/2, 1): an integer of 53 bits times 2^(exp - 53)
    ints = (mant * 2.0**53).astype(np.int64)
    low = ints & -ints  # the lowest set bit
    return np.where(ok, np.ldexp(low.astype(np.float64), exp - 53), math.inf)


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


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """``np.unique(rows, axis=0)`` of a float array [N, k]: its distinct rows in lexicographic
    order.  Fast where that is cheap to get otherwise: rows already strictly increasing are
    returned as they are (the array itself: joint sets are never written in place), and rows of integers in 0..65535 are sorted once as byte strings (one
    byte, or two big-endian, per entry: the byte order is then the order of the values)."""
    a = np.asarray(rows, dtype=np.float64)
    if a.ndim != 2 or len(a) < 2 or a.shape[1] == 0:
        return np.unique(a, axis=0)
    step = a[1:] != a[:-1]
    first = step.argmax(1)
    at = np.arange(len(a) - 1)
    if np.all(step[at, first]) and np.all(a[1:][at, first] > a[:-1][at, first]):
        return a
    top = a.max()
    if a.min() >= 0 and top < 65536 and np.all(a == np.round(a)):
        t = np.dtype(np.uint8) if top < 256 else np.dtype(">u2")
        b = np.ascontiguousarray(a.astype(t))
        out = np.unique(b.view(np.dtype((np.void, t.itemsize * a.shape[1]))).reshape(-1))
        return out.view(t).reshape(len(out), -1).astype(np.float64)
    return np.unique(a, axis=0)


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
    row_slack: np.ndarray | None = None
    """[rows of ``joint``, dims] >= 0: where the joint code is that row, each dim is within
    ``radius - row_slack`` of it (a lookup's one-hot output errs only on the dims its key writes).
    A slack, not a per-row radius, so that error added to the whole subspace later (the radius
    grows, the slack stays) keeps the per-row bound sound; codes built afresh carry none."""

    @staticmethod
    def of(joint: np.ndarray, radius: np.ndarray) -> Code:
        joint = unique_rows(np.asarray(joint, dtype=np.float64).reshape(len(joint), -1))
        return Code([np.unique(joint[:, i]) for i in range(joint.shape[1])], joint, np.asarray(radius, float))

    @staticmethod
    def of_rows(values: np.ndarray, bound: np.ndarray) -> Code:
        """The code of the rows ``values`` [N, dims], each within ``bound`` [N, dims] of its row: the
        radius is the largest bound, the slack what each distinct row's largest bound leaves of it."""
        values = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
        joint, inverse = np.unique(values, axis=0, return_inverse=True)
        per_row = np.zeros(joint.shape)
        np.maximum.at(per_row, inverse.reshape(-1), bound)
        radius = per_row.max(0)
        return Code([np.unique(joint[:, i]) for i in range(joint.shape[1])], joint, radius,
                    row_slack=radius[None] - per_row)

    def combos(self) -> np.ndarray:
        """Every code vector (the joint set, or the product of the per-dim sets)."""
        if self.joint is not None:
            return self.joint
        return product_rows([v[:, None] for v in self.per_dim])

    def size(self) -> int:
        return len(self.joint) if self.joint is not None else math.prod(len(v) for v in self.per_dim)

    def key(self, read: dict[int, bytes] | None = None) -> tuple:
        """What identifies the value sets (not the radius): classes with equal keys merge.
        ``read``: the joint sets' bytes already read, by array (while those arrays live: one merge
        reads a set many classes share once)."""
        joint = None if self.joint is None else (read or {}).get(id(self.joint))
        if joint is None and self.joint is not None:
            joint = self.joint.tobytes()
            if read is not None:
                read[id(self.joint)] = joint
        rel = None if self.sum_of is None else (self.sum_of[0], self.sum_of[1], self.sum_of[2].tobytes(),
                                                self.sum_of[3].tobytes())
        return (joint, tuple(v.tobytes() for v in self.per_dim), rel)


State = dict[str, Code]


def get_code(st: State, name: str) -> Code:
    """The code of a subspace, of one of its dims (``name[i]``), or of several joined by `` + ``
    (jointly: the product of the parts' joint sets, where small, unless the state keeps their joint
    set under the joined name -- see :func:`put_code`)."""
    if name in st:
        if " + " in name:  # a kept joint set, with its parts' current radii
            return replace(st[name], radius=np.concatenate([st[p].radius for p in name.split(" + ")]))
        return st[name]
    if " + " in name:
        parts = [get_code(st, p) for p in name.split(" + ")]
        joint = None
        joints = [p.joint for p in parts if p.joint is not None]
        if len(joints) == len(parts) and math.prod(p.size() for p in parts) <= JOINT_BUDGET:
            joint = product_rows(joints)
        return Code([v for p in parts for v in p.per_dim], joint, np.concatenate([p.radius for p in parts]))
    base = re.fullmatch(r"(.*)\[(\d+)\]", name)
    if base and base.group(1) in st and int(base.group(2)) < len(st[base.group(1)].per_dim):
        code, i = st[base.group(1)], int(base.group(2))
        return Code([code.per_dim[i]], code.per_dim[i][:, None], code.radius[i : i + 1])
    raise CertificateFailure("obligations", f"name {name!r}, which no obligation tracks")


def put_code(st: State, name: str, code: Code) -> None:
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
        joint = None if code.joint is None else unique_rows(code.joint[:, at : at + k])
        slack = code.row_slack if len(parts) == 1 else None  # one part: its joint rows are the code's (sorted)
        st[part] = Code(code.per_dim[at : at + k], joint, code.radius[at : at + k], row_slack=slack)
        at += k
    if len(parts) > 1 and code.joint is not None:
        st[name] = Code(list(code.per_dim), code.joint, code.radius.copy())


def first_positions(pos_class: np.ndarray, n: int) -> np.ndarray:
    """The first position of each of ``n`` classes (0 for a class no position is in)."""
    first = np.zeros(n, dtype=np.int64)
    seen, where = np.unique(pos_class, return_index=True)
    first[seen] = where
    return first


def _merged_slack(a: Code, b: Code) -> np.ndarray | None:
    """The slack of two classes' codes merged (equal joint sets, so equal rows): the merged radius
    less the larger of the two per-row bounds; none where either keeps none."""
    if a.row_slack is None or b.row_slack is None:
        return None
    r = np.maximum(a.radius, b.radius)
    return r[None] - np.maximum(a.radius[None] - a.row_slack, b.radius[None] - b.row_slack)


def row_radii(codes: list[Code]) -> np.ndarray | None:
    """Per row of ``product_rows([c.combos() for c in codes])``, each dim's radius: a code's per-row
    bound where it keeps a slack, else its radius; None when none keeps one."""
    if all(c.row_slack is None for c in codes):
        return None
    idx = product_rows([np.arange(c.size(), dtype=np.float64)[:, None] for c in codes]).astype(np.int64)
    cols = [np.broadcast_to(c.radius, (len(idx), len(c.radius))) if c.row_slack is None
            else (c.radius[None] - c.row_slack)[idx[:, j]] for j, c in enumerate(codes)]
    return np.concatenate(cols, axis=1)


def merge(states: list[State], pos_class: np.ndarray,
           phase: np.ndarray | None = None) -> tuple[list[State], np.ndarray]:
    """Merge classes whose value sets agree (radius: the larger) -- and, with ``phase``, whose
    positions hold the same values on the positional dims an MLP reads; renumber the positions."""
    index: dict[tuple, int] = {}
    merged: list[State] = []
    new_id = np.zeros(len(states), dtype=np.int64)
    first = first_positions(pos_class, len(states))
    read: dict[int, bytes] = {}
    for c, st in enumerate(states):
        k = (c == 0, 0 if phase is None else int(phase[first[c]]),
             tuple((name, st[name].key(read)) for name in sorted(st)))  # BOS stays apart
        if k in index:
            tgt = merged[index[k]]
            for name in st:
                tgt[name].row_slack = _merged_slack(tgt[name], st[name])
                tgt[name].radius = np.maximum(tgt[name].radius, st[name].radius)
        else:
            index[k] = len(merged)
            merged.append({n: replace(v, per_dim=list(v.per_dim), radius=v.radius.copy()) for n, v in st.items()})
        new_id[c] = index[k]
    return merged, new_id[pos_class]


# --- the model as arrays ----------------------------------------------------------------------


@dataclass
class Model:
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
    """Per position, which values the positional dims an MLP reads hold there (:func:`phases`)."""

    def dims(self, name: str) -> list[int]:
        """Residual dims of a subspace, of one dim of it (``name[i]``), or of several joined by
        `` + `` (in order)."""
        return dims_of(self.subspaces, name)


def dims_of(subspaces: dict[str, list[int]], name: str) -> list[int]:
    """Residual dims of a subspace, of one dim of it (``name[i]``), or of several joined by
    `` + `` (in order), in a layout's ``subspaces`` (name -> dims)."""
    if " + " in name:
        return [d for part in name.split(" + ") for d in dims_of(subspaces, part)]
    if name in subspaces:
        return list(subspaces[name])
    m = re.fullmatch(r"(.*)\[(\d+)\]", name)
    if m and m.group(1) in subspaces and int(m.group(2)) < len(subspaces[m.group(1)]):
        return [subspaces[m.group(1)][int(m.group(2))]]
    raise CertificateFailure("obligations", f"names a subspace {name!r} the model's layout does not have")


def arrays(model: CompiledTransformer) -> Model:
    dtype = model.W_E.dtype
    p = PRECISION[dtype]
    u = 2.0**-p + 2.0**-52  # the model's unit roundoff, plus float64's for the checker's own sums
    T = model.max_len
    with torch.no_grad():
        rows = model.W_E.detach()
        body = rows[0] if rows.shape[0] > 1 else rows[-1]
        fixed = torch.cat([(rows[-1] + model.W_pos[0])[None], body[None] + model.W_pos[1:]]).double().cpu().numpy()
    # fixed wherever a rule reads them: a dim only the last MLP writes (a label readout's index in
    # the bos dim) is fixed for every head and MLP; that MLP's obligation must declare the write
    # (check_io), and the written value is tracked as its code from then on
    dims = sorted(input_independent_dims(model, before_last_mlp=True))
    mask = np.zeros(fixed.shape[1], dtype=bool)
    mask[dims] = True
    fixed[:, ~mask] = 0.0
    layout = model.layout()
    out = Model(model, u, p, T, {k: list(v["dims"]) for k, v in layout["subspaces"].items()}, fixed, set(dims))
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


def embedding_states(m: Model, ob: Obligations) -> tuple[list[State], np.ndarray]:
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


def product_rows(parts: list[np.ndarray]) -> np.ndarray:
    """Every concatenation of one row of each part."""
    out = np.zeros((1, 0))
    for p in parts:
        out = np.concatenate([np.repeat(out, len(p), axis=0), np.tile(p, (len(out), 1))], axis=1)
    return out


def half_gaps(codes: np.ndarray) -> np.ndarray:
    """Per dim, half the smallest gap between distinct codes (inf for a dim with one code)."""
    out = np.full(codes.shape[1], np.inf)
    for i in range(codes.shape[1]):
        v = np.unique(codes[:, i])
        if len(v) > 1:
            out[i] = np.diff(v).min() / 2
    return out
