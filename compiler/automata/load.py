"""Load an automaton from whatever the user gave: a Semiautomaton, a dict, a JSON file,
a catalog name, or another library's automaton object (the one entry point above :mod:`.spec` and
:mod:`.catalog`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from .att import is_att, read_att
from .catalog import build
from .errors import SpecError
from .formats import REGEX_PREFIX, from_regex, read_dot, read_npz, table_json_to_dict
from .reading import MiB, read_json
from .objects import LIBRARIES, object_to_dict
from .spec import Semiautomaton, check_promise, from_dict


SPEC_MAX_BYTES = 64 * MiB
"""Largest JSON spec or table file read: a table of :data:`.formats.TABLE_MAX_CELLS` cells
written as JSON takes about 16 MiB, a spec naming its states and letters a few times more."""


def read_spec_file(path: Path, complete: bool = False, promise: str | None = None) -> Semiautomaton:
    """A JSON spec file (named after its stem unless it names itself)."""
    data = read_json(path, SPEC_MAX_BYTES, "spec file", SpecError)
    table = table_json_to_dict(data, path.stem)
    return from_dict(table if table is not None else data, default_name=path.stem, complete=complete, promise=promise)


def load_spec(source: "str | Path | Mapping[str, Any] | Semiautomaton | Any", *,
              complete: bool = False, alphabet: "Sequence[str] | str | None" = None,
              promise: str | None = None, isymbols: "str | Path | None" = None) -> Semiautomaton:
    """Load an automaton from a dict (native or automata-lib field names), a JSON file path
    (a spec, or a transition table), an AALpy ``.dot`` file, a ``.npz`` transition table,
    ``"regex:PATTERN"`` (over ``alphabet``; see :mod:`compiler.automata.formats`), a catalog
    name, or an automaton object of automata-lib, AALpy or pyformlang (:mod:`.objects`).  ``complete`` sends the missing
    transitions of a partial automaton to an added sink state (see
    :func:`compiler.automata.spec.from_dict`); ``promise="legal"`` keeps them undefined, promised
    never taken (a regular expression's dead state is dropped then); without either a partial
    automaton is refused.  An OpenFst AT&T text file (``.att``, ``.fst.txt``; :mod:`.att`) is read
    as an acceptor, completed with a reject sink unless ``promise="legal"``, its labels named by
    the symbol table ``isymbols`` when given."""
    check_promise(promise, complete)
    if isymbols is not None and not (isinstance(source, (str, os.PathLike)) and is_att(Path(source))):
        raise SpecError("an input symbol table (--isymbols) is given only with an AT&T file (.att, .fst.txt)")
    if alphabet is not None and not (isinstance(source, str) and source.startswith(REGEX_PREFIX)):
        raise SpecError("an alphabet is given only with a regular expression (regex:PATTERN)")
    if isinstance(source, Semiautomaton):
        return source
    if isinstance(source, Mapping):
        return from_dict(source, complete=complete, promise=promise)
    if isinstance(source, str) and source.startswith(REGEX_PREFIX):
        return from_regex(source[len(REGEX_PREFIX):], alphabet, promise)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if is_att(path):
            return read_att(path, promise, None if isymbols is None else Path(isymbols))
        if str(source) and (path.suffix in (".json", ".dot", ".npz") or path.exists()):
            if path.suffix in (".dot", ".npz") and not path.is_file():
                raise SpecError(f"spec file {str(path)!r} does not exist" if not path.exists()
                                else f"spec {str(path)!r} is not a file")
            if path.suffix == ".dot":
                return read_dot(path, complete, promise)
            if path.suffix == ".npz":
                return read_npz(path, complete, promise)
            return read_spec_file(path, complete, promise)
        return build(str(source))
    params = object_to_dict(source)
    if params is not None:
        return from_dict(params, default_name="dfa", complete=complete, promise=promise)
    raise SpecError(f"cannot load an automaton from a {type(source).__name__}; give a dict, a JSON path, "
                    f"a catalog name, or an object: {', '.join(LIBRARIES)}")
