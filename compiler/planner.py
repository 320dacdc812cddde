"""The planner: which construction compiles an automaton, with which plan, and why.

The planner walks the construction registry (``constructions/registry.py``): each
construction inspects the automaton once and returns a typed plan or a refusal, and
estimates the plan's exact cost (attention layers, parameters) at the requested max_len.
``auto`` takes, among those that fit the budgets, the fewest layers then the fewest
parameters (``prefer="size"``: the fewest parameters within one layer of the shallowest; in the
standard shape, :data:`SHAPES`, layers are standard blocks and each candidate's program is built to count them);
every candidate is recorded (``meta["candidates"]``).  :func:`build` and :func:`assemble_model`
turn a :class:`Decision` into a model (the pipeline's build and assemble stages).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from constructions import registry
from constructions.assemble import assemble, shape_config
from constructions.budget import MAX_PARAMS
from constructions.construction import ONE_HIDDEN_LAYER, BuildOptions, Construction, Refusal
from constructions.model import CompiledTransformer
from constructions.program import Program
from constructions.unfold import Exits, exits, unfolded_config

from .automata.errors import BudgetError, PrecisionError, ShortcutError
from .automata.promise import promise_text
from .automata.spec import Semiautomaton

AUTO = "auto"
DTYPES = {"float32": torch.float32, "float64": torch.float64}
MAX_LEN_LIMIT = 1 << 20


def methods() -> list[str]:
    """``auto`` and every registered construction, in preference order."""
    return [AUTO, *registry.names()]


DEFAULT, STANDARD = "default", "standard"
SHAPES = (DEFAULT, STANDARD)
"""The model's shape.  ``default``: each construction's own blocks (an attention layer and an MLP of
any number of hidden layers), costed in attention layers.  ``standard``: every block one attention
sublayer and one ReLU MLP with exactly one hidden layer (the shape SGD trains, TransformerLens's):
each construction builds its MLPs with one hidden layer where it can (``one_hidden_layer``), and what
remains deeper is unfolded into standard blocks (``constructions/unfold.py``); costed in standard blocks."""

PREFERENCES = ("depth", "size")
"""What ``auto`` minimises: ``depth`` -- the fewest attention layers, then the fewest parameters;
``size`` -- the fewest parameters among those at most one layer deeper than the shallowest."""


@dataclass
class Candidate:
    """One construction as the planner saw it (stored in ``meta["candidates"]``).

    ``applies``: its analysis found a plan; ``layers``/``params``: the plan's exact estimate at
    the requested max_len (attention layers; in the standard shape, standard blocks: :data:`SHAPES`;
    None when it does not apply or its estimate refused); ``refusal``:
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

    @property
    def size(self) -> tuple[int, int]:
        """(layers, params) of a candidate that applies and was estimated (the ones that fit)."""
        if self.layers is None or self.params is None:
            raise AssertionError(f"{self.name} was not estimated")
        return self.layers, self.params


@dataclass
class Decision:
    """The construction chosen, its plan, why, every candidate, and (when building was part
    of deciding) the program already built."""

    construction: Construction
    plan: Any
    why: str
    candidates: list[Candidate] = field(default_factory=list)
    built: tuple | None = None
    shape: str = DEFAULT

    @property
    def method(self) -> str:
        return self.construction.name

    @property
    def chosen(self) -> Candidate:
        return next(c for c in self.candidates if c.chosen)


def standard_build(automaton: Semiautomaton, c: Construction, plan: Any,
                   options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """A construction's program for the standard shape: built with one hidden layer per MLP where it
    can (``one_hidden_layer``); where that build is beyond its certified float reach (a warning the
    default build does not have), the default build, whose deeper MLPs :func:`standard_shape` unfolds."""
    flat = c.build(automaton, plan, replace(options, one_hidden_layer=True))
    if not flat[1].get(ONE_HIDDEN_LAYER) or not flat[1].get("warnings"):
        return flat
    default = c.build(automaton, plan, replace(options, one_hidden_layer=False))
    return flat if default[1].get("warnings") else default


def standard_shape(program: Program, meta: dict[str, Any], max_len: int) -> dict[str, Any]:
    """``meta["shape"]`` of a standard-shape program: its config unfolded (``unfolded_config``: the
    standard blocks and their parameters, exact), whether its MLPs were built with one hidden layer,
    and each MLP deeper than one hidden layer (its block, name and depth), which unfolding turns into
    that many blocks; the unfolding's early exits (``constructions.unfold.exits``) read off the MLPs'
    weights in the residual width."""
    dense = [None if b.mlp is None else b.mlp.embed(program.workspace) for b in program.blocks]
    config = shape_config(program.workspace, program.blocks, n_symbols=program.W_E.shape[0] - 1,
                          n_out=program.W_U.shape[1], max_len=max_len, mlps=dense)
    deep = [{"layer": l, "mlp": b.mlp.name, "hidden_layers": len(cb.mlp_hidden)}
            for l, (b, cb) in enumerate(zip(program.blocks, config.blocks))
            if b.mlp is not None and len(cb.mlp_hidden) > 1]
    unfolded = unfolded_config(config, [Exits.none(()) if m is None else exits(list(zip(m.weights, m.biases)))
                                        for m in dense])
    return {"name": STANDARD, "one_hidden_layer": bool(meta.get(ONE_HIDDEN_LAYER)), "unfolded": deep,
            "blocks": len(unfolded.blocks), "params": unfolded.n_params()}


def _standard_cost(automaton: Semiautomaton, c: Construction, plan: Any, options: BuildOptions,
                   cand: Candidate) -> type[ShortcutError] | None:
    """Replace ``cand``'s cost by its standard-shape cost (standard blocks, parameters; exact: read
    off the program it builds, :func:`standard_shape`), or refuse it (the build's error)."""
    try:
        shape = standard_shape(*standard_build(automaton, c, plan, options), options.max_len)
    except ShortcutError as e:
        cand.layers = cand.params = None
        cand.refusal = f"in the standard shape: {e}"
        return type(e)
    cand.layers, cand.params = shape["blocks"], shape["params"]
    return None


def _assess(automaton: Semiautomaton, c: Construction, max_len: int, positions: str,
            max_params: int, shape: str = DEFAULT, eps: float = 2.0**-23,
            plan: Any = None) -> tuple[Candidate, Any, type[ShortcutError] | None]:
    """One construction's candidate: its plan (``plan``: already analysed) and exact cost (in ``shape``),
    or why it does not apply or fit (with the error class to raise when it was asked for)."""
    cand = Candidate(c.name, c.theorem)
    plan = c.applies(automaton) if plan is None else plan
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
    if cost.params <= max_params and shape == STANDARD:
        error = _standard_cost(automaton, c, plan, BuildOptions(max_len, eps, positions, max_params), cand)
        if error is not None:
            return cand, plan, error
    if cand.params > max_params:
        where = " in the standard shape" if shape == STANDARD else ""
        cand.refusal = f"{cand.params:,} parameters{where} at max_len {max_len}, over the budget of {max_params:,}"
        return cand, plan, BudgetError
    cand.fits = True
    return cand, plan, None


class Skipped(ShortcutError):
    """A candidate ``auto`` did not estimate: the floor of its layers (``Construction.floor``) is deeper
    than its rule can pick (:func:`survey`); estimated in full when a build fails (:func:`take_best`)."""


def survey(automaton: Semiautomaton, max_len: int, positions: str = "sinusoidal", max_params: int = MAX_PARAMS,
           shape: str = DEFAULT, eps: float = 2.0**-23,
           prefer: str | None = None) -> tuple[list[Candidate], dict[str, Any], dict[str, type[ShortcutError]]]:
    """Every registered construction, in registry order: its candidate (exact estimate or
    refusal, in ``shape``: the standard shape builds each program to count it), its plan (by name,
    where it applies) and the error class of each refusal.  With ``prefer`` (auto's rule), a construction
    with a ``floor`` is estimated after the others, and not at all (a :class:`Skipped` refusal) when its
    floor is deeper than that rule can pick (:func:`_pickable`): the pick is the one a full survey gives."""
    cands: list[Candidate] = []
    plans: dict[str, Any] = {}
    errors: dict[str, type[ShortcutError]] = {}
    deferred = []
    for c in registry.entries():
        plan = c.applies(automaton) if prefer is not None and c.floor is not None else None
        if plan is not None and not isinstance(plan, Refusal):
            deferred.append((len(cands), c, plan))
            cands.append(Candidate(c.name, c.theorem))
            continue
        cand, plan, error = _assess(automaton, c, max_len, positions, max_params, shape, eps, plan)
        _record(cands, plans, errors, len(cands), cand, plan, error)
    for i, c, plan in deferred:
        depth = _pickable(cands, prefer)
        floor = c.floor(plan) if c.floor is not None else 0
        if depth is not None and floor > depth:
            plans[c.name] = plan
            errors[c.name] = Skipped
            cands[i] = Candidate(c.name, c.theorem, applies=True, refusal=(
                f"skipped: at least {floor} layers (its floor), and auto ({prefer}) picks among at most {depth}"))
            continue
        _record(cands, plans, errors, i, *_assess(automaton, c, max_len, positions, max_params, shape, eps, plan))
    return cands, plans, errors


def _record(cands: list[Candidate], plans: dict[str, Any], errors: dict[str, type[ShortcutError]], i: int,
            cand: Candidate, plan: Any, error: type[ShortcutError] | None) -> None:
    """Put a construction's candidate at ``i`` (appended at the end), its plan and its error class."""
    if i == len(cands):
        cands.append(cand)
    else:
        cands[i] = cand
    if plan is not None:
        plans[cand.name] = plan
    if error is not None:
        errors[cand.name] = error


def _pickable(cands: list[Candidate], prefer: str | None) -> int | None:
    """The most layers a candidate may have and still be ranked first by ``prefer`` (:func:`ranking`)
    beside those that fit so far: ``depth``, the shallowest's; ``size``, one more (None: no bound yet)."""
    fits = [c.size[0] for c in cands if c.fits]
    if prefer is None or not fits:
        return None
    return min(fits) + (1 if prefer == "size" else 0)


def unskip(automaton: Semiautomaton, cands: list[Candidate], plans: dict[str, Any],
           errors: dict[str, type[ShortcutError]], max_len: int, positions: str, max_params: int,
           shape: str = DEFAULT, eps: float = 2.0**-23) -> bool:
    """Estimate in full, in place, the candidates :func:`survey` skipped (a build that failed may leave
    one of them first); whether there were any."""
    skipped = [i for i, c in enumerate(cands) if errors.get(c.name) is Skipped]
    for i in skipped:
        name = cands[i].name
        errors.pop(name)
        _record(cands, plans, errors, i,
                *_assess(automaton, registry.get(name), max_len, positions, max_params, shape, eps, plans.pop(name)))
    return bool(skipped)


def ranking(cands: list[Candidate], prefer: str = "depth") -> list[Candidate]:
    """The candidates that fit, best first.  ``depth``: fewest attention layers, then fewest
    parameters, then registry order.  ``size``: among those at most one layer deeper than the
    shallowest, fewest parameters (then fewer layers, registry order); the rest after them, by depth."""
    order = {id(c): i for i, c in enumerate(cands)}
    fits = [c for c in cands if c.fits]
    by_depth = sorted(fits, key=lambda c: (*c.size, order[id(c)]))
    if prefer == "depth" or not fits:
        return by_depth
    near = by_depth[0].size[0] + 1
    pool = sorted((c for c in fits if c.size[0] <= near), key=lambda c: (c.size[1], c.size[0], order[id(c)]))
    return pool + [c for c in by_depth if c.size[0] > near]


def _unit(shape: str) -> str:
    """What a candidate's ``layers`` counts in ``shape``."""
    return "standard blocks" if shape == STANDARD else "attention layers"


def _note(c: Candidate, best: Candidate, prefer: str, shallowest: int, shape: str = DEFAULT) -> str:
    """Why a candidate that fits was not taken (beside the chosen ``best``)."""
    if prefer == "size" and c.size[0] > shallowest + 1:
        return f"{c.layers} layers: more than one deeper than the shallowest ({shallowest})"
    if prefer == "size" and c.params != best.params:
        return f"{c.params:,} parameters, {best.name} {best.params:,}"
    if c.layers != best.layers:
        return f"{c.layers} {_unit(shape)}, {best.name} {best.layers}"
    if c.params != best.params:
        return f"as deep as {best.name}, {c.params:,} parameters against {best.params:,}"
    return f"ties with {best.name}, which comes first in the registry"


def _cost_text(c: Candidate, max_len: int, shape: str = DEFAULT) -> str:
    unit = _unit(shape)[:-1] + "s" * (c.layers != 1)
    return f"{c.layers} {unit}, {c.params:,} parameters at max_len {max_len}"


def _auto(automaton: Semiautomaton, max_len: int, eps: float, positions: str, prefer: str,
          max_params: int, certified: bool = False, shape: str = DEFAULT) -> Decision:
    """Every construction estimated (:func:`survey`); the best that fits (:func:`ranking`) is built.
    A build that fails (an estimate that missed a budget: a bug, reported in the candidates)
    falls through to the next, and so does, when ``certified``, a build beyond its certified
    float reach (:func:`beyond_reach`).  Nothing fits: an error naming every construction's reason."""
    cands, plans, errors = survey(automaton, max_len, positions, max_params, shape, eps, prefer)
    return take_best(automaton, cands, plans, errors, max_len, eps, positions, prefer, certified, shape, max_params)


def _build(automaton: Semiautomaton, c: Construction, plan: Any, options: BuildOptions,
           shape: str) -> tuple[Program, dict[str, Any]]:
    """The program a candidate compiles to in ``shape`` (:func:`standard_build` in the standard shape)."""
    return standard_build(automaton, c, plan, options) if shape == STANDARD else c.build(automaton, plan, options)


def take_best(automaton: Semiautomaton, cands: list[Candidate], plans: dict[str, Any],
              errors: dict[str, type[ShortcutError]], max_len: int, eps: float, positions: str, prefer: str,
              certified: bool = False, shape: str = DEFAULT, max_params: int = MAX_PARAMS) -> Decision:
    """:func:`_auto` after the survey: build the best candidate that fits, or refuse naming every reason.
    Candidates are built in the planner's order until one is taken (at a max_len beyond one
    construction's reach, building them all costs gigabytes); after a build that fails, those the survey
    skipped are estimated in full (:func:`unskip`) and ranked with the rest.  With ``certified``, a build
    whose worst-case rounding bound is beyond its tolerance (its precision warnings) does not fit and
    the next is tried; if none is left, the first such build's :class:`PrecisionError` is raised."""
    ranked = ranking(cands, prefer)
    beyond: PrecisionError | None = None
    while ranked:
        cand = ranked.pop(0)
        c = registry.get(cand.name)
        try:
            built = _build(automaton, c, plans[c.name], BuildOptions(max_len, eps, positions), shape)
        except ShortcutError as e:
            cand.fits, cand.refusal = False, f"estimated, but the build failed: {e}"
            errors[c.name] = type(e)
        else:
            if not (certified and built[1].get("warnings")):
                return _taken(automaton, c, cand, cands, plans, built, max_len, prefer, shape)
            cand.fits, cand.refusal = False, f"beyond its certified float reach: {built[1]['warnings'][0]}"
            errors[c.name] = PrecisionError
            beyond = beyond or PrecisionError(_reach_text(automaton, c, built[1], max_len, eps))
        if unskip(automaton, cands, plans, errors, max_len, positions, max_params, shape, eps):
            ranked = ranking(cands, prefer)
    if beyond is not None:
        raise beyond
    reasons = "; ".join(f"{x.name}: {x.refusal}" for x in cands)
    error = BudgetError if BudgetError in errors.values() else ShortcutError
    raise error(f"no construction compiles {automaton.name} at max_len {max_len}: {reasons}")


def _taken(automaton: Semiautomaton, c: Construction, cand: Candidate, cands: list[Candidate],
           plans: dict[str, Any], built: tuple, max_len: int, prefer: str, shape: str) -> Decision:
    """The decision for ``cand`` (built): every other candidate's note, and auto's why."""
    cand.chosen = True
    shallowest = min(x.size[0] for x in cands if x.fits)
    for x in cands:
        if x.fits and not x.chosen:
            x.note = _note(x, cand, prefer, shallowest, shape)
    cand.note = (f"the fewest {_unit(shape)}, then parameters" if prefer == "depth" else
                 "prefer size: the fewest parameters within one layer of the shallowest")
    passed = "".join(f"; not {x.name}: {x.refusal or x.note}" for x in cands if not x.chosen)
    why = (f"auto: {c.name} ({c.theorem}): {c.describe(plans[c.name], automaton)}; "
           f"{_cost_text(cand, max_len, shape)} ({cand.note}){passed}")
    return Decision(c, plans[c.name], why, cands, built, shape)


def _requested(automaton: Semiautomaton, c: Construction, max_len: int, positions: str, max_params: int,
               shape: str = DEFAULT, eps: float = 2.0**-23) -> Decision:
    """``--method NAME``: that construction, or its refusal as the error."""
    cand, plan, error = _assess(automaton, c, max_len, positions, max_params, shape, eps)
    if error is not None:
        raise error(cand.refusal)
    cand.chosen, cand.note = True, f"requested with --method {c.name}"
    return Decision(c, plan, f"requested with --method {c.name}: {c.describe(plan, automaton)}", [cand], shape=shape)


def check_options(method: str, prefer: str, max_params: int, shape: str = DEFAULT) -> None:
    if method not in methods():
        raise ShortcutError(f"unknown method {method!r}; choose one of {methods()}")
    if prefer not in PREFERENCES:
        raise ShortcutError(f"unknown preference {prefer!r}; choose one of {list(PREFERENCES)}")
    if shape not in SHAPES:
        raise ShortcutError(f"unknown shape {shape!r}; choose one of {list(SHAPES)}")
    if not isinstance(max_params, int) or isinstance(max_params, bool) or not 1 <= max_params <= MAX_PARAMS:
        raise ShortcutError(f"max_params must be an integer from 1 to {MAX_PARAMS:,}, got {max_params!r}")


def decide(automaton: Semiautomaton, method: str, max_len: int = 128, eps: float = 2.0**-23,
           positions: str = "sinusoidal", prefer: str = "depth", max_params: int = MAX_PARAMS,
           certified: bool = False, shape: str = DEFAULT) -> Decision:
    """Which construction compiles ``automaton``, with which plan (see :func:`_auto`; ``certified``:
    ``auto`` passes over builds beyond their certified float reach; ``shape``: :data:`SHAPES`)."""
    check_options(method, prefer, max_params, shape)
    if method == AUTO:
        return _auto(automaton, max_len, eps, positions, prefer, max_params, certified, shape)
    return _requested(automaton, registry.get(method), max_len, positions, max_params, shape, eps)


def plan(automaton: Semiautomaton, method: str, max_len: int = 128, prefer: str = "depth") -> tuple[str, str]:
    """The construction to use and why (see :func:`decide`)."""
    d = decide(automaton, method, max_len, prefer=prefer)
    return d.method, d.why


def _dtype_name(eps: float) -> str:
    """The name (a key of DTYPES) of the float dtype whose machine epsilon is ``eps``."""
    return next(name for name, dt in DTYPES.items() if torch.finfo(dt).eps == eps)


def _reach_text(automaton: Semiautomaton, c: Construction, meta: dict[str, Any], max_len: int, eps: float) -> str:
    """Why a build (its precision warnings) is beyond its certified float reach, and what to do."""
    return (f"{automaton.name} at max_len {max_len} in {_dtype_name(eps)} is beyond the certified float reach "
            f"of {c.name}: {meta['warnings'][0]} -- use a smaller --max-len or --dtype float64, or pass "
            f"--allow-inexact")


def beyond_reach(automaton: Semiautomaton, c: Construction, meta: dict[str, Any], max_len: int,
                  dtype: torch.dtype) -> None:
    """PrecisionError when the build's worst-case rounding bound is beyond a tolerance (its warnings)."""
    if meta.get("warnings"):
        raise PrecisionError(_reach_text(automaton, c, meta, max_len, torch.finfo(dtype).eps))


@dataclass(frozen=True)
class CompileOptions:
    """A compile's options, checked (``compile_automaton``'s keywords but the spec's): the planner's
    method, max_len, dtype, positions, prefer and max_params, whether a build beyond its
    certified float reach is taken (``allow_inexact``), whether MLPs get one hidden layer where
    the construction can (``one_hidden_layer``, :class:`BuildOptions`) and the model's ``shape``
    (:data:`SHAPES`)."""

    method: str
    max_len: int
    dtype: torch.dtype = torch.float32
    positions: str = "sinusoidal"
    prefer: str = "depth"
    max_params: int = MAX_PARAMS
    allow_inexact: bool = True
    one_hidden_layer: bool = False
    shape: str = DEFAULT

    @property
    def eps(self) -> float:
        """The machine epsilon of the target dtype."""
        return float(torch.finfo(self.dtype).eps)

    @property
    def build(self) -> BuildOptions:
        """What a construction's build takes."""
        return BuildOptions(self.max_len, self.eps, self.positions, self.max_params, self.one_hidden_layer)

    def decide(self, automaton: Semiautomaton, max_params: int | None = None) -> Decision:
        """The planner's decision for ``automaton`` with these options (``max_params``: a tighter budget)."""
        return decide(automaton, self.method, self.max_len, self.eps, self.positions, self.prefer,
                      self.max_params if max_params is None else max_params, certified=not self.allow_inexact,
                      shape=self.shape)


def build(automaton: Semiautomaton, d: Decision, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The decision's program and metadata: the one built while deciding (with the default
    options, or in the standard shape), else built now (in the decision's shape, always with
    ``options.one_hidden_layer``); a standard-shape program's metadata gains ``shape``
    (:func:`standard_shape`)."""
    if d.built is not None and (d.shape == STANDARD or not options.one_hidden_layer):
        program, meta = d.built
    else:
        program, meta = _build(automaton, d.construction, d.plan, options, d.shape)
    if d.shape == STANDARD:
        meta = {**meta, "shape": standard_shape(program, meta, options.max_len)}
    return program, meta


def assemble_model(automaton: Semiautomaton, d: Decision, program: Program, meta: dict[str, Any], method: str,
                   max_len: int, dtype: torch.dtype, readout: dict[str, Any] | None = None) -> CompiledTransformer:
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
    return {"kind": spec["promise"], "undefined": undefined, "text": promise_text(undefined)}


def check_estimate(cand: Candidate, model: CompiledTransformer) -> None:
    """The registry contract: a construction's estimate is the built model's exact depth and
    parameter count (the planner compares constructions by it); anything else is a bug."""
    built = (len(model.config.blocks), sum(p.numel() for p in model.parameters()))
    if built != (cand.layers, cand.params):
        raise AssertionError(f"{cand.name}'s estimate ({cand.layers} layers, {cand.params} parameters) differs from "
                             f"the model it built ({built[0]} layers, {built[1]} parameters); estimates must be exact")
