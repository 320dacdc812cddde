"""spec -> plan -> program -> assembled model: :func:`compile_automaton` in five stages.

load (``load_spec``) -> plan (the planner, ``compiler/planner.py``: every registered
construction's exact estimate or refusal, the best that fits) -> build (the construction's
program) -> assemble (the model, its metadata, its estimate checked, its header stamped) ->
basis (a rotated model where asked).  A label readout plans, builds and assembles two variants
and keeps one (``compiler/label_planner.py``).  The plan is carried in the checkpoint
(``meta["plan"]``), beside every candidate (``meta["candidates"]``).
"""

from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Any

import torch

from constructions import registry
from constructions.basis import BASES, ORTHOGONAL, basis_of, check_seed
from constructions.budget import MAX_PARAMS
from constructions.checkpoint import header_intact, stamp_header
from constructions.construction import Construction
from constructions.labels import LABELS, READOUTS, readout_of
from constructions.model import CompiledTransformer
from constructions.positions import KINDS
from constructions.rotate import rotate
from constructions.unfold import unfold

from .automata.errors import CheckpointError, ShortcutError
from .automata.load import load_spec
from .automata.spec import Semiautomaton
from .label_planner import compile_labels, default_readout
from .planner import (
    AUTO,
    DTYPES,
    PREFERENCES,
    SHAPES,
    STANDARD,
    Candidate,
    CompileOptions,
    Decision,
    assemble_model,
    beyond_reach,
    build,
    check_estimate,
    decide,
    methods,
    promise_meta,
    plan,
    ranking,
    survey,
    check_options,
    take_best,
)

__all__ = ["AUTO", "DTYPES", "MAX_LEN_LIMIT", "PREFERENCES", "SHAPES", "Candidate", "CompileOptions", "Decision", "candidates",
           "compile_automaton", "decide", "methods", "plan", "ranking", "require_intact_header", "set_start", "survey",
           "with_start"]

MAX_LEN_LIMIT = 1 << 20


def candidates(automaton, *, max_len: int, prefer: str = "depth", positions: str = "sinusoidal",
               max_params: int = MAX_PARAMS, complete: bool = False, dtype: torch.dtype = torch.float32,
               allow_inexact: bool = True, promise: str | None = None, shape: str = "default") -> dict[str, Any]:
    """``shortcut plan``: every construction's candidate (exact estimate, or why not) and what
    ``auto`` would compile with these options -- building no model, only the program of the one
    it takes (the standard ``shape`` builds every candidate's program to count its blocks; JSON-able:
    ``automaton``, ``max_len``, ``prefer``, ``max_params``, ``shape``, ``candidates``, ``chosen``,
    ``why`` or ``error``)."""
    automaton = load_spec(automaton, complete=complete, promise=promise)
    _check_max_len(max_len)
    check_options(AUTO, prefer, max_params, shape)
    if dtype not in DTYPES.values():
        raise ShortcutError(f"dtype must be one of {list(DTYPES)}, got {dtype}")
    out: dict[str, Any] = {"automaton": automaton.name, "max_len": max_len, "prefer": prefer, "max_params": max_params,
                           "shape": shape, "promise": promise_meta(automaton.to_dict())}
    eps = torch.finfo(dtype).eps
    cands, plans, errors = survey(automaton, max_len, positions, max_params, shape, eps, prefer)
    try:
        d = take_best(automaton, cands, plans, errors, max_len, eps, positions, prefer,
                      certified=not allow_inexact, shape=shape, max_params=max_params)
    except ShortcutError as e:
        return {**out, "candidates": [asdict(x) for x in cands], "chosen": None, "why": None, "error": str(e)}
    return {**out, "candidates": [asdict(x) for x in d.candidates], "chosen": d.method, "why": d.why, "error": None}


def _check_max_len(max_len) -> None:
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
        raise ShortcutError(f"max_len must be a positive integer, got {max_len!r}")
    if max_len > MAX_LEN_LIMIT:
        raise ShortcutError(f"max_len {max_len} is above the supported limit {MAX_LEN_LIMIT}")


def compile_automaton(automaton: Any, *, max_len: int, method: str = "auto", dtype: torch.dtype = torch.float32,
                      positions: str = "sinusoidal", allow_inexact: bool = True, complete: bool = False,
                      readout: str | None = None, prefer: str = "depth", max_params: int = MAX_PARAMS,
                      basis: str = "standard", basis_seed: int = 0, promise: str | None = None,
                      one_hidden_layer: bool = False, shape: str = "default") -> CompiledTransformer:
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
    (:func:`compiler.label_planner.compile_labels`); None (the default): labels for a Mealy machine
    (the output of the transition each letter takes), else states.  ``basis="orthogonal"``: the model is then
    expressed in the random orthogonal basis drawn from ``basis_seed`` (:func:`constructions.rotate.rotate`).
    ``one_hidden_layer``: MLPs with one hidden layer where the chosen construction can (lookback;
    as few as it can for krohn-rhodes and bounded-stack; :class:`constructions.construction.BuildOptions`),
    for tools with one per block (docs/interop.md).
    ``shape="standard"``: every block one attention sublayer and one MLP with exactly one hidden layer
    (:data:`compiler.planner.SHAPES`; costed and chosen in standard blocks, ``meta["shape"]``)."""
    a = load_spec(automaton, complete=complete, promise=promise)
    readout = default_readout(a) if readout is None else readout
    options = _compile_options(method, max_len, dtype, positions, allow_inexact, readout, prefer, max_params,
                               basis, basis_seed, one_hidden_layer, shape)
    if readout == LABELS:
        model = compile_labels(a, options)
    else:
        d = options.decide(a)
        model = _assembled(a, d, *build(a, d, options.build), options)
    return rotate(model, basis_seed) if basis == ORTHOGONAL else model


def _compile_options(method: str, max_len: int, dtype: torch.dtype, positions: str, allow_inexact: bool,
                     readout: str, prefer: str, max_params: int, basis: str, basis_seed: int,
                     one_hidden_layer: bool = False, shape: str = "default") -> CompileOptions:
    """The checked options (ShortcutError naming a bad one; the method, preference, budget and
    shape are checked by the planner)."""
    if readout not in READOUTS:
        raise ShortcutError(f"unknown readout {readout!r}; choose one of {list(READOUTS)}")
    if shape == STANDARD and readout == LABELS:
        raise ShortcutError("the standard shape compiles state readouts only (not yet --readout labels, nor a Mealy "
                            "machine's outputs)")
    if basis not in BASES:
        raise ShortcutError(f"unknown basis {basis!r}; choose one of {list(BASES)}")
    check_seed(basis_seed)
    _check_max_len(max_len)
    if dtype not in DTYPES.values():
        raise ShortcutError(f"dtype must be one of {list(DTYPES)}, got {dtype}")
    if positions not in KINDS:
        raise ShortcutError(f"unknown positions {positions!r}; choose one of {list(KINDS)}")
    return CompileOptions(method, max_len, dtype, positions, prefer, max_params, allow_inexact,
                          one_hidden_layer or shape == STANDARD, shape)


def _assembled(a: Semiautomaton, d: Decision, program: Any, meta: dict[str, Any],
               options: CompileOptions) -> CompiledTransformer:
    """A state model: the decision's program assembled (PrecisionError first when it is beyond its
    certified float reach and that is not allowed), in the standard shape its MLPs deeper than one
    hidden layer unfolded (``constructions/unfold.py``), its estimate checked (estimates are of the
    default build, or of the standard shape: not of ``one_hidden_layer`` alone), its header stamped."""
    if not options.allow_inexact:
        beyond_reach(a, d.construction, meta, options.max_len, options.dtype)
    model = assemble_model(a, d, program, meta, options.method, options.max_len, options.dtype)
    if options.shape == STANDARD and meta["shape"]["unfolded"]:
        model = unfold(model)
    if options.shape == STANDARD or not options.one_hidden_layer:
        check_estimate(d.chosen, model)
    stamp_header(model)
    return model


def require_intact_header(model: CompiledTransformer) -> tuple[Construction, Any]:
    """The model's construction and decoded plan, provided its header (config, spec, method,
    plan) still has the digest written at compile time; CheckpointError (bad input) when it
    was edited since -- verdicts and start changes are only meaningful for what was compiled."""
    c, p = registry.plan_of(model)
    if header_intact(model) is False:
        raise CheckpointError("this model's header (spec, method, plan, config or notes) was edited after compiling: it no "
                              "longer matches the digest written then; recompile it from the spec")
    return c, p


def set_start(model: CompiledTransformer, start: str) -> None:
    """Point a compiled model at another start state, in place (through its construction
    and the plan its checkpoint carries; each keeps q0 in one place)."""
    c, p = require_intact_header(model)
    if basis_of(model.meta) is not None:
        raise ShortcutError("a model in a rotated basis keeps its start state: compile the spec again with --start's "
                            "state as its start, then rotate it")
    if "unfolded" in model.meta:
        raise ShortcutError("an unfolded (standard-shape) model keeps its start state: compile the spec again with "
                            "--start's state as its start")
    if readout_of(model.meta) is not None:
        raise ShortcutError("a label model reads the labels seen from the start state it was compiled with (its "
                            "readout records that start's minimal Moore machine); to read labels from another start, "
                            "compile the spec again with that start")
    c.set_start(model, p, start)
    if header_intact(model) is not None:
        stamp_header(model)


def with_start(model: CompiledTransformer, start: str):
    """The same model read out from another start state (a copy)."""
    other = copy.deepcopy(model)
    set_start(other, start)
    return other
