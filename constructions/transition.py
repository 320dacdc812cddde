"""Transition: the state from the previous position's state in a one-step quotient and the letter.

Lemma (``compiler/automata/transitions.py``).  Let p ~ p' when every letter sends p and p' to the
same state.  ~ is a congruence; Q = A/~ is in the class c_t of A's state after t letters, and
q_t = step(c_{t-1}, a_t) (c_0 = Q's start).

Construction.  Q is compiled by its cheapest construction among the others whose readout is one
scalar code (fewest layers, then parameters; the scan's always is: several dims fetched would be
tracked per dim by the certificate, every combination a key), then one more block: an offset
head (Theorem 10's look-back, offset 1) copies that one dim from position t - 1 into ``tr:prev``
(the dim alone, not the subspace around it: the program proof's memory is what the heads fetch,
and a scan's whole map subspace is the prefix's map on every point -- the transformation
semigroup -- where its code is Q's state), another copies ``tr:first`` (1 in BOS's embedding, 0 in
every letter's) into ``tr:prev.first``, and a Lemma 11 lookup maps (Q's code at t - 1, that flag,
the letter's code in ``tr:letter``) to A's state code in ``tr:state``: ``step(c, a)`` for Q's code
of class c with the flag 0, ``step(Q's start, a)`` with the flag 1 (at t = 1 the head reads BOS,
whatever Q's code there).  The readout is a nearest integer point on that one dim
(logit_q = 2 k_q x - k_q^2 for A's state code k_q; margin 1 at exact codes).  Depth: Q's + 1.

It wins where Q is much smaller than A: the Moore machine over a Mealy machine's transitions (its
Q is the Mealy machine, ``compiler/automata/mealy.py``).

Checks.  The layer-wise invariant is A's state code in ``tr:state`` after the last layer; the
certificate is Q's construction's obligations, then the fetches and the lookup (every
combination of Q's final codes, the flag and the letter is a key), then the readout.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np
import torch

from compiler.automata.errors import BudgetError, ShortcutError
from compiler.automata.simulate import simulate
from compiler.automata.spec import Semiautomaton, from_dict
from compiler.automata.transitions import TransitionPlan, transition_plan

from .assemble import program_params
from .budget import STEP_TOLERANCE
from .construction import (BuildOptions, Construction, Cost, InvariantReport, Refusal, check_start,
                           composite, rebuild)
from .gadgets import CodeInput, lookup_mlp, lookup_obligation, offset_head
from .labels import LabelReadoutError, one_hot_rows, readout_codes
from .obligations import Readout
from .positions import position_code, position_table
from .program import Block, Declaration, Head, Program
from .workspace import Subspace, Workspace
from .model import CompiledTransformer

NAME = "transition"
PREV, PREV_FIRST = "tr:prev", "tr:prev.first"
FIRST, LETTER, STATE, POS = "tr:first", "tr:letter", "tr:state", "tr:pos"
LOOKUP = "tr.lookup"


MAX_QUOTIENT_RATIO = 0.9
"""Largest share of the automaton's states its one-step quotient may keep.  Above it the quotient
is compiled by the same constructions as the automaton, nearly as large, plus a layer and a lookup:
on random automata (``benchmarks/transition_quotients.py``) the transition model was never the
planner's pick, by depth or by size, above 0.85, while every one of the others' detections ran
again on the quotient (seconds per automaton), so it is refused before any of them."""


def applies(automaton: Semiautomaton) -> TransitionPlan | Refusal:
    plan = transition_plan(automaton)
    if plan is None:
        return Refusal(f"no two of {automaton.name}'s states go to the same state under every letter, so it is not a "
                       f"function of a smaller quotient's previous state and the letter")
    q, n = plan.quotient.n_states, automaton.n_states
    if q > MAX_QUOTIENT_RATIO * n:
        return Refusal(f"its one-step quotient keeps {q} of its {n} states (over {MAX_QUOTIENT_RATIO:.0%}): the "
                       f"quotient's model and a look-back layer come out no smaller than the automaton's own")
    return plan


def _codes(program: Program) -> tuple[list[int], np.ndarray]:
    """(dims, integer codes [n_states, dims]) Q's readout reads: a nearest integer point or declared
    exact features (:func:`constructions.labels.readout_codes`), else an exact one-hot."""
    try:
        dims, codes, override = readout_codes(program)
    except LabelReadoutError:
        rows = one_hot_rows(program.W_U, program.b_U)
        if rows is None:
            raise
        return rows, np.eye(len(rows), dtype=np.int64)
    if override is not None:
        raise LabelReadoutError("its readout has an override dim")
    return dims, codes


def _source(ws: Workspace, dim: int) -> tuple[str, int]:
    """The subspace that holds Q's readout dim and the dim's index in it."""
    name = next(name for name, sub in ws.subspaces.items() if dim in sub.dims)
    return name, ws[name].dims.index(dim)


def source_name(ws: Workspace, dim: int) -> str:
    """The obligations' name of that dim: the subspace's, or ``name[i]`` in a wider one."""
    name, i = _source(ws, dim)
    return name if len(ws[name]) == 1 else f"{name}[{i}]"


def _grow(program: Program, max_len: int, positions: str) -> Any:
    """Q's workspace with the new subspaces, its embedding padded (module docstring)."""
    ws = program.workspace
    code = position_code(positions, max_len)
    for name in (PREV, FIRST, PREV_FIRST, LETTER, STATE):
        ws.add(name)
    ws.add(POS, code.labels)
    k = ws.d_model - program.W_E.shape[1]
    W_E, W_pos = np.pad(program.W_E, ((0, 0), (0, k))), np.pad(program.W_pos, ((0, 0), (0, k)))
    W_E[-1, ws[FIRST][0]] = 1.0
    W_E[:-1, ws[LETTER][0]] = np.arange(W_E.shape[0] - 1)
    W_pos[:, list(ws[POS].dims)] = position_table(code)
    return ws, W_E, W_pos, code


def _fetch_dim(ws: Workspace, code: Any, dim: int, value_range: float) -> Head:
    """The offset head that copies Q's one readout dim (not the subspace around it) from t - 1
    into ``tr:prev``: :func:`offset_head` on that dim, its value rows placed in the subspace's."""
    name, i = _source(ws, dim)
    sub = ws[name]
    head = offset_head("tr.prev", ws[POS], code, ws["bos"], ws["one"], 1, Subspace(name, (sub.labels[i],), (dim,)),
                       ws[PREV], value_range=value_range, tolerance=STEP_TOLERANCE / 2)
    W_V = np.zeros((len(sub), head.W_V.shape[1]))
    W_V[i] = head.W_V[0]
    return replace(head, W_V=W_V, obligation=replace(head.obligation, src=source_name(ws, dim)))


def _block(plan: TransitionPlan, ws: Workspace, code: Any, dim: int, codes: np.ndarray) -> Block:
    """The offset heads and the lookup (module docstring)."""
    heads = [_fetch_dim(ws, code, dim, float(max(1, codes.max()))),
             offset_head("tr.first", ws[POS], code, ws["bos"], ws["one"], 1, ws[FIRST], ws[PREV_FIRST],
                         value_range=1.0, tolerance=STEP_TOLERANCE / 2)]
    inputs = [CodeInput(ws[PREV], int(codes[:, 0].max()) + 1), CodeInput(ws[PREV_FIRST], 2),
              CodeInput(ws[LETTER], len(plan.step))]
    keys = {tuple(int(v) for v in code): c for c, code in enumerate(codes)}
    table = {(*key, first, a): np.array([float(value)]) for key, first, a, value in _entries(plan, keys)}
    lookup = lookup_mlp(LOOKUP, inputs, ws[STATE], {k: v for k, v in table.items() if v[0]})  # 0: no unit
    return Block(heads, replace(lookup, obligation=lookup_obligation(LOOKUP, inputs, ws[STATE], table)))


def _declaration(inner: Declaration | None, plan: TransitionPlan) -> Declaration | None:
    """Q's declaration, then the new subspaces' codes (the flag at BOS, the letter's index) and the
    readout of A's state code in ``tr:state``; None while Q's construction declares none."""
    if inner is None:
        return None
    tracked = (*inner.tracked, FIRST, LETTER, PREV_FIRST, STATE, PREV)
    readout = Readout((STATE,), {(int(k),): state for state, k in enumerate(plan.codes)})
    return Declaration(NAME, tracked, readout, joint=inner.joint, notes=dict(inner.notes))


def _entries(plan: TransitionPlan, keys: dict[tuple[int, ...], int]) -> list[tuple[tuple[int, ...], int, int, int]]:
    """(Q's code, the flag, the letter, A's state code) of every key of the lookup: a code of class c
    after a letter (flag 0) gives step(c, a); any code read at BOS (flag 1) gives step(Q's start, a).
    Q's codes are those of its states and all 0 (BOS's, in a one-hot); the flag's and the code's
    heads are two, so every pair is a key (all 0 with flag 0, which no input reaches, as BOS's)."""
    every = {**{tuple(0 for _ in next(iter(keys))): plan.quotient.start}, **keys}
    return [(key, flag, a, plan.codes[row[plan.quotient.start if flag else c]])
            for flag in (0, 1) for key, c in every.items() for a, row in enumerate(plan.step)]


def _wrapped(a: Semiautomaton, plan: TransitionPlan, inner: Construction, inner_plan: Any,
             options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """Q's program by ``inner`` with the block that looks A's state up (module docstring)."""
    program, meta = inner.build(plan.quotient, inner_plan, options)
    dims, codes = _codes(program)
    if len(dims) != 1:  # one scalar code: the certificate's value sets of a fetched code are then exactly Q's codes
        raise LabelReadoutError(f"{inner.name}'s readout reads {len(dims)} dims; the look-back reads one scalar code")
    source = source_name(program.workspace, dims[0])
    ws, W_E, W_pos, code = _grow(program, options.max_len, options.positions)
    block = _block(plan, ws, code, dims[0], codes)
    assert block.mlp is not None
    k = np.asarray(plan.codes, dtype=np.float64)
    W_U = np.zeros((ws.d_model, a.n_states))
    W_U[ws[STATE][0]] = 2.0 * k
    out = Program(ws, W_E, W_pos, [*program.blocks, block], W_U, -(k**2),
                  declaration=_declaration(program.declaration, plan))
    notes = {"inner": inner.name, "inner_plan": inner.plan_to_json(inner_plan), "quotient_states": len(codes),
             "source": source, "keys": block.mlp.notes["keys"]}
    return out, {**meta, "method": NAME, "positions": options.positions, NAME: notes,
                 "warnings": [f"quotient ({inner.name}): {w}" for w in meta.get("warnings", [])],
                 "layers": [*meta.get("layers", []), block.notes()]}


@functools.lru_cache(maxsize=8)
def choose(plan_json: str, max_len: int, positions: str,
           inners: tuple[Construction, ...]) -> tuple[Construction, Any, int, int]:
    """Q's construction among ``inners`` (fewest layers, then parameters of the wrapped program,
    built: its lookup depends on Q's codes) and the wrapped program's layers and parameters;
    BudgetError when none builds within its budget.  Candidates are built in the order of their
    estimates (exact in layers), and none whose estimate is already deeper than the best built
    (a krohn-rhodes cascade's build searches its reachable configurations: minutes on a deep one)."""
    plan = TransitionPlan.from_dict(json.loads(plan_json))
    q = plan.quotient
    estimated = []
    for c in inners:
        p = c.applies(q)
        if isinstance(p, Refusal):
            continue
        try:
            estimated.append((c.estimate(p, max_len, positions), c, p))
        except ShortcutError:
            continue
    best = None
    for cost, c, p in sorted(estimated, key=lambda e: (e[0].layers, e[0].params)):
        if best is not None and cost.layers + 1 > best[2]:  # deeper than the best built: never the pick
            break
        try:
            prog, _ = _wrapped(_stand_in(plan), plan, c, p, BuildOptions(max_len, positions=positions))
        except ShortcutError:
            continue
        size = (len(prog.blocks), program_params(prog))
        if best is None or size < best[2:]:
            best = (c, p, *size)
    if best is None:
        raise BudgetError(f"no construction compiles the {q.n_states}-state quotient within its budget at "
                          f"max_len {max_len}")
    return best


def _stand_in(plan: TransitionPlan) -> Semiautomaton:
    """An automaton with A's number of states (the readout's width is all :func:`_wrapped` reads of A)."""
    n = plan.n_states
    return Semiautomaton("A", tuple(str(i) for i in range(n)), plan.quotient.alphabet,
                         tuple(tuple(range(n)) for _ in plan.quotient.alphabet))


def _key(plan: TransitionPlan) -> str:
    return json.dumps(plan.to_dict(), sort_keys=True)


def build(a: Semiautomaton, plan: TransitionPlan, options: BuildOptions,
          inners: tuple[Construction, ...]) -> tuple[Program, dict[str, Any]]:
    c, p, _, params = choose(_key(plan), options.max_len, options.positions, inners)
    if params > options.max_params:
        raise BudgetError(f"a transition model would have {params:,} parameters, over the budget of "
                          f"{options.max_params:,}")
    return _wrapped(a, plan, c, p, options)


def estimate(plan: TransitionPlan, max_len: int, positions: str, inners: tuple[Construction, ...]) -> Cost:
    _, _, layers, params = choose(_key(plan), max_len, positions, inners)
    return Cost(layers, params)


def describe(plan: TransitionPlan, automaton: Semiautomaton) -> str:
    return (f"{automaton.n_states} states are a function of the previous position's state in a {plan.quotient.n_states}"
            f"-state quotient (states every letter sends to one state merged) and the letter: the quotient by its "
            f"cheapest construction, then one look-back head and a lookup (meta['{NAME}']['inner'] names it)")


def invariants(model: CompiledTransformer, plan: TransitionPlan, tokens: np.ndarray) -> InvariantReport:
    """A's state code in ``tr:state`` after the last layer, against the reference: nearest code."""
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    x = model.read(cache, STATE, len(model.blocks))[:, 1:, 0].double().numpy()
    want = np.asarray(plan.codes)[simulate(model.automaton, tokens)]
    err = float(np.abs(x - want).max()) if want.size else 0.0
    failures = [] if err < 0.5 else [f"{STATE} is {err:.3g} from the state's code at some position"]
    return InvariantReport(f"{STATE} after the last layer", int(len(tokens)), failures,
                           measured={"max_code_error": err})


def set_start(model: CompiledTransformer, plan: TransitionPlan, start: str, inners: tuple[Construction, ...]) -> None:
    check_start(model.automaton, start)
    new = transition_plan(from_dict({**model.metadata.automaton, "start": start}))
    assert new is not None  # one-step equality does not depend on the start
    rebuild(model, lambda a, p, o: build(a, p, o, inners), new, start, meta={"plan": new.to_dict()},
            same_shape=f"from {start!r} the quotient compiles to another shape; compile the spec again with that start")


def construction(inners: Callable[[], Sequence[Construction]]) -> Construction:
    return composite(inners, name=NAME, theorem="one-step quotient and look-back", applies=applies, estimate=estimate,
                     build=build, set_start=set_start, plan_to_json=TransitionPlan.to_dict,
                     plan_from_json=TransitionPlan.from_dict, describe=describe, invariants=invariants)
