"""Option values (typed argparse parsers) and output paths checked before any work, shared by
the commands."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from constructions.budget import MAX_PARAMS

from ..automata.errors import InputError, ShortcutError
from ..automata.spec import PROMISES
from ..pipeline import DTYPES, PREFERENCES, SHAPES


# --- option values ------------------------------------------------------------------------


def int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    parse.__name__ = "positive integer" if low == 1 else "non-negative integer"
    return parse


POSITIVE, NON_NEGATIVE = int_at_least(1), int_at_least(0)


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``high``."""
    at_least = int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {value}")
        return value

    parse.__name__ = f"integer from {low} to {high}"
    return parse


def seconds(text: str) -> float:
    """A positive number of seconds (a time budget)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


seconds.__name__ = "seconds"


def dtype_of(name: str):
    if name not in DTYPES:
        raise ShortcutError(f"unknown dtype {name!r}; choose one of {list(DTYPES)}")
    return DTYPES[name]


# --- output paths, checked before any work --------------------------------------------------


def _same_file(a: Path, b: "str | Path") -> bool:
    """Whether ``a`` and ``b`` name one file (through links, ``..`` and hard links)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist (yet): compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


def not_an_input(p: Path, what: str, inputs: Sequence["str | Path | None"]) -> None:
    """Refuse an output ``p`` that is one of the command's input files: writing it would replace
    what the command reads (``certify M -o M``, ``compile t.json -o t.json``)."""
    for i in inputs:
        if i is not None and os.path.exists(i) and _same_file(p, i):
            raise InputError(f"the {what} {str(p)!r} is the input {str(i)!r}: writing it would replace what is "
                             f"read; name another file")


def writable_file(path: str, what: str, inputs: Sequence["str | Path | None"] = ()) -> Path:
    """``path`` can be written as a file: not empty, not a directory, in an existing writable
    directory, none of ``inputs``.  A symbolic link named here is followed, as a shell's ``>``
    follows it (docs/cli.md, "Output paths")."""
    if not path.strip():
        raise InputError(f"the {what} path is empty")
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} {path!r} is a directory; name a file")
    parent = p.parent
    if not parent.is_dir():
        raise InputError(f"cannot write {what} {path!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"cannot write {what} {path!r}: permission denied")
    not_an_input(p, what, inputs)
    return p


def writable_dir(path: str, what: str, files: Sequence[str] = (), inputs: Sequence["str | Path | None"] = ()) -> Path:
    """``path`` is, or can be created as, a writable directory; the ``files`` the command writes
    in it are neither symbolic links (a link planted in a directory would send a write the user
    never named elsewhere: docs/cli.md, "Output paths") nor any of ``inputs``."""
    if not path.strip():
        raise InputError(f"the {what} path is empty")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{what} {path!r} exists and is not a directory")
    existing = next(q for q in [p, *p.absolute().parents] if q.exists())
    if not existing.is_dir():
        raise InputError(f"cannot create {what} {path!r}: {str(existing)!r} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {what} {path!r}: permission denied in {str(existing)!r}")
    for name in files:
        if (p / name).is_symlink():
            raise InputError(f"{str(p / name)!r} is a symbolic link: shortcut writes the files of {what} {path!r} "
                             f"itself and does not follow links it did not name; remove the link")
        not_an_input(p / name, f"{what} file", inputs)
    return p


def write_output(path: str | Path, what: str, write: Callable[[], object]) -> None:
    """Run ``write``; an OSError (disk full, a race) is bad environment, one line."""
    try:
        write()
    except OSError as e:
        raise InputError(f"cannot write {what} {str(path)!r}: {e.strerror or e}") from None

def isymbols_option(parser: argparse.ArgumentParser) -> None:
    """``--isymbols FILE``: the input symbol table of an AT&T spec (docs/specs.md)."""
    parser.add_argument("--isymbols", metavar="FILE", default=None,
                        help="an OpenFst text symbol table ('symbol id' per line) naming an AT&T spec's labels "
                             "(.att, .fst.txt)")


def promise_option(parser: argparse.ArgumentParser) -> None:
    """``--promise legal``: a partial automaton's missing transitions are never taken (docs/promises.md)."""
    parser.add_argument("--promise", choices=list(PROMISES), default=None,
                        help="legal: a partial automaton's missing transitions are promised never taken; the model "
                             "is exact on legal inputs only and run refuses others (the alternative to --complete)")


def planner_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prefer", default="depth", choices=list(PREFERENCES),
                   help="what auto minimises: depth (fewest attention layers, then parameters) or size (fewest "
                        "parameters within one layer of the shallowest)")
    p.add_argument("--shape", default="default", choices=list(SHAPES),
                   help="default: each construction's blocks (MLPs of any depth), counted in attention layers; "
                        "standard: every block one attention sublayer and one MLP with one hidden layer (deeper MLPs "
                        "unfolded), counted and chosen in standard blocks")
    p.add_argument("--max-params", type=POSITIVE, default=MAX_PARAMS,
                   help="parameter budget (at most the default): auto passes over constructions above it")
