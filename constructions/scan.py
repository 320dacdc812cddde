"""Theorem 10: any automaton in ceil(log2 T) attention layers by a parallel prefix scan.

Residual subspaces:
  ``one``, ``bos``        constant 1; 1 only at BOS
  ``pos:*``               position code (constructions/positions.py)
  ``scan:map[x]``         integer code of f_t(x), the running transition map on points x
  ``scan:prev[x]``        the map fetched from t - 2^(l-1); cleared by the MLP, except in
                          the last layer, whose MLP leaves the whole map there

Embedding: symbol a writes its transition map, BOS the identity map.  Layer l
fetches f_(t - 2^(l-1)) (BOS's identity when that position does not exist) and
the composition MLP (:func:`constructions.gadgets.compose_mlp`: one hidden layer of
2m^2 + 2m units on m points, the role of Lemma 14) replaces f_t by
"f_(t-2^(l-1)), then f_t", in place.  After layer l, position t holds the map of
letters max(1, t-2^l+1)..t -- what the verifier's layer-wise check of the declared program
(``verify/layerwise.py``) compares -- so after
ceil(log2 T) layers it holds delta(., sigma_1..sigma_t) and the state is f_t(q0).
The last layer's MLP writes that composition over the fetched map in ``scan:prev``
instead (``into_fetched``: nothing fetches after it, so nothing needs the scratch
cleared), with m units fewer, and leaves ``scan:map`` at the 2^(L-1)-letter window;
the last MLP's notes (``into``) name the subspace the readout reads (``scan:map`` in
checkpoints from before this change).  A lookup fused after that MLP (a label readout)
reads the map from its pass-through units, with no carry.
The start state enters only the unembedding, so one model serves every start state
(:func:`readout`).

Exactness in floating point (:func:`head_tolerance`): the composition MLP computes
exactly, in the model's dtype, on exact integer maps and fetched codes within
``exact_input_noise`` = u / (4M(1+u)) of an integer (u the unit roundoff, M = 2(m-1)
its slope).  Each head's temperature is set so that the fetched codes, and the
sub-rounding residue they leave in the scratch over all layers, stay within that:
then every map in the residual stream is an exact integer after every layer, at any
max_len, as long as the MLP's sums stay below 1/eps (``magnitude``; m up to ~160 in
float32) and the position code resolves its score gap (``position_precision_margin``).
In exact arithmetic the MLP tolerates fetched noise up to 1/4 (``input_tolerance``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from compiler.automata.errors import BudgetError
from compiler.automata.representation import Representation, choose
from compiler.automata.spec import Semiautomaton

from .construction import BuildOptions, Construction, Cost, check_start, declared_obligations
from .gadgets import compose_mlp, offset_head
from .model import CompiledTransformer
from .obligations import Obligations, Readout
from .positions import position_code, position_table
from .program import Block, Declaration, Program
from .workspace import Workspace, workspace_from_meta

NAME = "scan"


def n_scan_layers(max_len: int) -> int:
    """ceil(log2 T) attention layers (at least one, so T = 1 still has a block)."""
    return max(1, math.ceil(math.log2(max_len)))


def readout(rep: Representation, automaton: Semiautomaton, ws: Workspace, start: int,
            result: str) -> tuple[np.ndarray, np.ndarray]:
    """Unembedding (W_U, b_U) giving one logit per state for start state ``start``, reading the
    map from the subspace ``result``.

    Natural action: x = f_t(q0) is an exact integer code in ``result[q0]``;
    logit_q = 2 q x - q^2 = x^2 - (x - q)^2 is maximal at q = x with margin >= 1.
    Element readout: x = f_t is the whole map on the points, and
    logit_q = 2 <s_q, x> - ||s_q||^2 = ||x||^2 - ||x - s_q||^2, where s_q is the map of the
    unique group element with q0.s_q = q; the elements' maps are distinct integer
    vectors (the action is faithful), so the margin is again >= 1.  Both are linear.
    """
    n = automaton.n_states
    W_U = np.zeros((ws.d_model, n))
    b_U = np.zeros(n)
    F = ws[result]
    if rep.elements is None:  # the natural action
        x = F[start]
        for q in range(n):
            W_U[x, q] = 2.0 * q
            b_U[q] = -float(q * q)
        return W_U, b_U
    for point_map, state_map in rep.elements:
        q = state_map[start]
        s = np.asarray(point_map, dtype=np.float64)
        W_U[list(F.dims), q] = 2.0 * s
        b_U[q] = -float(s @ s)
    return W_U, b_U


def layer_params(n_points: int, max_len: int, positions: str = "sinusoidal", last: bool = False) -> int:
    """Parameters of one scan block (one head, one composition MLP) as the model stores them:
    d_model = 2 + position dims + 2m, d_head = max(position dims + 1, m), MLP hidden 2m^2 + 2m
    (2m^2 + m in the ``last`` block, which composes into the fetched map)."""
    m = n_points
    c = position_code(positions, max_len).dim
    d = 2 + c + 2 * m
    d_head = max(c + 1, m)
    hidden = 2 * m * m + (m if last else 2 * m)
    return 4 * d * d_head + d * hidden + hidden + hidden * d + d


def estimated_params(rep: Representation, max_len: int, positions: str = "sinusoidal") -> int:
    """Parameters of the scan model :func:`build` makes for ``rep`` (exactly: embeddings,
    blocks, unembedding)."""
    m = rep.n_points
    d = 2 + position_code(positions, max_len).dim + 2 * m
    n_symbols = len(rep.letter_maps)
    n_states = m if rep.block_of is None else len(rep.block_of)
    L = n_scan_layers(max_len)
    return ((n_symbols + 1) * d + (max_len + 1) * d + (L - 1) * layer_params(m, max_len, positions)
            + layer_params(m, max_len, positions, last=True) + d * n_states + n_states)


def check_budget(rep: Representation, max_len: int, positions: str, max_params: int) -> None:
    """Refuse (BudgetError) a scan model larger than ``max_params``."""
    est = estimated_params(rep, max_len, positions)
    if est > max_params:
        raise BudgetError(
            f"a scan model composing maps on {rep.n_points} points at max_len {max_len} would have "
            f"{est:,} parameters, over the budget of {max_params:,}; each layer grows like 8|Q|^3"
        )


def head_tolerance(mlp_notes: dict[str, Any], n_layers: int) -> float:
    """How far a look-back head may move a fetched code: half of the composition MLP's
    ``exact_input_noise`` shared by the ``n_layers`` layers.

    A head's output is within its tolerance of the code it selects; when the code is 0 the
    (sub-rounding) difference stays in the scratch after the MLP clears it, and the next
    fetch adds to it, so over the layers the scratch carries at most n_layers times the
    tolerance, times (1 + (T+1)u) <= 2 for the rounding of the heads' own sums.  The MLP's
    float claim (:func:`constructions.gadgets.compose_mlp`) then holds at every layer."""
    return mlp_notes["exact_input_noise"] / (2 * n_layers)


def build(automaton: Semiautomaton, rep: Representation, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The scan program for ``automaton`` over the representation ``rep`` at length
    ``options.max_len`` and its metadata.

    ``options.eps`` is the machine epsilon of the target dtype: it decides whether the
    position code's score gap survives rounding (recorded, and warned about)."""
    max_len, positions, eps = options.max_len, options.positions, options.eps
    m = rep.n_points
    check_budget(rep, max_len, positions, options.max_params)
    code = position_code(positions, max_len)
    ws = Workspace()
    one, bos = ws.add("one"), ws.add("bos")
    pos = ws.add("pos", code.labels)
    F, G = ws.add("scan:map", m), ws.add("scan:prev", m)
    d = ws.d_model

    W_E = np.zeros((automaton.n_symbols + 1, d))
    W_E[:, one[0]] = 1.0
    for a, fmap in enumerate(rep.letter_maps):
        W_E[a, list(F.dims)] = fmap
    W_E[-1, bos[0]] = 1.0
    W_E[-1, list(F.dims)] = np.arange(m)
    W_pos = np.zeros((max_len + 1, d))
    W_pos[:, list(pos.dims)] = position_table(code)

    blocks = []
    mlps = []
    L = n_scan_layers(max_len)
    for l in range(1, L + 1):
        mlp = compose_mlp(f"scan{l}.compose", F, G, eps=eps, into_fetched=l == L)
        mlps.append(mlp)
        tol = head_tolerance(mlp.notes, L)
        head = offset_head(f"scan{l}.lookback", pos, code, bos, one, 2 ** (l - 1), F, G, value_range=m - 1,
                           tolerance=tol)
        blocks.append(Block([head], mlp))
    W_U, b_U = readout(rep, automaton, ws, automaton.start, mlps[-1].notes["into"])
    margin = code.precision_margin(eps)
    warnings = []
    if margin < 1:
        warnings.append(
            f"{positions} positions at max_len {max_len}: the attention score gap is below the rounding error of "
            f"this dtype (margin {margin:.2g}); expect wrong look-backs -- use sinusoidal positions or float64"
        )
    compose = max((mlp.notes for mlp in mlps), key=lambda notes: notes["magnitude"])
    if not compose["float_exact"]:
        warnings.append(
            f"composing maps on {m} points: the composition MLP's sums reach {compose['magnitude']:,.0f}, beyond "
            f"1/eps = {1 / eps:,.0f} where this dtype still holds every half-integer; expect rounding -- use float64"
        )
    meta = {
        "method": NAME,
        "positions": positions,
        "position_precision_margin": margin,
        "warnings": warnings,
        NAME: {
            "n_points": m,
            "natural": rep.natural,
            "compose": {k: compose[k] for k in ("slope", "offset", "input_tolerance", "exact_input_noise",
                                                "magnitude", "float_exact")}
                       | {"head_tolerance": head_tolerance(compose, L)},
            "letter_maps": [list(x) for x in rep.letter_maps],
            "elements": None if rep.elements is None else [[list(p), list(s)] for p, s in rep.elements],
        },
        "layers": [b.notes() for b in blocks],
    }
    declared = Declaration(NAME, ("scan:map", "scan:prev"),
                           readout_table(rep, automaton.start, mlps[-1].notes["into"]))
    return Program(ws, W_E, W_pos, blocks, W_U, b_U, declaration=declared), meta


def result_of(meta: dict[str, Any]) -> str:
    """The subspace a scan model's readout reads: where its last composition MLP writes the map
    (its notes' ``into``), or ``scan:map`` for a checkpoint written before the last layer
    composed into the fetched map."""
    return str(meta["layers"][-1]["mlp"].get("into", "scan:map"))


def head_target(layer: int, rows: torch.Tensor) -> tuple[torch.Tensor, str]:
    """The key head ``layer`` (0-based) reads for query rows ``rows``: t - 2^layer, or BOS (for
    margins on the query-chunked forward)."""
    return torch.clamp(rows - 2**layer, min=0), f"t - {2**layer} or BOS"


def set_start(model: CompiledTransformer, rep: Representation, start: str) -> None:
    """Point ``model``'s unembedding at start state ``start`` (in place).

    Position t holds delta(., sigma_1..sigma_t) for every state at once, so only the
    readout depends on q0 (Theorem 10 serves every start state)."""
    a = model.automaton
    q0 = check_start(a, start)
    ws = workspace_from_meta(model.metadata.residual_labels, model.metadata.subspaces)
    W_U, b_U = readout(rep, a, ws, q0, result_of(model.meta))
    with torch.no_grad():
        model.W_U.copy_(torch.from_numpy(W_U).to(model.W_U.dtype))
        model.b_U.copy_(torch.from_numpy(b_U).to(model.b_U.dtype))
    model.record_start(start)


def readout_table(rep: Representation, start: int, result: str) -> Readout:
    """What :func:`readout` must read out (its obligation): the state of the code in ``result``
    from start state ``start`` -- the point f_t(q0) itself (natural action), or the state the
    element with map f_t sends q0 to."""
    if rep.elements is None:
        return Readout((f"{result}[{start}]",), {(x,): x for x in range(rep.n_points)})
    return Readout((result,), {tuple(int(v) for v in p): int(s[start]) for p, s in rep.elements})


def obligations(model: CompiledTransformer, rep: Representation) -> Obligations:
    """The declared program (:func:`declared_obligations`); for a checkpoint written before the last
    layer composed into the fetched map (no ``into`` in its notes, :func:`result_of`), the program
    such a build declared: the last composition into ``scan:map``, read out there."""
    ob = declared_obligations(build)(model, rep)
    result = result_of(model.meta)
    if ob.layers[-1].mlp.into == result:
        return ob
    last = replace(ob.layers[-1], mlp=replace(ob.layers[-1].mlp, into=result))
    return replace(ob, layers=(*ob.layers[:-1], last), readout=readout_table(rep, model.automaton.start, result))


# ---------------------------------------------------------------------------------------
# the registry entry: the chosen representation is the plan (the last resort: always applies)


def estimate(rep: Representation, max_len: int, positions: str = "sinusoidal") -> Cost:
    return Cost(n_scan_layers(max_len), estimated_params(rep, max_len, positions))


def describe(rep: Representation, automaton: Semiautomaton) -> str:
    if rep.natural:
        return f"transition maps composed on the {rep.n_points} states"
    return (f"transition maps composed on {rep.n_points} points (a faithful quotient of the {automaton.n_states} "
            f"states; read out by group element)")


CONSTRUCTION = Construction(
    name=NAME, theorem="Theorem 10", applies=choose, estimate=estimate, build=build, set_start=set_start,
    plan_to_json=Representation.to_dict, plan_from_json=Representation.from_dict, describe=describe,
    head_target=head_target, obligations=obligations,
)
