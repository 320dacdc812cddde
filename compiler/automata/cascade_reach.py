"""Every configuration a cascade reaches: the cascade run as an automaton on its configurations,
breadth-first, a whole frontier and letter at a time (numpy), with the same semantics as
:meth:`Cascade.step` -- every component reads pre-update signals, then all update at once.

A cascade's tables are small (each keyed by a few signals of a few values), so each becomes a
dense array indexed by the mixed-radix number of its key; a configuration is one such number
too (component 0 most significant), so sorting the numbers sorts the configurations
lexicographically.  A key a table lacks raises :class:`CascadeError`, as ``step`` does.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .cascade import Cascade, CascadeError, Component

MISSING = int(np.iinfo(np.int64).min)
"""Dense-table entry for a key the table lacks (no increment or value is this far below 0)."""
KEEP = MISSING + 1
"""Dense-table entry of a ``None`` action (a reset keeps its value; any other kind has no input)."""
MAX_DENSE = 1 << 22
"""Largest dense table (entries) this search builds; beyond it the caller steps one by one."""


def _radix(sizes: Sequence[int]) -> np.ndarray:
    """Place values of a mixed-radix number with digit i in 0..sizes[i] - 1 (digit 0 most significant)."""
    out = np.ones(len(sizes), dtype=np.int64)
    for i in range(len(sizes) - 2, -1, -1):
        out[i] = out[i + 1] * int(sizes[i + 1])
    return out


def _dense(table: dict[Any, Any], sizes: Sequence[int], key_of, value_of) -> np.ndarray:
    """``table`` as an array over the mixed-radix numbers of its keys (``key_of(key)`` the digits)."""
    total = int(np.prod([int(s) for s in sizes], dtype=object)) if sizes else 1
    if total > MAX_DENSE:
        raise OverflowError(total)
    out = np.full(max(total, 1), MISSING, dtype=np.int64)
    radix = _radix(sizes)
    for key, value in table.items():
        digits = key_of(key)
        if len(digits) != len(sizes) or any(not 0 <= d < s for d, s in zip(digits, sizes)):
            continue
        out[int(np.dot(radix, digits)) if sizes else 0] = value_of(value)
    return out


def _compiled(cascade: Cascade, n_letters: int) -> dict[str, Any]:
    """Dense view and component tables, and each signal's number of values."""
    comps, views = cascade.components, cascade.views
    sizes = [c.size for c in comps] + [v.size for v in views]
    slot = {c.name: i for i, c in enumerate(comps)}
    slot.update({v.name: len(comps) + j for j, v in enumerate(views)})
    dense_views = []
    for v in views:
        reads = [slot[r] for r in v.reads]
        dense_views.append((reads, _dense(v.table, [sizes[r] for r in reads], tuple, int)))
    dense_comps = []
    for c in comps:
        reads = [slot[r] for r in c.reads]
        table = _dense(c.table, [sizes[r] for r in reads] + [n_letters], lambda k: (*k[0], k[1]),
                       lambda a: KEEP if a is None else int(a))
        dense_comps.append((reads, table))
    return {"sizes": sizes, "views": dense_views, "comps": dense_comps}


def _lookup(signals: np.ndarray, reads: list[int], sizes: list[int], table: np.ndarray,
            letter: int | None = None, n_letters: int = 1) -> np.ndarray:
    """``table`` at each row's key: the values of ``reads`` (then ``letter``)."""
    idx = np.zeros(len(signals), dtype=np.int64)
    for r in reads:
        idx = idx * sizes[r] + signals[:, r]
    if letter is not None:
        idx = idx * n_letters + letter
    return table[idx]


def _apply(comp: Component, values: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """Component ``comp``'s new values (:meth:`Component.apply`, row by row)."""
    if comp.kind == "reset":
        return np.where(actions == KEEP, values, actions)
    if (actions == KEEP).any():
        raise CascadeError(f"{comp.name}: a {comp.kind} component's table gave no input")
    if comp.kind == "counter":
        return (values + actions) % comp.size
    distinct, _, inverse = _distinct(values * comp.size + actions)
    products = [comp.multiply(int(p) // comp.size, int(p) % comp.size) for p in distinct]
    return np.array(products, dtype=np.int64)[inverse]


def _step_all(cascade: Cascade, plan: dict[str, Any], frontier: np.ndarray, letter: int,
              n_letters: int) -> np.ndarray:
    """:meth:`Cascade.step` on every row of ``frontier`` for one letter."""
    sizes = plan["sizes"]
    signals = frontier
    for (reads, table), view in zip(plan["views"], cascade.views):
        value = _lookup(signals, reads, sizes, table)
        if (value == MISSING).any():
            raise CascadeError(f"view {view.name} has no entry for a configuration outside the verified domain")
        signals = np.concatenate([signals, value[:, None]], axis=1)
    out = np.empty_like(frontier)
    for i, ((reads, table), comp) in enumerate(zip(plan["comps"], cascade.components)):
        actions = _lookup(signals, reads, sizes, table, letter, n_letters)
        if (actions == MISSING).any():
            raise CascadeError(f"component {comp.name} has no input for a configuration outside the "
                               f"verified domain")
        out[:, i] = _apply(comp, frontier[:, i], actions)
    return out


def reachable(cascade: Cascade, start: Sequence[int], n_letters: int) -> np.ndarray:
    """Every configuration some input reaches from ``start`` (rows, sorted lexicographically,
    int64), breadth-first over whole frontiers."""
    sizes = [c.size for c in cascade.components]
    try:
        plan = _compiled(cascade, n_letters)
    except OverflowError:
        return _reachable_one_by_one(cascade, start, n_letters)
    if int(np.prod(sizes, dtype=object)) >= 1 << 62:
        return _reachable_one_by_one(cascade, start, n_letters)
    width = len(sizes)
    radix = _radix(sizes)
    frontier = np.array([list(start)], dtype=np.int64).reshape(1, width)
    seen = frontier @ radix
    while len(frontier):
        after = np.concatenate([_step_all(cascade, plan, frontier, a, n_letters) for a in range(n_letters)])
        numbers, first, _ = _distinct(after @ radix)
        at = np.minimum(np.searchsorted(seen, numbers), len(seen) - 1)
        new = seen[at] != numbers
        frontier = after[first[new]]
        seen = np.sort(np.concatenate([seen, numbers[new]]))
    return _digits(seen, sizes)


def _distinct(numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ``numbers`` (sorted), the index of one occurrence of each, and each number's
    index among them (a sort, where ``np.unique`` hashes slowly on millions of int64)."""
    order = np.argsort(numbers, kind="stable")
    ordered = numbers[order]
    keep = np.ones(len(ordered), dtype=bool)
    keep[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(len(numbers), dtype=np.int64)
    inverse[order] = np.cumsum(keep) - 1
    return ordered[keep], order[keep], inverse


def _digits(numbers: np.ndarray, sizes: list[int]) -> np.ndarray:
    """The configurations whose mixed-radix numbers are ``numbers`` (sorted)."""
    out = np.empty((len(numbers), len(sizes)), dtype=np.int64)
    rest = np.sort(numbers)
    for i in range(len(sizes) - 1, -1, -1):
        out[:, i] = rest % sizes[i]
        rest = rest // sizes[i]
    return out


def _reachable_one_by_one(cascade: Cascade, start: Sequence[int], n_letters: int) -> np.ndarray:
    """:func:`reachable` one configuration and letter at a time (tables too large to make dense)."""
    seen = {tuple(start)}
    frontier = list(seen)
    while frontier:
        nxt = []
        for config in frontier:
            for letter in range(n_letters):
                after = tuple(cascade.step(config, letter))
                if after not in seen:
                    seen.add(after)
                    nxt.append(after)
        frontier = nxt
    return np.array(sorted(seen), dtype=np.int64).reshape(len(seen), len(cascade.components))
