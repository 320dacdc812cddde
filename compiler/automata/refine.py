"""Refinement of one holonomy level (step 3 of :mod:`compiler.automata.decompose`): every class
whose holonomy group H is non-trivial becomes "group then reset" -- H run on itself as counters
along its derived series (or one ``group`` component when H is not solvable) and the level's
tiles in one reset unit storing y with tile = y·g.  :class:`Level` is the plan of one level,
:func:`local_step` the semantics its tables implement."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Sequence

from . import groups as G
from .errors import BudgetError, ShortcutError
from .exploration import Exploration
from .holonomy import Block, Holonomy
from .semigroup import LetterNormalisation

KEEP_ALL = "keep"
"""The action of an identity letter on a whole level."""


class DecompositionError(ShortcutError):
    """The decomposition failed one of its own checks (an internal error, never the user's input)."""


@dataclass
class GroupPart:
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
class Level:
    """Holonomy level ``depth`` refined: group parts, one reset unit, one tile signal."""

    depth: int
    dummy: int
    parts: list[GroupPart]
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


def _group_part(block: Block, depth: int, j: int, budget: int) -> GroupPart:
    """The holonomy group of a class as components: counters along its derived series (named
    ``h<depth>.b<j>.count<i>.<k>``) or, if not solvable, one ``group`` component; with an orbit
    transversal (tile -> (orbit representative, element taking it there)) for encodings."""
    gs = G.analyse(block.generators, len(block.tiles), budget)
    prefix = f"h{depth}.b{j}"
    if gs.solvable:
        names: list[str] = []
        slices: list[tuple[int, int]] = []
        start = 0
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
    return GroupPart(block, gs, names, flat, unflat, transversal, slices, inverse)


def plan_level(hol: Holonomy, ex: Exploration, depth: int, group_budget: int) -> Level:
    """Refinement plan of holonomy level ``depth``: its group parts and the values its reset unit
    can hold (encodings' orbit representatives, and z·g^-1 for every reset target z)."""
    blocks = hol.level_blocks[depth - 1]
    dummy = hol.dummy[depth - 1]
    parts: list[GroupPart] = []
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
    lvl = Level(depth, dummy, parts, part_of_block, block_of_value, [], {})
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


def _initial_y(lvl: Level, v: int) -> int:
    """The stored value y of level value v in an encoding (its orbit representative)."""
    found = lvl.group_part(v)
    if found is None:
        return v
    b, pi = found
    return b.offset + lvl.parts[pi].transversal[v - b.offset][0]


def initial_local(lvl: Level, v: int) -> tuple[tuple[int, ...], int]:
    """Group coordinates and y encoding level value v (g = transversal element, y = orbit representative)."""
    coords = [p.identity_coords for p in lvl.parts]
    if v != lvl.dummy:
        b = lvl.block_of_value[v]
        pi = lvl.part_of_block.get(b.index)
        if pi is not None:
            part = lvl.parts[pi]
            coords[pi] = part.flat[part.transversal[v - b.offset][1]]
    return tuple(itertools.chain.from_iterable(coords)), _initial_y(lvl, v)


def level_actions(ex: Exploration, letters: LetterNormalisation, depth: int, node: int) -> list[object]:
    """The level's input for each letter of the alphabet at a node of depth ``depth - 1``."""
    acts = ex.actions[depth]
    return [KEEP_ALL if m is None else acts[(node, m)] for m in letters.map_of_letter]


def part_input(part: GroupPart, act: object) -> G.Perm:
    """The element a class's group is multiplied by: its permutation, or the identity."""
    if isinstance(act, tuple) and act[0] == part.block.index:
        return act[1]
    return G.identity(part.gs.degree)


def reset_target(lvl: Level, gkey: Sequence[int], z: int) -> int:
    """y to store for "reset to level value z" when the groups stand at ``gkey``: z·g^-1."""
    if z == lvl.dummy:
        return z
    b = lvl.block_of_value[z]
    pi = lvl.part_of_block.get(b.index)
    if pi is None:
        return z
    return b.offset + lvl.parts[pi].inverse[lvl.split(gkey)[pi]][z - b.offset]


def reset_input(lvl: Level, act: object, gkey: Sequence[int]) -> int | None:
    """The reset unit's input (index of the value to set, or None = keep)."""
    if act == KEEP_ALL or not isinstance(act, int):  # keep, or a permutation
        return None
    return lvl.y_index[reset_target(lvl, gkey, act)]


def local_step(lvl: Level, act: object, gkey: tuple[int, ...], yi: int) -> tuple[tuple[int, ...], int]:
    """The semantics the tables implement: one level's local state (group coordinates,
    index of y) after the holonomy input ``act`` (group parts g <- g·π, reset y <- z·g^-1)."""
    new: list[int] = []
    for part, coords in zip(lvl.parts, lvl.split(gkey)):
        h = part_input(part, act)
        g = part.unflat[coords]
        new.extend(part.flat[G.mul(g, h)] if not part.gs.solvable else
                   itertools.chain.from_iterable(part.gs.step(part.gs.encode(g), h)))
    r = reset_input(lvl, act, gkey) if len(lvl.ys) > 1 else None
    return tuple(new), yi if r is None else r

