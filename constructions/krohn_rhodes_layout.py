"""Theorem 11's plan for the network, before any block's weights: which tables fold their views
(:func:`plan_table`), which component runs in which block (:func:`schedule`), the counters'
position blocks (:func:`counter_blocks`), the residual subspaces (:func:`allocate`), the
embedding (:func:`embedding`, with what it declares: the :func:`tracked` subspaces and the
cascade's reachable :func:`configurations`).  :mod:`constructions.krohn_rhodes` builds the
blocks on them; each gadget there states the obligation its weights run."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass, replace

import numpy as np

from compiler.automata.cascade import Cascade, Component
from compiler.automata.cascade_reach import reachable
from compiler.automata.errors import BudgetError
from compiler.automata.spec import Semiautomaton

from .budget import STEP_TOLERANCE
from .gadgets import ABSORB, PositionBlock, absorb_feature, prefix_mean_head
from .obligations import Average, Joint
from .positions import PositionCode, position_code, position_table
from .program import Head, obligation_name
from .workspace import Subspace, Workspace, join



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
                    _view_stages(views, old_views, view_block),
                    _view_stages(views, new_views, {v: L for v in new_views}))


def depth_floor(cascade: Cascade) -> int:
    """A lower bound on :func:`schedule`'s blocks from the tables' dependencies alone (no table laid out):
    a component runs one block after every component its input table depends on (``ready`` is at least
    ``block_of``), so the longest chain of such dependencies is at most ``n_blocks``."""
    block: dict[str, int] = {}
    for c in cascade.components:  # in level order: what a component reads comes before it
        block[c.name] = 1 + max((block[n] for n in _base_components(cascade, c.reads)), default=0)
    return max(block.values(), default=1)


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


def counter_high(n: int, max_len: int) -> int:
    """The largest prefix sum of a mod-n counter: the initial value plus t <= T increments < n."""
    return (n - 1) * (max_len + 1)


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


def block_heads(name: str, blocks: CounterBlocks, absorb: Subspace, bos: Subspace, one: Subspace,
                member: Subspace, src: Subspace, dst: Subspace, max_len: int,
                value_scale: float = 1.0) -> list[Head]:
    """Lemma 15's prefix mean split over position blocks: head ``name.h`` sums ``src`` over block h's
    keys (mass 2L, every other real key losing beta; gadgets.prefix_mean_head with a
    :class:`PositionBlock`), all heads into ``dst``; ``absorb`` and ``member`` hold one column per
    block (:func:`block_positions`).  Every head declares the heads' one obligation
    (:func:`block_average`)."""
    B = blocks
    declared = block_average(name, B, max_len, value_scale, obligation_name(src), obligation_name(dst))
    return [replace(prefix_mean_head(f"{name}.{h}", absorb, bos, src, dst, mass=B.mass, value_scale=value_scale,
                                     block=PositionBlock(h, member, one, B.beta, 1 + h * B.length,
                                                         min(max_len, (h + 1) * B.length), max_len)),
                    obligation=declared)
            for h in range(B.count)]


def block_positions(W_pos: np.ndarray, blocks: CounterBlocks, absorb: Subspace, member: Subspace | None,
                    max_len: int) -> None:
    """Write the position columns :func:`block_heads` read into ``W_pos`` (in place): per block h the
    absorb feature log(2L - c_h(t)) (c_h(t): block h's positions up to t) and, with ``member``,
    the block's one-hot."""
    B, T = blocks, max_len
    for h in range(B.count):
        W_pos[:, absorb[h]] = absorb_feature(B.mass, T, h * B.length, B.length)
        if member is not None:
            W_pos[1 + h * B.length : 1 + min(T, (h + 1) * B.length), member[h]] = 1.0


def block_average(name: str, blocks: CounterBlocks, max_len: int, scale: float, src: str, dst: str) -> Average:
    """:func:`block_heads` as an obligation: head ``name.h`` over block h's keys, weight 1/(2L) each."""
    B = blocks
    return Average(tuple(f"{name}.{h}" for h in range(B.count)), tuple(1 + h * B.length for h in range(B.count)),
                   tuple(min(max_len, (h + 1) * B.length) for h in range(B.count)), B.mass, scale, src, dst)


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

    def positions(self) -> tuple[Subspace, PositionCode]:
        """``pos`` and ``code``, which an offset-1 head reads (allocated when the schedule needs
        one; an internal error otherwise)."""
        if self.pos is None or self.code is None:
            raise RuntimeError("an offset-1 head needs the position subspace, which the schedule did not allocate")
        return self.pos, self.code

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
# embedding: W_E and W_pos



def input_update(c: Component, action) -> np.ndarray:
    """A component's input as a vector over :meth:`Layout.input_out`: a counter's
    increment mod n; a reset's (flag, target), zero when the letter keeps its value."""
    if c.kind == "counter":
        return np.array([action % c.size], dtype=np.float64)
    return np.zeros(2) if action is None else np.array([1.0, action], dtype=np.float64)


def letter_increments(cascade: Cascade, sched: Schedule) -> dict[str, dict[int, int]]:
    """Each counter whose increment is a function of the letter alone (its input table reads no
    component): letter -> increment."""
    out = {}
    for c in cascade.components:
        plan = sched.inputs[c.name]
        if c.kind == "counter" and not plan.keys:
            out[c.name] = {letter: int(act) % c.size for ((), letter), act in plan.rows.items()}
    return out


def increments_at(cascade: Cascade, sched: Schedule, n_letters: int) -> dict[str, dict[int, tuple[int, ...]]]:
    """Each counter's possible increments at each letter: those its input table's rows at that
    letter give, and 0 where the rows miss a key of it (an absent row writes nothing).  A superset
    of what a run can meet (every key combination, reachable or not), so a table of the counter's
    value before the update, keyed by (``new``, ``inc``), needs no gate combination outside it: at
    any other (letter, increment) pair the network is never evaluated on a reachable input, and the
    obligation says the lookup writes 0 there, which the certificate's program proof checks."""
    sizes = {c.name: c.size for c in cascade.components}
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for c in cascade.components:
        if c.kind != "counter":
            continue
        plan = sched.inputs[c.name]
        combos = int(np.prod([sizes[k] for k in plan.keys])) if plan.keys else 1
        seen: dict[int, set[int]] = {a: set() for a in range(n_letters)}
        rows: dict[int, int] = {a: 0 for a in range(n_letters)}
        for (_, letter), act in plan.rows.items():
            seen[letter].add(int(act) % c.size)
            rows[letter] += 1
        out[c.name] = {a: tuple(sorted(seen[a] | ({0} if rows[a] < combos else set()))) for a in range(n_letters)}
    return out


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
    block_positions(W_pos, lay.blocks, lay.absorb, lay.member, T)
    W_pos[:, lay.recency[0]] = np.arange(T + 1, dtype=np.float64) / (T + 1)
    if lay.pos is not None and lay.code is not None:
        W_pos[:, list(lay.pos.dims)] = position_table(lay.code)
    return W_E, W_pos


def tracked(lay: Layout) -> tuple[str, ...]:
    """The subspaces whose embedded codes the program tracks (the declaration's): the token, every
    component's and view's subspaces and the state; the rest are constants and position features."""
    return (lay.tok.name, *(sub.name for d in lay.subs.values() for sub in d.values()), lay.state.name)


_REACHED: dict[str, np.ndarray] = {}
"""The last few :func:`reachable_configurations` by the cascade's content (a build, and the
certificate's rebuild of the same plan, search once per process)."""
REACHED_CACHE = 4


def reachable_configurations(cascade: Cascade, start: tuple[int, ...], n_letters: int) -> np.ndarray:
    """Every configuration (component values, in cascade order) some input reaches from
    ``start``: the cascade run as an automaton on configurations."""
    key = hashlib.sha256(json.dumps([cascade.to_dict(), list(start), n_letters], sort_keys=True,
                                    default=str).encode()).hexdigest()
    if key not in _REACHED:
        if len(_REACHED) >= REACHED_CACHE:
            _REACHED.pop(next(iter(_REACHED)))
        _REACHED[key] = reachable(cascade, start, n_letters).astype(np.float64)
    return _REACHED[key].copy()


def configurations(cascade: Cascade, lay: Layout, start: tuple[int, ...], n_letters: int) -> tuple[Joint, ...]:
    """The program's claim (:class:`~constructions.obligations.Joint`): the components' values --
    updated (``new``), and before the update (``old``, where kept) -- are one of the cascade's
    reachable configurations together (the one at t, and at t - 1).  The certificate checks it."""
    configs = reachable_configurations(cascade, start, n_letters)
    out = []
    for role in ("new", "old"):
        idx = [i for i, c in enumerate(cascade.components) if role in lay.subs[c.name]]
        if idx:
            names = tuple(lay.subs[cascade.components[i].name][role].name for i in idx)
            out.append(Joint(names, np.unique(configs[:, idx], axis=0)))
    return tuple(out)
