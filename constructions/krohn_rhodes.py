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
(the residual subspaces), :func:`embedding` (W_E, W_pos) and :func:`embed` (gadgets
into blocks); :func:`precision` then checks the target dtype's rounding.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.automata.cascade import Cascade, Component, to_dot
from compiler.automata.decompose import decompose
from compiler.automata.errors import BudgetError, ShortcutError
from compiler.automata.spec import Semiautomaton, from_dict

from . import krohn_rhodes_checks as checks
from .assemble import count_params
from .budget import STEP_TOLERANCE
from .construction import BuildOptions, Construction, Cost, Refusal, check_start, rebuild
from .obligations import (Average, Embedding, Fetch, Joint, Layer, Lookup, Modular, Obligations, Readout, Recent, Round,
                          Steps, offset_keys)
from .gadgets import (
    ABSORB,
    CodeInput,
    OneHotInput,
    PositionBlock,
    Residue,
    absorb_feature,
    lookup_mlp,
    offset_head,
    prefix_mean_head,
    recent_flag_head,
    residue_hidden,
    residue_margin,
    residue_mlp,
    residue_range,
    round_mlp,
)
from .positions import KINDS, PositionCode, position_code, position_table
from .program import MLP, Block, Fused, Head, Program, fuse, parallel
from .workspace import Subspace, Workspace, join

NAME = "krohn-rhodes"

TABLE_ROW_BUDGET = 200_000
"""Most rows of a flattened input table (views folded in) or of the readout."""

COMBINATION_BUDGET = 2_000_000
"""Most value combinations of the components one table depends on that flattening visits."""

CERTIFIED_EPS = 2.0**-23
"""Machine epsilon the counters' position blocks are chosen for: float32's, the coarsest dtype
compiled.  The model's shape and weights then do not depend on the dtype (``estimate`` has
none, ``set_start`` rebuilds without one), and float64 only gains margin."""

PREFIX_TOLERANCE = STEP_TOLERANCE * 0.8
"""The share of the decode's input tolerance a counter's prefix sum may use by
:func:`prefix_sum_bounds`; the rest is for the decode's own rounding (``residue_margin``, a few
per cent) and for the certificate, whose bound on a block head adds the softmax's rounding to
the sum's.  Measured: cyclic:3 at max_len 4096 with its sum at 99.4% of STEP_TOLERANCE (19
blocks) is refused at its decode, at 80% (28 blocks) it is certified."""


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


# ---------------------------------------------------------------------------------------
# schedule: which component runs in which block (no weights)


@dataclass
class Schedule:
    """Where every part of the cascade runs (pure bookkeeping, no weights).

    ``inputs``/``readout``: how each table is looked up; ``needs_old``: resets whose
    pre-update value a reader needs (an offset-1 head fetches it); ``block_of``: block of
    each component's attention; ``ready``: block whose MLP can read its pre-update value;
    ``old_views``/``new_views``: views evaluated in the network on pre-update / updated
    values, in ``view_block`` at nesting depth ``old_stage``/``new_stage``."""

    inputs: dict[str, TablePlan]
    readout: TablePlan
    needs_old: dict[str, bool]
    block_of: dict[str, int]
    ready: dict[str, int]
    n_blocks: int
    old_views: list[str]
    new_views: list[str]
    view_block: dict[str, int]
    old_stage: dict[str, int]
    new_stage: dict[str, int]

    @property
    def needs_positions(self) -> bool:
        """Whether an offset-1 head (the only user of a position code) is needed."""
        return any(self.needs_old.values())

    def read_before_update(self, name: str) -> bool:
        """Whether some input table depends on ``name``'s pre-update value (directly or through a view)."""
        return any(name in plan.bases for plan in self.inputs.values())


def schedule(cascade: Cascade) -> Schedule:
    """Plan the tables, decide which resets need their old value, and place every
    component and view in a block (Lemma 17: components ready together share a block)."""
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
    L = max(max(block_of.values()), max(ready.values()))
    views = {v.name: v for v in cascade.views}
    old_views = [v for v in views if any(v in plan.views for plan in inputs.values())]
    new_views = readout.views
    # a view of pre-update values runs in the MLP of the block where its last base is ready, after
    # the views it reads (stage = nesting depth within that block); views of new values run in the last MLP
    view_block = {v: max(ready[n] for n in _base_components(cascade, (v,))) for v in old_views}
    return Schedule(inputs, readout, needs_old, block_of, ready, L, old_views, new_views, view_block,
                    _view_stages(views, old_views, view_block), _view_stages(views, new_views, {v: L for v in new_views}))


def _view_stages(views: dict, names: list[str], block: dict[str, int]) -> dict[str, int]:
    """Nesting depth of each view among those evaluated in the same block (1 = reads no such view)."""
    stage: dict[str, int] = {}
    for v in views:  # evaluation order: a view's reads come first
        if v in names:
            stage[v] = 1 + max((stage[r] for r in views[v].reads if r in stage and block[r] == block[v]), default=0)
    return stage


# ---------------------------------------------------------------------------------------
# counter blocks: the prefix sum split over position blocks


@dataclass(frozen=True)
class CounterBlocks:
    """How the counters' prefix sums are split (Lemma 15 per block): ``count`` heads, head h
    summing positions h L + 1 .. (h + 1) L (``length`` L) with mass 2L, any other real key
    losing ``beta`` (0 when there is one block, which is the unsplit head over all positions)."""

    count: int
    length: int
    beta: float

    @property
    def mass(self) -> int:
        """Each in-block key weighs 1/mass; 2L keeps BOS's share log(2L - c) finite."""
        return 2 * self.length


def prefix_sum_bounds(n: int, max_len: int, blocks: CounterBlocks, eps: float) -> tuple[float, float]:
    """Worst-case errors of X = mass * (the block heads' summed output), the prefix sum of a
    mod-n counter's increments (each <= n - 1), as (rounding, leak).

    Rounding: one head sums at most L in-block terms (recursive summation: ~eps (n - 1) L (L + 1)
    counting its normaliser; adding an out-of-block term d changes a partial sum by at
    most |d|, which the leak term counts), s heads, and s - 1 additions of their outputs
    (each at most (n - 1) T): eps (n - 1) (s L (L + 1) + (s - 1) T); s = 1 is the single
    head's eps (n - 1) T (T + 1).  Leak (blocks only): a head's o <= T out-of-block keys
    move X by at most (n - 1) T e^-beta (their values, and the 1/(1 + o e^-beta / mass)
    shrink of the in-block ones: at most half that), and rounding them in costs at most
    (n - 1) T e^-beta (numerator) and half that (normaliser): 3 s (n - 1) T e^-beta."""
    s, L, T = blocks.count, blocks.length, max_len
    rounding = eps * (n - 1) * (s * L * (L + 1) + (s - 1) * T)
    leak = 3 * s * (n - 1) * T * math.exp(-blocks.beta) if s > 1 else 0.0
    return rounding, leak


def counter_blocks(cascade: Cascade, max_len: int) -> CounterBlocks:
    """The fewest position blocks whose prefix sums stay certified in float32
    (:data:`CERTIFIED_EPS`, :func:`prefix_sum_bounds` within :data:`PREFIX_TOLERANCE`) for the
    widest counter (one block, the unsplit head, when it already is); when no split is, the
    split with the least error bound (the precision check then warns).

    L = ceil(T / s) (then s = ceil(T / L) blocks, none empty), and beta with
    e^-beta = eps / 3: the leak, 3 s (n - 1) T e^-beta, is then eps s (n - 1) T, the size
    of the rounding of the heads' sum.  The bound ~eps (n - 1) (T^2 / s + 2 s T) is least
    near s = sqrt(T / 2), so no more blocks are tried."""
    return position_blocks(max((c.size for c in cascade.components if c.kind == "counter"), default=1), max_len)


def position_blocks(n: int, max_len: int) -> CounterBlocks:
    """:func:`counter_blocks` for prefix sums of terms in 0..n - 1 (or -(n - 1)..n - 1)."""
    T = max_len
    beta = math.log(3 / CERTIFIED_EPS)
    best: tuple[float, CounterBlocks] | None = None
    for wanted in range(1, math.isqrt(T // 2) + 2):
        L = -(-T // wanted)
        blocks = CounterBlocks(1, T, 0.0) if wanted == 1 else CounterBlocks(-(-T // L), L, beta)
        bound = sum(prefix_sum_bounds(n, T, blocks, CERTIFIED_EPS))
        if bound <= PREFIX_TOLERANCE:
            return blocks
        if best is None or bound < best[0]:
            best = (bound, blocks)
    assert best is not None
    return best[1]  # none is within tolerance: the split with the least error (precision() warns)


# ---------------------------------------------------------------------------------------
# allocate: the residual subspaces


@dataclass
class Layout:
    """The workspace of a krohn-rhodes program and its subspaces.

    ``subs[c]`` maps a component's roles (``new``, ``old``, ``inc``, ``mean``, ``flag``,
    ``target``, ``fetched``, ``prev``) and a view's (``old``, ``new``) to subspaces;
    ``pos``/``code`` exist only when an offset-1 head is needed; ``absorb`` has one
    column per counter block, ``member`` (the blocks' one-hot) exists only for several."""

    ws: Workspace
    one: Subspace
    bos: Subspace
    tok: Subspace
    absorb: Subspace
    recency: Subspace
    blocks: CounterBlocks
    member: Subspace | None
    pos: Subspace | None
    code: PositionCode | None
    subs: dict[str, dict[str, Subspace]]
    state: Subspace

    def value(self, name: str) -> Subspace:
        """Where a reader finds ``name``'s pre-update value (``new`` when no old copy is kept)."""
        d = self.subs[name]
        return d["old"] if "old" in d else d["new"]

    def input_out(self, c: Component) -> Subspace:
        """What a component's input table writes: a counter's increment, a reset's flag and target."""
        d = self.subs[c.name]
        return d["inc"] if c.kind == "counter" else join(f"kr:{c.name}.input", [d["flag"], d["target"]])


def allocate(automaton: Semiautomaton, cascade: Cascade, sched: Schedule, max_len: int,
             positions: str = "sinusoidal") -> Layout:
    """Allocate the residual stream: constants, token, position features, every
    component's and in-network view's subspaces, the state one-hot."""
    ws = Workspace()
    one, bos = ws.add("one"), ws.add("bos")
    tok = ws.add("tok", list(automaton.alphabet))
    blocks = counter_blocks(cascade, max_len)
    absorb = ws.add(ABSORB) if blocks.count == 1 else ws.add(ABSORB, blocks.count)
    member = ws.add("pos:block", blocks.count) if blocks.count > 1 else None
    recency = ws.add("pos:recency")
    code = position_code(positions, max_len) if sched.needs_positions else None
    pos = ws.add("pos", code.labels) if code is not None else None
    subs: dict[str, dict[str, Subspace]] = {}
    for c in cascade.components:
        d = {"new": ws.add(f"kr:{c.name}.new")}
        if c.kind == "counter":
            roles = ["inc", "mean"] + (["old"] if sched.read_before_update(c.name) else [])
        else:
            roles = ["flag", "target", "fetched"]
        if c.kind == "reset" and sched.needs_old[c.name]:
            roles += ["old", "prev"]
        for role in roles:
            d[role] = ws.add(f"kr:{c.name}.{role}")
        subs[c.name] = d
    for v in (v.name for v in cascade.views):
        used = [w for w, on in (("old", v in sched.old_views), ("new", v in sched.new_views)) if on]
        if used:
            subs[v] = {w: ws.add(f"kr:{v}.{w}") for w in used}
    state = ws.add("kr:state", list(automaton.states))
    return Layout(ws, one, bos, tok, absorb, recency, blocks, member, pos, code, subs, state)


# ---------------------------------------------------------------------------------------
# embed: gadgets into blocks


def input_update(c: Component, action) -> np.ndarray:
    """A component's input as a vector over :meth:`Layout.input_out`: a counter's
    increment mod n; a reset's (flag, target), zero when the letter keeps its value."""
    if c.kind == "counter":
        return np.array([action % c.size], dtype=np.float64)
    return np.zeros(2) if action is None else np.array([1.0, action], dtype=np.float64)


def embedding(automaton: Semiautomaton, cascade: Cascade, sched: Schedule, lay: Layout, init: dict[str, int],
              max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """W_E (token one-hot, letter-only inputs; BOS flags every reset with its initial
    target) and W_pos (per counter block h, the absorb feature log(2L - c_h(t)) and the block's
    one-hot; recency t/(T+1); the position code)."""
    T, D = max_len, lay.ws.d_model
    W_E = np.zeros((automaton.n_symbols + 1, D))
    W_E[:, lay.one[0]] = 1.0
    W_E[-1, lay.bos[0]] = 1.0
    for a in range(automaton.n_symbols):
        W_E[a, lay.tok[a]] = 1.0
    for c in cascade.components:
        if not sched.inputs[c.name].keys:
            out = list(lay.input_out(c).dims)
            for ((), letter), act in sched.inputs[c.name].rows.items():
                W_E[letter, out] += input_update(c, act)
        if c.kind == "reset":
            W_E[-1, lay.subs[c.name]["flag"][0]] = 1.0
            W_E[-1, lay.subs[c.name]["target"][0]] = init[c.name]
    W_pos = np.zeros((T + 1, D))
    B = lay.blocks
    for h in range(B.count):
        W_pos[:, lay.absorb[h]] = absorb_feature(B.mass, T, h * B.length, B.length)
        if lay.member is not None:
            W_pos[1 + h * B.length : 1 + min(T, (h + 1) * B.length), lay.member[h]] = 1.0
    W_pos[:, lay.recency[0]] = np.arange(T + 1, dtype=np.float64) / (T + 1)
    if lay.pos is not None:
        W_pos[:, list(lay.pos.dims)] = position_table(lay.code)
    return W_E, W_pos


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
    its non-negative hidden units), to run beside a deeper one (:func:`parallel`)."""
    h, extra = mlp.hidden_sizes[-1], depth - len(mlp.hidden_sizes)
    if extra <= 0:
        return mlp
    return MLP(mlp.name, [*mlp.weights[:-1], *[np.eye(h)] * extra, mlp.weights[-1]],
               [*mlp.biases[:-1], *[np.zeros(h)] * extra, mlp.biases[-1]],
               {**mlp.notes, "padded_to": depth}, reads=mlp.reads, writes=mlp.writes)


def counter_heads(name: str, lay: Layout, src: Subspace, dst: Subspace, max_len: int) -> list[Head]:
    """The prefix-mean heads of a block's counters (Lemma 15): one over all positions, or
    one per position block (:class:`CounterBlocks`), all writing into ``dst``."""
    B = lay.blocks
    if lay.member is None:
        return [prefix_mean_head(name, lay.absorb, lay.bos, src, dst, mass=B.mass)]
    return [prefix_mean_head(f"{name}.{h}", lay.absorb, lay.bos, src, dst, mass=B.mass,
                             block=PositionBlock(h, lay.member, lay.one, B.beta, 1 + h * B.length,
                                                 min(max_len, (h + 1) * B.length), max_len))
            for h in range(B.count)]


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
            heads.append(offset_head(f"{c.name}.previous", lay.pos, lay.code, lay.bos, lay.one, 1, d["new"],
                                     d["prev"], value_range=c.size - 1))
            first.append(round_mlp(f"{c.name}.old", d["prev"], c.size, d["old"]))
    depth = max((len(m.hidden_sizes) for m in first), default=0)
    return heads, [_pad(m, depth) for m in first]


def _lookups(b: int, cascade: Cascade, sched: Schedule, lay: Layout) -> list[MLP]:
    """Block b's last MLP stage: the input tables of components attending in block b + 1
    (and the readout in the last block)."""
    sizes = _sizes(cascade)
    out = []
    for c in cascade.components:
        plan = sched.inputs[c.name]
        if plan.keys and sched.block_of[c.name] == b + 1:
            ins = [CodeInput(lay.value(n), sizes[n]) for n in plan.keys] + [OneHotInput(lay.tok)]
            table = {(*vals, letter): input_update(c, act) for (vals, letter), act in plan.rows.items()}
            table = {k: v for k, v in table.items() if v.any()}
            if table:
                out.append(lookup_mlp(f"{c.name}.input", ins, lay.input_out(c), table))
    if b == sched.n_blocks:
        out.append(_readout_mlp(sched.readout, sizes, lay))
    return out


def embed(cascade: Cascade, sched: Schedule, lay: Layout, init: dict[str, int], max_len: int) -> list[Block]:
    """The blocks.  Each MLP = [decode this block's components | round fetched old values],
    then one stage per nesting depth of in-network views, then [next block's inputs | readout]."""
    views = {v.name: v for v in cascade.views}
    sizes = _sizes(cascade)
    L = sched.n_blocks
    blocks = []
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
    return blocks


def _sizes(cascade: Cascade) -> dict[str, int]:
    return {c.name: c.size for c in cascade.components} | {v.name: v.size for v in cascade.views}


def _stack(stages: list[list[MLP]], name: str, ws: Workspace) -> MLP | Fused | None:
    """Each stage's MLPs side by side (Lemma 17), the stages fused one after another."""
    out: MLP | Fused | None = None
    for i, stage in enumerate(s for s in stages if s):
        m = parallel(stage, f"{name}.{i}", ws)
        out = m if out is None else fuse(out, m, name)
    return out


def _view_mlp(view, when: str, sizes: dict[str, int], lay: Layout) -> MLP:
    """A view (Lemma 11 lookup) of the pre-update (``old``) or updated (``new``) values into ``kr:v.<when>``."""
    def sub(n: str) -> Subspace:
        d = lay.subs[n]
        return d[when] if when in d else d["new"]  # a reset without an old copy keeps its value
    ins = [CodeInput(sub(r), sizes[r]) for r in view.reads]
    table = {key: np.array([float(value)]) for key, value in view.table.items() if value}  # no match writes 0
    return lookup_mlp(f"{view.name}.{when}", ins, lay.subs[view.name][when], table)


def _readout_mlp(plan: TablePlan, sizes: dict[str, int], lay: Layout) -> MLP:
    """New values (of components, or of views evaluated in the network) -> one-hot of the state (logit margin 1)."""
    ins = [CodeInput(lay.subs[n]["new"], sizes[n]) for n in plan.keys]
    eye = np.eye(len(lay.state))
    table = {vals: eye[q] for (vals, _), q in plan.rows.items()}
    return lookup_mlp("readout", ins, lay.state, table)


# ---------------------------------------------------------------------------------------
# precision and build


def precision(cascade: Cascade, sched: Schedule, lay: Layout, max_len: int, eps: float) -> dict[str, float]:
    """How far the dtype's rounding (machine epsilon ``eps``) stays inside each tolerance
    (margins > 1 are safe; worst-case bounds, the measured errors are far smaller).

    * counters: the prefix mean times the mass sums t increments of size <= n - 1, in s
      position blocks of length L: rounding ~eps (n - 1) (s L (L + 1) + (s - 1) T) plus
      the out-of-block leak (:func:`prefix_sum_bounds`; s = 1: eps (n - 1) T (T + 1)),
      against STEP_TOLERANCE; ``prefix_leak_margin`` (blocks only): the leak alone;
      the decode's ramps (:func:`gadgets.residue_margin`, terms up to 4 (n - 1)(T + 1));
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
        out["residue_margin"] = min(residue_margin(counter_residue(n, T), eps) for n in counters)
    if any(c.kind == "reset" for c in cascade.components):
        out["recency_margin"] = (1.0 / (4 * (T + 1))) / (4 * eps * 1.5)
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
        "layers": [{"heads": [h.notes for h in blk.heads], "mlp": blk.mlp.notes if blk.mlp else None}
                   for blk in blocks],
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
    lay = allocate(automaton, cascade, sched, T, positions)
    W_E, W_pos = embedding(automaton, cascade, sched, lay, init, T)
    blocks = embed(cascade, sched, lay, init, T)
    W_U = np.zeros((lay.ws.d_model, automaton.n_states))
    W_U[list(lay.state.dims), np.arange(automaton.n_states)] = 1.0
    prec = precision(cascade, sched, lay, T, eps)
    warnings = _warnings(prec, T)
    meta = _meta(cascade, sched, lay, blocks, prec, warnings)
    return Program(lay.ws, W_E, W_pos, blocks, W_U, np.zeros(automaton.n_states)), meta


def set_start(model, cascade: Cascade, start: str) -> None:
    """Rebuild ``model`` for start state ``start`` from its cascade and copy the weights in (in place).

    The start state lives in the initial values (BOS's targets, the counters' offsets);
    every shape is start-independent, so the weights swap in directly.  The cascade is
    the decomposition's, whatever the start (only its initial values move)."""
    check_start(model.automaton, start)
    restarted = cascade.with_start(from_dict({**model.metadata.automaton, "start": start}))
    rebuild(model, build, restarted, start, meta={"plan": restarted.to_dict()})


# ---------------------------------------------------------------------------------------
# obligations: the program a certificate checks the weights against


def _joined(sub: Subspace) -> str:
    """An obligation's name for a (possibly joined) subspace: its leaves' names joined by `` + ``."""
    return " + ".join(sub.names)


def _counter_average(b: int, counters: list[Component], lay: Layout, max_len: int) -> Average:
    """Block b's prefix-mean heads (:func:`counter_heads`): each counter's increments summed into
    its ``mean``, weight 1/mass per key of each position block."""
    B, T = lay.blocks, max_len
    heads = ([f"block{b}.counters"] if lay.member is None
             else [f"block{b}.counters.{h}" for h in range(B.count)])
    first = tuple(1 + h * B.length for h in range(len(heads)))
    last = tuple(min(T, (h + 1) * B.length) for h in range(len(heads)))
    src = " + ".join(lay.subs[c.name]["inc"].name for c in counters)
    dst = " + ".join(lay.subs[c.name]["mean"].name for c in counters)
    return Average(tuple(heads), first, last, B.mass, 1.0, src, dst)


def _decode_step(c: Component, lay: Layout, init: dict[str, int]) -> Modular:
    """A counter's decode (:func:`counter_mlp`): new = (mass * mean + initial) mod n, and old =
    that minus the increment at t, where some table reads it."""
    d = lay.subs[c.name]
    old = "old" in d
    return Modular(f"{c.name}.count", d["mean"].name, float(lay.blocks.mass), init[c.name],
                   np.arange(c.size, dtype=np.float64)[:, None], d["new"].name,
                   d["inc"].name if old else None, d["old"].name if old else None)


def _view_step(view, when: str, lay: Layout) -> Lookup:
    """A view evaluated in the network (:func:`_view_mlp`); keys outside its table write 0."""
    reads = tuple((lay.subs[r][when] if when in lay.subs[r] else lay.subs[r]["new"]).name for r in view.reads)
    table = {tuple(int(v) for v in key): np.array([float(value)]) for key, value in view.table.items()}
    return Lookup(f"{view.name}.{when}", reads, lay.subs[view.name][when].name, table, np.zeros(1))


def _input_step(c: Component, plan: TablePlan, lay: Layout, n_letters: int) -> Lookup:
    """A component's input table (:func:`_lookups`), keyed by its keys' codes and the token one-hot."""
    eye = np.eye(n_letters, dtype=np.int64)
    table = {(*(int(v) for v in vals), *eye[letter].tolist()): input_update(c, act)
             for (vals, letter), act in plan.rows.items()}
    out = lay.input_out(c)
    return Lookup(f"{c.name}.input", (*(lay.value(n).name for n in plan.keys), "tok"), _joined(out), table,
                  np.zeros(len(out)))


def _readout_step(plan: TablePlan, lay: Layout) -> Lookup:
    """New values -> the state's one-hot (:func:`_readout_mlp`)."""
    eye = np.eye(len(lay.state))
    table = {tuple(int(v) for v in vals): eye[q] for (vals, _), q in plan.rows.items()}
    return Lookup("readout", tuple(lay.subs[n]["new"].name for n in plan.keys), lay.state.name, table,
                  np.zeros(len(lay.state)))


def _reset_fetches(b: int, cascade: Cascade, sched: Schedule, lay: Layout,
                   max_len: int) -> tuple[list[Fetch | Recent], list[Round]]:
    """Block b's reset heads (:func:`_attention`): each reset's most recent flag, rounded into its
    new value, and the offset-1 fetch of a reset's value before the update, rounded into ``old``."""
    heads: list[Fetch | Recent] = []
    rounds: list[Round] = []
    for c in cascade.components:
        d = lay.subs[c.name]
        if sched.block_of[c.name] == b and c.kind == "reset":
            heads.append(Recent(f"{c.name}.recent", d["flag"].name, d["target"].name, d["fetched"].name))
            rounds.append(Round(f"{c.name}.round", d["fetched"].name, d["new"].name))
        if sched.needs_old.get(c.name) and sched.block_of[c.name] + 1 == b:
            heads.append(Fetch(f"{c.name}.previous", offset_keys(max_len, 1), d["new"].name, d["prev"].name))
            rounds.append(Round(f"{c.name}.old", d["prev"].name, d["old"].name))
    return heads, rounds


def reachable_configurations(cascade: Cascade, start: tuple[int, ...], n_letters: int) -> np.ndarray:
    """Every configuration (component values, in cascade order) some input reaches from
    ``start``: the cascade run as an automaton on configurations."""
    seen = {tuple(start)}
    frontier = list(seen)
    while frontier:
        nxt = []
        for config in frontier:
            for letter in range(n_letters):
                after = tuple(cascade.step(config, letter))
                if after not in seen:
                    seen.add(after)
                    nxt.append(after)
        frontier = nxt
    return np.array(sorted(seen), dtype=np.float64).reshape(len(seen), len(cascade.components))


def _configurations(cascade: Cascade, lay: Layout, start: tuple[int, ...], n_letters: int) -> tuple[Joint, ...]:
    """The components' values -- updated (``new``), and before the update (``old``, where kept) --
    are one of the cascade's reachable configurations together (the one at t, and at t - 1)."""
    configs = reachable_configurations(cascade, start, n_letters)
    out = []
    for role in ("new", "old"):
        idx = [i for i, c in enumerate(cascade.components) if role in lay.subs[c.name]]
        if idx:
            names = tuple(lay.subs[cascade.components[i].name][role].name for i in idx)
            out.append(Joint(names, np.unique(configs[:, idx], axis=0)))
    return tuple(out)


def obligations(model, cascade: Cascade) -> Obligations:
    """What a krohn-rhodes model must run, from the cascade alone (:func:`embed`'s gadgets as
    data): the token rows of W_E; per block, its counters' prefix means (:class:`Average`), its
    resets' most-recent-flag heads (:class:`Recent`) and offset-1 fetches of old values, and one
    MLP of steps -- decodes and roundings, views, the next block's input tables, the readout."""
    a, T = model.automaton, model.max_len
    init = dict(zip((c.name for c in cascade.components), cascade.encode(a.start)))
    sched = schedule(cascade)
    lay = allocate(a, cascade, sched, T, model.meta.get("positions") or "sinusoidal")
    W_E, _ = embedding(a, cascade, sched, lay, init, T)
    fixed = {lay.one.name, lay.bos.name, lay.absorb.name, lay.recency.name, "pos:block", "pos"}
    codes = {n: W_E[:, list(sub.dims)] for n, sub in lay.ws.subspaces.items() if n not in fixed}
    views = {v.name: v for v in cascade.views}
    layers = []
    for b in range(1, sched.n_blocks + 1):
        counters = [c for c in cascade.components if sched.block_of[c.name] == b and c.kind == "counter"]
        heads, rounds = _reset_fetches(b, cascade, sched, lay, T)
        fetches = ((_counter_average(b, counters, lay, T),) if counters else ()) + tuple(heads)
        stages: list[list[Lookup | Modular | Round]] = [[*(_decode_step(c, lay, init) for c in counters), *rounds]]
        old_here = [v for v in sched.old_views if sched.view_block[v] == b]
        new_here = sched.new_views if b == sched.n_blocks else []
        depth = max([sched.old_stage[v] for v in old_here] + [sched.new_stage[v] for v in new_here], default=0)
        for k in range(1, depth + 1):
            stages.append([_view_step(views[v], "old", lay) for v in old_here if sched.old_stage[v] == k]
                          + [_view_step(views[v], "new", lay) for v in new_here if sched.new_stage[v] == k])
        last: list[Lookup | Modular | Round] = [
            _input_step(c, sched.inputs[c.name], lay, a.n_symbols) for c in cascade.components
            if sched.inputs[c.name].keys and sched.block_of[c.name] == b + 1
            and any(np.any(input_update(c, act)) for act in sched.inputs[c.name].rows.values())]
        if b == sched.n_blocks:
            last.append(_readout_step(sched.readout, lay))
        stages.append(last)
        used = [st for st in stages if st]
        name = f"block{b}.mlp" if len(used) > 1 else f"block{b}.mlp.0"
        layers.append(Layer(fetches, Steps(name, tuple(x for st in used for x in st)) if used else None))
    eye = np.eye(len(lay.state), dtype=np.int64)
    readout = Readout((lay.state.name,), {tuple(eye[q].tolist()): q for q in range(len(lay.state))})
    return Obligations(NAME, Embedding(codes), tuple(layers), readout,
                       joint=_configurations(cascade, lay, tuple(init[c.name] for c in cascade.components),
                                             a.n_symbols))


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
    invariants=checks.invariants, diagram=lambda cascade: ("Cascade", to_dot(cascade)), obligations=obligations,
)
