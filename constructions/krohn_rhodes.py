"""Theorem 11: solvable automata in depth independent of T, from a verified cascade.

The Krohn-Rhodes decomposer (compiler/automata/decompose.py) gives a cascade of modular
counters and reset (memory) units; component c's input at step t is a table of
the *pre-update* values of the components above it and the letter.  This module
compiles it:

* counter (Lemma 15): a prefix-mean head sums its increments -- or, where float32's
  worst-case rounding of one sum over all T positions exceeds the tolerance, s heads
  each summing one block of ceil(T / s) positions into the same dims
  (:func:`counter_blocks`, :func:`counter_heads`); the MLP decodes the sum mod n (``kr:c.new``) with the residue gadget (coarse steps, then a one-hot over
  M residues, n | M: width O(sqrt(n T)), :func:`counter_residue`) and, subtracting the
  increment at t, the value before the update (``kr:c.old``, only when some table
  reads it) -- no look-back needed;
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
depth), then [input lookups for the next block | readout]: 3 hidden layers (6 when
the block decodes a counter, 7 when a table reads a counter's value before the update:
the residue gadget has 4 or 5, the MLPs beside it are padded with identity layers),
plus 2 per view stage.

:func:`build` runs four separately tested steps: :func:`schedule` (which component
goes in which block, which resets need their old value; no weights), :func:`allocate`
(the residual subspaces), :func:`embedding` (W_E, W_pos) -- these three, the tables' plans
and the counters' position blocks in :mod:`constructions.krohn_rhodes_layout` -- and
:func:`embed` (gadgets into blocks, here); :func:`precision` then checks the target dtype's
rounding.  The program is declared once: each gadget states the obligation its weights run
(prefix means, most-recent flags, offset-1 fetches, decodes, roundings, lookups), a stage of
MLPs side by side runs as steps in order (:func:`_in_order`), and :func:`build` adds the tracked
subspaces, the readout (:func:`readout_table`) and the reachable configurations it claims.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from compiler.automata.cascade import Cascade, Component, to_dot
from compiler.automata.decompose import decompose
from compiler.automata.errors import ShortcutError
from compiler.automata.spec import Semiautomaton, from_dict

from .assemble import count_params
from .budget import STEP_TOLERANCE
from .construction import ONE_HIDDEN_LAYER, BuildOptions, Construction, Cost, Refusal, check_start, declared_obligations, rebuild
from .krohn_rhodes_layout import (
    Layout,
    Schedule,
    TablePlan,
    allocate,
    block_heads,
    configurations,
    counter_high,
    depth_floor,
    embedding,
    input_update,
    prefix_sum_bounds,
    schedule,
    tracked,
)
from .gadgets import (
    CodeInput,
    OneHotInput,
    Ramp,
    Residue,
    lookup_mlp,
    offset_head,
    prefix_mean_head,
    recency_margin,
    recent_flag_head,
    residue_hidden,
    residue_margin,
    residue_mlp,
    residue_range,
    round_mlp,
    staircase_margin,
)
from .gadgets.lookups import lookup_obligation
from .krohn_rhodes_flat import flat_mlp, flat_refusal
from .krohn_rhodes_readout import add_one_hots, interpolable, late_one_hots, one_hot_readout_keys, one_hot_unembedding
from .obligations import Beside, Lookup, Modular, Readout, Steps
from .positions import KINDS
from .program import MLP, Block, Declaration, Fused, Head, Program, beside, fuse, fused_obligation, obligation_name
from .workspace import Subspace, Workspace, join
from .model import CompiledTransformer

NAME = "krohn-rhodes"


# ---------------------------------------------------------------------------------------
# embed: gadgets into blocks

def counter_residue(n: int, max_len: int) -> Residue:
    """The residue gadget's constants for a mod-n counter at ``max_len`` (Lemma 15's decode).

    X = initial + the sum of t <= T increments in 0..n-1 lies in 0..(n-1)(T+1) whatever
    the start (so shapes do not depend on it).  M is the multiple of n (then X mod M fixes
    X mod n, and (X - D) mod n for the value before an increment D) that minimises the
    decode's parameters (:func:`counter_hidden`), about R^2/M^2 + 2R + 2M^2 for a range R:
    M ~ sqrt(R) and widths O(sqrt(n T)), instead of the paper's O(n T) steps."""
    high = (n - 1) * (max_len + 1)
    candidates = range(n, n * (2 + (2 * math.isqrt(high) + n) // n), n)

    def cost(M: int) -> int:
        hidden = residue_hidden(residue_range(0, high, M), bos=False, minus_max=n - 1, period=n)
        return sum(a * b for a, b in zip([2, *hidden], [*hidden, 2]))
    return residue_range(0, high, min(candidates, key=cost))


def counter_hidden(n: int, max_len: int, old: bool) -> list[int]:
    """Hidden widths of a mod-n counter's decode at ``max_len`` (``old``: with the value before
    the update); the one size computation :func:`counter_mlp` and any estimate share."""
    return residue_hidden(counter_residue(n, max_len), bos=False, minus_max=n - 1 if old else None, period=n)


def counter_mlp(c: Component, d: dict[str, Subspace], initial: int, max_len: int, mass: int) -> MLP:
    """A counter's decode (Lemma 15): X = mass * prefix mean (the block heads' sum) + initial,
    an integer up to the heads' rounding and leak; ``kr:c.new`` = X mod n and, where allocated, ``kr:c.old`` =
    (X - increment at t) mod n, through :func:`gadgets.residue_mlp` (n | M)."""
    res = counter_residue(c.size, max_len)
    table = (np.arange(res.modulus) % c.size)[:, None].astype(np.float64)
    old = "old" in d
    mlp = residue_mlp(f"{c.name}.count", d["mean"], res, d["new"], table, weights=(float(mass),),
                      shift=initial, minus=d["inc"] if old else None, minus_max=c.size - 1,
                      minus_out=d.get("old"), period=c.size, notes={"component": c.name, "counter_modulus": c.size})
    assert mlp.hidden_sizes == counter_hidden(c.size, max_len, old)
    return mlp


def _pad(mlp: MLP, depth: int) -> MLP:
    """``mlp`` with identity hidden layers appended up to ``depth`` (relu is the identity on
    its non-negative hidden units), to run beside a deeper one (:func:`beside`)."""
    h, extra = mlp.hidden_sizes[-1], depth - len(mlp.hidden_sizes)
    if extra <= 0:
        return mlp
    return MLP(mlp.name, [*mlp.weights[:-1], *[np.eye(h)] * extra, mlp.weights[-1]],
               [*mlp.biases[:-1], *[np.zeros(h)] * extra, mlp.biases[-1]],
               {**mlp.notes, "padded_to": depth}, reads=mlp.reads, writes=mlp.writes, obligation=mlp.obligation)


def counter_heads(name: str, lay: Layout, src: Subspace, dst: Subspace, max_len: int) -> list[Head]:
    """The prefix-mean heads of a block's counters (Lemma 15): one over all positions, or
    one per position block (:class:`CounterBlocks`), all writing into ``dst``."""
    if lay.member is None:
        return [prefix_mean_head(name, lay.absorb, lay.bos, src, dst, mass=lay.blocks.mass, max_len=max_len)]
    return block_heads(name, lay.blocks, lay.absorb, lay.bos, lay.one, lay.member, src, dst, max_len)


def _attention(b: int, cascade: Cascade, sched: Schedule, lay: Layout, init: dict[str, int],
               max_len: int) -> tuple[list[Head], list[MLP]]:
    """Block b's heads (counters' shared prefix mean, resets' most recent flag, offset-1
    fetches of old values) and the MLPs decoding what they fetched."""
    T, comps, subs = max_len, cascade.components, lay.subs
    heads: list[Head] = []
    first: list[MLP] = []
    counters = [c for c in comps if sched.block_of[c.name] == b and c.kind == "counter"]
    if counters:
        src = join(f"block{b}.increments", [subs[c.name]["inc"] for c in counters])
        dst = join(f"block{b}.means", [subs[c.name]["mean"] for c in counters])
        heads += counter_heads(f"block{b}.counters", lay, src, dst, T)
        for c in counters:
            d = subs[c.name]
            first.append(counter_mlp(c, d, init[c.name], T, lay.blocks.mass))
    for c in comps:
        d = subs[c.name]
        if sched.block_of[c.name] == b and c.kind == "reset":
            heads.append(recent_flag_head(f"{c.name}.recent", d["flag"], lay.recency, lay.one, d["target"],
                                          d["fetched"], T, value_range=c.size - 1))
            first.append(round_mlp(f"{c.name}.round", d["fetched"], c.size, d["new"]))
        if sched.needs_old.get(c.name) and sched.block_of[c.name] + 1 == b:
            pos, code = lay.positions()
            heads.append(offset_head(f"{c.name}.previous", pos, code, lay.bos, lay.one, 1, d["new"], d["prev"],
                                     value_range=c.size - 1))
            first.append(round_mlp(f"{c.name}.old", d["prev"], c.size, d["old"]))
    depth = max((len(m.hidden_sizes) for m in first), default=0)
    return heads, [_pad(m, depth) for m in first]


def _lookups(b: int, cascade: Cascade, sched: Schedule, lay: Layout) -> list[MLP]:
    """Block b's last MLP stage: the input tables of components attending in block b + 1
    (and the readout in the last block)."""
    sizes = _sizes(cascade)
    out = [_input_mlp(c, sched.inputs[c.name], sizes, lay) for c in cascade.components
           if sched.inputs[c.name].keys and sched.block_of[c.name] == b + 1]
    if b == sched.n_blocks:
        out.append(_readout_mlp(sched.readout, sizes, lay))
    return [m for m in out if m is not None]


def _input_mlp(c: Component, plan: TablePlan, sizes: dict[str, int], lay: Layout) -> MLP | None:
    """Component c's input table (Lemma 11), keyed by the codes of its keys' values and the token
    one-hot (None when no row changes c).  Obligation: the table with the letter as its one-hot,
    every other key writing 0 (the rows that keep c write 0 too)."""
    ins = [CodeInput(lay.value(n), sizes[n]) for n in plan.keys] + [OneHotInput(lay.tok)]
    table = {(*vals, letter): input_update(c, act) for (vals, letter), act in plan.rows.items()}
    written = {k: v for k, v in table.items() if v.any()}
    if not written:
        return None
    out, letter = lay.input_out(c), np.eye(len(lay.tok), dtype=np.int64)
    declared = Lookup(f"{c.name}.input", tuple(obligation_name(i.sub) for i in ins), obligation_name(out),
                      {(*(int(v) for v in k[:-1]), *letter[k[-1]].tolist()): v for k, v in table.items()},
                      np.zeros(len(out)))
    return replace(lookup_mlp(f"{c.name}.input", ins, out, written), obligation=declared)


def _zero_elsewhere(name: str, ins: list[CodeInput], out: Subspace, table: dict) -> MLP:
    """A lookup (Lemma 11) of ``table``; its units match only the keys with a nonzero value, so
    every other key writes 0, as its obligation says (``table``, default 0)."""
    written = {k: v for k, v in table.items() if np.any(v)}
    return replace(lookup_mlp(name, ins, out, written),
                   obligation=lookup_obligation(name, ins, out, table, total=True))


def embed(cascade: Cascade, sched: Schedule, lay: Layout, init: dict[str, int], max_len: int,
          flat: bool = False) -> list[Block]:
    """The blocks.  Each MLP = [decode this block's components | round fetched old values],
    then one stage per nesting depth of in-network views, then [next block's inputs | readout];
    ``flat``: the same MLP as one staircase of two hidden layers (:mod:`.krohn_rhodes_flat`, which
    states the default MLP's obligation less the codes no other block reads)."""
    views = {v.name: v for v in cascade.views}
    sizes = _sizes(cascade)
    L = sched.n_blocks
    blocks: list[Block] = []
    for b in range(1, L + 1):
        heads, first = _attention(b, cascade, sched, lay, init, max_len)
        old_here = [v for v in sched.old_views if sched.view_block[v] == b]
        new_here = sched.new_views if b == L else []
        stages: list[list[MLP]] = [first]
        for k in range(1, 1 + max([sched.old_stage[v] for v in old_here] + [sched.new_stage[v] for v in new_here],
                                  default=0)):
            stages.append([_view_mlp(views[v], "old", sizes, lay) for v in old_here if sched.old_stage[v] == k]
                          + [_view_mlp(views[v], "new", sizes, lay) for v in new_here if sched.new_stage[v] == k])
        stages.append(_lookups(b, cascade, sched, lay))
        blocks.append(Block(heads, _stack(stages, f"block{b}.mlp", lay.ws)))
    if not flat:
        return blocks
    reads = [read_by(block) for block in blocks]
    obligations = [None if block.mlp is None else block.mlp.obligation for block in blocks]
    late = tuple(late_one_hots(cascade, sched, lay, max_len, obligations))
    decodes = {st.out: st for o in obligations if o is not None for st in o.leaves() if isinstance(st, Modular)}
    return [Block(block.heads, None if block.mlp is None else flat_mlp(
        b, cascade, sched, lay, init, max_len, lay.blocks.mass, block.mlp.obligation,
        set().union(*(r for i, r in enumerate(reads, 1) if i != b)), late, decodes)) for b, block in enumerate(blocks, 1)]


def read_by(block: Block) -> set[str]:
    """The subspace names a block's heads and MLP read, by their obligations."""
    parts = [*block.heads, *([] if block.mlp is None else [block.mlp])]
    return {n for p in parts if p.obligation is not None for n in p.obligation.names_read()}


def _sizes(cascade: Cascade) -> dict[str, int]:
    return {c.name: c.size for c in cascade.components} | {v.name: v.size for v in cascade.views}


def _stack(stages: list[list[MLP]], name: str, ws: Workspace) -> MLP | Fused | None:
    """Each stage's MLPs side by side (Lemma 17), the stages fused one after another."""
    out: MLP | Fused | None = None
    for i, stage in enumerate(s for s in stages if s):
        m = _in_order(beside(stage, f"{name}.{i}", ws))
        out = m if out is None else fuse(out, m, name)
    return out


def _in_order(stage: MLP) -> MLP:
    """A stage of MLPs side by side declared as their steps one after another: no part reads what
    another part of the stage writes, so in order they compute what side by side they do."""
    o, declared = stage.obligation, Steps(stage.name, ())
    for part in o.parts if isinstance(o, Beside) else (o,):
        declared = fused_obligation(stage.name, declared, part)
    return replace(stage, obligation=declared)


def _view_mlp(view, when: str, sizes: dict[str, int], lay: Layout) -> MLP:
    """A view (Lemma 11 lookup) of the pre-update (``old``) or updated (``new``) values into ``kr:v.<when>``."""
    def sub(n: str) -> Subspace:
        d = lay.subs[n]
        return d[when] if when in d else d["new"]  # a reset without an old copy keeps its value
    ins = [CodeInput(sub(r), sizes[r]) for r in view.reads]
    table = {key: np.array([float(value)]) for key, value in view.table.items()}
    return _zero_elsewhere(f"{view.name}.{when}", ins, lay.subs[view.name][when], table)


def _readout_mlp(plan: TablePlan, sizes: dict[str, int], lay: Layout) -> MLP:
    """New values (of components, or of views evaluated in the network) -> one-hot of the state (logit margin 1)."""
    ins = [CodeInput(lay.subs[n]["new"], sizes[n]) for n in plan.keys]
    eye = np.eye(len(lay.state))
    table = {vals: eye[q] for (vals, _), q in plan.rows.items()}
    return _zero_elsewhere("readout", ins, lay.state, table)


# ---------------------------------------------------------------------------------------
# precision and build


def precision(cascade: Cascade, sched: Schedule, lay: Layout, max_len: int, eps: float,
              flat: bool = False) -> dict[str, float]:
    """How far the dtype's rounding (machine epsilon ``eps``) stays inside each tolerance
    (margins > 1 are safe; worst-case bounds, the measured errors are far smaller).

    * counters: the prefix mean times the mass sums t increments of size <= n - 1, in s
      position blocks of length L: rounding ~eps (n - 1) (s L (L + 1) + (s - 1) T) plus
      the out-of-block leak (:func:`prefix_sum_bounds`; s = 1: eps (n - 1) T (T + 1)),
      against STEP_TOLERANCE; ``prefix_leak_margin`` (blocks only): the leak alone;
      the decode's ramps (:func:`gadgets.residue_margin`, terms up to 4 (n - 1)(T + 1); ``flat``:
      the staircase's, :func:`gadgets.staircase.staircase_margin`);
    * most-recent-flag heads: scores beta (flag + recency/2) <= 1.5 beta separate the
      latest flag by beta / (2 (T + 1)); margin = half that gap over 4 eps * 1.5 beta;
    * offset-1 heads: the position code's own margin (:meth:`PositionCode.precision_margin`).
    """
    T = max_len
    out: dict[str, float] = {}
    counters = [c.size for c in cascade.components if c.kind == "counter"]
    if counters:
        rounding, leak = prefix_sum_bounds(max(counters), T, lay.blocks, eps)
        out["prefix_sum_margin"] = STEP_TOLERANCE / (rounding + leak + 1e-300)
        if lay.blocks.count > 1:
            out["prefix_leak_margin"] = STEP_TOLERANCE / (leak + 1e-300)
        if flat:
            out["residue_margin"] = staircase_margin([Ramp(lay.one, 1.0, 0, counter_high(n, T)) for n in counters], eps)
        else:
            out["residue_margin"] = min(residue_margin(counter_residue(n, T), eps) for n in counters)
    if any(c.kind == "reset" for c in cascade.components):
        out["recency_margin"] = recency_margin(T, eps)
    if lay.code is not None:
        out["position_margin"] = lay.code.precision_margin(eps)
    out["margin"] = min(out.values(), default=math.inf)
    return out


def _warnings(prec: dict[str, float], max_len: int) -> list[str]:
    """A warning naming the mechanisms whose worst-case rounding bound exceeds its tolerance."""
    if prec["margin"] >= 1:
        return []
    weak = [w for k, w in _WHAT.items() if prec.get(k, math.inf) < 1]
    return [(f"krohn-rhodes at max_len {max_len}: the worst-case rounding bound of this dtype for the "
             f"{' and '.join(weak)} exceeds its tolerance (margin {prec['margin']:.2g}); measured errors "
             f"are far smaller, but verify before trusting, or use float64")]


_WHAT = {"prefix_sum_margin": "counters' prefix sums", "prefix_leak_margin": "counters' block leak",
         "residue_margin": "counters' residue ramps",
         "recency_margin": "most-recent-flag scores",
         "position_margin": "offset-1 position scores"}


def _meta(cascade: Cascade, sched: Schedule, lay: Layout, blocks: list[Block], prec: dict[str, float],
          warnings: list[str]) -> dict[str, Any]:
    """The program's metadata: the schedule per component and view, precision, per-layer notes."""
    sizes = _sizes(cascade)
    return {
        "method": NAME,
        "positions": "sinusoidal" if lay.pos is not None else None,
        "warnings": warnings,
        "krohn_rhodes": {
            "levels": len(cascade.levels),
            "blocks": sched.n_blocks,
            "components": [{"name": c.name, "kind": c.kind, "size": c.size, "level": c.level,
                            "block": sched.block_of[c.name], "reads": sched.inputs[c.name].keys,
                            "old_fetched": bool(sched.needs_old.get(c.name))} for c in cascade.components],
            "views": [{"name": v.name, "size": sizes[v.name], "old": v.name in sched.old_views,
                       "new": v.name in sched.new_views, "block": sched.view_block.get(v.name, sched.n_blocks)}
                      for v in cascade.views if v.name in sched.old_views or v.name in sched.new_views],
            "readout_reads": sched.readout.keys,
            "prefix_blocks": {"count": lay.blocks.count, "length": lay.blocks.length, "mass": lay.blocks.mass,
                              "beta": lay.blocks.beta},
            "precision": prec,
        },
        "layers": [blk.notes() for blk in blocks],
    }


def _check_positions(automaton: Semiautomaton, sched: Schedule, positions: str) -> None:
    """Offset-1 heads use sinusoidal positions only; ShortcutError when another code is asked for."""
    if sched.needs_positions and positions != "sinusoidal":
        raise ShortcutError(f"krohn-rhodes for {automaton.name} fetches old values with offset-1 heads, which use "
                            f"sinusoidal positions only (exact at every max_len); {positions!r} is for --method scan "
                            f"or gridworld")


def build(automaton: Semiautomaton, cascade: Cascade, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The constant-depth program for a solvable automaton, from its cascade, and its metadata.

    ``options.eps`` is the target dtype's machine epsilon (the precision check warns when a
    worst-case rounding bound exceeds a tolerance); ``options.positions`` is the code of the
    offset-1 heads, the only place a position code is used: only ``sinusoidal`` (exact at
    every max_len) is accepted when such heads are needed, and a program without them ignores it."""
    T, eps, positions = options.max_len, options.eps, options.positions
    refusal = unsupported(automaton, cascade)
    if refusal is not None:
        raise refusal.error(refusal.reason)
    comps = cascade.components
    if positions not in KINDS:
        raise ShortcutError(f"unknown positions {positions!r}; choose one of {list(KINDS)}")
    init = dict(zip((c.name for c in comps), cascade.encode(automaton.start)))
    sched = schedule(cascade)
    _check_positions(automaton, sched, positions)
    flat = options.one_hidden_layer and flat_refusal(cascade, sched) is None
    lay = allocate(automaton, cascade, sched, T, positions)
    hot = one_hot_readout_keys(cascade, sched, bool(interpolable(cascade, sched, lay, T))) if flat else []
    add_one_hots(lay, hot, _sizes(cascade))
    W_E, W_pos = embedding(automaton, cascade, sched, lay, init, T)
    blocks = embed(cascade, sched, lay, init, T, flat)
    W_U = np.zeros((lay.ws.d_model, automaton.n_states))
    W_U[list(lay.state.dims), np.arange(automaton.n_states)] = 1.0
    readout = readout_table(lay)
    if hot:
        W_U, readout = one_hot_unembedding(lay, sched, automaton.n_states)
    prec = precision(cascade, sched, lay, T, eps, flat)
    warnings = _warnings(prec, T)
    meta = _meta(cascade, sched, lay, blocks, prec, warnings) | ({ONE_HIDDEN_LAYER: True} if flat else {})
    declared = Declaration(NAME, tracked(lay), readout, joint=configurations(
        cascade, lay, tuple(init[c.name] for c in comps), automaton.n_symbols))
    return Program(lay.ws, W_E, W_pos, blocks, W_U, np.zeros(automaton.n_states), declaration=declared), meta


def readout_table(lay: Layout) -> Readout:
    """What the unembedding must read out (its obligation): state q from its one-hot in ``kr:state``."""
    eye = np.eye(len(lay.state), dtype=np.int64)
    return Readout((lay.state.name,), {tuple(eye[q].tolist()): q for q in range(len(lay.state))})


def set_start(model: CompiledTransformer, cascade: Cascade, start: str) -> None:
    """Rebuild ``model`` for start state ``start`` from its cascade and copy the weights in (in place).

    The start state lives in the initial values (BOS's targets, the counters' offsets);
    every shape is start-independent, so the weights swap in directly.  The cascade is
    the decomposition's, whatever the start (only its initial values move)."""
    check_start(model.automaton, start)
    restarted = cascade.with_start(from_dict({**model.metadata.automaton, "start": start}))
    rebuild(model, build, restarted, start, meta={"plan": restarted.to_dict()})


# ---------------------------------------------------------------------------------------
# the registry entry: the cascade is the plan


def applies(automaton: Semiautomaton) -> Cascade | Refusal:
    """The verified cascade, or why Theorem 11 does not apply (not solvable, over a budget)."""
    try:
        cascade = decompose(automaton)
    except ShortcutError as e:
        return Refusal(str(e), type(e))
    return unsupported(automaton, cascade) or cascade


def unsupported(automaton: Semiautomaton, cascade: Cascade) -> Refusal | None:
    """Why Theorem 11's construction cannot compile ``cascade`` (a non-solvable group, a
    whole-group component, or no component at all), or None."""
    if not cascade.solvable:
        return Refusal(f"krohn-rhodes needs a solvable automaton, but {automaton.name} contains the non-solvable "
                       f"group {', '.join(cascade.non_solvable_groups)}; use --method scan (depth ceil(log2 T))")
    if any(c.kind == "group" for c in cascade.components):
        return Refusal(f"{automaton.name}: cascade has a whole-group component; use --method scan")
    if not cascade.components:
        return Refusal(f"{automaton.name} has a single state: its cascade has no component to run "
                       f"(use --method scan)")
    return None


def estimate(cascade: Cascade, max_len: int, positions: str = "sinusoidal") -> Cost:
    """Exact depth and parameters: the schedule, the residual layout and the blocks' gadgets
    (lookups laid out) made as :func:`build` makes them, counted without the embedding,
    position and unembedding weights (``assemble.count_params``)."""
    if positions not in KINDS:
        raise ShortcutError(f"unknown positions {positions!r}; choose one of {list(KINDS)}")
    a = cascade.automaton
    sched = schedule(cascade)
    _check_positions(a, sched, positions)
    lay = allocate(a, cascade, sched, max_len, positions)
    blocks = embed(cascade, sched, lay, dict(zip((c.name for c in cascade.components), cascade.encode(a.start))),
                   max_len)
    return Cost(len(blocks), count_params(lay.ws, blocks, n_symbols=a.n_symbols, n_out=a.n_states, max_len=max_len))


def describe(cascade: Cascade, automaton: Semiautomaton) -> str:
    return (f"solvable; a cascade of {len(cascade.levels)} level(s), {len(cascade.components)} component(s), "
            f"{cascade.counter_levels} with counters")


CONSTRUCTION = Construction(
    name=NAME, theorem="Theorem 11", applies=applies, estimate=estimate, build=build, set_start=set_start,
    plan_to_json=Cascade.to_dict, plan_from_json=Cascade.from_dict, describe=describe,
    diagram=lambda cascade: ("Cascade", to_dot(cascade)), obligations=declared_obligations(build),
    floor=depth_floor,
)
