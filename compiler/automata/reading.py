"""Bounded reading: every file a user names is read through here, so none can make the tool
block, allocate without bound or fail with anything but a one-line :class:`ShortcutError`.

* :func:`read_bytes` reads a *regular* file of at most ``limit`` bytes: a FIFO, a device
  (``/dev/zero``), a directory or a socket is refused before a byte is read (the file is opened
  non-blocking, so opening a FIFO cannot hang, and checked with ``fstat`` on the open file, so
  it cannot be swapped after the check), and a file over the limit is refused by its size.
* :func:`parse_json` and :func:`parse_toml` parse text into plain data with limits on what the
  data may be: at most :data:`MAX_DEPTH` nested arrays and objects, integers of at most
  :data:`MAX_INT_DIGITS` digits, no key twice in one object, no NaN or infinity.  Python's own
  parsers fail on deep nesting with RecursionError and on long integers with ValueError; both
  become the one-line error here.

The byte limits of each kind of file live with their readers (a spec, a certificate, a zoo
config or record); each names its limit in the refusal.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from .errors import ShortcutError

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects in a JSON or TOML file the tool reads (its own files
nest at most a dozen deep)."""
MAX_INT_DIGITS = 32
"""Most digits of an integer in a JSON or TOML file (a 64-bit value has at most 20; longer ones
are refused before any arithmetic, and a table entry of 21-32 digits is refused as a state index)."""
_INT_LIMIT = 10**MAX_INT_DIGITS
MiB = 1 << 20


def _size_text(n: int) -> str:
    return f"{n / MiB:,.1f} MiB" if n >= MiB else f"{n:,} bytes"


def read_bytes(path: "str | Path", limit: int, what: str, error: type[ShortcutError] = ShortcutError) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; ``error`` (one line,
    naming ``what`` and the path) for a missing or unreadable file, anything that is not a
    regular file, or one over the limit."""
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise error(f"{what} {name!r} does not exist") from None
    except OSError as e:
        raise error(f"cannot read {what} {name!r}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
                "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file"
            raise error(f"{what} {name!r} is {kind}; give a regular file")
        if st.st_size > limit:
            raise error(f"{what} {name!r} is {_size_text(st.st_size)}, over the limit of {_size_text(limit)}")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise error(f"cannot read {what} {name!r}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while being read
        raise error(f"{what} {name!r} is over the limit of {_size_text(limit)}")
    return data


def read_text(path: "str | Path", limit: int, what: str, error: type[ShortcutError] = ShortcutError) -> str:
    """:func:`read_bytes` decoded as UTF-8 (``error`` when it is not)."""
    try:
        return read_bytes(path, limit, what, error).decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{what} {str(path)!r} is not UTF-8 text") from None


class _Refused(Exception):
    """Raised inside the JSON parser's hooks; the caller turns it into its error class."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Refused(f"key {k!r} appears twice in one JSON object")
        out[k] = v
    return out


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"it holds an integer of {len(text.lstrip('-')):,} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"it holds the number {text[:40]}, which overflows a float")
    return value


def _no_constant(text: str) -> Any:
    raise _Refused(f"it holds {text}, which is not JSON")


def check_tree(data: Any, what: str, error: type[ShortcutError] = ShortcutError) -> Any:
    """``data`` itself, after checking (without recursion) that it nests at most
    :data:`MAX_DEPTH` deep and holds no integer of more than :data:`MAX_INT_DIGITS` digits."""
    stack = [(data, 1)]
    while stack:
        x, depth = stack.pop()
        if isinstance(x, (dict, list)):
            if depth > MAX_DEPTH:
                raise error(f"{what} is nested too deeply (more than {MAX_DEPTH} levels)")
            stack.extend((v, depth + 1) for v in (x.values() if isinstance(x, dict) else x))
        elif type(x) is int and abs(x) >= _INT_LIMIT:
            raise error(f"{what} holds an integer of more than {MAX_INT_DIGITS} digits")
    return data


def parse_json(text: "str | bytes", what: str, error: type[ShortcutError] = ShortcutError) -> Any:
    """JSON ``text`` as Python data within the limits of the module docstring; ``error`` (one
    line naming ``what``) for invalid JSON and for anything past a limit."""
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_int=_bounded_int,
                          parse_float=_finite_float, parse_constant=_no_constant)
    except _Refused as e:
        raise error(f"{what}: {e}") from None
    except RecursionError:
        raise error(f"{what} is nested too deeply (more than {MAX_DEPTH} levels)") from None
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise error(f"{what} is not valid JSON: {str(e)[:160]}") from None
    return check_tree(data, what, error)


def read_json(path: "str | Path", limit: int, what: str, error: type[ShortcutError] = ShortcutError) -> Any:
    """The JSON file ``path`` (:func:`read_text` then :func:`parse_json`: a regular file of at
    most ``limit`` bytes, data within the limits)."""
    return parse_json(read_text(path, limit, what, error), f"{what} {str(path)!r}", error)


def parse_toml(text: str, what: str, error: type[ShortcutError] = ShortcutError) -> dict[str, Any]:
    """TOML ``text`` as a dict within the limits of the module docstring (as :func:`parse_json`)."""
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise error(f"{what} is nested too deeply (more than {MAX_DEPTH} levels)") from None
    except ValueError as e:  # TOMLDecodeError, and an integer past Python's digit limit
        raise error(f"{what} is not valid TOML: {str(e)[:160]}") from None
    return check_tree(data, what, error)
