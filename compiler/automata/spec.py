"""Semiautomaton specifications: the data type, and loading it from JSON / dicts.

A semiautomaton is (Q, Sigma, delta, q0) with optional output labels per state
(Section 3.3.1 of the reference).  Internally states and letters are indices in
the order given; ``maps[a][q]`` is delta(q, a).  Storing one transition map per
letter (letter-major) is the natural form for the semigroup algebra and for the
scan construction, which manipulates transition maps.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from .errors import InputError, SpecError

Map = tuple[int, ...]


@dataclass(frozen=True)
class Semiautomaton:
    """A complete deterministic semiautomaton with a start state.

    Attributes:
        name: a human-readable name (catalog names keep their parameters).
        states: state names, in a fixed order (index = state id).
        alphabet: symbol names, in a fixed order (index = token id).
        maps: ``maps[a][q]`` = delta(q, a), one transition map per symbol.
        start: index of the start state q0.
        outputs: optional output label per state (same order as ``states``).
    """

    name: str
    states: tuple[str, ...]
    alphabet: tuple[str, ...]
    maps: tuple[Map, ...]
    start: int = 0
    outputs: tuple[str, ...] | None = None

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

    @property
    def symbol_index(self) -> dict[str, int]:
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
                q: {a: self.states[self.maps[j][i]] for j, a in enumerate(self.alphabet)}
                for i, q in enumerate(self.states)
            },
        }
        if self.outputs is not None:
            d["outputs"] = dict(zip(self.states, self.outputs))
        return d

    def to_json(self) -> str:
        """Canonical JSON text (sorted keys, no whitespace): stable across runs."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """sha256 of the canonical JSON: identifies the automaton in reports."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()


def _names(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise SpecError(f"'{what}' must be a list of names, got {type(value).__name__}")
    names = tuple(str(v) for v in value)
    if not names:
        raise SpecError(f"'{what}' is empty: an automaton needs at least one {what[:-1] if what.endswith('s') else what}")
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise SpecError(f"duplicate name {n!r} in '{what}'")
        seen.add(n)
    return names


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


def from_dict(spec: Mapping[str, Any], default_name: str = "automaton") -> Semiautomaton:
    """Build and validate a :class:`Semiautomaton` from a JSON-style dict.

    Accepts the native field names (``states``, ``alphabet``, ``start``,
    ``transitions``, ``outputs``) and automata-lib's (``input_symbols``,
    ``initial_state``, ``final_states`` -> outputs accept/reject).
    Symbol names must be non-empty and free of whitespace (an input line is
    whitespace-separated symbols).  Every problem raises :class:`SpecError` naming it exactly.
    """
    if not isinstance(spec, Mapping):
        raise SpecError(f"a spec must be a JSON object, got {type(spec).__name__}")
    known = {"name", "states", "alphabet", "input_symbols", "start", "initial_state",
             "transitions", "outputs", "final_states"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise SpecError(f"unknown field(s) {unknown} in spec; known fields: {sorted(known)}")
    if "states" not in spec:
        raise SpecError("spec has no 'states' field")
    states = _names(spec["states"], "states")
    if "alphabet" in spec and "input_symbols" in spec:
        raise SpecError("spec gives both 'alphabet' and 'input_symbols'; use one")
    if "alphabet" not in spec and "input_symbols" not in spec:
        raise SpecError("spec has no 'alphabet' (or 'input_symbols') field")
    alphabet = _names(spec.get("alphabet", spec.get("input_symbols")), "alphabet")
    _check_symbols(alphabet)
    state_ix = {s: i for i, s in enumerate(states)}

    if "start" in spec and "initial_state" in spec:
        raise SpecError("spec gives both 'start' and 'initial_state'; use one")
    start_name = spec.get("start", spec.get("initial_state", states[0]))
    if str(start_name) not in state_ix:
        raise SpecError(f"start state {start_name!r} is not among the states")
    start = state_ix[str(start_name)]

    trans = spec.get("transitions")
    if not isinstance(trans, Mapping):
        raise SpecError("spec needs 'transitions': an object {state: {symbol: next_state}}")
    for q in trans:
        if str(q) not in state_ix:
            raise SpecError(f"transitions given for unknown state {q!r}")
    maps = [[-1] * len(states) for _ in alphabet]
    for qi, q in enumerate(states):
        row = trans.get(q)
        if row is None:
            raise SpecError(
                f"no transitions for state {q!r}: the automaton is partial; "
                f"add an explicit sink state and send missing transitions there"
            )
        if not isinstance(row, Mapping):
            raise SpecError(f"transitions of state {q!r} must be an object {{symbol: next_state}}")
        for a in row:
            if str(a) not in alphabet:
                raise SpecError(f"transition from {q!r} on unknown symbol {a!r}")
        for ai, a in enumerate(alphabet):
            if a not in row:
                raise SpecError(
                    f"missing transition from state {q!r} on symbol {a!r}: the automaton is "
                    f"partial; add an explicit sink state and send missing transitions there"
                )
            nxt = row[a]
            if str(nxt) not in state_ix:
                raise SpecError(f"transition {q!r} --{a!r}--> unknown state {nxt!r}")
            maps[ai][qi] = state_ix[str(nxt)]

    outputs = None
    if "outputs" in spec and "final_states" in spec:
        raise SpecError("spec gives both 'outputs' and 'final_states'; use one")
    if "outputs" in spec:
        out = spec["outputs"]
        if not isinstance(out, Mapping):
            raise SpecError("'outputs' must be an object {state: label}")
        for q in out:
            if str(q) not in state_ix:
                raise SpecError(f"output label given for unknown state {q!r}")
        missing = [q for q in states if q not in out]
        if missing:
            raise SpecError(f"'outputs' has no label for state(s) {missing}")
        outputs = tuple(str(out[q]) for q in states)
    elif "final_states" in spec:
        finals = spec["final_states"]
        if not isinstance(finals, (list, tuple)):
            raise SpecError("'final_states' must be a list of states")
        for q in finals:
            if str(q) not in state_ix:
                raise SpecError(f"final state {q!r} is not among the states")
        fs = {str(q) for q in finals}
        outputs = tuple("accept" if q in fs else "reject" for q in states)

    name = str(spec.get("name", default_name))
    return Semiautomaton(name, states, alphabet, tuple(tuple(m) for m in maps), start, outputs)
