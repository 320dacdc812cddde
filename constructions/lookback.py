"""Lookback: a k-definite automaton in one attention layer (offset heads and a Lemma 11 lookup).

Theorem.  If every word of length k sends all states to one state (the automaton is
k-definite, compiler/automata/definite.py), then the state after t letters is

    q_t = W(sigma_{t-k+1} ... sigma_t)        for t >= k   (W: the plan's window table),
    q_t = delta(q0, sigma_1 ... sigma_t)      for t < k.

Proof sketch.  For t >= k write the input as u w with |w| = k: q_t = delta(delta(q0, u), w),
and delta(., w) is constant, so q_t = delta(Q, w) = W(w), whatever q0 and u are.  For t < k
nothing is dropped.  So q_t is a finite function of the letters at offsets 0..k-1 from t,
each either a letter or "before the start" (offset j with t - j <= 0); the before-start
values form a suffix of the offsets, and only the keys with some before-start entry
(t < k) depend on q0.

Residual subspaces:
  ``one``, ``bos``          constant 1; 1 only at BOS
  ``pos:*``                 position code (constructions/positions.py)
  ``lb:letter``             the letter's integer code a + 1; 0 at BOS ("before the start")
  ``lb:back{j}``            head j: ``lb:letter`` of position t - j, BOS's 0 when t - j <= 0
  ``lb:state``              the MLP: the one-hot of q_t; the unembedding reads it (logit margin 1)

Layer 1: k offset heads (gadgets.offset_head, offsets 0..k-1); BOS wins exactly when
t - j <= 0 and stands in for every position before the start.  Each head's inverse
temperature comes from ``attention_temperature`` (Lemma 13) with value range |Sigma|, so
its copy is within STEP_TOLERANCE / 2 of the integer code.  MLP 1: the exact lookup of
Lemma 11 (gadgets.lookup_mlp) from (c_0, ..., c_{k-1}), c_j in 0..|Sigma|, to the
one-hot of the state: one unit per valid key (sum_{m <= k} |Sigma|^m of them: m real
letters, then before-start).  The step units read each noisy code exactly, so the
one-hot is exact.  The start state enters only through the rows of the keys with a
before-start entry; :func:`set_start` rebuilds from the carried plan.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch

from compiler.automata.definite import MAX_LOOKBACK, LookbackPlan, detect
from compiler.automata.errors import BudgetError, InputError
from compiler.automata.load import from_dict
from compiler.automata.spec import Semiautomaton

from . import lookback_checks as checks
from .assemble import assemble
from .budget import MAX_PARAMS
from .construction import Construction, Cost, Refusal
from .gadgets import CodeInput, lookup_mlp, offset_head
from .positions import position_code, position_table
from .program import MLP, Block, Head, Program
from .workspace import Workspace

NAME = "lookback"


def back(j: int) -> str:
    """The subspace head j writes: the letter code at t - j."""
    return f"lb:back{j}"


def n_keys(plan: LookbackPlan) -> int:
    """Valid lookup keys: m real letters (newest first) then k - m before-start entries, m = 0..k."""
    return sum(plan.n_symbols**m for m in range(plan.k + 1))


def table(plan: LookbackPlan, automaton: Semiautomaton) -> dict[tuple[int, ...], np.ndarray]:
    """The lookup of Lemma 11: key (c_0, ..., c_{k-1}), c_j = letter at t - j plus 1 (0 =
    before the start), to the one-hot of q_t (the window table at t >= k, q0's run below)."""
    k, s, n = plan.k, plan.n_symbols, plan.n_states
    eye = np.eye(n)
    out: dict[tuple[int, ...], np.ndarray] = {}
    for m in range(k + 1):
        for newest_first in itertools.product(range(s), repeat=m):
            oldest_first = newest_first[::-1]
            if m == k:
                q = plan.window_state(oldest_first)
            else:
                q = automaton.run(oldest_first)[-1] if m else automaton.start
            out[tuple(a + 1 for a in newest_first) + (0,) * (k - m)] = eye[q]
    return out


def _sizes(plan: LookbackPlan, max_len: int, positions: str) -> dict[str, int]:
    """Widths and the parameter count of the assembled model (dense, as assembled)."""
    code = position_code(positions, max_len)
    k, s, n = plan.k, plan.n_symbols, plan.n_states
    d = 2 + code.dim + 1 + k + n
    d_head = code.dim + 1
    h1, h2 = 2 * s * k, n_keys(plan)
    mlp = d * h1 + h1 + h1 * h2 + h2 + h2 * d + d
    params = (s + 1) * d + (max_len + 1) * d + 4 * k * d * d_head + mlp + d * n + n
    return {"d_model": d, "d_head": d_head, "heads": k, "mlp_hidden": [h1, h2], "params_estimate": params}


def _layout(plan: LookbackPlan, code) -> Workspace:
    ws = Workspace()
    ws.add("one"), ws.add("bos")
    ws.add("pos", code.labels)
    ws.add("lb:letter")
    for j in range(plan.k):
        ws.add(back(j))
    ws.add("lb:state", plan.n_states)
    return ws


def _heads(plan: LookbackPlan, ws: Workspace, code) -> list[Head]:
    """Layer 1: head j copies ``lb:letter`` of t - j (BOS's 0 when t - j <= 0) into ``lb:back{j}``."""
    return [offset_head(f"lb.back{j}", ws["pos"], code, ws["bos"], ws["one"], j, ws["lb:letter"], ws[back(j)],
                        value_range=float(plan.n_symbols)) for j in range(plan.k)]


def _lookup(plan: LookbackPlan, automaton: Semiautomaton, ws: Workspace) -> MLP:
    """MLP 1: (c_0, ..., c_{k-1}) -> one-hot of q_t (Lemma 11)."""
    ins = [CodeInput(ws[back(j)], plan.n_symbols + 1) for j in range(plan.k)]
    return lookup_mlp("lb.lookup", ins, ws["lb:state"], table(plan, automaton))


def build(automaton: Semiautomaton, plan: LookbackPlan, *, max_len: int, eps: float = 2.0**-23,
          positions: str = "sinusoidal", max_params: int = MAX_PARAMS) -> tuple[Program, dict[str, Any]]:
    """The one-layer program for a k-definite ``automaton`` and its metadata."""
    sizes = _check_budget(plan, max_len, positions, max_params)
    code = position_code(positions, max_len)
    ws = _layout(plan, code)
    d = ws.d_model
    assert d == sizes["d_model"]
    W_E = np.zeros((automaton.n_symbols + 1, d))
    W_E[:, ws["one"][0]] = 1.0
    W_E[-1, ws["bos"][0]] = 1.0
    W_E[: automaton.n_symbols, ws["lb:letter"][0]] = np.arange(1, automaton.n_symbols + 1)
    W_pos = np.zeros((max_len + 1, d))
    W_pos[:, list(ws["pos"].dims)] = position_table(code)
    block = Block(_heads(plan, ws, code), _lookup(plan, automaton, ws))
    W_U = np.zeros((d, automaton.n_states))
    W_U[list(ws["lb:state"].dims), np.arange(automaton.n_states)] = 1.0
    b_U = np.zeros(automaton.n_states)
    margin = code.precision_margin(eps)
    warnings = []
    if margin < 1:
        warnings.append(f"{positions} positions at max_len {max_len}: the attention score gap is below the rounding "
                        f"error of this dtype (margin {margin:.2g}); expect wrong look-backs -- use sinusoidal "
                        f"positions or float64")
    head_notes = block.heads[0].notes
    meta = {
        "method": NAME,
        "positions": positions,
        "position_precision_margin": margin,
        "warnings": warnings,
        NAME: {"k": plan.k, "keys": n_keys(plan), "windows": len(plan.windows),
               "beta": head_notes["beta"], "score_gap": head_notes["score_gap"],
               "leak_bound": head_notes["leak_bound"], "model_sizes": sizes},
        "layers": [{"heads": [h.notes for h in block.heads], "mlp": block.mlp.notes}],
    }
    return Program(ws, W_E, W_pos, [block], W_U, b_U), meta


def _check_budget(plan: LookbackPlan, max_len: int, positions: str, max_params: int) -> dict[str, int]:
    sizes = _sizes(plan, max_len, positions)
    if sizes["params_estimate"] > max_params:
        raise BudgetError(f"a lookback model with k = {plan.k} over {plan.n_symbols} letters at max_len {max_len} "
                          f"would have about {sizes['params_estimate']:,} parameters, over the budget of "
                          f"{max_params:,}")
    return sizes


def set_start(model, plan: LookbackPlan, start: str) -> None:
    """Rebuild ``model`` for start state ``start`` from the carried plan and copy the weights
    in (in place).  Only the lookup rows of keys with a before-start entry change; the plan
    (the window table) does not depend on the start."""
    a = model.automaton
    if start not in a.state_index:
        raise InputError(f"unknown start state {start!r}; the states of {a.name} are {list(a.states)}")
    spec = {**model.meta["automaton"], "start": start}
    other = from_dict(spec)
    program, meta = build(other, plan, max_len=model.max_len, positions=model.meta.get("positions", "sinusoidal"),
                          eps=float(torch.finfo(model.W_E.dtype).eps))
    new = assemble(program, max_len=model.max_len, dtype=model.W_E.dtype,
                   meta={**model.meta, **meta, "automaton": spec})
    model.load_state_dict(new.state_dict())
    model.set_meta(new.meta)


# ---------------------------------------------------------------------------------------
# the registry entry: the window table is the plan


def applies(automaton: Semiautomaton) -> LookbackPlan | Refusal:
    """The window table of the smallest k, or why lookback does not apply."""
    plan, reason = detect(automaton)
    if plan is None:
        return Refusal(f"lookback needs a k-definite automaton (k <= {MAX_LOOKBACK}, a small window table): {reason}")
    return plan


def estimate(plan: LookbackPlan, max_len: int, positions: str = "sinusoidal") -> Cost:
    """One attention layer; the exact parameter count of the assembled model."""
    return Cost(1, _check_budget(plan, max_len, positions, MAX_PARAMS)["params_estimate"])


def build_plan(automaton: Semiautomaton, plan: LookbackPlan, *, max_len: int, eps: float,
               positions: str) -> tuple[Program, dict[str, Any]]:
    """:func:`build` from the plan."""
    return build(automaton, plan, max_len=max_len, eps=eps, positions=positions)


def describe(plan: LookbackPlan, automaton: Semiautomaton) -> str:
    return (f"{plan.k}-definite: the state is a function of the last {plan.k} letter{'s' * (plan.k > 1)} "
            f"({len(plan.windows)} windows), or of q0 and the letters so far before that")


CONSTRUCTION = Construction(
    name=NAME, theorem="k-definite automata", applies=applies, estimate=estimate, build=build_plan,
    set_start=set_start, plan_to_json=LookbackPlan.to_dict, plan_from_json=LookbackPlan.from_dict,
    describe=describe, invariants=checks.invariants,
)
