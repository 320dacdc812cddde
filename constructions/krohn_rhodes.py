"""Theorem 11: solvable automata in depth independent of T, from a verified cascade.

The Krohn-Rhodes decomposer (compiler/decompose.py) gives a cascade of modular
counters and reset (memory) units; component c's input at step t is a table of
the *pre-update* values of the components above it and the letter.  This module
compiles it:

* counter (Lemma 15): a prefix-mean head sums its increments; the MLP decodes the
  sum mod n (``kr:c.new``) and, subtracting the increment at t, the value before
  the update (``kr:c.old``) -- no look-back needed;
* reset unit (Lemma 16): a most-recent-flag head fetches the latest target (BOS
  holds the initial value); the MLP rounds it into ``kr:c.new``.  Its value before
  the update is ``new`` at t-1: when a reader's table really depends on it, an
  offset-1 head in the next block fetches it into ``kr:c.old`` (the gap in the
  reference's Lemma 21, which wires post-update values).
  When no reader depends on it at the letters that can reset c, readers key on
  ``new`` instead (equal to ``old`` whenever c keeps its value) and the layer is saved;
* inputs: a table lookup (Lemma 11) keyed by the exact codes of the values read
  and the token one-hot writes each component's increment / flag and target
  before its attention layer; inputs that depend on the letter only come from the
  embedding;
* views (stateless tables between levels, e.g. holonomy tiles) are folded into the
  tables that read them when the folded table stays small (no extra MLP layers);
  when folding would exceed the budgets, the view is evaluated in the network
  instead -- a lookup writing its value (of the pre-update values, ``kr:v.old``; of
  the updated values for the readout, ``kr:v.new``) into the residual -- and the
  table is keyed by the view's value, which keeps it as small as the cascade's own;
* components whose inputs are ready at the same block share it (Lemma 17);
* readout: a lookup of the new values into one logit per state, in the last MLP.

Each block's MLP = [decode these components | round fetched old values], then
[view lookups] (only for views evaluated in the network, one stage per nesting
depth), then [input lookups for the next block | readout]: 3 hidden layers, plus 2
per view stage.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.automata.cascade import Cascade, Component, to_dot
from compiler.automata.decompose import decompose
from compiler.automata.errors import BudgetError, InputError, ShortcutError
from compiler.automata.spec import Semiautomaton, from_dict

from . import krohn_rhodes_checks as checks
from .assemble import assemble
from .construction import Construction, Cost, Refusal
from .gadgets import (
    CodeInput,
    OneHotInput,
    lookup_mlp,
    modular_count_mlp,
    offset_head,
    prefix_mean_head,
    recent_flag_head,
    round_mlp,
)
from .positions import position_code, position_table
from .program import MLP, Block, Program, fuse, parallel
from .workspace import Workspace, join

NAME = "krohn-rhodes"

TABLE_ROW_BUDGET = 200_000
"""Most rows of a flattened input table (views folded in) or of the readout."""

COMBINATION_BUDGET = 2_000_000
"""Most value combinations of the components one table depends on that flattening visits."""


def _base_components(cascade: Cascade, reads: tuple[str, ...]) -> list[str]:
    """The components a list of signals depends on, views expanded (in cascade order)."""
    views = {v.name: v for v in cascade.views}
    order = {c.name: i for i, c in enumerate(cascade.components)}
    out: set[str] = set()
    todo = list(reads)
    while todo:
        r = todo.pop()
        if r in views:
            todo.extend(views[r].reads)
        else:
            out.add(r)
    return sorted(out, key=order.__getitem__)


def flatten(cascade: Cascade, reads: tuple[str, ...], table: dict, letter_keyed: bool,
            max_rows: int = TABLE_ROW_BUDGET) -> tuple[list[str], dict] | None:
    """Re-key ``table`` by the values of the base components it depends on (views folded in).

    Runs over every combination of those components' values, evaluates the views
    forward and keeps the combinations the tables know (the others are unreachable).
    Rows are ``(values, letter)`` (letter None for an unkeyed table).  None when the
    combinations would exceed their budget or the rows ``max_rows``."""
    names = _base_components(cascade, reads)
    sizes = [cascade.component(n).size for n in names]
    if math.prod(sizes) > COMBINATION_BUDGET:
        return None
    needed = set(reads)
    views = [v for v in cascade.views]
    for v in reversed(views):  # views a needed view reads are needed too
        if v.name in needed:
            needed |= set(v.reads)
    views = [v for v in views if v.name in needed]
    by_key: dict = {}
    for key, action in table.items():
        vals, letter = key if letter_keyed else (key, None)
        by_key.setdefault(vals, []).append((letter, action))
    rows: dict = {}
    for combo in itertools.product(*map(range, sizes)):
        vals = dict(zip(names, combo))
        for v in views:
            k = tuple(vals[r] for r in v.reads)
            if k not in v.table:
                break
            vals[v.name] = v.table[k]
        else:
            for letter, action in by_key.get(tuple(vals[r] for r in reads), ()):
                rows[(combo, letter)] = action
                if len(rows) > max_rows:
                    return None
    return names, rows


@dataclass
class TablePlan:
    """How the network looks a table up.

    ``keys``: the signals whose values key the lookup -- base components when the
    views were folded in, else the table's own reads; ``rows``: ``(values of keys,
    letter) -> action`` (letter None for the readout); ``views``: the views the
    network must evaluate for it (empty when folded); ``bases``: the components it
    depends on, directly or through views (they decide when it can run)."""

    keys: list[str]
    rows: dict
    views: list[str]
    bases: list[str]


def plan_table(cascade: Cascade, reads: tuple[str, ...], table: dict, letter_keyed: bool) -> TablePlan:
    """Fold the views into ``table`` unless that needs more lookup units than evaluating them.

    A folded table costs one hidden unit per row; keyed by its reads, it costs one per
    row of its own plus one per row of each view it needs (and 2 hidden layers per
    view stage).  Folding wins for the catalog (tile views feed only the readouts of
    groups); deep holonomy cascades, whose tables read every tile above them, grow
    folded tables multiplicatively and are keyed by their reads."""
    bases = _base_components(cascade, reads)
    views = _views_read(cascade, reads)
    direct_units = len(table) + sum(len(v.table) for v in cascade.views if v.name in views)
    folded = flatten(cascade, reads, table, letter_keyed, max_rows=min(TABLE_ROW_BUDGET, direct_units))
    if folded is not None:
        return TablePlan(folded[0], folded[1], [], bases)
    rows = {(key if letter_keyed else (key, None)): act for key, act in table.items()}
    if len(rows) > TABLE_ROW_BUDGET:
        raise BudgetError(f"a krohn-rhodes input table has {len(rows):,} rows (budget {TABLE_ROW_BUDGET:,}); "
                          f"use --method scan")
    return TablePlan(list(reads), rows, views, bases)


def _views_read(cascade: Cascade, reads: tuple[str, ...]) -> list[str]:
    """The views ``reads`` depend on, directly or through other views (in evaluation order)."""
    views = {v.name: v for v in cascade.views}
    needed: set[str] = set()
    todo = [r for r in reads if r in views]
    while todo:
        r = todo.pop()
        if r not in needed:
            needed.add(r)
            todo.extend(x for x in views[r].reads if x in views)
    return [v.name for v in cascade.views if v.name in needed]


def _reset_letters(c: Component) -> set[int]:
    return {letter for (_, letter), act in c.table.items() if act is not None}


def _needs_old(cascade: Cascade, plan: TablePlan, r: str, resets_at: set[int]) -> bool:
    """Whether a table depends on reset ``r``'s value at a letter that can reset r.

    Exact for a key the table reads directly; a dependence through a view evaluated
    in the network is assumed (the view reads r's value before the update)."""
    if r not in plan.bases:
        return False
    if any(r in _base_components(cascade, (v,)) for v in plan.views):
        return True
    i = plan.keys.index(r)
    seen: dict = {}
    for (vals, letter), act in plan.rows.items():
        if letter not in resets_at:
            continue
        key = (vals[:i] + vals[i + 1 :], letter)
        if seen.setdefault(key, act) != act:
            return True
    return False


@dataclass
class Schedule:
    """Where each part of the cascade runs (no weights yet).

    ``inputs``/``readout``: how each table is looked up; ``needs_old``: resets whose
    pre-update value a reader needs (fetched by an offset-1 head one block later);
    ``block_of[c]``: the block of c's attention; ``ready[c]``: the block whose MLP can
    read c's pre-update value; ``depth``: the number of blocks."""

    inputs: dict[str, TablePlan]
    readout: TablePlan
    needs_old: dict[str, bool]
    block_of: dict[str, int]
    ready: dict[str, int]
    depth: int


def schedule(cascade: Cascade) -> Schedule:
    """Plan the tables (views folded in where small) and place every component in a block
    (Lemma 17: components whose inputs are ready together share a block).  Raises
    BudgetError when a table is too large."""
    comps = cascade.components
    inputs = {c.name: plan_table(cascade, c.reads, c.table, True) for c in comps}
    readout = plan_table(cascade, cascade.readout.reads, cascade.readout.table, False)
    resets = {c.name: c for c in comps if c.kind == "reset"}
    needs_old = {r: any(_needs_old(cascade, plan, r, _reset_letters(resets[r])) for plan in inputs.values())
                 for r in resets}
    block_of: dict[str, int] = {}
    ready: dict[str, int] = {}
    for c in comps:  # components are in level order
        block_of[c.name] = 1 + max((ready[n] for n in inputs[c.name].bases), default=0)
        ready[c.name] = block_of[c.name] + (1 if needs_old.get(c.name) else 0)
    depth = max(max(block_of.values()), max(ready.values()))
    return Schedule(inputs, readout, needs_old, block_of, ready, depth)


def build(automaton: Semiautomaton, *, max_len: int, eps: float = 2.0**-23,
          cascade: Cascade | None = None) -> tuple[Program, dict[str, Any]]:
    """The constant-depth program for a solvable automaton and its metadata."""
    cascade = cascade or decompose(automaton)
    if not cascade.solvable:
        raise ShortcutError(
            f"krohn-rhodes needs a solvable automaton, but {automaton.name} contains the non-solvable group "
            f"{', '.join(cascade.non_solvable_groups)}; use --method scan (depth ceil(log2 T))")
    comps = cascade.components
    if any(c.kind == "group" for c in comps):
        raise ShortcutError(f"{automaton.name}: cascade has a whole-group component; use --method scan")
    T = max_len
    start = cascade.encode(automaton.start)
    init = dict(zip((c.name for c in comps), start))
    sch = schedule(cascade)
    inputs, readout, needs_old = sch.inputs, sch.readout, sch.needs_old
    block_of, ready, L = sch.block_of, sch.ready, sch.depth
    views = {v.name: v for v in cascade.views}
    old_views = [v for v in views if any(v in plan.views for plan in inputs.values())]
    new_views = readout.views
    # a view of pre-update values runs in the MLP of the block where its last base is ready, after
    # the views it reads (stage = nesting depth within that block); views of new values run in the last MLP
    view_block = {v: max(ready[n] for n in _base_components(cascade, (v,))) for v in old_views}
    old_stage = _view_stages(views, old_views, view_block)
    new_stage = _view_stages(views, new_views, {v: L for v in new_views})

    ws = Workspace()
    one, bos = ws.add("one"), ws.add("bos")
    tok = ws.add("tok", list(automaton.alphabet))
    logmass, recency = ws.add("pos:logmass"), ws.add("pos:recency")
    code = position_code("sinusoidal", T)
    pos = ws.add("pos", code.labels) if any(needs_old.values()) else None
    dims: dict[str, dict[str, Any]] = {}
    for c in comps:
        d = {"new": ws.add(f"kr:{c.name}.new")}
        if c.kind == "counter":
            d["inc"], d["mean"], d["old"] = ws.add(f"kr:{c.name}.inc"), ws.add(f"kr:{c.name}.mean"), ws.add(f"kr:{c.name}.old")
        else:
            d["flag"], d["target"] = ws.add(f"kr:{c.name}.flag"), ws.add(f"kr:{c.name}.target")
            d["fetched"] = ws.add(f"kr:{c.name}.fetched")
            if needs_old[c.name]:
                d["old"], d["prev"] = ws.add(f"kr:{c.name}.old"), ws.add(f"kr:{c.name}.prev")
        dims[c.name] = d
    for v in views:
        if v in old_views or v in new_views:
            dims[v] = {k: ws.add(f"kr:{v}.{k}") for k, used in (("old", v in old_views), ("new", v in new_views))
                       if used}
    state = ws.add("kr:state", list(automaton.states))
    D = ws.d_model

    sizes = {c.name: c.size for c in comps} | {v.name: v.size for v in cascade.views}

    def value_dim(name: str) -> int:
        """Where a reader finds component ``name``'s pre-update value."""
        d = dims[name]
        return d["old"][0] if "old" in d else d["new"][0]

    def input_update(c: Component, action) -> np.ndarray:
        e = np.zeros(D)
        if c.kind == "counter":
            e[dims[c.name]["inc"][0]] = action % c.size
        elif action is not None:
            e[dims[c.name]["flag"][0]] = 1.0
            e[dims[c.name]["target"][0]] = action
        return e

    # embedding: token one-hot, letter-only inputs; BOS carries flags and initial targets
    W_E = np.zeros((automaton.n_symbols + 1, D))
    W_E[:, one[0]] = 1.0
    W_E[-1, bos[0]] = 1.0
    for a in range(automaton.n_symbols):
        W_E[a, tok[a]] = 1.0
    for c in comps:
        if not inputs[c.name].keys:
            for ((), letter), act in inputs[c.name].rows.items():
                W_E[letter] += input_update(c, act)
        if c.kind == "reset":
            W_E[-1, dims[c.name]["flag"][0]] = 1.0
            W_E[-1, dims[c.name]["target"][0]] = init[c.name]
    W_pos = np.zeros((T + 1, D))
    t = np.arange(T + 1, dtype=np.float64)
    W_pos[:, logmass[0]] = np.log(2 * T - t)
    W_pos[:, recency[0]] = t / (T + 1)
    if pos is not None:
        W_pos[:, list(pos.dims)] = position_table(code)

    blocks: list[Block] = []
    for b in range(1, L + 1):
        heads, first = [], []
        counters = [c for c in comps if block_of[c.name] == b and c.kind == "counter"]
        if counters:
            src = join(f"block{b}.increments", [dims[c.name]["inc"] for c in counters])
            dst = join(f"block{b}.means", [dims[c.name]["mean"] for c in counters])
            heads.append(prefix_mean_head(f"block{b}.counters", D, logmass[0], bos[0], src, dst, T))
            for c in counters:
                # steps cover initial + count for every initial value, so shapes do not depend on the start
                first.append(modular_count_mlp(f"{c.name}.count", D, dims[c.name]["mean"][0], 2 * T, init[c.name],
                                               c.size, (c.size - 1) * (T + 1) - init[c.name], dims[c.name]["new"][0],
                                               dims[c.name]["inc"][0], dims[c.name]["old"][0]))
        for c in comps:
            if block_of[c.name] == b and c.kind == "reset":
                d = dims[c.name]
                heads.append(recent_flag_head(f"{c.name}.recent", D, d["flag"][0], recency[0], one[0], d["target"],
                                              d["fetched"], T, value_range=c.size - 1))
                first.append(round_mlp(f"{c.name}.round", D, d["fetched"], c.size, d["new"]))
            if needs_old.get(c.name) and block_of[c.name] + 1 == b:
                d = dims[c.name]
                heads.append(offset_head(f"{c.name}.previous", D, pos, code, bos[0], one[0], 1, d["new"], d["prev"],
                                         value_range=c.size - 1))
                first.append(round_mlp(f"{c.name}.old", D, d["prev"], c.size, d["old"]))
        stages: list[list[MLP]] = [first]
        for k in range(1, 1 + max([old_stage[v] for v in old_views if view_block[v] == b]
                                  + [new_stage[v] for v in new_views if b == L], default=0)):
            stages.append([_view_mlp(views[v], "old", sizes, dims, D) for v in old_views
                           if view_block[v] == b and old_stage[v] == k]
                          + [_view_mlp(views[v], "new", sizes, dims, D) for v in new_views
                             if b == L and new_stage[v] == k])
        second = []
        for c in comps:
            plan = inputs[c.name]
            if plan.keys and block_of[c.name] == b + 1:
                ins = [CodeInput(value_dim(n), sizes[n]) for n in plan.keys] + [OneHotInput(tok.dims)]
                table = {(*vals, letter): input_update(c, act) for (vals, letter), act in plan.rows.items()}
                table = {k: v for k, v in table.items() if v.any()}
                if table:
                    second.append(lookup_mlp(f"{c.name}.input", D, ins, table))
        if b == L:
            second.append(_readout_mlp(readout, sizes, dims, state, D))
        stages.append(second)
        blocks.append(Block(heads, _stack(stages, f"block{b}.mlp")))

    W_U = np.zeros((D, automaton.n_states))
    W_U[list(state.dims), np.arange(automaton.n_states)] = 1.0
    meta = {
        "method": NAME,
        "positions": "sinusoidal" if pos is not None else None,
        "warnings": [],
        "krohn_rhodes": {
            "levels": len(cascade.levels),
            "blocks": L,
            "components": [{"name": c.name, "kind": c.kind, "size": c.size, "level": c.level,
                            "block": block_of[c.name], "reads": inputs[c.name].keys,
                            "old_fetched": bool(needs_old.get(c.name))} for c in comps],
            "views": [{"name": v, "size": sizes[v], "old": v in old_views, "new": v in new_views,
                       "block": view_block.get(v, L)} for v in views if v in old_views or v in new_views],
            "readout_reads": readout.keys,
        },
        "layers": [{"heads": [h.notes for h in blk.heads], "mlp": blk.mlp.notes if blk.mlp else None}
                   for blk in blocks],
    }
    return Program(ws, W_E, W_pos, blocks, W_U, np.zeros(automaton.n_states)), meta


def _view_stages(views: dict, names: list[str], block: dict[str, int]) -> dict[str, int]:
    """Nesting depth of each view among those evaluated in the same block (1 = reads no such view)."""
    stage: dict[str, int] = {}
    for v in views:  # evaluation order: a view's reads come first
        if v in names:
            stage[v] = 1 + max((stage[r] for r in views[v].reads if r in stage and block[r] == block[v]), default=0)
    return stage


def _stack(stages: list[list[MLP]], name: str) -> MLP | None:
    """Each stage's MLPs side by side (Lemma 17), the stages fused one after another."""
    out = None
    for i, stage in enumerate(s for s in stages if s):
        m = parallel(stage, f"{name}.{i}")
        out = m if out is None else fuse(out, m, name)
    return out


def _view_mlp(view, when: str, sizes: dict[str, int], dims, D: int) -> MLP:
    """A view (Lemma 11 lookup) of the pre-update (``old``) or updated (``new``) values into ``kr:v.<when>``."""
    def dim(n: str) -> int:
        d = dims[n]
        return d[when][0] if when in d else d["new"][0]  # a reset without an old copy keeps its value
    ins = [CodeInput(dim(r), sizes[r]) for r in view.reads]
    table = {}
    for key, value in view.table.items():
        if value:  # no match writes 0
            table[key] = np.zeros(D)
            table[key][dims[view.name][when][0]] = value
    return lookup_mlp(f"{view.name}.{when}", D, ins, table)


def _readout_mlp(plan: TablePlan, sizes: dict[str, int], dims, state, D: int) -> MLP:
    """New values (of components, or of views evaluated in the network) -> one-hot of the state (logit margin 1)."""
    ins = [CodeInput(dims[n]["new"][0], sizes[n]) for n in plan.keys]
    table = {}
    for (vals, _), q in plan.rows.items():
        e = np.zeros(D)
        e[state[q]] = 1.0
        table[vals] = e
    return lookup_mlp("readout", D, ins, table)


def set_start(model, cascade: Cascade, start: str) -> None:
    """Rebuild ``model`` for start state ``start`` from its cascade and copy the weights in (in place).

    The start state lives in the initial values (BOS's targets, the counters' offsets);
    every shape is start-independent, so the weights swap in directly.  The cascade is
    the decomposition's, whatever the start (only its initial values move)."""
    a = model.automaton
    if start not in a.state_index:
        raise InputError(f"unknown start state {start!r}; the states of {a.name} are {list(a.states)}")
    spec = {**model.meta["automaton"], "start": start}
    other = from_dict(spec)
    restarted = cascade.with_start(other)
    program, meta = build(other, max_len=model.max_len, cascade=restarted)
    new = assemble(program, max_len=model.max_len, dtype=model.W_E.dtype,
                   meta={**model.meta, **meta, "automaton": spec, "plan": restarted.to_dict()})
    model.load_state_dict(new.state_dict())
    model.meta = new.meta
    model._automaton = None


# ---------------------------------------------------------------------------------------
# the registry entry: the cascade is the plan


def applies(automaton: Semiautomaton) -> Cascade | Refusal:
    """The verified cascade, or why Theorem 11 does not apply (not solvable, over a budget)."""
    try:
        cascade = decompose(automaton)
    except ShortcutError as e:
        return Refusal(str(e), type(e))
    if not cascade.solvable:
        return Refusal(f"krohn-rhodes needs a solvable automaton, but {automaton.name} contains the non-solvable "
                       f"group {', '.join(cascade.non_solvable_groups)}; use --method scan (depth ceil(log2 T))")
    if any(c.kind == "group" for c in cascade.components):
        return Refusal(f"{automaton.name}: cascade has a whole-group component; use --method scan")
    return cascade


def estimate(cascade: Cascade, max_len: int, positions: str = "sinusoidal") -> Cost:
    """Depth from the schedule (independent of max_len); parameters are known only once
    the lookups are laid out."""
    return Cost(schedule(cascade).depth, None)


def build_plan(automaton: Semiautomaton, cascade: Cascade, *, max_len: int, eps: float,
               positions: str) -> tuple[Program, dict[str, Any]]:
    """:func:`build` from the plan (``positions`` is not used: offset heads are sinusoidal)."""
    return build(automaton, max_len=max_len, eps=eps, cascade=cascade)


def describe(cascade: Cascade, automaton: Semiautomaton) -> str:
    return (f"solvable; a cascade of {len(cascade.levels)} level(s), {len(cascade.components)} component(s), "
            f"{cascade.counter_levels} with counters")


CONSTRUCTION = Construction(
    name=NAME, theorem="Theorem 11", applies=applies, estimate=estimate, build=build_plan, set_start=set_start,
    plan_to_json=Cascade.to_dict, plan_from_json=Cascade.from_dict, describe=describe,
    invariants=checks.invariants, diagram=lambda cascade: ("Cascade", to_dot(cascade)),
)
