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
(:func:`.semantics.suffix_lookup`) accepts a NaN code only where no key the codes before it start
with reads it (then the keys it starts with are the same whatever the code was), and is
NotCovered otherwise; since nothing else reads the heads, two memories that differ only in
forgotten codes give the same readouts wherever the search accepts them.  The memory then keeps
what an Aho-Corasick node over the keys would.

**Lemma (the windows' quotient).**  Let moreover offset 0 and every window head's source be
*letter codes* (embedded subspaces no layer writes, so at every position t >= 1 they hold the
token's codes), each head's destination be 0 in every token row and written by that head alone,
in a layer no later than the lookup's.  Then the heads' memories W (their windows, letters
forgotten as above) form a machine of their own: the letter x at t >= 1 moves W to W' (each
window shifts in its source's code of x, then the lemma above forgets) and the lookup adds
g(W, x) (its semantics on offset 0's code of x and the heads' oldest slots; NotCovered is one
more value of g), whatever the rest of the memory holds -- and nothing else reads W.  Call W ~ V
when g agrees along every sequence of letters from W and from V (Moore's partition refinement
over the W the letters reach from BOS's windows, :func:`quotient`).  Every other part of the
program sees W only through g, so two memories that differ only in ~-equivalent W give the same
readouts (and the same failures) on every continuation, and their successors are again
equivalent: the search keeps one W per class (the first found).  The classes are what the
lookup's outputs tell apart, not every key prefix: SL_6 on 16 letters 2,737 window memories in
36 classes, LTT_6 on 64 letters 3,390 in 34.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import numpy as np

from constructions.obligations import Fetch, Obligations, SuffixLookup, offset_keys

from .semantics import Code, Context, NotCovered, ProgramError, read, suffix_value

NAN = float("nan")
FORGOTTEN = (NAN,)
"""A window letter the lemma forgot (read, it is a code no key reads: NaN, which only a suffix
lookup accepts, and only where no key reads it)."""
QUOTIENT_BUDGET = 50_000
"""Largest number of window memories the quotient (module docstring) explores; past it the
memories are kept as the first lemma leaves them."""

Memory = tuple[tuple[Code, ...], ...]
"""The window heads' memories: head j's window at index j - 1."""


@dataclass(frozen=True)
class Letters:
    """What the quotient needs of the token rows: per distinct letter, offset 0's code and each
    head's source code (head j at index j); BOS's windows."""

    codes: tuple[tuple[Code, ...], ...]
    start: Memory
    width: int


@dataclass(frozen=True)
class Windows:
    """The lemma's setting in the program's memory: per offset j >= 1 the memory index of its
    window head, and per (j, d) the codes at offsets j - d..j - 1 with which some key goes on to
    read offset j; the lookup, and its letters where the quotient's conditions hold (else None)."""

    head: dict[int, int]
    allowed: dict[tuple[int, int], frozenset[tuple[Code, ...]]]
    lookup: SuffixLookup | None = None
    letters: Letters | None = None

    @cached_property
    def slots(self) -> list[tuple[int, int, tuple[int, ...], frozenset[tuple[Code, ...]]]]:
        """Per slot, in the order the lemma decides them (head j = 1.., its letter d = 0.. back):
        (j - 1, its index in the window, the indices of heads j - d..j - 1, the allowed codes)."""
        return [(j - 1, j - 1 - d, tuple(range(j - d - 1, j - 1)), self.allowed[(j, d)])
                for j in range(1, len(self.head) + 1) for d in range(j)]


def _offset(f: Fetch, T: int) -> int | None:
    """The c of a window head (offset keys t - c, c >= 1, no skip), or None."""
    key = np.asarray(f.key, dtype=np.int64)
    if len(key) != T + 1:
        return None
    c = int(T - key[T])
    return c if c >= 1 and np.array_equal(key, offset_keys(T, c)) else None


def _base(name: str) -> str:
    return name.split("[")[0]


def _letters(ob: Obligations, lookup: SuffixLookup, heads: dict[int, Fetch]) -> Letters | None:
    """The quotient's letters (:class:`Letters`), or None where its conditions (module docstring)
    fail: offset 0 and the sources letter codes, each destination 0 in every row and written by
    its head alone, no head after the lookup's layer."""
    layer_of = {id(x): l for l, layer in enumerate(ob.layers) for x in (*layer.fetches, *layer.mlp_leaves())}
    writers = [(id(x), _base(n)) for layer in ob.layers for x in (*layer.fetches, *layer.mlp_leaves())
               for n in x.names_written() for n in n.split(" + ")]
    written = {b for _, b in writers}
    names = [lookup.reads[0], *(heads[j].src for j in sorted(heads))]
    codes = ob.embedding.codes
    if any(" + " in n or _base(n) not in codes or _base(n) in written for n in names) or \
            any(_base(n) not in codes for n in lookup.out.split(" + ")):
        return None
    for f in heads.values():
        if _base(f.dst) not in codes or np.any(np.asarray(codes[_base(f.dst)]) != 0) or \
                {i for i, b in writers if b == _base(f.dst)} != {id(f)} or layer_of[id(f)] > layer_of[id(lookup)]:
            return None
    rows = [{n: tuple(float(v) for v in np.asarray(c)[r]) for n, c in codes.items()}
            for r in range(len(next(iter(codes.values()))))]
    letters = tuple(dict.fromkeys(tuple(read(e, n) for n in names) for e in rows[:-1]))
    start = tuple((read(rows[-1], heads[j].src),) * j for j in sorted(heads))
    return Letters(letters, start, len(read(rows[-1], lookup.out)))


def _setting(ob: Obligations, ctx: Context, T: int, where: dict[int, int], lookup: SuffixLookup) -> Windows | None:
    """The lemma's setting for one suffix lookup (module docstring), or None."""
    if len(lookup.reads) < 2 or any(ctx.width(r) != 1 for r in lookup.reads):
        return None
    heads = {f.dst: f for layer in ob.layers for f in layer.fetches if isinstance(f, Fetch)}
    head: dict[int, int] = {}
    found: dict[int, Fetch] = {}
    for o, name in enumerate(lookup.reads[1:], start=1):
        f = heads.get(name)
        if f is None or id(f) not in where or _offset(f, T) != o or \
                [id(r) for r in ctx.readers(name)] != [id(lookup)]:
            return None
        head[o], found[o] = where[id(f)], f
    n = len(lookup.reads)
    allowed: dict[tuple[int, int], frozenset[tuple[Code, ...]]]
    allowed = {(j, d): frozenset(tuple((float(key[o]),) for o in range(j - d, j)) for key in lookup.rows
                                 if len(key) > j) for j in range(1, n) for d in range(j)}
    return Windows(head, allowed, lookup, _letters(ob, lookup, found))


def window_settings(ob: Obligations, ctx: Context, T: int, order: list[Any]) -> list[Windows]:
    """Every suffix lookup's window heads in the lemma's setting; ``order``: the heads whose
    memories the program's memory holds, in order."""
    where = {id(f): i for i, f in enumerate(order)}
    found = (_setting(ob, ctx, T, where, o) for layer in ob.layers for o in layer.mlp_leaves()
             if isinstance(o, SuffixLookup))
    return [w for w in found if w is not None]


def _forget(windows: Memory, w: Windows) -> Memory:
    """The first lemma (module docstring) on the heads' memories: head j's letter d back becomes
    :data:`FORGOTTEN` where the codes after it extend no key that reads offset j (kept while one
    of those codes is itself forgotten)."""
    out = [list(window) for window in windows]
    for j, at, after, allowed in w.slots:
        if out[j][at] is FORGOTTEN:
            continue
        known = tuple(out[i][at] for i in after)  # offsets j - d .. j - 1
        if FORGOTTEN not in known and known not in allowed:
            out[j][at] = FORGOTTEN
    return tuple(map(tuple, out))


def _output(w: Windows, windows: Memory, x: tuple[Code, ...], seen: dict[Any, Any]) -> Any:
    """g(W, x): what the lookup adds reading letter ``x`` after the windows W (a failure of its
    semantics as a value of its own).  Its semantics reads the codes up to the first forgotten one
    and whether there is one, so that is the cache's key."""
    raw = (*x[0], *(window[0][0] for window in windows))
    p = next((i for i, v in enumerate(raw) if v != v), len(raw))
    key = (raw[:p], p < len(raw))
    if key not in seen:
        try:
            seen[key] = suffix_value(w.lookup, raw, w.letters.width)  # type: ignore[union-attr, arg-type]
        except (NotCovered, ProgramError) as e:
            seen[key] = (type(e).__name__, str(e))
    return seen[key]


def _machine(w: Windows, letters: Letters) -> tuple[list[Memory], list[list[int]], list[tuple[Any, ...]]] | None:
    """The window memories the letters reach from BOS's windows (first lemma applied), each one's
    successor per letter and what the lookup adds per letter (None: over the budget)."""
    seen: dict[Any, Any] = {}
    index: dict[Memory, int] = {letters.start: 0}
    found: list[Memory] = [letters.start]
    moves: list[list[int]] = []
    outputs: list[tuple[Any, ...]] = []
    while len(moves) < len(found):
        m = found[len(moves)]
        row = []
        for x in letters.codes:
            new = _forget(tuple((*window[1:], x[j]) for j, window in enumerate(m, start=1)), w)
            if new not in index:
                if len(found) >= QUOTIENT_BUDGET:
                    return None
                index[new] = len(found)
                found.append(new)
            row.append(index[new])
        moves.append(row)
        outputs.append(tuple(_output(w, m, x, seen) for x in letters.codes))
    return found, moves, outputs


def _classes(moves: list[list[int]], outputs: list[tuple[Any, ...]]) -> list[int]:
    """Moore's partition refinement: states with equal outputs, split by their successors'
    classes until no class splits; each state's class."""
    ids: dict[Any, int] = {}
    part = [ids.setdefault(o, len(ids)) for o in outputs]
    while True:
        ids = {}
        new = [ids.setdefault((part[s], *(part[t] for t in moves[s])), len(ids)) for s in range(len(moves))]
        if len(ids) == len(set(part)):
            return new
        part = new


def quotient(w: Windows) -> dict[Memory, Memory] | None:
    """The second lemma (module docstring): each window memory the letters reach from BOS's
    windows mapped to the first found of its class (None: not in the setting, or over
    :data:`QUOTIENT_BUDGET` memories)."""
    if w.letters is None or w.lookup is None:
        return None
    machine = _machine(w, w.letters)
    if machine is None:
        return None
    found, moves, outputs = machine
    first: dict[int, Memory] = {}
    return {m: first.setdefault(c, m) for m, c in zip(found, _classes(moves, outputs))}


def canonical_windows(settings: list[Windows]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """The memory with the first lemma's forgotten letters, and each window memory replaced by its
    class's under the quotient where it applies, for the settings found (None: none)."""
    if not settings:
        return None
    plans: list[tuple[Windows, list[int], dict[Memory, Memory] | None, dict[Memory, Memory]]]
    plans = [(w, [w.head[j] for j in sorted(w.head)], quotient(w), {}) for w in settings]

    def canonical(memory: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(memory)
        for w, at, classes, done in plans:
            raw = tuple(out[h] for h in at)
            got = done.get(raw)
            if got is None:
                got = _forget(raw, w)
                got = done[raw] = classes.get(got, got) if classes is not None else got
            for h, v in zip(at, got):
                out[h] = v
        return tuple(out)
    return canonical
