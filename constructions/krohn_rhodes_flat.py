"""Theorem 11's blocks with MLPs of two hidden layers (the standard shape's build,
``one_hidden_layer``): each block's counter decodes and the lookups after them fused into one
:func:`gadgets.staircase_mlp`, so a cascade of L counter levels unfolds into 2L standard blocks
(a cyclic group into 2) instead of 6-7 per level.

The staircase reads the block's prefix sums X (every threshold of X: width O(n T) per counter)
and, as exact gates, the letter, the codes of components decoded in earlier blocks and a
counter's increment (for its value before the update); it writes what the default block's MLP
writes -- the decoded codes, the next block's increments, the readout -- and states the same
obligation, so the certificate checks the same program, less what nobody reads: a counter's value
before the update that no other block reads as a code (:func:`_without_old`).  A cascade is built
so only when every component is a counter and no view is evaluated in the network
(:func:`flat_refusal`); otherwise the default build is used and unfolded.  A table of two or more
counters decoded in the same block is a :class:`StairLookup` in a third hidden layer (its one-hots
read off the exact second layer): 3 blocks for that level -- except the readout, whose keys the
staircase writes as one-hots for the unembedding to sum (:mod:`.krohn_rhodes_readout`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable

import numpy as np

from compiler.automata.cascade import Cascade

from .gadgets import CodeInput, OneHotInput, Ramp, Stair, StairLookup, staircase_mlp
from .krohn_rhodes_layout import (CERTIFIED_EPS, PREFIX_TOLERANCE, Layout, Schedule, TablePlan, counter_high,
                                  increments_at, input_update, letter_increments, prefix_sum_bounds)
from .krohn_rhodes_readout import (interpolated_mlp, interpolated_readout, one_hot_lookup, one_hot_steps, with_late)
from .obligations import Lookup, Modular, Steps
from .program import MLP, Beside, obligation_name
from .unfold import scratch_needed
from .workspace import Subspace


def flat_refusal(cascade: Cascade, sched: Schedule) -> str | None:
    """Why the cascade's blocks cannot be built as staircases (None: they can)."""
    if any(c.kind != "counter" for c in cascade.components):
        return "a reset component (its most-recent fetch is rounded in two hidden layers of its own)"
    if sched.old_views or sched.new_views:
        return "views evaluated in the network"
    return None


class _Gates:
    """The exact gate inputs of one staircase, each once (by subspace and index)."""

    def __init__(self, tok: Subspace) -> None:
        self.inputs: list[CodeInput | OneHotInput] = [OneHotInput(tok)]

    def code(self, sub: Subspace, n: int) -> int:
        for i, g in enumerate(self.inputs):
            if isinstance(g, CodeInput) and g.sub.name == sub.name:
                return i
        self.inputs.append(CodeInput(sub, n))
        return len(self.inputs) - 1


def _counter_stairs(c, d: dict[str, Subspace], ramp: int, high: int, gates: _Gates, old: bool,
                    before: tuple[int, int] | None = None) -> list[Stair]:
    """A counter's decode (Lemma 15): ``new`` = X mod n and, with ``old``, ``old`` = (X - increment) mod n
    -- off the ramp of the value before the update where the block has one (``before``: its index and
    top, :func:`_old_ramp`), else through the increment's gate."""
    X, n = np.arange(high + 1), c.size
    stairs = [Stair(d["new"], ramp, (), {(): (X % n)[:, None].astype(np.float64)})]
    if old and before is not None:
        Y = np.arange(before[1] + 1) - (n - 1)
        stairs.append(Stair(d["old"], before[0], (), {(): (Y % n)[:, None].astype(np.float64)}))
    elif old:
        inc = gates.code(d["inc"], n)
        stairs.append(Stair(d["old"], ramp, (inc,), {(k,): ((X - k) % n)[:, None].astype(np.float64)
                                                      for k in range(n)}))
    return stairs


def _table_stair(plan: TablePlan, out: Subspace, row_of, fresh: dict[str, tuple[int, int, Subspace]],
                 lay: Layout, sizes: dict[str, int], gates: _Gates, letter_keyed: bool, new: bool,
                 by_letter: dict[str, dict[int, int]], possible: dict[str, dict[int, tuple[int, ...]]],
                 olds: dict[str, tuple[int, int]]) -> Stair:
    """One lookup (Lemma 11) as a stair: gated by the letter and the stale keys' codes; a key decoded
    in this block (at most one) read off its ramp, before the update through its increment's gate
    (or the letter's, when the increment is a function of the letter: ``by_letter``), at the
    increments it can take at the row's letter only (``possible``, :func:`increments_at`) -- or off
    the ramp of its value before the update (``olds``: its index and top, :func:`_old_ramp`)."""
    keys = plan.keys
    at = next((i for i, k in enumerate(keys) if k in fresh), None)
    gate_of = {}
    for i, k in enumerate(keys):
        if i != at:
            gate_of[i] = gates.code(lay.subs[k]["new"] if new else lay.value(k), sizes[k])
    g_idx = [gate_of[i] for i in sorted(gate_of)] + ([0] if letter_keyed else [])
    old = False if at is None else not new and "old" in lay.subs[keys[at]]
    known = by_letter.get(keys[at]) if old and at is not None and letter_keyed else None
    ramp_y = olds.get(keys[at]) if old and at is not None and known is None else None
    if old and at is not None and known is None and ramp_y is None:
        g_idx.append(gates.code(lay.subs[keys[at]]["inc"], sizes[keys[at]]))
    values: dict[tuple[int, ...], np.ndarray] = {}
    for (vals, letter), act in plan.rows.items():
        row = row_of(act)
        if not np.any(row):
            continue
        g = tuple(v for i, v in enumerate(vals) if i != at) + ((letter,) if letter_keyed else ())
        if at is None:
            values[g] = row[None]
            continue
        ramp, high, _ = fresh[keys[at]]
        n = sizes[keys[at]]
        X = np.arange(high + 1)
        if ramp_y is not None:  # Y = X - increment + (n - 1)
            F = values.setdefault(g, np.zeros((ramp_y[1] + 1, len(out))))
            F[(np.arange(ramp_y[1] + 1) - (n - 1)) % n == vals[at]] = row
            continue
        incs = possible[keys[at]][letter] if letter_keyed else range(n)
        for dk in (known[letter],) if known is not None else incs if old else (0,):
            gk = g + ((dk,) if old and known is None else ())
            F = values.setdefault(gk, np.zeros((high + 1, len(out))))
            F[(X - dk) % n == vals[at]] = row
    read = None if at is None else ramp_y[0] if ramp_y is not None else fresh[keys[at]][0]
    return Stair(out, read, tuple(g_idx), values)


def _one_hot_stair(d: dict[str, Subspace], n: int, fresh: tuple[int, int, Subspace] | None, gates: _Gates) -> Stair:
    """A readout key's one-hot ``hot`` of its updated value: off its ramp (decoded in this block,
    X mod n) or a lookup of its ``new`` code's gate."""
    eye = np.eye(n)
    if fresh is None:
        return Stair(d["hot"], None, (gates.code(d["new"], n),), {(v,): eye[v][None] for v in range(n)})
    ramp, high, _ = fresh
    return Stair(d["hot"], ramp, (), {(): eye[np.arange(high + 1) % n]})


def _joint(plan: TablePlan, out: Subspace, row_of, code_stair: dict[tuple[str, str], int], lay: Layout,
           sizes: dict[str, int], gates: _Gates, letter_keyed: bool, new: bool) -> StairLookup:
    """A table of several counters decoded in this block: a :class:`StairLookup` lookup reading their code
    stairs (``new``, or the value before the update), the stale keys' and the letter's gates."""
    reads = []
    for k in plan.keys:
        role = "new" if new or "old" not in lay.subs[k] else "old"
        if (k, role) in code_stair:
            reads.append(("stair", code_stair[(k, role)]))
        else:
            reads.append(("gate", gates.code(lay.subs[k]["new"] if new else lay.value(k), sizes[k])))
    if letter_keyed:
        reads.append(("gate", 0))
    table = {}
    for (vals, letter), act in plan.rows.items():
        row = row_of(act)
        if np.any(row):
            table[tuple(vals) + ((letter,) if letter_keyed else ())] = row
    return StairLookup(out, tuple(reads), table)


WALSH_KEYS = 3
"""Most mod-2 counters of one block a table may read for :func:`walsh_stairs` (2^k - 1 ramps)."""


def walsh_ok(plan: TablePlan, fresh: set[str], sizes: dict[str, int], lay: Layout, max_len: int) -> bool:
    """Whether a table of k >= 2 counters decoded in this block is read off ramps of their sums
    (:func:`walsh_stairs`, no third hidden layer): every such counter is mod 2, k <= WALSH_KEYS,
    and k prefix sums' worst-case float32 errors together stay within PREFIX_TOLERANCE (the
    tolerance of one counter's, :func:`prefix_sum_bounds`)."""
    keys = [k for k in plan.keys if k in fresh]
    if not 2 <= len(keys) <= WALSH_KEYS or any(sizes[k] != 2 for k in keys):
        return False
    return len(keys) * sum(prefix_sum_bounds(2, max_len, lay.blocks, CERTIFIED_EPS)) <= PREFIX_TOLERANCE


def walsh_stairs(plan: TablePlan, out: Subspace, row_of, fresh: dict[str, tuple[int, int, Subspace]],
                 ramps: list[Ramp], sums: dict[tuple[int, ...], int], lay: Layout, sizes: dict[str, int],
                 gates: _Gates, letter_keyed: bool, new: bool, by_letter: dict[str, dict[int, int]]) -> list[Stair]:
    """A table (Lemma 11) of k mod-2 counters decoded in this block, gated as :func:`_table_stair`,
    without their joint one-hot: in the Walsh basis of Z_2^k, f(p) = sum_S c_S (-1)^(sum_S p_i)
    (c_S = 2^-k sum_p f(p) (-1)^(sum_S p_i), multiples of 2^-k: exact), and sum_S p_i (the values
    before the update: X_i - d_i, d_i the increment) = Y_S - sum_S d_i mod 2 with Y_S = sum_S X_i,
    a prefix sum itself (a ramp on the sum of the counters' means, added to ``ramps`` once per S,
    ``sums``).  So one stair per S, gated by the stale keys, the letter and S's increments (an
    increment that is a function of the letter, ``by_letter``, is read off the letter's gate): the
    staircase's two hidden layers, exact (its units are exact 0s and 1s).  Every increment value is
    gated (the sum over S is the function only with all of its terms: a gate combination left out
    would leave the empty subset's coefficient, not 0), so a block with such a table keeps its
    counters' lookups keyed at every increment (:func:`increments_at` is not applied to them)."""
    at = [i for i, k in enumerate(plan.keys) if k in fresh]
    stale = [i for i in range(len(plan.keys)) if i not in at]
    old = {plan.keys[i]: not new and "old" in lay.subs[plan.keys[i]] for i in at}
    stale_g = [gates.code(lay.subs[plan.keys[i]]["new"] if new else lay.value(plan.keys[i]), sizes[plan.keys[i]])
               for i in stale] + ([0] if letter_keyed else [])
    f: dict[tuple[int, ...], np.ndarray] = {}  # (stale codes, letter) -> [2^k, len(out)] over p
    for (vals, letter), act in plan.rows.items():
        g = tuple(vals[i] for i in stale) + ((letter,) if letter_keyed else ())
        p = sum(vals[i] << j for j, i in enumerate(at))
        f.setdefault(g, np.zeros((2 ** len(at), len(out))))[p] = row_of(act)
    stairs = []
    bits = np.array([[(p >> j) & 1 for j in range(len(at))] for p in range(2 ** len(at))])
    for S in range(2 ** len(at)):
        members = [j for j in range(len(at)) if (S >> j) & 1]
        sign = (-1.0) ** bits[:, members].sum(1)
        coef = {g: sign @ F / 2 ** len(at) for g, F in f.items()}
        coef = {g: c for g, c in coef.items() if np.any(c)}
        if not coef:
            continue
        if not members:
            stairs.append(Stair(out, None, tuple(stale_g), {g: c[None] for g, c in coef.items()}))
            continue
        names_ = [plan.keys[at[j]] for j in members]
        ramp = _sum_ramp(tuple(fresh[k][0] for k in names_), ramps, sums)
        fixed = [k for k in names_ if old[k] and k in by_letter and letter_keyed]
        incs = [gates.code(lay.subs[k]["inc"], 2) for k in names_ if old[k] and k not in fixed]
        Y = np.arange(ramps[ramp].high + 1)
        values = {}
        for g, c in coef.items():
            known = sum(by_letter[k][g[-1]] for k in fixed)
            for d in np.ndindex(*(2,) * len(incs)):
                values[g + d] = ((-1.0) ** ((Y + known + sum(d)) % 2))[:, None] * c[None]
        stairs.append(Stair(out, ramp, tuple(stale_g + incs), values))
    return stairs


def _sum_ramp(members: tuple[int, ...], ramps: list[Ramp], sums: dict[tuple[int, ...], int]) -> int:
    """The ramp of the sum of ramps ``members`` (one of them when there is one), added once."""
    if len(members) == 1:
        return members[0]
    if members not in sums:
        rs = [ramps[i] for i in members]
        sums[members] = len(ramps)
        ramps.append(Ramp(rs[0].sub, rs[0].scale, sum(r.shift for r in rs), sum(r.high for r in rs),
                          tuple((r.sub, r.scale) for r in rs[1:])))
    return sums[members]


def _kept_old(b: int, cascade: Cascade, sched: Schedule, lay: Layout, tables: list,
              read_elsewhere: set[str] | frozenset[str]) -> set[str]:
    """Block b's counters whose value before the update the staircase writes: those another block
    reads (a table of a later level keyed by it) or a joint lookup of this block reads off its
    code stair.  The other tables read it off the ramp, through the increment's gate, so its
    ``old`` code is written for nobody and left out (its units are n (T + 1) per counter)."""
    fresh = {c.name for c in cascade.components if sched.block_of[c.name] == b and "old" in lay.subs[c.name]}
    joint = {k for plan, _, _, _, new in tables if not new and sum(k in fresh for k in plan.keys) > 1
             for k in plan.keys if k in fresh}
    return {k for k in fresh if k in joint or obligation_name(lay.subs[k]["old"]) in read_elsewhere}


Dropped = dict[str, tuple[str, str, int, dict[int, int] | None, dict[int, tuple[int, ...]]]]
"""``old`` code name -> the counter's ``new`` and ``inc`` names, its modulus, letter -> increment
(where that is a function of the letter) and letter -> the increments it can take."""


def _without_old(obligation, dropped: Dropped, letter: str):
    """``obligation`` (the default block's steps) less the ``old`` codes in ``dropped`` (name ->
    the counter's ``new`` and ``inc`` names, its modulus): each such decode
    (:class:`~.obligations.Modular`) states its ``new`` code only, and a lookup keyed by the
    ``old`` code v is keyed by (``new``, ``inc``) instead, at every pair with new - inc = v mod n --
    the same function, as the staircase computes it (the value before the update off the ramp,
    through the increment's gate, at the increments the row's letter allows: the fifth entry);
    by ``new`` alone where the increment is a function of the letter (the fourth entry: letter ->
    increment), read off the letter's gate."""
    if not dropped or not isinstance(obligation, Steps):
        return obligation
    steps = []
    for st in obligation.steps:
        if isinstance(st, Modular) and st.minus_out in dropped:
            st = replace(st, minus=None, minus_out=None)
        elif isinstance(st, Lookup):
            for name in [r for r in st.reads if r in dropped]:
                st = _rekeyed(st, letter, name, *dropped[name])
        steps.append(st)
    return replace(obligation, steps=tuple(steps))


def _rekeyed(st: Lookup, letter: str, old: str, new: str, inc: str, n: int,
             by_letter: dict[int, int] | None = None, possible: dict[int, tuple[int, ...]] | None = None) -> Lookup:
    """Lookup ``st`` with its one-dim read ``old`` replaced by the two reads (``new``, ``inc``):
    key (..., v, ...) becomes every (..., a, d, ...) with (a - d) mod n = v -- where the letter is
    the last read, every such pair with d one of the increments ``possible`` at the key's letter
    (the lookup writes 0 at the others, which no reachable input meets); with ``by_letter`` (the
    increment d a function of the letter), by ``new`` alone: every (..., a, ...) with
    (a - d(letter)) mod n = v."""
    i = st.reads.index(old)
    assert letter not in st.reads[:i], "one-dim codes before the letter: the old code's key position is i"
    keyed = st.reads[-1] == letter
    at = len(st.reads) - 1  # with the letter read: the one-dim codes before it, its one-hot starts here
    if by_letter is not None and keyed:
        table = {key[:i] + (a,) + key[i + 1 :]: row for key, row in st.table.items() for a in range(n)
                 if (a - by_letter[key[at:].index(1)]) % n == key[i]}
        return replace(st, reads=st.reads[:i] + (new,) + st.reads[i + 1 :], table=table)
    table = {key[:i] + (a, (a - key[i]) % n) + key[i + 1 :]: row for key, row in st.table.items() for a in range(n)
             if not keyed or possible is None or (a - key[i]) % n in possible[key[at:].index(1)]}
    return replace(st, reads=st.reads[:i] + (new, inc) + st.reads[i + 1 :], table=table)


def _early_one_hots(b: int, sched: Schedule, lay: Layout, sizes: dict[str, int],
                    fresh: dict[str, tuple[int, int, Subspace]], gates: _Gates, declared,
                    late: tuple[str, ...]) -> tuple[list[Stair], Any]:
    """With an interpolated readout, the one-hots of the readout keys decoded in block b (< the
    last) written by its staircase, and their lookups appended to its obligation (not the ``late``
    ones: the last block interpolates those)."""
    keys = [k for k in sched.readout.keys if k in fresh and k not in late]
    if not keys:
        return [], declared
    assert isinstance(declared, Steps), "a block's default MLP is decodes then lookups"
    stairs = [_one_hot_stair(lay.subs[k], sizes[k], fresh[k], gates) for k in keys]
    return stairs, replace(declared, steps=(*declared.steps, *(one_hot_lookup(lay.subs[k], sizes[k]) for k in keys)))


def flat_mlp(b: int, cascade: Cascade, sched: Schedule, lay: Layout, init: dict[str, int], max_len: int,
             mass: int, obligation, read_elsewhere: set[str] | frozenset[str] = frozenset(),
             late: tuple[str, ...] = (), decodes: dict[str, Modular] | None = None) -> MLP | Beside:
    """Block b's MLP as one staircase: its counters' decodes, then the next block's input tables (and
    the readout in the last block), stating ``obligation`` (the default block's) less the ``old``
    codes that no other block (``read_elsewhere``: the names they read) nor a joint lookup reads.
    ``late`` (:func:`late_one_hots`): readout keys whose ``new`` code their block computes without
    writing it, and whose one-hot the last block interpolates beside its staircase (``decodes``:
    the default build's decode of each, by its ``new`` name).  A counter's value before the update
    read through its increment's gate is read off a ramp of its own instead where that takes fewer
    units and no more scratch once unfolded (:func:`_staircase`'s ``before``; the scratch dims are
    the residual's, so wider ramps would widen every block)."""
    interpolated = interpolated_readout(cascade, sched, lay, max_len)
    if interpolated and b == sched.n_blocks:
        name = f"block{b}.mlp" + (".interpolation" if late else "")
        mlp = interpolated_mlp(b, cascade, lay, init, max_len, mass, obligation, interpolated, name)
        return with_late(b, mlp, late, cascade, lay, init, max_len, mass, decodes)
    sizes = {c.name: c.size for c in cascade.components}
    hot = b == sched.n_blocks and all("hot" in lay.subs[k] for k in sched.readout.keys)
    tables = _tables(b, cascade, sched, lay, hot)
    here = {c.name for c in cascade.components if sched.block_of[c.name] == b}
    walsh = [walsh_ok(t[0], here, sizes, lay, max_len) for t in tables]
    kept = _kept_old(b, cascade, sched, lay, [t for t, w in zip(tables, walsh) if not w], read_elsewhere)
    by_letter = {k: d for k, d in letter_increments(cascade, sched).items() if k not in kept}
    blk = _Block(b, cascade, sched, lay, init, max_len, mass, obligation, late, hot, bool(interpolated), sizes,
                 tables, walsh, _increments(cascade, sched, lay, [t[0] for t, w in zip(tables, walsh) if w], kept),
                 kept, by_letter)
    mlp = _staircase(blk, frozenset())
    through_inc = frozenset(c for c in here if "old" in lay.subs[c] and c not in by_letter)  # by_letter has no kept
    if through_inc and not any(walsh):
        other = _staircase(blk, through_inc)
        if (sum(other.hidden_sizes) < sum(mlp.hidden_sizes)
                and scratch_needed(other.hidden_sizes) <= scratch_needed(mlp.hidden_sizes)):
            mlp = other
    return with_late(b, mlp, late if hot else (), cascade, lay, init, max_len, mass, decodes)


@dataclass(frozen=True)
class _Block:
    """What :func:`_staircase` builds block b's MLP from (:func:`flat_mlp`)."""

    b: int
    cascade: Cascade
    sched: Schedule
    lay: Layout
    init: dict[str, int]
    max_len: int
    mass: int
    obligation: Any
    late: tuple[str, ...]
    hot: bool
    interpolated: bool
    sizes: dict[str, int]
    tables: list
    walsh: list[bool]
    possible: dict[str, dict[int, tuple[int, ...]]]
    kept: set[str]
    by_letter: dict[str, dict[int, int]]


def _old_ramp(c, d: dict[str, Subspace], mass: int, init: int, high: int) -> Ramp:
    """A ramp of counter c's value before the update, Y = X - increment + (n - 1) in 0..high + n - 1
    (X its prefix sum, 0..high; the increment an exact code): a table of that value is a function of
    Y alone, ((Y - (n - 1)) mod n), so it needs no gate combination per increment."""
    return Ramp(d["mean"], float(mass), init + c.size - 1, high + c.size - 1, ((d["inc"], -1.0),))


def _staircase(blk: _Block, before: frozenset[str]) -> MLP:
    """Block ``blk.b``'s staircase (:func:`flat_mlp`), reading the value before the update of each
    counter in ``before`` off its own ramp (:func:`_old_ramp`) instead of through its increment's gate."""
    b, cascade, sched, lay, late, hot, sizes = blk.b, blk.cascade, blk.sched, blk.lay, blk.late, blk.hot, blk.sizes
    gates = _Gates(lay.tok)
    ramps: list[Ramp] = []
    fresh: dict[str, tuple[int, int, Subspace]] = {}
    olds: dict[str, tuple[int, int]] = {}
    stairs: list[Stair] = []
    code_stair: dict[tuple[str, str], int] = {}
    dropped: Dropped = {}
    for c in cascade.components:
        if sched.block_of[c.name] == b:
            d, high = lay.subs[c.name], counter_high(c.size, blk.max_len)
            fresh[c.name] = (len(ramps), high, d["mean"])
            ramps.append(Ramp(d["mean"], float(blk.mass), blk.init[c.name], high))
            if c.name in before:
                olds[c.name] = (len(ramps), high + c.size - 1)
                ramps.append(_old_ramp(c, d, blk.mass, blk.init[c.name], high))
            if "old" in d and c.name not in blk.kept:
                incs = ({a: tuple(range(c.size)) for a in blk.possible[c.name]} if c.name in olds  # Y's: every one
                        else blk.possible[c.name])
                dropped[obligation_name(d["old"])] = (obligation_name(d["new"]), obligation_name(d["inc"]), c.size,
                                                      blk.by_letter.get(c.name), incs)
            for role, st in zip(("new", "old"), _counter_stairs(c, d, fresh[c.name][0], high, gates, c.name in blk.kept,
                                                                olds.get(c.name))):
                if role == "new" and c.name in late:  # computed for this block's tables, written by none
                    continue
                code_stair[(c.name, role)] = len(stairs)
                stairs.append(st)
    if hot:
        stairs += [_one_hot_stair(lay.subs[k], sizes[k], fresh.get(k), gates) for k in sched.readout.keys
                   if k not in late]
    joints = _table_stairs(blk, fresh, olds, ramps, gates, stairs, code_stair)
    return _assembled(blk, ramps, gates, stairs, joints, fresh, dropped)


def _table_stairs(blk: _Block, fresh: dict[str, tuple[int, int, Subspace]], olds: dict[str, tuple[int, int]],
                  ramps: list[Ramp], gates: _Gates, stairs: list[Stair],
                  code_stair: dict[tuple[str, str], int]) -> list[StairLookup]:
    """The block's lookups as stairs (appended to ``stairs``; Walsh's, or one per table) and the
    joint ones, returned."""
    sizes = blk.sizes
    joints = []
    sums: dict[tuple[int, ...], int] = {}
    for (plan, out, row_of, keyed, new), w in zip(blk.tables, blk.walsh):
        if w:
            stairs += walsh_stairs(plan, out, row_of, fresh, ramps, sums, blk.lay, sizes, gates, keyed, new,
                                   blk.by_letter)
            continue
        if sum(k in fresh for k in plan.keys) > 1:
            joint = _joint(plan, out, row_of, code_stair, blk.lay, sizes, gates, keyed, new)
            if joint.table:
                joints.append(joint)
            continue
        st = _table_stair(plan, out, row_of, fresh, blk.lay, sizes, gates, keyed, new, blk.by_letter, blk.possible,
                          olds)
        if st.values:
            stairs.append(st)
    return joints


def _assembled(blk: _Block, ramps: list[Ramp], gates: _Gates, stairs: list[Stair], joints: list[StairLookup],
               fresh: dict[str, tuple[int, int, Subspace]], dropped: Dropped) -> MLP:
    """The staircase MLP of the block's stairs, stating its declared steps."""
    lay, late, sched, sizes = blk.lay, blk.late, blk.sched, blk.sizes
    used = sorted({i for st in stairs for i in st.gates} | {i for j in joints for k, i in j.reads if k == "gate"})
    renumber = {old: new for new, old in enumerate(used)}
    stairs = [Stair(st.out, st.ramp, tuple(renumber[i] for i in st.gates), st.values) for st in stairs]
    joints = [StairLookup(j.out, tuple((k, renumber[i] if k == "gate" else i) for k, i in j.reads), j.table)
              for j in joints]
    declared = _without_old(blk.obligation, dropped, obligation_name(lay.tok))
    unwritten = tuple(obligation_name(lay.subs[k]["new"]) for k in late if k in fresh)
    if unwritten:
        declared = replace(declared, unwritten=unwritten)
    if blk.hot:
        declared = one_hot_steps(declared, obligation_name(lay.state), [
            one_hot_lookup(lay.subs[k], sizes[k]) for k in sched.readout.keys if k not in late])
    elif blk.interpolated:
        early, declared = _early_one_hots(blk.b, sched, lay, sizes, fresh, gates, declared, late)
        stairs += early
    name = f"block{blk.b}.mlp" + (".stairs" if blk.hot and late else "")
    return staircase_mlp(name, ramps, [gates.inputs[i] for i in used], stairs, replace(declared, mlp=name),
                         {"counters": sorted(fresh)}, tuple(joints))


def _increments(cascade: Cascade, sched: Schedule, lay: Layout, walsh: list[TablePlan],
                kept: set[str]) -> dict[str, dict[int, tuple[int, ...]]]:
    """Each counter's increments its lookups are gated at, per letter: those it can take
    (:func:`increments_at`), or every one for a key of a table read in Walsh's basis and for a
    counter whose value before the update is written (``kept``): the obligation's lookups then read
    that code, computed from the increment code whatever the letter, so they are not rekeyed to
    write 0 at the pairs no run meets, and the weight check, which tries every pair, would find
    the staircase's 0 there."""
    possible = increments_at(cascade, sched, len(lay.tok))
    for k in {k for plan in walsh for k in plan.keys if k in possible} | (kept & set(possible)):
        possible[k] = {a: tuple(range(cascade.component(k).size)) for a in possible[k]}
    return possible


Table = tuple[TablePlan, Subspace, Callable[[Any], np.ndarray], bool, bool]
"""A lookup a staircase computes: its plan, output, row of an action, keyed by the letter, read after the update."""


def _tables(b: int, cascade: Cascade, sched: Schedule, lay: Layout, hot: bool) -> list[Table]:
    """Block b's lookups: the next block's input tables, and in the last block the readout (unless
    the unembedding sums one-hots, ``hot``)."""
    tables: list[Table] = [(sched.inputs[c.name], lay.input_out(c), partial(input_update, c), True, False)
                           for c in cascade.components if sched.inputs[c.name].keys and sched.block_of[c.name] == b + 1]
    if b == sched.n_blocks and not hot:
        tables.append((sched.readout, lay.state, np.eye(len(lay.state)).__getitem__, False, True))
    return tables
