"""Mealy machines in DOT, as model learners publish them, read into spec dicts.

Three edge-label forms (one file may mix them):

* quoted ``input/output`` (AALpy's ``save_automaton_to_file``, the Automata Wiki's models):
  ``s0 -> s1 [label="SYN(V,V,0)/ACK+SYN(FRESH,NEXT,0)"]``, split at the first ``/`` as AALpy's
  own reader does, spaces around either side dropped (``"a / x"``);
* HTML ``<input<br />output>`` (LearnLib and AutomataLib), entities unescaped;
* merged inputs ``a | b`` on one edge (inputs sharing a target and an output), in either form.

The start state is the target of the edge from the start marker (a node named ``__start0``,
as both tools write it), else the first state of the file.  States are the file's nodes in
order (the start moved first), then nodes only edges name.  Every problem -- an edge without an
input/output separator among Mealy edges, an empty input or output, two outputs or two targets
for one (state, input), a marker with no edge or two of them -- is a SpecError naming the edge.
"""

from __future__ import annotations

import html
import re
from typing import Any, Callable

from .errors import SpecError

_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def _html(label: str) -> bool:
    return len(label) >= 2 and label[0] == "<" and label[-1] == ">"


def looks_mealy(label: str) -> bool:
    """Whether an edge label is a Mealy transition's (input/output, or an HTML label with a line break)."""
    return "/" in label or (_html(label) and _BR.search(label) is not None)


def _edge(src: str, dst: str, label: str) -> str:
    return f"edge {src} -> {dst} [label={label!r}]" if label else f"edge {src} -> {dst} (no label)"


def split_label(label: str, where: str) -> tuple[list[str], str]:
    """(inputs, output) of a Mealy edge label in one of the module docstring's forms."""
    if _html(label):
        parts = _BR.split(label[1:-1], maxsplit=1)
        if len(parts) != 2:
            raise SpecError(f"{where}: an HTML label of a Mealy machine is <input<br />output>")
        inputs, output = (html.unescape(p) for p in parts)
    elif "/" in label:
        inputs, output = label.split("/", 1)
    else:
        raise SpecError(f"{where}: no '/' between input and output, but other edges are a Mealy machine's "
                        f"(input/output)")
    letters = [x.strip() for x in inputs.split("|")]
    if any(not x for x in letters):
        raise SpecError(f"{where}: an empty input")
    if not output.strip():
        raise SpecError(f"{where}: an empty output")
    return letters, output.strip()


def mealy_dot_to_dict(what: str, name: str, nodes: list[str], edges: list[tuple[str, str, str]],
                      is_marker: Callable[[str], bool]) -> dict[str, Any]:
    """A Mealy machine's spec dict (``transition_outputs``) from a DOT graph's nodes (ids, in order)
    and edges ``(source, target, label)`` with quotes removed (:mod:`.formats` parses the file)."""
    markers = [n for n in nodes if is_marker(n)]
    starts = [(src, dst) for src, dst, _ in edges if is_marker(src)]
    states = list(dict.fromkeys([n for n in nodes if not is_marker(n)] +
                                [s for src, dst, _ in edges for s in (src, dst) if not is_marker(s)]))
    if len({dst for _, dst in starts}) > 1:
        raise SpecError(f"{what}: start edges {starts[0][0]} -> {starts[0][1]} and {starts[1][0]} -> {starts[1][1]}; "
                        f"a Mealy machine has one start state")
    if markers and not starts:
        raise SpecError(f"{what}: the start marker {markers[0]} has no edge to a start state")
    if not states:
        raise SpecError(f"{what} has no states")
    start = starts[0][1] if starts else states[0]
    transitions: dict[str, dict[str, str]] = {}
    outputs: dict[str, dict[str, str]] = {}
    said: dict[tuple[str, str], str] = {}  # (state, input) -> the edge that gave it
    alphabet: list[str] = []
    for src, dst, label in edges:
        if is_marker(src):
            continue
        where = f"{what}: {_edge(src, dst, label)}"
        if is_marker(dst):
            raise SpecError(f"{where} goes into the start marker")
        letters, output = split_label(label, where)
        for a in letters:
            row, out = transitions.setdefault(src, {}), outputs.setdefault(src, {})
            if a in row and (row[a], out[a]) != (dst, output):
                clash = "two outputs" if row[a] == dst else "two targets"
                raise SpecError(f"{where} gives {clash} for state {src!r} on input {a!r} (the other: {said[src, a]})")
            row[a], out[a] = dst, output
            said[src, a] = _edge(src, dst, label)
            if a not in alphabet:
                alphabet.append(a)
    if not alphabet:
        raise SpecError(f"{what} has no transitions")
    states.sort(key=lambda s: s != start)
    return {"name": name, "states": states, "alphabet": alphabet, "start": start, "transitions": transitions,
            "transition_outputs": outputs}
