"""Semiautomaton specifications: the data type, and loading it from JSON / dicts.

A semiautomaton is (Q, Sigma, delta, q0) with optional output labels per state
(Section 3.3.1 of the reference).  Internally states and letters are indices in
the order given; ``maps[a][q]`` is delta(q, a).  Storing one transition map per
letter (letter-major) is the natural form for the semigroup algebra and for the
scan construction, which manipulates transition maps.
"""

from __future__ import annotations

import functools
import hashlib
import json
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .errors import InputError, SpecError

Map = tuple[int, ...]


@dataclass(frozen=True)
class Semiautomaton:
    """A deterministic semiautomaton with a start state, complete or partial under a promise.

    Attributes:
        name: a human-readable name (catalog names keep their parameters).
        states: state names, in a fixed order (index = state id).
        alphabet: symbol names, in a fixed order (index = token id).
        maps: ``maps[a][q]`` = delta(q, a), one transition map per symbol.
        start: index of the start state q0.
        outputs: optional output label per state (same order as ``states``).
        undefined: the ``(symbol, state)`` pairs whose transition the spec leaves out, sorted;
            non-empty only under the promise of legal inputs (:data:`LEGAL`): no input takes
            them.  ``maps`` holds a self-loop there, so an analysis or construction that knows
            nothing of promises sees a completion on the same states -- one that agrees with the
            automaton on every legal word (docs/promises.md).
        transition_outputs: a Mealy machine's outputs, ``transition_outputs[a][q]`` = lambda(q, a),
            the output of the transition from q on a ("" where it is undefined); None for a
            semiautomaton or a Moore machine (``outputs`` and this are never both set).  Its label
            readout is the output of the transition each letter takes (:mod:`.mealy`).
    """

    name: str
    states: tuple[str, ...]
    alphabet: tuple[str, ...]
    maps: tuple[Map, ...]
    start: int = 0
    outputs: tuple[str, ...] | None = None
    undefined: tuple[tuple[int, int], ...] = ()
    transition_outputs: tuple[tuple[str, ...], ...] | None = None

    @property
    def partial(self) -> bool:
        """Whether some transition is undefined (the automaton holds under the promise)."""
        return bool(self.undefined)

    @functools.cached_property
    def defined(self) -> tuple[tuple[bool, ...], ...]:
        """``defined[a][q]``: whether delta(q, a) is given (every entry, for a complete automaton)."""
        missing = set(self.undefined)
        return tuple(tuple((a, q) not in missing for q in range(self.n_states)) for a in range(self.n_symbols))

    def first_illegal(self, letters: Iterable[int], start: int | None = None) -> int | None:
        """The 0-based position of the first letter whose transition is undefined (the input leaves
        the domain there), or None when the whole word is legal."""
        if not self.undefined:
            return None
        q = self.start if start is None else start
        for t, a in enumerate(letters):
            if not self.defined[a][q]:
                return t
            q = self.maps[a][q]
        return None

    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def n_symbols(self) -> int:
        return len(self.alphabet)

    def delta(self, q: int, a: int) -> int:
        """delta(q, a) on indices."""
        return self.maps[a][q]

    def symbol_ids(self, word: Sequence[str]) -> list[int]:
        """Token ids of a word; raises InputError naming an unknown symbol."""
        index = self.symbol_index
        out = []
        for pos, sym in enumerate(word):
            if sym not in index:
                raise InputError(
                    f"unknown symbol {sym!r} at position {pos + 1}; "
                    f"the alphabet of {self.name} is {list(self.alphabet)}"
                )
            out.append(index[sym])
        return out

    @functools.cached_property
    def symbol_index(self) -> dict[str, int]:
        """Letter name -> token id (built once per automaton: ``run`` looks up every input line)."""
        return {s: i for i, s in enumerate(self.alphabet)}

    @property
    def state_index(self) -> dict[str, int]:
        return {s: i for i, s in enumerate(self.states)}

    def run(self, letters: Iterable[int], start: int | None = None) -> list[int]:
        """State indices after each letter (q_1..q_T), starting from ``start``."""
        q = self.start if start is None else start
        out = []
        for a in letters:
            q = self.maps[a][q]
            out.append(q)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The canonical JSON-able spec (the format :func:`from_dict` reads)."""
        d: dict[str, Any] = {
            "name": self.name,
            "states": list(self.states),
            "alphabet": list(self.alphabet),
            "start": self.states[self.start],
            "transitions": {
                q: {a: self.states[self.maps[j][i]] for j, a in enumerate(self.alphabet) if self.defined[j][i]}
                for i, q in enumerate(self.states)
            },
        }
        if self.undefined:
            d["promise"] = LEGAL
        if self.outputs is not None:
            d["outputs"] = dict(zip(self.states, self.outputs))
        if self.transition_outputs is not None:
            d[TRANSITION_OUTPUTS] = {q: {a: self.transition_outputs[j][i] for j, a in enumerate(self.alphabet)
                                         if self.defined[j][i]} for i, q in enumerate(self.states)}
        return d

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, no whitespace): stable across runs."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """sha256 of the canonical JSON: identifies the automaton in reports."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()


def _name(value: Any, what: str) -> str:
    """A state or symbol name: a string, or an integer written in decimal (automata-lib and
    Python dicts often use ``0, 1, ...``); anything else (``null``, floats, lists) is refused
    rather than stringified."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise SpecError(f"{what} must be a string (or an integer), got {type(value).__name__} {value!r:.60}")


def _order(values: Any) -> list[Any]:
    """A list's own order; a set (automata-lib) sorted: integers numerically, then strings."""
    if isinstance(values, (set, frozenset)):
        return sorted(values, key=lambda v: (0, v, "") if isinstance(v, int) and not isinstance(v, bool)
                      else (1, 0, str(v)))
    return list(values)


def _names(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise SpecError(f"'{what}' must be a list of names, got {type(value).__name__}")
    item = what[:-1] if what.endswith("s") else what
    names = tuple(_name(v, f"every name in '{what}'") for v in _order(value))
    if not names:
        raise SpecError(f"'{what}' is empty: an automaton needs at least one {item}")
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise SpecError(f"duplicate name {n!r} in '{what}'")
        seen.add(n)
    return names


def _keyed(obj: Mapping[Any, Any], what: str) -> dict[str, Any]:
    """A mapping with its keys made names (see :func:`_name`); two keys naming the same
    name (``0`` and ``"0"``) are refused."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = _name(k, f"every key of {what}")
        if key in out:
            raise SpecError(f"{what} gives {key!r} twice")
        out[key] = v
    return out


BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Characters that reorder the text around them (bidirectional marks, embeddings, overrides and
isolates): a name holding one can make output read as something else."""


def unsafe_char(text: str) -> str | None:
    """The first character of ``text`` that has no place in a name: a control character (C0, DEL,
    C1), a line or paragraph separator, or a bidirectional control (:data:`BIDI_CONTROLS`); None
    when there is none."""
    for c in text:
        if c in BIDI_CONTROLS or unicodedata.category(c) in ("Cc", "Zl", "Zp"):
            return c
    return None


def check_name(text: str, what: str) -> str:
    """``text`` itself when it is safe to print (:func:`unsafe_char`), else a SpecError naming
    ``what`` and the character: names are data, and a newline or a right-to-left override would
    break or spoof every output that shows them."""
    c = unsafe_char(text)
    if c is not None:
        raise SpecError(f"{what} {text!r} contains the character U+{ord(c):04X} "
                        f"({unicodedata.name(c, 'a control character').lower()}); names must not hold control or "
                        f"bidirectional-override characters")
    return text


def _check_symbols(alphabet: Sequence[str]) -> None:
    """Reject symbol names that no input line could spell: empty, or containing whitespace
    (``shortcut run`` reads a sequence as symbols separated by whitespace or ``--sep``)."""
    for sym in alphabet:
        if not sym:
            raise SpecError("'alphabet' has an empty symbol name: every symbol needs at least one character")
        if any(c.isspace() for c in sym):
            raise SpecError(
                f"symbol {sym!r} in 'alphabet' contains whitespace; input sequences are split on "
                f"whitespace, so rename it (e.g. {'_'.join(sym.split()) or '_'!r})"
            )


SINK = "sink"
"""Name of the state ``complete=True`` adds (``sink_1``, ... when a state already has it)."""

LEGAL = "legal"
"""The one promise: every input stays inside the domain (takes no undefined transition)."""
PROMISES = (LEGAL,)

TRANSITION_OUTPUTS = "transition_outputs"
"""The JSON key of a Mealy machine's outputs: ``{state: {symbol: output}}``, one per transition."""

KNOWN_FIELDS = frozenset({"name", "states", "alphabet", "input_symbols", "start", "initial_state",
                          "transitions", "outputs", "final_states", "allow_partial", "promise", TRANSITION_OUTPUTS})


def check_promise(promise: str | None, complete: bool = False) -> str | None:
    """``promise`` itself when it is None or one of :data:`PROMISES`, else a SpecError; both a
    promise and ``complete`` is an error (a sink makes every input legal: nothing left to promise)."""
    if promise is not None and promise not in PROMISES:
        raise SpecError(f"unknown promise {promise!r}; the one promise is {LEGAL!r} (inputs never take a missing "
                        f"transition)")
    if promise is not None and complete:
        raise SpecError("give either a promise (missing transitions never taken) or --complete (a sink takes them), "
                        "not both")
    return promise


def from_dict(spec: Mapping[str, Any], default_name: str = "automaton", *, complete: bool = False,
              promise: str | None = None) -> Semiautomaton:
    """Build and validate a :class:`Semiautomaton` from a JSON-style dict.

    Accepts the native field names (``states``, ``alphabet``, ``start``,
    ``transitions``, ``outputs``) and automata-lib's DFA ``input_parameters``
    (``input_symbols``, ``initial_state``, ``final_states`` -> outputs accept/reject,
    ``allow_partial``; sets for lists).  Names are strings, or integers (made decimal
    strings consistently in states, symbols, transitions and outputs); anything else is
    refused.  Symbol names must be non-empty and free of whitespace (an input line is
    whitespace-separated symbols); no name (states, symbols, output labels, the automaton's)
    may hold a control or bidirectional-override character (:func:`check_name`).  A partial
    automaton is refused unless ``promise="legal"`` (or the spec's own ``"promise": "legal"``):
    every missing transition is then a promise that no input takes it (``undefined``, a
    self-loop in ``maps``), or ``complete``, which sends every missing transition to an added
    sink state (:data:`SINK`, output ``reject`` with ``final_states``, its own name with
    ``outputs``).  Every problem raises :class:`SpecError` naming it exactly.
    """
    if not isinstance(spec, Mapping):
        raise SpecError(f"a spec must be a JSON object, got {type(spec).__name__}")
    unknown = sorted(map(str, set(spec) - KNOWN_FIELDS))
    if unknown:
        raise SpecError(f"unknown field(s) {unknown} in spec; known fields: {sorted(KNOWN_FIELDS)}")
    for a, b in (("alphabet", "input_symbols"), ("start", "initial_state"), ("outputs", "final_states"),
                 ("outputs", TRANSITION_OUTPUTS), ("final_states", TRANSITION_OUTPUTS)):
        if a in spec and b in spec:
            raise SpecError(f"spec gives both '{a}' and '{b}'; use one")
    if "states" not in spec:
        raise SpecError("spec has no 'states' field")
    states = _names(spec["states"], "states")
    if "alphabet" not in spec and "input_symbols" not in spec:
        raise SpecError("spec has no 'alphabet' (or 'input_symbols') field")
    alphabet = _names(spec.get("alphabet", spec.get("input_symbols")), "alphabet")
    _check_symbols(alphabet)
    if not isinstance(spec.get("allow_partial", False), bool):
        raise SpecError("'allow_partial' must be true or false")
    start_name = _name(spec.get("start", spec.get("initial_state", states[0])), "the start state")
    if start_name not in states:
        raise SpecError(f"start state {start_name!r} is not among the states")
    own = spec.get("promise")
    if own is not None and not isinstance(own, str):
        raise SpecError(f"'promise' must be a string, got {type(own).__name__}")
    promise = check_promise(promise or own, complete)
    rows = _transitions(spec.get("transitions"), states, alphabet)
    missing = [(q, a) for q in states for a in alphabet if a not in rows.get(q, {})]
    if missing and not complete and promise is None:
        q, a = missing[0]
        what = (f"no transitions for state {q!r}" if q not in rows else
                f"missing transition from state {q!r} on symbol {a!r}")
        raise SpecError(f"{what} ({len(missing)} missing in all): the automaton is partial; pass --promise legal "
                        f"(promise='legal') if inputs never take a missing transition, or add an explicit sink "
                        f"state and send missing transitions there, or pass --complete (complete=True) to add one")
    sink = sink_name(states) if missing and complete else None
    all_states = states + ((sink,) if sink else ())
    index = {s: i for i, s in enumerate(all_states)}
    fill = lambda q: sink if sink else q  # the promise: a self-loop stands for "never taken"
    maps = tuple(tuple(index[rows.get(q, {}).get(a, fill(q))] for q in all_states) for a in alphabet)
    letter = {a: j for j, a in enumerate(alphabet)}
    undefined = () if sink else tuple(sorted((letter[a], index[q]) for q, a in missing))
    outputs = _outputs(spec, states, sink)
    mealy = _transition_outputs(spec.get(TRANSITION_OUTPUTS), rows, all_states, alphabet, sink)
    name = spec.get("name", default_name)
    if not isinstance(name, str):
        raise SpecError(f"'name' must be a string, got {type(name).__name__}")
    for what, names in (("state", all_states), ("symbol", alphabet), ("output label", outputs or ()),
                        ("transition output", [x for row in mealy or () for x in row]),
                        ("the automaton's name", (name,))):
        for text in names:
            check_name(text, what)
    return Semiautomaton(name, all_states, alphabet, maps, index[start_name], outputs, undefined, mealy)


def _transitions(trans: Any, states: tuple[str, ...], alphabet: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """``{state: {symbol: next_state}}`` with every name checked (missing entries allowed here);
    membership is tested in sets, so a wide alphabet costs linear time, not quadratic."""
    if not isinstance(trans, Mapping):
        raise SpecError("spec needs 'transitions': an object {state: {symbol: next_state}}")
    known_states, known_letters = frozenset(states), frozenset(alphabet)
    rows: dict[str, dict[str, str]] = {}
    for q, row in _keyed(trans, "'transitions'").items():
        if q not in known_states:
            raise SpecError(f"transitions given for unknown state {q!r}")
        if not isinstance(row, Mapping):
            raise SpecError(f"transitions of state {q!r} must be an object {{symbol: next_state}}")
        rows[q] = {}
        for a, nxt in _keyed(row, f"the transitions of state {q!r}").items():
            if a not in known_letters:
                raise SpecError(f"transition from {q!r} on unknown symbol {a!r}")
            target = _name(nxt, f"the target of {q!r} --{a!r}-->")
            if target not in known_states:
                raise SpecError(f"transition {q!r} --{a!r}--> unknown state {target!r}")
            rows[q][a] = target
    return rows


def _transition_outputs(given: Any, rows: dict[str, dict[str, str]], states: tuple[str, ...],
                        alphabet: tuple[str, ...], sink: str | None) -> tuple[tuple[str, ...], ...] | None:
    """A Mealy machine's ``transition_outputs`` ``{state: {symbol: output}}`` as ``[letter][state]``
    (None when not given): exactly one output per given transition; a transition the spec leaves
    out has none ("" here), or, sent to an added sink, outputs the sink's name (so do the sink's own)."""
    if given is None:
        return None
    if not isinstance(given, Mapping):
        raise SpecError(f"'{TRANSITION_OUTPUTS}' must be an object {{state: {{symbol: output}}}}")
    outs: dict[str, dict[str, str]] = {}
    for q, row in _keyed(given, f"'{TRANSITION_OUTPUTS}'").items():
        if q not in rows and q in states:
            raise SpecError(f"'{TRANSITION_OUTPUTS}' gives outputs for state {q!r}, which has no transitions")
        if q not in rows:
            raise SpecError(f"'{TRANSITION_OUTPUTS}' gives outputs for unknown state {q!r}")
        if not isinstance(row, Mapping):
            raise SpecError(f"'{TRANSITION_OUTPUTS}' of state {q!r} must be an object {{symbol: output}}")
        outs[q] = {}
        for a, out in _keyed(row, f"the transition outputs of state {q!r}").items():
            if a not in rows[q]:
                raise SpecError(f"'{TRANSITION_OUTPUTS}' gives an output for {q!r} --{a!r}-->, a transition the "
                                f"spec does not give")
            outs[q][a] = _name(out, f"the output of {q!r} --{a!r}-->")
    for q, row in rows.items():
        for a in row:
            if a not in outs.get(q, {}):
                raise SpecError(f"transition {q!r} --{a!r}--> has no output in '{TRANSITION_OUTPUTS}' (a Mealy machine "
                                f"gives one for every transition)")
    hole = sink or ""
    return tuple(tuple(outs.get(q, {}).get(a, hole) for q in states) for a in alphabet)


def sink_name(states: tuple[str, ...]) -> str:
    name, i = SINK, 0
    while name in states:
        i += 1
        name = f"{SINK}_{i}"
    return name


def _outputs(spec: Mapping[str, Any], states: tuple[str, ...], sink: str | None) -> tuple[str, ...] | None:
    """Output labels from ``outputs`` or ``final_states`` (the added sink: its name, or ``reject``)."""
    if "outputs" in spec:
        out = spec["outputs"]
        if not isinstance(out, Mapping):
            raise SpecError("'outputs' must be an object {state: label}")
        labels = _keyed(out, "'outputs'")
        for q in labels:
            if q not in states:
                raise SpecError(f"output label given for unknown state {q!r}")
        missing = [q for q in states if q not in labels]
        if missing:
            raise SpecError(f"'outputs' has no label for state(s) {missing}")
        named = tuple(_name(labels[q], f"the output label of state {q!r}") for q in states)
        return named + ((sink,) if sink else ())
    if "final_states" in spec:
        finals = spec["final_states"]
        if not isinstance(finals, (list, tuple, set, frozenset)):
            raise SpecError("'final_states' must be a list of states")
        fs = {_name(q, "every name in 'final_states'") for q in finals}
        for q in sorted(fs - set(states)):
            raise SpecError(f"final state {q!r} is not among the states")
        return tuple("accept" if q in fs else "reject" for q in states) + (("reject",) if sink else ())
    return None
