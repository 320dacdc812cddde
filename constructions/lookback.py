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

Generalised definite automata (plan.m >= 1, from the start q0: the first m and the last k
letters decide the state at t >= m + k).  Layer 1 adds m absolute heads (offset_head with
``absolute``): front head i copies the letter at position i, BOS's 0 when t < i.  The
back heads skip the first m positions (``skip`` = ``lb:early``, 1 at positions 1..m, set by
the position embedding): back head j reads t - j only when t - j > m, else BOS's 0.  So
at t < m + k the heads cover every letter once, min(t, m) fronts then t - m backs, and
t is the number of nonzero codes: the key (f_1..f_m, c_0..c_{k-1}) decides the whole
prefix, and the lookup has sum_{t <= m + k} |Sigma|^t keys, exact.  At t >= m + k the key
is (first m letters, last k letters) and the row is the window table's state.  Both
head kinds keep offset_head's score gap (match - miss) / 2 and temperature.  The table
depends on q0, so :func:`set_start` re-detects from the new start (and refuses when its
(m, k) differs, since the model's shape would).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from compiler.automata.definite import (
    MAX_LOOKBACK,
    LookbackPlan,
    definite_depth,
    detect,
    generalised_depth,
    lookup_keys,
    window_table,
)
from compiler.automata.errors import BudgetError, InputError
from compiler.automata.load import from_dict
from compiler.automata.spec import Semiautomaton

from .assemble import program_params
from .budget import MAX_PARAMS
from .construction import (ONE_HIDDEN_LAYER, BuildOptions, Construction, Cost, Refusal, check_start, declared_obligations,
                           rebuild)
from .gadgets import (STEP_TOLERANCE, CodeInput, flat_lookup_margin, flat_lookup_mlp, flat_lookup_tolerance, lookup_mlp,
                      offset_head)
from .model import CompiledTransformer
from .obligations import Readout
from .positions import position_code, position_table
from .program import MLP, Block, Declaration, Head, Program
from .workspace import Workspace

NAME = "lookback"


def back(j: int) -> str:
    """The subspace head j writes: the letter code at t - j."""
    return f"lb:back{j}"


def front(i: int) -> str:
    """The subspace front head i writes: the letter code at position i."""
    return f"lb:front{i}"


def n_keys(plan: LookbackPlan) -> int:
    """Valid lookup keys: one per prefix of length t < m + k, one per (first m, last k) letters."""
    return lookup_keys(plan.n_symbols, plan.m + plan.k)


def key_of(plan: LookbackPlan, prefix: tuple[int, ...]) -> tuple[int, ...]:
    """The heads' codes (f_1..f_m, c_0..c_{k-1}) after ``prefix`` (letters, oldest first): the
    letter at position i <= m, then the letter at t - j when t - j > m; code a + 1, 0 = BOS."""
    m, k, t = plan.m, plan.k, len(prefix)
    fronts = tuple(prefix[i] + 1 if i < t else 0 for i in range(m))
    return fronts + tuple(prefix[t - 1 - j] + 1 if t - j > m else 0 for j in range(k))


def table(plan: LookbackPlan, automaton: Semiautomaton) -> dict[tuple[int, ...], np.ndarray]:
    """The lookup of Lemma 11: the key (:func:`key_of`) to the one-hot of q_t (the window
    table at t >= m + k, q0's run below)."""
    m, k, s, n = plan.m, plan.k, plan.n_symbols, plan.n_states
    eye = np.eye(n)
    out: dict[tuple[int, ...], np.ndarray] = {}
    for t in range(m + k + 1):
        for word in itertools.product(range(s), repeat=t):
            if t == m + k:
                q = plan.window_state(word)
            else:
                q = automaton.run(word)[-1] if t else automaton.start
            out[key_of(plan, word)] = eye[q]
    return out


def _sizes(plan: LookbackPlan, max_len: int, positions: str) -> dict[str, Any]:
    """Widths and the parameter count of the assembled model (dense, as assembled)."""
    code = position_code(positions, max_len)
    m, k, s, n = plan.m, plan.k, plan.n_symbols, plan.n_states
    early = 1 if m and k else 0  # the back heads' skip flag
    d = 2 + code.dim + early + 1 + m + k + n
    d_head = code.dim + 1 + early
    h1, h2 = 2 * s * (m + k), n_keys(plan)
    mlp = d * h1 + h1 + h1 * h2 + h2 + h2 * d + d
    params = (s + 1) * d + (max_len + 1) * d + 4 * (m + k) * d * d_head + mlp + d * n + n
    return {"d_model": d, "d_head": d_head, "heads": m + k, "mlp_hidden": [h1, h2], "params_estimate": params}


def _layout(plan: LookbackPlan, code) -> Workspace:
    ws = Workspace()
    ws.add("one"), ws.add("bos")
    ws.add("pos", code.labels)
    if plan.m and plan.k:
        ws.add("lb:early")
    ws.add("lb:letter")
    for i in range(1, plan.m + 1):
        ws.add(front(i))
    for j in range(plan.k):
        ws.add(back(j))
    ws.add("lb:state", plan.n_states)
    return ws


def _heads(plan: LookbackPlan, ws: Workspace, code, flat: bool = False) -> list[Head]:
    """Layer 1: front head i copies ``lb:letter`` of position i (BOS's 0 when t < i) into
    ``lb:front{i}``; back head j copies ``lb:letter`` of t - j (BOS's 0 when t - j <= m) into
    ``lb:back{j}``; within half the lookup's input tolerance (``flat``: the flat lookup's)."""
    r = float(plan.n_symbols)
    tol = (flat_lookup_tolerance([plan.n_symbols + 1] * (plan.m + plan.k)) if flat else STEP_TOLERANCE) / 2
    skip = ws["lb:early"] if plan.m and plan.k else None
    fronts = [offset_head(f"lb.front{i}", ws["pos"], code, ws["bos"], ws["one"], i, ws["lb:letter"], ws[front(i)],
                          value_range=r, tolerance=tol, absolute=True) for i in range(1, plan.m + 1)]
    return fronts + [offset_head(f"lb.back{j}", ws["pos"], code, ws["bos"], ws["one"], j, ws["lb:letter"],
                                 ws[back(j)], value_range=r, tolerance=tol, skip=skip,
                                 skip_below=plan.m if skip is not None else 0) for j in range(plan.k)]


def _lookup(plan: LookbackPlan, automaton: Semiautomaton, ws: Workspace, flat: bool = False) -> MLP:
    """MLP 1: (f_1, ..., f_m, c_0, ..., c_{k-1}) -> one-hot of q_t (Lemma 11; ``flat``: in one
    hidden layer, :func:`gadgets.flat_lookup_mlp`, a unit pair at every threshold: the shape must
    not depend on the start state, whose rows :func:`set_start` swaps in place)."""
    subs = [front(i) for i in range(1, plan.m + 1)] + [back(j) for j in range(plan.k)]
    ins = [CodeInput(ws[name], plan.n_symbols + 1) for name in subs]
    if flat:
        return flat_lookup_mlp("lb.lookup", ins, ws["lb:state"], table(plan, automaton), every_threshold=True)
    return lookup_mlp("lb.lookup", ins, ws["lb:state"], table(plan, automaton))


def build(automaton: Semiautomaton, plan: LookbackPlan, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The one-layer program for a k-definite ``automaton`` and its metadata."""
    max_len, positions, eps = options.max_len, options.positions, options.eps
    sizes = _check_budget(plan, max_len, positions, options.max_params)
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
    if plan.m and plan.k:
        W_pos[1 : plan.m + 1, ws["lb:early"][0]] = 1.0
    flat = options.one_hidden_layer
    block = Block(_heads(plan, ws, code, flat), _lookup(plan, automaton, ws, flat))
    W_U = np.zeros((d, automaton.n_states))
    W_U[list(ws["lb:state"].dims), np.arange(automaton.n_states)] = 1.0
    b_U = np.zeros(automaton.n_states)
    margin = code.precision_margin(eps)
    warnings = []
    if margin < 1:
        warnings.append(f"{positions} positions at max_len {max_len}: the attention score gap is below the rounding "
                        f"error of this dtype (margin {margin:.2g}); expect wrong look-backs -- use sinusoidal "
                        f"positions or float64")
    if flat:
        radix = [plan.n_symbols + 1] * (plan.m + plan.k)
        flat_margin = flat_lookup_margin(radix, eps)
        if flat_margin < 1:
            warnings.append(f"the one-hidden-layer lookup reads {int(np.prod(radix)):,} codes: their rounding in this "
                            f"dtype reaches its input tolerance (margin {flat_margin:.2g}); build without one_hidden_layer")
    head_notes = block.heads[0].notes
    meta = {
        "method": NAME,
        "positions": positions,
        "position_precision_margin": margin,
        "warnings": warnings,
        NAME: {**({"m": plan.m} if plan.m else {}), "k": plan.k, "keys": n_keys(plan), "windows": len(plan.windows),
               "beta": head_notes["beta"], "score_gap": head_notes["score_gap"],
               "leak_bound": head_notes["leak_bound"], "model_sizes": sizes},
        "layers": [block.notes()],
        **({ONE_HIDDEN_LAYER: True} if flat else {}),
    }
    tracked = ("lb:letter", *(front(i) for i in range(1, plan.m + 1)), *(back(j) for j in range(plan.k)), "lb:state")
    readout = Readout(("lb:state",), {tuple(int(v) for v in np.eye(plan.n_states)[q]): q
                                      for q in range(plan.n_states)})
    prog = Program(ws, W_E, W_pos, [block], W_U, b_U, declaration=Declaration(NAME, tracked, readout))
    if flat and program_params(prog) > options.max_params:  # the estimate is of the two-layer lookup
        raise BudgetError(f"a lookback model with k = {plan.k} over {plan.n_symbols} letters and a one-hidden-layer "
                          f"lookup at max_len {max_len} would have {program_params(prog):,} parameters, over the "
                          f"budget of {options.max_params:,}")
    return prog, meta


def _check_budget(plan: LookbackPlan, max_len: int, positions: str, max_params: int) -> dict[str, int]:
    sizes = _sizes(plan, max_len, positions)
    if sizes["params_estimate"] > max_params:
        raise BudgetError(f"a lookback model with k = {plan.k} over {plan.n_symbols} letters at max_len {max_len} "
                          f"would have about {sizes['params_estimate']:,} parameters, over the budget of "
                          f"{max_params:,}")
    return sizes


def set_start(model: CompiledTransformer, plan: LookbackPlan, start: str) -> None:
    """Rebuild ``model`` for start state ``start`` and copy the weights in (in place).  With
    m = 0 only the lookup rows of keys with a before-start entry change; the plan (the
    window table) does not depend on the start (for a partial automaton it is recomputed from the
    states legally reachable from the new start, which must keep it k-definite).  With m >= 1 the window table is q0's:
    the new start must keep the automaton generalised definite with the same (m, k) (the
    model's shape), and the plan is recomputed from it; InputError otherwise."""
    a = model.automaton
    check_start(a, start)
    carried = {}
    other = from_dict({**model.metadata.automaton, "start": start})
    if plan.m:
        if generalised_depth(other, plan.m, plan.k) is None:
            raise InputError(f"from {start!r} the first {plan.m} and last {plan.k} letters no longer decide the state of "
                             f"{a.name} (this lookback model's shape); compile the spec again with that start")
        plan = LookbackPlan(plan.k, plan.n_symbols, plan.n_states, window_table(other, plan.m + plan.k), plan.m)
        carried = {"plan": plan.to_dict()}
    elif other.partial:  # on legal words the windows are those of the states legally reachable from the start
        depth, _ = definite_depth(other)
        if depth is None or depth > plan.k:
            raise InputError(f"from {start!r} the last {plan.k} legal letters no longer decide the state of {a.name} "
                             f"(this lookback model's shape); compile the spec again with that start")
        plan = LookbackPlan(plan.k, plan.n_symbols, plan.n_states, window_table(other, plan.k))
        carried = {"plan": plan.to_dict()}
    rebuild(model, build, plan, start, meta=carried)


# ---------------------------------------------------------------------------------------
# the registry entry: the window table is the plan


def applies(automaton: Semiautomaton) -> LookbackPlan | Refusal:
    """The window table of the smallest k, or why lookback does not apply."""
    plan, reason = detect(automaton)
    if plan is None:
        return Refusal(f"lookback needs a k-definite automaton, or one whose first m and last k letters decide the "
                       f"state (k, m + k <= {MAX_LOOKBACK}, a small window table): {reason}")
    return plan


def estimate(plan: LookbackPlan, max_len: int, positions: str = "sinusoidal") -> Cost:
    """One attention layer; the exact parameter count of the assembled model."""
    return Cost(1, _check_budget(plan, max_len, positions, MAX_PARAMS)["params_estimate"])


def describe(plan: LookbackPlan, automaton: Semiautomaton) -> str:
    if plan.m:
        return (f"generalised definite: the state is a function of the first {plan.m} and the last {plan.k} "
                f"letters ({len(plan.windows)} windows), or of q0 and the letters so far before {plan.m + plan.k}")
    return (f"{plan.k}-definite: the state is a function of the last {plan.k} letter{'s' * (plan.k > 1)} "
            f"({len(plan.windows)} windows), or of q0 and the letters so far before that")


CONSTRUCTION = Construction(
    name=NAME, theorem="k-definite automata", applies=applies, estimate=estimate, build=build,
    set_start=set_start, plan_to_json=LookbackPlan.to_dict, plan_from_json=LookbackPlan.from_dict,
    describe=describe, obligations=declared_obligations(build),
)
