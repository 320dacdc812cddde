"""Bounded stacks (Dyck languages of bounded depth) in three attention layers, at any length;
in two under the promise of legal inputs (the paper's Dyck_{n,k}, below).

The automaton (compiler/automata/stack_detect.py, recognised up to renaming): states are
the stacks over k symbols of depth <= D plus an error sink; a letter pushes a symbol b,
pops a symbol a, or does nothing.  Overflow (a push at depth D), underflow (a pop of the
empty stack) and a mismatch (a pop of a when the top is not a) enter the sink for good.
Start s0 (any state), depth d0 = |s0| (0 for the sink), moves m_t = +1 / -1 / 0 and

    x_t = d0 + m_1 + ... + m_t        (x_0 = d0 at BOS).

Claim.  Let t* be the first error (the sink at t* but not at t* - 1; t* = 0 when s0 is the
sink).  For t < t*: (a) x_t is the depth of the stack q_t; (b) for 1 <= j <= x_t, level j
of q_t holds the symbol pushed at o_j(t) = the last tau <= t with a push and x_tau = j,
or s0[j] when there is none.  And t* is the first t >= 1 with

    flag_t = [x_t not in 0..D]  or  [letter t pops a and x_t + 1 >= 1 and level x_t + 1
                                     at t holds (by (b)) a symbol other than a],      (*)

or 0 when s0 is the sink.  So q_t = sink iff some tau <= t has flag_tau = 1 (or s0 is the
sink), and otherwise q_t is read off x_t and the symbols at o_1(t), ..., o_{x_t}(t).

Proof.  (a) Before the first error every push adds a level and every pop removes one, so
the depth is x_t.  (b) After the push at o = o_j(t) level j holds its symbol; it changes
only when level j is popped (the depth drops to j - 1) and pushed again, and that push is
a later tau with x_tau = j, contradicting the choice of o.  With no such push level j was
never rebuilt, so it still holds s0[j] (j <= d0 then: a level above d0 exists only after a
push reached it).  (*): at t <= t* all earlier steps were errorless, so by (a) and (b) at
t - 1 the step at t overflows iff x_t = D + 1, underflows iff x_t = -1, and mismatches iff
it pops a while the top, level x_{t-1} = x_t + 1, holds another symbol -- and o_{x_t+1}(t)
= o_{x_t+1}(t - 1) because letter t is a pop.  Flags after t* may be anything: only
"some flag so far" is read, and the first flag is exact.  This is the stack-level view of
Yao et al. (2021): the depth is a prefix sum, level j's symbol is the last push to level j.

Residual subspaces:
  ``one``, ``bos``, ``pos:index`` (t), ``pos:absorb`` (log(max_len + 1 - t); gadgets.absorb_feature)
  ``st:move``, ``st:push``, ``st:type``, ``st:pop``  the letter: move, push bit, pushed / popped symbol one-hot
  ``st:start{j}``, ``st:starterr``  BOS row only: s0's symbol at level j; 1 iff s0 is the sink
  ``st:depth``             d0 in every embedding row, plus layer 1's prefix sum: x_t
  ``st:level``, ``st:out`` MLP 1: one-hot of x_t over 0..D, and [x_t not in 0..D] (0 at BOS)
  ``st:open{j}``           layer-2 head j: symbol one-hot at o_j(t) (BOS's s0[j] when none)
  ``st:stack``, ``st:mismatch``  MLP 2: [j <= x_t] * st:open{j}; the mismatch part of (*)
  ``st:any``, ``st:error`` layer-3 head: > 1/4 iff a flag so far; MLP 3: exactly [q_t = sink]

Layer 1: the prefix-mean head of Lemma 15 (gadgets.prefix_mean_head, mass max_len + 1; from
max_len ~1300 one head per position block, :func:`prefix_blocks`, so that the sum's float32
rounding stays certified within the decode's tolerance).
MLP 1 is the exact residue decode shared with the gridworld (gadgets.residue_mlp) with modulus
M = D + 2 and offset M: for t <= t*, x_t is in -1..D+1, whose residues are distinct except
-1 and D + 1, both "out"; later inputs only have to stay bounded (every unit is a relu
of a saturated ramp, in [0, 1]).  Layer 2: D heads (one per level) score
beta * (level_j(tau) + push(tau) + lambda * tau) and BOS beta * (2 - 1/2): a push to level
j scores >= 2, any other position <= 1 + lambda * max_len < 3/2, and among pushes the
latest wins by beta * lambda (the gridworld's constants with match 2 and gap 1).  MLP 2
(2 hidden layers of 2Dk saturated steps): st:stack[j, b] = [sum_{v >= j} level_v + open_j[b]
>= 2] and st:mismatch = sum_{j, a} [level_{j-1} + pop[a] - open_j[a] >= 2].  Layer 3: one
head scoring beta3 * (out + mismatch + starterr), the same as its value; with no flag it
is exactly 0, with one it is >= 7/16 (mass on flags below 1/2 is at most
max_len * exp(-beta3 / 2) / exp(beta3) <= 1/8).  MLP 3: st:error = relu(1 - relu(1 - 4 y)).

Readout: logit(s) = (D + 1) level_{|s|} + sum_{j <= |s|} stack[j, s_j] - C error and
logit(sink) = C error, C = 2D + 2: without an error the true stack scores D + 1 + x_t
and every other at most D + x_t (a wrong symbol) or D (a wrong depth); with one the sink
scores C and every stack at most 2D + 1 - C.  Margin >= 1.

Legal stacks (no sink; ``plan.legal``).  Under the promise that no input overflows,
underflows or mismatches (compiler/automata/promise.py), t* never comes: (a) and (b) hold at
every t, so q_t is read off x_t and the level heads alone.  Layer 3, the flags of (*), the
popped symbol and s0's error bit are dropped: two attention layers (the prefix sum, the last
push per level), MLP 2 is the D k stack units only, and the readout is the one above without
its error terms (margin >= 1 as before).  This is the two-layer solution the paper's trained
Transformers found for Dyck_{4,2}.

Precision.  Everything above needs only that x_t is within 1/4 of an integer for t <= t*
(then every later unit is an exact 0 or 1 up to t*, and bounded after it) and that the
level heads' recency step beta * lambda beats the rounding of their scores; see
:func:`precision` for the margins recorded (and warned about) and docs/constructions/bounded-stack.md for the measured
depth error (8.3e-6 at max_len 16384 in float32).
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from compiler.automata.errors import BudgetError
from compiler.automata.spec import Semiautomaton
from compiler.automata.stack_detect import BoundedStack, detect_any

from compiler.automata.promise import promise_text

from . import bounded_stack_families as checks
from .budget import MAX_PARAMS, STEP_TOLERANCE
from .bounded_stack_layout import (GAP, MATCH, constants, depth_residue, layout, open_name, prefix_blocks,
                                   start_columns, start_name, token_rows)
from .krohn_rhodes_layout import CounterBlocks, block_heads, block_positions
from .construction import ONE_HIDDEN_LAYER, BuildOptions, Construction, Cost, Refusal, check_start, declared_obligations
from .gadgets import (
    ABSORB,
    CodeInput,
    Ramp,
    Stair,
    absorb_feature,
    flat_lookup_mlp,
    prefix_mean_head,
    residue_hidden,
    residue_mlp,
    staircase_mlp,
)
from .obligations import AnyFlag, Joint, Latest, Lookup, Promise, Readout, Threshold
from .program import MLP, Block, Declaration, Head, Program, StateCodes
from .workspace import Workspace, join
from .model import CompiledTransformer



NAME = "bounded-stack"

FIXED = ("one", "bos", "pos:index", ABSORB, "pos:block")
"""The input-independent subspaces (every other one is tracked by the certificate)."""


def _sizes(plan: BoundedStack, n_symbols: int, n_states: int, max_len: int) -> dict[str, Any]:
    """Widths and the exact parameter count of the assembled model."""
    D, k = plan.depth, plan.symbols
    d = layout(plan, max_len).d_model
    d_head = max(4, k)
    units = D * k if plan.legal else 2 * D * k  # the stack units (and the mismatch units)
    s = prefix_blocks(max_len).count
    n_heads = [s, D] if plan.legal else [s, D, 1]
    hidden = [residue_hidden(depth_residue(plan), bos=True), [units, units]] + ([] if plan.legal else [[1, 1]])
    mlp = lambda hs: sum(a * b + b for a, b in zip([d, *hs], [*hs, d]))
    params = ((n_symbols + 1 + max_len + 1) * d + d * n_states + n_states
              + sum(4 * h * d_head * d for h in n_heads) + sum(mlp(h) for h in hidden))
    return {"d_model": d, "d_head": d_head, "n_heads": n_heads, "mlp_hidden": hidden, "params": params}


def _level_head(plan: BoundedStack, j: int, c: dict[str, float]) -> Head:
    """Layer 2, level j: the last push with x_tau = j (else BOS); copies its symbol (BOS: s0[j]).
    Obligation: :class:`Latest` (level bit and push bit both 1; BOS gives s0's symbol)."""
    D, k, beta = plan.depth, plan.symbols, c["beta"]
    W_Q = beta * np.array([[1.0, 1.0, c["lambda"], c["sink"]]])  # row: one
    W_K = np.zeros((D + 4, 4))  # rows: st:level (D + 1), st:push, pos:index, bos
    W_K[j, 0] = W_K[D + 1, 1] = W_K[D + 2, 2] = W_K[D + 3, 3] = 1.0
    W_V = np.concatenate([np.eye(k), np.eye(k)])  # rows: st:type, st:start{j}
    W_O = np.eye(k)
    notes = {"kind": "last-push", "level": j, "beta": beta, "lambda": c["lambda"], "sink": c["sink"],
             "match": MATCH, "value_gap": GAP, "score_gap": c["score_gap"], "leak_bound": c["leak_bound"],
             "output_error_bound": c["tol"]}
    return Head(f"st.open{j}", W_Q, W_K, W_V, W_O, notes,
                reads={"query": ("one",), "key": ("st:level", "st:push", "pos:index", "bos"),
                       "value": ("st:type", start_name(j))}, writes=(open_name(j),),
                obligation=Latest(f"st.open{j}", f"st:level[{j}] + st:push", ((1, 1),), ("st:type", start_name(j)),
                                  open_name(j)))


def _any_head(c: dict[str, float]) -> Head:
    """Layer 3: does any position tau <= t (BOS included) carry a flag of (*)?  (:class:`AnyFlag`)"""
    W_Q = np.array([[c["beta3"]]])  # row: one
    W_K = np.ones((3, 1))  # rows: st:out, st:mismatch, st:starterr
    W_V, W_O = np.ones((3, 1)), np.ones((1, 1))
    notes = {"kind": "any-flag", "beta": c["beta3"], "score_gap": c["beta3"] / 2, "leak_bound": c["any_leak_bound"],
             "why": "scores beta3 * flag: exactly 0 without a flag, >= 7/16 with one"}
    return Head("st.any", W_Q, W_K, W_V, W_O, notes,
                reads={"query": ("one",), "key": ("st:out", "st:mismatch", "st:starterr"),
                       "value": ("st:out", "st:mismatch", "st:starterr")}, writes=("st:any",),
                obligation=AnyFlag("st.any", "st:out + st:mismatch + st:starterr", "st:any"))


def _depth_mlp(ws: Workspace, plan: BoundedStack, max_len: int, d0: int, flat: bool = False) -> MLP:
    """MLP 1: x_t -> one-hot over 0..D and the out-of-range flag (gadgets.residue_mlp, M = D + 2; ``flat``:
    the same rows from a staircase over every depth it can be, gadgets.staircase, 2 hidden layers; a
    legal stack's depths 0..D in one, gadgets.flat_lookup_mlp over x + (D + 1) bos).

    Obligation: a :class:`Lookup` of the gadget's exact output (:func:`_decoded`) at every depth x_t
    can be -- d0 - max_len .. d0 + max_len (past the first error only a clean code matters), a
    legal stack's 0..D (its promise's claim) -- with BOS's bit 0 (at BOS the MLP writes 0)."""
    D = plan.depth
    res = depth_residue(plan)
    table = np.zeros((res.modulus, D + 2))
    table[np.arange(D + 1), np.arange(D + 1)] = 1.0
    table[D + 1:, D + 1] = 1.0  # residues D+1 .. M-1: x = D + 1 or x = -1
    out = join("st.depth.out", [ws["st:level"], ws["st:out"]])
    depths = range(0, D + 1) if plan.legal else range(d0 - max_len, d0 + max_len + 1)
    declared = Lookup("st.depth", ("st:depth", "bos"), "st:level + st:out",
                      {(x, 0): _decoded(plan, x) for x in depths}, np.zeros(D + 2))
    if flat and plan.legal:  # depths 0..D: one hidden layer of threshold pairs over x + (D + 1) bos
        flat_mlp = flat_lookup_mlp("st.depth", [CodeInput(ws["st:depth"], D + 1), CodeInput(ws["bos"], 2)], out,
                                   {(x, 0): _decoded(plan, x) for x in depths})
        return replace(flat_mlp, obligation=declared)
    if flat:  # every depth's row at its own threshold (2 hidden layers), gated off at BOS
        F = np.stack([_decoded(plan, x) for x in depths])
        return staircase_mlp("st.depth", [Ramp(ws["st:depth"], 1.0, -depths[0], len(depths) - 1)],
                             [CodeInput(ws["bos"], 2)], [Stair(out, 0, (0,), {(0,): F})], declared)
    mlp = residue_mlp("st.depth", ws["st:depth"], res, out, table, bos=ws["bos"])
    return replace(mlp, obligation=declared)


def _decoded(plan: BoundedStack, x: int) -> np.ndarray:
    """What MLP 1 writes (st:level + st:out) for an exact integer depth x -- any x, also past the
    first error, where only its being a clean code matters: y = relu(x + T') (the carried value
    of gadgets.residue_mlp), r = y - M #{1 <= i <= Nc: y >= iM} (its coarse steps), then the
    table's row r when r < M, else 0 (no fine step fires)."""
    res = depth_residue(plan)
    D, M = plan.depth, res.modulus
    y = max(0, x + res.offset)
    r = y - M * sum(y >= i * M for i in range(1, res.n_coarse + 1))
    out = np.zeros(D + 2)
    if 0 <= r < M:
        out[min(r, D + 1)] = 1.0  # residues 0..D: the level one-hot; D+1..M-1: out of range
    return out


def _stack_mlp(plan: BoundedStack, flat: bool = False) -> MLP:
    """MLP 2: the stack levels below x_t, and the mismatch flag of (*) (2 hidden layers, exact steps;
    a legal stack: the levels alone, and with ``flat`` in one hidden layer of step pairs, exact up to
    their rounding: only the readout reads them); its obligation, a :class:`Lookup` of :func:`_stack_table`.

    Each unit is relu(1 - relu(s (2 - y) - 1)) for a sum y of exact bits and one head
    output within STEP_TOLERANCE / 2 of a bit: exactly [y >= 2]."""
    D, k = plan.depth, plan.symbols
    s = 1.0 / STEP_TOLERANCE
    legal = plan.legal
    n_in = (D + 1) + D * k + (0 if legal else k)  # rows: st:level, st:open1..D, st:pop
    lvl = lambda v: v
    opn = lambda j, b: (D + 1) + (j - 1) * k + b
    pop = lambda a: (D + 1) + D * k + a
    H = D * k if legal else 2 * D * k
    W1, b1 = np.zeros((n_in, H)), np.zeros(H)
    for j in range(1, D + 1):
        for b in range(k):
            u = (j - 1) * k + b  # stack[j, b]: y = sum_{v >= j} level_v + open_j[b]
            for v in range(j, D + 1):
                W1[lvl(v), u] = -s
            W1[opn(j, b), u] = -s
            b1[u] = 2 * s - 1.0
            if legal:
                continue
            w = D * k + u  # mismatch (j, a = b): y = level_{j-1} + pop[a] - open_j[a]
            W1[lvl(j - 1), w], W1[pop(b), w], W1[opn(j, b), w] = -s, -s, s
            b1[w] = 2 * s - 1.0
    n_out = D * k + (0 if legal else 1)
    notes = {"kind": "stack-levels", "depth": D, "symbols": k, "slope": s, "input_tolerance": STEP_TOLERANCE / 2,
             "hidden": [H, H]}
    reads = ("st:level", *[open_name(j) for j in range(1, D + 1)]) + (() if legal else ("st:pop",))
    writes = ("st:stack",) if legal else ("st:stack", "st:mismatch")
    declared = Lookup("st.stack", reads, " + ".join(writes), _stack_table(plan))
    if flat and legal:  # [y >= 2] = relu(s(y - 2) + 2) - relu(s(y - 2) + 1), gadgets.step_units' pair
        W1p = np.concatenate([-W1, -W1], axis=1)
        b1p = np.concatenate([-b1 + 1.0, -b1])
        W2p = np.concatenate([np.eye(H), -np.eye(H)])
        return MLP("st.stack", [W1p, W2p], [b1p, np.zeros(n_out)], {**notes, "hidden": [2 * H]}, reads=reads,
                   writes=writes, obligation=declared)
    W2, b2 = -np.eye(H), np.ones(H)
    W3 = np.zeros((H, n_out))  # columns: st:stack, st:mismatch
    W3[np.arange(D * k), np.arange(D * k)] = 1.0
    W3[D * k:, D * k:] = 1.0
    return MLP("st.stack", [W1, W2, W3], [b1, b2, np.zeros(n_out)], notes, reads=reads, writes=writes,
               obligation=declared)


def _level_codes(plan: BoundedStack) -> list[tuple[int, ...]]:
    """The codes st:level can hold: a one-hot of 0..D, or 0 (at BOS; past the first error)."""
    eye = np.eye(plan.depth + 1, dtype=np.int64)
    return [tuple(int(v) for v in row) for row in eye] + [(0,) * (plan.depth + 1)]


STACK_TABLE_BUDGET = 200_000
"""Most rows of the stack lookup's declared table (:func:`_stack_table`, one per code combination
MLP 2 may read): (D + 2)(k + 1)^D, times k + 1 with errors, grows exponentially in the depth D
(dyck:32,1: 34 x 2^32 rows, tens of gigabytes), so deeper stacks are refused and another
construction takes them."""


def stack_table_rows(plan: BoundedStack) -> int:
    """How many rows :func:`_stack_table` declares."""
    D, k = plan.depth, plan.symbols
    return (D + 2) * (k + 1) ** D * (1 if plan.legal else k + 1)


def _table_budget(plan: BoundedStack) -> None:
    """BudgetError where the stack lookup's declared table is over :data:`STACK_TABLE_BUDGET`."""
    rows = stack_table_rows(plan)
    if rows > STACK_TABLE_BUDGET:
        raise BudgetError(f"a stack of depth {plan.depth} over {plan.symbols} bracket type(s) declares its stack "
                          f"lookup on {rows:,} code combinations (budget {STACK_TABLE_BUDGET:,})")


def _stack_table(plan: BoundedStack) -> dict[tuple[int, ...], np.ndarray]:
    """MLP 2's declared function on every code combination it may read: stack[j, b] =
    [sum_{v >= j} level_v + open_j[b] >= 2] and, with error tracking, mismatch =
    sum_{j, a} [level_{j-1} + pop[a] - open_j[a] >= 2]."""
    D, k = plan.depth, plan.symbols
    sym = [(0,) * k] + [tuple(int(v) for v in row) for row in np.eye(k, dtype=np.int64)]
    table = {}
    for level in _level_codes(plan):
        for opens in itertools.product(sym, repeat=D):
            for pop in ([()] if plan.legal else sym):
                stack = [int(sum(level[j:]) + opens[j - 1][b] >= 2) for j in range(1, D + 1) for b in range(k)]
                extra = [] if plan.legal else [sum(int(level[j - 1] + pop[a] - opens[j - 1][a] >= 2)
                                                   for j in range(1, D + 1) for a in range(k))]
                table[(*level, *(v for o in opens for v in o), *pop)] = np.array(stack + extra, dtype=np.float64)
    return table


def _error_mlp() -> MLP:
    """MLP 3: st:error = relu(1 - relu(1 - 4 y)): exactly 0 at y = 0 and exactly 1 for y >= 1/4."""
    return MLP("st.error", [np.array([[-4.0]]), np.array([[-1.0]]), np.array([[1.0]])],
               [np.array([1.0]), np.array([1.0]), np.zeros(1)], {"kind": "threshold", "at": 0.25},
               reads=("st:any",), writes=("st:error",), obligation=Threshold("st.error", "st:any", "st:error"))


def readout(plan: BoundedStack, ws) -> tuple[np.ndarray, np.ndarray]:
    """The unembedding of the module doc (margin >= 1; a legal stack: no error terms)."""
    D, k = plan.depth, plan.symbols
    C = 2.0 * D + 2
    W_U, b_U = np.zeros((ws.d_model, len(plan.stacks))), np.zeros(len(plan.stacks))
    err = None if plan.legal else ws["st:error"][0]  # a legal stack's plan has no sink (no None stack)
    for q, st in enumerate(plan.stacks):
        if st is None:
            W_U[err, q] = C
            continue
        W_U[ws["st:level"][len(st)], q] = D + 1.0
        for j, b in enumerate(st, start=1):
            W_U[ws["st:stack"][(j - 1) * k + b], q] = 1.0
        if err is not None:
            W_U[err, q] = -C
    return W_U, b_U


MEASURED_REACH = 16384
"""Longest max_len at which float32 models were measured exact with the layer-1 depth error
far inside its tolerance (8.3e-6 against 1/4 at 16384, benchmarks/results/bounded_stack.md)."""


def precision(plan: BoundedStack, max_len: int, eps: float) -> dict[str, Any]:
    """How far the dtype's rounding stays inside each tolerance (margins > 1 are safe).

    * scores: a level head's score sums 4 products of size <= beta * MATCH; the recency
      step is gamma = beta * lambda logits: margin = (gamma / 2) / (4 eps 4 beta (MATCH + 1)).
    * prefix sum: the head adds max_len terms +-1 (times one weight shared by every real
      position); summed in order, the running sums before the first error stay in
      -(D+1)..D+1 and the error is ~ eps max_len (D + 1), but a vectorised kernel sums
      interleaved lanes whose running sums can grow to max_len / lanes, so the order-free
      worst case is eps max_len^2 (recursive summation; tolerance 1/4: float32 warns from
      1449).  Measured errors are far smaller (8.3e-6 at 16384), so the recorded margin is
      the measured reach scaled as that worst case scales with the dtype:
      eps32 MEASURED_REACH^2 / (eps max_len^2).
    """
    c = constants(plan, max_len)
    score = (c["score_gap"] / 2) / (4 * eps * 4 * c["beta"] * (MATCH + 1))
    worst = STEP_TOLERANCE / (eps * max_len * (max_len + 1) + 1e-300)
    measured = float(np.finfo(np.float32).eps) * MEASURED_REACH**2 / (eps * max_len**2 + 1e-300)
    return {"margin": min(score, measured), "score_margin": score, "prefix_sum_margin": measured,
            "prefix_sum_worst_case_margin": worst}


def _prefix_heads(ws: Workspace, blocks: CounterBlocks, max_len: int) -> list[Head]:
    """Layer 1: x_t - d0 by Lemma 15's prefix mean (value scale = mass, so the heads write the sum
    itself): one head over every position (mass max_len + 1), or one per position block (mass
    2L, every other real key losing beta; gadgets.prefix_mean_head), all into ``st:depth``."""
    if blocks.count == 1:
        mass = max_len + 1
        return [prefix_mean_head("st.prefix", ws[ABSORB], ws["bos"], ws["st:move"], ws["st:depth"], mass=mass,
                                 value_scale=float(mass), max_len=max_len)]
    return block_heads("st.prefix", blocks, ws[ABSORB], ws["bos"], ws["one"], ws["pos:block"], ws["st:move"],
                       ws["st:depth"], max_len, value_scale=float(blocks.mass))


def build(automaton: Semiautomaton, plan: BoundedStack, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The three-layer program for a bounded-stack automaton and its metadata (two layers for a
    legal stack; the stack construction uses no position code: ``options.positions`` is unused)."""
    max_len, eps = options.max_len, options.eps
    _table_budget(plan)
    sizes = _sizes(plan, automaton.n_symbols, automaton.n_states, max_len)
    if sizes["params"] > options.max_params:
        raise BudgetError(f"a stack model of {automaton.name} at max_len {max_len} would have "
                          f"{sizes['params']:,} parameters, over the budget of {options.max_params:,}")
    D = plan.depth
    split = prefix_blocks(max_len)
    mass = max_len + 1 if split.count == 1 else split.mass
    ws = layout(plan, max_len)
    d = ws.d_model
    assert d == sizes["d_model"]
    W_E = token_rows(plan, ws, automaton.start)
    W_pos = np.zeros((max_len + 1, d))
    W_pos[1:, ws["pos:index"][0]] = np.arange(1, max_len + 1, dtype=np.float64)
    if split.count == 1:
        W_pos[1:, ws[ABSORB][0]] = absorb_feature(mass, max_len)[1:]
    else:
        block_positions(W_pos, split, ws[ABSORB], ws["pos:block"], max_len)

    c = constants(plan, max_len)
    d0 = int(W_E[0, ws["st:depth"][0]])
    flat = options.one_hidden_layer
    block1 = Block(_prefix_heads(ws, split, max_len), _depth_mlp(ws, plan, max_len, d0, flat))
    block2 = Block([_level_head(plan, j, c) for j in range(1, D + 1)], _stack_mlp(plan, flat))
    blocks = [block1, block2] if plan.legal else [block1, block2, Block([_any_head(c)], _error_mlp())]
    W_U, b_U = readout(plan, ws)

    prec = precision(plan, max_len, eps)
    warnings = []
    if prec["margin"] < 1:
        weak = [what for key, what in (("score_margin", "layer-2 attention scores"),
                                       ("prefix_sum_margin", "layer-1 prefix sum")) if prec[key] < 1]
        warnings.append(f"stack at max_len {max_len}: beyond the certified reach of this dtype for the "
                        f"{' and '.join(weak)} (margin {prec['margin']:.2g}; float32 was measured exact up to "
                        f"{MEASURED_REACH}); verify before trusting, or use float64")
    meta = {
        "method": NAME,
        "warnings": warnings,
        NAME: {**plan.to_dict(), "absorb": mass, "prefix_blocks": [split.count, split.length], "constants": c,
               "precision": prec, "model_sizes": sizes},
        "layers": [b.notes() for b in blocks],
        **({ONE_HIDDEN_LAYER: True} if flat else {}),
    }
    return Program(ws, W_E, W_pos, blocks, W_U, b_U, state_codes=state_codes(plan, ws),
                   declaration=declaration(plan, ws, len(automaton.undefined))), meta


def state_codes(plan: BoundedStack, ws) -> StateCodes:
    """The readout's exact features (module doc, (a) and (b)): before the first error, the
    level one-hot of the depth and the stack bits [j <= depth] * open_j; from it on, st:error = 1."""
    dims = [*ws["st:level"].dims, *ws["st:stack"].dims]
    at = {d: i for i, d in enumerate(dims)}
    codes = np.zeros((len(plan.stacks), len(dims)), dtype=np.int64)
    sink = None
    for q, st in enumerate(plan.stacks):
        if st is None:
            sink = q
            continue
        codes[q, at[ws["st:level"][len(st)]]] = 1
        for j, b in enumerate(st, start=1):
            codes[q, at[ws["st:stack"][(j - 1) * plan.symbols + b]]] = 1
    if plan.legal:
        return StateCodes(dims, codes)
    return StateCodes(dims, codes, ws["st:error"][0], sink)


def set_start(model: CompiledTransformer, plan: BoundedStack, start: str) -> None:
    """Point ``model`` at start state ``start`` (in place): s0 lives in the ``st:depth`` column of
    every embedding row and in BOS's ``st:start{j}`` / ``st:starterr`` entries, nowhere else."""
    q0 = check_start(model.automaton, start)
    with torch.no_grad():
        for dim, col in start_columns(plan, model.metadata.subspaces, q0).items():
            model.W_E[:, dim] = torch.from_numpy(col).to(model.W_E.dtype)
    model.record_start(start)


# ---------------------------------------------------------------------------------------
# the declaration: what the gadgets do not state (the tracked codes, the readout, the claims)


def _stack_code(plan: BoundedStack, st: tuple[int, ...]) -> tuple[int, ...]:
    """A stack's readout code: the level one-hot of its depth, then its stack bits."""
    level = np.zeros(plan.depth + 1, dtype=np.int64)
    level[len(st)] = 1
    bits = np.zeros(plan.depth * plan.symbols, dtype=np.int64)
    for j, b in enumerate(st, start=1):
        bits[(j - 1) * plan.symbols + b] = 1
    return (*level.tolist(), *bits.tolist())


def _held(plan: BoundedStack) -> np.ndarray:
    """Claim (b) of the module doc as rows of (st:level, st:open1..D, st:stack): at depth x, each
    level j <= x holds a symbol (a push's, or the start stack's), every other level a symbol or 0,
    and the stack bits are [j <= x] open_j."""
    D, k = plan.depth, plan.symbols
    eye = [tuple(int(v) for v in row) for row in np.eye(k, dtype=np.int64)]
    rows = []
    for x in range(D + 1):
        level = tuple(int(v == x) for v in range(D + 1))
        for opens in itertools.product(*[eye if j <= x else [(0,) * k, *eye] for j in range(1, D + 1)]):
            stack = tuple(v if j <= x else 0 for j, o in enumerate(opens, start=1) for v in o)
            rows.append((*level, *(v for o in opens for v in o), *stack))
    return np.array(rows, dtype=np.float64)


def declaration(plan: BoundedStack, ws: Workspace, undefined: int) -> Declaration:
    """What the program declares beside its gadgets' obligations: every subspace but the fixed ones
    is tracked; the readout's table has every stack's code (with an error, every code reads as the
    sink).  Claims (the module doc's theorem): with error tracking, where st:error is 0 the level
    and stack bits are a stack's code (no error yet: (a), (b)); a legal stack's depth stays in
    0..D and its levels satisfy (b) on every legal input -- a :class:`Promise` (of an automaton
    that leaves ``undefined`` transitions out), so its certificate holds on legal inputs only."""
    D, k = plan.depth, plan.symbols
    tracked = tuple(n for n in ws.subspaces if n not in FIXED)
    table = {_stack_code(plan, st): q for q, st in enumerate(plan.stacks) if st is not None}
    if plan.legal:
        opens = tuple(open_name(j) for j in range(1, D + 1))
        claims = (Joint(("st:depth",), np.arange(D + 1, dtype=np.float64)[:, None]),
                  Joint(("st:level", *opens, "st:stack"), _held(plan)))
        return Declaration(NAME, tracked, Readout(("st:level", "st:stack"), table),
                           promise=Promise("legal", promise_text(undefined), claims))
    sink = plan.stacks.index(None)
    anything = [(*lv, *bits) for lv in _level_codes(plan) for bits in itertools.product((0, 1), repeat=D * k)]
    table = {**{(*c, 0): q for c, q in table.items()}, **{(*c, 1): sink for c in anything}}
    joint = Joint(("st:level", "st:stack", "st:error"), np.array(sorted(table), dtype=np.float64))
    return Declaration(NAME, tracked, Readout(("st:level", "st:stack", "st:error"), table), joint=(joint,))


# ---------------------------------------------------------------------------------------
# the registry entry: the recognised stack is the plan


def applies(automaton: Semiautomaton) -> BoundedStack | Refusal:
    """The bounded stack ``automaton`` is up to renaming (a legal one when it is partial), or why it is not one."""
    plan, reason = detect_any(automaton)
    if plan is None:
        kind = ("a legal bounded stack (pushes and pops, errors undefined)" if automaton.partial else
                "a bounded-stack automaton (pushes and pops with an error sink)")
        return Refusal(f"the stack construction needs {kind}, but {automaton.name or 'this automaton'} is not one "
                       f"up to renaming: {reason}")
    return plan


def estimate(plan: BoundedStack, max_len: int, positions: str = "sinusoidal") -> Cost:
    """Three attention layers (two for a legal stack) at every max_len; the exact parameter count of
    the assembled model."""
    n_symbols, n_states = len(plan.letters), len(plan.stacks)
    _table_budget(plan)
    params = _sizes(plan, n_symbols, n_states, max_len)["params"]
    if params > MAX_PARAMS:
        raise BudgetError(f"a stack model at max_len {max_len} would have {params:,} parameters, over the budget "
                          f"of {MAX_PARAMS:,}")
    return Cost(2 if plan.legal else 3, params)


CONSTRUCTION = Construction(
    name=NAME, theorem="bounded stacks (Dyck)", applies=applies, estimate=estimate, build=build,
    set_start=set_start, plan_to_json=BoundedStack.to_dict, plan_from_json=BoundedStack.from_dict,
    describe=lambda plan, automaton: plan.describe(automaton),
    families=checks.families, family_seeds=lambda seed: {"stack_families": seed + checks.FAMILY_SEED_OFFSET},
    obligations=declared_obligations(build),
)
