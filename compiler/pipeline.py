"""spec -> plan -> program -> assembled model.

The planner walks the construction registry (``constructions/registry.py``): each
construction inspects the automaton once and returns a typed plan or a refusal; the
plan is built, assembled, and carried in the checkpoint (``meta["plan"]``).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from constructions import registry
from constructions.assemble import assemble
from constructions.checkpoint import header_intact, stamp_header
from constructions.construction import Construction, Refusal
from constructions.labels import LABELS, READOUTS, STATES, LabelReadoutError, label_unembedding, readout_of
from constructions.positions import KINDS

from .automata.errors import CheckpointError, PrecisionError, ShortcutError
from .automata.load import load_spec
from .automata.moore import Minimised, minimise
from .automata.representation import natural
from .automata.spec import Semiautomaton

AUTO = "auto"
DTYPES = {"float32": torch.float32, "float64": torch.float64}
MAX_LEN_LIMIT = 1 << 20


def methods() -> list[str]:
    """``auto`` and every registered construction, in preference order."""
    return [AUTO, *registry.names()]


@dataclass
class Candidate:
    """One construction as the planner saw it: its estimate, or why it was passed over."""

    name: str
    layers: int | None = None
    params: int | None = None
    refusal: str | None = None
    chosen: bool = False


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


def _requested(automaton: Semiautomaton, c: Construction, max_len: int, positions: str) -> Decision:
    """``--method NAME``: that construction, or its refusal as the error."""
    plan = c.applies(automaton)
    if isinstance(plan, Refusal):
        raise plan.error(plan.reason)
    cost = c.estimate(plan, max_len, positions)
    cand = Candidate(c.name, cost.layers, cost.params, chosen=True)
    return Decision(c, plan, f"requested with --method {c.name}: {c.describe(plan, automaton)}", [cand])


def _auto(automaton: Semiautomaton, max_len: int, eps: float, positions: str) -> Decision:
    """The first construction, in registry order, that applies, fits its budgets and (unless
    it opts out with ``depth_checked=False``) is no deeper than the last resort at
    ``max_len``; the last resort (it applies to everything) otherwise.  A candidate whose
    build fails falls through to the next one."""
    entries = registry.entries()
    last = entries[-1]
    last_seen: dict[str, Any] = {}

    def last_resort() -> tuple[Any, int]:
        if not last_seen:
            plan = last.applies(automaton)
            if isinstance(plan, Refusal):
                raise plan.error(plan.reason)
            last_seen.update(plan=plan, layers=last.estimate(plan, max_len, positions).layers)
        return last_seen["plan"], last_seen["layers"]

    cands: list[Candidate] = []
    for c in entries:
        cand = Candidate(c.name)
        cands.append(cand)
        if c is last:
            plan, _ = last_resort()
        else:
            plan = c.applies(automaton)
            if isinstance(plan, Refusal):
                cand.refusal = plan.reason
                continue
        try:
            cost = c.estimate(plan, max_len, positions)
        except ShortcutError as e:
            if c is last:
                raise
            cand.refusal = str(e)
            continue
        cand.layers, cand.params = cost.layers, cost.params
        built = None
        if c is not last:
            depth = last_resort()[1]
            if c.depth_checked and cost.layers > depth:
                cand.refusal = (f"needs {cost.layers} attention layers, {last.name} only {depth} "
                                f"at max_len {max_len}")
                continue
            try:
                built = c.build(automaton, plan, max_len=max_len, eps=eps, positions=positions)
            except ShortcutError as e:
                cand.refusal = str(e)
                continue
        cand.chosen = True
        passed = "".join(f"; not {x.name}: {x.refusal}" for x in cands if x.refusal)
        why = (f"auto: {c.name} ({c.theorem}): {c.describe(plan, automaton)}; {cost.layers} attention layers "
               f"at max_len {max_len}{passed}")
        return Decision(c, plan, why, cands, built)
    raise AssertionError("the last resort always decides")  # pragma: no cover


def decide(automaton: Semiautomaton, method: str, max_len: int = 128, eps: float = 2.0**-23,
           positions: str = "sinusoidal") -> Decision:
    """Which construction compiles ``automaton``, with which plan (see :func:`_auto`)."""
    if method not in methods():
        raise ShortcutError(f"unknown method {method!r}; choose one of {methods()}")
    if method == AUTO:
        return _auto(automaton, max_len, eps, positions)
    return _requested(automaton, registry.get(method), max_len, positions)


def plan(automaton: Semiautomaton, method: str, max_len: int = 128) -> tuple[str, str]:
    """The construction to use and why (see :func:`decide`)."""
    d = decide(automaton, method, max_len)
    return d.method, d.why


def compile_automaton(automaton, *, max_len: int, method: str = "auto", dtype: torch.dtype = torch.float32,
                      positions: str = "sinusoidal", allow_inexact: bool = True, complete: bool = False,
                      readout: str = STATES):
    """Compile ``automaton`` (a Semiautomaton, dict, JSON path, catalog name or automata-lib DFA)
    to a :class:`constructions.model.CompiledTransformer` that simulates it for inputs up to ``max_len``.

    The construction's precision warnings (``meta["warnings"]``: its worst-case rounding bound
    exceeds a tolerance at this max_len and dtype) raise :class:`PrecisionError` unless
    ``allow_inexact`` (the library default; the CLI refuses unless ``--allow-inexact``).
    ``complete`` adds a sink state to a partial automaton (see ``load_spec``).
    ``readout="labels"`` (the automaton must have outputs): the argmax is the output label; the
    minimal Moore machine is compiled instead of the automaton (see :func:`_label_model`)."""
    automaton = load_spec(automaton, complete=complete)
    if readout not in READOUTS:
        raise ShortcutError(f"unknown readout {readout!r}; choose one of {list(READOUTS)}")
    minimised = None
    if readout == LABELS:
        minimised = minimise(automaton)
        source, automaton = automaton, minimised.quotient
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
        raise ShortcutError(f"max_len must be a positive integer, got {max_len!r}")
    if max_len > MAX_LEN_LIMIT:
        raise ShortcutError(f"max_len {max_len} is above the supported limit {MAX_LEN_LIMIT}")
    if dtype not in DTYPES.values():
        raise ShortcutError(f"dtype must be one of {list(DTYPES)}, got {dtype}")
    if positions not in KINDS:
        raise ShortcutError(f"unknown positions {positions!r}; choose one of {list(KINDS)}")
    eps = torch.finfo(dtype).eps
    d = decide(automaton, method, max_len, eps, positions)
    c = d.construction
    program, meta = d.built or c.build(automaton, d.plan, max_len=max_len, eps=eps, positions=positions)
    if minimised is not None:
        d, program, meta = _label_model(d, program, meta, minimised, method, max_len, eps, positions)
        c = d.construction
    if meta.get("warnings") and not allow_inexact:
        raise PrecisionError(f"{automaton.name} at max_len {max_len} in {str(dtype).removeprefix('torch.')} is beyond "
                             f"the certified float reach of {c.name}: {meta['warnings'][0]} -- use a smaller "
                             f"--max-len or --dtype float64, or pass --allow-inexact")
    meta = {"automaton": automaton.to_dict(), "why": d.why, "requested_method": method, **meta,
            "method": c.name, "plan": c.plan_to_json(d.plan), "candidates": [asdict(x) for x in d.candidates]}
    if minimised is not None:
        meta["readout"] = {"kind": LABELS, **minimised.to_dict(), **meta.pop("label_readout"),
                           "source": source.to_dict()}
    model = assemble(program, max_len=max_len, dtype=dtype, meta=meta)
    stamp_header(model)
    return model


def _label_model(d: Decision, program, meta: dict[str, Any], m: Minimised, method: str, max_len: int, eps: float,
                 positions: str) -> tuple[Decision, Any, dict[str, Any]]:
    """Swap the state unembedding of the quotient's program for a label unembedding
    (:func:`constructions.labels.label_unembedding`).  Under ``auto``, when the chosen
    construction's readout cannot carry the labels, the later registry entries are tried in
    order (no deeper than the last resort), and the last resort is given the natural action
    on the quotient's states, whose scalar code always can: the quotient orders its states by
    label, so each label is a run of consecutive codes."""
    a = m.quotient
    tried: list[str] = []
    attempt: tuple[Decision, Any, dict[str, Any]] | None = (d, program, meta)
    entries = list(registry.entries())
    rest = (entries[entries.index(d.construction) + 1:] or [entries[-1]]) if method == AUTO else []
    cands = d.candidates
    while True:
        if attempt is not None:
            d, program, meta = attempt
            try:
                W_U, b_U, notes = label_unembedding(program.W_U, program.b_U, m.state_label, len(m.labels))
            except LabelReadoutError as e:
                if method != AUTO:
                    raise ShortcutError(f"--readout labels with --method {method}: {e}") from None
                tried.append(f"{d.method}: {e}")
            else:
                program.W_U, program.b_U = W_U, b_U
                why = (f"{d.why}; labels: minimal Moore machine {m.states_before} -> {m.states_after} states, "
                       f"{len(m.labels)} labels read by {notes['form']}" + "".join(f"; not {t}" for t in tried))
                d = Decision(d.construction, d.plan, why, cands, d.built)
                return d, program, {**meta, "label_readout": {"form": notes["form"], "notes": notes}}
        if not rest:  # pragma: no cover - the natural action's scalar code always carries the labels
            raise AssertionError("no construction could read the labels: " + "; ".join(tried))
        c = rest.pop(0)
        attempt = _label_candidate(c, a, c is entries[-1], max_len, eps, positions)


def _label_candidate(c: Construction, a: Semiautomaton, last: bool, max_len: int, eps: float,
                     positions: str) -> tuple[Decision, Any, dict[str, Any]] | None:
    """Construction ``c`` built on ``a`` for a label readout (the natural action when ``c`` is the
    last resort), or None when it refuses, breaks a budget or is deeper than the last resort."""
    if last:
        plan = natural(a)
        why = f"{c.name} ({c.theorem}) on the states, whose scalar code carries the labels: {c.describe(plan, a)}"
        return Decision(c, plan, why), *c.build(a, plan, max_len=max_len, eps=eps, positions=positions)
    plan = c.applies(a)
    if isinstance(plan, Refusal):
        return None
    try:
        cost = c.estimate(plan, max_len, positions)
        depth = registry.entries()[-1].estimate(natural(a), max_len, positions).layers
        if c.depth_checked and cost.layers > depth:
            return None
        built = c.build(a, plan, max_len=max_len, eps=eps, positions=positions)
    except ShortcutError:
        return None
    return Decision(c, plan, f"{c.name} ({c.theorem}): {c.describe(plan, a)}"), *built


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
    if readout_of(model.meta) is not None:
        raise ShortcutError("a label model compiles the minimal Moore machine seen from its start state; to read "
                            "labels from another start, compile the spec again with that start")
    c.set_start(model, p, start)
    if header_intact(model) is not None:
        stamp_header(model)


def with_start(model, start: str):
    """The same model read out from another start state (a copy)."""
    other = copy.deepcopy(model)
    set_start(other, start)
    return other
