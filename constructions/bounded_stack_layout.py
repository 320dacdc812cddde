"""A bounded stack's residual layout, constants and token embedding (the subspaces and the
derivations of :mod:`constructions.bounded_stack`'s module docstring)."""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.automata.stack_detect import NOOP, PUSH, BoundedStack

from .budget import STEP_TOLERANCE
from .gadgets import ABSORB, Residue, attention_temperature, residue_range
from .krohn_rhodes_layout import CounterBlocks, position_blocks
from .workspace import Workspace


MATCH, GAP = 2.0, 1.0
"""Layer-2 key scores: a push to the wanted level scores MATCH (two exact bits), any other
position at most MATCH - GAP (before recency)."""


def open_name(j: int) -> str:
    return f"st:open{j}"


def start_name(j: int) -> str:
    return f"st:start{j}"


def constants(plan: BoundedStack, max_len: int) -> dict[str, float]:
    """Every derived constant (see the module doc).

    lambda: recency per position; lambda * max_len < GAP / 2 keeps every push to level j
        above BOS (MATCH - GAP / 2) and BOS above every other position.
    tol: error of a level head's copy; MLP 2's steps absorb STEP_TOLERANCE, half goes here.
    beta3: the "any flag" head; exp(-beta3 / 2) * (max_len + 1) <= 1/8.
    """
    lam = GAP / (2.0 * (max_len + 1))
    tol = STEP_TOLERANCE / 2
    t = attention_temperature(max_len, value_range=1.0, score_gap=lam, tolerance=tol)
    any_t = attention_temperature(max_len, value_range=1.0, score_gap=0.5, tolerance=0.25)
    res = depth_residue(plan)
    return {"lambda": lam, "tol": tol, "sink": MATCH - GAP / 2, **t, "beta3": any_t["beta"],
            "any_leak_bound": any_t["leak_bound"], "modulus": res.modulus, "offset": res.offset,
            "readout_C": 2.0 * plan.depth + 2}


def prefix_blocks(max_len: int) -> CounterBlocks:
    """The position blocks of layer 1's prefix sum: the fewest whose float32 rounding stays
    within the decode's tolerance (the krohn-rhodes counters' rule for terms -1..1,
    krohn_rhodes_layout.position_blocks); one block, the single head over every position with mass
    max_len + 1, up to max_len ~1300, where one head's order-free bound eps T^2 allows."""
    return position_blocks(2, max_len)


def layout(plan: BoundedStack, max_len: int) -> Workspace:
    D, k = plan.depth, plan.symbols
    s = prefix_blocks(max_len).count
    ws = Workspace()
    for name in ("one", "bos", "pos:index"):
        ws.add(name)
    ws.add(ABSORB, s)
    if s > 1:
        ws.add("pos:block", s)
    for name in ("st:move", "st:push"):
        ws.add(name)
    ws.add("st:type", k)
    if not plan.legal:
        ws.add("st:pop", k)
    for j in range(1, D + 1):
        ws.add(start_name(j), k)
    if not plan.legal:
        ws.add("st:starterr")
    ws.add("st:depth")
    ws.add("st:level", D + 1), ws.add("st:out")
    for j in range(1, D + 1):
        ws.add(open_name(j), k)
    ws.add("st:stack", [f"{j}.{b}" for j in range(1, D + 1) for b in range(k)])
    if not plan.legal:
        ws.add("st:mismatch"), ws.add("st:any"), ws.add("st:error")
    return ws


def depth_residue(plan: BoundedStack) -> Residue:
    """The residue decode of x_t: range -1..D+1 (up to the first error), modulus D + 2."""
    return residue_range(-1, plan.depth + 1, plan.depth + 2)


def start_columns(plan: BoundedStack, dims: dict[str, Any], start: int) -> dict[int, np.ndarray]:
    """The embedding columns the start state sets: {residual dim: column over rows (BOS last)};
    ``dims``: subspace name -> its residual dims."""
    n_rows = len(plan.letters) + 1
    s0 = plan.stacks[start]
    cols: dict[int, np.ndarray] = {}
    depth = np.full(n_rows, float(len(s0) if s0 is not None else 0))
    cols[dims["st:depth"][0]] = depth
    bos_only = lambda on: np.eye(n_rows)[-1] * float(on)
    if "st:starterr" in dims:
        cols[dims["st:starterr"][0]] = bos_only(s0 is None)
    for j in range(1, plan.depth + 1):
        for b in range(plan.symbols):
            cols[dims[start_name(j)][b]] = bos_only(s0 is not None and len(s0) >= j and s0[j - 1] == b)
    return cols


def token_rows(plan: BoundedStack, ws: Workspace, start: int) -> np.ndarray:
    """The token embedding W_E (rows: the letters, then BOS): ``one``, ``bos``, each letter's move,
    push bit and pushed (or popped) symbol, and the start stack's columns (:func:`start_columns`)."""
    W_E = np.zeros((len(plan.letters) + 1, ws.d_model))
    W_E[:, ws["one"][0]] = 1.0
    W_E[-1, ws["bos"][0]] = 1.0
    for s, (kind, b) in enumerate(plan.letters):
        if kind == NOOP:
            continue
        W_E[s, ws["st:move"][0]] = 1.0 if kind == PUSH else -1.0
        if kind == PUSH:
            W_E[s, ws["st:push"][0]] = 1.0
            W_E[s, ws["st:type"][b]] = 1.0
        elif not plan.legal:
            W_E[s, ws["st:pop"][b]] = 1.0
    for dim, col in start_columns(plan, {n: sub.dims for n, sub in ws.subspaces.items()}, start).items():
        W_E[:, dim] = col
    return W_E
