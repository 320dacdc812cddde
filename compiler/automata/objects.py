"""Automata held as other libraries' objects, read into spec dicts (then :func:`.spec.from_dict`).

* automata-lib ``automata.fa.dfa.DFA``: its ``input_parameters`` (automata-lib field names);
* AALpy ``Dfa`` (accepting states -> ``final_states``), ``MooreMachine`` (each state's
  ``output`` -> ``outputs``) and ``MealyMachine`` (each state's ``output_fun`` ->
  ``transition_outputs``), states in the automaton's order, the initial state as start;
* pyformlang ``DeterministicFiniteAutomaton``: states and symbols by their ``value``, the
  final states as ``final_states``.

An object is recognised by the module its class comes from, so none of these libraries is
imported here (automata-lib only to tell a DFA from its other classes).  Names are validated
by :func:`.spec.from_dict` like any spec's; a non-deterministic object is refused with the
conversion to make.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .errors import SpecError

LIBRARIES = ("automata-lib DFA", "AALpy Dfa, MooreMachine or MealyMachine", "pyformlang DeterministicFiniteAutomaton")
"""The objects :func:`object_to_dict` reads, for error messages."""


def _library(source: Any) -> str:
    """The top-level package of ``source``'s class."""
    return type(source).__module__.split(".", 1)[0]


def automata_lib_to_dict(source: Any) -> dict[str, Any]:
    """An automata-lib ``DFA``'s ``input_parameters``."""
    from automata.fa.dfa import DFA  # the object came from automata-lib, so it is importable

    if not isinstance(source, DFA):
        raise SpecError(f"automata-lib {type(source).__name__} objects are not specs; convert to a DFA first "
                        f"(e.g. DFA.from_nfa(nfa))")
    return dict(source.input_parameters)


def aalpy_to_dict(source: Any) -> dict[str, Any]:
    """An AALpy ``Dfa``, ``MooreMachine`` or ``MealyMachine`` as a spec dict (name ``dfa``, ``moore`` or ``mealy``)."""
    kind = type(source).__name__
    if kind not in ("Dfa", "MooreMachine", "MealyMachine"):
        raise SpecError(f"AALpy {kind} objects are not specs; give a Dfa, a MooreMachine or a MealyMachine")
    states = list(source.states)
    spec: dict[str, Any] = {
        "name": {"Dfa": "dfa", "MooreMachine": "moore"}.get(kind, "mealy"),
        "states": [s.state_id for s in states],
        "alphabet": list(dict.fromkeys(a for s in states for a in s.transitions)),
        "start": source.initial_state.state_id,
        "transitions": {s.state_id: {a: t.state_id for a, t in s.transitions.items()} for s in states},
    }
    if kind == "Dfa":
        spec["final_states"] = [s.state_id for s in states if s.is_accepting]
    elif kind == "MealyMachine":
        spec["transition_outputs"] = {s.state_id: dict(s.output_fun) for s in states}
    else:
        spec["outputs"] = {s.state_id: s.output for s in states}
    return spec


def pyformlang_to_dict(source: Any) -> dict[str, Any]:
    """A pyformlang ``DeterministicFiniteAutomaton`` as a spec dict (name ``dfa``)."""
    if type(source).__name__ != "DeterministicFiniteAutomaton":
        raise SpecError(f"pyformlang {type(source).__name__} objects are not specs; convert with "
                        f".to_deterministic() first")
    if source.start_state is None:
        raise SpecError("the pyformlang DFA has no start state")
    table = source.to_dict()
    return {
        "name": "dfa",
        "states": {q.value for q in source.states},
        "alphabet": {a.value for a in source.symbols},
        "start": source.start_state.value,
        "transitions": {q.value: {a.value: r.value for a, r in row.items()} for q, row in table.items()},
        "final_states": {q.value for q in source.final_states},
    }


READERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "automata": automata_lib_to_dict,
    "aalpy": aalpy_to_dict,
    "pyformlang": pyformlang_to_dict,
}
"""The reader for each library's top-level package."""


def object_to_dict(source: Any) -> Mapping[str, Any] | None:
    """``source`` as a spec dict when it is an object of a library of :data:`READERS`, else None."""
    reader = READERS.get(_library(source))
    return None if reader is None else reader(source)
