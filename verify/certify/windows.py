"""Offset windows a suffix lookup reads, a lemma of the program proof (:mod:`.program`): the
plain (untiered) locally testable construction's look-back (constructions/factors.py).

The semantics of a :class:`~constructions.obligations.Fetch` at offset t - c
(:func:`.semantics._fetch`) keeps the last c codes of its source, a window; with k - 1 such heads
the memory holds every window letter, |codes|^(k(k-1)/2) memories at most, far more than the
automaton tells apart (SL_6 on 16 letters: over 50,000 pairs).

**Setting** (checked on the obligations, no construction code read).  One
:class:`~constructions.obligations.SuffixLookup` reads n one-dim codes; for o = 1..n-1 its o-th
read is the destination of a window head (offset keys t - o, no skip), which nothing else reads.
Call the o-th read offset o.

**Lemma (live window letters).**  After position t, head j's window holds the offset-j codes of
positions t - j + 1..t; the one d back (0 <= d < j) is read at t - d + j, when the positions
t - d + 1..t sit at offsets j - 1..j - d and their codes there are already in the memory (head
(j - i)'s window, the same slot j - 1 - d, for i = 1..d).  If no key of the lookup long enough to
read offset j has those codes at those offsets, no key reads that slot's code at that time: the
memory forgets it (NaN).  Soundness does not rest on this reasoning: the lookup's semantics
(:func:`.semantics._suffix_lookup`) accepts a NaN code only where no key the codes before it start
with reads it (then the keys it starts with are the same whatever the code was), and is
NotCovered otherwise; since nothing else reads the heads, two memories that differ only in
forgotten codes give the same readouts wherever the search accepts them.  The memory then keeps
what an Aho-Corasick node over the keys would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from constructions.obligations import Fetch, Obligations, SuffixLookup, offset_keys

from .semantics import Code, Context

NAN = float("nan")
FORGOTTEN = (NAN,)
"""A window letter the lemma forgot (read, it is a code no key reads: NaN, which only a suffix
lookup accepts, and only where no key reads it)."""


@dataclass(frozen=True)
class Windows:
    """The lemma's setting in the program's memory: per offset j >= 1 the memory index of its
    window head, and per (j, d) the codes at offsets j - d..j - 1 with which some key goes on to
    read offset j."""

    head: dict[int, int]
    allowed: dict[tuple[int, int], frozenset[tuple[Code, ...]]]


def _offset(f: Fetch, T: int) -> int | None:
    """The c of a window head (offset keys t - c, c >= 1, no skip), or None."""
    key = np.asarray(f.key, dtype=np.int64)
    if len(key) != T + 1:
        return None
    c = int(T - key[T])
    return c if c >= 1 and np.array_equal(key, offset_keys(T, c)) else None


def _setting(ob: Obligations, ctx: Context, T: int, where: dict[int, int], lookup: SuffixLookup) -> Windows | None:
    """The lemma's setting for one suffix lookup (module docstring), or None."""
    if len(lookup.reads) < 2 or any(ctx.width(r) != 1 for r in lookup.reads):
        return None
    heads = {f.dst: f for layer in ob.layers for f in layer.fetches if isinstance(f, Fetch)}
    head: dict[int, int] = {}
    for o, name in enumerate(lookup.reads[1:], start=1):
        f = heads.get(name)
        if f is None or id(f) not in where or _offset(f, T) != o or \
                [id(r) for r in ctx.readers(name)] != [id(lookup)]:
            return None
        head[o] = where[id(f)]
    n = len(lookup.reads)
    allowed: dict[tuple[int, int], frozenset[tuple[Code, ...]]]
    allowed = {(j, d): frozenset(tuple((float(key[o]),) for o in range(j - d, j)) for key in lookup.rows
                                 if len(key) > j) for j in range(1, n) for d in range(j)}
    return Windows(head, allowed)


def window_settings(ob: Obligations, ctx: Context, T: int, order: list[Any]) -> list[Windows]:
    """Every suffix lookup's window heads in the lemma's setting; ``order``: the heads whose
    memories the program's memory holds, in order."""
    where = {id(f): i for i, f in enumerate(order)}
    found = (_setting(ob, ctx, T, where, o) for layer in ob.layers for o in layer.mlp_leaves()
             if isinstance(o, SuffixLookup))
    return [w for w in found if w is not None]


def _known(v: Any) -> bool:
    """A code the memory still holds (not forgotten)."""
    return v == v if not isinstance(v, tuple) else all(x == x for x in v)


def forget(out: list[Any], w: Windows) -> None:
    """The lemma (module docstring) on the memory ``out``, in place: head j's letter d back becomes
    :data:`FORGOTTEN` where the codes after it extend no key that reads offset j."""
    for j, h in w.head.items():
        slots = list(out[h])
        for d in range(j):
            at = j - 1 - d
            if not _known(slots[at]):
                continue
            known = tuple(out[w.head[j - i]][at] for i in range(d, 0, -1))  # offsets j - d .. j - 1
            if all(_known(v) for v in known) and known not in w.allowed[(j, d)]:
                slots[at] = FORGOTTEN
        out[h] = tuple(slots)


def canonical_windows(settings: list[Windows]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """The memory with the lemma's forgotten letters, for the settings found (None: none)."""
    if not settings:
        return None

    def canonical(memory: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(memory)
        for w in settings:
            forget(out, w)
        return tuple(out)
    return canonical
