"""Krohn–Rhodes decomposition: automaton -> verified cascade of counters and resets.

Orchestration (the holonomy decomposition; docs/architecture.md):

1. semigroup analysis -- size under a budget, group?, letters merged by map;
2. holonomy decomposition (:mod:`compiler.holonomy`) -- one level per depth of
   the subduction order, each a permutation-reset action on tiles, explored
   lazily over reachable coordinate prefixes;
3. refinement, level by level -- every class whose holonomy group H is
   non-trivial becomes "group then reset": H run on itself (left regular,
   g <- g·π on a permutation, identity on resets) as counter levels along its
   derived series (:mod:`compiler.groups`), or kept whole as one ``group``
   component when H is not solvable; the level's tiles go into one reset unit
   which, on "reset to tile z" of class b, stores y = z·g_b^-1 so that the tile
   is always y·g_b (a *view*).  Classes with trivial H (counter-free parts)
   need only the reset unit.  Permutation automata are the one-level case
   (H = the automaton's group on the states); counter-free automata the case
   with no groups at all -- both fall out of the same code with no extra work;
4. tables -- every component's input as an explicit table over the reachable
   (pre-update upper signals, letter) keys, then dependencies minimised by
   dropping reads the table does not need;
5. verification -- see :func:`_verify`; :func:`decompose` raises
   :class:`DecompositionError` rather than return an unverified cascade.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import groups as G
from .cascade import (
    Cascade,
    Component,
    HolonomyGroupInfo,
    Readout,
    Verification,
    View,
    assign_levels,
)
from .errors import BudgetError, ShortcutError
from .holonomy import (
    DEFAULT_CHAIN_BUDGET,
    DEFAULT_IMAGE_BUDGET,
    Block,
    Exploration,
    Holonomy,
    apply_action,
    members,
)
from .load import load_spec
from .semigroup import LetterNormalisation, analyse_semigroup, normalise_letters
from .spec import Semiautomaton

DEFAULT_COUNT_BUDGET = 50_000
"""Largest semigroup whose size is counted; past it the size is reported as unknown."""

DEFAULT_TABLE_BUDGET = 600_000
"""Most table rows (all components, views and the readout together)."""

DIRECT_CHECK_BUDGET = 60_000
"""Component updates spent on the direct breadth-first check of the final cascade (steps times
components), and again on random words."""

LEVEL_CHECK_BUDGET = 300_000
"""Most (prefix, letter, local state) checks of the final tables, level by level (see :func:`_verify`)."""

GROUP_CHECK_BUDGET = 20_000_000
"""Most work (checks times the degree of the permutations) spent checking a group's counters, and
a level's group-then-reset, on every input; past it only the inputs in a generating set are
checked (the others follow, see :func:`_verify`)."""

FINAL_MINIMISE_BUDGET = 2_000_000
"""Largest table (rows times reads) given a last whole-table minimisation pass; bigger ones keep
the reads found by minimising their factors (upper signals, then the level's own coordinates)."""

KEEP_ALL = "keep"
"""The action of an identity letter on a whole level."""


class DecompositionError(ShortcutError):
    """The decomposition failed one of its own checks (an internal error, never the user's input)."""


# ---------------------------------------------------------------------------
# Refinement of one holonomy level


@dataclass
class _GroupPart:
    """A class with non-trivial holonomy group H, run regularly (g <- g·π)."""

    block: Block
    gs: G.GroupStructure
    names: list[str]
    flat: dict[G.Perm, tuple[int, ...]] = field(repr=False)
    unflat: dict[tuple[int, ...], G.Perm] = field(repr=False)
    transversal: dict[int, tuple[int, G.Perm]] = field(repr=False)
    slices: list[tuple[int, int]] = field(default_factory=list)
    inverse: dict[tuple[int, ...], G.Perm] = field(default_factory=dict, repr=False)

    @property
    def identity_coords(self) -> tuple[int, ...]:
        return self.flat[G.identity(self.gs.degree)]


@dataclass
class _Level:
    """Holonomy level ``depth`` refined: group parts, one reset unit, one tile signal."""

    depth: int
    dummy: int
    parts: list[_GroupPart]
    part_of_block: dict[int, int]
    block_of_value: dict[int, Block]
    ys: list[int]
    y_index: dict[int, int]
    codes: list[int] = field(default_factory=list)
    code_index: dict[int, int] = field(default_factory=dict)
    reset: str | None = None
    view: str | None = None
    _gkeys: list[tuple[int, ...]] | None = field(default=None, repr=False)
    _local_cache: dict[int, list] = field(default_factory=dict, repr=False)

    @property
    def signal(self) -> str | None:
        """The name of the signal carrying this level's tile (None if it is constant)."""
        return self.view or self.reset

    def split(self, gkey: Sequence[int]) -> list[tuple[int, ...]]:
        out, i = [], 0
        for p in self.parts:
            k = len(p.names)
            out.append(tuple(gkey[i:i + k]))
            i += k
        return out

    def group_part(self, v: int) -> tuple[Block, int] | None:
        """The block of level value ``v`` and the index of the group part acting on it (None: no group acts)."""
        if v == self.dummy:
            return None
        b = self.block_of_value[v]
        pi = self.part_of_block.get(b.index)
        return None if pi is None else (b, pi)

    def tile(self, gkey: Sequence[int], y: int) -> int:
        """The level value (raw) a local state (group coordinates, stored y) stands for."""
        found = self.group_part(y)
        if found is None:
            return y
        b, pi = found
        g = self.parts[pi].unflat[self.split(gkey)[pi]]
        return b.offset + g[y - b.offset]

    def local_states(self, v: int) -> list[tuple[tuple[int, ...], int]]:
        """Every (group coordinates, stored y) whose tile is v, y among the values the reset unit can hold."""
        cached = self._local_cache.get(v)
        if cached is not None:
            return cached
        out = []
        pi = None
        if v != self.dummy:
            b = self.block_of_value[v]
            pi = self.part_of_block.get(b.index)
        for gkey in self.gkeys():
            if pi is None:
                y = v
            else:
                part = self.parts[pi]
                y = b.offset + part.inverse[self.split(gkey)[pi]][v - b.offset]
            if y in self.y_index:
                out.append((gkey, y))
        self._local_cache[v] = out
        return out

    def gkeys(self) -> list[tuple[int, ...]]:
        """All joint coordinates of the level's groups (concatenated, part by part)."""
        if self._gkeys is None:
            per_part = [list(p.unflat) for p in self.parts]
            self._gkeys = [tuple(itertools.chain.from_iterable(c)) for c in itertools.product(*per_part)]
        return self._gkeys


def _group_part(block: Block, depth: int, j: int, budget: int) -> _GroupPart:
    """The holonomy group of a class as components: counters along its derived series (named
    ``h<depth>.b<j>.count<i>.<k>``) or, if not solvable, one ``group`` component; with an orbit
    transversal (tile -> (orbit representative, element taking it there)) for encodings."""
    gs = G.analyse(block.generators, len(block.tiles), budget)
    prefix = f"h{depth}.b{j}"
    if gs.solvable:
        names, slices, start = [], [], 0
        for i, lvl in enumerate(gs.levels):
            names.extend(f"{prefix}.count{i}.{k}" for k in range(len(lvl.moduli)))
            slices.append((start, start + len(lvl.moduli)))
            start += len(lvl.moduli)
        flat = {g: tuple(itertools.chain.from_iterable(gs.encode(g))) for g in gs.elements}
    else:
        names, slices = [f"{prefix}.group"], []
        flat = {g: (i,) for i, g in enumerate(gs.elements)}
    unflat = {c: g for g, c in flat.items()}
    if len(unflat) != len(flat):
        raise DecompositionError("group coordinates are not injective")
    transversal: dict[int, tuple[int, G.Perm]] = {}
    for t in range(len(block.tiles)):
        if t in transversal:
            continue
        transversal[t] = (t, G.identity(gs.degree))
        queue = [t]
        while queue:
            u = queue.pop()
            _, g = transversal[u]
            for gen in gs.reduced_generators:
                w = gen[u]
                if w not in transversal:
                    transversal[w] = (t, G.mul(g, gen))
                    queue.append(w)
    for t, (o, g) in transversal.items():
        if g[o] != t:
            raise DecompositionError("orbit transversal does not reach its tile")
    inverse = {c: G.inverse(g) for c, g in unflat.items()}
    return _GroupPart(block, gs, names, flat, unflat, transversal, slices, inverse)


def _plan_level(hol: Holonomy, ex: Exploration, depth: int, group_budget: int) -> _Level:
    """Refinement plan of holonomy level ``depth``: its group parts and the values its reset unit
    can hold (encodings' orbit representatives, and z·g^-1 for every reset target z)."""
    blocks = hol.level_blocks[depth - 1]
    dummy = hol.dummy[depth - 1]
    parts: list[_GroupPart] = []
    part_of_block: dict[int, int] = {}
    block_of_value: dict[int, Block] = {}
    for j, b in enumerate(blocks):
        for t in range(len(b.tiles)):
            block_of_value[b.offset + t] = b
        if b.generators:
            part_of_block[b.index] = len(parts)
            parts.append(_group_part(b, depth, j, group_budget))
    joint = 1
    for part in parts:
        joint *= part.gs.order
    if joint > group_budget:
        raise BudgetError(
            f"the holonomy groups of level {depth} together have {joint} elements (group budget "
            f"{group_budget}); use the scan construction for this automaton"
        )
    lvl = _Level(depth, dummy, parts, part_of_block, block_of_value, [], {})
    ys: set[int] = set()
    for coords in ex.encodings:
        ys.add(_initial_y(lvl, coords[depth - 1]))
    for act in ex.actions[depth].values():
        if isinstance(act, int):
            if act == dummy or lvl.block_of_value[act].index not in part_of_block:
                ys.add(act)
            else:
                b = lvl.block_of_value[act]
                part = parts[part_of_block[b.index]]
                t = act - b.offset
                ys.update(b.offset + g[t] for g in part.gs.elements)  # the orbit of t
    if not parts:
        ys.update(ex.value[c] for c in ex.level_nodes[depth])
    lvl.ys = sorted(ys)
    lvl.y_index = {y: i for i, y in enumerate(lvl.ys)}
    return lvl


def _initial_y(lvl: _Level, v: int) -> int:
    """The stored value y of level value v in an encoding (its orbit representative)."""
    found = lvl.group_part(v)
    if found is None:
        return v
    b, pi = found
    return b.offset + lvl.parts[pi].transversal[v - b.offset][0]


def _initial_local(lvl: _Level, v: int) -> tuple[tuple[int, ...], int]:
    """Group coordinates and y encoding level value v (g = transversal element, y = orbit representative)."""
    coords = [p.identity_coords for p in lvl.parts]
    if v != lvl.dummy:
        b = lvl.block_of_value[v]
        pi = lvl.part_of_block.get(b.index)
        if pi is not None:
            part = lvl.parts[pi]
            coords[pi] = part.flat[part.transversal[v - b.offset][1]]
    return tuple(itertools.chain.from_iterable(coords)), _initial_y(lvl, v)


# ---------------------------------------------------------------------------
# Tables


class _Budget:
    """Counts table rows against the table budget."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def add(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise BudgetError(
                f"the cascade's tables need more than {self.limit} rows (table budget); "
                f"use the scan construction for this automaton"
            )


_CODE_LIMIT = 2 ** 62


def _combine(code, bound: int, col, r: int):
    """Group code of (code, col) for rows; ``bound`` bounds code, ``r`` bounds col.  Re-numbers
    the groups as 0..k-1 when the mixed-radix code would overflow int64."""
    if bound * r >= _CODE_LIMIT:
        uniq, code = np.unique(code, return_inverse=True)
        code, bound = code.reshape(-1).astype(np.int64), len(uniq)
    return code * r + col, bound * r


def _needed(mat, outs, n_reads: int, tried: Sequence[int], extra: Sequence[int] = ()) -> list[int]:
    """Greedy minimal read set: columns 0..n_reads-1 of ``mat`` (non-negative ints), dropping those
    in ``tried`` (last first) while rows agreeing on the remaining columns (and on the columns
    ``extra``) keep equal ``outs``.  Vectorised: prefix group codes are computed once, the
    suffix code grows as columns are kept, and each test is one sort."""
    n = mat.shape[0]
    tried = set(tried)
    if len(np.unique(outs)) <= 1:
        return [i for i in range(n_reads) if i not in tried]
    radix = [int(r) for r in mat.max(axis=0) + 1] if n else [1] * mat.shape[1]
    prefix = [(np.zeros(n, dtype=np.int64), 1)]
    for c in range(n_reads):
        prefix.append(_combine(*prefix[-1], mat[:, c], radix[c]))
    suffix, sbound = np.zeros(n, dtype=np.int64), 1
    for c in extra:
        suffix, sbound = _combine(suffix, sbound, mat[:, c], radix[c])
    keep = []
    for j in reversed(range(n_reads)):
        if j in tried:
            pcode, pbound = prefix[j]
            if pbound * sbound >= _CODE_LIMIT:
                uniq, pcode = np.unique(pcode, return_inverse=True)
                pcode = pcode.reshape(-1).astype(np.int64)
            code = pcode * sbound + suffix
            order = np.lexsort((outs, code))
            sc, so = code[order], outs[order]
            if not np.any((sc[1:] == sc[:-1]) & (so[1:] != so[:-1])):
                continue
        keep.append(j)
        if sbound >= 1 << 40:
            uniq, suffix = np.unique(suffix, return_inverse=True)
            suffix, sbound = suffix.reshape(-1).astype(np.int64), len(uniq)
        suffix, sbound = mat[:, j] * sbound + suffix, sbound * radix[j]
    return sorted(keep)


def minimise(reads: Sequence[str], table: dict, letter_keyed: bool = True,
             candidates: Sequence[int] | None = None) -> tuple[tuple[str, ...], dict]:
    """Drop every read the table does not depend on (greedy, last read first).

    A read can go when the table stays a function after forgetting it -- over
    the keys listed, which cover every reachable configuration.  Only the reads
    at positions ``candidates`` (default: all) are tried.  Returns the kept
    reads and the table keyed by them.  Tables are keyed ``(values, letter)``,
    or ``values`` alone when not ``letter_keyed``.
    """
    tried = list(range(len(reads)) if candidates is None else candidates)
    if not tried or not table:
        return tuple(reads), table
    keys = [vals + (a,) for vals, a in table] if letter_keyed else list(table)
    ids: dict = {}
    outs = np.fromiter((ids.setdefault(o, len(ids)) for o in table.values()), dtype=np.int64, count=len(table))
    mat = np.asarray(keys, dtype=np.int64).reshape(len(keys), -1)
    mat = mat - mat.min(axis=0, initial=0)
    keep = _needed(mat, outs, len(reads), tried, [len(reads)] if letter_keyed else [])
    if len(keep) == len(reads):
        return tuple(reads), table
    proj: dict = {}
    for k, out in zip(keys, table.values()):
        pk = tuple([k[i] for i in keep])
        proj[(pk, k[-1]) if letter_keyed else pk] = out
    return tuple(reads[i] for i in keep), proj


def _minimise_rows(up_reads: tuple[str, ...], upkeys: list[tuple[int, ...]], umat, outs: list[list]
                   ) -> tuple[tuple[str, ...], dict]:
    """:func:`minimise` for a table given per node (upper key) and letter: ``outs[node][letter]``."""
    n_letters = len(outs[0]) if outs else 0
    ids: dict = {}
    flat = np.fromiter((ids.setdefault(o, len(ids)) for row in outs for o in row), dtype=np.int64,
                       count=len(outs) * n_letters)
    mat = np.concatenate([np.repeat(umat, n_letters, axis=0),
                          np.tile(np.arange(n_letters, dtype=np.int64), len(outs))[:, None]], axis=1)
    keep = _needed(mat, flat, len(up_reads), range(len(up_reads)), [len(up_reads)])
    rows = {}
    for key, row in zip(upkeys, outs):
        pk = tuple([key[i] for i in keep])
        for a, o in enumerate(row):
            rows[(pk, a)] = o
    return tuple(up_reads[i] for i in keep), rows


def _level_actions(ex: Exploration, letters: LetterNormalisation, depth: int, node: int) -> list[object]:
    """The level's input for each letter of the alphabet at a node of depth ``depth - 1``."""
    acts = ex.actions[depth]
    return [KEEP_ALL if m is None else acts[(node, m)] for m in letters.map_of_letter]


def _part_input(part: _GroupPart, act: object) -> G.Perm:
    """The element a class's group is multiplied by: its permutation, or the identity."""
    if isinstance(act, tuple) and act[0] == part.block.index:
        return act[1]
    return G.identity(part.gs.degree)


def _reset_target(lvl: _Level, gkey: Sequence[int], z: int) -> int:
    """y to store for "reset to level value z" when the groups stand at ``gkey``: z·g^-1."""
    if z == lvl.dummy:
        return z
    b = lvl.block_of_value[z]
    pi = lvl.part_of_block.get(b.index)
    if pi is None:
        return z
    return b.offset + lvl.parts[pi].inverse[lvl.split(gkey)[pi]][z - b.offset]


def _reset_input(lvl: _Level, act: object, gkey: Sequence[int]) -> int | None:
    """The reset unit's input (index of the value to set, or None = keep)."""
    if act == KEEP_ALL or isinstance(act, tuple):
        return None
    return lvl.y_index[_reset_target(lvl, gkey, act)]


def _local_step(lvl: _Level, act: object, gkey: tuple[int, ...], yi: int) -> tuple[tuple[int, ...], int]:
    """The semantics the tables implement: one level's local state (group coordinates,
    index of y) after the holonomy input ``act`` (group parts g <- g·π, reset y <- z·g^-1)."""
    new: list[int] = []
    for part, coords in zip(lvl.parts, lvl.split(gkey)):
        h = _part_input(part, act)
        g = part.unflat[coords]
        new.extend(part.flat[G.mul(g, h)] if not part.gs.solvable else
                   itertools.chain.from_iterable(part.gs.step(part.gs.encode(g), h)))
    r = _reset_input(lvl, act, gkey) if len(lvl.ys) > 1 else None
    return tuple(new), yi if r is None else r


def _build_level(lvl: _Level, hol: Holonomy, ex: Exploration, letters: LetterNormalisation,
                 upper: list[_Level], budget: _Budget) -> tuple[list[Component], list[View]]:
    """The level's components and view, with tables factored through the holonomy input.

    Each component's input depends on the upper signals only through a small
    "reduced input" (its class's permutation, or the reset target), so the
    upper reads are minimised on the (node, letter) -> reduced input table
    first, then combined with the level's own coordinates.
    """
    d = lvl.depth
    up_levels = [u for u in upper if u.signal is not None]
    up_reads = tuple(u.signal for u in up_levels)
    nodes = ex.level_nodes[d - 1]
    upkeys = [tuple(u.code_index[ex.path[n][u.depth - 1]] for u in up_levels) for n in nodes]
    node_acts = [_level_actions(ex, letters, d, n) for n in nodes]

    umat = np.asarray(upkeys, dtype=np.int64).reshape(len(nodes), len(up_levels))
    comps: list[Component] = []
    views: list[View] = []

    for part in lvl.parts:
        outs = [[part.gs.index[_part_input(part, act)] for act in acts] for acts in node_acts]
        ureads, rows = _minimise_rows(up_reads, upkeys, umat, outs)
        rep = ",".join(map(str, members(part.block.rep)))
        role_group = f"{part.gs.name} on the {len(part.block.tiles)} tiles of {{{rep}}}"
        if not part.gs.solvable:
            budget.add(len(rows))
            comps.append(Component(part.names[0], "group", part.gs.order, ureads, rows,
                                   holonomy_level=d, role=f"non-solvable holonomy group {role_group}",
                                   elements=part.gs.elements))
            continue
        hs = sorted(set(rows.values()))
        for i, (s, e) in enumerate(part.slices):
            prefixes = sorted({c[:s] for c in part.unflat})
            own = tuple(part.names[:s])
            for k in range(e - s):
                # The increment as a function of (input element, own upper coordinates), minimised
                # on that small table, then spread over the (upper signals, letter) rows.
                local = {}
                for hidx in hs:
                    h = part.gs.elements[hidx]
                    for prefix in prefixes:
                        nested = [prefix[s2:e2] if e2 <= len(prefix) else (0,) * (e2 - s2)
                                  for s2, e2 in part.slices]
                        local[(prefix, hidx)] = part.gs.increments(nested, h)[i][k]
                lreads, local = minimise(own, local)
                kept = sorted({pk for pk, _ in local})
                table = {}
                for (ukey, a), hidx in rows.items():
                    for pk in kept:
                        table[(ukey + pk, a)] = local[(pk, hidx)]
                budget.add(len(table))
                m = part.gs.levels[i].moduli[k]
                comps.append(Component(part.names[s + k], "counter", m, ureads + lreads, table, holonomy_level=d,
                                       role=f"derived level {i} (factor C{m}) of holonomy group {role_group}"))
    gnames = tuple(n for p in lvl.parts for n in p.names)
    gkeys = lvl.gkeys()
    if len(lvl.ys) > 1:
        lvl.reset = f"h{d}.reset"
        outs = [[None if act == KEEP_ALL or isinstance(act, tuple) else act for act in acts]
                for acts in node_acts]
        ureads, rows = _minimise_rows(up_reads, upkeys, umat, outs)
        # y <- z·g_b^-1 reads the coordinates of class b's group only when some reset targets class b.
        targets = {lvl.block_of_value[z].index for z in rows.values() if z is not None and z != lvl.dummy}
        used = [pi for pi, part in enumerate(lvl.parts) if part.block.index in targets]
        names = tuple(n for pi in used for n in lvl.parts[pi].names)
        ident = [p.identity_coords for p in lvl.parts]
        zs = sorted({z for z in rows.values() if z is not None})
        local = {}
        for combo in itertools.product(*(list(lvl.parts[pi].unflat) for pi in used)):
            full = list(ident)
            for pi, c in zip(used, combo):
                full[pi] = c
            gk = tuple(itertools.chain.from_iterable(full))
            for z in zs:
                local[(tuple(itertools.chain.from_iterable(combo)), z)] = lvl.y_index[_reset_target(lvl, gk, z)]
        lreads, local = minimise(names, local)
        kept = sorted({pk for pk, _ in local}) or [()]
        table = {}
        for (ukey, a), z in rows.items():
            for pk in kept:
                table[(ukey + pk, a)] = None if z is None else local[(pk, z)]
        reads = ureads + lreads
        budget.add(len(table))
        what = "tiles" if lvl.parts else "tiles (the level's value)"
        comps.append(Component(lvl.reset, "reset", len(lvl.ys), reads, table, holonomy_level=d,
                               role=f"holonomy level {d}: {what} of {len(hol.level_blocks[d - 1])} class(es)"
                                    + (", stored as y with tile = y·g" if lvl.parts else "")))
    if lvl.parts:
        raw = {}
        for gk in gkeys:
            for y in lvl.ys:
                raw[(gk, y)] = lvl.tile(gk, y)
        lvl.codes = sorted(set(raw.values()))
        lvl.code_index = {v: i for i, v in enumerate(lvl.codes)}
        lvl.view = f"h{d}.tile"
        reads = gnames + ((lvl.reset,) if lvl.reset else ())
        vt = {}
        for (gk, y), v in raw.items():
            vt[gk + ((lvl.y_index[y],) if lvl.reset else ())] = lvl.code_index[v]
        budget.add(len(vt))
        views.append(View(lvl.view, reads, vt, len(lvl.codes), d,
                          f"tile of holonomy level {d} (y·g of the reset value and the group coordinates)"))
    else:
        lvl.codes = list(lvl.ys)
        lvl.code_index = dict(lvl.y_index)
    return comps, views


# ---------------------------------------------------------------------------
# Verification


def _check_actions(lvl: _Level, ex: Exploration, budget: int = GROUP_CHECK_BUDGET) -> tuple[int, bool]:
    """For every distinct holonomy input of the level and every local state (group coordinates, y)
    standing for a value it applies to, the local update stands for the input's result.

    A reset to z does not look at the old tile, so it is checked once per
    joint group coordinate (y·g must become z whatever g is).  When the
    permutations times the local states pass ``budget``, only permutations
    in the groups' reduced generating sets are checked.  Returns (checks, all inputs checked).
    """
    d = lvl.depth
    values = sorted({ex.value[c] for c in ex.level_nodes[d]})
    acts = set(ex.actions[d].values()) | {KEEP_ALL}
    n_local = len(lvl.gkeys())
    perms = [act for act in acts if isinstance(act, tuple)]
    degree = max((p.gs.degree for p in lvl.parts), default=1)
    complete = len(perms) * n_local * degree <= budget
    if not complete:
        reduced = {(p.block.index, g) for p in lvl.parts for g in p.gs.reduced_generators}
        acts = {act for act in acts if not isinstance(act, tuple) or act in reduced}
    checks = 0
    any_y = lvl.ys[0]
    gkeys = lvl.gkeys()
    for act in acts:
        if isinstance(act, int):
            cases = [(gk, any_y) for gk in gkeys]
            targets = [act] * len(cases)
        else:
            cases, targets = [], []
            for v in values:
                if isinstance(act, tuple):
                    b = lvl.block_of_value.get(v)
                    if b is None or b.index != act[0]:
                        continue
                t = v if act == KEEP_ALL else apply_action(ex.hol, d, act, v)
                for local in lvl.local_states(v):
                    cases.append(local)
                    targets.append(t)
        for (gk, y), target in zip(cases, targets):
            ngk, nyi = _local_step(lvl, act, gk, lvl.y_index[y])
            if lvl.tile(ngk, lvl.ys[nyi]) != target:
                raise DecompositionError(f"group-then-reset of level {d} does not follow its input")
            checks += 1
    return checks, complete


def _check_level(lvl: _Level, comps: list[Component], views: list[View], upper: list[_Level],
                 ex: Exploration, letters: LetterNormalisation) -> int:
    """Every (reachable upper prefix, letter, local state of the level) gives, through the final
    tables, the level value the holonomy cascade prescribes.  Returns the number of checks."""
    d = lvl.depth
    children: dict[int, list[int]] = {}
    for c in ex.level_nodes[d]:
        children.setdefault(ex.parent[c], []).append(c)
    local_names = [n for p in lvl.parts for n in p.names] + ([lvl.reset] if lvl.reset else [])
    up_levels = [u for u in upper if u.signal is not None]
    slots = {u.signal: i for i, u in enumerate(up_levels)}
    for i, n in enumerate(local_names):
        slots[n] = len(up_levels) + i
    plans = [(tuple(slots[r] for r in c.reads), c) for c in comps]
    view = next((v for v in views if v.name == lvl.view), None)
    view_pos = tuple(slots[r] - len(up_levels) for r in view.reads) if view else None
    local_cache: dict[int, list] = {}
    checks = 0
    for node in ex.level_nodes[d - 1]:
        upvals = tuple(u.code_index[ex.path[node][u.depth - 1]] for u in up_levels)
        for c in children.get(node, []):
            v = ex.value[c]
            states = local_cache.get(v)
            if states is None:
                states = local_cache[v] = [gk + ((lvl.y_index[y],) if lvl.reset else ())
                                           for gk, y in lvl.local_states(v)]
            for a, m in enumerate(letters.map_of_letter):
                target = v if m is None else ex.value[ex.trans[(c, m)]]
                for local in states:
                    sig = upvals + local
                    new = tuple([comp.apply(old, comp.table[(tuple([sig[i] for i in reads]), a)])
                                 for (reads, comp), old in zip(plans, local)])
                    ny = lvl.ys[new[-1]] if lvl.reset else lvl.ys[0]
                    got = lvl.tile(new[:len(new) - (1 if lvl.reset else 0)], ny)
                    if view is not None and lvl.codes[view.table[tuple([new[i] for i in view_pos])]] != got:
                        raise DecompositionError(f"the tile view of level {d} disagrees with y·g")
                    if got != target:
                        raise DecompositionError(
                            f"level {d} of the cascade does not follow the holonomy cascade"
                        )
                    checks += 1
    return checks


def _level_check_cost(lvl: _Level, ex: Exploration, n_letters: int) -> int:
    """An upper bound on the number of checks :func:`_check_level` makes."""
    g = 1
    for p in lvl.parts:
        g *= p.gs.order
    return len(ex.level_nodes[lvl.depth]) * n_letters * g


def _verify(cascade: Cascade, ex: Exploration, levels: list[_Level], seed: int,
            direct_budget: int, level_budget: int) -> Verification:
    """Exhaustive verification; raises :class:`DecompositionError` on any failure.

    1. holonomy cascade: every reachable coordinate tuple and letter (done by
       :class:`~compiler.holonomy.Exploration`): decode(step(c, a)) = delta(decode(c), a);
    2. group coordinates: for every element and input, the counters multiply correctly;
    3. refinement: for every level, every distinct holonomy input and every
       local state (group coordinates, y) standing for a value it applies to,
       the local update stands for the input's result;
    4. final tables, level by level: for every reachable upper prefix, letter
       and local state standing for a reachable value, the final (minimised)
       tables move the level to the value the holonomy cascade prescribes.
       With 1 and the readout check this proves, by induction on time,
       decode(step(c, a)) = delta(decode(c), a) for every reachable
       configuration c of the final cascade.  Done while the total stays under
       ``level_budget`` checks (``final_tables_exhaustive``); past it, the
       tables are correct by construction from 1-3 (they are built from the
       same functions and minimised only where that keeps them functions) and
       5 checks them directly;
    5. encode/decode round trips, the readout on every reachable leaf, a
       breadth-first search of the final cascade's configurations from every
       state's encoding and random words (each up to ``direct_budget`` component updates).
    """
    a = cascade.automaton
    ver = Verification(holonomy_checks=ex.checks)
    for lvl in levels:
        for part in lvl.parts:
            if part.gs.solvable:
                inputs = part.gs.generators
                if len(inputs) * part.gs.order * part.gs.degree > GROUP_CHECK_BUDGET:
                    inputs = part.gs.reduced_generators
                    ver.notes.append(f"level {lvl.depth}: counters of {part.gs.name} checked on a generating "
                                     f"set of its {len(part.gs.generators)} inputs")
                ver.group_checks += G.check_coordinates(part.gs, inputs)
        checks, complete = _check_actions(lvl, ex)
        ver.action_checks += checks
        if not complete:
            ver.notes.append(f"level {lvl.depth}: group-then-reset checked on generating permutations only")
    by_level: dict[int, list[Component]] = {}
    for c in cascade.components:
        by_level.setdefault(c.holonomy_level, []).append(c)
    n_letters = a.n_symbols
    costs = [_level_check_cost(lvl, ex, n_letters) for lvl in levels]
    ver.final_tables_exhaustive = sum(costs) <= level_budget
    if ver.final_tables_exhaustive:
        for lvl in levels:
            comps = sorted(by_level.get(lvl.depth, []), key=lambda c: _local_order(lvl, c.name))
            ver.level_checks += _check_level(lvl, comps, cascade.views, levels[:lvl.depth - 1], ex,
                                             cascade.letters)
    sig_levels = [lvl for lvl in levels if lvl.signal is not None]
    for leaf in ex.leaves:
        key = tuple(lvl.code_index[ex.path[leaf][lvl.depth - 1]] for lvl in sig_levels)
        pos = [i for i, lvl in enumerate(sig_levels) if lvl.signal in cascade.readout.reads]
        if cascade.readout.table[tuple(key[i] for i in pos)] != ex.state_of_leaf(leaf):
            raise DecompositionError("the readout does not give the leaf's state")
    for q in range(a.n_states):
        if cascade.decode(cascade.encode(q)) != q:
            raise DecompositionError("encode/decode do not round-trip")
        ver.round_trips += 1
    # Direct breadth-first check of the final cascade.
    max_steps = max(500, direct_budget // max(1, len(cascade.components)))
    seen = dict.fromkeys(cascade.encoding)
    queue = list(seen)
    steps = i = 0
    while i < len(queue) and steps < max_steps:
        c = queue[i]
        i += 1
        x = cascade.decode(c)
        for letter in range(a.n_symbols):
            nc = cascade.step(c, letter)
            steps += 1
            if cascade.decode(nc) != a.maps[letter][x]:
                raise DecompositionError("the cascade does not emulate the automaton (direct check)")
            if nc not in seen:
                seen[nc] = None
                queue.append(nc)
    ver.direct_configurations = i
    ver.direct_complete = i == len(queue)
    # Random words from the start state and from every state.
    rng = random.Random(seed)
    length = 64
    n_words = max(4, min(33, max_steps // length))
    starts = [a.start] + [rng.randrange(a.n_states) for _ in range(n_words - 1)]
    for s in starts:
        word = [rng.randrange(a.n_symbols) for _ in range(length)]
        if cascade.simulate(word, start=s) != a.run(word, start=s):
            raise DecompositionError("the cascade does not emulate the automaton on a random word")
        ver.random_steps += length
    ver.verified = True
    return ver


def _local_order(lvl: _Level, name: str) -> int:
    names = [n for p in lvl.parts for n in p.names] + ([lvl.reset] if lvl.reset else [])
    return names.index(name)


# ---------------------------------------------------------------------------
# The entry point


def decompose(automaton: Any, *, count_budget: int = DEFAULT_COUNT_BUDGET,
              image_budget: int = DEFAULT_IMAGE_BUDGET, chain_budget: int = DEFAULT_CHAIN_BUDGET,
              group_budget: int = G.DEFAULT_GROUP_BUDGET, table_budget: int = DEFAULT_TABLE_BUDGET,
              direct_budget: int = DIRECT_CHECK_BUDGET, level_budget: int = LEVEL_CHECK_BUDGET,
              seed: int = 0) -> Cascade:
    """Decompose an automaton (Semiautomaton, dict, JSON path or catalog name) into a verified cascade.

    Raises :class:`BudgetError` (one line) when any budget is exceeded: images,
    reachable coordinate prefixes (``chain_budget``), group order, table rows.
    The semigroup's size is counted up to ``count_budget`` and otherwise
    reported as unknown (the decomposition does not need it).
    """
    a: Semiautomaton = load_spec(automaton)
    letters = normalise_letters(a.maps)
    sg = analyse_semigroup(a.maps, a.n_states, count_budget, strict=False)
    hol = Holonomy(a.n_states, letters.maps, image_budget)
    ex = hol.explore(chain_budget)
    budget = _Budget(table_budget)
    levels: list[_Level] = []
    components: list[Component] = []
    views: list[View] = []
    for depth in range(1, hol.levels + 1):
        lvl = _plan_level(hol, ex, depth, group_budget)
        comps, vs = _build_level(lvl, hol, ex, letters, levels, budget)
        levels.append(lvl)
        for c in comps:  # a last pass over the whole table, where that is cheap
            if len(c.table) * max(1, len(c.reads)) <= FINAL_MINIMISE_BUDGET:
                c.reads, c.table = minimise(c.reads, c.table)
        components.extend(comps)
        views.extend(vs)
    sig_levels = [lvl for lvl in levels if lvl.signal is not None]
    rt = {}
    for leaf in ex.leaves:
        rt[tuple(lvl.code_index[ex.path[leaf][lvl.depth - 1]] for lvl in sig_levels)] = ex.state_of_leaf(leaf)
    budget.add(len(rt))
    reads, rt = minimise(tuple(lvl.signal for lvl in sig_levels), rt, letter_keyed=False)
    readout = Readout(reads, rt)
    # Encodings: per state, each component's value.
    values_by_state: list[dict[str, int]] = []
    for q in range(a.n_states):
        vals: dict[str, int] = {}
        for lvl in levels:
            gk, y = _initial_local(lvl, ex.encodings[q][lvl.depth - 1])
            names = [n for p in lvl.parts for n in p.names]
            vals.update(zip(names, gk))
            if lvl.reset:
                vals[lvl.reset] = lvl.y_index[y]
        values_by_state.append(vals)
    assign_levels(components, views)
    encoding = tuple(tuple(vals[c.name] for c in components) for vals in values_by_state)
    for c, v in zip(components, encoding[a.start]):
        c.initial = v
    infos = []
    for lvl in levels:
        for b in hol.level_blocks[lvl.depth - 1]:
            pi = lvl.part_of_block.get(b.index)
            gs = lvl.parts[pi].gs if pi is not None else None
            infos.append(HolonomyGroupInfo(
                lvl.depth, tuple(members(b.rep)), len(b.members), len(b.tiles),
                gs.order if gs else 1, gs.name if gs else "1", gs.solvable if gs else True,
                gs.derived_length if gs else 0))
    cascade = Cascade(a, components, views, readout, encoding, sg, letters, hol.levels, infos)
    cascade.verification = _verify(cascade, ex, levels, seed, direct_budget, level_budget)
    return cascade
