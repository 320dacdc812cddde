"""Star-free: a since program, one attention layer per level of "latest reset" features.

Theorem.  Let P be a since program of L layers for the automaton from its start
(compiler/automata/starfree.py: knowledge codes S_0(t) = the letter's class, and per layer i
reset features -- the colour F_ij(S_{i-1}(s)) at the latest s <= t whose code F_ij flags, the
initial colour when none -- an optional yesterday feature S_{i-1}(t-1), and a table from
(S_{i-1}(t), the features at t) to S_i(t), the last layer's to the state).  The detection's walk
over (state, program memory) proves that the last table names q_t for every input and every
t >= 1.  Then the program below computes q_t exactly at every position t <= max_len, in L layers.

Lemma (one since level per layer).  A reset feature is past LTL's "since": with flag g = "S_{i-1}
is a flagged code" and value F(S_{i-1}), its value at t is F at the latest flagged s <= t -- one
most-recent-flag head (Lemma 16) over flags and colours that the layer below wrote at every
position (BOS flagged, holding the initial colour).  A yesterday feature is Theorem 10's offset-1
look-back of the code below (BOS's 0 at t = 1).  Neither reads what its own layer writes, so a
layer's heads run side by side, and one Lemma 11 lookup per layer writes the next code and the
next layer's flags and colours (a function of that code).  Induction on the layers: every code,
flag and colour the network holds at t is the program's (within STEP_TOLERANCE of its integer:
Lemma 13 for the heads with the derived inverse temperatures, exact lookups), so the last lookup
writes the one-hot of q_t. ∎

Program.  ``sf:know0`` the letter's class (W_E); per layer i and reset feature j ``sf:flag{i}.{j}``,
``sf:colour{i}.{j}`` (W_E for i = 1, else the lookup of layer i - 1; BOS: flag 1 and the initial
colour from W_E), ``sf:latest{i}.{j}`` (the head's copy), ``sf:prev{i}`` (the yesterday copy),
``sf:know{i}`` (the lookup's code), ``sf:state`` the one-hot read out.

* Layer i, attention: a most-recent-flag head per reset feature (gadgets.recent_flag_head), and
  with a yesterday feature one offset head (gadgets.offset_head, offset 1).
* Layer i, MLP: the exact lookup (gadgets.lookup_mlp, 0 off its table, so BOS's flags and colours
  stay as W_E wrote them) from (S_{i-1}, the features) to (S_i, layer i + 1's flags and colours);
  in the last layer to the state's one-hot.

One declaration: the gadgets state their obligations (``Recent``, ``Fetch``, ``Lookup``) where they
make the weights, :func:`program` the tracked subspaces, the readout and the claim (``Joint``) that
the last lookup's inputs are a key the start reaches; the certificate's program proof runs the
same program beside the automaton.  No new obligation kind and no checker code.

Float reach: the recency gap 1/(2(T+1)) of Lemma 16 (``local``'s bound: margin
(1/(4(T+1)))/(4 eps 1.5), float32 ~1.4e3 at T = 256) and the position code's margin for the
offset heads.  The plan depends on the start (the walk starts there): :func:`set_start` detects
again and rebuilds in place, or refuses a plan of another shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.automata.spec import Semiautomaton
from compiler.automata.starfree import StarFreePlan, detect

from .assemble import program_params
from .budget import MAX_PARAMS, check_params
from .construction import (BuildOptions, Construction, Cost, Refusal, check_plan_start, declared_obligations,
                           rebuild_detected)
from .gadgets import CodeInput, lookup_mlp, offset_head, recency_margin, recent_flag_head
from .obligations import keys_reached, one_hot_readout
from .positions import PositionCode, position_code, position_table
from .program import MLP, Block, Declaration, Head, Program
from .workspace import Workspace, join
from .model import CompiledTransformer

NAME = "starfree"
UNTRACKED = ("one", "bos", "pos", "pos:recency")
"""The constant and position features (W_pos): every other subspace's code is tracked from W_E."""


def _sub(kind: str, i: int, j: int | None = None) -> str:
    return f"sf:{kind}{i}" if j is None else f"sf:{kind}{i}.{j}"


def _uses_positions(plan: StarFreePlan) -> bool:
    return any(layer.yesterday for layer in plan.layers)


def _layout(plan: StarFreePlan, code: PositionCode) -> Workspace:
    """The residual subspaces (module docstring)."""
    ws = Workspace()
    ws.add("one"), ws.add("bos")
    if _uses_positions(plan):
        ws.add("pos", code.labels)
    if any(layer.resets for layer in plan.layers):
        ws.add("pos:recency")
    ws.add(_sub("know", 0))
    for i, layer in enumerate(plan.layers, 1):
        for j in range(len(layer.resets)):
            ws.add(_sub("flag", i, j)), ws.add(_sub("colour", i, j)), ws.add(_sub("latest", i, j))
        if layer.yesterday:
            ws.add(_sub("prev", i))
        if i < plan.depth:
            ws.add(_sub("know", i))
    ws.add("sf:state", plan.n_states)
    return ws


def _heads(plan: StarFreePlan, ws: Workspace, code: PositionCode, i: int, max_len: int) -> list[Head]:
    """Layer i's heads: one most-recent-flag head per reset feature, the yesterday look-back."""
    layer = plan.layers[i - 1]
    heads = [recent_flag_head(f"sf.latest{i}.{j}", ws[_sub("flag", i, j)], ws["pos:recency"], ws["one"],
                              ws[_sub("colour", i, j)], ws[_sub("latest", i, j)], max_len,
                              value_range=float(max(1, layer.colours[j] - 1)))
             for j in range(len(layer.resets))]
    if layer.yesterday:
        heads.append(offset_head(f"sf.prev{i}", ws["pos"], code, ws["bos"], ws["one"], 1, ws[_sub("know", i - 1)],
                                 ws[_sub("prev", i)], value_range=float(plan.codes[i - 1])))
    return heads


def _mlp(plan: StarFreePlan, ws: Workspace, i: int) -> MLP:
    """Layer i's lookup (Lemma 11): (S_{i-1}, the features) -> (S_i, layer i + 1's flags and colours),
    or in the last layer the state's one-hot; 0 off the reachable keys."""
    layer = plan.layers[i - 1]
    below = plan.codes[i - 1] + 1
    ins = [CodeInput(ws[_sub("know", i - 1)], below)]
    ins += [CodeInput(ws[_sub("latest", i, j)], n) for j, n in enumerate(layer.colours)]
    if layer.yesterday:
        ins.append(CodeInput(ws[_sub("prev", i)], below))
    if i == plan.depth:
        eye = np.eye(plan.n_states)
        table = {key: eye[q] for key, q in zip(layer.keys, layer.values)}
        return lookup_mlp(f"sf.final{i}", ins, ws["sf:state"], table, total=True)
    nxt = plan.layers[i]
    parts = [ws[_sub("know", i)]]
    for j in range(len(nxt.resets)):
        parts += [ws[_sub("flag", i + 1, j)], ws[_sub("colour", i + 1, j)]]
    resets = [dict(r) for r in nxt.resets]
    table = {}
    for key, v in zip(layer.keys, layer.values):
        row = [float(v)]
        for r in resets:
            row += [1.0, float(r[v])] if v in r else [0.0, 0.0]
        table[key] = np.array(row)
    return lookup_mlp(f"sf.step{i}", ins, join(f"sf:out{i}", parts), table, total=True)


def _embeddings(plan: StarFreePlan, ws: Workspace, code: PositionCode, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """W_E (constant 1; BOS: its flag and every reset feature's flag 1 and initial colour; letters:
    their class and layer 1's flags and colours) and W_pos (position code, recency t/(T+1))."""
    d, s, T = ws.d_model, plan.n_symbols, max_len
    W_E = np.zeros((s + 1, d))
    W_E[:, ws["one"][0]] = 1.0
    W_E[-1, ws["bos"][0]] = 1.0
    for i, layer in enumerate(plan.layers, 1):
        for j, init in enumerate(layer.inits):
            W_E[-1, ws[_sub("flag", i, j)][0]] = 1.0
            W_E[-1, ws[_sub("colour", i, j)][0]] = float(init)
    first = [dict(r) for r in plan.layers[0].resets]
    for x, c in enumerate(plan.letter_class):
        W_E[x, ws[_sub("know", 0)][0]] = float(c)
        for j, r in enumerate(first):
            if c in r:
                W_E[x, ws[_sub("flag", 1, j)][0]] = 1.0
                W_E[x, ws[_sub("colour", 1, j)][0]] = float(r[c])
    W_pos = np.zeros((T + 1, d))
    if _uses_positions(plan):
        W_pos[:, list(ws["pos"].dims)] = position_table(code)
    if "pos:recency" in ws.subspaces:
        W_pos[:, ws["pos:recency"][0]] = np.arange(T + 1, dtype=np.float64) / (T + 1)
    return W_E, W_pos


def program(plan: StarFreePlan, max_len: int, positions: str = "sinusoidal") -> Program:
    """The program (weights in float64) and its declaration: every subspace but the constant and
    position features tracked from W_E, the state's one-hot read out, and the claims that every
    lookup's inputs are a key the start reaches (the walk's keys: the program proof checks them, and
    the weights are checked on those keys alone)."""
    code = position_code(positions, max_len)
    ws = _layout(plan, code)
    W_E, W_pos = _embeddings(plan, ws, code, max_len)
    blocks = [Block(_heads(plan, ws, code, i, max_len), _mlp(plan, ws, i)) for i in range(1, plan.depth + 1)]
    W_U = np.zeros((ws.d_model, plan.n_states))
    W_U[list(ws["sf:state"].dims), np.arange(plan.n_states)] = 1.0
    tracked = tuple(n for n in ws.subspaces if n not in UNTRACKED)
    lookups = [b.mlp for b in blocks]
    assert all(isinstance(m, MLP) for m in lookups)
    declared = Declaration(NAME, tracked, one_hot_readout("sf:state", plan.n_states),
                           joint=tuple(keys_reached(m.obligation) for m in lookups if isinstance(m, MLP)))
    return Program(ws, W_E, W_pos, blocks, W_U, np.zeros(plan.n_states), declaration=declared)


def precision(plan: StarFreePlan, code: PositionCode, max_len: int, eps: float) -> dict[str, float]:
    """Worst-case rounding margins (> 1 safe): the recency gap's, as constructions/local.py's, and
    the position code's for the yesterday heads."""
    out = {}
    if _uses_positions(plan):
        out["position_margin"] = code.precision_margin(eps)
    if any(layer.resets for layer in plan.layers):
        out["recency_margin"] = recency_margin(max_len, eps)
    if out:
        out["margin"] = min(out.values())
    return out


def _check_budget(params: int, plan: StarFreePlan, max_len: int, max_params: int) -> None:
    check_params(params, max_params, f"a star-free model with {plan.depth} layers and "
                 f"{sum(len(x.keys) for x in plan.layers):,} lookup keys at max_len {max_len}")

def build(automaton: Semiautomaton, plan: StarFreePlan, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The program for ``automaton`` and its metadata (the plan is for the automaton's start)."""
    check_plan_start(automaton, plan.start, NAME)
    prog = program(plan, options.max_len, options.positions)
    params = program_params(prog)
    _check_budget(params, plan, options.max_len, options.max_params)
    prec = precision(plan, position_code(options.positions, options.max_len), options.max_len, options.eps)
    warnings = []
    if prec.get("margin", 1.0) < 1:
        warnings.append(f"starfree at max_len {options.max_len}: the worst-case rounding bound of this dtype exceeds "
                        f"its tolerance (margin {prec['margin']:.2g}); verify before trusting, or use float64")
    meta = {"method": NAME, "positions": options.positions if _uses_positions(plan) else None,
            "position_precision_margin": prec.get("position_margin"), "warnings": warnings,
            NAME: {"layers": plan.depth, "resets": [len(x.resets) for x in plan.layers],
                   "yesterday": [x.yesterday for x in plan.layers], "keys": [len(x.keys) for x in plan.layers],
                   "configurations": plan.configurations, "params": params, "precision": prec},
            "layers": [b.notes() for b in prog.blocks]}
    return prog, meta


def set_start(model: CompiledTransformer, plan: StarFreePlan, start: str) -> None:
    """Detect again from ``start`` (the plan depends on the start) and rebuild in place; a plan of
    another shape is refused (recompile with that start instead)."""
    rebuild_detected(model, start, applies, build, NAME)


# ---------------------------------------------------------------------------------------
# the registry entry


def applies(automaton: Semiautomaton) -> StarFreePlan | Refusal:
    """A since program proved by the walk, or why there is none."""
    plan, reason = detect(automaton)
    if plan is None:
        return Refusal(f"starfree needs a since program (latest-reset and yesterday levels): {reason}")
    return plan


def estimate(plan: StarFreePlan, max_len: int, positions: str = "sinusoidal") -> Cost:
    """The plan's layers and the exact parameter count (the float64 program laid out)."""
    params = program_params(program(plan, max_len, positions))
    _check_budget(params, plan, max_len, MAX_PARAMS)
    return Cost(plan.depth, params)


def describe(plan: StarFreePlan, automaton: Semiautomaton) -> str:
    resets = sum(len(x.resets) for x in plan.layers)
    ys = sum(x.yesterday for x in plan.layers)
    return (f"a since program of {plan.depth} layer(s): {resets} latest-reset feature(s), {ys} yesterday look-back(s), "
            f"{plan.configurations:,} configurations proved by the walk")


CONSTRUCTION = Construction(
    name=NAME, theorem="star-free languages as since programs (past LTL)", applies=applies, estimate=estimate,
    build=build, set_start=set_start, plan_to_json=StarFreePlan.to_dict, plan_from_json=StarFreePlan.from_dict,
    describe=describe, obligations=declared_obligations(build),
)
