"""MLPs side by side (a product's factors, Lemma 17): each part's own sub-network (the parts are
checked by their own rules, :mod:`.checkers`), and the scan's composition MLP (Theorem 10:
f(g(q)) checked per output point, m^4 small evaluations)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from constructions.obligations import Beside, Compose, Kind, Lookup, Steps

from .state import (COMBINATION_BUDGET, CertificateFailure, Code, JOINT_BUDGET, NotCertifiable, State, Model, get_code,
                    half_gaps, product_rows, put_code, gamma, quantum, snaps)
from .lookups import MLPWeights, Partition, affine_rows, check_io, fixed_by_class, mlp_weights, run_declared


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


def _part_io(m: Model, part: Kind) -> tuple[set[int], set[int]]:
    """The residual dims one part of a :class:`Beside` MLP reads (and writes) and writes."""
    writes = {d for n in part.names_written() for d in m.dims(n)}
    return writes | {d for n in part.names_read() for d in m.dims(n)}, writes


def beside_parts(m: Model, l: int, ob: Beside, weights: list[np.ndarray],
                  biases: list[np.ndarray]) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """Each part's own sub-network of a :class:`Beside` MLP: hidden units joined by a weight, or
    to a non-fixed dim a part reads or writes, belong together, and every unit that reaches a
    part's dims must belong to that part alone (CertificateFailure otherwise)."""
    where = f"layer {l + 1} MLP {ob.mlp}"
    sizes = [W.shape[1] for W in weights[:-1]]
    base = np.cumsum([0] + sizes)
    d = weights[0].shape[0]
    sets = Partition(base[-1] + d)  # hidden units, then residual dims
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
    roots = [{find(int(base[-1] + x)) for x in dims if x not in m.fixed_dims} for dims, _ in io]  # BOS's flag: shared
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


def _distinguishable(codes: np.ndarray, radius: np.ndarray, where: str) -> None:
    """The radius must stay below half the smallest gap between distinct codes of each dim."""
    gap = half_gaps(codes)
    bad = np.nonzero(radius >= gap)[0]
    if len(bad):
        i = bad[0]
        raise CertificateFailure(where, f"output dim {i} may be off by {radius[i]:.3g}, at least half the gap "
                                 f"{2 * gap[i]:.3g} between its codes")


def compose_mlp(m: Model, l: int, ob: Compose, states: list[State], pos_class: np.ndarray, closure: np.ndarray | None,
             report: dict[str, Any], mlp: MLPWeights | None = None) -> list[State]:
    """The composition MLP, checked per output point by separable bounds (module docstring)."""
    weights, biases = _unpadded(*(mlp or mlp_weights(m, l, ob.mlp)))
    if len(weights) != 2:
        raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}", "a composition MLP has one hidden layer")
    W1, W2 = weights
    b1, b2 = biases
    F, G = m.dims(ob.maps), m.dims(ob.fetched)
    if len(F) != len(G):
        raise CertificateFailure(f"layer {l + 1} MLP {ob.mlp}", "maps and fetched maps differ in width")
    into_maps = ob.into == ob.maps
    writes = F + G if into_maps else G
    const, class_fixed = fixed_by_class(m, pos_class, len(states))
    check_io(m, l, ob.mlp, weights, biases, F + G, writes, const)
    n = len(F)
    worst = 0.0
    new_states = []
    cache: dict[tuple, tuple[float, np.ndarray]] = {}
    structs: dict[tuple, tuple] = {}
    joints: dict[tuple[bytes, bytes], np.ndarray] = {}
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
            joint = _composed_joint(st[ob.maps], st[ob.fetched], closure, joints) if name == ob.into else None
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


def _composed_joint(cF: Code, cG: Code, closure: np.ndarray | None,
                    cache: dict[tuple[bytes, bytes], np.ndarray] | None = None) -> np.ndarray | None:
    """The joint set of f o g: every pair when few, else the transition semigroup (a superset).
    Classes that hold the same maps share one result (``cache``); the rows are deduplicated as
    bytes (points fit 16 bits), the same set as sorting them as numbers."""
    if cF.joint is None or cG.joint is None or len(cF.joint) * len(cG.joint) > JOINT_BUDGET:
        return closure
    key = (cF.joint.tobytes(), cG.joint.tobytes())
    if cache is not None and key in cache:
        return cache[key]
    f = cF.joint.astype(np.uint16)
    g = cG.joint.astype(np.int64)
    comp = np.ascontiguousarray(f[np.arange(len(f))[:, None, None], g[None, :, :]].reshape(-1, f.shape[1]))
    rows = np.unique(comp.view(np.dtype((np.void, comp.dtype.itemsize * comp.shape[1]))).reshape(-1))
    out = np.unique(rows.view(np.uint16).reshape(len(rows), -1).astype(np.float64), axis=0)
    if cache is not None:
        cache[key] = out
    return out


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
        groups.setdefault(other[0] if other else -1, []).append(int(h))
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


def _point_codes(keys: list[int], pos: dict[int, int], cF: Code) -> tuple[np.ndarray, np.ndarray]:
    """Per unit group (the dim of F it reads, -1 for none) the codes that dim may hold, padded to
    one width by repeating its first (repeats change no extreme), and its radius."""
    X = max(len(cF.per_dim[pos[j]]) if j >= 0 else 1 for j in keys)
    xs, rj = np.zeros((len(keys), X)), np.zeros(len(keys))
    for i, j in enumerate(keys):
        if j >= 0:
            v = cF.per_dim[pos[j]]
            xs[i] = np.concatenate([v, np.full(X - len(v), v[0])])
            rj[i] = cF.radius[pos[j]]
    return xs, rj


def _compose_output(m: Model, W1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: float, F: list[int],
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
    xs, rj = _point_codes(keys, pos, cF)
    own = np.array([j == o for j in keys])
    want_point = np.array([pos[j] if (gets_result and j >= 0) else -1 for j in keys])
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


def closure_of(codes: np.ndarray, budget: int = JOINT_BUDGET) -> np.ndarray | None:
    """The maps generated by ``codes`` (rows) under composition, identity included, sorted; None
    when more than ``budget``.  Breadth-first, each round composing the whole frontier with every
    generator at once (h = f o a: h(i) = f(a(i)))."""
    gens = np.asarray(codes, dtype=np.int64).reshape(len(codes), -1)
    n = gens.shape[1]
    frontier = np.unique(np.vstack([np.arange(n)[None], gens]).astype(np.uint16), axis=0)
    seen = {row.tobytes() for row in frontier}
    while len(frontier):
        fresh = []
        for h in np.unique(np.concatenate([frontier[:, a] for a in gens]), axis=0):
            b = h.tobytes()
            if b not in seen:
                seen.add(b)
                fresh.append(h)
                if len(seen) > budget:
                    return None
        frontier = np.array(fresh, dtype=np.uint16).reshape(len(fresh), n)
    rows = np.frombuffer(b"".join(seen), dtype=np.uint16).reshape(len(seen), n)
    return np.unique(rows, axis=0).astype(np.float64)


def _reaches(Ws: list[np.ndarray], n_in: int, out: list[int]) -> np.ndarray:
    """[n_in, len(out)]: which inputs each output in ``out`` reads through nonzero weights (a
    unit that no path joins to an input computes the same whatever that input holds)."""
    dep = np.eye(n_in, dtype=np.float32)
    for W in Ws:
        dep = np.minimum(dep @ (W != 0).astype(np.float32), 1.0)
    return dep[:, out] > 0


def _separable_groups(Ws: list[np.ndarray], n: int, n_const: int, moved_deps: list[set[int]],
                      moved: list[int]) -> dict[tuple[int, ...], list[int]]:
    """The outputs grouped by the map entries (columns 0..2n-1 of the input: F's points, then G's)
    that decide them: those their units read (:func:`_reaches`) and those their declared value
    depends on (``moved_deps``).  Every combination of a group's entries is checked, so a group's
    outputs are checked on every pair of maps."""
    reach = _reaches(Ws, 2 * n + n_const, moved)[: 2 * n]
    groups: dict[tuple[int, ...], list[int]] = {}
    for k, deps in enumerate(moved_deps):
        key = tuple(sorted(set(np.nonzero(reach[:, k])[0].tolist()) | deps))
        groups.setdefault(key, []).append(k)
    return groups


def _restricted(Ws: list[np.ndarray], bs: list[np.ndarray], out: list[int]) -> tuple[list[int], list[np.ndarray],
                                                                                     list[np.ndarray]]:
    """The network that computes the outputs ``out`` alone: per layer only the units with a path
    to them, and only the inputs those read (their indices returned); the same values exactly."""
    need = list(out)
    keep: list[list[int]] = []
    for W in reversed(Ws):
        need = np.nonzero(np.any(W[:, need] != 0, axis=1))[0].tolist()
        keep.append(need)
    keep.reverse()  # keep[i]: the rows of Ws[i] used (keep[0]: the inputs)
    cols = keep[1:] + [list(out)]
    return keep[0], [W[np.ix_(r, c)] for W, r, c in zip(Ws, keep, cols)], [b[c] for b, c in zip(bs, cols)]


def _group_rows(cF: Code, cG: Code, entries: tuple[int, ...], n: int) -> np.ndarray:
    """Every combination of the map entries ``entries`` the maps and fetched maps hold (the
    product of their projections), the other entries filled from one held pair of maps."""
    F, G = cF.combos(), cG.combos()
    fe = [i for i in entries if i < n]
    ge = [i - n for i in entries if i >= n]
    P = product_rows([np.unique(F[:, fe], axis=0), np.unique(G[:, ge], axis=0)])
    X = np.tile(np.concatenate([F[0], G[0]]), (len(P), 1))
    X[:, fe + [n + i for i in ge]] = P
    return X


def _declared_moves(m: Model, X: np.ndarray, first: Compose, lookups: list[Lookup], bases: list[Code],
                    held: tuple[Code, Code], at: dict[int, int], where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The declared new codes of a composition-then-lookups MLP's outputs on the map pairs ``X``
    (rows: f's points, then g's), the old codes there and their radii (``held``: the maps' and the
    fetched maps' codes, ``bases``: what each lookup's output held before)."""
    n, into_maps = X.shape[1] // 2, first.into == first.maps
    f, g = X[:, :n].astype(np.int64), X[:, n:].astype(np.int64)
    if np.any(g < 0) or np.any(g >= n):
        raise CertificateFailure(where, "a fetched map holds a code that is not a point")
    fg = np.take_along_axis(f, g, axis=1).astype(np.float64)  # (f o g)(q) = f(g(q))
    new = [fg, np.zeros_like(fg)] if into_maps else [fg]
    old = [X[:, :n], X[:, n:]] if into_maps else [X[:, n:]]
    old_r = [held[0].radius, held[1].radius] if into_maps else [held[1].radius]
    for lk, base in zip(lookups, bases):  # each lookup's code of the result, added to what its out held
        old.append(np.tile(base.combos()[0], (len(X), 1)))
        values = {name: fg[:, [at[d] for d in m.dims(name)]] for name in lk.reads}
        run_declared((lk,), values, where)
        new.append(old[-1] + values[lk.out])
        old_r.append(base.radius)
    return np.concatenate(new, axis=1), np.concatenate(old, axis=1), np.concatenate(old_r)


def composed_steps(m: Model, l: int, ob: Steps, states: list[State], pos_class: np.ndarray,
                   report: dict[str, Any]) -> list[State]:
    """A :class:`Steps` MLP whose ``first`` is a composition, its steps lookups of the result (a
    scan's last MLP with a label lookup fused after it: the lookup's hidden layers read the
    composition's output, not the residual, so the two cannot be checked one after the other).
    The composition's dims must move by f o g - f (and the cleared ones by -g), each lookup's
    output by its table's code of f o g, to within half the gap between the codes each dim can
    then hold, for every pair (f, g) of the codes the maps and the fetched maps hold together.
    Per-point separable: an output is decided by a few map entries (f o g at q by f and g(q); a
    lookup by f and g at the points it reads), so each group of outputs runs through the whole
    network with affine error forms on every combination of its entries only (the combinations
    of all entries are the pairs of maps; far fewer for a group)."""
    first, where = ob.first, f"layer {l + 1} MLP {ob.mlp}"
    if not isinstance(first, Compose) or not all(isinstance(st, Lookup) for st in ob.steps):
        raise NotCertifiable(f"{where}: steps after a composition must be lookups of its result")
    weights, biases = mlp_weights(m, l, ob.mlp)
    F, G = m.dims(first.maps), m.dims(first.fetched)
    if len(F) != len(G):
        raise CertificateFailure(where, "maps and fetched maps differ in width")
    into_maps = first.into == first.maps
    R = F if into_maps else G  # the result's dims
    at = {d: i for i, d in enumerate(R)}
    lookups = [st for st in ob.steps if isinstance(st, Lookup)]
    if any(d not in at for st in lookups for name in st.reads for d in m.dims(name)):
        raise NotCertifiable(f"{where}: a lookup after the composition reads more than its result")
    O = [d for st in lookups for d in m.dims(st.out)]
    moved = (F + G if into_maps else G) + O
    const, class_fixed = fixed_by_class(m, pos_class, len(states))
    const -= set(F + G + O)
    check_io(m, l, ob.mlp, weights, biases, F + G, moved, const)
    Ws = [weights[0][F + G + sorted(const)], *weights[1:]]
    n, worst, new_states = len(F), 0.0, []
    every_f = set(range(n))
    deps = ([every_f | {n + q} for q in range(n)] + [{n + q} for q in range(n)] if into_maps
            else [every_f | {n + q} for q in range(n)])
    for lk in lookups:
        points = {n + at[d] for name in lk.reads for d in m.dims(name)}
        deps += [every_f | points] * len(m.dims(lk.out))
    groups = _separable_groups(Ws, n, len(const), deps, moved)
    for c, st in enumerate(states):
        cF, cG = get_code(st, first.maps), get_code(st, first.fetched)
        if cF.size() * cG.size() > COMBINATION_BUDGET:
            raise NotCertifiable(f"{where}: {cF.size() * cG.size():,} pairs of maps, over the budget "
                                 f"{COMBINATION_BUDGET:,}")
        bases = [lookup_base(m, st, lk, class_fixed[c], where) for lk in lookups]

        X = product_rows([cF.combos(), cG.combos()])
        want, _, r_before = _declared_moves(m, X, first, lookups, bases, (cF, cG), at, where)
        rad = np.zeros(len(moved))
        r_in = np.concatenate([cF.radius, cG.radius, np.zeros(len(const))])
        for entries, cols in groups.items():
            Xg = _group_rows(cF, cG, entries, n)
            want_g, before_g, _ = _declared_moves(m, Xg, first, lookups, bases, (cF, cG), at, where)
            Xc = np.concatenate([Xg, np.tile(class_fixed[c][sorted(const)], (len(Xg), 1))], axis=1)
            inputs, Wg, bg = _restricted(Ws, biases, [moved[k] for k in cols])
            z, err = affine_rows(m, Xc[:, inputs], r_in[inputs], Wg, bg, list(range(len(cols))))
            off = z - (want_g - before_g)[:, cols]
            rad[cols] = settled(m, where, off, err, want_g[:, cols], r_before[cols], [moved[k] for k in cols],
                                lambda i: f"on the maps {Xg[i, :n].astype(int).tolist()} and fetched "
                                          f"{Xg[i, n:].astype(int).tolist()}", gap=half_gaps(want[:, cols]))
        worst = max(worst, float(rad.max()))
        names = ([first.maps, first.fetched] if into_maps else [first.fetched]) + [lk.out for lk in lookups]
        new_states.append(put_all(m, dict(st), names, want, rad))
    report["mlp"] = {"name": ob.mlp, "kind": "compose, then steps", "max_error": worst,
                     "separable_groups": len(groups)}
    return new_states


def lookup_base(m: Model, st: State, lk: Lookup, fixed: np.ndarray, where: str) -> Code:
    """The one code ``lk.out`` holds before an MLP adds the lookup's code (a tracked subspace, or
    a fixed dim's value in this class: the label index in ``bos``)."""
    base = (get_code(st, lk.out) if lk.out in st else
            Code.of(fixed[m.dims(lk.out)][None], np.zeros(len(m.dims(lk.out)))))
    if base.size() != 1:
        raise CertificateFailure(where, f"{lk.out} may hold several codes before the MLP writes it")
    return base


def settled(m: Model, where: str, off: np.ndarray, err: np.ndarray, want: np.ndarray, old_r: np.ndarray,
            moved: list[int], row: Callable[[int], str], gap: np.ndarray | None = None) -> np.ndarray:
    """An MLP's outputs, ``off`` from what it must add (error bound ``err``), added by the residual
    to old codes within ``old_r`` (rounding by u |sum|): each new code must be within half the gap
    between the codes its dim can hold (``gap``; default: those ``want`` holds there)
    (CertificateFailure naming the ``row`` otherwise).  Returns the new codes' radius per dim."""
    bound = np.abs(off) + err + old_r
    bound = bound + m.u * (np.abs(want) + bound)
    gap = half_gaps(want) if gap is None else gap  # (inf for a cleared dim: 0 up to the radius)
    bad = np.argwhere(bound >= gap)
    if len(bad):
        i, k = bad[0]
        raise CertificateFailure(where, f"{row(int(i))} output dim {moved[k]} is off by {bound[i, k]:.3g} (error "
                                 f"bound), not within half the gap {2 * gap[k]:.3g} of the declared {want[i, k]:g}")
    return bound.max(0)


def put_all(m: Model, st: State, names: list[str], want: np.ndarray, rad: np.ndarray) -> State:
    """``st`` with each of ``names`` holding its columns of ``want`` (in order), within ``rad``."""
    start = 0
    for name in names:
        k = len(m.dims(name))
        put_code(st, name, Code.of(want[:, start : start + k], rad[start : start + k]))
        start += k
    return st
