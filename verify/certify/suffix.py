"""MLPs that run a lookup with suffix keys (:class:`~constructions.obligations.SuffixLookup`),
checked unit by unit: never on the product of the codes they read.

**Setting** (read from the weights; NotCertifiable where it fails).  The MLP has two hidden
layers and each first-layer unit reads at most one of the input dims (and constant dims).  So a
second-layer unit's pre-activation is a constant plus a sum over the inputs i of a term that
depends on input i's code alone: each term is evaluated on each of that input's codes (its set in
the class of positions, with its error radius) with affine error forms through both layers, which
keep the cancellation of a step unit's pair; the dot product's own rounding is added once,
gamma_(n+1) times its terms' magnitudes.

**Lemma (key units).**  Let unit u read the inputs S_u, and for i in S_u let b_i be the code whose
term's upper bound is the largest.  If the pre-activation's upper bound is <= 0 whenever some
i in S_u holds a code other than b_i (the largest such bound is the sum of the larger of each
input's two bounds, the matching and the other codes', less the smallest difference where all
prefer the matching one -- no enumeration of the 2^|S_u| patterns), then u is exactly 0 (ReLU)
off its *key* {i: b_i}, and within [max(lo, 0), hi] on it.  Its key must fix a leading run of
the inputs (an input it skips holds one code in the class): the keys of the units and of the
obligation are then prefixes of the combinations they fire on.

**Lemma (the trie).**  The network's output on a combination x is b_3 plus the sum of W_3[u]
times the activations of the units whose keys x starts with; the obligation's is the sum of the
rows of its keys x starts with.  Both sets are the keys on the path to x's deepest key node v,
so every x with the same v gets the same declared code and the same bound: one case per key
node v that is some x's deepest -- one whose completions do not all pass a deeper key node
(:func:`_escapes`) -- and the root when some x starts no key.  The cases are the checked rows
(the error bound against half the gap between declared codes, :func:`.lookups.settled`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from constructions.obligations import Joint, SuffixLookup

from .affine import affine
from .lookups import MLPWeights, check_io, fixed_by_class, jointly, mlp_weights, put_written, settled
from .state import CertificateFailure, Model, NotCertifiable, State, gamma, get_code

Key = tuple[int, ...]


def _inputs(m: Model, W1: np.ndarray, reads: list[int], where: str) -> list[np.ndarray]:
    """Per input dim, the first-layer units that read it, then the units that read none (the
    setting: NotCertifiable for a unit reading two)."""
    hit = W1[reads] != 0  # [inputs, units]
    several = np.flatnonzero(hit.sum(0) > 1)
    if len(several):
        raise NotCertifiable(f"{where}: first-layer unit {int(several[0])} reads several of the inputs (a suffix "
                             f"lookup's units read one each)")
    return [np.flatnonzero(row) for row in hit] + [np.flatnonzero(~hit.any(0))]


def _terms(m: Model, W: list[np.ndarray], b: list[np.ndarray], units: np.ndarray, rows: list[int],
           X: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One input's term in every second-layer pre-activation, per code (rows of ``X``: the code
    and the constants): centre, error (affine forms through both layers) and magnitude (the sum
    of |weight| |activation| the dot product's rounding scales with)."""
    W1, W2 = W[0][rows][:, units], W[1][units]
    z, e = affine(X, r, [W1, W2], [b[0][units], np.zeros(W2.shape[1])], m.u, m.p)
    h, eh = affine(X, r, [W1, np.eye(len(units))], [b[0][units], np.zeros(len(units))], m.u, m.p)
    return z, e, (np.abs(h) + eh) @ np.abs(W2)


def _keys(m: Model, W: list[np.ndarray], b: list[np.ndarray], codes: list[np.ndarray], radii: np.ndarray,
          reads: list[int], const: list[int], const_vals: np.ndarray, where: str, names: list[str]) -> tuple[
              list[Key | None], np.ndarray, np.ndarray]:
    """The key units lemma: each second-layer unit's key (None: never on) and its activation's
    bounds [lo, hi] on it."""
    groups = _inputs(m, W[0], reads, where)
    U = W[1].shape[1]
    n = len(codes)
    g = gamma(np.count_nonzero(W[1], axis=0) + 1, m.u)
    base_z, base_e, base_mag = _terms(m, W, b, groups[-1], const, const_vals[None], np.zeros(len(const)))
    lo = b[1] + base_z[0] - base_e[0]
    hi = b[1] + base_z[0] + base_e[0]
    mag = np.abs(b[1]) + base_mag[0]
    best = np.zeros((n, U), dtype=np.int64)
    other_hi = np.full((n, U), -np.inf)  # per input: the largest bound off the best code, rounding included
    match = np.zeros((n, 3, U))  # per input: lo, hi, magnitude at the best code
    support = np.zeros((n, U), dtype=bool)
    for i, (units, vals) in enumerate(zip(groups, codes)):
        X = np.concatenate([vals[:, None], np.tile(const_vals, (len(vals), 1))], axis=1)
        z, e, mg = _terms(m, W, b, units, [reads[i], *const], X, np.concatenate([[radii[i]], np.zeros(len(const))]))
        support[i] = np.any(W[1][units] != 0, axis=0)
        top = z + e + g * mg
        best[i] = np.argmax(top, axis=0)
        at = best[i], np.arange(U)
        match[i] = (z - e)[at], (z + e)[at], mg[at]
        if len(vals) > 1:
            masked = top.copy()
            masked[at] = -np.inf
            other_hi[i] = masked.max(0)
    other_hi[~support] = -np.inf  # an input a unit does not read is no mismatch for it
    up = match[:, 1] + g * match[:, 2]  # per input: the matching code's bound, its rounding included
    mag = mag + match[:, 2].sum(0)
    lo, hi = lo + match[:, 0].sum(0) - g * mag, hi + match[:, 1].sum(0) + g * mag
    off = hi - up.sum(0) + np.maximum(up, other_hi).sum(0)  # the largest bound over patterns, the key's included
    prefer = np.where(np.isfinite(other_hi), up - other_hi, np.inf)
    off = np.where(np.all(prefer >= 0, axis=0), off - prefer.min(0), off)  # the key's pattern is not off its key
    keys: list[Key | None] = []
    for u in range(U):
        if hi[u] <= 0:
            keys.append(None)  # never on: exactly 0
            continue
        if off[u] > 0:
            i = int(np.argmax(np.where(support[:, u], other_hi[:, u] - match[:, 1, u], -np.inf)))
            raise CertificateFailure(where, f"second-layer unit {u} may be on off its key (upper bound "
                                     f"{off[u]:.3g} > 0 where {names[i]} holds a code other than "
                                     f"{int(codes[i][best[i, u]])})")
        keys.append(_leading(u, support[:, u], best[:, u], codes, names, where))
    return keys, np.maximum(lo, 0.0), hi


def _leading(u: int, support: np.ndarray, best: np.ndarray, codes: list[np.ndarray], names: list[str],
             where: str) -> Key:
    """Unit u's key as the leading codes it fixes (an input it skips must hold one code)."""
    depth = int(np.flatnonzero(support).max()) + 1 if support.any() else 0
    skipped = [i for i in range(depth) if not support[i] and len(codes[i]) > 1]
    if skipped:
        raise NotCertifiable(f"{where}: second-layer unit {u} reads no term of {names[skipped[0]]} but of a later "
                             f"input (its key does not fix leading codes)")
    return tuple(int(codes[i][best[i] if support[i] else 0]) for i in range(depth))


def _escapes(node: Key, trie: set[Key], keyed: set[Key], codes: list[np.ndarray], memo: dict[Key, bool]) -> bool:
    """Whether some completion of ``node`` passes no key node deeper than it (the trie lemma)."""
    if node in memo:
        return memo[node]
    out = len(node) == len(codes)
    if not out:
        for c in codes[len(node)]:
            child = (*node, int(c))
            if child not in trie or (child not in keyed and _escapes(child, trie, keyed, codes, memo)):
                out = True
                break
    memo[node] = out
    return out


def _cases(m: Model, ob: SuffixLookup, W3: np.ndarray, b3: np.ndarray, keys: list[Key | None], lo: np.ndarray,
           hi: np.ndarray, codes: list[np.ndarray]) -> tuple[list[Key], np.ndarray, np.ndarray, np.ndarray]:
    """The trie lemma's cases: per deepest key node, the declared code, the network's centre and
    its error bound (activation intervals times W_3, and the output's rounding)."""
    sets = [set(int(v) for v in c) for c in codes]
    declared = {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in ob.rows.items()
                if len(k) <= len(codes) and all(x in s for x, s in zip(k, sets))}
    width = W3.shape[1]
    per: dict[Key, list[np.ndarray]] = {}
    for u, key in enumerate(keys):
        if key is None:
            continue
        a = np.array([lo[u], hi[u]])[:, None] * W3[u][None]
        acc = per.setdefault(key, [np.zeros(width), np.zeros(width), np.zeros(width), np.zeros(1)])
        acc[0] += a.min(0)
        acc[1] += a.max(0)
        acc[2] += hi[u] * np.abs(W3[u])
        acc[3] += 1
    keyed = set(per) | set(declared)
    trie = {k[:j] for k in keyed for j in range(len(k) + 1)}
    memo: dict[Key, bool] = {}
    nodes = [k for k in sorted(keyed) if _escapes(k, trie, keyed, codes, memo)]
    if () not in keyed and _escapes((), trie, keyed, codes, memo):
        nodes.insert(0, ())
    want, z, err = (np.zeros((len(nodes), width)) for _ in range(3))
    for row, v in enumerate(nodes):
        acc = [np.zeros(width), np.zeros(width), np.abs(b3).copy(), np.zeros(1)]
        for j in range(len(v) + 1):
            for x, y in zip(acc, per.get(v[:j], ())):
                x += y
            want[row] += declared.get(v[:j], 0.0)
        z[row] = b3 + (acc[0] + acc[1]) / 2
        err[row] = (acc[1] - acc[0]) / 2 + gamma(acc[3][0] + 1, m.u) * acc[2]
    return nodes, want, z, err


def without_carries(weights: list[np.ndarray], biases: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The network without its hidden identity layers (an identity matrix, zero bias: what a side-by-side
    MLP pads a shallower part with, constructions.program.Beside).  Exact: such a layer reads a
    hidden layer, already >= 0, and each output is h_k * 1 plus zeros, so relu returns h_k bit for bit."""
    keep = [i for i in range(len(weights)) if not (0 < i < len(weights) - 1 and weights[i].shape[0] == weights[i].shape[1]
                                                   and np.array_equal(weights[i], np.eye(len(weights[i])))
                                                   and not np.any(biases[i]))]
    return [weights[i] for i in keep], [biases[i] for i in keep]


def suffix_lookup_mlp(m: Model, l: int, ob: SuffixLookup, states: list[State], pos_class: np.ndarray,
                      report: dict[str, Any], joint: tuple[Joint, ...] = (),
                      written: set[str] | frozenset[str] = frozenset(), mlp: MLPWeights | None = None) -> list[State]:
    """A :class:`SuffixLookup` MLP (module docstring), per class of positions: its key units, then
    one case per deepest key node against the declared rows -- after BOS only the declared codes
    the program's claims allow (``joint`` on the subspaces ``written`` by now)."""
    where = f"layer {l + 1} MLP {ob.mlp}"
    weights, biases = without_carries(*(mlp or mlp_weights(m, l, ob.mlp)))
    if len(weights) != 3:
        raise NotCertifiable(f"{where}: a suffix lookup in {len(weights) - 1} hidden layers (the rule reads two)")
    reads = [d for name in ob.reads for d in m.dims(name)]
    out = m.dims(ob.out)
    if any(d in m.fixed_dims for d in reads):
        raise NotCertifiable(f"{where}: a suffix lookup reading positional dims")
    const_set, class_fixed = fixed_by_class(m, pos_class, len(states))
    const = sorted(const_set - set(reads))
    check_io(m, l, ob.mlp, weights, biases, reads, out, set(const))
    names = [f"{name}[{i}]" if len(m.dims(name)) > 1 else name for name in ob.reads for i in range(len(m.dims(name)))]
    worst, new_states, n_keys = 0.0, [], 0
    for c, st in enumerate(states):
        old = get_code(st, ob.out)
        if old.size() != 1:
            raise CertificateFailure(where, f"{ob.out} may hold several codes before the MLP writes it")
        sets = [get_code(st, name) for name in ob.reads]
        codes = [np.unique(s.combos()[:, j]) for s in sets for j in range(len(s.radius))]
        if any(np.any(np.round(v) != v) for v in codes):
            raise CertificateFailure(where, "reads a code that is not an integer")
        radii = np.concatenate([s.radius for s in sets])
        keys, lo, hi = _keys(m, weights, biases, codes, radii, reads, const, class_fixed[c][const], where, names)
        nodes, want, z, err = _cases(m, ob, weights[2][:, out], biases[2][out], keys, lo, hi, codes)
        keep = np.ones(len(nodes), dtype=bool) if c == 0 else jointly(m, joint, {ob.out: want}, written, len(nodes))
        nodes = [v for v, k in zip(nodes, keep) if k]
        want, z, err = want[keep], z[keep], err[keep]
        bound = settled(m, st, where, [ob.out], set(), out, want, z, err, lambda i: (
            f"the code combinations of {', '.join(names)} whose longest key is {nodes[i]}"))
        worst = max(worst, float(bound.max(initial=0.0)))
        n_keys = max(n_keys, sum(k is not None for k in keys))
        st = dict(st)
        put_written(m, st, [ob.out], set(), [old.combos()[0]], want, bound)
        new_states.append(st)
    report["mlp"] = {"name": ob.mlp, "kind": "suffix lookup", "key units": n_keys, "max_error": worst}
    return new_states
