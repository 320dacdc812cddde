"""spec -> plan -> program -> assembled model.

The planner walks the construction registry (``constructions/registry.py``): each
construction inspects the automaton once and returns a typed plan or a refusal, and
estimates the plan's exact cost (attention layers, parameters) at the requested max_len.
``auto`` takes, among those that fit the budgets, the fewest layers then the fewest
parameters (``prefer="size"``: the fewest parameters within one layer of the shallowest);
the plan is built, assembled, and carried in the checkpoint (``meta["plan"]``), beside
every candidate (``meta["candidates"]``).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import torch

from constructions import registry
from constructions.assemble import assemble, program_params
from constructions.basis import BASES, ORTHOGONAL, basis_of, check_seed
from constructions.rotate import rotate
from constructions.budget import MAX_PARAMS
from constructions.checkpoint import header_intact, stamp_header
from constructions.construction import Construction, Refusal
from constructions.labels import (
    LABELS,
    READOUTS,
    STATES,
    LabelReadoutError,
    label_halfspaces,
    label_lookup,
    label_unembedding,
    readout_of,
)
from constructions.positions import KINDS

from .automata.errors import BudgetError, CheckpointError, PrecisionError, ShortcutError
from .automata.load import load_spec
from .automata.moore import Minimised, labelling, minimise
from .automata.representation import natural
from .automata.spec import Semiautomaton

AUTO = "auto"
DTYPES = {"float32": torch.float32, "float64": torch.float64}
MAX_LEN_LIMIT = 1 << 20


def methods() -> list[str]:
    """``auto`` and every registered construction, in preference order."""
    return [AUTO, *registry.names()]


PREFERENCES = ("depth", "size")
"""What ``auto`` minimises: ``depth`` -- the fewest attention layers, then the fewest parameters;
``size`` -- the fewest parameters among those at most one layer deeper than the shallowest."""


@dataclass
class Candidate:
    """One construction as the planner saw it (stored in ``meta["candidates"]``).

    ``applies``: its analysis found a plan; ``layers``/``params``: the plan's exact estimate at
    the requested max_len (None when it does not apply or its estimate refused); ``refusal``:
    why it cannot be used (does not apply, over a budget), None when it fits; ``fits``: applies
    and fits every budget; ``chosen``: the one compiled; ``note``: why it was or was not taken."""

    name: str
    theorem: str = ""
    applies: bool = False
    layers: int | None = None
    params: int | None = None
    refusal: str | None = None
    fits: bool = False
    chosen: bool = False
    note: str = ""


@dataclass
class Decision:
    """The construction chosen, its plan, why, every candidate, and (when building was part
    of deciding) the program already built."""

    construction: Construction
    plan: Any
    why: str
    candidates: list[Candidate] = field(default_factory=list)
    built: tuple | None = None

    @property
    def method(self) -> str:
        return self.construction.name

    @property
    def chosen(self) -> Candidate:
        return next(c for c in self.candidates if c.chosen)


def _assess(automaton: Semiautomaton, c: Construction, max_len: int, positions: str,
            max_params: int) -> tuple[Candidate, Any, type[ShortcutError] | None]:
    """One construction's candidate: its plan and exact cost, or why it does not apply or fit
    (with the error class to raise when it was asked for)."""
    cand = Candidate(c.name, c.theorem)
    plan = c.applies(automaton)
    if isinstance(plan, Refusal):
        cand.refusal = plan.reason
        return cand, None, plan.error
    cand.applies = True
    try:
        cost = c.estimate(plan, max_len, positions)
    except ShortcutError as e:
        cand.refusal = str(e)
        return cand, plan, type(e)
    cand.layers, cand.params = cost.layers, cost.params
    if cost.params > max_params:
        cand.refusal = (f"{cost.params:,} parameters at max_len {max_len}, over the budget of {max_params:,}")
        return cand, plan, BudgetError
    cand.fits = True
    return cand, plan, None


def survey(automaton: Semiautomaton, max_len: int, positions: str = "sinusoidal",
           max_params: int = MAX_PARAMS) -> tuple[list[Candidate], dict[str, Any], dict[str, type[ShortcutError]]]:
    """Every registered construction, in registry order: its candidate (exact estimate or
    refusal), its plan (by name, where it applies) and the error class of each refusal."""
    cands, plans, errors = [], {}, {}
    for c in registry.entries():
        cand, plan, error = _assess(automaton, c, max_len, positions, max_params)
        cands.append(cand)
        if plan is not None:
            plans[c.name] = plan
        if error is not None:
            errors[c.name] = error
    return cands, plans, errors


def ranking(cands: list[Candidate], prefer: str = "depth") -> list[Candidate]:
    """The candidates that fit, best first.  ``depth``: fewest attention layers, then fewest
    parameters, then registry order.  ``size``: among those at most one layer deeper than the
    shallowest, fewest parameters (then fewer layers, registry order); the rest after them, by depth."""
    order = {id(c): i for i, c in enumerate(cands)}
    fits = [c for c in cands if c.fits]
    by_depth = sorted(fits, key=lambda c: (c.layers, c.params, order[id(c)]))
    if prefer == "depth" or not fits:
        return by_depth
    near = by_depth[0].layers + 1
    pool = sorted((c for c in fits if c.layers <= near), key=lambda c: (c.params, c.layers, order[id(c)]))
    return pool + [c for c in by_depth if c.layers > near]


def _note(c: Candidate, best: Candidate, prefer: str, shallowest: int) -> str:
    """Why a candidate that fits was not taken (beside the chosen ``best``)."""
    if prefer == "size" and c.layers > shallowest + 1:
        return f"{c.layers} layers: more than one deeper than the shallowest ({shallowest})"
    if prefer == "size" and c.params != best.params:
        return f"{c.params:,} parameters, {best.name} {best.params:,}"
    if c.layers != best.layers:
        return f"{c.layers} attention layers, {best.name} {best.layers}"
    if c.params != best.params:
        return f"as deep as {best.name}, {c.params:,} parameters against {best.params:,}"
    return f"ties with {best.name}, which comes first in the registry"


def _cost_text(c: Candidate, max_len: int) -> str:
    return f"{c.layers} attention layer{'s' * (c.layers != 1)}, {c.params:,} parameters at max_len {max_len}"


def _auto(automaton: Semiautomaton, max_len: int, eps: float, positions: str, prefer: str,
          max_params: int, certified: bool = False) -> Decision:
    """Every construction estimated (:func:`survey`); the best that fits (:func:`ranking`) is built.
    A build that fails (an estimate that missed a budget: a bug, reported in the candidates)
    falls through to the next, and so does, when ``certified``, a build beyond its certified
    float reach (:func:`_beyond_reach`).  Nothing fits: an error naming every construction's reason."""
    cands, plans, errors = survey(automaton, max_len, positions, max_params)
    return _take(automaton, cands, plans, errors, max_len, eps, positions, prefer, certified)


def _take(automaton: Semiautomaton, cands: list[Candidate], plans: dict[str, Any],
          errors: dict[str, type[ShortcutError]], max_len: int, eps: float, positions: str, prefer: str,
          certified: bool = False) -> Decision:
    """:func:`_auto` after the survey: build the best candidate that fits, or refuse naming every reason.
    Candidates are built in the planner's order until one is taken (at a max_len beyond one
    construction's reach, building them all costs gigabytes).  With ``certified``, a build whose
    worst-case rounding bound is beyond its tolerance (its precision warnings) does not fit and
    the next is tried; if none is left, the first such build's :class:`PrecisionError` is raised."""
    ranked = ranking(cands, prefer)
    beyond: PrecisionError | None = None
    for cand in ranked:
        c = registry.get(cand.name)
        try:
            built = c.build(automaton, plans[c.name], max_len=max_len, eps=eps, positions=positions)
        except ShortcutError as e:
            cand.fits, cand.refusal = False, f"estimated, but the build failed: {e}"
            errors[c.name] = type(e)
            continue
        if certified and built[1].get("warnings"):
            cand.fits, cand.refusal = False, f"beyond its certified float reach: {built[1]['warnings'][0]}"
            errors[c.name] = PrecisionError
            beyond = beyond or PrecisionError(_reach_text(automaton, c, built[1], max_len, eps))
            continue
        cand.chosen = True
        shallowest = min(x.layers for x in cands if x.fits)
        for x in cands:
            if x.fits and not x.chosen:
                x.note = _note(x, cand, prefer, shallowest)
        cand.note = ("the fewest attention layers, then parameters" if prefer == "depth" else
                     "prefer size: the fewest parameters within one layer of the shallowest")
        passed = "".join(f"; not {x.name}: {x.refusal or x.note}" for x in cands if not x.chosen)
        why = (f"auto: {c.name} ({c.theorem}): {c.describe(plans[c.name], automaton)}; "
               f"{_cost_text(cand, max_len)} ({cand.note}){passed}")
        return Decision(c, plans[c.name], why, cands, built)
    if beyond is not None:
        raise beyond
    reasons = "; ".join(f"{x.name}: {x.refusal}" for x in cands)
    error = BudgetError if BudgetError in errors.values() else ShortcutError
    raise error(f"no construction compiles {automaton.name} at max_len {max_len}: {reasons}")


def _requested(automaton: Semiautomaton, c: Construction, max_len: int, positions: str, max_params: int) -> Decision:
    """``--method NAME``: that construction, or its refusal as the error."""
    cand, plan, error = _assess(automaton, c, max_len, positions, max_params)
    if error is not None:
        raise error(cand.refusal)
    cand.chosen, cand.note = True, f"requested with --method {c.name}"
    return Decision(c, plan, f"requested with --method {c.name}: {c.describe(plan, automaton)}", [cand])


def _check_options(method: str, prefer: str, max_params: int) -> None:
    if method not in methods():
        raise ShortcutError(f"unknown method {method!r}; choose one of {methods()}")
    if prefer not in PREFERENCES:
        raise ShortcutError(f"unknown preference {prefer!r}; choose one of {list(PREFERENCES)}")
    if not isinstance(max_params, int) or isinstance(max_params, bool) or not 1 <= max_params <= MAX_PARAMS:
        raise ShortcutError(f"max_params must be an integer from 1 to {MAX_PARAMS:,}, got {max_params!r}")


def decide(automaton: Semiautomaton, method: str, max_len: int = 128, eps: float = 2.0**-23,
           positions: str = "sinusoidal", prefer: str = "depth", max_params: int = MAX_PARAMS,
           certified: bool = False) -> Decision:
    """Which construction compiles ``automaton``, with which plan (see :func:`_auto`; ``certified``:
    ``auto`` passes over builds beyond their certified float reach)."""
    _check_options(method, prefer, max_params)
    if method == AUTO:
        return _auto(automaton, max_len, eps, positions, prefer, max_params, certified)
    return _requested(automaton, registry.get(method), max_len, positions, max_params)


def plan(automaton: Semiautomaton, method: str, max_len: int = 128, prefer: str = "depth") -> tuple[str, str]:
    """The construction to use and why (see :func:`decide`)."""
    d = decide(automaton, method, max_len, prefer=prefer)
    return d.method, d.why


def candidates(automaton, *, max_len: int, prefer: str = "depth", positions: str = "sinusoidal",
               max_params: int = MAX_PARAMS, complete: bool = False, dtype: torch.dtype = torch.float32,
               allow_inexact: bool = True, promise: str | None = None) -> dict[str, Any]:
    """``shortcut plan``: every construction's candidate (exact estimate, or why not) and what
    ``auto`` would compile with these options -- building no model, only the program of the one
    it takes (JSON-able: ``automaton``, ``max_len``, ``prefer``, ``max_params``, ``candidates``,
    ``chosen``, ``why`` or ``error``)."""
    automaton = load_spec(automaton, complete=complete, promise=promise)
    _check_max_len(max_len)
    _check_options(AUTO, prefer, max_params)
    if dtype not in DTYPES.values():
        raise ShortcutError(f"dtype must be one of {list(DTYPES)}, got {dtype}")
    out: dict[str, Any] = {"automaton": automaton.name, "max_len": max_len, "prefer": prefer, "max_params": max_params,
                           "promise": promise_meta(automaton.to_dict())}
    cands, plans, errors = survey(automaton, max_len, positions, max_params)
    try:
        d = _take(automaton, cands, plans, errors, max_len, torch.finfo(dtype).eps, positions, prefer,
                  certified=not allow_inexact)
    except ShortcutError as e:
        return {**out, "candidates": [asdict(x) for x in cands], "chosen": None, "why": None, "error": str(e)}
    return {**out, "candidates": [asdict(x) for x in d.candidates], "chosen": d.method, "why": d.why, "error": None}


def _check_max_len(max_len) -> None:
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
        raise ShortcutError(f"max_len must be a positive integer, got {max_len!r}")
    if max_len > MAX_LEN_LIMIT:
        raise ShortcutError(f"max_len {max_len} is above the supported limit {MAX_LEN_LIMIT}")


def compile_automaton(automaton, *, max_len: int, method: str = "auto", dtype: torch.dtype = torch.float32,
                      positions: str = "sinusoidal", allow_inexact: bool = True, complete: bool = False,
                      readout: str = STATES, prefer: str = "depth", max_params: int = MAX_PARAMS,
                      basis: str = "standard", basis_seed: int = 0, promise: str | None = None):
    """Compile ``automaton`` (a Semiautomaton, dict, JSON path, catalog name or automata-lib DFA)
    to a :class:`constructions.model.CompiledTransformer` that simulates it for inputs up to ``max_len``.

    The construction's precision warnings (``meta["warnings"]``: its worst-case rounding bound
    exceeds a tolerance at this max_len and dtype) raise :class:`PrecisionError` unless
    ``allow_inexact`` (the library default; the CLI refuses unless ``--allow-inexact``).
    ``complete`` adds a sink state to a partial automaton, ``promise="legal"`` compiles it for legal
    inputs only (see ``load_spec``; ``meta["promise"]`` records it, docs/promises.md).  ``prefer``
    (``depth`` or ``size``, see :data:`PREFERENCES`) and ``max_params`` (the parameter budget)
    steer ``auto``; ``meta["candidates"]`` records every construction's estimate or refusal.
    ``readout="labels"`` (the automaton must have outputs): the argmax is the output label; the
    minimal Moore machine or the automaton itself is compiled, whichever the planner prefers
    (see :func:`_label_compile`).  ``basis="orthogonal"``: the model is then expressed in the
    random orthogonal basis drawn from ``basis_seed`` (:func:`constructions.basis.rotate`)."""
    automaton = load_spec(automaton, complete=complete, promise=promise)
    if readout not in READOUTS:
        raise ShortcutError(f"unknown readout {readout!r}; choose one of {list(READOUTS)}")
    if basis not in BASES:
        raise ShortcutError(f"unknown basis {basis!r}; choose one of {list(BASES)}")
    check_seed(basis_seed)
    _check_max_len(max_len)
    if dtype not in DTYPES.values():
        raise ShortcutError(f"dtype must be one of {list(DTYPES)}, got {dtype}")
    if positions not in KINDS:
        raise ShortcutError(f"unknown positions {positions!r}; choose one of {list(KINDS)}")
    eps = torch.finfo(dtype).eps
    if readout == LABELS:
        model = _label_compile(automaton, method, max_len, dtype, eps, positions, allow_inexact, prefer, max_params)
    else:
        model = _state_compile(automaton, method, max_len, dtype, eps, positions, allow_inexact, prefer, max_params)
    return rotate(model, basis_seed) if basis == ORTHOGONAL else model


def _state_compile(automaton: Semiautomaton, method: str, max_len: int, dtype: torch.dtype, eps: float,
                   positions: str, allow_inexact: bool, prefer: str, max_params: int):
    """A state model: the planner's decision built, assembled, its estimate checked, its header stamped."""
    d = decide(automaton, method, max_len, eps, positions, prefer, max_params, certified=not allow_inexact)
    program, meta = d.built or d.construction.build(automaton, d.plan, max_len=max_len, eps=eps, positions=positions)
    if not allow_inexact:
        _beyond_reach(automaton, d.construction, meta, max_len, dtype)
    model = _assemble(automaton, d, program, meta, method, max_len, dtype)
    _check_estimate(d.chosen, model)
    stamp_header(model)
    return model


def _assemble(automaton: Semiautomaton, d: Decision, program, meta: dict[str, Any], method: str, max_len: int,
              dtype: torch.dtype, readout: dict[str, Any] | None = None):
    """The model of ``program`` with its metadata (spec, why, plan, candidates, and a label readout's)."""
    c = d.construction
    meta = {"automaton": automaton.to_dict(), "why": d.why, "requested_method": method, **meta,
            "method": c.name, "plan": c.plan_to_json(d.plan), "candidates": [asdict(x) for x in d.candidates]}
    if readout is not None:
        meta["readout"] = readout
    promised = promise_meta(readout["source"] if readout is not None else meta["automaton"])
    if promised is not None:
        meta["promise"] = promised
    return assemble(program, max_len=max_len, dtype=dtype, meta=meta)


def promise_meta(spec: dict[str, Any]) -> dict[str, Any] | None:
    """``meta["promise"]`` for the automaton the user gave (its canonical spec): None when it is
    complete; else the promise, how many transitions it leaves undefined, and what that means."""
    if spec.get("promise") is None:
        return None
    given = sum(len(row) for row in spec["transitions"].values())
    undefined = len(spec["states"]) * len(spec["alphabet"]) - given
    return {"kind": spec["promise"], "undefined": undefined,
            "text": f"exact on legal inputs only: {undefined} transitions are undefined and promised never taken; "
                    f"elsewhere the output is unspecified, and run refuses such inputs"}


QUOTIENT, ORIGINAL = "quotient", "original"
"""Which automaton a label model's states are (``meta["readout"]["states"]``): the minimal Moore
machine, or the automaton as given with each of its states mapped to its label."""


@dataclass
class _LabelVariant:
    """One way to read labels: ``states`` (QUOTIENT or ORIGINAL) compiled and assembled."""

    states: str
    automaton: Semiautomaton
    model: Any
    layers: int
    params: int


def _label_compile(source: Semiautomaton, method: str, max_len: int, dtype: torch.dtype, eps: float,
                   positions: str, allow_inexact: bool, prefer: str, max_params: int):
    """A label model (``readout="labels"``): the better of two, by the planner's rule (:func:`ranking`).

    * the minimal Moore machine compiled, labels read from its states (:func:`_label_model`);
    * the automaton as given, compiled as for a state readout (the construction ``method``
      gives it, ``auto``'s pick included), each of its states read as its label (:func:`_label_readout`).

    Never more parameters than the state model when one of the two has no more: the state
    model is the second's construction at the same options, and a label readout on top of it
    scores fewer outputs (linear), or adds an exact lookup (then both are compared as built).
    ``meta["readout"]`` records which was taken, its state -> label map, both sizes and why."""
    m = minimise(source)
    labels, state_label = labelling(source, m)
    variants: list[_LabelVariant] = []
    refused: dict[str, str] = {}
    state_params: int | None = None
    first_error: ShortcutError | None = None
    try:  # the state model's decision: its size bounds the label model's, and the second variant reuses it
        state_decision: Decision | ShortcutError = decide(source, method, max_len, eps, positions, prefer, max_params,
                                                          certified=not allow_inexact)
        state_params = state_decision.chosen.params
    except ShortcutError as e:
        state_decision = e
    for states in (QUOTIENT, ORIGINAL):
        try:
            if states == QUOTIENT:
                a = m.quotient
                d = _quotient_decision(a, method, max_len, eps, positions, prefer, max_params, allow_inexact,
                                       state_params)
                program, meta = d.built or d.construction.build(a, d.plan, max_len=max_len, eps=eps, positions=positions)
                d, program, meta, notes = _label_model(d, program, meta, m, method, max_len, eps, positions, prefer)
                own = {"labels": list(m.labels), "state_label": list(m.state_label),
                       "classes": [list(c) for c in m.classes]}
            else:
                a = source
                if isinstance(state_decision, ShortcutError):
                    raise state_decision
                d = state_decision
                program, meta = d.built or d.construction.build(a, d.plan, max_len=max_len, eps=eps, positions=positions)
                notes = _label_readout(program, state_label, len(labels))
                d.why += f"; labels: read from its {a.n_states} states by {notes['form']}"
                own = {"labels": list(labels), "state_label": list(state_label)}
            if not allow_inexact:
                _beyond_reach(a, d.construction, meta, max_len, dtype)
        except ShortcutError as e:
            refused[states] = str(e)
            first_error = first_error or e
            continue
        readout = {"kind": LABELS, "states": states, **own, "states_before": m.states_before,
                   "reachable": m.reachable, "states_after": m.states_after, "form": notes["form"],
                   "notes": notes, "source": source.to_dict()}
        model = _assemble(a, d, program, meta, method, max_len, dtype, readout)
        variants.append(_LabelVariant(states, a, model, len(model.config["blocks"]),
                                      sum(p.numel() for p in model.parameters())))
    if not variants:
        raise first_error
    best, why = _label_choice(variants, refused, state_params, prefer)
    best.model.meta["readout"]["why"] = why
    best.model.meta["readout"]["state_model_params"] = state_params
    best.model.meta["readout"]["variants"] = [{"states": v.states, "method": v.model.meta["method"],
                                               "layers": v.layers, "params": v.params} for v in variants]
    best.model.meta["why"] += f"; {why}"
    stamp_header(best.model)
    return best.model


def _quotient_decision(a: Semiautomaton, method: str, max_len: int, eps: float, positions: str, prefer: str,
                       max_params: int, allow_inexact: bool, state_params: int | None) -> Decision:
    """The planner's decision for the minimal Moore machine; under ``auto``, when its pick is
    estimated above the state model's parameters, the shallowest candidate within them instead
    (when there is one): a label model no larger than the state model is preferred to a shallower one."""
    d = decide(a, method, max_len, eps, positions, prefer, max_params, certified=not allow_inexact)
    if method == AUTO and state_params is not None and d.chosen.params > state_params:
        try:
            return decide(a, method, max_len, eps, positions, prefer, min(max_params, state_params),
                          certified=not allow_inexact)
        except ShortcutError:
            pass
    return d


def _label_choice(variants: list[_LabelVariant], refused: dict[str, str], state_params: int | None,
                  prefer: str) -> tuple[_LabelVariant, str]:
    """The variant the planner prefers (:func:`ranking`) among those with at most the state
    model's parameters (all of them when none has), and why, naming the other's size or refusal."""
    cands = [Candidate(v.states, applies=True, layers=v.layers, params=v.params, fits=True) for v in variants]
    within = [c for c in cands if state_params is None or c.params <= state_params]
    best = ranking(within or cands, prefer)[0]
    v = next(x for x in variants if x.states == best.name)
    text = {x.states: f"{x.model.meta['method']}, {x.layers} layers, {x.params:,} parameters" for x in variants}
    what = {QUOTIENT: f"the minimal Moore machine ({variants[0].model.meta['readout']['states_after']} states)",
            ORIGINAL: f"the automaton as given ({v.model.meta['readout']['states_before']} states)"}
    why = f"label readout on {what[v.states]}: {text[v.states]}"
    for other in (QUOTIENT, ORIGINAL):
        if other != v.states:
            why += f"; not {what[other]}: {text.get(other) or refused.get(other, '')}"
    if state_params is not None:
        why += (f"; the state model has {state_params:,} parameters" +
                ("" if v.params <= state_params else " (no label readout fits within it)"))
    return v, why


def _label_model(d: Decision, program, meta: dict[str, Any], m: Minimised, method: str, max_len: int, eps: float,
                 positions: str, prefer: str) -> tuple[Decision, Any, dict[str, Any], dict[str, Any]]:
    """Swap the state unembedding of the quotient's program for a label readout
    (:func:`_label_readout`: linear, else an exact lookup in the last MLP).  Under
    ``auto``, when the chosen construction's readout can carry the labels neither way, the other candidates that fit are tried in
    the planner's order (:func:`ranking`), and the last resort is given the natural action
    on the quotient's states, whose scalar code always can: the quotient orders its states by
    label, so each label is a run of consecutive codes."""
    a = m.quotient
    tried: list[str] = []
    attempt: tuple[Decision, Any, dict[str, Any]] | None = (d, program, meta)
    last = registry.entries()[-1]
    rest: list[Construction] = []
    if method == AUTO:
        ranked = [registry.get(x.name) for x in ranking(d.candidates, prefer)]
        rest = ranked[ranked.index(d.construction) + 1:]
        rest = [c for c in rest if c is not last] + [last]
    cands = d.candidates
    while True:
        if attempt is not None:
            d, program, meta = attempt
            try:
                notes = _label_readout(program, m.state_label, len(m.labels))
            except LabelReadoutError as e:
                if method != AUTO:
                    raise ShortcutError(f"--readout labels with --method {method}: {e}") from None
                tried.append(f"{d.method}: {e}")
            else:
                for x in cands:
                    x.chosen = x.name == d.method
                    if x.chosen and tried:
                        x.note = "the first candidate whose readout carries the labels"
                why = (f"{d.why}; labels: minimal Moore machine {m.states_before} -> {m.states_after} states, "
                       f"{len(m.labels)} labels read by {notes['form']}" + "".join(f"; not {t}" for t in tried))
                d = Decision(d.construction, d.plan, why, cands, d.built)
                return d, program, meta, notes
        if not rest:  # pragma: no cover - the natural action's scalar code always carries the labels
            raise AssertionError("no construction could read the labels: " + "; ".join(tried))
        c = rest.pop(0)
        attempt = _label_candidate(c, a, c is last, max_len, eps, positions)


def _label_readout(program, state_label, n_labels: int) -> dict[str, Any]:
    """Give ``program`` a label unembedding, in place: linear in its state readout
    (:func:`constructions.labels.label_unembedding`) where that can be, else the smaller model
    (:func:`constructions.assemble.program_params`) of linear in its state codes
    (:func:`constructions.labels.label_halfspaces`) and an exact lookup of the state codes in its
    last MLP (:func:`constructions.labels.label_lookup`: it can replace a wide last hidden layer's
    output rows by a narrower one, so it is sometimes the smaller);
    LabelReadoutError (program untouched) when neither fits this construction's readout."""
    try:
        program.W_U, program.b_U, notes = label_unembedding(program.W_U, program.b_U, state_label, n_labels)
        return notes
    except LabelReadoutError as linear:
        found, errors = [], [str(linear)]
        for read in (label_halfspaces, label_lookup):  # each on a copy; the smaller model is kept
            trial = copy.deepcopy(program)
            try:
                notes = read(trial, state_label, n_labels)
            except LabelReadoutError as e:
                errors.append(str(e))
                continue
            if notes is not None:
                found.append((program_params(trial), trial, notes))
        if not found:
            raise LabelReadoutError("; ".join(dict.fromkeys(errors))) from None
    _, best, notes = min(found, key=lambda f: f[0])  # the first of the smallest: halfspaces on a tie
    for f in fields(program):
        setattr(program, f.name, getattr(best, f.name))
    return notes


def _label_candidate(c: Construction, a: Semiautomaton, last: bool, max_len: int, eps: float,
                     positions: str) -> tuple[Decision, Any, dict[str, Any]] | None:
    """Construction ``c`` built on ``a`` for a label readout (the natural action when ``c`` is the
    last resort), or None when it refuses or breaks a budget."""
    if last:
        plan = natural(a)
        why = f"{c.name} ({c.theorem}) on the states, whose scalar code carries the labels: {c.describe(plan, a)}"
        return Decision(c, plan, why), *c.build(a, plan, max_len=max_len, eps=eps, positions=positions)
    plan = c.applies(a)
    if isinstance(plan, Refusal):
        return None
    try:
        built = c.build(a, plan, max_len=max_len, eps=eps, positions=positions)
    except ShortcutError:
        return None
    return Decision(c, plan, f"{c.name} ({c.theorem}): {c.describe(plan, a)}"), *built


def _dtype_name(eps: float) -> str:
    """The name (a key of DTYPES) of the float dtype whose machine epsilon is ``eps``."""
    return next(name for name, dt in DTYPES.items() if torch.finfo(dt).eps == eps)


def _reach_text(automaton: Semiautomaton, c: Construction, meta: dict[str, Any], max_len: int, eps: float) -> str:
    """Why a build (its precision warnings) is beyond its certified float reach, and what to do."""
    return (f"{automaton.name} at max_len {max_len} in {_dtype_name(eps)} is beyond the certified float reach "
            f"of {c.name}: {meta['warnings'][0]} -- use a smaller --max-len or --dtype float64, or pass "
            f"--allow-inexact")


def _beyond_reach(automaton: Semiautomaton, c: Construction, meta: dict[str, Any], max_len: int,
                  dtype: torch.dtype) -> None:
    """PrecisionError when the build's worst-case rounding bound is beyond a tolerance (its warnings)."""
    if meta.get("warnings"):
        raise PrecisionError(_reach_text(automaton, c, meta, max_len, torch.finfo(dtype).eps))


def _check_estimate(cand: Candidate, model) -> None:
    """The registry contract: a construction's estimate is the built model's exact depth and
    parameter count (the planner compares constructions by it); anything else is a bug."""
    built = (len(model.config["blocks"]), sum(p.numel() for p in model.parameters()))
    if built != (cand.layers, cand.params):
        raise AssertionError(f"{cand.name}'s estimate ({cand.layers} layers, {cand.params} parameters) differs from "
                             f"the model it built ({built[0]} layers, {built[1]} parameters); estimates must be exact")


def require_intact_header(model) -> tuple[Construction, Any]:
    """The model's construction and decoded plan, provided its header (config, spec, method,
    plan) still has the digest written at compile time; CheckpointError (bad input) when it
    was edited since -- verdicts and start changes are only meaningful for what was compiled."""
    c, p = registry.plan_of(model)
    if header_intact(model) is False:
        raise CheckpointError("this model's header (spec, method, plan, config or notes) was edited after compiling: it no "
                              "longer matches the digest written then; recompile it from the spec")
    return c, p


def set_start(model, start: str) -> None:
    """Point a compiled model at another start state, in place (through its construction
    and the plan its checkpoint carries; each keeps q0 in one place)."""
    c, p = require_intact_header(model)
    if basis_of(model.meta) is not None:
        raise ShortcutError("a model in a rotated basis keeps its start state: compile the spec again with --start's "
                            "state as its start, then rotate it")
    if readout_of(model.meta) is not None:
        raise ShortcutError("a label model reads the labels seen from the start state it was compiled with (its "
                            "readout records that start's minimal Moore machine); to read labels from another start, "
                            "compile the spec again with that start")
    c.set_start(model, p, start)
    if header_intact(model) is not None:
        stamp_header(model)


def with_start(model, start: str):
    """The same model read out from another start state (a copy)."""
    other = copy.deepcopy(model)
    set_start(other, start)
    return other
