"""Piecewise-local: the state from which factors and which subsequences occurred, the locally
testable features and the piecewise ones side by side, one joint lookup.

Theorem.  Let (classes, P, R, groups, S, F) be a PLT description of the automaton
(compiler/automata/piecewise_local.py: q_t = F(omega_t, [a factor of group g occurred by t]_g,
progress of each chain of S at t) for every input and every t >= 1; the detection's closure
proves it).  Then the program below computes q_t exactly at every t <= max_len, in
max(L, r) layers, L the factor part's (2; 1 when every factor is one letter) and r the most runs
of a chain (<= its length k): max(2, k) = k for k >= 2, the depth of PLT_k.

Proof.  The two constructions' programs compute their features exactly on disjoint residual
dims (the workspaces side by side, ``constructions.workspace.beside``, names prefixed ``lt.``
and ``pt.``): ``constructions/factors.py``'s computes omega_t (layer 1) and the capped counts
(layer 2: prefix count, then the caps), ``constructions/piecewise.py``'s each chain's progress
(one prefix-count layer per run, Lemma "one run per layer").  Layer l holds both programs'
layer-l heads and their MLPs side by side (Lemma 17, ``program.Beside``; the shallower padded
with identity layers, exact on hidden activations >= 0).  Each program's own final lookup (its
features -> its state) is left out: in the last layer, after both parts, one lookup of Lemma 11
(``program.fuse``) reads omega, the capped counts and every chain's progress -- all written by
then, since every part ends by the last layer -- and writes the state's one-hot on the keys the
closure reached.  Every step is exact on its codes (the parts' float reach: the prefix counts'
STEP_TOLERANCE / (eps T (T + 1)), as both constructions).

Declaration: the parts' gadgets declare their heads and MLPs (renamed with the prefixes,
``program.renamed``), the joint lookup its table; :func:`program` the tracked subspaces (both
parts', prefixed), the one-hot readout and the claim that the joint lookup's inputs are a key
the closure reached.  The certificate checks it with the existing kinds (``Fetch``, ``Average``,
``Lookup``, ``SuffixLookup``, ``Beside``, ``Steps``, ``Joint``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from compiler.automata.piecewise import PiecewisePlan
from compiler.automata.piecewise_local import PiecewiseLocalPlan, detect
from compiler.automata.shares import share, share_text
from compiler.automata.spec import Semiautomaton

from . import factors as lt
from . import piecewise as pt
from .assemble import program_params
from .budget import MAX_PARAMS, check_params
from .construction import (BuildOptions, Construction, Cost, Refusal, check_plan_start, declared_obligations,
                           rebuild_detected)
from .gadgets import CodeInput, lookup_mlp
from .model import CompiledTransformer
from .obligations import keys_reached, one_hot_readout
from .program import MLP, Beside, Block, Declaration, Fused, Program, fuse, renamed
from .workspace import Workspace, beside

NAME = "piecewise-local"
PREFIXES = ("lt.", "pt.")
STATE = "plt:state"


def parts(plan: PiecewiseLocalPlan) -> tuple[Any, PiecewisePlan]:
    """The factor part's and the chains' plans, each with its own keys (the features reached) as
    its states: their programs compute the features, and their final lookups are left out."""
    local = plan.local
    n_local = 1 + local.n_groups
    lkeys = sorted({x[:n_local] for x in plan.keys})
    pkeys = sorted({x[n_local:] for x in plan.keys})
    local = replace(local, n_states=len(lkeys), keys=tuple(lkeys), states=tuple(range(len(lkeys))))
    chains = PiecewisePlan(local.n_symbols, len(pkeys), plan.start, plan.chains, tuple(pkeys),
                           tuple(range(len(pkeys))))
    return local, chains


def _stripped(program: Program) -> tuple[list[Block], MLP | Fused | Beside]:
    """A part's blocks with its last MLP's final lookup left out (the first half of the fused MLP
    its program ends with), and that lookup (whose inputs the joint lookup reads)."""
    last = program.blocks[-1].mlp
    assert isinstance(last, Fused)
    return [*program.blocks[:-1], Block(program.blocks[-1].heads, last.first)], last.second


def _inputs(plan: PiecewiseLocalPlan, ws: Workspace) -> list[CodeInput]:
    """The joint lookup's inputs: the window class (when the factor part has windows), each
    group's occurrence flag, each chain's progress."""
    local = plan.local
    ins = ([CodeInput(ws["lt.fac:window"], len(local.windows) + 1)] if lt.windowed(local) else []) + \
        [CodeInput(ws[f"lt.fac:capped{g}"], local.threshold + 1) for g in range(local.n_groups)]
    return ins + [CodeInput(ws[f"pt.pw:prog{c}.{len(ch)}"], sum(m for _, m in ch) + 1)
                  for c, ch in enumerate(plan.chains)]


def _table(plan: PiecewiseLocalPlan) -> dict[tuple[int, ...], np.ndarray]:
    eye = np.eye(plan.local.n_states)
    skip = 0 if lt.windowed(plan.local) else 1
    return {key[skip:]: eye[q] for key, q in zip(plan.keys, plan.states)}


def _blocks(plan: PiecewiseLocalPlan, ws: Workspace, programs: list[Program]) -> list[Block]:
    """Both parts' layers side by side, the joint lookup fused into the last layer's MLP."""
    stripped = [_stripped(p)[0] for p in programs]
    depth = max(len(b) for b in stripped)
    joint = lookup_mlp("plt.lookup", _inputs(plan, ws), ws[STATE], _table(plan), total=True)
    blocks = []
    for layer in range(depth):
        here = [(prefix, b[layer]) for prefix, b in zip(PREFIXES, stripped) if layer < len(b)]
        heads = [renamed(h, prefix) for prefix, b in here for h in b.heads]
        mlps = [renamed(b.mlp, prefix) for prefix, b in here if b.mlp is not None]
        mlp: MLP | Fused | Beside | None = (None if not mlps else mlps[0] if len(mlps) == 1 else
                                            Beside(f"plt.l{layer}", mlps, {"beside": [m.name for m in mlps]},
                                                   reads=tuple(n for m in mlps for n in m.reads),
                                                   writes=tuple(n for m in mlps for n in m.writes)))
        if layer == depth - 1:
            assert mlp is not None
            fresh = tuple(n for n in joint.reads if n in mlp.writes)
            mlp = fuse(mlp, joint, "plt.final", fresh=fresh, carry_outputs=True)
        blocks.append(Block(heads, mlp))
    return blocks


def program(plan: PiecewiseLocalPlan, max_len: int, positions: str) -> Program:
    """The program (float64) and its declaration: both parts' tracked subspaces, the state's
    one-hot read out, the claim that the joint lookup's inputs are a key the closure reached."""
    local, chains = parts(plan)
    programs = [lt.program(local, max_len, positions), pt.program(chains, max_len)]
    ws = beside([p.workspace for p in programs], list(PREFIXES))
    ws.add(STATE, plan.local.n_states)
    blocks = _blocks(plan, ws, programs)
    pad = np.zeros((1, plan.local.n_states))
    W_E = np.concatenate([*(p.W_E for p in programs), np.repeat(pad, programs[0].W_E.shape[0], 0)], axis=1)
    W_pos = np.concatenate([*(p.W_pos for p in programs), np.repeat(pad, max_len + 1, 0)], axis=1)
    n = plan.local.n_states
    W_U = np.zeros((ws.d_model, n))
    W_U[list(ws[STATE].dims), np.arange(n)] = 1.0
    final = blocks[-1].mlp
    assert isinstance(final, Fused)
    tracked = []
    for prefix, p in zip(PREFIXES, programs):
        assert p.declaration is not None
        states = set(p.declaration.readout.reads)
        tracked += [prefix + name for name in p.declaration.tracked if name not in states]
    declared = Declaration(NAME, tuple(tracked), one_hot_readout(STATE, n),
                           joint=(keys_reached(final.second.obligation),))
    return Program(ws, W_E, W_pos, blocks, W_U, np.zeros(n), declaration=declared)


def _check_budget(params: int, plan: PiecewiseLocalPlan, max_len: int, max_params: int) -> None:
    check_params(params, max_params, f"a piecewise-local model with {len(plan.local.factors)} factors, "
                 f"{len(plan.chains)} chains and {len(plan.keys):,} keys at max_len {max_len}")


def build(automaton: Semiautomaton, plan: PiecewiseLocalPlan, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The program for ``automaton`` and its metadata (the plan is for the automaton's start)."""
    check_plan_start(automaton, plan.start, NAME)
    prog = program(plan, options.max_len, options.positions)
    params = program_params(prog)
    _check_budget(params, plan, options.max_len, options.max_params)
    prec = pt.precision(options.max_len, options.eps)
    warnings = []
    if prec["margin"] < 1:
        warnings.append(f"piecewise-local at max_len {options.max_len}: the worst-case rounding bound of this dtype "
                        f"for the prefix counts exceeds its tolerance (margin {prec['margin']:.2g}); verify before "
                        f"trusting, or use float64")
    meta = {"method": NAME, "positions": options.positions, "warnings": warnings,
            NAME: {"k": plan.k, "windows": len(plan.local.windows), "factors": len(plan.local.factors),
                   "groups": plan.local.n_groups, "chains": len(plan.chains), "keys": len(plan.keys),
                   "params": params, "precision": prec},
            "layers": [b.notes() for b in prog.blocks]}
    return prog, meta


def set_start(model: CompiledTransformer, plan: PiecewiseLocalPlan, start: str) -> None:
    """Detect again from ``start`` (the plan depends on the start) and rebuild in place; a plan of
    another shape is refused (recompile with that start instead)."""
    rebuild_detected(model, start, applies, build, NAME)


def applies(automaton: Semiautomaton) -> PiecewiseLocalPlan | Refusal:
    """The PLT description, or why there is none.  Not searched within a shared budget (a product's
    quotients, ``compiler/automata/shares.py``): its sampled conflicts and tracker products have no
    share of their own, and on a product's quotients they cost tens of seconds (sf_6/16: 65 of the
    product's 70 CPU s) for languages that are not a product of a PLT part."""
    if share() > 1:
        return Refusal(f"piecewise-local is searched on an automaton planned alone, not on one of several planned "
                       f"together{share_text()}")
    plan, reason = detect(automaton)
    if plan is None:
        return Refusal(f"piecewise-local needs the state as a function of which k-factors and which subsequences "
                       f"occurred: {reason}")
    return plan


def estimate(plan: PiecewiseLocalPlan, max_len: int, positions: str = "sinusoidal") -> Cost:
    """The plan's layers and the exact parameter count (the float64 program laid out)."""
    params = program_params(program(plan, max_len, positions))
    _check_budget(params, plan, max_len, MAX_PARAMS)
    return Cost(plan.layers, params)


def describe(plan: PiecewiseLocalPlan, automaton: Semiautomaton) -> str:
    words = ", ".join(repr(" ".join(automaton.alphabet[a] for a, m in ch for _ in range(m))) for ch in plan.chains[:4])
    return (f"piecewise locally testable, k = {plan.k}: the state is a function of {len(plan.local.windows)} window "
            f"patterns, which of {len(plan.local.factors)} factors occurred and which prefixes of "
            f"{len(plan.chains)} subsequence(s) occurred ({words}; {len(plan.keys)} keys)")


CONSTRUCTION = Construction(
    name=NAME, theorem="piecewise locally testable languages", applies=applies, estimate=estimate, build=build,
    set_start=set_start, plan_to_json=PiecewiseLocalPlan.to_dict, plan_from_json=PiecewiseLocalPlan.from_dict,
    describe=describe, obligations=declared_obligations(build),
)
