"""Automata in the forms people keep them: AALpy DOT files, regular expressions, transition tables.

Each reader ends in :func:`compiler.automata.spec.from_dict`, so a loaded automaton is checked
exactly as a JSON spec is.  The parsing is done by maintained libraries, imported lazily
because they are optional extras: DOT by pydot (``pip install -e ".[dot]"``), regular
expressions by automata-lib (``.[automata]``: regex -> NFA -> DFA, minimised; a missing
transition goes to an added sink).

* **DOT** as AALpy 2.x saves DFAs and Moore machines (``save_automaton_to_file``; Mealy machines,
  AALpy's and LearnLib's, by :mod:`.mealy_dot`): one node
  per state, ``shape=doublecircle`` on accepting DFA states (outputs accept/reject), Moore
  nodes labelled ``"id|output"`` (``shape=record``; braces ``{id|output}`` are accepted too),
  one edge per (state, letter) labelled with the letter, and a start marker node
  ``__start0`` with an edge to the start state.
* **Regular expressions** in automata-lib's syntax over an explicit alphabet of one-character
  letters; outputs accept/reject.
* **Transition tables** ``table[state][letter]`` of integers (the form task generators use);
  states and letters are named by their index, ``labels`` (optional) give outputs.
"""

from __future__ import annotations

import contextlib
import io
import zipfile
import zlib
from collections import deque
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import BudgetError, SpecError
from .mealy_dot import looks_mealy, mealy_dot_to_dict
from .spec import Semiautomaton, from_dict

START_MARKER = "__start"
"""AALpy names its start marker node ``__start0``: a node whose name starts so is not a state."""

REGEX_PREFIX = "regex:"
REGEX_SINK = "sink"
"""The state a regular expression's partial minimal DFA is completed with (output reject)."""

REGEX_MAX_SUBSETS = 1 << 14
"""Most states of the subset construction (regex -> NFA -> DFA, before minimising) expanded
before a regular expression is refused: its DFA can be exponential in the pattern, and a
subset is a set of NFA states each."""

TABLE_MAX_CELLS = 1 << 21
"""Largest transition table read (states x letters), so a huge file fails fast with a message:
twice the largest catalog table (memory:1000, 1000 x 1001), the size the planner's analyses are
budgeted for (a spec is a dict of every cell, about 200 bytes each)."""


# --- DOT (AALpy) -------------------------------------------------------------------------------


def _unquote(value: Any) -> str:
    """A DOT attribute or id as text: surrounding quotes and record braces removed."""
    text = "" if value is None else str(value).strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    text = text.strip()
    if len(text) >= 2 and text[0] == "{" and text[-1] == "}":
        text = text[1:-1].strip()
    return text


def _graph(text: str, what: str) -> Any:
    """The one digraph in DOT ``text`` (pydot, an optional extra)."""
    try:
        import pydot
    except ImportError:
        raise SpecError(f"reading {what} needs pydot: pip install -e \".[dot]\"") from None
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said):  # pydot prints parse errors and returns None
            graphs = pydot.graph_from_dot_data(text)
    except Exception as e:  # pyparsing raises its own exception family on malformed input
        raise SpecError(f"{what} is not valid DOT: {str(e).splitlines()[0][:160] if str(e) else type(e).__name__}") from None
    if graphs is None:
        lines = [x for x in said.getvalue().splitlines() if x.strip()]
        raise SpecError(f"{what} is not valid DOT: {lines[-1].strip()[:160] if lines else 'pydot could not parse it'}")
    if not graphs:
        raise SpecError(f"{what} holds no DOT graph")
    if len(graphs) > 1:
        raise SpecError(f"{what} holds {len(graphs)} DOT graphs; give one automaton per file")
    g = graphs[0]
    if g.get_type() != "digraph":
        raise SpecError(f"{what} is an undirected graph; an automaton is a digraph")
    return g


def _is_marker(name: str) -> bool:
    return name.startswith(START_MARKER)


def dot_to_dict(text: str, what: str = "DOT text", name: str = "automaton") -> dict[str, Any]:
    """An AALpy DFA or Moore machine in DOT to a spec dict (see the module docstring); the start
    state first, then the states in the file's order.

    DFA (no node label holds ``|``): ``final_states`` (outputs accept/reject) from ``doublecircle``.  Moore: every
    state's label is ``id|output``.  Mealy machines (an edge label ``input/output`` or
    ``<input<br />output>``) are read by :func:`.mealy_dot.mealy_dot_to_dict`.  Nondeterminism (a
    letter on two edges from one state) and a missing or ambiguous start marker are refused with a SpecError naming the problem."""
    g = _graph(text, what)
    nodes: dict[str, dict[str, str]] = {}
    for node in g.get_nodes():
        key = _unquote(node.get_name())
        if key in ("node", "edge", "graph"):  # default-attribute statements, not nodes
            continue
        attrs = {k: _unquote(v) for k, v in node.get_attributes().items()}
        nodes.setdefault(key, {}).update(attrs)
    edges = []
    for edge in g.get_edges():
        src, dst = _unquote(edge.get_source()), _unquote(edge.get_destination())
        edges.append((src, dst, _unquote(edge.get_attributes().get("label", ""))))
    if any(looks_mealy(label) for src, _, label in edges if not _is_marker(src)):
        return mealy_dot_to_dict(what, name, list(nodes), edges, _is_marker)
    starts = sorted({dst for src, dst, _ in edges if _is_marker(src)})
    if not starts:
        raise SpecError(f"{what} has no start marker: AALpy writes a node __start0 with an edge to the start state")
    if len(starts) > 1:
        raise SpecError(f"{what} has start edges to {starts}; an automaton has one start state")
    states: list[str] = [n for n in nodes if not _is_marker(n)]
    for src, dst, _ in edges:
        for s in (src, dst):
            if not _is_marker(s) and s not in nodes:
                nodes[s] = {}
                states.append(s)
    labels = {s: nodes[s].get("label", s) for s in states}
    moore = any("|" in labels[s] for s in states)
    outputs: dict[str, str] = {}
    for s in states:
        if moore:
            if "|" not in labels[s]:
                raise SpecError(f"{what}: Moore state {s!r} has label {labels[s]!r}, not 'id|output'")
            outputs[s] = labels[s].split("|", 1)[1].strip()
        else:
            outputs[s] = "accept" if "doublecircle" in nodes[s].get("shape", "") else "reject"
    transitions: dict[str, dict[str, str]] = {s: {} for s in states}
    alphabet: list[str] = []
    for src, dst, letter in edges:
        if _is_marker(src):
            continue
        if _is_marker(dst):
            raise SpecError(f"{what}: edge from {src!r} into the start marker {dst!r}")
        if not letter:
            raise SpecError(f"{what}: edge {src!r} -> {dst!r} has no letter (label)")
        if letter in transitions[src] and transitions[src][letter] != dst:
            raise SpecError(f"{what}: state {src!r} has two edges on {letter!r} (to {transitions[src][letter]!r} "
                            f"and {dst!r}); only deterministic automata are read")
        transitions[src][letter] = dst
        if letter not in alphabet:
            alphabet.append(letter)
    if not alphabet:
        raise SpecError(f"{what} has no transitions")
    states.sort(key=lambda s: s != starts[0])  # the start first, then the file's order
    spec = {"name": name, "states": states, "alphabet": alphabet, "start": starts[0], "transitions": transitions}
    if moore:
        spec["outputs"] = outputs
    else:  # as final states, so that a sink added by --complete rejects
        spec["final_states"] = [s for s in states if outputs[s] == "accept"]
    return spec


def read_dot(path: Path, complete: bool = False, promise: str | None = None) -> Semiautomaton:
    """An AALpy DOT file (DFA, Moore or Mealy machine) as a Semiautomaton named after the file."""
    text = _read_text(path, "DOT file")
    return from_dict(dot_to_dict(text, f"DOT file {str(path)!r}", path.stem), complete=complete, promise=promise)


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"cannot read {what} {str(path)!r}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{what} {str(path)!r} is not UTF-8 text") from None


# --- regular expressions (automata-lib) -----------------------------------------------------------


def parse_alphabet(text: str) -> tuple[str, ...]:
    """``"a,b"`` -> ``("a", "b")`` (the CLI's ``--alphabet``); empty names and repeats refused."""
    letters = tuple(x.strip() for x in text.split(","))
    if not letters or any(not x for x in letters):
        raise SpecError(f"--alphabet {text!r}: give letters separated by commas, e.g. a,b")
    if len(set(letters)) != len(letters):
        raise SpecError(f"--alphabet {text!r} names a letter twice")
    return letters


def _bfs_order(start: Any, step: Mapping[Any, Mapping[str, Any]], alphabet: Sequence[str]) -> list[Any]:
    """States reachable from ``start`` in breadth-first order (letters in alphabet order)."""
    seen, order, todo = {start}, [start], deque([start])
    while todo:
        q = todo.popleft()
        for a in alphabet:
            r = step.get(q, {}).get(a)
            if r is not None and r not in seen:
                seen.add(r)
                order.append(r)
                todo.append(r)
    return order


def _bounded_dfa(DFA: Any, nfa: Any, pattern: str) -> Any:
    """The minimal DFA of ``nfa`` by automata-lib's subset construction (what ``DFA.from_nfa``
    does), refused with a :class:`BudgetError` once it has expanded :data:`REGEX_MAX_SUBSETS`
    subsets -- before the construction grows further."""
    expanded = 0

    def expand(subset: Any) -> Any:
        nonlocal expanded
        expanded += 1
        if expanded > REGEX_MAX_SUBSETS:
            raise BudgetError(f"regex {pattern!r}: its DFA has more than {REGEX_MAX_SUBSETS:,} states before "
                              f"minimising (the subset construction's budget); the pattern needs an exponential "
                              f"DFA -- shorten its bounded repetitions")
        return nfa._iterate_through_symbol_path_pairs(subset)

    start = frozenset(nfa._get_lambda_closures()[nfa.initial_state])
    try:
        return DFA._expand_dfa(lambda subset: not subset.isdisjoint(nfa.final_states), start, expand,
                               nfa.input_symbols, minify=True)
    except BudgetError:
        raise
    except Exception as e:  # automata-lib's own exceptions
        raise SpecError(f"regex {pattern!r} is not valid for automata-lib: {type(e).__name__}: {str(e)[:160]}") from None


def regex_to_dict(pattern: str, alphabet: Sequence[str] | None = None, promise: str | None = None) -> dict[str, Any]:
    """A regular expression to a spec dict through automata-lib: ``NFA.from_regex`` -> the
    subset construction and minimisation of ``DFA.from_nfa(minify=True)``, bounded
    (:func:`_bounded_dfa`); states renamed ``q0, q1, ...`` in breadth-first order from
    the start, outputs accept/reject; missing transitions go to an added :data:`REGEX_SINK`,
    or, with ``promise="legal"``, stay missing (the dead state dropped: inputs never enter it).
    ``alphabet`` defaults to the letters the pattern uses."""
    try:
        from automata.fa.dfa import DFA
        from automata.fa.nfa import NFA
    except ImportError:
        raise SpecError('regular expressions need automata-lib: pip install -e ".[automata]"') from None
    if alphabet is not None:
        bad = [a for a in alphabet if len(a) != 1]
        if bad:
            raise SpecError(f"regex letters are single characters; {bad[0]!r} is not")
    try:
        nfa = NFA.from_regex(pattern, input_symbols=None if alphabet is None else set(alphabet))
    except Exception as e:  # automata-lib raises its own exceptions (and a few builtins) on bad patterns
        raise SpecError(f"regex {pattern!r} is not valid for automata-lib: {type(e).__name__}: {str(e)[:160]}") from None
    dfa = _bounded_dfa(DFA, nfa, pattern)
    letters = list(alphabet) if alphabet is not None else sorted(dfa.input_symbols)
    order = _bfs_order(dfa.initial_state, dfa.transitions, letters)
    name = {q: f"q{i}" for i, q in enumerate(order)}
    transitions = {name[q]: {a: name[r] for a, r in dfa.transitions.get(q, {}).items()} for q in order}
    outputs = {name[q]: "accept" if q in dfa.final_states else "reject" for q in order}
    states = [name[q] for q in order]
    partial = any(len(row) < len(letters) for row in transitions.values())
    if partial and promise is not None:  # the dead state stays out: the promise says no input reaches it
        return {"name": f"regex:{pattern}", "states": states, "alphabet": letters, "start": name[dfa.initial_state],
                "transitions": transitions, "outputs": outputs, "promise": promise}
    if partial:  # complete with a sink
        states.append(REGEX_SINK)
        transitions[REGEX_SINK] = {}
        outputs[REGEX_SINK] = "reject"
        for row in transitions.values():
            for a in letters:
                row.setdefault(a, REGEX_SINK)
    return {"name": f"regex:{pattern}", "states": states, "alphabet": letters,
            "start": name[dfa.initial_state], "transitions": transitions, "outputs": outputs}


def from_regex(pattern: str, alphabet: Sequence[str] | str | None = None, promise: str | None = None) -> Semiautomaton:
    """The minimal complete DFA of ``pattern`` over ``alphabet`` (a list of one-character letters,
    or ``"a,b"``), with outputs accept/reject; a sink state is added when the minimal DFA is
    partial, unless ``promise`` keeps its missing transitions undefined (see :func:`regex_to_dict`)."""
    if isinstance(alphabet, str):
        alphabet = parse_alphabet(alphabet)
    return from_dict(regex_to_dict(pattern, alphabet, promise))


# --- transition tables ---------------------------------------------------------------------------


MISSING = -1
"""A table cell holding this has no transition: the automaton is partial (a promise, or --complete)."""

_TOO_LARGE = "a transition table holds an integer too large for a state index (beyond 64 bits)"


def _int_table(table: Any) -> np.ndarray:
    """``table`` as an int64 [n_states][n_letters] array of state indices; SpecError for anything else."""
    try:
        arr = np.asarray(table)
    except OverflowError:
        raise SpecError(_TOO_LARGE) from None
    except (ValueError, TypeError):
        raise SpecError("a transition table must be a rectangular [n_states][n_letters] array of integers") from None
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise SpecError(f"a transition table must be a non-empty [n_states][n_letters] array, got shape {arr.shape}")
    if arr.size > TABLE_MAX_CELLS:
        raise SpecError(f"a transition table of {arr.size:,} cells is over the limit of {TABLE_MAX_CELLS:,} (the size "
                        f"the planner's analyses are budgeted for)")
    if arr.dtype == bool or not (np.issubdtype(arr.dtype, np.integer) or
                                 (arr.dtype == object and all(isinstance(v, int) and not isinstance(v, bool)
                                                              for v in arr.ravel()))):
        raise SpecError(f"a transition table must hold integers (state indices), got {arr.dtype}")
    try:
        arr = arr.astype(np.int64)
    except OverflowError:
        raise SpecError(_TOO_LARGE) from None
    n = arr.shape[0]
    bad = np.argwhere((arr < MISSING) | (arr >= n))
    if len(bad):
        q, a = map(int, bad[0])
        raise SpecError(f"table[{q}][{a}] = {int(arr[q, a])} is not a state index 0..{n - 1} "
                        f"(or {MISSING}: no transition)")
    return arr


def table_to_dict(table: Any, start: Any = 0, labels: Sequence[Any] | None = None,
                  name: str = "table") -> dict[str, Any]:
    """``table[state][letter]`` (integers) to a spec dict: states and letters named by their
    decimal index, ``start`` an index, ``labels[state]`` the outputs (strings or integers); a
    cell holding :data:`MISSING` (-1) is a missing transition."""
    arr = _int_table(table)
    n, k = arr.shape
    if isinstance(start, np.ndarray) and start.ndim == 0:
        start = start.item()
    if isinstance(start, np.integer):
        start = int(start)
    if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start < n:
        raise SpecError(f"start must be a state index 0..{n - 1}, got {start!r:.40}")
    spec: dict[str, Any] = {
        "name": name, "states": [str(q) for q in range(n)], "alphabet": [str(a) for a in range(k)],
        "start": str(start),
        "transitions": {str(q): {str(a): str(int(arr[q, a])) for a in range(k) if arr[q, a] != MISSING}
                        for q in range(n)},
    }
    if labels is not None:
        labels = [x.item() if isinstance(x, np.generic) else x for x in np.asarray(labels, dtype=object).ravel()]
        if len(labels) != n:
            raise SpecError(f"labels has {len(labels)} entries for {n} states")
        spec["outputs"] = {str(q): labels[q] for q in range(n)}
    return spec


def from_table(table: Any, start: int = 0, labels: Sequence[Any] | None = None, name: str = "table", *,
               complete: bool = False, promise: str | None = None) -> Semiautomaton:
    """A Semiautomaton from a ``[n_states][n_letters]`` integer array (list of lists or numpy):
    state q on letter a goes to ``table[q][a]``; states and letters are named ``"0", "1", ...``;
    ``labels`` (one per state) become the outputs; -1 marks a missing transition (then
    ``promise="legal"`` or ``complete``, as for any partial spec)."""
    return from_dict(table_to_dict(table, start, labels, name), complete=complete, promise=promise)


def table_json_to_dict(data: Any, name: str) -> dict[str, Any] | None:
    """A parsed JSON file that holds a table -- a bare list of rows, or an object with ``table``
    (and optional ``start``, ``labels``, ``name``) -- as a spec dict; None for any other JSON."""
    if isinstance(data, list):
        return table_to_dict(data, name=name)
    if isinstance(data, Mapping) and "table" in data:
        extra = sorted(set(data) - {"table", "start", "labels", "name"})
        if extra:
            raise SpecError(f"unknown field(s) {extra} in a table file; known: ['labels', 'name', 'start', 'table']")
        return table_to_dict(data["table"], data.get("start", 0), data.get("labels"), data.get("name", name))
    return None


def read_npz(path: Path, complete: bool = False, promise: str | None = None) -> Semiautomaton:
    """A ``.npz`` file with an integer array ``table`` and optionally ``start`` and ``labels``."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if "table" not in z.files:
                raise SpecError(f"{str(path)!r} has arrays {z.files} but no 'table'")
            extra = sorted(set(z.files) - {"table", "start", "labels"})
            if extra:
                raise SpecError(f"unknown array(s) {extra} in {str(path)!r}; known: ['labels', 'start', 'table']")
            table = z["table"]
            start = z["start"] if "start" in z.files else 0
            labels = z["labels"] if "labels" in z.files else None
    except SpecError:
        raise
    except (OSError, ValueError, EOFError, OverflowError, zipfile.BadZipFile, zlib.error) as e:
        raise SpecError(f"cannot read {str(path)!r} as .npz ({type(e).__name__}): {str(e)[:160]}") from None
    return from_dict(table_to_dict(table, start, labels, path.stem), complete=complete, promise=promise)

