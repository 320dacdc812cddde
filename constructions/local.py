"""Local: the state from the last k letters, the position mod p, a saturating event count
and the latest local anchor, in one or two attention layers.

Theorem.  Let (k, p, e, B, anchors, col, F) be a local description of the automaton
(compiler/automata/local.py): with s_t = (t mod p, letters t, t-1, ..., t-k+1, 0 before
the start), lambda_t = min(B, sum_{sigma <= t} e(s_sigma)) and mu_t the colour of the
latest anchor window at a position <= t (the start's colour if none),
q_t = F(s_t, lambda_t, mu_t) for every input and every t >= 1.  Then the program below
computes q_t exactly at every position t <= max_len.

Proof.  The description's closure (the detection) shows the identity for every input, so
it suffices that the network computes s_t, lambda_t and mu_t exactly (as integer codes
within STEP_TOLERANCE of their values) and evaluates F exactly:

* Layer 1, heads: k - 1 offset heads (gadgets.offset_head; offsets 1..k-1, BOS stands
  in for every position before the start and holds code 0) copy the letter codes into
  ``loc:back{j}``; offset 0 is the token's own code ``loc:letter`` (exact, no head).
  Each copy is within STEP_TOLERANCE / 2 of its integer (Lemma 13 with value range
  |Sigma|, the head's derived inverse temperature).  The phase t mod p is an exact
  integer feature of the position (``loc:phase``, W_pos).
* Layer 1, MLP (two layers only): the exact lookup of Lemma 11 (gadgets.lookup_mlp)
  from (c_0..c_{k-1}, phase) to (anchor flag, colour, event) at every t >= 1; its step
  units read the noisy codes exactly, so its outputs are exact integers.  BOS matches no
  key (its codes are all 0) and carries flag 1 and the start's colour from W_E.
* Layer 2, a most-recent-flag head (Lemma 16, gadgets.recent_flag_head): scores
  beta (flag + recency/2) with recency = tau/(T+1): a flagged position beats an
  unflagged one by beta/2 and the latest flagged one beats every earlier one by
  beta/(2(T+1)) -- the recency gap that the derived beta = ln(2(T+1)V/tau)/gap resolves
  (V = largest colour, tau = STEP_TOLERANCE/2; Lemma 13); so ``loc:latest`` holds the
  colour of the latest anchor at a position <= t (BOS: the start's) within
  STEP_TOLERANCE/2.
* Layer 2, a prefix-count head (Lemma 15, gadgets.prefix_mean_head with mass 2T and
  value scale 2T): ``loc:count`` holds sum_{sigma <= t} e(s_sigma) exactly up to
  rounding; the final lookup's step units for thresholds 1..B read it as
  min(B, count) (every threshold is passed above B: saturation needs no extra unit).
* The last MLP: the exact lookup of Lemma 11 from (c_0..c_{k-1}, phase, level, colour)
  to the one-hot of F (one unit per key reached from some start); the unembedding reads
  the one-hot (logit margin 1).

Without event and anchors the program is layer 1's heads and the final lookup: one
layer.  When the period is 1 and the (anchor flag, colour, event) of a window depend on
its current letter alone (``LocalPlan.letter_local``: flip-flops, memories, 0*), they are
token features in W_E, the two aggregating heads join layer 1's heads and the final lookup
is layer 1's MLP: one layer as well.  With k = 1 no head reads positions, and the position
code is left out.  Every shape depends only on the plan, never on the start state: the tables of
the current start fill the lookups' output rows (keys a start never reaches write 0)
and the BOS row, so :func:`set_start` swaps weights in place.

One declaration.  The gadgets state what they run (offset heads ``Fetch``, the latest anchor
``Recent``, the count ``Average``, both lookups ``Lookup`` -- 0 off their tables, the count
read up to max_len); :func:`program` states the rest where it writes W_E and W_U: the
tracked subspaces, the one-hot readout and the claim that the final lookup's inputs are a key
reached from the start.  The certificate reads that declaration (``declared_obligations``).

Float reach.  The recorded margins (``meta["local"]["precision"]``, worst-case bounds
with machine epsilon eps): prefix count STEP_TOLERANCE / (eps T (T + 1)) (recursive
summation of t unit increments scaled by 2T), recency (1/(4(T+1))) / (4 eps 1.5) (half the
recency gap over the rounding of scores up to 1.5 beta), and the position code's own
margin for the offset heads; a margin below 1 becomes a warning (float32 at T = 256:
32 for the count, 1.4e3 for the recency; the count's bound reaches 1 near T = 1450, so
float32 models are certified to about T = 1024 and warn beyond).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.automata.local import MAX_PERIOD, MAX_WINDOW, LocalPlan, detect
from compiler.automata.spec import Semiautomaton

from . import local_families as checks
from .assemble import program_params
from .budget import MAX_PARAMS, STEP_TOLERANCE, check_params
from .construction import ONE_HIDDEN_LAYER, BuildOptions, Construction, Cost, Refusal, declared_obligations, rebuild
from .gadgets import (ABSORB, CodeInput, absorb_feature, flat_lookup_margin, flat_lookup_mlp, flat_lookup_tolerance,
                      lookup_mlp, offset_head, prefix_mean_head, recency_margin, recent_flag_head)
from .model import CompiledTransformer
from .obligations import keys_reached, one_hot_readout
from .positions import PositionCode, position_code, position_table
from .program import MLP, Block, Declaration, Head, Program
from .workspace import Workspace, join

NAME = "local"
UNTRACKED = ("one", "bos", "pos", "loc:phase", "pos:recency", ABSORB)
"""The constant and position features (W_pos): every other subspace's code is tracked from W_E."""


def back(j: int) -> str:
    """The letter code at t - j (0 before the start): offset head j writes it; j = 0 is the
    token's own code (``loc:letter``, no head needed)."""
    return f"loc:back{j}" if j else "loc:letter"


def _layout(plan: LocalPlan, code: PositionCode) -> Workspace:
    """The residual subspaces (module docstring); the aggregates' only when the plan uses them."""
    ws = Workspace()
    ws.add("one"), ws.add("bos")
    if plan.k > 1:  # only offset heads read positions
        ws.add("pos", code.labels)
    if plan.period > 1:
        ws.add("loc:phase")
    if plan.n_classes:
        ws.add("pos:recency")
    if plan.bound:
        ws.add(ABSORB)
    for j in range(plan.k):
        ws.add(back(j))
    if plan.n_classes:
        ws.add("loc:flag"), ws.add("loc:colour"), ws.add("loc:latest")
    if plan.bound:
        ws.add("loc:event"), ws.add("loc:count")
    ws.add("loc:state", plan.n_states)
    return ws


def _radix(plan: LocalPlan) -> list[int]:
    """How many codes each input of the final lookup reads, in key order: the window's letters, the
    phase, the level and the colour."""
    window = [plan.n_symbols + 1] * plan.k + ([plan.period] if plan.period > 1 else [])
    return window + ([plan.bound + 1] if plan.bound else []) + ([plan.n_classes] if plan.n_classes else [])


def flat_final(plan: LocalPlan, flat: bool) -> bool:
    """Whether ``flat`` (``one_hidden_layer``) builds the final lookup in one hidden layer
    (:func:`gadgets.flat_lookup_mlp`): in a one-layer model that reads no event count.  The count
    saturates at the bound (no single code covers every count; the two-layer lookup's thresholds
    stop at the bound).  A two-layer model keeps both lookups: its first lookup's flags feed the
    latest-anchor head, whose recency gap 1/(2(T+1)) a flat lookup's rounding (its ramps grow along
    the code) overtakes (adder:2 built so certifies at T = 100, not at 256), and a flat final lookup
    alone leaves three blocks and more parameters than unfolding both."""
    return flat and plan.layers == 1 and not plan.bound


def _head_tolerance(plan: LocalPlan, flat: bool) -> float:
    """The copy tolerance of the heads the final lookup reads: half its input tolerance."""
    return (flat_lookup_tolerance(_radix(plan)) if flat_final(plan, flat) else STEP_TOLERANCE) / 2


def _window_inputs(plan: LocalPlan, ws: Workspace) -> list[CodeInput]:
    """The window codes and the phase, in key order."""
    ins = [CodeInput(ws[back(j)], plan.n_symbols + 1) for j in range(plan.k)]
    if plan.period > 1:
        ins.append(CodeInput(ws["loc:phase"], plan.period))
    return ins


def _local_mlp(plan: LocalPlan, ws: Workspace, start: int) -> MLP:
    """Layer 1's lookup (Lemma 11): window and phase -> (anchor flag, colour, event)."""
    parts, cols = [], []
    if plan.n_classes:
        parts += [ws["loc:flag"], ws["loc:colour"]]
        cols += [0, 1]
    if plan.bound:
        parts.append(ws["loc:event"])
        cols.append(2)
    out = join("loc:local", parts)
    rows = plan.starts[start].local
    table = {key: np.array([rows[i][c] for c in cols], dtype=np.float64) for i, key in enumerate(plan.local_keys)}
    return lookup_mlp("loc.local", _window_inputs(plan, ws), out, table, total=True)


def _final_mlp(plan: LocalPlan, ws: Workspace, start: int, max_len: int, flat: bool = False) -> MLP:
    """The last lookup (Lemma 11): window, phase, level, colour -> the state's one-hot (``flat``: in
    one hidden layer, a unit pair at every threshold: a shape that does not depend on the start);
    the level is the raw count, up to ``max_len``, read as min(bound, count)."""
    ins = _window_inputs(plan, ws)
    if plan.bound:
        ins.append(CodeInput(ws["loc:count"], plan.bound + 1, reach=max_len))
    if plan.n_classes:
        ins.append(CodeInput(ws["loc:latest"], plan.n_classes))
    eye = np.eye(plan.n_states)
    zero = np.zeros(plan.n_states)
    final = plan.starts[start].final
    table = {key: (eye[q] if q >= 0 else zero) for key, q in zip(plan.final_keys, final)}
    if flat:
        return flat_lookup_mlp("loc.final", ins, ws["loc:state"], table, every_threshold=True, total=True)
    return lookup_mlp("loc.final", ins, ws["loc:state"], table, total=True)


def _offset_heads(plan: LocalPlan, ws: Workspace, code: PositionCode,
                  tolerance: float = STEP_TOLERANCE / 2) -> list[Head]:
    """Layer 1: head j copies ``loc:letter`` of t - j (BOS's 0 when t - j <= 0) into ``loc:back{j}``
    within ``tolerance``."""
    return [offset_head(f"loc.back{j}", ws["pos"], code, ws["bos"], ws["one"], j, ws["loc:letter"], ws[back(j)],
                        value_range=float(plan.n_symbols), tolerance=tolerance) for j in range(1, plan.k)]


def _aggregate_heads(plan: LocalPlan, ws: Workspace, max_len: int, tolerance: float = STEP_TOLERANCE / 2) -> list[Head]:
    """Layer 2: the latest anchor's colour (Lemma 16, copied within ``tolerance``) and the event
    count (Lemma 15)."""
    heads = []
    if plan.n_classes:
        heads.append(recent_flag_head("loc.latest", ws["loc:flag"], ws["pos:recency"], ws["one"], ws["loc:colour"],
                                      ws["loc:latest"], max_len, value_range=float(plan.n_classes - 1),
                                      tolerance=tolerance))
    if plan.bound:
        mass = 2 * max_len
        heads.append(prefix_mean_head("loc.count", ws[ABSORB], ws["bos"], ws["loc:event"], ws["loc:count"],
                                      mass=mass, value_scale=float(mass), max_len=max_len))
    return heads


def _blocks(plan: LocalPlan, ws: Workspace, code: PositionCode, max_len: int, start: int,
            flat: bool = False) -> list[Block]:
    """One block when the aggregates read only the token (or there are none), else two; ``flat``:
    the final lookup in one hidden layer where :func:`flat_final` says, the heads within its tolerance."""
    tol = _head_tolerance(plan, flat)
    offsets, aggregates = _offset_heads(plan, ws, code, tol), _aggregate_heads(plan, ws, max_len, tol)
    if plan.layers == 1:
        return [Block(offsets + aggregates, _final_mlp(plan, ws, start, max_len, flat_final(plan, flat)))]
    return [Block(offsets, _local_mlp(plan, ws, start)), Block(aggregates, _final_mlp(plan, ws, start, max_len))]


def _embeddings(plan: LocalPlan, ws: Workspace, code: PositionCode, max_len: int,
                start: int) -> tuple[np.ndarray, np.ndarray]:
    """W_E (constant 1, BOS flag and the start's colour, letter codes) and W_pos (position
    code, phase t mod p, recency t/(T+1), the absorb feature log(2T - t))."""
    d, s, T = ws.d_model, plan.n_symbols, max_len
    W_E = np.zeros((s + 1, d))
    W_E[:, ws["one"][0]] = 1.0
    W_E[-1, ws["bos"][0]] = 1.0
    W_E[:s, ws["loc:letter"][0]] = np.arange(1, s + 1)
    if plan.n_classes:
        W_E[-1, ws["loc:flag"][0]] = 1.0
        W_E[-1, ws["loc:colour"][0]] = float(plan.starts[start].init_class)
    if plan.layers == 1 and (plan.n_classes or plan.bound):  # letter-local: the lookup's rows are token features
        rows = plan.starts[start].local
        for key, (flag, colour, event) in zip(plan.local_keys, rows):
            if plan.n_classes:
                W_E[key[0] - 1, ws["loc:flag"][0]] = flag
                W_E[key[0] - 1, ws["loc:colour"][0]] = colour
            if plan.bound:
                W_E[key[0] - 1, ws["loc:event"][0]] = event
    W_pos = np.zeros((T + 1, d))
    if plan.k > 1:
        W_pos[:, list(ws["pos"].dims)] = position_table(code)
    t = np.arange(T + 1, dtype=np.float64)
    if plan.period > 1:
        W_pos[:, ws["loc:phase"][0]] = t % plan.period
    if plan.n_classes:
        W_pos[:, ws["pos:recency"][0]] = t / (T + 1)
    if plan.bound:
        W_pos[:, ws[ABSORB][0]] = absorb_feature(2 * T, T)
    return W_E, W_pos


def precision(plan: LocalPlan, code: PositionCode, max_len: int, eps: float, flat: bool = False) -> dict[str, float]:
    """Worst-case rounding margins (> 1 safe), derived as in the module docstring (``flat``: and
    the one-hidden-layer final lookup's, :func:`gadgets.flat_lookup_margin`)."""
    T = max_len
    out = {"position_margin": code.precision_margin(eps)} if plan.k > 1 else {}
    if flat_final(plan, flat):
        out["flat_final_margin"] = flat_lookup_margin(_radix(plan), eps)
    if plan.bound:
        out["prefix_count_margin"] = STEP_TOLERANCE / (eps * T * (T + 1))
    if plan.n_classes:
        out["recency_margin"] = recency_margin(T, eps)
    if out:
        out["margin"] = min(out.values())
    return out


def program(plan: LocalPlan, start: int, max_len: int, positions: str, flat: bool = False) -> Program:
    """The program (weights in float64) for start state ``start`` (``flat``: :func:`flat_final`) and
    its declaration: every subspace but the constant and position features tracked from W_E, the
    state's one-hot read out, and the claim that the final lookup's inputs (window, phase, level,
    colour) together are a key reached from ``start``."""
    code = position_code(positions, max_len)
    ws = _layout(plan, code)
    W_E, W_pos = _embeddings(plan, ws, code, max_len, start)
    blocks = _blocks(plan, ws, code, max_len, start, flat)
    W_U = np.zeros((ws.d_model, plan.n_states))
    W_U[list(ws["loc:state"].dims), np.arange(plan.n_states)] = 1.0
    tracked = tuple(n for n in ws.subspaces if n not in UNTRACKED)
    final = blocks[-1].mlp
    assert isinstance(final, MLP)
    declared = Declaration(NAME, tracked, one_hot_readout("loc:state", plan.n_states),
                           joint=(keys_reached(final.obligation),))
    return Program(ws, W_E, W_pos, blocks, W_U, np.zeros(plan.n_states), declaration=declared)


def _check_budget(params: int, plan: LocalPlan, max_len: int, max_params: int) -> None:
    check_params(params, max_params, f"a local model with k = {plan.k}, period {plan.period} and "
                 f"{len(plan.final_keys):,} final keys at max_len {max_len}")

def build(automaton: Semiautomaton, plan: LocalPlan, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The program for ``automaton`` (its start state picks the tables) and its metadata."""
    max_len, positions, eps, flat = options.max_len, options.positions, options.eps, options.one_hidden_layer
    prog = program(plan, automaton.start, max_len, positions, flat)
    params = program_params(prog)
    _check_budget(params, plan, max_len, options.max_params)
    code = position_code(positions, max_len)
    prec = precision(plan, code, max_len, eps, flat)
    warnings = []
    if prec.get("margin", 1.0) < 1:
        weak = [k for k, v in prec.items() if k != "margin" and v < 1]
        warnings.append(f"local at max_len {max_len}: the worst-case rounding bound of this dtype for "
                        f"{', '.join(weak)} exceeds its tolerance (margin {prec['margin']:.2g}); verify before "
                        f"trusting, or use float64")
    meta = {
        "method": NAME,
        "positions": positions if plan.k > 1 else None,
        "position_precision_margin": prec.get("position_margin"),
        "warnings": warnings,
        NAME: {"k": plan.k, "period": plan.period, "bound": plan.bound, "colours": plan.n_classes,
               "mode": plan.mode, "local_keys": len(plan.local_keys), "final_keys": len(plan.final_keys),
               "params": params, "precision": prec},
        "layers": [b.notes() for b in prog.blocks],
        **({ONE_HIDDEN_LAYER: True} if flat else {}),
    }
    return prog, meta


def set_start(model: CompiledTransformer, plan: LocalPlan, start: str) -> None:
    """Rebuild ``model`` for start state ``start`` from the carried plan (its tables for that
    start) and copy the weights in, in place; no shape changes (module docstring)."""
    rebuild(model, build, plan, start)


# ---------------------------------------------------------------------------------------
# the registry entry: the description is the plan


def applies(automaton: Semiautomaton) -> LocalPlan | Refusal:
    """The cheapest local description valid from every start, or why there is none."""
    plan, reason = detect(automaton)
    if plan is None:
        return Refusal(f"local needs the state as a function of the last k <= {MAX_WINDOW} letters, the position "
                       f"mod p <= {MAX_PERIOD}, an event count and the latest anchor: {reason}")
    return plan


def estimate(plan: LocalPlan, max_len: int, positions: str = "sinusoidal") -> Cost:
    """The plan's layers and the exact parameter count of the assembled model (the float64
    program is laid out, no weight is assembled)."""
    params = program_params(program(plan, 0, max_len, positions))
    _check_budget(params, plan, max_len, MAX_PARAMS)
    return Cost(plan.layers, params)


def describe(plan: LocalPlan, automaton: Semiautomaton) -> str:
    parts = [f"the last {plan.k} letter{'s' * (plan.k > 1)}"]
    if plan.period > 1:
        parts.append(f"the position mod {plan.period}")
    if plan.bound:
        parts.append(f"a count of a local event saturating at {plan.bound}")
    if plan.n_classes:
        parts.append(f"the latest local anchor ({plan.n_classes} colours)")
    return f"the state is a function of {', '.join(parts)} ({len(plan.final_keys)} keys), from every start"


CONSTRUCTION = Construction(
    name=NAME, theorem="local descriptions", applies=applies, estimate=estimate, build=build,
    set_start=set_start, plan_to_json=LocalPlan.to_dict, plan_from_json=LocalPlan.from_dict, describe=describe,
    families=checks.families,
    family_seeds=lambda seed: {"local_families": seed + checks.FAMILY_SEED_OFFSET},
    obligations=declared_obligations(build),
)
