"""Theorem 10: any automaton in ceil(log2 T) attention layers by a parallel prefix scan.

Residual subspaces:
  ``one``, ``bos``        constant 1; 1 only at BOS
  ``pos:*``               position code (constructions/positions.py)
  ``scan:map[x]``         integer code of f_t(x), the running transition map on points x
  ``scan:prev[x]``        scratch: the map fetched from t - 2^(l-1); cleared by the MLP
  ``readout:dist[...]``   only for element readouts (compiler/representation.py)

Embedding: symbol a writes its transition map, BOS the identity map.  Layer l
fetches f_(t - 2^(l-1)) (BOS's identity when that position does not exist) and
the composition MLP (Lemma 14) replaces f_t by "f_(t-2^(l-1)), then f_t", in place.
After layer l, position t holds the map of letters max(1, t-2^l+1)..t -- the
invariant the verifier checks -- so after ceil(log2 T) layers it holds
delta(., sigma_1..sigma_t) and the state is f_t(q0).  The start state enters only
the unembedding, so one model serves every start state (:func:`readout`).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch

from compiler.automata.errors import BudgetError, InputError
from compiler.automata.representation import Representation, choose
from compiler.automata.spec import Semiautomaton

from . import scan_checks
from .assemble import count_params
from .budget import MAX_PARAMS
from .construction import Construction, Cost
from .gadgets import compose_mlp, distance_units, offset_head
from .positions import position_code, position_table
from .program import MLP, Block, Program, fuse
from .workspace import Workspace, workspace_from_meta

NAME = "scan"


def n_scan_layers(max_len: int) -> int:
    """ceil(log2 T) attention layers (at least one, so T = 1 still has a block)."""
    return max(1, math.ceil(math.log2(max_len)))


def readout(rep: Representation, automaton: Semiautomaton, ws: Workspace, start: int) -> tuple[np.ndarray, np.ndarray]:
    """Unembedding (W_U, b_U) giving one logit per state for start state ``start``.

    Natural action: x = f_t(q0) is an exact integer code in ``scan:map[q0]``;
    logit_q = 2 q x - q^2 is maximal at q = x with margin (x - q)^2 >= 1.
    Element readout: logit_q = -||f_t - s_q||_1 over the distance units, where
    s_q is the unique group element with q0.s_q = q (margin >= 1).
    """
    n = automaton.n_states
    W_U = np.zeros((ws.d_model, n))
    b_U = np.zeros(n)
    if rep.natural:
        x = ws["scan:map"][start]
        for q in range(n):
            W_U[x, q] = 2.0 * q
            b_U[q] = -float(q * q)
        return W_U, b_U
    dist = ws["readout:dist"]
    m = rep.n_points
    for point_map, state_map in rep.elements:
        q = state_map[start]
        for i in range(m):
            base = (i * m + point_map[i]) * 2
            W_U[dist[base], q] -= 1.0
            W_U[dist[base + 1], q] -= 1.0
    return W_U, b_U


def estimated_params(n_points: int, max_len: int) -> int:
    """About the parameters of a scan model on ``n_points`` points (dense weights, Lemma 14 widths,
    the natural readout): the closed form :func:`check_budget` refuses by before anything is made;
    :func:`estimate` counts exactly."""
    m = n_points
    h1, h2 = 2 * m * (m - 1) + 4 * m, m * m + 4 * m
    d = 2 * m + 2 + 2 * (math.ceil(math.log2(max_len + 1)) + 1)
    return n_scan_layers(max_len) * (d * h1 + h1 * h2 + h2 * d + 4 * d * (m + 1))


def check_budget(n_points: int, max_len: int, max_params: int) -> None:
    """Refuse (BudgetError) a scan model larger than ``max_params``."""
    est = estimated_params(n_points, max_len)
    if est > max_params:
        raise BudgetError(
            f"a scan model composing maps on {n_points} points at max_len {max_len} would have about "
            f"{est:,} parameters, over the budget of {max_params:,}; the MLP width grows like |Q|^2"
        )


def _workspace(rep: Representation, code) -> Workspace:
    """The residual subspaces: constants, the position code, the map and its scratch, and the
    element readout's distance units when the action is not natural."""
    m = rep.n_points
    ws = Workspace()
    ws.add("one"), ws.add("bos"), ws.add("pos", code.labels)
    ws.add("scan:map", m), ws.add("scan:prev", m)
    if not rep.natural:
        ws.add("readout:dist", [f"{d}{i},{v}" for i in range(m) for v in range(m) for d in ("above", "below")])
    return ws


def _blocks(rep: Representation, ws: Workspace, code, max_len: int, compose: Callable[[int], MLP]) -> list[Block]:
    """Layer l: an offset head fetching the map at t - 2^(l-1) and ``compose(l)``, the Lemma 14
    composition MLP; the element readout's distance units fused into the last MLP."""
    F, G, m = ws["scan:map"], ws["scan:prev"], rep.n_points
    blocks = []
    for l in range(1, n_scan_layers(max_len) + 1):
        head = offset_head(f"scan{l}.lookback", ws["pos"], code, ws["bos"], ws["one"], 2 ** (l - 1), F, G,
                           value_range=m - 1)
        blocks.append(Block([head], compose(l)))
    if not rep.natural:
        last = blocks[-1]
        last.mlp = fuse(last.mlp, distance_units("readout", F, m, ws["readout:dist"]))
    return blocks


def build(automaton: Semiautomaton, *, max_len: int, positions: str = "sinusoidal",
          rep: Representation | None = None, max_params: int = MAX_PARAMS, eps: float = 2.0**-23) -> tuple[Program, dict[str, Any]]:
    """The scan program for ``automaton`` at length ``max_len`` and its metadata.

    ``eps`` is the machine epsilon of the target dtype: it decides whether the
    position code's score gap survives rounding (recorded, and warned about)."""
    rep = rep or choose(automaton)
    m = rep.n_points
    check_budget(m, max_len, max_params)
    code = position_code(positions, max_len)
    ws = _workspace(rep, code)
    one, bos, pos, F = ws["one"], ws["bos"], ws["pos"], ws["scan:map"]
    d = ws.d_model

    W_E = np.zeros((automaton.n_symbols + 1, d))
    W_E[:, one[0]] = 1.0
    for a, fmap in enumerate(rep.letter_maps):
        W_E[a, list(F.dims)] = fmap
    W_E[-1, bos[0]] = 1.0
    W_E[-1, list(F.dims)] = np.arange(m)
    W_pos = np.zeros((max_len + 1, d))
    W_pos[:, list(pos.dims)] = position_table(code)

    blocks = _blocks(rep, ws, code, max_len, lambda l: compose_mlp(f"scan{l}.compose", F, ws["scan:prev"]))
    W_U, b_U = readout(rep, automaton, ws, automaton.start)
    margin = code.precision_margin(eps)
    warnings = []
    if margin < 1:
        warnings.append(
            f"{positions} positions at max_len {max_len}: the attention score gap is below the rounding error of "
            f"this dtype (margin {margin:.2g}); expect wrong look-backs -- use sinusoidal positions or float64"
        )
    meta = {
        "method": NAME,
        "positions": positions,
        "position_precision_margin": margin,
        "warnings": warnings,
        NAME: {
            "n_points": m,
            "natural": rep.natural,
            "letter_maps": [list(x) for x in rep.letter_maps],
            "elements": None if rep.natural else [[list(p), list(s)] for p, s in rep.elements],
        },
        "layers": [{"heads": [h.notes for h in b.heads], "mlp": b.mlp.notes} for b in blocks],
    }
    program = Program(ws, W_E, W_pos, blocks, W_U, b_U)
    return program, meta


def set_start(model, rep: Representation, start: str) -> None:
    """Point ``model``'s unembedding at start state ``start`` (in place).

    Position t holds delta(., sigma_1..sigma_t) for every state at once, so only the
    readout depends on q0 (Theorem 10 serves every start state)."""
    a = model.automaton
    if start not in a.state_index:
        raise InputError(f"unknown start state {start!r}; the states of {a.name} are {list(a.states)}")
    q0 = a.state_index[start]
    ws = workspace_from_meta(model.meta["residual_labels"], model.meta["subspaces"])
    W_U, b_U = readout(rep, a, ws, q0)
    with torch.no_grad():
        model.W_U.copy_(torch.from_numpy(W_U).to(model.W_U.dtype))
        model.b_U.copy_(torch.from_numpy(b_U).to(model.b_U.dtype))
    spec = dict(model.meta["automaton"])
    spec["start"] = start
    model.meta = {**model.meta, "automaton": spec}
    model._automaton = None


# ---------------------------------------------------------------------------------------
# the registry entry: the chosen representation is the plan (the last resort: always applies)


def estimate(rep: Representation, max_len: int, positions: str = "sinusoidal") -> Cost:
    """Exact depth and parameters: the blocks :func:`build` makes, counted without the
    embedding, position and unembedding weights (``assemble.count_params``).  Every layer's
    composition MLP has the same shape, so one is made and counted for all; a model over the
    parameter budget is refused first, from the closed form (:func:`check_budget`), as build does."""
    check_budget(rep.n_points, max_len, MAX_PARAMS)
    code = position_code(positions, max_len)
    ws = _workspace(rep, code)
    compose = compose_mlp("scan.compose", ws["scan:map"], ws["scan:prev"])
    blocks = _blocks(rep, ws, code, max_len, lambda l: compose)
    n_states = rep.n_points if rep.natural else len(rep.elements[0][1])
    return Cost(len(blocks), count_params(ws, blocks, n_symbols=len(rep.letter_maps), n_out=n_states,
                                          max_len=max_len))


def build_plan(automaton: Semiautomaton, rep: Representation, *, max_len: int, eps: float,
               positions: str) -> tuple[Program, dict[str, Any]]:
    """:func:`build` from the plan."""
    return build(automaton, max_len=max_len, positions=positions, rep=rep, eps=eps)


def describe(rep: Representation, automaton: Semiautomaton) -> str:
    if rep.natural:
        return f"transition maps composed on the {rep.n_points} states"
    return (f"transition maps composed on {rep.n_points} points (a faithful quotient of the {automaton.n_states} "
            f"states; read out by group element)")


CONSTRUCTION = Construction(
    name=NAME, theorem="Theorem 10", applies=choose, estimate=estimate, build=build_plan, set_start=set_start,
    plan_to_json=Representation.to_dict, plan_from_json=Representation.from_dict, describe=describe,
    invariants=scan_checks.invariants, head_target=scan_checks.head_target,
)
