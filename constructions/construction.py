"""The record every construction declares once (``CONSTRUCTION = Construction(...)`` at the
bottom of its module) and the values it passes to the planner and the verifier.

A construction works in two steps.  ``applies`` inspects the automaton and returns a
typed *plan* (what the construction found: the scan's representation, the gridworld's
box world, the Krohn-Rhodes cascade) or a :class:`Refusal`; everything after that --
estimating, building, moving the start state, checking a compiled model -- reads the
plan and never repeats the analysis.  The plan travels in the checkpoint as
``meta["plan"]`` (``plan_to_json`` / ``plan_from_json``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

import numpy as np

from compiler.automata.errors import ShortcutError
from compiler.automata.spec import Semiautomaton

from .program import Program

Plan = TypeVar("Plan")


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


@dataclass(frozen=True)
class Construction(Generic[Plan]):
    """One construction, as the planner and the verifier see it.

    name: the ``--method`` name (written to ``meta["method"]``).
    theorem: the result it implements, for messages ("Theorem 10").
    applies(automaton) -> Plan | Refusal.
    estimate(plan, max_len, positions) -> Cost: the exact depth and parameter count of the model
        build will make; raises BudgetError (a budget the plan breaks) exactly when build would.
    build(automaton, plan, *, max_len, eps, positions) -> (Program, meta); may raise BudgetError.
    set_start(model, plan, state): point a compiled model at another start state, in place
        (updating ``meta["plan"]`` if the plan depends on the start).
    plan_to_json(plan) -> JSON-able dict; plan_from_json(dict) -> plan (lossless).
    describe(plan, automaton) -> one line for ``meta["why"]``.
    invariants(model, plan, tokens) -> dict: the layer-wise checks (keys ``checked``,
        ``sequences``, ``failures`` and, when measured, ``heads`` / ``mlps`` margins).
    families(model, plan, T, seed) -> {name: tokens [n, T]}: extra adversarial inputs (optional);
        family_seeds(seed) -> {name: seed} records the seeds they used.
    head_target(layer, rows) -> (key index per query row, description): the key each head of
        a layer must attend to, for margins measured on the chunked forward (optional).
    diagram(plan) -> (title, DOT source) for the HTML report (optional).
    obligations(model, plan) -> Obligations: the discrete program the model's weights must run
        (constructions/obligations.py), which ``verify/certify.py`` proves them to run on every
        input up to max_len (optional: a construction without it is not certified yet).
    """

    name: str
    theorem: str
    applies: Callable[[Semiautomaton], Plan | Refusal]
    estimate: Callable[[Plan, int, str], Cost]
    build: Callable[..., tuple[Program, dict[str, Any]]]
    set_start: Callable[[Any, Plan, str], None]
    plan_to_json: Callable[[Plan], dict[str, Any]]
    plan_from_json: Callable[[dict[str, Any]], Plan]
    describe: Callable[[Plan, Semiautomaton], str]
    invariants: Callable[[Any, Plan, np.ndarray], dict[str, Any]]
    families: Callable[[Any, Plan, int, int], dict[str, np.ndarray]] | None = None
    family_seeds: Callable[[int], dict[str, int]] | None = None
    head_target: Callable[[int, Any], tuple[Any, str]] | None = None
    diagram: Callable[[Plan], tuple[str, str]] | None = None
    obligations: Callable[[Any, Plan], Any] | None = None
