"""The constructions, one line each, each imported only when it is asked for.

``auto`` estimates every entry and takes the fewest attention layers, then the fewest
parameters (compiler/pipeline.py); the order here only breaks exact ties.  The last
entry applies to every automaton (within its budget).  An entry is a construction module's
dotted path: its ``NAME`` line (the one place a method name is written) is read from
the module's source without importing it, so :func:`names` and :func:`get` load only the
construction asked for (``shortcut certify`` of a scan model imports the scan alone).  The
module is imported on first use and gives its ``CONSTRUCTION``, or, for a construction made
of others (the product, the transition model), ``construction(parts)``, which draws its parts
-- every entry that is not itself made of others -- from the registry when it needs them.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from compiler.automata.errors import ShortcutError
from compiler.automata.spec import Semiautomaton

from .construction import Construction, Cost, Refusal
from .model import CompiledTransformer

__all__ = ["Construction", "Cost", "Refusal", "entries", "get", "names", "plan_of", "registered"]

_ENTRIES: list[str | Construction[Any]] = [
    "constructions.lookback",  # definite automata: the last k letters, 1 layer (before everything: none is shallower)
    "constructions.gridworld",  # Theorem 12: line and box worlds, 2 layers
    "constructions.bounded_stack",  # bounded stacks (Dyck): depth prefix sum, last push per level, 3 layers
    "constructions.krohn_rhodes",  # Theorem 11: solvable automata, depth independent of T
    "constructions.factors",  # locally (threshold) testable: the last k - 1 letters, capped factor counts, 2 layers
    "constructions.piecewise",  # piecewise testable: one prefix-count layer per run of the relevant subsequences, <= k
    "constructions.piecewise_local",  # piecewise locally testable: the two above side by side, one joint lookup
    "constructions.local",  # local descriptions (window, phase, event count, latest anchor): 1-2 layers, exact estimate
    "constructions.starfree",  # aperiodic: a since program (latest-reset and yesterday levels), one layer per level
    "constructions.product",  # parallel decomposition by SP partitions: two quotients side by side, each by its
    # cheapest construction among the others
    "constructions.transition",  # the state from a one-step quotient's previous state and the letter: the quotient,
    # then a look-back and a lookup
    "constructions.scan",  # Theorem 10: every automaton, ceil(log2 T) layers (last resort)
]
"""Construction modules by dotted path, and constructions added by :func:`registered`."""

_NAME_LINE = re.compile(r'^NAME = ["]([^"\\]+)["]$', re.MULTILINE)
"""A construction module's name line (quoted so that this module has none of its own)."""
_LOADED: dict[str, Construction[Any]] = {}


@functools.cache
def _declared_name(module: str) -> str:
    """The method name ``module`` declares (its ``NAME`` line), read from its source
    without importing it; where there is no source to read, the imported module's ``NAME``."""
    spec = importlib.util.find_spec(module)
    origin = None if spec is None else spec.origin
    if origin is not None and origin.endswith(".py"):
        found = _NAME_LINE.findall(Path(origin).read_text(encoding="utf-8"))
        if len(found) == 1:
            return str(found[0])
    return str(importlib.import_module(module).NAME)


def _name(entry: str | Construction[Any]) -> str:
    return entry.name if isinstance(entry, Construction) else _declared_name(entry)


def _made_of_others(entry: str | Construction[Any]) -> bool:
    """Whether ``entry`` is a construction made of the others (its module has no ``CONSTRUCTION``)."""
    return isinstance(entry, str) and not hasattr(importlib.import_module(entry), "CONSTRUCTION")


def _parts() -> list[Construction[Any]]:
    """What a construction made of others may use: every entry not itself made of others."""
    return [_load(e) for e in _ENTRIES if not _made_of_others(e)]


def _load(entry: str | Construction[Any]) -> Construction[Any]:
    """The construction of ``entry``, its module imported on first use."""
    if isinstance(entry, Construction):
        return entry
    if entry not in _LOADED:
        module = importlib.import_module(entry)
        made = getattr(module, "CONSTRUCTION", None) or module.construction(_parts)
        if made.name != _declared_name(entry):
            raise ShortcutError(f"{entry} declares NAME {_declared_name(entry)!r} but registers {made.name!r}")
        _LOADED[entry] = made
    return _LOADED[entry]


def entries() -> tuple[Construction, ...]:
    """Every construction, in preference order (the last is the last resort); imports them all."""
    return tuple(_load(e) for e in _ENTRIES)


def names() -> list[str]:
    """The ``--method`` names, in preference order (no construction is imported)."""
    return [_name(e) for e in _ENTRIES]


def get(name: str) -> Construction:
    """The construction called ``name`` (importing that one only, and, for one made of others,
    the others when it uses them); ShortcutError naming the known ones otherwise."""
    for e in _ENTRIES:
        if _name(e) == name:
            return _load(e)
    raise ShortcutError(f"unknown construction {name!r}; the known ones are {names()}")


def plan_of(model: CompiledTransformer) -> tuple[Construction, Any]:
    """A compiled model's construction and the plan its checkpoint carries (``meta["plan"]``),
    checked against the checkpoint's own spec where that is cheap: a plan that carries an
    automaton (the Krohn-Rhodes cascade) must carry the spec's, so no report draws or names
    what the checkpoint does not compute."""
    method = model.meta.get("method")
    if method is None:
        raise ShortcutError("this model's metadata names no construction (no 'method')")
    if not isinstance(method, str):
        raise ShortcutError(f"this model's metadata names its construction with a {type(method).__name__}, "
                            f"not a string")
    c = get(method)
    if "plan" not in model.meta:
        raise ShortcutError(f"this {method} model carries no plan (meta['plan']): it was written by an older "
                            f"shortcut; compile it again")
    try:
        plan = c.plan_from_json(model.meta["plan"])
    except ShortcutError:
        raise
    except Exception as e:  # a plan the construction cannot read is bad input, not a crash
        raise ShortcutError(f"this {method} model's plan (meta['plan']) cannot be decoded "
                            f"({type(e).__name__}: {str(e)[:120]}); was the checkpoint's header edited?") from None
    carried = getattr(plan, "automaton", None)  # a plan that carries its automaton (the cascade) carries the spec's
    if isinstance(carried, Semiautomaton) and carried.to_json() != model.automaton.to_json():
        raise ShortcutError(f"this {method} model's plan (meta['plan']) describes another automaton than its spec "
                            f"(meta['automaton']); was the checkpoint's header edited?")
    return c, plan


@contextmanager
def registered(construction: Construction, position: int | None = None) -> Iterator[Construction]:
    """Add ``construction`` (at ``position``, default just before the last resort) for the
    duration of a ``with`` block (for tests and experiments)."""
    if construction.name in names():
        raise ShortcutError(f"a construction called {construction.name!r} is already registered")
    at = len(_ENTRIES) - 1 if position is None else position
    _ENTRIES.insert(at, construction)
    try:
        yield construction
    finally:
        _ENTRIES[:] = [c for c in _ENTRIES if c is not construction]
