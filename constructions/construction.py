"""The record every construction declares once (``CONSTRUCTION = Construction(...)`` at the
bottom of its module) and the values it passes to the planner and the verifier.

A construction works in two steps.  ``applies`` inspects the automaton and returns a
typed *plan* (what the construction found: the scan's representation, the gridworld's
box world, the Krohn-Rhodes cascade) or a :class:`Refusal`; everything after that --
estimating, building, moving the start state, checking a compiled model -- reads the
plan and never repeats the analysis.  The plan travels in the checkpoint as
``meta["plan"]`` (``plan_to_json`` / ``plan_from_json``).

Every construction builds with one signature, ``build(automaton, plan, options)``, the
options a frozen :class:`BuildOptions`; moving a compiled model's start state goes through
:func:`check_start` and, where the weights depend on it beyond one column, :func:`rebuild`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

import numpy as np
import torch

from compiler.automata.errors import InputError, ShortcutError
from compiler.automata.spec import Semiautomaton, from_dict

from .assemble import assemble
from .budget import MAX_PARAMS
from .model import CompiledTransformer
from .program import Program

Plan = TypeVar("Plan")


FLOAT32_EPS = float(torch.finfo(torch.float32).eps)
"""The default target dtype's machine epsilon (float32: 2**-23)."""


ONE_HIDDEN_LAYER = "one_hidden_layer"
"""The meta key a build with :attr:`BuildOptions.one_hidden_layer` sets (True)."""


@dataclass(frozen=True)
class BuildOptions:
    """What a build needs besides the automaton and its plan.

    max_len: the longest input the model must simulate exactly.
    eps: the machine epsilon of the target dtype (the precision checks compare worst-case
        rounding bounds with it and record warnings; the weights do not depend on it).
    positions: the position code (``constructions.positions.KINDS``) of the offset heads.
    max_params: the parameter budget a build refuses beyond (``BudgetError``).
    one_hidden_layer: build each MLP with one hidden layer where the construction can (lookback's
        lookup as :func:`gadgets.flat_lookup_mlp`), so that a tool with one hidden layer per block
        (TransformerLens, docs/interop.md) takes the model without unfolding, and as few as it can
        elsewhere (krohn-rhodes counters and a bounded stack's depth as :func:`gadgets.staircase_mlp`,
        two; a legal stack's MLPs one each): the standard shape's build; ``meta`` records it.
        Every other construction builds as without it."""

    max_len: int
    eps: float = FLOAT32_EPS
    positions: str = "sinusoidal"
    max_params: int = MAX_PARAMS
    one_hidden_layer: bool = False

    @staticmethod
    def of_model(model: CompiledTransformer) -> "BuildOptions":
        """The options a compiled model was built with (its max_len, its weights' dtype and the
        position code its metadata records, and whether it was built with one hidden layer per MLP),
        for rebuilding it from another start state."""
        return BuildOptions(model.max_len, float(torch.finfo(model.W_E.dtype).eps),
                            model.metadata.positions or "sinusoidal",
                            one_hidden_layer=bool(model.meta.get(ONE_HIDDEN_LAYER, False)))


def check_start(automaton: Semiautomaton, start: str) -> int:
    """The index of state ``start`` of ``automaton``; InputError naming the states otherwise."""
    if start not in automaton.state_index:
        raise InputError(f"unknown start state {start!r}; the states of {automaton.name} are {list(automaton.states)}")
    return automaton.state_index[start]


def check_plan_start(automaton: Semiautomaton, plan_start: int, what: str) -> None:
    """InputError when a plan detected from state ``plan_start`` (its tables depend on the start:
    a piecewise or star-free plan) is built for ``automaton`` from another start."""
    if plan_start != automaton.start:
        raise InputError(f"this {what} plan was detected from state {automaton.states[plan_start]!r}, not "
                         f"{automaton.states[automaton.start]!r}")


Build = Callable[[Semiautomaton, Any, BuildOptions], tuple[Program, dict[str, Any]]]
"""``build(automaton, plan, options) -> (Program, meta)``: every construction's build."""


def rebuild(model: CompiledTransformer, build: Build, plan: Any, start: str, *,
            meta: dict[str, Any] | None = None, same_shape: str | None = None) -> None:
    """Point ``model`` at start state ``start`` by building ``plan`` again for the automaton
    with that start (with the model's own options, :meth:`BuildOptions.of_model`), assembling
    it and copying its weights and metadata in, in place.  ``meta`` adds entries (a plan
    that depends on the start); ``same_shape``: InputError with this text when the rebuilt
    model has another shape (otherwise the shapes are the construction's promise)."""
    check_start(model.automaton, start)
    spec = {**model.metadata.automaton, "start": start}
    program, built = build(from_dict(spec), plan, BuildOptions.of_model(model))
    new = assemble(program, max_len=model.max_len, dtype=model.W_E.dtype,
                   meta={**model.meta, **built, **(meta or {}), "automaton": spec})
    if same_shape is not None and new.config != model.config:
        raise InputError(same_shape)
    model.load_state_dict(new.state_dict())
    model.set_meta(new.meta)


def rebuild_detected(model: CompiledTransformer, start: str, applies: Callable[[Semiautomaton], Any],
                     build: Build, name: str) -> None:
    """:func:`rebuild` for a plan that depends on the start: detect again (``applies``) on the
    automaton from ``start`` and rebuild in place; a refusal, or a plan of another shape, is an
    InputError naming ``name`` (recompile with that start instead)."""
    q = check_start(model.automaton, start)
    a = model.automaton
    new = applies(Semiautomaton(a.name, a.states, a.alphabet, a.maps, q, a.outputs, a.undefined))
    if isinstance(new, Refusal):
        raise InputError(f"{name} from start {start!r}: {new.reason}")
    rebuild(model, build, new, start, meta={"plan": new.to_dict()},
            same_shape=f"the {name} plan from start {start!r} has another shape; compile with that start instead")


def declared_obligations(build: Build) -> Callable[[Any, Any], Any]:
    """A construction's ``obligations`` read off its own program (one declaration: each gadget
    states its obligation where it makes its weights, :meth:`Program.obligations`): ``build`` runs
    again on the spec and plan the checkpoint carries, with the model's options.  Whatever that
    code gets wrong the certificate's second half (the program against the automaton) refuses."""
    def obligations(model: CompiledTransformer, plan: Any) -> Any:
        program, _ = build(from_dict(model.metadata.automaton), plan, BuildOptions.of_model(model))
        return program.obligations()
    return obligations


def composite(inners: Callable[[], Any], *, name: str, theorem: str, applies: Callable[[Semiautomaton], Any],
              estimate: Callable[..., Cost], build: Callable[..., tuple[Program, dict[str, Any]]],
              set_start: Callable[..., None], plan_to_json: Callable[[Any], dict[str, Any]],
              plan_from_json: Callable[[dict[str, Any]], Any], describe: Callable[[Any, Semiautomaton], str],
              invariants: Callable[..., InvariantReport] | None = None) -> Construction:
    """The registry entry of a construction made of others (a product's factors, a transition
    model's quotient): ``inners()`` (the registry's entries but these) is drawn each time it plans,
    builds or restarts, and ``estimate``, ``build`` and ``set_start`` take that tuple last; its
    obligations are its build's declaration (:func:`declared_obligations`)."""
    def pick() -> tuple[Construction, ...]:
        return tuple(inners())

    def built(a: Semiautomaton, plan: Any, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
        return build(a, plan, options, pick())

    return Construction(
        name=name, theorem=theorem, applies=applies,
        estimate=lambda plan, max_len, positions: estimate(plan, max_len, positions, pick()), build=built,
        set_start=lambda model, plan, start: set_start(model, plan, start, pick()), plan_to_json=plan_to_json,
        plan_from_json=plan_from_json, describe=describe, invariants=invariants,
        obligations=declared_obligations(built))


@dataclass(frozen=True)
class Refusal:
    """Why a construction does not apply; ``error`` is the exception raised when it was requested."""

    reason: str
    error: type[ShortcutError] = ShortcutError


@dataclass(frozen=True)
class Cost:
    """What a plan will cost at a given max_len, known before the model is built: ``layers``,
    its attention layers (blocks), and ``params``, its exact parameter count.

    Both must equal the built model's (``auto`` compares constructions by them, and the
    planner raises an internal error when a compiled model differs).  Count with
    ``assemble.count_params`` over the blocks the build makes, or with a closed form
    that ``tests/constructions/test_estimates.py`` checks against built models."""

    layers: int
    params: int


@dataclass
class InvariantReport:
    """What the layer-wise invariants found (``verify/layerwise.py``, or a construction's own
    ``Construction.invariants``): the declared values of named subspaces after each layer
    compared with the declared program on a bounded set of sequences, and the margins measured there.

    checked: what was compared (None: nothing ran; ``skipped`` says why).
    sequences: how many sequences it ran on.
    failures: one line per invariant that did not hold (empty: every one held).
    heads, mlps: per head / per MLP margins, one row each (None: not measured); the verifier
        moves them into its result's ``margins``.
    measured: the construction's own measurements by name (its worst deviations, per-component
        or per-factor rows), JSON-able.
    skipped: why the invariants did not run.

    :meth:`to_json` is the form reports print and store, :meth:`from_json` reads it back."""

    checked: str | None
    sequences: int | None = None
    failures: list[str] = field(default_factory=list)
    heads: list[dict[str, Any]] | None = None
    mlps: list[dict[str, Any]] | None = None
    measured: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None

    FIELDS = ("checked", "sequences", "skipped", "heads", "mlps", "failures")
    """The JSON keys of the fields; ``measured`` entries sit beside them under their own names."""

    def __post_init__(self) -> None:
        clash = set(self.measured) & set(self.FIELDS)
        if clash:
            raise ValueError(f"measured entries {sorted(clash)} would shadow the report's own fields")

    def to_json(self) -> dict[str, Any]:
        """``checked``, ``sequences`` and ``skipped`` (where set), the measured entries, ``heads`` and
        ``mlps`` (where measured), ``failures``: one flat JSON object, lossless (:meth:`from_json`)."""
        head = {"checked": self.checked, "sequences": self.sequences, "skipped": self.skipped}
        margins = {"heads": self.heads, "mlps": self.mlps}
        return {**{k: v for k, v in head.items() if k == "checked" or v is not None}, **self.measured,
                **{k: v for k, v in margins.items() if v is not None}, "failures": list(self.failures)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> InvariantReport:
        """The report :meth:`to_json` wrote."""
        return InvariantReport(d.get("checked"), d.get("sequences"), list(d.get("failures", [])), d.get("heads"),
                               d.get("mlps"), {k: v for k, v in d.items() if k not in InvariantReport.FIELDS},
                               d.get("skipped"))


@dataclass(frozen=True)
class Construction(Generic[Plan]):
    """One construction, as the planner and the verifier see it.

    name: the ``--method`` name (written to ``meta["method"]``).
    theorem: the result it implements, for messages ("Theorem 10").
    applies(automaton) -> Plan | Refusal.
    estimate(plan, max_len, positions) -> Cost: the exact depth and parameter count of the model
        build will make; raises BudgetError (a budget the plan breaks) exactly when build would.
    build(automaton, plan, options: BuildOptions) -> (Program, meta); may raise BudgetError.
    set_start(model, plan, state): point a compiled model at another start state, in place
        (updating ``meta["plan"]`` if the plan depends on the start).
    plan_to_json(plan) -> JSON-able dict; plan_from_json(dict) -> plan (lossless).
    describe(plan, automaton) -> one line for ``meta["why"]``.
    invariants(model, plan, tokens) -> InvariantReport: the layer-wise checks (optional: without it
        the verifier runs the generic check of the declared program, ``verify/layerwise.py``).
    families(model, plan, T, seed) -> {name: tokens [n, T]}: extra adversarial inputs (optional);
        family_seeds(seed) -> {name: seed} records the seeds they used.
    head_target(layer, rows) -> (key index per query row, description): the key each head of
        a layer must attend to, for margins measured on the chunked forward (optional).
    diagram(plan) -> (title, DOT source) for the HTML report (optional).
    obligations(model, plan) -> Obligations: the discrete program the model's weights must run
        (constructions/obligations/), which ``verify/certify/`` proves them to run on every
        input up to max_len (optional: a construction without it is not certified yet).
    floor(plan) -> int: a lower bound on the layers ``estimate`` gives, from the plan alone and cheap
        beside the estimate (optional): a caller that already holds a shallower candidate skips the
        estimate (the product's factors, ``constructions/product.py``).
    """

    name: str
    theorem: str
    applies: Callable[[Semiautomaton], Plan | Refusal]
    estimate: Callable[[Plan, int, str], Cost]
    build: Build
    set_start: Callable[[Any, Plan, str], None]
    plan_to_json: Callable[[Plan], dict[str, Any]]
    plan_from_json: Callable[[dict[str, Any]], Plan]
    describe: Callable[[Plan, Semiautomaton], str]
    invariants: Callable[[Any, Plan, np.ndarray], InvariantReport] | None = None
    families: Callable[[Any, Plan, int, int], dict[str, np.ndarray]] | None = None
    family_seeds: Callable[[int], dict[str, int]] | None = None
    head_target: Callable[[int, Any], tuple[Any, str]] | None = None
    diagram: Callable[[Plan], tuple[str, str]] | None = None
    obligations: Callable[[Any, Plan], Any] | None = None
    floor: Callable[[Plan], int] | None = None
