"""MLPs that run lookups and steps (:class:`~constructions.obligations.Lookup`, ``Modular``,
``Round``, ``Steps``): evaluated on every combination of the codes they read, with affine error
bounds, part by part when the combinations are many."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial
from typing import Any, Callable

import numpy as np

from compiler.automata.partitions import DisjointSets
from constructions.obligations import Joint, Lookup, Modular, Round, Steps

from .affine import affine_rows, on_grid, possibly_on
from .contributions import contributions
from .state import (AFFINE_CHUNK, COMBINATION_BUDGET, CertificateFailure, Code, NotCertifiable, ROW_FLOAT_BUDGET,
                    State, Model, first_positions, gamma, get_code, half_gaps, product_rows, put_code)
from .scores import feasible


MLPWeights = tuple[list[np.ndarray], list[np.ndarray]]
"""An MLP's weight matrices and bias vectors, layer by layer (or one part's sub-network of them)."""


def mlp_weights(m: Model, l: int, name: str) -> MLPWeights:
    """Layer l's MLP, which the obligations name ``name`` (CertificateFailure when it has none)."""
    b = m.blocks[l]
    lay = b["layout"]["mlp"]
    if b["mlp"] is None or lay is None:
        raise CertificateFailure(f"layer {l + 1}", f"has no MLP, but the obligations name {name!r}")
    if lay["name"] != name:
        raise NotCertifiable(f"layer {l + 1} MLP {lay['name']!r}: the obligations describe {name!r} "
                             f"(a readout fused into the last MLP is not certified yet)")
    return b["mlp"]


def check_io(m: Model, l: int, name: str, weights: list[np.ndarray], biases: list[np.ndarray],
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


def phases(m: Model, states: list[State], pos_class: np.ndarray) -> tuple[list[State], np.ndarray]:
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


def fixed_by_class(m: Model, pos_class: np.ndarray, n: int) -> tuple[set[int], np.ndarray]:
    """Fixed dims constant over the positions of every class, and each class's values there."""
    first = first_positions(pos_class, n)
    same = np.all(m.fixed == m.fixed[first[pos_class]], axis=0)
    return {d for d in m.fixed_dims if same[d]}, m.fixed[first]


def _round(st: Round, values: dict[str, np.ndarray], where: str) -> None:
    """``dst`` gets ``src``'s integer code; ``src`` what the MLP must write there: minus the code (cleared)."""
    x = values[st.src]
    if np.any(np.round(x) != x):
        raise CertificateFailure(f"{where} {st.name}", f"{st.src} holds a code that is not an integer")
    values[st.dst], values[st.src] = x.copy(), -x


def _lookup(st: Lookup, values: dict[str, np.ndarray], where: str) -> None:
    """Lemma 11: ``out`` gets the table's code of the codes read (or the default)."""
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


def _modular(st: Modular, values: dict[str, np.ndarray], where: str) -> None:
    """A counter's decode: ``out`` gets table[X mod p], ``minus_out`` table[(X - D) mod p]."""
    x = st.scale * values[st.reads][:, 0] + st.shift
    X = np.round(x)
    if np.any(np.abs(x - X) > 1e-6):
        raise CertificateFailure(f"{where} {st.name}", f"{st.reads} times {st.scale:g} is not an integer")
    table = np.asarray(st.table, dtype=np.float64).reshape(len(st.table), -1)
    p = len(table)
    values[st.out] = table[np.mod(X, p).astype(np.int64)]
    if st.minus is not None and st.minus_out is not None:
        D = values[st.minus][:, 0]
        if np.any(np.round(D) != D):
            raise CertificateFailure(f"{where} {st.name}", f"{st.minus} is not an integer")
        values[st.minus_out] = table[np.mod(X - D, p).astype(np.int64)]


STEPS: dict[type, Callable[[Any, dict[str, np.ndarray], str], None]] = {
    Round: _round, Lookup: _lookup, Modular: _modular}
"""Each step kind's declared result on rows of codes, as the checker computes it (a kind is added here)."""


def run_declared(steps: tuple[Lookup | Modular | Round, ...], values: dict[str, np.ndarray], where: str) -> None:
    """Run the declared steps on every row of ``values`` (name -> [N, dims] codes), in place: each
    step reads what the earlier ones left (CertificateFailure on a key a table lacks).  A
    :class:`Round` leaves in its src what the MLP must write there: minus the code, clearing it."""
    for st in steps:
        STEPS[type(st)](st, values, where)


def jointly(m: Model, joint: tuple[Joint, ...], values: dict[str, np.ndarray], written: set[str] | frozenset[str],
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
            r = max((float(get_code(s_, st.reads).radius.max()) for s_ in states if st.reads in s_), default=0.0)
            if abs(st.scale) * r >= 0.5:
                raise CertificateFailure(f"{where} {st.name}", f"{st.reads} may be off by {r:.3g}, so X = "
                                         f"{st.scale:g} x may be off by {abs(st.scale) * r:.3g} >= 1/2: its integer "
                                         f"(a count mod {len(st.table)}) is not determined")


def _written(steps: tuple[Lookup | Modular | Round, ...]) -> list[str]:
    """The subspaces the steps write, each once, in order (a :class:`Round` its src too: it clears it)."""
    return list(dict.fromkeys(n for st in steps for n in st.names_written()))


def _read(steps: tuple[Lookup | Modular | Round, ...]) -> list[str]:
    """The subspaces the steps read, each once, in order."""
    return list(dict.fromkeys(n for st in steps for n in st.names_read()))


Keep = Callable[[dict[str, np.ndarray], int], np.ndarray]
"""Which rows of declared values (name -> [N, dims]) the program can produce (:func:`jointly`)."""
Split = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]
"""(rows describing each checked case, the declared outputs, the network's outputs, their error
bounds, the names the rows describe): one way of checking an MLP, :func:`_joint` or a cut of
:func:`_split`."""

SPLIT_ABOVE = 20_000
"""Code combinations above which an MLP is checked group by group (:func:`_split`)."""


def _within(n: int, width: int) -> bool:
    """Whether ``n`` combinations, each checked on ``width`` written dims, are within the budgets:
    :data:`COMBINATION_BUDGET` combinations and :data:`ROW_FLOAT_BUDGET` floats per array of them."""
    return n <= COMBINATION_BUDGET and n * width <= ROW_FLOAT_BUDGET


def _budgets(width: int) -> str:
    """The budgets :func:`_within` applies, in words, for a refusal."""
    return (f"the budget {min(COMBINATION_BUDGET, ROW_FLOAT_BUDGET // max(1, width)):,} (COMBINATION_BUDGET "
            f"{COMBINATION_BUDGET:,}; ROW_FLOAT_BUDGET {ROW_FLOAT_BUDGET:,} floats over {width} written dims)")


def _member(rows: np.ndarray, combos: np.ndarray) -> np.ndarray:
    """Which ``rows`` are one of ``combos`` (rows of the same width)."""
    both = np.concatenate([combos, rows])
    _, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return np.isin(inverse[len(combos):], inverse[: len(combos)])


def _claimed_rows(m: Model, claim: Joint, names: list[str], sets: list[Code], read: set[str]) -> np.ndarray:
    """The combinations a :class:`Joint` claim naming every code read allows (its rows projected on
    the reads, each within its code set), times the other inputs' codes: rows over ``names``."""
    at = np.cumsum([0] + [len(m.dims(n)) for n in claim.names])
    where = {n: list(range(at[i], at[i + 1])) for i, n in enumerate(claim.names)}
    rows = np.asarray(claim.rows, dtype=np.float64)
    ok = np.ones(len(rows), dtype=bool)
    for n, s_ in zip(names, sets):
        if n in read:
            ok &= _member(rows[:, where[n]], s_.combos())
    cols = [c for n in names if n in read for c in where[n]]
    claimed = np.unique(rows[ok][:, cols], axis=0)
    return product_rows([claimed, *(s_.combos() for n, s_ in zip(names, sets) if n not in read)])


def _groups(W0: np.ndarray, row_input: list[int | None], Ws: list[np.ndarray],
            cut: int) -> list[tuple[set[int], list[np.ndarray]]]:
    """The independent parts of an MLP's first ``cut`` + 1 hidden layers: hidden units joined by a
    nonzero weight, or reading a common input, are one group.  Returns, per group that reaches
    hidden layer ``cut``, the inputs it reads and its units in each layer 0..cut."""
    sizes = [W0.shape[1]] + [W.shape[1] for W in Ws[1 : cut + 1]]
    base = np.cumsum([0] + sizes)
    n_inputs = 1 + max((i for i in row_input if i is not None), default=-1)
    sets = DisjointSets(base[-1] + n_inputs)
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


def _split(m: Model, Ws: list[np.ndarray], biases: list[np.ndarray], sets: list[Code], names: list[str],
           widths: list[int], const_vals: np.ndarray, steps: tuple[Lookup | Modular | Round, ...], writes: list[str],
           out: list[int], where: str, keep: Keep) -> list[tuple[float, Callable[[], Split]]] | None:
    """An MLP checked in two stages, or None when it has no independent parts.

    Stage A: the first hidden layers fall into independent groups (:func:`_groups`; a counter's
    decode, a carried code); each group's inputs are enumerated alone, with affine error forms,
    and the declared steps that read only its inputs run with it.  What the rest of the MLP can
    see of a group is its *signature*: the declared values it hands on (the subspaces later steps
    read or the MLP writes).  Its contribution to the next layer, for each signature, is the hull
    over every input combination with that signature.  Stage B (:func:`_stage_b`): every
    combination of the groups' signatures, the next layer's pre-activation the sum of the
    contributions' intervals, then the remaining layers with affine error forms; the declared
    result comes from the signatures.  Sound because each input combination of a group lies in its
    signature's hull, and every combination of signatures is checked -- at any cut, so each cut
    within the combination budget is a way to check the MLP.  Returns them, fewest combinations
    first, each with its widest contribution hull: a tighter hull can cost many more combinations
    (PT_6 on 64 letters: 1.4M against a few thousand), so :func:`_first_settled` tries the
    cheap ones first."""
    row_input: list[int | None] = [i for i, w in enumerate(widths) for _ in range(w)] + [None] * len(const_vals)
    H = len(Ws) - 1
    cuts = []
    for cut in range(H - 1, -1, -1):
        groups = _groups(Ws[0], row_input, Ws, cut)
        if len(groups) < 2:
            continue
        parts, outside = _stage_a(m, Ws, biases, sets, names, widths, const_vals, steps, writes, cut, groups,
                                  where, keep)
        width = max(float((p[3] - p[2]).max(initial=0.0)) for p in parts)
        cuts.append((math.prod(len(p[1]) for p in parts), width, cut, parts, outside))
        if width == 0 and cuts[-1][0] <= SPLIT_ABOVE:
            break
    if not cuts:
        return None
    within = sorted((c for c in cuts if _within(c[0], len(out))), key=lambda c: (c[0], c[1]))
    if not within:
        raise NotCertifiable(f"{where}: {min(c[0] for c in cuts):,} combinations of its parts' signatures, over "
                             f"{_budgets(len(out))}")
    return [(width, partial(_stage_b, m, Ws, biases, steps, writes, out, where, keep, cut, parts, outside))
            for _, width, cut, parts, outside in within]


def _stage_b(m: Model, Ws: list[np.ndarray], biases: list[np.ndarray], steps: tuple[Lookup | Modular | Round, ...],
             writes: list[str], out: list[int], where: str, keep: Keep, cut: int, parts: list[tuple],
             outside: list[int]) -> Split:
    """:func:`_split`'s stage B at hidden layer ``cut``: (rows describing each combination of the
    parts' signatures, the declared outputs, the network's outputs, their error bounds, and the
    signature names).  The combinations go through in chunks of at most :data:`AFFINE_CHUNK`
    floats of the next layer's width (:func:`_stage_b_rows`), so the arrays over that width --
    hulls, centres, roundings -- stay within one chunk however many combinations there are."""
    shape = [len(p[1]) for p in parts]
    n = math.prod(shape)
    step = max(1, AFFINE_CHUNK // max(1, Ws[cut + 1].shape[1]))
    pieces = [_stage_b_rows(m, Ws, biases, steps, writes, out, where, keep, cut, parts, outside,
                            np.stack(np.unravel_index(np.arange(lo, min(lo + step, n)), shape), axis=1).reshape(-1, len(shape)))
              for lo in range(0, n, step)]
    desc, want, z, err = (np.concatenate([piece[i] for piece in pieces]) for i in range(4))
    return desc, want, z, err, [nm for p in parts for nm in p[0]]


def _stage_b_rows(m: Model, Ws: list[np.ndarray], biases: list[np.ndarray], steps: tuple[Lookup | Modular | Round, ...],
                  writes: list[str], out: list[int], where: str, keep: Keep, cut: int, parts: list[tuple],
                  outside: list[int], grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_stage_b` on the combinations ``grid`` (each row a signature index per part): the
    next layer's pre-activation is the sum of the parts' hulls (its centre, and its half width
    plus the rounding of the sum), then the remaining layers run with affine error forms on
    inputs within the largest radius of a piece of these rows (:func:`_after_cut`)."""
    H = len(Ws) - 1
    W_next, b_next = Ws[cut + 1], biases[cut + 1]
    n = len(grid)
    lo = sum(p[2][grid[:, g]] for g, p in enumerate(parts))
    hi = sum(p[3][grid[:, g]] for g, p in enumerate(parts))
    big = sum(p[4][grid[:, g]] for g, p in enumerate(parts))
    ex = np.logical_and.reduce([p[5][grid[:, g]] for g, p in enumerate(parts)])
    centre, half = (lo + hi) / 2 + b_next, (hi - lo) / 2
    exact = ex & on_grid(W_next, b_next, big + np.abs(b_next), m.p)  # a unit's pre-activation or an output
    rounding = np.where(exact, 0.0, gamma(np.count_nonzero(W_next, axis=0) + 1, m.u) * (big + np.abs(b_next)))
    values: dict[str, np.ndarray] = {}
    for g, p in enumerate(parts):  # inputs first, then what a group's own steps computed
        at = 0
        for name in p[0]:
            k = len(m.dims(name))
            if name not in values or name in p[6]:
                values[name] = p[1][grid[:, g], at : at + k]
            at += k
    run_declared(tuple(steps[j] for j in outside), values, where)
    mask = keep(values, n)
    grid, centre, half, rounding = grid[mask], centre[mask], half[mask], rounding[mask]
    values = {k: v[mask] for k, v in values.items()}
    want = np.concatenate([values[nm] for nm in writes], axis=1)
    desc = np.concatenate([p[1][grid[:, g]] for g, p in enumerate(parts)], axis=1)
    if cut + 1 == H:
        return desc, want, centre[:, out], (half + rounding)[:, out]
    return desc, want, *_after_cut(m, Ws, biases, cut, centre, half + rounding, out)


PIECE_ROWS = 64
"""Rows per :func:`~verify.certify.affine.affine_rows` call after a cut (:func:`_after_cut`).
Measured (one core, float64, an identity over K units then a 903-wide one-hot layer): a call
costs about 0.7 ms, plus 0.1 ms per row (the later layers), plus 0.8 us per row and unit kept.
Pieces of rows that each turn on about one unit (K ~ rows) cost least near sqrt(0.7 ms / 0.8 us)
~ 30 rows; 64 is within 10% of that per row, and 965 rows in one call cost 4.7 times as much
(PLT_6 on 64 letters: 4342 key units, about one on per row)."""


def _after_cut(m: Model, Ws: list[np.ndarray], biases: list[np.ndarray], cut: int, centre: np.ndarray,
               rad: np.ndarray, out: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The layers after hidden layer ``cut + 1``, whose pre-activations are ``centre`` within
    ``rad`` [rows, units]: an identity first (their ReLU), then the later layers, with affine error
    forms -- on pieces of :data:`PIECE_ROWS` rows (ordered by their largest unit, so that a piece's
    rows turn on the same few units), each on inputs within its rows' largest radius (each row lies
    within it) and over its units :func:`possibly_on` in some row alone."""
    z_out, err_out = np.zeros((len(centre), len(out))), np.zeros((len(centre), len(out)))
    order = np.argsort(np.argmax(centre, axis=1), kind="stable") if centre.shape[1] else np.arange(len(centre))
    for lo in range(0, len(order), PIECE_ROWS):
        rows = order[lo : lo + PIECE_ROWS]
        r = rad[rows].max(0, initial=0.0)
        on = possibly_on(centre[rows], r, m.u)
        z_out[rows], err_out[rows] = affine_rows(m, centre[rows][:, on], r[on], [np.eye(len(on)), Ws[cut + 2][on],
                                                 *Ws[cut + 3 :]], [np.zeros(len(on)), *biases[cut + 2 :]], out)
    return z_out, err_out


def _stage_a(m: Model, Ws: list[np.ndarray], biases: list[np.ndarray], sets: list[Code], names: list[str],
             widths: list[int], const_vals: np.ndarray, steps: tuple[Lookup | Modular | Round, ...], writes: list[str],
             cut: int, groups: list[tuple[set[int], list[np.ndarray]]], where: str,
             keep: Keep) -> tuple[list[tuple], list[int]]:
    """:func:`_split`'s stage A at hidden layer ``cut``: per group (and per input no unit reads),
    its signatures and their contributions' hulls; and the steps left for stage B."""
    n_rows = sum(widths)
    offsets = np.cumsum([0] + widths)
    io = [(st.names_read(), st.names_written()) for st in steps]
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
        X = product_rows([sets[i].combos() for i in idx]) if idx else np.zeros((1, 0))
        X = X[feasible(X, [names[i] for i in idx], [sets[i] for i in idx], [widths[i] for i in idx])]
        values, at = {}, 0
        for i in idx:
            values[names[i]] = X[:, at : at + widths[i]]
            at += widths[i]
        run_declared(tuple(steps[j] for j in mine), values, where)
        mask = keep(values, len(X))
        X, values = X[mask], {k: v[mask] for k, v in values.items()}
        sig_names = [n for n in names + [w for _, wr in io for w in wr] if n in have and n in needed]
        sig_names = list(dict.fromkeys(sig_names))
        outputs = {n for j in mine for n in io[j][1]}
        sig = np.concatenate([values[n] for n in sig_names], axis=1) if sig_names else np.zeros((len(X), 0))
        rows = [r for i in idx for r in range(offsets[i], offsets[i + 1])] + list(range(n_rows, n_rows + len(const_vals)))
        Xc = np.concatenate([X, np.tile(const_vals, (len(X), 1))], axis=1)
        r = np.concatenate([sets[i].radius for i in idx] + [np.zeros(len(const_vals))])
        layer_w = [Ws[0][rows][:, units[0]]] + [Ws[j][units[j - 1]][:, units[j]] for j in range(1, cut + 1)]
        layer_b = [biases[j][units[j]] for j in range(cut + 1)]
        centre, err, mag, exact = contributions(Xc, r, layer_w, layer_b, W_next[units[cut]], m.u, m.p)
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


def _joint(m: Model, Ws: list[np.ndarray], biases: list[np.ndarray], sets: list[Code], names: list[str],
           const_vals: np.ndarray, steps: tuple[Lookup | Modular | Round, ...], writes: list[str],
           out: list[int], where: str, keep: Keep,
           X: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Every combination of the codes an MLP reads (the product of their sets, or ``X``: the rows a
    claim allows) through the whole network with affine error forms; the declared result of each."""
    n = math.prod(s.size() for s in sets) if X is None else len(X)
    if not _within(n, len(out)):
        raise NotCertifiable(f"{where}: {n:,} code combinations, over {_budgets(len(out))}")
    if X is None:
        X = product_rows([s.combos() for s in sets])
    X = X[feasible(X, names, sets, [len(s.radius) for s in sets])]
    values, at = {}, 0
    for name, s_ in zip(names, sets):
        values[name] = X[:, at : at + len(s_.radius)]
        at += len(s_.radius)
    run_declared(steps, values, where)
    mask = keep(values, len(X))
    X, values = X[mask], {k: v[mask] for k, v in values.items()}
    Xc = np.concatenate([X, np.tile(const_vals, (len(X), 1))], axis=1)
    r = np.concatenate([np.concatenate([s.radius for s in sets]), np.zeros(len(const_vals))])
    want = np.concatenate([values[name] for name in writes], axis=1)
    z_all, err_all = affine_rows(m, Xc, r, Ws, biases, out)
    return X, want, z_all, err_all, names


def put_written(m: Model, st: State, writes: list[str], cleared: set[str], base: list[np.ndarray],
                 want: np.ndarray, bound: np.ndarray) -> None:
    """Each written subspace's code after the MLP: the declared values (on a cleared scratch, its
    old code) with each distinct row's own bound (:meth:`Code.of_rows`)."""
    at = 0
    for i, name in enumerate(writes):
        k = len(m.dims(name))
        value = want[:, at : at + k] * (name not in cleared) + base[i]
        put_code(st, name, Code.of_rows(value, bound[:, at : at + k]) if len(bound) else
                 Code.of(value, np.zeros(k)))
        at += k


def settled(m: Model, st: State, where: str, writes: list[str], cleared: set[str], out: list[int], want: np.ndarray,
            z: np.ndarray, err: np.ndarray, describe: Callable[[int], str]) -> np.ndarray:
    """Each case's error bound [cases, out dims] once the MLP's output is added to what the written
    subspaces held (CertificateFailure, naming ``describe(case)``, where a bound reaches half the
    gap between the declared codes).  The old values (0, or a cleared scratch's code, which the
    MLP's declared output cancels) are within their radius, which adds; adding them rounds by at
    most u |sum| and at most the smaller operand (round to nearest), so by at most their radius."""
    old_r = np.concatenate([get_code(st, name).radius for name in writes])
    bound = np.abs(z - want) + err + old_r
    bound = bound + np.minimum(m.u * (np.abs(want) + bound), old_r)
    gap = half_gaps(want)
    gap[[i for i, d in enumerate(out) if any(d in m.dims(nm) for nm in cleared)]] = np.inf  # 0 up to the radius
    bad = np.argwhere(bound >= gap)
    if len(bad):
        i, k = bad[0]
        name = next(nm for nm in writes if out[k] in m.dims(nm))
        raise CertificateFailure(where, f"on {describe(int(i))} output dim {out[k]} ({name}) is {z[i, k]:.6g} (error "
                                 f"bound {bound[i, k]:.3g}), not within half the gap {2 * gap[k]:.3g} of the "
                                 f"declared {want[i, k]:g}")
    return bound


def _first_settled(m: Model, st: State, where: str, writes: list[str], cleared: set[str], out: list[int],
                   tries: list[tuple[float, Callable[[], Split]]]) -> tuple[np.ndarray, np.ndarray]:
    """The declared outputs and their error bounds (:func:`settled`) by the first of ``tries``
    (each a sound way to check the MLP, with its widest hull) whose bounds settle every write;
    where none does, the failure of the one with the narrowest hull."""
    failures = []
    for width, run in tries:
        desc, want, z, err, desc_names = run()
        try:
            return want, settled(m, st, where, writes, cleared, out, want, z, err, lambda i: (
                f"the code combination {tuple(float(v) if v != round(v) else int(v) for v in desc[i])} of "
                f"{', '.join(desc_names)}"))
        except CertificateFailure as failure:
            failures.append((width, failure))
    raise min(failures, key=lambda f: f[0])[1]


def lookup_mlp(m: Model, l: int, ob: Lookup | Steps, states: list[State], pos_class: np.ndarray, report: dict[str, Any],
            joint: tuple[Joint, ...] = (), written: set[str] | frozenset[str] = frozenset(),
            mlp: MLPWeights | None = None) -> list[State]:
    """An MLP of :class:`Lookup` or :class:`Steps`: every class, every combination of the codes it
    reads through the network (:func:`_joint`, or part by part, :func:`_split`), against the
    declared steps' result -- after BOS, only the combinations the program can hold together
    (``joint``'s claims on the subspaces ``written`` by the end of this MLP)."""
    steps = ob.steps if isinstance(ob, Steps) else (ob,)
    where = f"layer {l + 1} MLP {ob.mlp}"
    unknown = [step.kind for step in steps if type(step) not in STEPS]
    if unknown:
        raise NotCertifiable(f"{where}: the step kind {unknown[0]!r} has no weight check")
    if isinstance(ob, Steps) and ob.first is not None:  # (compose.composed_steps checks a last MLP's)
        raise NotCertifiable(f"{where}: steps after a composition, beside another MLP, are not certified yet")
    weights, biases = mlp or mlp_weights(m, l, ob.mlp)
    produced = _written(steps)
    unwritten = set(ob.unwritten or ()) if isinstance(ob, Steps) else set()
    writes = [n for n in produced if n not in unwritten]  # a step's unwritten code: computed, not compared
    inputs_names = [n for n in _read(steps) if n not in produced] + writes
    reads = [d for name in inputs_names for d in m.dims(name)]
    out = [d for name in writes for d in m.dims(name)]
    const, class_fixed = fixed_by_class(m, pos_class, len(states))
    positional = [n for n in inputs_names if set(m.dims(n)) <= m.fixed_dims]  # a phase: constant per class
    if any(d not in const for n in positional for d in m.dims(n)):
        raise NotCertifiable(f"{where}: reads positional dims that vary within a class of positions")
    const -= set(reads)
    check_io(m, l, ob.mlp, weights, biases, reads, out, const)
    _decodable(steps, states, where)
    Ws = [weights[0][reads + sorted(const)], *weights[1:]]
    cleared = {st.src for st in steps if isinstance(st, Round)}
    worst = 0.0
    new_states = []
    for c, st in enumerate(states):
        # positional dims, read as constants of the class (and a fixed dim the last MLP writes: its value before)
        st = {**st, **{n: Code.of(class_fixed[c][m.dims(n)][None], np.zeros(len(m.dims(n)))) for n in positional}}
        base = []  # what each write holds before: one known code (0, or BOS's own), to which the MLP adds
        for name in writes:
            old = get_code(st, name)
            if name not in cleared and old.size() != 1:
                raise CertificateFailure(where, f"{name} may hold several codes before the MLP writes it")
            base.append(np.zeros(len(old.radius)) if name in cleared else old.combos()[0])
        sets = [get_code(st, name) for name in inputs_names]
        const_vals = class_fixed[c][sorted(const)]
        widths = [len(s.radius) for s in sets]
        tries = None
        def keep(values: dict[str, np.ndarray], n: int, bos: bool = c == 0) -> np.ndarray:
            return np.ones(n, dtype=bool) if bos else jointly(m, joint, values, written, n)
        read = {n for n in inputs_names if n not in writes}
        claim = next((j for j in joint if c and read <= set(j.names) <= written), None)  # (BOS: every code)
        X = _claimed_rows(m, claim, inputs_names, sets, read) if claim is not None else None
        if X is None and math.prod(s.size() for s in sets) > SPLIT_ABOVE:
            tries = _split(m, Ws, biases, sets, inputs_names, widths, const_vals, steps, writes, out, where, keep)
        tries = tries or [(0.0, partial(_joint, m, Ws, biases, sets, inputs_names, const_vals, steps, writes, out,
                                        where, keep, X))]
        want, bound = _first_settled(m, st, where, writes, cleared, out, tries)
        rad = bound.max(0) if len(bound) else np.zeros(len(out))
        worst = max(worst, float(rad.max()) if len(rad) else 0.0)
        st = {n: code for n, code in st.items() if n not in positional}
        put_written(m, st, writes, cleared, base, want, bound)
        new_states.append(st)
    report["mlp"] = {"name": ob.mlp, "kind": "steps" if isinstance(ob, Steps) else "lookup", "max_error": worst}
    return new_states
