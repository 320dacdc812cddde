"""The label planner (``readout="labels"``): which model reads an automaton's output labels.

Two variants are compiled and the planner's rule (:func:`compiler.planner.ranking`) picks one:

* the minimal Moore machine, labels read from its states (:func:`_quotient_variant`);
* the automaton as given, compiled as for a state readout, each state read as its label
  (:func:`_original_variant`).

A variant's readout (:func:`label_readout`) is linear in the state readout where it can be,
else the smaller of halfspaces of the state codes and an exact lookup in the last MLP.  When
the quotient's construction cannot carry the labels, the constructions are tried in an order
fixed up front (:func:`reader_order`).  Nothing here changes its inputs: candidates, decisions
and programs are replaced, never mutated; the options are one frozen :class:`compiler.planner.CompileOptions`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Callable


from constructions import registry
from constructions.assemble import program_params
from constructions.checkpoint import stamp_header
from constructions.construction import Construction, Refusal
from constructions.labels import LABELS, STATES, LabelReadoutError, label_halfspaces, label_lookup, label_unembedding
from constructions.model import CompiledTransformer
from constructions.program import Program

from .automata.errors import ShortcutError
from .automata.mealy import MealyMoore, is_mealy, mealy_moore
from .automata.moore import Minimised, labelling, minimise
from .automata.representation import natural
from .automata.spec import Semiautomaton
from .planner import AUTO, Candidate, CompileOptions, Decision, assemble_model, beyond_reach, build, ranking


QUOTIENT, ORIGINAL = "quotient", "original"
"""Which automaton a label model's states are (``meta["readout"]["states"]``): the minimal Moore
machine, or the automaton as given with each of its states mapped to its label."""


def default_readout(a: Semiautomaton) -> str:
    """The readout when none is asked for: a Mealy machine's outputs (labels), else the states."""
    return LABELS if is_mealy(a) else STATES


@dataclass
class _LabelVariant:
    """One way to read labels: ``states`` (QUOTIENT or ORIGINAL) compiled and assembled."""

    states: str
    automaton: Semiautomaton
    model: Any
    layers: int
    params: int


def compile_labels(source: Semiautomaton, options: CompileOptions) -> CompiledTransformer:
    """A label model: the better of two variants, by the planner's rule (:func:`ranking`).

    * the minimal Moore machine compiled, labels read from its states (:func:`_quotient_variant`);
    * the automaton as given, compiled as for a state readout (the construction ``method``
      gives it, ``auto``'s pick included), each of its states read as its label (:func:`_original_variant`).

    Never more parameters than the state model when one of the two has no more: the state
    model is the second's construction at the same options, and a label readout on top of it
    scores fewer outputs (linear), or adds an exact lookup (then both are compared as built).
    ``meta["readout"]`` records which was taken, its state -> label map, both sizes and why.
    A Mealy machine's labels are its transitions' outputs: it is minimised by them and its Moore
    machine over transitions takes its place (:func:`compiler.automata.mealy.mealy_moore`;
    ``meta["readout"]["mealy"]`` records the Mealy machine and its sizes)."""
    mealy = mealy_moore(source) if is_mealy(source) else None
    if mealy is not None:
        source = mealy.moore
    m = minimise(source)
    labels, state_label = labelling(source, m)
    try:  # the state model's decision: its size bounds the label model's, and the second variant reuses it
        state: Decision | ShortcutError = options.decide(source)
    except ShortcutError as e:
        state = e
    state_params = state.chosen.params if isinstance(state, Decision) else None
    attempts: dict[str, Callable[[], _LabelVariant]] = {
        QUOTIENT: lambda: _quotient_variant(source, m, options, state_params),
        ORIGINAL: lambda: _original_variant(source, m, state, labels, state_label, options)}
    variants: list[_LabelVariant] = []
    refused: dict[str, ShortcutError] = {}
    for states, attempt in attempts.items():
        try:
            variants.append(attempt())
        except ShortcutError as e:
            refused[states] = e
    if not variants:
        raise next(iter(refused.values()))
    best, why = _label_choice(variants, {k: str(e) for k, e in refused.items()}, state_params, options.prefer)
    if mealy is not None:
        why = f"{_mealy_why(mealy)}; {why}"
    return _finished(best, why, variants, state_params, mealy)


def _mealy_why(mealy: MealyMoore) -> str:
    """What a Mealy machine became before its label readout was planned."""
    return (f"Mealy machine: {mealy.states_before} states ({mealy.reachable} reachable) minimised by its outputs to "
            f"{mealy.states_after}; its outputs read as the labels of the Moore machine over its "
            f"{mealy.moore.n_states - 1} transitions (and the start)")


def _quotient_variant(source: Semiautomaton, m: Minimised, options: CompileOptions,
                      state_params: int | None) -> _LabelVariant:
    """The minimal Moore machine compiled by the planner's decision, with a label readout (:func:`_label_model`)."""
    a = m.quotient
    d = _quotient_decision(a, options, state_params)
    program, meta = build(a, d, options.build)
    d, program, meta, notes = _label_model(d, program, meta, m, options)
    own = {"labels": list(m.labels), "state_label": list(m.state_label), "classes": [list(c) for c in m.classes]}
    return _variant(QUOTIENT, source, a, d, program, meta, m, own, notes, options)


def _original_variant(source: Semiautomaton, m: Minimised, state: Decision | ShortcutError, labels: tuple[str, ...],
                      state_label: tuple[int, ...], options: CompileOptions) -> _LabelVariant:
    """The automaton as given, compiled by the state model's decision, each state read as its label."""
    if isinstance(state, ShortcutError):
        raise state
    program, meta = build(source, state, options.build)
    program, notes = label_readout(program, state_label, len(labels))
    d = replace(state, why=f"{state.why}; labels: read from its {source.n_states} states by {notes['form']}")
    own = {"labels": list(labels), "state_label": list(state_label)}
    return _variant(ORIGINAL, source, source, d, program, meta, m, own, notes, options)


def _variant(states: str, source: Semiautomaton, a: Semiautomaton, d: Decision, program: Program,
             meta: dict[str, Any], m: Minimised, own: dict[str, Any], notes: dict[str, Any],
             options: CompileOptions) -> _LabelVariant:
    """One variant assembled, with its readout record (``meta["readout"]``); PrecisionError first
    when the build is beyond its certified float reach and that is not allowed."""
    if not options.allow_inexact:
        beyond_reach(a, d.construction, meta, options.max_len, options.dtype)
    readout = {"kind": LABELS, "states": states, **own, "states_before": m.states_before,
               "reachable": m.reachable, "states_after": m.states_after, "form": notes["form"],
               "notes": notes, "source": source.to_dict()}
    model = assemble_model(a, d, program, meta, options.method, options.max_len, options.dtype, readout)
    return _LabelVariant(states, a, model, len(model.config.blocks), sum(p.numel() for p in model.parameters()))


def _finished(best: _LabelVariant, why: str, variants: list[_LabelVariant],
              state_params: int | None, mealy: MealyMoore | None = None) -> CompiledTransformer:
    """The chosen variant's model with why it was chosen, both variants' sizes (and a Mealy
    machine's record), and its header stamped."""
    model, meta = best.model, best.model.meta
    readout = {**meta["readout"], "why": why, "state_model_params": state_params,
               "variants": [{"states": v.states, "method": v.model.metadata.method, "layers": v.layers,
                             "params": v.params} for v in variants]}
    if mealy is not None:
        readout["mealy"] = mealy.to_dict()
    model.set_meta({**meta, "readout": readout, "why": f"{meta['why']}; {why}"})
    stamp_header(model)
    return model


def _quotient_decision(a: Semiautomaton, options: CompileOptions, state_params: int | None) -> Decision:
    """The planner's decision for the minimal Moore machine; under ``auto``, when its pick is
    estimated above the state model's parameters, the shallowest candidate within them instead
    (when there is one): a label model no larger than the state model is preferred to a shallower one."""
    d = options.decide(a)
    if options.method == AUTO and state_params is not None and d.chosen.size[1] > state_params:
        try:
            return options.decide(a, min(options.max_params, state_params))
        except ShortcutError:
            pass
    return d


def _label_choice(variants: list[_LabelVariant], refused: dict[str, str], state_params: int | None,
                  prefer: str) -> tuple[_LabelVariant, str]:
    """The variant the planner prefers (:func:`ranking`) among those with at most the state
    model's parameters (all of them when none has), and why, naming the other's size or refusal."""
    cands = [Candidate(v.states, applies=True, layers=v.layers, params=v.params, fits=True) for v in variants]
    within = [c for c in cands if state_params is None or c.size[1] <= state_params]
    best = ranking(within or cands, prefer)[0]
    v = next(x for x in variants if x.states == best.name)
    text = {x.states: f"{x.model.metadata.method}, {x.layers} layers, {x.params:,} parameters" for x in variants}
    what = {QUOTIENT: f"the minimal Moore machine ({variants[0].model.metadata.readout['states_after']} states)",
            ORIGINAL: f"the automaton as given ({v.model.metadata.readout['states_before']} states)"}
    why = f"label readout on {what[v.states]}: {text[v.states]}"
    for other in (QUOTIENT, ORIGINAL):
        if other != v.states:
            why += f"; not {what[other]}: {text.get(other) or refused.get(other, '')}"
    if state_params is not None:
        why += (f"; the state model has {state_params:,} parameters" +
                ("" if v.params <= state_params else " (no label readout fits within it)"))
    return v, why


def reader_order(d: Decision, method: str, prefer: str) -> list[Construction]:
    """The constructions tried, in order, for a label readout of the quotient: the decision's own;
    under ``auto`` then the other candidates that fit, in the planner's order after it (:func:`ranking`),
    and last the last resort, given the natural action on the quotient's states (whose scalar code
    always carries the labels: the quotient orders its states by label, so each label is a run of
    consecutive codes)."""
    if method != AUTO:
        return [d.construction]
    last = registry.entries()[-1]
    ranked = [registry.get(x.name) for x in ranking(d.candidates, prefer)]
    rest = ranked[ranked.index(d.construction) + 1:]
    return [d.construction, *(c for c in rest if c is not last), last]


def _label_model(d: Decision, program: Program, meta: dict[str, Any], m: Minimised,
                 options: CompileOptions) -> tuple[Decision, Program, dict[str, Any], dict[str, Any]]:
    """The quotient's program with a label readout (:func:`label_readout`: linear, else an exact
    lookup in the last MLP) instead of its state unembedding, from the first construction in
    :func:`reader_order` whose readout carries the labels (the decision's own is ``program``)."""
    order = reader_order(d, options.method, options.prefer)
    last = registry.entries()[-1]
    tried: list[str] = []
    for i, c in enumerate(order):
        attempt = (d, program, meta) if i == 0 else _label_candidate(c, m.quotient, c is last, options)
        if attempt is None:
            continue
        took, took_program, took_meta = attempt
        try:
            labelled, notes = label_readout(took_program, m.state_label, len(m.labels))
        except LabelReadoutError as e:
            if options.method != AUTO:
                raise ShortcutError(f"--readout labels with --method {options.method}: {e}") from None
            tried.append(f"{took.method}: {e}")
            continue
        return _labels_taken(took, d.candidates, tried, m, notes), labelled, took_meta, notes
    raise AssertionError("no construction could read the labels: " + "; ".join(tried))  # pragma: no cover


def _labels_taken(d: Decision, cands: list[Candidate], tried: list[str], m: Minimised,
                  notes: dict[str, Any]) -> Decision:
    """The decision that carries the labels, with the candidates marked (new records) and why."""
    first = "the first candidate whose readout carries the labels"
    marked = [replace(x, chosen=x.name == d.method, note=first if x.name == d.method and tried else x.note)
              for x in cands]
    why = (f"{d.why}; labels: minimal Moore machine {m.states_before} -> {m.states_after} states, "
           f"{len(m.labels)} labels read by {notes['form']}" + "".join(f"; not {t}" for t in tried))
    return Decision(d.construction, d.plan, why, marked, d.built)


def label_readout(program: Program, state_label: tuple[int, ...] | list[int],
                  n_labels: int) -> tuple[Program, dict[str, Any]]:
    """``program`` with a label unembedding (a new program; ``program`` is not changed): linear in its
    state readout (:func:`constructions.labels.label_unembedding`) where that can be, else the smaller
    model (:func:`constructions.assemble.program_params`) of linear in its state codes
    (:func:`constructions.labels.label_halfspaces`) and an exact lookup of the state codes in its
    last MLP (:func:`constructions.labels.label_lookup`: it can replace a wide last hidden layer's
    output rows by a narrower one, so it is sometimes the smaller); LabelReadoutError when
    neither fits this construction's readout."""
    try:
        W_U, b_U, notes = label_unembedding(program.W_U, program.b_U, state_label, n_labels)
        return replace(program, W_U=W_U, b_U=b_U), notes
    except LabelReadoutError as linear:
        found: list[tuple[int, Program, dict[str, Any]]] = []
        errors = [str(linear)]
        for read in (label_halfspaces, label_lookup):  # each on a copy; the smaller model is kept
            trial = copy.deepcopy(program)
            try:
                read_notes = read(trial, state_label, n_labels)
            except LabelReadoutError as e:
                errors.append(str(e))
                continue
            if read_notes is not None:
                found.append((program_params(trial), trial, read_notes))
        if not found:
            raise LabelReadoutError("; ".join(dict.fromkeys(errors))) from None
    _, best, notes = min(found, key=lambda f: f[0])  # the first of the smallest: halfspaces on a tie
    return best, notes


def _label_candidate(c: Construction, a: Semiautomaton, last: bool,
                     options: CompileOptions) -> tuple[Decision, Program, dict[str, Any]] | None:
    """Construction ``c`` built on ``a`` for a label readout (the natural action when ``c`` is the
    last resort), or None when it refuses or breaks a budget."""
    if last:
        rep = natural(a)
        why = f"{c.name} ({c.theorem}) on the states, whose scalar code carries the labels: {c.describe(rep, a)}"
        return Decision(c, rep, why), *c.build(a, rep, options.build)
    plan = c.applies(a)
    if isinstance(plan, Refusal):
        return None
    try:
        built = c.build(a, plan, options.build)
    except ShortcutError:
        return None
    return Decision(c, plan, f"{c.name} ({c.theorem}): {c.describe(plan, a)}"), *built
