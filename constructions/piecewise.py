"""Piecewise: the state from which relevant subsequences occurred, one prefix-count layer per run.

Theorem.  Let the automaton's state be a function F of the progress of chains u_1 .. u_n
(compiler/automata/piecewise.py: the progress of u_c at t is the length of its longest prefix
that is a subsequence of w_1 .. w_t; the detection's product walk proves F exists).  Write each
chain as runs v_0 = empty, u_c = a_1^{m_1} a_2^{m_2} ... a_r^{m_r} (a_i != a_{i+1}).  Then the
program below computes q_t exactly at every position t <= max_len, in r_max = max_c r_c <= k
layers.

Lemma (one run per layer).  With p_i = a_1^{m_1} .. a_i^{m_i} and
C_i(t) = #{s <= t : w_s = a_i and p_{i-1} is a subsequence of w_1 .. w_s},
a_1^{m_1} .. a_{i-1}^{m_{i-1}} a_i^j is a subsequence of w_1 .. w_t iff C_i(t) >= j (j <= m_i).
Proof: take the greedy embedding of p_{i-1}; it ends at the first position P where p_{i-1} has
occurred, whose letter is a_{i-1} != a_i, so the a_i's counted are exactly those after P, and
p_{i-1} a_i^j embeds iff j of them exist.  (The first run reads the token itself: C_1 counts a_1.)
So the flag "a_i here and p_{i-1} so far" (inclusive: no "strictly before" is needed, since
a_i != a_{i-1}) summed by one prefix-count head gives the whole run.

Program.  Per chain c and run i, subspaces ``pw:is{c}.{i}`` (token: 1 on a_i), ``pw:flag{c}.{i}``
(i >= 2: the flag above), ``pw:count{c}.{i}``, ``pw:prog{c}.{i}`` (progress after run i).

* Layer i, attention: one prefix-count head (Lemma 15, gadgets.prefix_mean_head, mass 2T and
  value scale 2T, so the value is the count itself) sums the flags of run i of every chain
  (``pw:is{c}.1`` for i = 1) into ``pw:count{c}.{i}``, one value dim per chain.
* Layer i, MLP: per chain, side by side (Lemma 17), the exact lookup of Lemma 11 from
  (min(C_i, m_i), is a_{i+1}, progress after run i - 1) to (progress after run i, the flag of
  run i + 1 = [a_{i+1} here] and [C_i >= m_i]); its step units for thresholds 1..m_i read the
  count, so saturation is free.  In the last layer the per-chain lookups are followed, in the
  same MLP (gadgets' fuse), by the final lookup from every chain's progress to the state's
  one-hot (keys: the progress tuples the start reaches).

Every lookup is exact on its table; the prefix count is exact up to rounding (margin
STEP_TOLERANCE / (eps T (T + 1)): float32 is certified to about T = 1024 and warns beyond, as in
constructions/local.py).  The program is declared once: its gadgets state their obligations
(``Average`` for the prefix counts, ``Lookup`` for every lookup -- 0 off its table, a count read
up to max_len -- ``Beside`` and ``Steps`` where they are combined) and :func:`program` the
embedding, readout and claim; the checker (verify/certify/) proves them with no code of its own:
each chain's lookups read only that chain's subspaces, so their code combinations never
multiply across chains, and the final lookup reads one progress code per chain (a ``Joint``
claim names the tuples the start reaches).

Sizes follow what the automaton distinguishes: d_model ~ 4 per run plus the states, one head
per layer, per chain (m_i + 1)(base + 1) lookup units, and one final unit per reachable key.
The plan depends on the start (the product walk starts there): :func:`set_start` detects again
from the new start and rebuilds (another shape is refused with a message).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compiler.automata.piecewise import PiecewisePlan, detect
from compiler.automata.spec import Semiautomaton

from .assemble import program_params
from .budget import MAX_PARAMS, STEP_TOLERANCE, check_params
from .construction import (BuildOptions, Construction, Cost, Refusal, check_plan_start, declared_obligations,
                           rebuild_detected)
from .gadgets import ABSORB, CodeInput, absorb_feature, lookup_mlp, prefix_mean_head
from .obligations import keys_reached, one_hot_readout
from .program import MLP, Block, Declaration, Fused, Program, beside, fuse
from .workspace import Workspace, join
from .model import CompiledTransformer

NAME = "piecewise"


def _name(kind: str, c: int, i: int) -> str:
    return f"pw:{kind}{c}.{i}"


def _base(plan: PiecewisePlan, c: int, i: int) -> int:
    """Progress before run i (1-based) of chain c."""
    return sum(m for _, m in plan.chains[c][: i - 1])


def _src(c: int, i: int) -> str:
    """The flag run i of chain c sums: the token's own for the first run."""
    return _name("is", c, 1) if i == 1 else _name("flag", c, i)


def _layout(plan: PiecewisePlan) -> Workspace:
    ws = Workspace()
    ws.add("one"), ws.add("bos"), ws.add(ABSORB)
    for c, chain in enumerate(plan.chains):
        for i in range(1, len(chain) + 1):
            ws.add(_name("is", c, i))
            if i > 1:
                ws.add(_name("flag", c, i))
            ws.add(_name("count", c, i)), ws.add(_name("prog", c, i))
    ws.add("pw:state", plan.n_states)
    return ws


def _at(plan: PiecewisePlan, i: int) -> list[int]:
    """The chains with a run i."""
    return [c for c, chain in enumerate(plan.chains) if len(chain) >= i]


def _part_table(plan: PiecewisePlan, c: int, i: int) -> tuple[list[str], list[int], dict[tuple[int, ...], np.ndarray]]:
    """Chain c's lookup at layer i: its inputs (names, code counts) and table (nonzero rows): the
    capped count, the next run's letter flag (if any), the progress before (if i > 1)."""
    chain = plan.chains[c]
    m, base, last = chain[i - 1][1], _base(plan, c, i), i == len(chain)
    names, sizes = [_name("count", c, i)], [m + 1]
    if not last:
        names.append(_name("is", c, i + 1))
        sizes.append(2)
    if i > 1:
        names.append(_name("prog", c, i - 1))
        sizes.append(base + 1)
    table = {}
    for key in np.ndindex(*sizes):
        n, nxt = key[0], (key[1] if not last else 0)
        before = key[-1] if i > 1 else 0
        row = [base + n if n else before] + ([] if last else [float(nxt and n == m)])
        if any(row):
            table[tuple(int(v) for v in key)] = np.array(row, dtype=np.float64)
    return names, sizes, table


def _outs(plan: PiecewisePlan, c: int, i: int) -> list[str]:
    return [_name("prog", c, i)] + ([] if i == len(plan.chains[c]) else [_name("flag", c, i + 1)])


def _part_mlp(plan: PiecewisePlan, ws: Workspace, c: int, i: int, max_len: int) -> MLP:
    """Chain c's lookup at layer i (zero elsewhere), its count read up to ``max_len`` (saturating)."""
    names, sizes, table = _part_table(plan, c, i)
    ins = [CodeInput(ws[n], s, capped=j == 0, reach=max_len if j == 0 else None)
           for j, (n, s) in enumerate(zip(names, sizes))]
    out = join(f"pw:out{c}.{i}", [ws[n] for n in _outs(plan, c, i)])
    return lookup_mlp(f"pw.chain{c}.{i}", ins, out, table, total=True)


def _final_mlp(plan: PiecewisePlan, ws: Workspace) -> MLP:
    """Every chain's progress -> the state's one-hot, on the progress tuples the start reaches."""
    ins = [CodeInput(ws[_name("prog", c, len(ch))], n + 1)
           for c, (ch, n) in enumerate(zip(plan.chains, plan.lengths()))]
    eye = np.eye(plan.n_states)
    return lookup_mlp("pw.final", ins, ws["pw:state"], {k: eye[q] for k, q in zip(plan.keys, plan.states)},
                      total=True)


def _mlp(plan: PiecewisePlan, ws: Workspace, i: int, max_len: int, final: MLP) -> MLP | Fused:
    """Layer i's MLP: the chains' lookups side by side, then (last layer) ``final`` fused."""
    name = f"pw.mlp{i}"
    parts = [_part_mlp(plan, ws, c, i, max_len) for c in _at(plan, i)]
    if i < plan.layers:
        return beside(parts, name, ws)
    fresh = tuple(_name("prog", c, i) for c in _at(plan, i))
    return fuse(beside(parts, f"pw.chains{i}", ws), final, name=name, fresh=fresh)


def _head(plan: PiecewisePlan, ws: Workspace, i: int, max_len: int):
    chains = _at(plan, i)
    src = join(f"pw:src{i}", [ws[_src(c, i)] for c in chains])
    dst = join(f"pw:counts{i}", [ws[_name("count", c, i)] for c in chains])
    mass = 2 * max_len
    return prefix_mean_head(f"pw.count{i}", ws[ABSORB], ws["bos"], src, dst, mass=mass, value_scale=float(mass),
                            max_len=max_len)


def _embeddings(plan: PiecewisePlan, ws: Workspace, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """W_E (constant 1, BOS flag, each run's letter flag) and W_pos (the absorb feature)."""
    d, s, T = ws.d_model, plan.n_symbols, max_len
    W_E = np.zeros((s + 1, d))
    W_E[:, ws["one"][0]] = 1.0
    W_E[-1, ws["bos"][0]] = 1.0
    for c, chain in enumerate(plan.chains):
        for i, (a, _) in enumerate(chain, start=1):
            W_E[a, ws[_name("is", c, i)][0]] = 1.0
    W_pos = np.zeros((T + 1, d))
    W_pos[:, ws[ABSORB][0]] = absorb_feature(2 * T, T)
    return W_E, W_pos


def program(plan: PiecewisePlan, max_len: int) -> Program:
    """The program (weights in float64) and its declaration: the run letters' flags and every
    subspace a layer writes tracked from the embedding, the state's one-hot read out, and the claim
    that the chains' final progress codes together are a key the start reaches."""
    ws = _layout(plan)
    W_E, W_pos = _embeddings(plan, ws, max_len)
    final = _final_mlp(plan, ws)
    blocks = [Block([_head(plan, ws, i, max_len)], _mlp(plan, ws, i, max_len, final))
              for i in range(1, plan.layers + 1)]
    W_U = np.zeros((ws.d_model, plan.n_states))
    W_U[list(ws["pw:state"].dims), np.arange(plan.n_states)] = 1.0
    tracked = tuple(n for n in ws.subspaces if n not in ("one", "bos", ABSORB))
    declared = Declaration(NAME, tracked, one_hot_readout("pw:state", plan.n_states),
                           joint=(keys_reached(final.obligation),))
    return Program(ws, W_E, W_pos, blocks, W_U, np.zeros(plan.n_states), declaration=declared)


def precision(max_len: int, eps: float) -> dict[str, float]:
    """The prefix counts' worst-case rounding margin (> 1 safe), as constructions/local.py's."""
    margin = STEP_TOLERANCE / (eps * max_len * (max_len + 1))
    return {"prefix_count_margin": margin, "margin": margin}


def _check_budget(params: int, plan: PiecewisePlan, max_len: int, max_params: int) -> None:
    check_params(params, max_params, f"a piecewise model with {len(plan.chains)} chains and {len(plan.keys):,} "
                 f"final keys at max_len {max_len}")

def build(automaton: Semiautomaton, plan: PiecewisePlan, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The program for ``automaton`` and its metadata (the plan is for the automaton's start)."""
    check_plan_start(automaton, plan.start, NAME)
    prog = program(plan, options.max_len)
    params = program_params(prog)
    _check_budget(params, plan, options.max_len, options.max_params)
    prec = precision(options.max_len, options.eps)
    warnings = []
    if prec["margin"] < 1:
        warnings.append(f"piecewise at max_len {options.max_len}: the worst-case rounding bound of this dtype for "
                        f"the prefix counts exceeds its tolerance (margin {prec['margin']:.2g}); verify before "
                        f"trusting, or use float64")
    meta = {"method": NAME, "positions": None, "warnings": warnings,
            NAME: {"k": plan.k, "chains": len(plan.chains), "runs": [len(c) for c in plan.chains],
                   "final_keys": len(plan.keys), "params": params, "precision": prec},
            "layers": [b.notes() for b in prog.blocks]}
    return prog, meta


def set_start(model: CompiledTransformer, plan: PiecewisePlan, start: str) -> None:
    """Detect again from ``start`` (the plan depends on the start) and rebuild in place; a plan
    of another shape is refused (recompile with that start instead)."""
    rebuild_detected(model, start, applies, build, NAME)


# ---------------------------------------------------------------------------------------
# the registry entry


def applies(automaton: Semiautomaton) -> PiecewisePlan | Refusal:
    """The relevant subsequences and the state of every progress tuple, or why there are none."""
    plan, reason = detect(automaton)
    if plan is None:
        return Refusal(f"piecewise needs the state as a function of which of a few subsequences occurred: {reason}")
    if not plan.chains:
        return Refusal("piecewise needs a subsequence to track: the start reaches one state only")
    return plan


def estimate(plan: PiecewisePlan, max_len: int, positions: str = "sinusoidal") -> Cost:
    """The plan's layers and the exact parameter count (the float64 program laid out)."""
    params = program_params(program(plan, max_len))
    _check_budget(params, plan, max_len, MAX_PARAMS)
    return Cost(plan.layers, params)


def describe(plan: PiecewisePlan, automaton: Semiautomaton) -> str:
    words = ", ".join(repr(" ".join(automaton.alphabet[a] for a, m in ch for _ in range(m))) for ch in plan.chains[:4])
    more = f" and {len(plan.chains) - 4} more" if len(plan.chains) > 4 else ""
    return (f"the state is a function of which prefixes of {len(plan.chains)} subsequence(s) occurred ({words}{more}; "
            f"k = {plan.k}, {plan.layers} run(s) at most, {len(plan.keys)} keys)")


CONSTRUCTION = Construction(
    name=NAME, theorem="piecewise testable languages (Simon)", applies=applies, estimate=estimate, build=build,
    set_start=set_start, plan_to_json=PiecewisePlan.to_dict, plan_from_json=PiecewisePlan.from_dict,
    describe=describe, obligations=declared_obligations(build),
)
