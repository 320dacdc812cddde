"""Nearest-value heads keyed by a count's residue, two lemmas of the program proof
(:mod:`.program`): a tier's letters j back (constructions/factors.py), found by the residue of
the tier count.

The heads' own semantics (:func:`.semantics._match`) keeps, per key code, the source at its last
visit, and the count's (:func:`.semantics._average`) its residue: the memory holds the absolute
residue and every slot, so the pairs the search explores grow with both.

**Setting** (checked on the obligations, no construction code read).  A group of
:class:`~constructions.obligations.Match` heads of one layer copies a tracked code (not a
position) and shares its key subspace K (also its query) and K's M >= 2 codes; one M-cycle sigma
of the codes, along which the lookup writing K steps (:func:`.walk.key_steps`), makes every
head's match map a power sigma^rho; label the codes 0..M-1 along sigma.

**Lemma (live slots).**  While the key moves by 0 or +1 along sigma per position, the slot d
steps behind the key's label z (1 <= d < M) is read again only at a label z + s with
s = (-d - rho) mod M, and is overwritten first when s >= M - d (the key reaches its label again;
a head writes before it reads).  Such a slot is *dead*: the memory forgets it (:data:`DEAD`).
Two memories that differ only in dead slots give the same reads on every continuation, so the
search explores one of them -- and the lemma is checked as it goes: a read of a dead slot (a key
that moved otherwise) is NotCovered, never a value.  For the tier's head j (rho = -j) the dead
slots are d > j: the last j + 1 tier letters' offset-j codes are kept, not the last M.

**Lemma (rotation).**  Let moreover K be written by one lookup alone, from the sum D of one
:class:`~constructions.obligations.Average` kept modulo P (M divides P: :func:`.semantics.sum_mode`)
and other codes, such that where its row is one of K's codes that code's label is x + c mod M
(x: D's code in the key, c a constant); let only that lookup read D, only the group's heads read
K, and no head of the group read or write K or D otherwise.  Then adding s to the residue and
moving every head's slots s labels along sigma maps each step to a step (the lookup writes the
code s labels further, whose slots hold what the unmoved ones held, and the heads' match maps
commute with sigma) with the same values everywhere else, the readout included.  So memories
that differ by such a rotation have the same readouts on every continuation: the search keeps
the one with residue 0 (once the sum has left its exact range).

**Lemma (matches in progress).**  Let moreover the heads' copies be read only by one
:class:`~constructions.obligations.SuffixLookup` (one dim per read), each head's src be what a
:class:`~constructions.obligations.Recent` head holds, and the lookup read one more such recent
head directly; call its read offset 0 and head j's (rho = -j) offset j, at increasing positions.
The letter d back (the slot d behind the key, 1 <= d <= j) is read by head j once it is j back,
when the letters now 0..d-1 back sit at offsets j - d..j - 1.  If no key of the lookup long enough
to read offset j has their codes there, no key reads that slot's code at that time: the memory
forgets it (:data:`FORGOTTEN`, NaN).  Soundness does not rest on this reasoning: the lookup's
semantics accepts a NaN code only where no key the other codes start with reads it (then the keys
it starts with are the same whatever the code was), and is NotCovered otherwise; so two memories
that differ only in forgotten codes give the same readouts wherever the search accepts them.  The
memory then keeps what an Aho-Corasick node over the keys would: TSL_6 on 64 letters (17 tier
classes) 1,063 pairs, TLT_6 139 (the last five tier letters' codes: far over 50,000).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from constructions.obligations import Average, Lookup, Match, Obligations, Recent, SuffixLookup

from .semantics import Code, Context, Env, Head, NotCovered, ProgramError, read, sum_mode
from .walk import cycle_of, key_steps

DEAD = None
"""A slot the live-slots lemma forgot (never read again before it is overwritten)."""
NAN = float("nan")
FORGOTTEN = (NAN,)
"""A slot the matches lemma forgot (read, it holds a code no key reads: NaN, which only a suffix
lookup accepts, and only where no key reads it)."""


def _exact(row: Any) -> tuple[float, ...]:
    """A code as a dictionary key (as the heads' semantics round it)."""
    return tuple(round(float(v), 9) for v in np.asarray(row).ravel())


@dataclass(frozen=True)
class Residues:
    """One group of heads in the setting (module docstring): its key, its codes' indices, their
    labels along sigma, and each head's rho."""

    key: str
    index: dict[tuple[float, ...], int]
    label: tuple[int, ...]
    heads: tuple[Match, ...]
    rhos: tuple[int, ...]

    @property
    def M(self) -> int:
        return len(self.label)


def residue_groups(ob: Obligations, ctx: Context) -> list[Residues]:
    """Every group of code-copying nearest-value heads in the setting."""
    groups: dict[tuple[int, str, tuple[tuple[float, ...], ...]], list[Match]] = {}
    for l, layer in enumerate(ob.layers):
        for f in layer.fetches:
            if isinstance(f, Match) and not ctx.increasing(f.src) and f.query == f.key:
                groups.setdefault((l, f.key, tuple(_exact(r) for r in np.asarray(f.codes))), []).append(f)
    out = []
    for (_, key, rows), heads in groups.items():
        M = len(rows)
        index = {code: c for c, code in enumerate(rows)}
        maps = [[int(x) for x in np.asarray(f.match)] for f in heads]
        if M < 2 or len(index) != M or any(sorted(mp) != list(range(M)) for mp in maps):
            continue
        steps = key_steps(ob, key, index)
        found = cycle_of(steps, maps, M) if steps else None  # the key's own steps: the direction it moves in
        if found is not None:
            out.append(Residues(key, index, tuple(found[0]), tuple(heads), tuple(found[1])))
    return out


def _live_head(g: Residues, f: Match, rho: int) -> Head:
    """One head under the live-slots lemma."""
    want = [int(x) for x in np.asarray(f.match)]
    M = g.M
    slot = {lab: c for c, lab in enumerate(g.label)}  # the code index at each label
    dead = [d for d in range(1, M) if (-d - rho) % M >= M - d]

    def at(e: Env, name: str) -> int:
        code = _exact(read(e, name))
        if code not in g.index:
            raise ProgramError(f"head {f.head}: {name} holds {code}, none of its declared codes")
        return g.index[code]

    def step(m: Any, e: Env, t: int) -> tuple[Any, Code]:
        k = at(e, f.key)
        new = list(m)
        new[k] = read(e, f.src)
        value = new[want[at(e, f.query)]]
        if value is DEAD:
            raise NotCovered(f"head {f.head}: a slot its memory forgot was read (its key {f.key} moved other than "
                             f"0 or +1 along its codes' cycle)")
        for d in dead:
            new[slot[(g.label[k] - d) % M]] = DEAD
        return tuple(new), value
    return Head(f.dst, 0, lambda e: (read(e, f.src),) * M, lambda e: read(e, f.src), step)


def live_heads(groups: list[Residues]) -> dict[int, Head]:
    """The semantics (by the obligation's id) of every head of ``groups`` under the live-slots lemma."""
    return {id(f): _live_head(g, f, rho) for g in groups for f, rho in zip(g.heads, g.rhos)}


def _counter(ob: Obligations, ctx: Context, g: Residues) -> tuple[Average, int, int] | None:
    """The rotation lemma's sum: (its head, its period P, the shift c: the key's label at the sum's
    code x is x + c mod M), or None where the setting fails."""
    writers = [o for layer in ob.layers for o in layer.mlp_leaves() if g.key in o.names_written()]
    if len(writers) != 1 or not isinstance(writers[0], Lookup) or writers[0].out != g.key:
        return None
    lookup = writers[0]
    sums = [f for layer in ob.layers for f in layer.fetches if isinstance(f, Average) and f.dst in lookup.reads]
    if len(sums) != 1 or ctx.width(sums[0].dst) != 1 or [id(r) for r in ctx.readers(sums[0].dst)] != [id(lookup)]:
        return None
    f = sums[0]
    mode = sum_mode(f, f.dst, ctx)
    if mode[0] != "far" or mode[1] % g.M:
        return None
    j = sum(ctx.width(r) for r in lookup.reads[: lookup.reads.index(f.dst)])
    shifts = {(g.label[g.index[c]] - k[j]) % g.M for k, v in lookup.table.items() if (c := _exact(v)) in g.index}
    mine = {id(h) for h in g.heads}
    if len(shifts) != 1 or any(id(r) not in mine for r in ctx.readers(g.key)) or \
            any({h.src, h.dst} & {g.key, f.dst} for h in g.heads):
        return None
    return f, mode[1], shifts.pop()


@dataclass(frozen=True)
class _Window:
    """The matches lemma's setting in the program's memory: per offset j >= 1 the memory index of
    the head reading the letter j back, per offset o the index of the recent head holding the
    latest letter's offset-o code, and per (j, d) the codes at offsets j - d .. j - 1 with which
    some key of the suffix lookup goes on to read offset j."""

    head: dict[int, int]
    recent: dict[int, int]
    allowed: dict[tuple[int, int], set[tuple[Code, ...]]]


def _window(ob: Obligations, ctx: Context, g: Residues, where: dict[int, int]) -> _Window | None:
    """The matches lemma's setting for group ``g`` (module docstring), or None."""
    offset = {f.dst: (-rho) % g.M for f, rho in zip(g.heads, g.rhos)}
    readers = [r for f in g.heads for r in ctx.readers(f.dst)]
    if not readers or any(not isinstance(r, SuffixLookup) or r is not readers[0] for r in readers):
        return None
    lookup: SuffixLookup = readers[0]
    if any(ctx.width(r) != 1 for r in lookup.reads) or any(id(f) not in where for f in g.heads):
        return None
    recent = {f.dst: f for layer in ob.layers for f in layer.fetches if isinstance(f, Recent)}
    firsts = [n for n in lookup.reads if n in recent and n not in offset]
    if len(firsts) != 1 or id(recent[firsts[0]]) not in where:
        return None
    pos = {0: lookup.reads.index(firsts[0]), **{offset[f.dst]: lookup.reads.index(f.dst) for f in g.heads}}
    srcs = {0: recent[firsts[0]], **{offset[f.dst]: recent.get(f.src) for f in g.heads}}
    k = len(pos)
    if sorted(pos) != list(range(k)) or any(pos[o] >= pos[o + 1] for o in range(k - 1)) or \
            any(r is None or id(r) not in where for r in srcs.values()):
        return None
    allowed: dict[tuple[int, int], set[tuple[Code, ...]]]
    allowed = {(j, d): {tuple((float(key[pos[o]]),) for o in range(j - d, j)) for key in lookup.rows
                        if len(key) > pos[j]} for j in range(1, k) for d in range(1, j + 1)}
    return _Window({offset[f.dst]: where[id(f)] for f in g.heads}, {o: where[id(r)] for o, r in srcs.items()},
                   allowed)


def _forget(out: list[Any], w: _Window, z: int, slot: dict[int, int], M: int) -> None:
    """The matches lemma (module docstring): the slots of letters with which no key goes on become
    :data:`FORGOTTEN` (the key's label z; ``slot``: the code index at each label)."""
    before = list(out)
    for j, h in w.head.items():
        slots = list(before[h])
        for d in range(1, j + 1):
            at = slot[(z - d) % M]
            if slots[at] is DEAD or slots[at] == FORGOTTEN:
                continue
            known = [before[w.recent[j - d]]] + [before[w.head[j - d + i]][slot[(z - i) % M]] for i in range(1, d)]
            if all(v is not DEAD and v != FORGOTTEN for v in known) and tuple(known) not in w.allowed[(j, d)]:
                slots[at] = FORGOTTEN
        out[h] = tuple(slots)


def canonical_memory(ob: Obligations, ctx: Context, groups: list[Residues],
                     order: list[Any]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """The rotation lemma's canonical memory (residue 0) and the matches lemma's forgotten codes,
    for the groups in their settings; ``order``: the heads whose memories the program's memory
    holds, in order.  None when no group is in the setting."""
    where = {id(f): i for i, f in enumerate(order)}
    moves = []
    for g in groups:
        found = _counter(ob, ctx, g)
        if found is None or id(found[0]) not in where:
            continue
        slot = {lab: c for c, lab in enumerate(g.label)}
        moves.append((where[id(found[0])], found[1], found[2], [where[id(h)] for h in g.heads], g.label, slot,
                      _window(ob, ctx, g, where)))
    if not moves:
        return None

    def canonical(memory: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(memory)
        for i, P, shift, heads, label, slot, window in moves:
            (r,) = out[i]
            M = len(label)
            if isinstance(r, tuple):  # the sum left its exact range: rotate to residue 0
                s = -r[1] % P
                out[i] = (("far", 0),)
                for h in heads:
                    moved = [None] * M
                    for c, v in enumerate(out[h]):
                        moved[slot[(label[c] + s) % M]] = v
                    out[h] = tuple(moved)
            if window is not None:
                _forget(out, window, (shift + (0 if isinstance(r, tuple) else int(r))) % M, slot, M)
        return tuple(out)
    return canonical
