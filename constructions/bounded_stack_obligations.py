"""What a bounded-stack model must run (``constructions/obligations/``): the prefix sum of the
moves, its exact residue decode, the last push per level (:class:`Latest`), the stack lookup and,
with the sink, "some flag so far" (:class:`AnyFlag`, :class:`Threshold`); under the promise of
legal inputs, the claims legal inputs keep (:class:`Promise`).  Stated from the plan alone,
following :mod:`constructions.bounded_stack`'s module docstring."""

from __future__ import annotations

import itertools

import numpy as np

from compiler.automata.stack_detect import BoundedStack

from .bounded_stack_layout import depth_residue, layout, open_name, prefix_blocks, start_name, token_rows
from .gadgets import ABSORB
from .krohn_rhodes_layout import CounterBlocks, block_average
from .obligations import (Average, AnyFlag, Embedding, Joint, Latest, Layer, Lookup, Obligations, Promise, Readout,
                          Threshold)


FIXED = ("one", "bos", "pos:index", ABSORB, "pos:block")
"""The input-independent subspaces (every other one is tracked by the certificate)."""


def prefix_average(blocks: CounterBlocks, max_len: int) -> Average:
    """Layer 1's heads (:func:`_prefix_heads`) as an obligation."""
    if blocks.count == 1:
        return Average(("st.prefix",), (1,), (max_len,), max_len + 1, float(max_len + 1), "st:move", "st:depth")
    return block_average("st.prefix", blocks, max_len, float(blocks.mass), "st:move", "st:depth")


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


def _level_codes(plan: BoundedStack) -> list[tuple[int, ...]]:
    """The codes st:level can hold: a one-hot of 0..D, or 0 (at BOS; past the first error)."""
    eye = np.eye(plan.depth + 1, dtype=np.int64)
    return [tuple(int(v) for v in row) for row in eye] + [(0,) * (plan.depth + 1)]


def _stack_table(plan: BoundedStack) -> dict[tuple[int, ...], np.ndarray]:
    """MLP 2's declared function on every code combination it may read (module doc):
    stack[j, b] = [sum_{v >= j} level_v + open_j[b] >= 2] and, with error tracking, mismatch =
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


def obligations(model, plan: BoundedStack, name: str) -> Obligations:
    """What a stack model must run (:mod:`constructions.obligations`), from the plan alone: the
    token rows; layer 1 the prefix sum x_t (:class:`Average`, d0 held before it) decoded into the
    level one-hot (:class:`Lookup`, the gadget's exact output for every integer); layer 2 each
    level's last push (:class:`Latest`: level bit and push bit both 1; BOS gives s0's symbol) and
    the stack bits (and the mismatch flag); with error tracking, layer 3 "some flag so far"
    (:class:`AnyFlag`, :class:`Threshold`).  The readout's table has every stack's code, and
    with an error every code reads as the sink.

    Claims about the program (the module doc's theorem): with error tracking, where st:error is 0
    the level and stack bits are a stack's code (no error yet: (a), (b)); a legal stack's depth
    stays in 0..D and its levels satisfy (b) on every legal input -- a :class:`Promise`, so its
    certificate holds on legal inputs only."""
    D, k, T = plan.depth, plan.symbols, model.max_len
    ws = layout(plan, T)
    W_E = token_rows(plan, ws, model.automaton.start)
    codes = {n: W_E[:, list(sub.dims)] for n, sub in ws.subspaces.items() if n not in FIXED}
    d0 = int(W_E[0, ws["st:depth"][0]])
    prefix = prefix_average(prefix_blocks(T), T)
    depth_keys = range(0, D + 1) if plan.legal else range(d0 - T, d0 + T + 1)
    depth = Lookup("st.depth", ("st:depth", "bos"), "st:level + st:out",
                   {(x, 0): _decoded(plan, x) for x in depth_keys}, np.zeros(D + 2))
    levels = tuple(Latest(f"st.open{j}", f"st:level[{j}] + st:push", ((1, 1),), ("st:type", start_name(j)),
                          open_name(j)) for j in range(1, D + 1))
    reads = ("st:level", *[open_name(j) for j in range(1, D + 1)]) + (() if plan.legal else ("st:pop",))
    stack = Lookup("st.stack", reads, "st:stack" if plan.legal else "st:stack + st:mismatch", _stack_table(plan))
    layers = [Layer((prefix,), depth), Layer(levels, stack)]
    table = {_stack_code(plan, st): q for q, st in enumerate(plan.stacks) if st is not None}
    opens = tuple(open_name(j) for j in range(1, D + 1))
    if plan.legal:
        claims = (Joint(("st:depth",), np.arange(D + 1, dtype=np.float64)[:, None]),
                  Joint(("st:level", *opens, "st:stack"), _held(plan)))
        text = (model.meta.get("promise") or {}).get("text") or "legal inputs only"
        return Obligations(name, Embedding(codes), tuple(layers), Readout(("st:level", "st:stack"), table),
                           promise=Promise("legal", text, claims))
    layers.append(Layer((AnyFlag("st.any", "st:out + st:mismatch + st:starterr", "st:any"),),
                        Threshold("st.error", "st:any", "st:error")))
    sink = plan.stacks.index(None)
    anything = [(*lv, *bits) for lv in _level_codes(plan) for bits in itertools.product((0, 1), repeat=D * k)]
    table = {**{(*c, 0): q for c, q in table.items()}, **{(*c, 1): sink for c in anything}}
    joint = Joint(("st:level", "st:stack", "st:error"), np.array(sorted(table), dtype=np.float64))
    return Obligations(name, Embedding(codes), tuple(layers), Readout(("st:level", "st:stack", "st:error"), table),
                       joint=(joint,))
