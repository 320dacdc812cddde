"""OpenFst / pynini AT&T text files (``fstprint``'s output) read as deterministic acceptors.

The format, one item per line, fields separated by whitespace:

* ``src dst label`` (an acceptor arc), ``src dst in out`` (a transducer arc, as ``fstprint``
  writes by default) or ``src dst in out weight``;
* ``state`` or ``state weight``: ``state`` is final;
* the source of the first line is the start state.  States are non-negative integers.

Read as a language: final states get the output ``accept``, the others ``reject`` (so a label
readout gives acceptance after every prefix); a missing transition rejects, so a partial file is
completed with a ``reject`` sink (:data:`compiler.automata.spec.SINK`) unless the promise of
legal inputs keeps it partial.  Refused, each with one line naming the line of the file:

* a weight other than 0 or 1.  Weights are read in the tropical semiring, OpenFst's default,
  where 0 is One (``fstprint`` leaves it out) -- an ordinary arc, a final state with no cost;
  1 is accepted as the One of the real and Boolean semirings, which unweighted exports write.
  Any other weight makes a weighted automaton, and shortcut compiles languages, not weights;
* an arc whose input and output labels differ (a transducer: its input side alone is not the
  language it defines; an acceptor has equal labels, or one);
* an epsilon arc (label ``0`` or ``<eps>``, or symbol id 0 of the symbol table: OpenFst's
  epsilon), and two arcs leaving one state on one label for different targets (nondeterminism:
  determinise with ``fstdeterminize`` or pynini's ``determinize`` first);
* bad field counts, non-integer states, unknown symbols, files over :data:`ATT_MAX_BYTES`.

Letters are the labels as written.  With a symbol table (``--isymbols FILE``, lines ``symbol
id``, OpenFst's text form) the alphabet is the table's symbols but epsilon, in id order, and a
label is a symbol of the table or its id; without one, the labels used (numerically ordered when
all are integers, else in order of first use).
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import SpecError
from .formats import TABLE_MAX_CELLS
from .reading import read_text
from .spec import LEGAL, Semiautomaton, from_dict

ATT_SUFFIXES = (".att", ".fst.txt")
"""File names read as AT&T text (``load_spec`` dispatches on them)."""

ATT_MAX_BYTES = 32 << 20
"""Largest AT&T or symbol-table file read (bytes): about the size of a file that spells out
:data:`compiler.automata.formats.TABLE_MAX_CELLS` arcs, checked before reading."""

EPSILON_NAMES = frozenset({"0", "<eps>", "<epsilon>"})
"""Labels that mean epsilon in a file without a symbol table (OpenFst's id 0 and pynini's name)."""

_STATE = re.compile(r"[0-9]+")
_ONE = (0.0, 1.0)


def is_att(path: Path) -> bool:
    """Whether ``path`` is named as an AT&T text file."""
    return path.name.endswith(ATT_SUFFIXES)


def _read(path: Path, what: str) -> str:
    """The UTF-8 text of ``path`` (a regular file), refused past :data:`ATT_MAX_BYTES` before it is read."""
    return read_text(path, ATT_MAX_BYTES, what, SpecError)


def _lines(text: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank line."""
    return [(n, line.split()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def read_symbols(path: Path) -> dict[str, int]:
    """An OpenFst text symbol table (``symbol id`` per line) as symbol -> id; a repeated symbol
    or id, or a line that is not two fields with a non-negative integer id, is refused."""
    where = f"symbol table {str(path)!r}"
    table: dict[str, int] = {}
    ids: set[int] = set()
    for n, fields in _lines(_read(path, "symbol table")):
        if len(fields) != 2 or not _STATE.fullmatch(fields[1]):
            raise SpecError(f"{where} line {n}: expected 'symbol id' (a non-negative integer id), got "
                            f"{' '.join(fields)[:80]!r}")
        name, key = fields[0], int(fields[1])
        if name in table or key in ids:
            raise SpecError(f"{where} line {n}: {'symbol ' + repr(name) if name in table else f'id {key}'} "
                            f"appears twice")
        table[name] = key
        ids.add(key)
    if not table:
        raise SpecError(f"{where} is empty")
    return table


def _weight(text: str, where: str) -> None:
    """Refuse a weight other than 0 or 1 (see the module docstring)."""
    try:
        value = float(text)
    except ValueError:
        raise SpecError(f"{where}: weight {text!r} is not a number") from None
    if value not in _ONE:
        raise SpecError(f"{where}: weight {text!r} -- only 0 (the tropical One) or 1 are read: shortcut compiles "
                        f"the language of an unweighted acceptor, not weights")


def _state(text: str, where: str) -> str:
    if not _STATE.fullmatch(text):
        raise SpecError(f"{where}: state {text!r} is not a non-negative integer")
    return str(int(text))


class _Labels:
    """Labels to letters: through the symbol table when there is one (a symbol or its id)."""

    def __init__(self, symbols: dict[str, int] | None):
        self.symbols = symbols
        self.by_id = {v: k for k, v in symbols.items()} if symbols else {}

    def letter(self, label: str, where: str) -> str:
        if self.symbols is None:
            if label in EPSILON_NAMES:
                raise SpecError(f"{where}: epsilon arc (label {label!r}); remove epsilons first "
                                f"(fstrmepsilon, or pynini's rmepsilon)")
            return label
        name = label if label in self.symbols else self.by_id.get(int(label)) if _STATE.fullmatch(label) else None
        if name is None:
            raise SpecError(f"{where}: label {label!r} is neither a symbol nor an id of the symbol table")
        if self.symbols[name] == 0:
            raise SpecError(f"{where}: epsilon arc (symbol id 0, {name!r}); remove epsilons first "
                            f"(fstrmepsilon, or pynini's rmepsilon)")
        return name

    def alphabet(self, used: list[str]) -> list[str]:
        if self.symbols is not None:
            return [s for s, _ in sorted(self.symbols.items(), key=lambda kv: kv[1]) if self.symbols[s] != 0]
        if all(_STATE.fullmatch(x) for x in used):
            return sorted(used, key=int)
        return used


def att_to_dict(text: str, what: str, name: str, symbols: dict[str, int] | None = None) -> dict:
    """AT&T text as a spec dict (``final_states``: outputs accept/reject); see the module docstring."""
    labels = _Labels(symbols)
    states: dict[str, None] = {}
    finals: set[str] = set()
    arcs: dict[str, dict[str, str]] = {}
    arc_line: dict[tuple[str, str], int] = {}
    used: dict[str, None] = {}
    for n, fields in _lines(text):
        where = f"{what} line {n}"
        if len(fields) > 5:
            raise SpecError(f"{where}: {len(fields)} fields; a line is 'src dst in [out] [weight]' or 'state [weight]'")
        if len(fields) <= 2:
            q = _state(fields[0], where)
            if len(fields) == 2:
                _weight(fields[1], where)
            states.setdefault(q)
            finals.add(q)
            continue
        src, dst = _state(fields[0], where), _state(fields[1], where)
        if len(fields) >= 4 and fields[3] != fields[2]:
            raise SpecError(f"{where}: input label {fields[2]!r} and output label {fields[3]!r} differ: a transducer "
                            f"arc; shortcut reads acceptors (take the input side with pynini's project first)")
        if len(fields) == 5:
            _weight(fields[4], where)
        letter = labels.letter(fields[2], where)
        states.setdefault(src)
        states.setdefault(dst)
        used.setdefault(letter)
        row = arcs.setdefault(src, {})
        if row.get(letter, dst) != dst:
            raise SpecError(f"{where}: state {src} has two arcs on {letter!r} (to {row[letter]}, line "
                            f"{arc_line[src, letter]}, and to {dst}): the automaton is not deterministic; "
                            f"determinise it first (fstdeterminize, or pynini's determinize)")
        row[letter] = dst
        arc_line.setdefault((src, letter), n)
    if not states:
        raise SpecError(f"{what} has no arcs and no final states")
    alphabet = labels.alphabet(list(used))
    if not alphabet:
        raise SpecError(f"{what} has no arcs and its symbol table no symbol but epsilon")
    if (len(states) + 1) * len(alphabet) > TABLE_MAX_CELLS:
        raise SpecError(f"{what}: {len(states):,} states x {len(alphabet):,} letters is over the limit of "
                        f"{TABLE_MAX_CELLS:,} transitions")
    start = next(iter(states))
    ordered = sorted(states, key=int)
    return {"name": name, "states": ordered, "alphabet": alphabet, "start": start, "transitions": arcs,
            "final_states": sorted(finals, key=int)}


def att_name(path: Path) -> str:
    """The automaton's name: the file name without ``.att`` / ``.fst.txt``."""
    for suffix in ATT_SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)] or path.name
    return path.stem


def read_att(path: Path, promise: str | None = None, isymbols: Path | None = None) -> Semiautomaton:
    """An AT&T text file as a complete automaton (missing transitions to a ``reject`` sink), or
    partial under ``promise="legal"``; ``isymbols`` an OpenFst text symbol table."""
    symbols = read_symbols(isymbols) if isymbols is not None else None
    spec = att_to_dict(_read(path, "AT&T file"), f"AT&T file {str(path)!r}", att_name(path), symbols)
    return from_dict(spec, complete=promise != LEGAL, promise=promise)
