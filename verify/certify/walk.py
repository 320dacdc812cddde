"""The last visits of a walk, a lemma of the program proof (:mod:`.program`): the gridworld's
recency heads (Theorem 12) with any number of residues.

The heads' own semantics (:func:`.semantics._recency`) keeps the order of the last visits over
all M key codes, which grows about factorially with M.  The races read far less of it.

**Setting** (checked on the obligations, no construction code read).  A group of
position-copying :class:`~constructions.obligations.Match` heads of one layer shares its key
subspace (also their query) and its M >= 3 codes; one permutation sigma of the codes, an M-cycle, makes every
head's match map a power sigma^rho (rho in 0..M-1); label the codes 0..M-1 along sigma.  Only
races read the heads (never as a level), each head in one race, each dst written by its head
alone, and the two heads of a race have distinct nonzero rho.  The search then checks, at every
step it takes, that the key's label moves by -1, 0 or +1 mod M (NotCovered otherwise).  Lift
the labels to the integer walk z_1 = label_1, z_(t+1) = z_t + s_t, s_t in {-1, 0, 1}, and let
r_t(w) be the last position j in 1..t with z_j = w (0: never).  A head's copy at t is
R(z_t + rho) = max over w = z_t + rho mod M of r_t(w).

**Lemma (aliasing).**  For a race of residues rho1 != rho2, both nonzero, take the integers
a = max(rho1, rho2) - M < 0 < b = min(rho1, rho2) (so b - a < M).  Then R(z + rho_i) compares
as r(z + a) and r(z + b) do, and both are 0 exactly when both are.  Proof: every alias of z + a
above it lies above z + b (b - a < M), and the walk went from its last visit down to z through
z + b (steps of at most 1), so r(z + b) exceeds it; every alias below z + a is exceeded by
r(z + a) the same way; symmetrically for z + b's aliases.  So the larger of r(z + a), r(z + b)
is larger than every alias of the other, and when both are 0 no alias was visited either.

**Lemma (shift register).**  For the pairs P = {(a, a + g) : -g < a < 0} of each race's gap g,
the bits [r(z + a) > r(z + b)] after a step s are the bits of (a + s, b + s) before it: a pair
with a + s = 0 becomes 1 (z was visited at the last position, the most recent of all; 0 before
the first position), one with b + s = 0 becomes 0; the others are in P.  And z + a, z + b are
both unvisited exactly when z - lo < -a and hi - z < b, [lo, hi] the visited interval, which
moves as (max(z - lo + s, 0), max(hi - z - s, 0)) and, once hi - lo >= max g - 1, can satisfy
no pair again (hi - lo never shrinks): the memory then forgets it (``WIDE``).

So the group's memory is (label, extents or WIDE, the bits of P): finite and small.  Each head
writes, for its race, 0 when both are unvisited, else 2 or 1 as it is the more or the less
recent -- what the race compares is then what it compares on the real copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from constructions.obligations import Lookup, Match, Obligations, Race, Races

from .semantics import Code, Context, Env, Head, NotCovered, ProgramError, read

WIDE = "wide"
"""The extents once the visited interval is too wide for any pair to be unvisited on both sides."""


@dataclass(frozen=True)
class Walk:
    """One group of recency heads under the lemmas (module docstring)."""

    key: str
    index: dict[tuple[float, ...], int]  # code -> its label along sigma
    M: int
    pairs: tuple[tuple[int, int], ...]  # P: (a, b), a < 0 < b
    wide: int  # the span from which no pair can be unvisited on both sides


def _exact(row: Any) -> tuple[float, ...]:
    """A code as a dictionary key (as the heads' semantics round it)."""
    return tuple(round(float(v), 9) for v in row)


def key_steps(ob: Obligations, key: str, index: dict[tuple[float, ...], int]) -> list[list[int]]:
    """Candidate steps of the key along its codes: for a lookup writing the key, the map from the
    code at one table key to the code at the next value of one coordinate (where consistent); a
    map that walks every code once, from one code with no successor back to the one with no
    predecessor (a one-hot of every value, not of residues), closed into a cycle -- only a choice
    of sigma, which the search checks."""
    out = []
    for o in (o for layer in ob.layers for o in layer.mlp_leaves() if isinstance(o, Lookup) and o.out == key):
        table = {k: index.get(_exact(np.asarray(v).ravel())) for k, v in o.table.items()}
        for j in range(len(next(iter(table), ()))):
            step: dict[int, int] = {}
            for k, c in table.items():
                n = table.get((*k[:j], k[j] + 1, *k[j + 1 :]))
                if c is not None and n is not None and step.setdefault(c, n) != n:
                    break
            else:
                heads, tails = set(range(len(index))) - set(step), set(range(len(index))) - set(step.values())
                if len(heads) == 1 and len(tails) == 1:  # a path through every code: closed into a cycle
                    step[heads.pop()] = tails.pop()
                if sorted(step) == list(range(len(index))):
                    out.append([step[c] for c in range(len(index))])
    return out


def cycle_of(steps: list[list[int]], maps: list[list[int]], M: int) -> tuple[list[int], list[int]] | None:
    """An M-cycle sigma of which every map is a power, tried among the key's candidate ``steps``
    first, then among the maps and their inverses: (labels of the codes along sigma, each map's
    rho).  Which sigma is only a choice: the search checks that the key moves along it."""
    for cand in (*steps, *maps, *([m.index(i) for i in range(M)] for m in maps)):
        order, x = [], 0
        while x not in order:
            order.append(x)
            x = cand[x]
        if len(order) != M:
            continue
        label = [0] * M
        for k, c in enumerate(order):
            label[c] = k
        rhos = [(label[mp[0]] - label[0]) % M for mp in maps]
        if all(label[mp[c]] == (label[c] + r) % M for mp, r in zip(maps, rhos) for c in range(M)):
            return label, rhos
    return None


def _writers(ob: Obligations, dst: str) -> int:
    """How many obligations write ``dst`` (itself or its whole subspace)."""
    base = dst.split("[")[0]
    return sum(1 for layer in ob.layers for n in layer.names_written() for p in n.split(" + ") if p in (dst, base))


def _group(ob: Obligations, heads: list[Match], races: list[Race], ctx: Context) -> dict[int, Head]:
    """The lemma's heads for one group (same key and codes), or {} where its setting fails."""
    codes = np.asarray(heads[0].codes)
    M = len(codes)
    maps = [[int(x) for x in np.asarray(f.match)] for f in heads]
    index = {_exact(codes[c]): c for c in range(M)}
    if M < 3 or len(index) != M or any(sorted(m) != list(range(M)) for m in maps):
        return {}
    found = cycle_of(key_steps(ob, heads[0].key, index), maps, M)
    if found is None or any(f.query != f.key for f in heads):
        return {}
    label, rhos = found
    rho = {f.dst: r for f, r in zip(heads, rhos)}
    roles: dict[str, Role] = {}
    gaps = set()
    for race in races:
        if race.first not in rho and race.second not in rho:
            continue
        if race.first not in rho or race.second not in rho or race.first in roles or race.second in roles:
            return {}
        r1, r2 = rho[race.first], rho[race.second]
        if r1 == r2:  # one residue twice: visited once the visited interval has M integers
            roles[race.first] = roles[race.second] = ("same", r1)
            gaps.add(M)
            continue
        if 0 in (r1, r2):  # the current position: the most recent visit of all
            roles[race.first], roles[race.second] = ("now", r1 == 0), ("now", r2 == 0)
            continue
        a, b = max(r1, r2) - M, min(r1, r2)
        gaps.add(b - a)
        roles[race.first], roles[race.second] = ("pair", (a, b), r1 > r2), ("pair", (a, b), r2 > r1)
    for f in heads:
        if any(not isinstance(r, Races) or any(f.dst in x.level for x in r.races) for r in ctx.readers(f.dst)):
            return {}
        if _writers(ob, f.dst) != 1:
            return {}
    pairs = sorted({(a, a + g) for g in gaps - {M} for a in range(-g + 1, 0)})
    walk = Walk(heads[0].key, {code: label[c] for code, c in index.items()}, M, tuple(pairs),
                max(gaps, default=1) - 1)
    return {id(f): _head(walk, f, roles.get(f.dst)) for f in heads}


def _advance(w: Walk, m: Any, e: Env, head: str) -> Any:
    """The group's memory after the key's code at this position (module docstring's lemmas)."""
    code = _exact(read(e, w.key))
    if code not in w.index:
        raise ProgramError(f"head {head}: {w.key} holds {code}, none of its declared codes")
    label = w.index[code]
    prev, ext, bits = m
    if prev is None:  # the first position: nothing visited before it
        return label, (WIDE if w.wide <= 0 else (0, 0)), bits
    s = {0: 0, 1: 1, w.M - 1: -1}.get((label - prev) % w.M)
    if s is None:
        raise NotCovered(f"head {head}: its key {w.key} moves by more than one step along its codes' cycle")
    if s:
        old = dict(zip(w.pairs, bits))
        bits = tuple(a + s == 0 or (b + s != 0 and old[(a + s, b + s)]) for a, b in w.pairs)
    if ext != WIDE:
        ext = (max(ext[0] + s, 0), max(ext[1] - s, 0))
        ext = WIDE if ext[0] + ext[1] >= w.wide else ext
    return label, ext, bits


Role = tuple[Any, ...]
"""A head's part in its race: ("pair", (a, b), whether it reads z + a), ("same", rho) when both
heads of its race copy the residue rho, ("now", whether it is the one of residue 0)."""


def _value(w: Walk, m: Any, role: Role | None) -> float:
    """What a head writes for its race: 0 (never visited), 2 (the more recent) or 1 -- a race
    compares these as it compares the real copies (the aliasing lemma)."""
    _, ext, bits = m
    if role is None:  # a head no race reads
        return 0.0
    if role[0] == "now":
        return 2.0 if role[1] else 1.0
    if role[0] == "same":  # unvisited exactly when no offset in the visited interval has the residue
        return 1.0 if ext == WIDE or any((d - role[1]) % w.M == 0 for d in range(-ext[0], ext[1] + 1)) else 0.0
    _, (a, b), lower = role
    if ext != WIDE and ext[0] < -a and ext[1] < b:
        return 0.0
    return 2.0 if bits[w.pairs.index((a, b))] == lower else 1.0


def _head(w: Walk, f: Match, role: Role | None) -> Head:
    """One head of the group: it keeps the group's memory and writes :func:`_value`."""
    def step(m: Any, e: Env, t: int) -> tuple[Any, Code]:
        m = _advance(w, m, e, f.head)
        return m, (_value(w, m, role),)
    return Head(f.dst, 0, lambda e: (None, None, (False,) * len(w.pairs)), lambda e: (0.0,), step)


def walk_heads(ob: Obligations, ctx: Context) -> dict[int, Head]:
    """The semantics (by the obligation's id) of every position-copying nearest-value head whose
    group meets the lemmas' setting; the other groups keep the order of last visits."""
    groups: dict[tuple[int, str, tuple[tuple[float, ...], ...]], list[Match]] = {}
    for l, layer in enumerate(ob.layers):  # one layer: every head of a group reads the same key codes
        for f in layer.fetches:
            if isinstance(f, Match) and ctx.increasing(f.src):
                groups.setdefault((l, f.key, tuple(_exact(r) for r in np.asarray(f.codes))), []).append(f)
    races = [r for layer in ob.layers for o in layer.mlp_leaves() if isinstance(o, Races) for r in o.races]
    out: dict[int, Head] = {}
    for heads in groups.values():
        out.update(_group(ob, heads, races, ctx))
    return out

