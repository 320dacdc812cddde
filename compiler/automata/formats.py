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

from . import dot_subset
from .errors import BudgetError, SpecError
from .reading import MiB, read_bytes, read_text
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

REGEX_MAX_CHARS = 2000
"""Longest regular expression read: automata-lib's parser and Thompson construction take time
quadratic in the pattern (3,000 alternatives ``ab|ab|...``, 9,000 characters: 3 s and 0.5 GB;
2,000 characters: about 0.3 s)."""
REGEX_MAX_NFA = REGEX_MAX_SUBSETS
"""Most NFA states a pattern may expand to once its bounded repetitions ``{m,n}`` are written
out (:func:`regex_size`): automata-lib copies the repeated part ``n`` times before the subset
construction, so ``(a|b){999999999}`` would take gigabytes before its budget applies."""
QUANTIFIERS = "*+?"

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
    """The one digraph in DOT ``text``: read directly when it lies in the subset AALpy and LearnLib
    write (:mod:`.dot_subset`), else by pydot (an optional extra) up to :data:`PYDOT_MAX_CHARS`."""
    fast = dot_subset.parse(text)
    if fast is not None:
        return fast
    if len(text) > PYDOT_MAX_CHARS:
        raise SpecError(f"{what} ({len(text):,} characters) is outside the DOT subset read directly (one digraph "
                        f"of node and edge statements, no comments, subgraphs or ports), and pydot reads only "
                        f"files of at most {PYDOT_MAX_CHARS:,} characters (about 5 kB a second)")
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


DOT_MAX_BYTES = MiB
"""Largest DOT file read: the subset reader (:mod:`.dot_subset`) takes a MiB (about 20,000 states)
in a few seconds."""

PYDOT_MAX_CHARS = 64 * 1024
"""Largest DOT text given to pydot (files outside the subset :mod:`.dot_subset` reads): pydot parses
about 5 kB a second on a loaded 2-core machine (a 150 kB file took 30 s), so 64 KiB is about 13 s,
inside the 30 s a command may take on a hostile file with room for the rest of the command."""


def read_dot(path: Path, complete: bool = False, promise: str | None = None) -> Semiautomaton:
    """An AALpy DOT file (DFA, Moore or Mealy machine) as a Semiautomaton named after the file (a
    regular file of at most :data:`DOT_MAX_BYTES`)."""
    text = read_text(path, DOT_MAX_BYTES, "DOT file", SpecError)
    return from_dict(dot_to_dict(text, f"DOT file {str(path)!r}", path.stem), complete=complete, promise=promise)


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


def _repetition(pattern: str, i: int) -> tuple[int, int] | None:
    """The bounded repetition ``{m}``, ``{m,}`` or ``{m,n}`` at ``pattern[i]``: (the most copies
    it writes out, the index after it); None when ``{`` starts none."""
    close = pattern.find("}", i)
    body = pattern[i + 1:close] if close > i else ""
    parts = body.split(",")
    if not body or len(parts) > 2 or not all(p.strip().isdigit() or (j == 1 and not p.strip())
                                              for j, p in enumerate(parts)):
        return None
    counts = [int(p) for p in parts if p.strip()]  # digits only, at most REGEX_MAX_CHARS of them
    return max(counts) + (len(parts) == 2 and not parts[1].strip()), close + 1


def regex_size(pattern: str) -> int:
    """An upper estimate of the NFA states of ``pattern`` with its bounded repetitions written
    out: each letter one state, each quantifier one more, a group the sum of its alternatives, a
    repetition ``{m,n}`` its operand ``n`` times (``{m,}``: ``m + 1`` times).  SpecError for a
    quantifier on a quantifier (``a**``: it changes nothing, and automata-lib's time grows with
    the cube of such runs)."""
    stack: list[list[int]] = [[0, 0, 0]]  # per open group: (sum of closed alternatives, current, last operand)
    i, quantified = 0, False
    while i < len(pattern):
        c, top = pattern[i], stack[-1]
        rep = _repetition(pattern, i) if c == "{" else None
        if (c in QUANTIFIERS or rep is not None) and quantified:
            raise SpecError(f"regex {pattern[:60]!r}: a quantifier on a quantifier at character {i + 1} (write one)")
        quantified = c in QUANTIFIERS or rep is not None
        if rep is not None:
            copies, i = rep
            top[1] += top[2] * (copies - 1)
            top[2] *= copies
            continue
        if c == "(":
            stack.append([0, 0, 0])
        elif c == ")" and len(stack) > 1:
            group = stack.pop()
            size = group[0] + group[1] + 1
            stack[-1][1] += size
            stack[-1][2] = size
        elif c == "|":
            top[0], top[1], top[2] = top[0] + top[1], 0, 0
        elif c in QUANTIFIERS:
            top[1] += 1
        else:
            top[1] += 1
            top[2] = 1
        i += 1
    return sum(g[0] + g[1] for g in stack)


def check_regex(pattern: str) -> None:
    """Refuse (:class:`BudgetError`, before automata-lib sees it) a pattern over
    :data:`REGEX_MAX_CHARS` characters or whose repetitions expand past :data:`REGEX_MAX_NFA`
    NFA states (:func:`regex_size`)."""
    if len(pattern) > REGEX_MAX_CHARS:
        raise BudgetError(f"regex of {len(pattern):,} characters is over the limit of {REGEX_MAX_CHARS:,} (automata-lib's "
                          f"parsing time grows with its square)")
    size = regex_size(pattern)
    if size > REGEX_MAX_NFA:
        raise BudgetError(f"regex {pattern[:60]!r} expands to about {size:,} NFA states once its repetitions are "
                          f"written out, over the limit of {REGEX_MAX_NFA:,}; shorten its bounded repetitions")


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
    check_regex(pattern)
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
    if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:  # astype would wrap it to -1
        raise SpecError(_TOO_LARGE)
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


NPZ_MAX_BYTES = 64 * MiB
"""Largest ``.npz`` file read (as a JSON spec file: :data:`compiler.automata.load.SPEC_MAX_BYTES`)."""
NPZ_MAX_ARRAY_BYTES = TABLE_MAX_CELLS * 8
"""Most bytes one array of a ``.npz`` file may expand to (a table of :data:`TABLE_MAX_CELLS`
64-bit cells), checked on the zip entry's size and the array's header before it is
decompressed: a 2 MB file can hold a zero table of gigabytes."""
_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _check_npz(z: zipfile.ZipFile, where: str) -> None:
    """Every array of the archive expands to at most :data:`NPZ_MAX_ARRAY_BYTES`: by the zip
    entry's size (which bounds what zipfile decompresses) and by the shape its header declares
    (which numpy allocates before reading)."""
    for info in z.infolist():
        if info.file_size > NPZ_MAX_ARRAY_BYTES + MiB:
            raise SpecError(f"{where}: array {info.filename!r} expands to {info.file_size:,} bytes, over the limit of "
                            f"{NPZ_MAX_ARRAY_BYTES:,} (a table of {TABLE_MAX_CELLS:,} 64-bit cells)")
        with z.open(info) as f:
            read_header = _NPY_HEADERS.get(np.lib.format.read_magic(f))
            if read_header is None:
                raise SpecError(f"{where}: array {info.filename!r} has an .npy format version numpy 1.0/2.0 do not write")
            shape, _, dtype = read_header(f)
        if np.prod(shape, dtype=object) * dtype.itemsize > NPZ_MAX_ARRAY_BYTES:
            raise SpecError(f"{where}: array {info.filename!r} declares shape {shape} of {dtype}, over the limit of "
                            f"{NPZ_MAX_ARRAY_BYTES:,} bytes (a table of {TABLE_MAX_CELLS:,} 64-bit cells)")


def read_npz(path: Path, complete: bool = False, promise: str | None = None) -> Semiautomaton:
    """A ``.npz`` file with an integer array ``table`` and optionally ``start`` and ``labels``
    (a regular file of at most :data:`NPZ_MAX_BYTES`, each array checked by :func:`_check_npz`
    before it is decompressed)."""
    where = repr(str(path))
    data = io.BytesIO(read_bytes(path, NPZ_MAX_BYTES, ".npz file", SpecError))
    try:
        with zipfile.ZipFile(data) as archive:
            _check_npz(archive, where)
        data.seek(0)
        with np.load(data, allow_pickle=False) as z:
            if "table" not in z.files:
                raise SpecError(f"{where} has arrays {z.files} but no 'table'")
            extra = sorted(set(z.files) - {"table", "start", "labels"})
            if extra:
                raise SpecError(f"unknown array(s) {extra} in {where}; known: ['labels', 'start', 'table']")
            table = z["table"]
            start = z["start"] if "start" in z.files else 0
            labels = z["labels"] if "labels" in z.files else None
    except SpecError:
        raise
    except (OSError, ValueError, EOFError, OverflowError, zipfile.BadZipFile, zlib.error, NotImplementedError) as e:
        raise SpecError(f"cannot read {where} as .npz ({type(e).__name__}): {str(e)[:160]}") from None
    return from_dict(table_to_dict(table, start, labels, path.stem), complete=complete, promise=promise)
