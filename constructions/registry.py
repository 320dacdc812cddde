"""The constructions, one line each.

``auto`` estimates every entry and takes the fewest attention layers, then the fewest
parameters (compiler/pipeline.py); the order here only breaks exact ties.  The last
entry applies to every automaton (within its budget).  Each entry is the
``CONSTRUCTION`` its module declares, but the product's, which its module makes from the
constructions a factor may use (:func:`constructions.product.construction`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from compiler.automata.errors import ShortcutError
from compiler.automata.spec import Semiautomaton

from . import (bounded_stack, factors, gridworld, krohn_rhodes, local, lookback, piecewise, product, scan, starfree,
               transition)
from .construction import Construction, Cost, Refusal

__all__ = ["Construction", "Cost", "Refusal", "entries", "get", "names", "plan_of", "registered"]

_ENTRIES: list[Construction[Any]] = [
    lookback.CONSTRUCTION,  # definite automata: the last k letters, 1 layer (before everything: none is shallower)
    gridworld.CONSTRUCTION,  # Theorem 12: line and box worlds, 2 layers
    bounded_stack.CONSTRUCTION,  # bounded stacks (Dyck): depth prefix sum, last push per level, 3 layers
    krohn_rhodes.CONSTRUCTION,  # Theorem 11: solvable automata, depth independent of T
    factors.CONSTRUCTION,  # locally (threshold) testable: the last k - 1 letters, capped factor counts, 2 layers
    piecewise.CONSTRUCTION,  # piecewise testable: one prefix-count layer per run of the relevant subsequences, <= k
    local.CONSTRUCTION,  # local descriptions (window, phase, event count, latest anchor): 1-2 layers, exact estimate
    starfree.CONSTRUCTION,  # aperiodic: a since program (latest-reset and yesterday levels), one layer per level
    product.construction(lambda: [c for c in _ENTRIES if c.name not in (product.NAME, transition.NAME)]),  # parallel
    # decomposition by SP partitions: two quotients side by side, each by its cheapest construction among the others
    transition.construction(lambda: [c for c in _ENTRIES if c.name not in (product.NAME, transition.NAME)]),  # the
    # state from a one-step quotient's previous state and the letter: the quotient, then a look-back and a lookup
    scan.CONSTRUCTION,  # Theorem 10: every automaton, ceil(log2 T) layers (last resort)
]


def entries() -> tuple[Construction, ...]:
    """Every construction, in preference order (the last is the last resort)."""
    return tuple(_ENTRIES)


def names() -> list[str]:
    """The ``--method`` names, in preference order."""
    return [c.name for c in _ENTRIES]


def get(name: str) -> Construction:
    """The construction called ``name``; ShortcutError naming the known ones otherwise."""
    for c in _ENTRIES:
        if c.name == name:
            return c
    raise ShortcutError(f"unknown construction {name!r}; the known ones are {names()}")


def plan_of(model) -> tuple[Construction, Any]:
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
    if any(c.name == construction.name for c in _ENTRIES):
        raise ShortcutError(f"a construction called {construction.name!r} is already registered")
    at = len(_ENTRIES) - 1 if position is None else position
    _ENTRIES.insert(at, construction)
    try:
        yield construction
    finally:
        _ENTRIES[:] = [c for c in _ENTRIES if c is not construction]
