"""Lookups: a finite function of discrete inputs as an MLP, exact on its table (Lemma 11), for one
code input in one hidden layer (steps or linear pieces), or cut off by halfspaces."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..budget import STEP_TOLERANCE
from ..obligations import Lookup
from ..program import MLP, obligation_name
from ..workspace import Subspace, names
from .compose import capped_onehot_bias, capped_step_units, onehot_bias, step_units


@dataclass(frozen=True)
class CodeInput:
    """An integer code in 0..n_values-1 (noise below STEP_TOLERANCE) in dim ``index`` of ``sub``
    (a one-dim subspace, or one dim of a wider one)."""

    sub: Subspace
    n_values: int
    index: int = 0
    capped: bool = False
    """The code may exceed n_values - 1 and reads as n_values - 1 (:func:`lookup_mlp` decodes it
    with :func:`compose.capped_step_units`: a saturating count whose units are all off past the
    cap, so a large count adds no rounding)."""
    reach: int | None = None
    """The largest code a saturating count may hold (e.g. max_len), read as n_values - 1 from there
    on (the step units of thresholds 1..n_values-1 are all passed): the obligation lists every code
    up to it (:func:`lookup_obligation`)."""


@dataclass(frozen=True)
class OneHotInput:
    """A subspace holding an exact one-hot (e.g. the current token); all zero matches nothing."""

    sub: Subspace


def input_name(inp: "CodeInput | OneHotInput") -> str:
    """How an obligation names the dims an input reads: one dim of a code (``sub[i]`` when the
    subspace is wider), the whole subspace of a one-hot."""
    if isinstance(inp, CodeInput) and len(inp.sub) > 1:
        return inp.sub.labels[inp.index] if not inp.sub.parts else f"{inp.sub.name}[{inp.index}]"
    return obligation_name(inp.sub)


def lookup_obligation(name: str, inputs: list, out: Subspace, table: dict[tuple[int, ...], np.ndarray],
                      total: bool = False) -> Lookup | None:
    """The :class:`~constructions.obligations.Lookup` a lookup gadget runs: its table over the
    inputs' codes, keys as the codes, a saturating input's last code as every code up to its
    ``reach`` (None where a key is shorter than the inputs, a pattern the obligation does not
    state, or an input is a one-hot: the construction declares those).  ``total``: every other
    key writes 0 (the gadget's units match none there), the obligation's default, and the rows
    of 0 are left to it."""
    if any(isinstance(i, OneHotInput) for i in inputs) or any(len(k) != len(inputs) for k in table):
        return None
    rows: dict[tuple[int, ...], np.ndarray] = {}
    for key, row in table.items():
        row = np.asarray(row, dtype=np.float64)
        if total and not np.any(row):
            continue
        spans = [range(v, i.reach + 1) if i.reach is not None and v == i.n_values - 1 else (v,)
                 for i, v in zip(inputs, (int(v) for v in key))]
        rows.update((k, row) for k in itertools.product(*spans))
    return Lookup(name, tuple(input_name(i) for i in inputs), obligation_name(out), rows,
                  np.zeros(len(out)) if total else None)


def lookup_mlp(name: str, inputs: list, out: Subspace,
               table: dict[tuple[int, ...], np.ndarray], total: bool = False) -> MLP:
    """A finite function of several discrete inputs (Lemma 11), exact on its table.

    Hidden 1: the one-hot of every input (step units for codes, a copy for one-hots).
    Hidden 2: one unit per table key, relu(2 sum_i onehot_i[key_i] - (2m - 1)) = 1[input == key]:
    1 at the key, at most -1 elsewhere, so no key unit sits at its kink (a noisy input that differs
    from a key in one code leaves that unit surely off, not at 0 where its rounding could turn it on).
    Output: sum over keys of unit * table[key], a vector over ``out`` (len(out) entries).
    Inputs matching no key (e.g. BOS, whose token one-hot is zero) produce no output.
    A key shorter than the inputs matches on its first len(key) inputs alone (its unit has
    len(key) in place of m), and the output is then the sum of the rows of every matching key
    (a suffix pattern of a window; with full keys at most one matches).
    Declares the inputs that have units (a code of one value has none) and the parts
    of ``out`` some row writes; its obligation (:func:`lookup_obligation`) is the table, and with
    ``total`` every key outside it writes 0 as well.
    """
    used = [i.sub for i in inputs if (i.n_values > 1 if isinstance(i, CodeInput) else len(i.sub))]
    reads = names(*used)
    row = _local_rows(used)  # local row of each (leaf name, index)
    cols: list[tuple[int, np.ndarray]] = []  # per input: first unit, [its units, n_values] giving its one-hot
    consts: list[np.ndarray] = []
    W1_parts, b1_parts = [], []
    offset = 0
    for inp in inputs:
        if isinstance(inp, CodeInput):
            w, b, to_onehot = (capped_step_units if inp.capped else step_units)(inp.n_values)
            W = np.zeros((len(row), len(w)))
            if len(w):  # read (in ``used``)
                W[_local_dims(row, inp.sub)[inp.index]] = w
            W1_parts.append(W)
            b1_parts.append(b)
            cols.append((offset, to_onehot))
            consts.append((capped_onehot_bias if inp.capped else onehot_bias)(inp.n_values))
            offset += len(w)
        else:
            k = len(inp.sub)
            W = np.zeros((len(row), k))
            W[_local_dims(row, inp.sub), np.arange(k)] = 1.0
            W1_parts.append(W)
            b1_parts.append(np.zeros(k))
            cols.append((offset, np.eye(k)))
            consts.append(np.zeros(k))
            offset += k
    W1 = np.concatenate(W1_parts, axis=1) if W1_parts else np.zeros((len(row), 0))
    b1 = np.concatenate(b1_parts) if b1_parts else np.zeros(0)
    keys = sorted(table)
    m = len(inputs)
    W2 = np.zeros((offset, len(keys)))
    b2 = np.array([-(len(key) - 1.0) for key in keys])
    writes, kept = _written(out, [table[k] for k in keys])
    W3 = np.zeros((len(keys), len(kept)))  # columns: the written parts of ``out``
    for u, key in enumerate(keys):
        for i, v in enumerate(key):
            off, onehot = cols[i]
            W2[off : off + onehot.shape[0], u] += onehot[:, v]
            b2[u] += consts[i][v]
        W3[u] = table[key][kept]
    W2, b2 = 2.0 * W2, 2.0 * b2 - 1.0  # 1 at the key, <= -1 elsewhere (integers: exact in float)
    return MLP(name, [W1, W2, W3], [b1, b2, np.zeros(len(kept))],
               {"kind": "lookup", "keys": len(keys), "inputs": m, "input_tolerance": STEP_TOLERANCE},
               reads=reads, writes=writes, obligation=lookup_obligation(name, inputs, out, table, total))


def code_function_mlp(name: str, inp: CodeInput, out: Subspace, values: np.ndarray) -> MLP:
    """A function of one integer code in one hidden layer (Lemma 11 for a single input), exact
    for x within STEP_TOLERANCE of 0..n-1: ``values[x]`` (a vector over ``out``) is
    values[0] + sum over c of (values[c] - values[c-1]) 1[x >= c], each threshold a pair of
    :func:`step_units`, and only the thresholds where the value changes get units."""
    values = np.asarray(values, dtype=np.float64)
    W1, b1, W2, b2, writes, jumps = _threshold_layers([inp], [1.0], values, out)
    return MLP(name, [W1, W2], [b1, b2],
               {"kind": "code function", "thresholds": jumps, "input_tolerance": STEP_TOLERANCE},
               reads=inp.sub.names, writes=writes,
               obligation=lookup_obligation(name, [inp], out, {(x,): values[x] for x in range(len(values))}))


def flat_lookup_mlp(name: str, inputs: list[CodeInput], out: Subspace,
                    table: dict[tuple[int, ...], np.ndarray], every_threshold: bool = False,
                    total: bool = False) -> MLP:
    """:func:`lookup_mlp`'s finite function in *one* hidden layer (Lemma 11 through one code).

    The inputs' codes c_i in 0..n_i-1 are one integer K = sum_i w_i c_i with w_i = n_0 ... n_{i-1}
    (mixed radix: distinct keys, distinct K in 0..N-1, N = prod n_i), and :func:`code_function_mlp`'s
    thresholds 1[K >= c] read it: ``values[K]`` is the table's row for K's key, 0 for a key not
    in the table (as :func:`lookup_mlp`, whose AND units then all stay 0).  An error e_i on c_i
    moves K by sum_i w_i e_i, so ``input_tolerance`` is STEP_TOLERANCE / sum_i w_i: the heads that
    fetch the codes must copy within it.  Units: two per value change along K (at most 2(N - 1)),
    against :func:`lookup_mlp`'s one-hots and one AND unit per key in two hidden layers;
    ``every_threshold``: two per threshold c = 1..N-1 whether the value changes or not (a shape
    that does not depend on the table, for constructions that swap tables in place); ``total`` as
    :func:`lookup_mlp`'s.  A code past its last value would move K into another key's: no input
    may be a saturating count (``reach``)."""
    if any(i.reach is not None for i in inputs):
        raise ValueError(f"{name}: a flat lookup reads no saturating count (its codes are one mixed-radix K)")
    radix = [i.n_values for i in inputs]
    scales = [float(np.prod(radix[:i])) for i in range(len(inputs))]
    n = int(np.prod(radix))
    digits = np.array(list(np.ndindex(*radix[::-1])))[:, ::-1] if inputs else np.zeros((1, 0), dtype=np.int64)
    zero = np.zeros(len(out))
    values = np.array([table.get(tuple(int(v) for v in key), zero) for key in digits]).reshape(n, len(out))
    used = [(i, w) for i, w in zip(inputs, scales) if i.n_values > 1]
    W1, b1, W2, b2, writes, jumps = _threshold_layers([i for i, _ in used], [w for _, w in used], values, out,
                                                      every_threshold)
    return MLP(name, [W1, W2], [b1, b2],
               {"kind": "flat lookup", "keys": len(table), "codes": n, "thresholds": jumps,
                "input_tolerance": flat_lookup_tolerance(radix)},
               reads=names(*(i.sub for i, _ in used)), writes=writes,
               obligation=lookup_obligation(name, inputs, out, table, total))


def flat_lookup_tolerance(n_values: list[int]) -> float:
    """The code error within which :func:`flat_lookup_mlp` over inputs of ``n_values`` codes is
    exact: STEP_TOLERANCE / sum_i w_i (its ``input_tolerance``, before building it)."""
    return STEP_TOLERANCE / max(sum(float(np.prod(n_values[:i])) for i in range(len(n_values))), 1.0)


def flat_lookup_margin(n_values: list[int], eps: float) -> float:
    """How far the rounding of a dtype with machine epsilon ``eps`` stays inside the step range of
    :func:`flat_lookup_mlp` over inputs of ``n_values`` codes (> 1 is safe; a worst-case bound):
    K's pre-activation sums len + 1 terms below N = prod n_i in magnitude, each rounded with
    relative error up to eps, against the code tolerance STEP_TOLERANCE."""
    return STEP_TOLERANCE / (eps * (len(n_values) + 1) * float(np.prod(n_values)))


def _threshold_layers(inputs: list[CodeInput], scales: list[float], values: np.ndarray, out: Subspace,
                      every_threshold: bool = False):
    """The hidden layer of steps 1[K >= c] (two :func:`step_units` each, only where ``values``
    changes unless ``every_threshold``) over K = sum_i scales[i] * code_i, and the output layer
    giving ``values[K]`` (a row per K, a column per dim of ``out``): (W1 [local rows, units], b1,
    W2, b2, writes, thresholds)."""
    w, b, _ = step_units(len(values))
    jumps = [c for c in range(1, len(values)) if every_threshold or np.any(values[c] != values[c - 1])]
    units = [2 * (c - 1) + i for c in jumps for i in (0, 1)]
    row = _local_rows([i.sub for i in inputs])
    W1 = np.zeros((len(row), len(units)))
    for inp, scale in zip(inputs, scales):
        rows = [row[(leaf.name, j)] for leaf in inp.sub.leaves for j in range(len(leaf))]
        W1[rows[inp.index]] += scale * w[units]
    writes, kept = _written(out, list(values))
    W2 = np.zeros((len(units), len(kept)))
    for k, c in enumerate(jumps):  # 1[K >= c] = relu(unit 2k) - relu(unit 2k + 1)
        W2[2 * k] = values[c][kept] - values[c - 1][kept]
        W2[2 * k + 1] = -W2[2 * k]
    return W1, b[units], W2, values[0][kept], writes, len(jumps)


def separation(inside: np.ndarray, outside: np.ndarray, max_updates: int = 10_000, max_pairs: int = 250_000):
    """An integer direction w with min over ``inside`` of <w, c> above max over ``outside``
    (rows are integer codes), as (w, min inside, max outside), the one of smallest
    |w|_1 / gap among: every w in {-1, 0, 1}^d (d <= 6), the centroid direction
    n c - sum(all) for a single inside point, and a perceptron's over the differences
    c_in - c_out (exact integer updates, at most ``max_updates``, over at most ``max_pairs``
    differences; it finds one whenever the sets are strictly separable by a hyperplane,
    given enough updates).  None when none of them separates."""
    d = inside.shape[1]
    cands = [np.array(w, dtype=np.int64) - 1 for w in np.ndindex(*([3] * d))] if d <= 6 else []
    if len(inside) == 1:
        allc = np.concatenate([inside, outside])
        cands.append(len(allc) * inside[0] - allc.sum(0))
    if len(outside) and len(inside) * len(outside) <= max_pairs:
        D = (inside[:, None, :] - outside[None, :, :]).reshape(-1, d).astype(np.int64)
        w = np.zeros(d, dtype=np.int64)
        for _ in range(max_updates):  # perceptron: <w, c_in - c_out> > 0 for every pair
            bad = np.flatnonzero(D @ w <= 0)
            if not len(bad):
                cands.append(w)
                break
            w = w + D[bad[0]]
    W = np.array([c for c in cands if np.any(c)], dtype=np.int64).reshape(-1, d)
    lo = (inside @ W.T).min(0)
    hi = (outside @ W.T).max(0) if len(outside) else lo - 1
    ok = np.flatnonzero(lo > hi)
    if not len(ok):
        return None
    i = ok[np.argmin(np.abs(W[ok]).sum(1) / (lo[ok] - hi[ok]))]  # the first of the most tolerant
    return W[i].astype(np.float64), int(lo[i]), int(hi[i])


def interpolated_code_function_mlp(name: str, inp: CodeInput, out: Subspace, values: np.ndarray) -> MLP:
    """A function of one integer code in one hidden layer, linear between the codes: for x in
    [-1/2, n-1] (exact at x = 0..n-1), ``values[x]`` (a vector over ``out``) is

        values[0] + s_0 (relu(x + 1/2) - 1/2) + sum over c = 1..n-2 of (s_c - s_(c-1)) relu(x - c),

    with s_c = values[c+1] - values[c] the slope after code c; a unit only where the slope
    changes (and for s_0 when it is not 0), so at most as many units as
    :func:`code_function_mlp`'s two per value change, half as many where the value changes at
    neighbouring codes (0, 1, 0: 2 units, not 4).  Not flat near the codes: a code error e moves
    the output by at most L e (L the steepest |s_c|), so ``input_tolerance`` is
    STEP_TOLERANCE / L, within which the output stays within STEP_TOLERANCE of the value."""
    values = np.asarray(values, dtype=np.float64)
    slopes = np.diff(values, axis=0)  # [n-1, dims]
    units: list[tuple[float, np.ndarray]] = []  # (bias of relu(x + bias), output weights)
    if len(slopes) and np.any(slopes[0]):
        units.append((0.5, slopes[0]))
    for c in range(1, len(slopes)):
        if np.any(slopes[c] != slopes[c - 1]):
            units.append((-float(c), slopes[c] - slopes[c - 1]))
    row = _local_rows([inp.sub])
    rows = [row[(leaf.name, j)] for leaf in inp.sub.leaves for j in range(len(leaf))]
    writes, kept = _written(out, list(values))
    W1 = np.zeros((len(row), len(units)))
    W1[rows[inp.index]] = 1.0
    W2 = np.array([w[kept] for _, w in units]).reshape(len(units), len(kept))
    b2 = values[0][kept] - (0.5 * slopes[0][kept] if len(slopes) else 0.0)  # relu(x + 1/2) - 1/2 = x
    steepest = float(np.abs(slopes).max()) if slopes.size else 0.0
    return MLP(name, [W1, W2], [np.array([b for b, _ in units]), b2],
               {"kind": "interpolated code function", "units": len(units),
                "input_tolerance": STEP_TOLERANCE / max(steepest, 1.0)},
               reads=inp.sub.names, writes=writes)


def halfspace_lookup_mlp(name: str, inputs: list[CodeInput], out: Subspace, index: dict[tuple[int, ...], int],
                         domain: np.ndarray) -> MLP | None:
    """A lookup in one hidden layer: the integer ``index`` of each code in ``domain`` (rows:
    the codes that occur; a code not in ``index`` has index 0) into the one-dim ``out``, when
    halfspaces cut the keys off.  For each index value j >= 1, with K_j its codes:

    * a *step* 1[<w, x> >= lo] (two :func:`step_units`) when one hyperplane puts K_j above every
      other code of the domain (<w, c> <= lo - 1 there): exact for x within
      STEP_TOLERANCE / |w|_1 of the codes;
    * else a *cap* per code p of K_j, one unit relu((<w, x> - hi) / (<w, p> - hi)) that is
      1 at p and <= 0 at every other code (p a vertex of the domain's hull): off by at most
      |w|_1 e / (<w, p> - hi) for a code error e.

    The output is sum_j j (its steps or caps), exact at exact codes.  ``input_tolerance`` is the
    code error within which the output stays within STEP_TOLERANCE of the index.  None when some
    K_j is cut off neither way (then :func:`lookup_mlp` in two hidden layers)."""
    domain = np.asarray(domain, dtype=np.int64)
    units: list[tuple[np.ndarray, float, float]] = []  # (w over the inputs, bias, output weight)
    exact_slope, cap_slope = 0.0, 0.0
    for j in sorted(set(index.values()) - {0}):
        inside = np.array([k for k, v in index.items() if v == j], dtype=np.int64)
        key = {tuple(c) for c in inside.tolist()}
        outside = np.array([c for c in domain.tolist() if tuple(c) not in key], dtype=np.int64).reshape(-1, len(inputs))
        step = separation(inside, outside) if len(inside) > 1 else None
        if step is not None:
            w, lo, _ = step
            sw, sb, _ = step_units(2)  # 1[z >= 1], shifted to 1[z >= lo]
            units += [(w * sw[i], sb[i] - sw[i] * (lo - 1), j * (1.0 if i == 0 else -1.0)) for i in range(2)]
            exact_slope = max(exact_slope, float(np.abs(w).sum()))
            continue
        for p in inside:
            cap = separation(p[None], np.array([c for c in domain.tolist() if tuple(c) != tuple(p)],
                                                dtype=np.int64).reshape(-1, len(inputs)))
            if cap is None:
                return None
            w, top, hi = cap
            units.append((w / (top - hi), -hi / (top - hi), float(j)))
            cap_slope += j * float(np.abs(w).sum()) / (top - hi)
    used = [i.sub for i in inputs]
    row = _local_rows(used)
    W1 = np.zeros((len(row), len(units)))
    for i, inp in enumerate(inputs):
        r = [row[(leaf.name, k)] for leaf in inp.sub.leaves for k in range(len(leaf))][inp.index]
        W1[r] += [u[0][i] for u in units]
    tol = min(STEP_TOLERANCE / exact_slope if exact_slope else math.inf,
              STEP_TOLERANCE / cap_slope if cap_slope else math.inf)
    return MLP(name, [W1, np.array([[u[2]] for u in units]).reshape(len(units), 1)],
               [np.array([u[1] for u in units]), np.zeros(1)],
               {"kind": "halfspace lookup", "units": len(units), "input_tolerance": tol},
               reads=names(*used), writes=out.names)


def _local_rows(subspaces: list[Subspace]) -> dict[tuple[str, int], int]:
    """Local row of dim j of each allocated subspace behind ``subspaces`` (each leaf once, in order)."""
    out: dict[tuple[str, int], int] = {}
    for leaf in (leaf for s in subspaces for leaf in s.leaves):
        for j in range(len(leaf)):
            out.setdefault((leaf.name, j), len(out))
    return out


def _local_dims(row: dict[tuple[str, int], int], sub: Subspace) -> list[int]:
    """The local rows (:func:`_local_rows`) of ``sub``'s dims, in order."""
    return [row[(leaf.name, j)] for leaf in sub.leaves for j in range(len(leaf))]


def _written(out: Subspace, rows: list[np.ndarray]) -> tuple[tuple[str, ...], list[int]]:
    """The parts of ``out`` that some row of a table writes (nonzero), and the positions
    of their dims within ``out``."""
    if not rows:
        return (), []
    hit = np.any(np.stack(rows) != 0, axis=0)
    written: list[str] = []
    kept: list[int] = []
    at = 0
    for leaf in out.leaves:
        if hit[at : at + len(leaf)].any():
            written.append(leaf.name)
            kept.extend(range(at, at + len(leaf)))
        at += len(leaf)
    return tuple(written), kept
