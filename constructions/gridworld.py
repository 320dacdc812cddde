"""Theorem 12: line and box worlds in two attention layers (nearest boundary, in closed form).

One axis with walls at 0 and S (S + 1 cells), moves m_t in {-1, 0, +1}, start q0, and
prefix sums z_t = m_1 + ... + m_t (z_0 = 0 at BOS).  For a value w let r(w) be the
most recent position j in 1..t with z_j = w (0 if there is none).  Then

    q_t = sum_{k=1..S} ( [r(z_t - k) > r(z_t + S + 1 - k)]
                         + [r(z_t - k) = r(z_t + S + 1 - k) = 0] * [z_t + q0 >= k] ).   (*)

Why (the reference's Algorithm 1 / Lemma 22, turned into a count).  Prepend a virtual
history that starts at the wall S, walks down to 0 and up to q0 (no move is blocked,
so it is a legal walk of the same world and ends in q0 at BOS).  For the extended walk
and 1 <= k <= S put w1 = z_t - k, w2 = z_t + S + 1 - k, u = last visit to w1, v = last
visit to w2.  Claim: q_t >= k iff u > v.  If u > v, the walk stays strictly between
w1 and w2 after u (steps have size <= 1), so it cannot cross the S + 1 levels a
wall-to-wall trip needs; hence after u it touches at most the wall it is pushed
against last: no wall -> q_t = q_u + k >= k; last wall S at tau -> q_t = S + z_t -
z_tau >= k because z_tau <= w2 - 1; last wall 0 at tau > u would need a visit to S
in between (the state fell while z rose), i.e. a visit to level >= w2 after u,
impossible.  The case v > u is the mirror image, and exactly one of u, v exists
(the visited levels form an interval of >= S + 1 values around z_t, and (w1, w2)
holds only S).  Summing the indicators [q_t >= k] over k gives q_t.  Real visits
(positions >= 1) always beat virtual ones (times <= 0); when neither level was
visited for real, the virtual history decides, and it visited w1 iff
z_t - k >= -q0.  So (*) needs the two most-recent-visit times per k, and nothing
else -- no minimum over windows: the MLP after layer 2 has constant depth and
width 4S (better than both variants in the reference, depth O(log S) or width
2^O(S)).  The reference's 2S + 1 heads become 2S (offset 0 is never needed).

Matching residues mod M is enough.  If a head looks for the last j with
z_j = w (mod M), M >= S + 2, an alias w + nM above w2 can only be followed by a
visit to w2 on the way back down to z_t, and one below w1 by a visit to w1, so an
alias is never the deciding visit and every comparison in (*) is unchanged (and
"neither visited" is unchanged too).  tests/constructions/test_gridworld.py checks
(*) and the aliasing exhaustively.  This keeps the value code exact and small: the
code of z mod M is read out of a one-hot over M residues, so keys with equal
residues are bitwise equal and softmax only has to resolve recency.

Residual subspaces (axis a; all axes side by side in the same two layers):
  ``one``, ``bos``            constant 1; 1 only at BOS
  ``pos:index``, ``pos:absorb`` t; log(D - t) (D = max_len + 1; BOS 0; gadgets.absorb_feature)
  ``pos:block``               (T > 1294 only) per position block its one-hot, and ``pos:absorb``
                              one column per block, log(2L - c_h(t))
  ``gw{a}:move``              the letter's move on axis a (+1, -1, 0)
  ``gw{a}:start``             q0's coordinate (every embedding row): the start enters only here
  ``gw{a}:z``                 layer-1 attention: the prefix sum z_t
  ``gw{a}:code``              MLP 1: value code of z_t mod M (cos/sin pi r / 2^k), 0 at BOS
  ``gw{a}:rec:{d}``           layer-2 head d: last j >= 1 with z_j = z_t + d (mod M), else 0
  ``gw{a}:state``             MLP 2: the coordinate q_t (exact integer); read out linearly

Layer 1: one head, uniform causal attention with BOS absorbing weight (Lemma 15):
scores log(D - t) on BOS, 0 elsewhere, so every real position weighs exactly 1/D;
values D * move give z_t.  For max_len > 1294, where one head's float32 rounding bound
eps T (T + 1) would pass the decode's tolerance, one head per position block
(:func:`prefix_blocks`, the bounded stack's and the krohn-rhodes counters' rule), each over
its block's keys with mass 2L, all adding into z_t; the layer-2 heads' beta then also pays for
float32's score rounding (:func:`constants`).  MLP 1 (4 hidden layers, width ~ 2 max_len / M + 2M per
axis): exact coarse steps 1[z + T' < iM] (a ramp, then relu(1 - ramp)), the residue
r = z + T' - M floor(.), and an exact one-hot over r (p, m ramps, then
relu(1 - p - m)); the code is sum_v code(v) e_v with one nonzero term.
Layer 2: 2S heads per axis, head d scores
beta * (<code(z_t + d), code(z_j)> + lambda * j) at j >= 1 and beta * (P - g/2) at BOS.
MLP 2 (2 hidden layers, width 2S each per axis) evaluates (*) with exact steps.

The program is declared once, where the weights are made: each head and MLP states its
obligation (layer 1 an ``Average`` and per axis a ``Lookup`` on (z, bos); layer 2 a ``Match`` per
head and one ``Races``) and :func:`declaration` the tracked codes and the readout; the certificate
reads that declaration (``declared_obligations``).

With ``one_hidden_layer`` (the standard shape's build) :mod:`.gridworld_standard` makes MLP 1 (a
one-hot of z over every value), the layer-2 heads (one-hot matches) and MLP 2 (the races) with one
hidden layer each -- two standard blocks -- where its float bound allows; elsewhere the build
above, and ``meta["gridworld"]["one_hidden_layer_refused"]`` says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from compiler.automata.errors import BudgetError
from compiler.automata.gridworld_detect import BoxWorld, detect
from compiler.automata.spec import Semiautomaton

from . import gridworld_families as checks
from . import gridworld_standard as standard
from .budget import STEP_TOLERANCE
from .construction import ONE_HIDDEN_LAYER, BuildOptions, Construction, Cost, Refusal, check_start, declared_obligations
from .gadgets import (
    ABSORB,
    Residue,
    absorb_feature,
    attention_temperature,
    prefix_mean_head,
    residue_hidden,
    residue_margin,
    residue_mlp,
    residue_range,
)
from .krohn_rhodes_layout import (CERTIFIED_EPS, CounterBlocks, block_heads, block_positions, position_blocks,
                                  prefix_sum_bounds)
from .obligations import Lookup, Match, Race, Races, Readout
from .positions import PositionCode
from .program import MLP, Block, Declaration, Head, Program, beside
from .workspace import Workspace, join
from .model import CompiledTransformer

NAME = "gridworld"


@dataclass(frozen=True)
class AxisPlan:
    """Constants of one axis (derived from S and max_len; nothing is hand-tuned)."""

    axis: int
    S: int  # walls at 0 and S
    residue: Residue  # z in [-max_len, max_len] mod M = 2^p >= max(S + 2, sqrt(max_len)): matched by layer 2
    code: PositionCode  # value code of residues

    @property
    def modulus(self) -> int:
        return self.residue.modulus

    @property
    def offset(self) -> int:
        """T' = smallest multiple of M >= max_len, so z + T' >= 0 and = z (mod M)."""
        return self.residue.offset

    @property
    def offsets(self) -> list[int]:
        """The heads' value offsets d (z_j = z_t + d): -S..-1 and 1..S."""
        return [d for d in range(-self.S, self.S + 1) if d != 0]

    @property
    def n_coarse(self) -> int:
        return self.residue.n_coarse


def residue_modulus(S: int, max_len: int) -> int:
    """M = 2^p: at least S + 2 (needed for aliasing to be harmless) and sqrt(max_len)
    (balances the coarse steps, 2 max_len / M, against the one-hot over M residues)."""
    need = max(S + 2, math.isqrt(max_len))
    return 1 << max(2, (need - 1).bit_length())


def value_code(kind: str, M: int) -> PositionCode:
    """Code of residues mod M: ``sinusoidal`` = cos/sin(pi r / 2^k), k = 0..p-1 (match p,
    miss <= p - 2: gap 2 for every M); ``circle`` = one circle of period M (gap 1 - cos(2 pi / M))."""
    if kind == "sinusoidal":
        return PositionCode(kind, M, tuple(2**k for k in range(M.bit_length() - 1)))
    if kind == "circle":
        return PositionCode(kind, M, (M // 2,))
    raise ValueError(f"unknown value code {kind!r}")


def axis_plans(world: BoxWorld, max_len: int, positions: str) -> list[AxisPlan]:
    plans = []
    for a, n in enumerate(world.sizes):
        M = residue_modulus(n - 1, max_len)
        plans.append(AxisPlan(a, n - 1, residue_range(-max_len, max_len, M), value_code(positions, M)))
    return plans


def constants(plan: AxisPlan, max_len: int) -> dict[str, float]:
    """Every derived constant of an axis's layer-2 heads and MLP 2 (see the module doc).

    G: weight of "a head matched" in the both-unmatched test: a matched head (output
       >= 1 - tol) must push z + q0 - k + 1 (<= max_len + S) below 1/2.
    tol: head output error: 2 G tol = 1/32 of the 1/4 input tolerance goes to the
       (near-zero) outputs of unmatched heads, leaving 7/32 for the prefix sum's rounding.
    lambda: recency weight per position; the recency span lambda * max_len stays below
       half the value gap, so a match always beats BOS and BOS beats every mismatch.
    beta: Lemma 13's for the recency gap lambda -- in exact arithmetic while one prefix head
       suffices (:func:`prefix_blocks`); for longer inputs, where the prefix sum is split for
       float32, the gap that survives float32's worst-case score rounding on both scores
       (lambda - 2 rho per unit of beta, :func:`score_rounding`), so that the unmatched heads'
       near-zero outputs, which MLP 2 weighs by G ~ 2 max_len, stay within tol after rounding.
    """
    code = plan.code
    P, g = code.match_score, code.match_score - code.miss_score
    G = 2.0 * (max_len + plan.S + 1)
    tol = 1.0 / (64.0 * G)
    lam = g / (2.0 * (max_len + 1))
    rounded = lam - 2 * score_rounding(plan, CERTIFIED_EPS)
    gap = rounded if prefix_blocks(max_len).count > 1 and rounded > 0 else lam
    t = attention_temperature(max_len, value_range=max_len, score_gap=gap, tolerance=tol)
    return {"P": P, "gap": g, "G": G, "tol": tol, "lambda": lam, "sink": P - g / 2, **t,
            "z_tolerance": STEP_TOLERANCE - 2 * G * tol}


def score_rounding(plan: AxisPlan, eps: float) -> float:
    """Worst-case rounding of one layer-2 score per unit of beta in a dtype with machine epsilon
    ``eps``: a score sums d_head products of size <= beta (P + 1), 4 eps d_head (P + 2)."""
    return 4 * eps * (plan.code.dim + 2) * (plan.code.match_score + 2)


def prefix_blocks(max_len: int) -> CounterBlocks:
    """Layer 1's position blocks: the fewest whose float32 rounding bound stays within
    krohn_rhodes_layout.PREFIX_TOLERANCE (moves in -1..1: krohn_rhodes_layout.position_blocks with
    n = 2, as for the bounded stack's depth).  That tolerance is below both readers' of z: the
    residue decode's STEP_TOLERANCE and MLP 2's ``z_tolerance`` (7/32).  One block, the single head
    over every position with mass max_len + 1, while one head's order-free bound eps T (T + 1)
    allows, up to T = 1294."""
    return position_blocks(2, max_len)


# ---------------------------------------------------------------------------------------
# the pieces


def _prefix_heads(ws: Workspace, plans: list[AxisPlan], blocks: CounterBlocks, max_len: int) -> list[Head]:
    """Layer 1: z_t on every axis (Lemma 15): one head, BOS scoring log(D - t) and the rest 0, values
    D * move (D = max_len + 1); or one head per position block (mass 2L, values 2L * move, every
    other real key losing beta; krohn_rhodes_layout.block_heads), all adding into ``gw{a}:z``.
    Obligation: :class:`~constructions.obligations.Average` of the moves over keys 1..max_len (over
    each block's keys with several), as the gadgets declare it."""
    moves = join("gw.moves", [ws[f"gw{p.axis}:move"] for p in plans])
    zs = join("gw.z", [ws[f"gw{p.axis}:z"] for p in plans])
    if blocks.count == 1:
        D = max_len + 1
        return [prefix_mean_head("gw.prefix", ws[ABSORB], ws["bos"], moves, zs, mass=D, value_scale=float(D),
                                 max_len=max_len)]
    return block_heads("gw.prefix", blocks, ws[ABSORB], ws["bos"], ws["one"], ws["pos:block"], moves, zs, max_len,
                       value_scale=float(blocks.mass))


def stored_codes(p: AxisPlan, eps: float) -> np.ndarray:
    """The value codes of the residues 0..M-1 as a dtype with machine epsilon ``eps`` stores them
    (MLP 1's last weights; float64 where no dtype has that epsilon), with entries below ``eps``
    (cos(pi/2) in float64, 6e-17) read as 0: the codes the declared program names."""
    dtype = next((d for d in (torch.float32, torch.float64, torch.float16, torch.bfloat16)
                  if torch.finfo(d).eps == eps), torch.float64)
    codes = torch.from_numpy(p.code.code(np.arange(p.modulus))).to(dtype).double().numpy()
    return np.where(np.abs(codes) < eps, 0.0, codes)


def _residue_mlp(ws: Workspace, p: AxisPlan, max_len: int, codes: np.ndarray) -> MLP:
    """MLP 1 for one axis: z -> code(z mod M), exactly, and 0 at BOS (gadgets.residue_mlp, 4 hidden layers).
    Obligation: a :class:`~constructions.obligations.Lookup` on (z, bos): every z in -max_len..max_len
    after BOS to the code of z mod M (``codes``, :func:`stored_codes`), 0 at BOS."""
    mlp = residue_mlp(f"gw{p.axis}.residue", ws[f"gw{p.axis}:z"], p.residue, ws[f"gw{p.axis}:code"],
                      p.code.code(np.arange(p.modulus)), bos=ws["bos"], notes={"axis": p.axis})
    table: dict[tuple[int, ...], np.ndarray] = {(z, 0): codes[z % p.modulus] for z in range(-max_len, max_len + 1)}
    table[(0, 1)] = np.zeros(p.code.dim)
    return replace(mlp, obligation=Lookup(mlp.name, (f"gw{p.axis}:z", "bos"), f"gw{p.axis}:code", table))


def _nearest_value_head(ws: Workspace, p: AxisPlan, offset: int, c: dict[str, float], codes: np.ndarray) -> Head:
    """Layer 2: the last position j >= 1 with z_j = z_t + offset (mod M), or BOS; copies j.
    Obligation: a :class:`~constructions.obligations.Match` -- from a query whose z is r (mod M),
    the last key whose z is r + offset (its code among ``codes``), copying ``pos:index`` (0 at BOS:
    never) into the head's dim of ``gw{a}:rec``."""
    code = p.code
    cd = code.dim
    beta = c["beta"]
    W_Q = np.zeros((cd + 1, cd + 2))  # rows: code, one
    W_K = np.zeros((cd + 2, cd + 2))  # rows: code, pos:index, bos
    W_Q[:cd, :cd] = beta * code.rotation(-offset)  # code(r) @ R(-d) = code(r + d)
    W_K[:cd, :cd] = np.eye(cd)
    W_Q[cd, cd] = beta * c["lambda"]
    W_K[cd, cd] = 1.0
    W_Q[cd, cd + 1] = beta * c["sink"]
    W_K[cd + 1, cd + 1] = 1.0
    W_V, W_O = np.ones((1, 1)), np.zeros((1, len(p.offsets)))  # value: pos:index; writes: gw{a}:rec
    W_O[0, p.offsets.index(offset)] = 1.0
    notes = {"kind": "nearest-value", "axis": p.axis, "offset": offset, "modulus": p.modulus,
             "beta": beta, "lambda": c["lambda"], "sink": c["sink"], "match": c["P"], "value_gap": c["gap"],
             "score_gap": c["score_gap"], "leak_bound": c["leak_bound"], "output_error_bound": c["tol"]}
    code_name, name = f"gw{p.axis}:code", f"gw{p.axis}.find{offset:+d}"
    declared = Match(name, code_name, code_name, codes, (np.arange(p.modulus) + offset) % p.modulus, "pos:index",
                     _rec(p, offset))
    return Head(name, W_Q, W_K, W_V, W_O, notes,
                reads={"query": (code_name, "one"), "key": (code_name, "pos:index", "bos"), "value": ("pos:index",)},
                writes=(f"gw{p.axis}:rec",), obligation=declared)


def _rec(p: AxisPlan, offset: int) -> str:
    """The obligations' name of the ``gw{a}:rec`` dim that the head of ``offset`` writes."""
    return standard.rec_name(p.axis, p.offsets, offset)


def _boundary_mlp(ws: Workspace, p: AxisPlan, c: dict[str, float]) -> MLP:
    """MLP 2 for one axis: formula (*) with exact steps (2 hidden layers of width 2S).
    Obligation: :class:`~constructions.obligations.Races`, per k the race of r(z - k) against
    r(z + S + 1 - k) and, when both are 0, the start rule z + q0 >= k, summed into ``gw{a}:state``."""
    S, G = p.S, c["G"]
    s = 1.0 / STEP_TOLERANCE
    z, q0 = 2 * S, 2 * S + 1  # local rows: rec (one per offset), z, start
    rec = p.offsets.index
    W1, b1 = np.zeros((2 * S + 2, 2 * S)), np.zeros(2 * S)
    for k in range(1, S + 1):
        r1, r2 = rec(-k), rec(S + 1 - k)
        # u_k = relu(s(r1 - r2) - 1): 0 iff r1 <= r2 (integers up to the heads' error)
        W1[r1, k - 1] += s
        W1[r2, k - 1] -= s
        b1[k - 1] = -1.0
        # v_k = relu(3 - s x), x = z + q0 - k + 1 - G (r1 + r2): 0 iff x >= 1 (only possible if no head matched)
        j = S + k - 1
        W1[z, j], W1[q0, j] = -s, -s
        W1[r1, j] += s * G
        W1[r2, j] += s * G
        b1[j] = 3.0 - s * (1 - k)
    # hidden 2: A_k = relu(1 - u_k) = [r1 <= r2], B_k = relu(1 - v_k) = [no match and z + q0 >= k]
    W2, b2 = -np.eye(2 * S), np.ones(2 * S)
    W3 = np.zeros((2 * S, 1))  # column: state
    W3[:S, 0], W3[S:, 0] = -1.0, 1.0
    b3 = np.array([float(S)])  # q = sum_k (1 - A_k + B_k)
    notes = {"kind": "boundary-count", "axis": p.axis, "S": S, "G": G, "input_tolerance": STEP_TOLERANCE,
             "z_tolerance": c["z_tolerance"], "head_output_tolerance": c["tol"], "hidden": [2 * S, 2 * S]}
    level = (f"gw{p.axis}:z", f"gw{p.axis}:start")
    races = tuple(Race(_rec(p, -k), _rec(p, S + 1 - k), level, k, f"gw{p.axis}:state") for k in range(1, S + 1))
    return MLP(f"gw{p.axis}.boundary", [W1, W2, W3], [b1, b2, b3], notes,
               reads=(f"gw{p.axis}:rec", f"gw{p.axis}:z", f"gw{p.axis}:start"), writes=(f"gw{p.axis}:state",),
               obligation=Races(f"gw{p.axis}.boundary", races))


def _boundaries(ws: Workspace, plans: list[AxisPlan], consts: list[dict[str, float]], flat: bool = False) -> MLP:
    """MLP 2 of every axis side by side (Lemma 17), declared as one :class:`Races`: each axis's
    races read and write that axis's subspaces only, so their union is the sum of the parts.
    ``flat``: each in one hidden layer (gridworld_standard.boundary_mlp)."""
    parts = [standard.boundary_mlp(p.axis, p.S, p.offsets, c) if flat else _boundary_mlp(ws, p, c)
             for p, c in zip(plans, consts)]
    mlp = beside(parts, "gw.boundary", ws)
    return replace(mlp, obligation=Races(mlp.name, tuple(r for m in parts for r in m.obligation.races)))


def readout(world: BoxWorld, ws: Workspace) -> tuple[np.ndarray, np.ndarray]:
    """logit_q = sum_a 2 c_a(q) x_a - c_a(q)^2: maximal at the state whose coordinates are
    the exact integers x_a in ``gw{a}:state``, with margin sum_a (x_a - c_a)^2 >= 1."""
    n = len(world.coords)
    W_U, b_U = np.zeros((ws.d_model, n)), np.zeros(n)
    for q, c in enumerate(world.coords):
        for a, x in enumerate(c):
            W_U[ws.dim(f"gw{a}:state"), q] = 2.0 * x
            b_U[q] -= float(x * x)
    return W_U, b_U


def readout_table(world: BoxWorld) -> Readout:
    """What :func:`readout` reads: each state's exact coordinates in the ``gw{a}:state`` dims."""
    return Readout(tuple(f"gw{a}:state" for a in range(len(world.sizes))),
                   {tuple(int(x) for x in c): q for q, c in enumerate(world.coords)})


def declaration(world: BoxWorld, plans: list[AxisPlan]) -> Declaration:
    """What the program declares beside its gadgets' obligations: per axis the subspaces whose
    codes the embedding writes (the move and the start; z, the code, each head's recency and the
    coordinate, 0 in every row until a layer writes them) and the readout."""
    def axis(p: AxisPlan) -> list[str]:
        return [f"gw{p.axis}:{name}" for name in ("move", "start", "z", "code", "state")] + \
            [_rec(p, o) for o in p.offsets]
    return Declaration(NAME, tuple(n for p in plans for n in axis(p)), readout_table(world))


# ---------------------------------------------------------------------------------------
# sizes, precision, build


def _sizes(plans: list[AxisPlan], max_len: int, flat: bool = False) -> dict[str, int]:
    """Widths and the parameter count of the two blocks; ``flat``: the one-hidden-layer build's
    (gridworld_standard: one-hot codes of M = 2T + 1 dims, MLPs of one hidden layer)."""
    n_rec = sum(2 * p.S for p in plans)
    s = prefix_blocks(max_len).count
    M = standard.onehot_size(max_len)
    code_dim = [M if flat else p.code.dim for p in plans]
    d = (4 if s == 1 else 3 + 2 * s) + sum(4 + c for c in code_dim) + n_rec
    d_head = max([c + 2 for c in code_dim] + [len(plans)])
    if flat:
        h1, h2 = [2 * (M - 1) * len(plans)], [2 * n_rec]
    else:
        h1, h2 = [sum(w) for w in zip(*(residue_hidden(p.residue, bos=True) for p in plans))], [n_rec, n_rec]
    mlp = lambda hs: sum(a * b for a, b in zip([d, *hs], [*hs, d])) + sum(hs) + d  # noqa: E731
    # positional table, two attention blocks (s prefix heads, then n_rec heads, sharing d_head), two MLPs;
    # the embedding and unembedding (|Sigma| + 1 and |Q| columns) come on top
    params = (max_len + 1) * d + 4 * d * d_head * (s + n_rec) + mlp(h1) + mlp(h2)
    return {"d_model": d, "d_head": d_head, "n_heads_layer2": n_rec, "mlp1_hidden": h1, "mlp2_hidden": h2,
            "params_estimate": params, **({"n_heads_layer1": s} if s > 1 else {})}


def estimated_params(world: BoxWorld, max_len: int, positions: str = "sinusoidal") -> int:
    return _sizes(axis_plans(world, max_len, positions), max_len)["params_estimate"]


def precision(plans: list[AxisPlan], max_len: int, eps: float, flat: bool = False) -> dict[str, Any]:
    """How far the dtype's rounding stays inside each tolerance (margins > 1 are safe).

    * scores: a layer-2 score sums d_head products of size <= beta (P + 1); the
      recency step between neighbours is gamma = beta * lambda logits.  Keys with
      equal residues are bitwise equal (one-hot readout), so only this rounding
      competes with recency: margin = (gamma / 2) / (4 eps d_head beta (P + 2)).
    * prefix sums: summing t terms of size ~1 in float rounds by at most
      ~eps * t^2 (worst case, recursive summation); over s position blocks of length L
      ~eps (s L (L + 1) + (s - 1) T) plus the blocks' leak
      (krohn_rhodes_layout.prefix_sum_bounds); tolerance z_tolerance (7/32).
    * residue ramps: the third hidden layer of MLP 1 sums three terms of size up to
      4 * 2T'; a ramp tolerates 1 (a quarter of a residue step at slope 4):
      :func:`gadgets.residue_margin`.
    * ``flat`` (gridworld_standard): the scores' margin is lambda / (4 E), E the one-hot codes'
      score error; there are no residue ramps.
    """
    worst = math.inf
    rows = []
    prefix_bound = sum(prefix_sum_bounds(2, max_len, prefix_blocks(max_len), eps))
    for p in plans:
        c = standard.constants(p.S, max_len, eps) if flat else constants(p, max_len)
        score = c["lambda"] / (4 * c["score_error"]) if flat else \
            (c["score_gap"] / 2) / (c["beta"] * score_rounding(p, eps))
        prefix = c["z_tolerance"] / (prefix_bound + 1e-300)
        ramps = math.inf if flat else residue_margin(p.residue, eps)
        rows.append({"axis": p.axis, "score_margin": score, "prefix_sum_margin": prefix, "ramp_margin": ramps})
        worst = min(worst, score, prefix, ramps)
    return {"margin": worst, "axes": rows}


def _workspace(plans: list[AxisPlan], blocks: CounterBlocks, max_len: int, flat: bool = False) -> Workspace:
    """The residual layout of the module doc: fixed dims (with several position blocks an absorb
    column and a one-hot column per block), then per axis its subspaces (``flat``: one-hot codes)."""
    ws = Workspace()
    ws.add("one"), ws.add("bos")
    ws.add("pos:index")
    if blocks.count == 1:
        ws.add(ABSORB)
    else:
        ws.add(ABSORB, blocks.count), ws.add("pos:block", blocks.count)
    for p in plans:
        a = p.axis
        ws.add(f"gw{a}:move"), ws.add(f"gw{a}:start"), ws.add(f"gw{a}:z")
        ws.add(f"gw{a}:code", standard.onehot_labels(max_len) if flat else p.code.labels)
        ws.add(f"gw{a}:rec", [f"{o:+d}" for o in p.offsets])
        ws.add(f"gw{a}:state")
    return ws


def _embedding(automaton: Semiautomaton, world: BoxWorld, ws: Workspace) -> np.ndarray:
    """W_E: ``one`` everywhere, ``bos`` on BOS's row, each letter's move on its axis, and the
    start's coordinates on every row."""
    W_E = np.zeros((automaton.n_symbols + 1, ws.d_model))
    W_E[:, ws.dim("one")] = 1.0
    W_E[-1, ws.dim("bos")] = 1.0
    for s, mv in enumerate(world.moves):
        if mv is not None:
            W_E[s, ws.dim(f"gw{mv[0]}:move")] = float(mv[1])
    for a, x in enumerate(world.coords[automaton.start]):
        W_E[:, ws.dim(f"gw{a}:start")] = float(x)
    return W_E


def _layers(ws: Workspace, plans: list[AxisPlan], split: CounterBlocks, max_len: int, eps: float,
            flat: bool) -> tuple[Block, Block, list[dict[str, float]]]:
    """The two blocks and each axis's constants: the residue codes, their heads and MLP 2 in two
    hidden layers, or (``flat``) gridworld_standard's one-hot codes, heads and one-hidden-layer MLPs."""
    if flat:
        consts = [standard.constants(p.S, max_len, eps) for p in plans]
        mlp1 = beside([standard.onehot_mlp(f"gw{p.axis}.onehot", ws, p.axis, max_len) for p in plans], "gw.onehot", ws)
        heads2 = [standard.onehot_head(ws, p.axis, p.offsets, o, c, max_len) for p, c in zip(plans, consts)
                  for o in p.offsets]
    else:
        consts, codes = [constants(p, max_len) for p in plans], [stored_codes(p, eps) for p in plans]
        mlp1 = beside([_residue_mlp(ws, p, max_len, k) for p, k in zip(plans, codes)], "gw.residue", ws)
        heads2 = [_nearest_value_head(ws, p, o, c, k) for p, c, k in zip(plans, consts, codes) for o in p.offsets]
    block2 = Block(heads2, _boundaries(ws, plans, consts, flat))
    return Block(_prefix_heads(ws, plans, split, max_len), mlp1), block2, consts


def build(automaton: Semiautomaton, world: BoxWorld, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The two-layer program for the line/box world ``world`` of ``automaton`` and its metadata
    (``options.one_hidden_layer``: gridworld_standard's build, where its float bound allows)."""
    max_len, positions, eps = options.max_len, options.positions, options.eps
    plans = axis_plans(world, max_len, positions)
    why = standard.refusal(max_len, eps, len(plans), len(world.coords)) if options.one_hidden_layer else None
    flat = options.one_hidden_layer and why is None
    sizes = _sizes(plans, max_len, flat)
    if sizes["params_estimate"] > options.max_params:
        raise BudgetError(f"a gridworld model of {automaton.name} at max_len {max_len} would have about "
                          f"{sizes['params_estimate']:,} parameters, over the budget of {options.max_params:,}")
    split = prefix_blocks(max_len)
    mass = max_len + 1 if split.count == 1 else split.mass
    ws = _workspace(plans, split, max_len, flat)
    d = ws.d_model
    assert d == sizes["d_model"]
    W_E = _embedding(automaton, world, ws)
    W_pos = np.zeros((max_len + 1, d))
    t = np.arange(1, max_len + 1, dtype=np.float64)
    W_pos[1:, ws.dim("pos:index")] = t
    if split.count == 1:
        W_pos[1:, ws.dim(ABSORB)] = absorb_feature(mass, max_len)[1:]  # BOS's row stays 0
    else:
        block_positions(W_pos, split, ws[ABSORB], ws["pos:block"], max_len)

    block1, block2, consts = _layers(ws, plans, split, max_len, eps, flat)
    W_U, b_U = readout(world, ws)

    prec = precision(plans, max_len, eps, flat)
    warnings = []
    if prec["margin"] < 1:
        what = {"score_margin": "layer-2 attention scores", "prefix_sum_margin": "layer-1 prefix sums",
                "ramp_margin": "residue ramps"}
        weak = sorted({what[k] for row in prec["axes"] for k in what if row[k] < 1})
        warnings.append(f"gridworld at max_len {max_len}: the worst-case rounding bound of this dtype for the "
                        f"{' and '.join(weak)} exceeds its tolerance (margin {prec['margin']:.2g}); measured "
                        f"errors are far smaller (docs/constructions/gridworld.md), but verify before trusting, or "
                        f"use float64")
    meta = {
        "method": NAME,
        "positions": positions,
        "warnings": warnings,
        **({ONE_HIDDEN_LAYER: True} if flat else {}),
        NAME: {
            **({"standard": standard.meta(max_len, eps, consts)} if flat else {}),
            **({"one_hidden_layer_refused": why} if why else {}),
            **world.to_dict(),
            "world": world.describe(automaton),
            "absorb": mass,
            **({"prefix_blocks": {"count": split.count, "length": split.length, "mass": split.mass,
                                  "beta": split.beta}} if split.count > 1 else {}),
            "axes": [{"axis": p.axis, "S": p.S, "modulus": p.modulus, "offset": p.offset,
                      "code_periods": list(p.code.periods), "offsets": p.offsets,
                      **{k: c[k] for k in ("P", "gap", "G", "tol", "lambda", "sink", "beta", "z_tolerance")}}
                     for p, c in zip(plans, consts)],
            "precision": prec,
            "model_sizes": sizes,
        },
        "layers": [b.notes() for b in (block1, block2)],
    }
    return Program(ws, W_E, W_pos, [block1, block2], W_U, b_U, declaration=declaration(world, plans)), meta


def set_start(model: CompiledTransformer, world: BoxWorld, start: str) -> None:
    """Point ``model`` at start state ``start`` (in place): q0's coordinates live in the
    ``gw{a}:start`` column of every embedding row and nowhere else."""
    coords = world.coords[check_start(model.automaton, start)]
    labels = model.metadata.residual_labels
    with torch.no_grad():
        for axis, x in enumerate(coords):
            model.W_E[:, labels.index(f"gw{axis}:start")] = float(x)
    model.record_start(start)


# ---------------------------------------------------------------------------------------
# the registry entry: the detected box world is the plan


def applies(automaton: Semiautomaton) -> BoxWorld | Refusal:
    """The box world ``automaton`` is up to renaming, or why it is not one."""
    world, reason = detect(automaton)
    if world is None:
        return Refusal(f"Theorem 12 needs a line or box world, but {automaton.name or 'this automaton'} is not "
                       f"one up to renaming: {reason}")
    return world


def estimate(world: BoxWorld, max_len: int, positions: str = "sinusoidal") -> Cost:
    """Exact: the two blocks of :func:`_sizes` plus the embedding (|Sigma| + 1 rows) and the
    unembedding (|Q| columns and biases)."""
    d = _sizes(axis_plans(world, max_len, positions), max_len)["d_model"]
    n_symbols, n_states = len(world.moves), len(world.coords)
    return Cost(2, estimated_params(world, max_len, positions) + (n_symbols + 1) * d + (d + 1) * n_states)


CONSTRUCTION = Construction(
    name=NAME, theorem="Theorem 12", applies=applies, estimate=estimate, build=build, set_start=set_start,
    plan_to_json=BoxWorld.to_dict, plan_from_json=BoxWorld.from_dict,
    describe=lambda world, automaton: world.describe(automaton),
    families=checks.families, family_seeds=lambda seed: {"gridworld_families": seed + checks.FAMILY_SEED_OFFSET},
    obligations=declared_obligations(build),
)
