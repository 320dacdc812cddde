"""The holonomy decomposition (Zeiger; Eilenberg; as in SgpDec).

Sets of states are integer bitmasks; maps act on the right (``P·s`` is the
image of P under s).  The pipeline, numbered as in the reference:

1. **Images** -- the orbit of the full set X under the letters; the *extended
   image set* E adds every singleton.
2. **Tiles** -- the tiles of P (|P| > 1) are its maximal proper subsets in E.
3. **Subduction classes** -- strongly connected components of the image graph
   (P ≡ Q when each is an image of the other); the class DAG has an edge for
   every image step between classes and for every tile of a representative.
4. **Depth** -- X's class has depth 1, a class's depth is its longest path from
   X's class, singletons sit below everything.  Levels = deepest non-singleton
   depth; this counts the extra level that is needed when no singleton is an
   image (singletons are never given the depth of an image class).
5. **Representatives** -- FromRep(P): r -> P and ToRep(P): P -> r with
   FromRep(P)·ToRep(P) the identity on r (asserted).
6. **Holonomy groups** -- the round trips FromRep(P)·a·ToRep(P·a), acting on the
   tiles of r.
7. **Components** -- level d is a permutation-reset component on the disjoint
   union of the tiles of the representatives at depth d (one *block* per
   class), plus a "dummy" value for "the chain has no set at this depth".

Coordinates: a state x is encoded by its canonical tile chain
X = C0 ⊃ C1 ⊃ ... ⊃ {x} (each step the first tile containing x).  The level of
depth(C_i) holds the tile C_(i+1)·ToRep(C_i) of its class's representative;
levels the chain skips hold the dummy.  A letter s maps the chain, X is
re-inserted and gaps are filled with the first tile containing the next set.
A level whose set P maps onto the new chain's set Q at that depth (P·s = Q)
receives the permutation FromRep(P)·s·ToRep(Q) of its block's tiles; every
other level receives a reset to its new value.  Because depths increase along
images and tiles, that input is a function of the letter and of the
*pre-update* values of the levels above -- a cascade.
:class:`~compiler.automata.exploration.Exploration` builds these wiring tables lazily,
over the coordinate prefixes reachable from encodings of real states, and checks the
result against the automaton; :meth:`Holonomy.chain_step` is the same semantics on whole
chains, kept as an independent reference.

Steps 1 and 3-5 are functions of :mod:`compiler.automata.subduction`, which :class:`Holonomy`
runs in order; the bitmask arithmetic is :mod:`compiler.automata.bitsets`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .bitsets import SetMapper, members, popcount, set_image
from .errors import BudgetError
from .groups import Perm, is_identity
from .semigroup import Map, then
from .subduction import HolonomyError, class_depths, orbit, representatives, subduction_classes

DEFAULT_IMAGE_BUDGET = 10_000
"""Most images (sets X·w) enumerated: past a few thousand the reachable tile chains are far
beyond any other budget anyway."""

HOLONOMY_MAX_STATES = 1 << 12
"""Most states the decomposition takes on (twice the catalog's largest, nth-last:11): every
image carries full maps of |Q| entries, composed in Python loops."""

HOLONOMY_CELLS = 1 << 25
"""Most images x states the decomposition takes on: it keeps full maps (FromRep, ToRep) of
|Q| entries for every image and compares images pairwise for their tiles, so it refuses
before that, right after the orbit (a random 10,000-state automaton: 5,500 images)."""

DEFAULT_CHAIN_BUDGET = 60_000
"""Most reachable holonomy coordinate prefixes (trie nodes) explored."""

DEFAULT_CHAIN_WORK = 300_000
"""Most prefixes times letter maps the exploration steps (its work: a prefix is stepped by every letter
map, about 10 us each): on many letters the prefix budget alone took 9-14 s to run out (291 states x 10
maps, 817 x 64); the largest exploration that ends, on the paper's automata, the examples and the
subregular benchmark's languages, steps 176,442 (25,206 prefixes x 7 maps)."""

Action = "tuple[int, Perm] | int"
"""A level's input: ``(block index, permutation of that block's tiles)``, or ``int`` v = reset to value v."""


@dataclass
class Block:
    """One subduction class: a permutation-reset action on the tiles of its representative.

    The classes at one depth share a level of the holonomy cascade; the level's
    value ``offset + i`` stands for tile i of this block's ``rep`` (see
    :attr:`Holonomy.dummy` for the value "no set of the chain at this depth").
    ``generators`` generate the holonomy group, as permutations of tile indices.
    """

    index: int
    depth: int
    rep: int
    members: tuple[int, ...]
    tiles: tuple[int, ...]
    tile_index: dict[int, int] = field(repr=False)
    generators: tuple[Perm, ...] = ()
    offset: int = 0

    @property
    def name(self) -> str:
        return f"class of {{{','.join(map(str, members(self.rep)))}}}"


class Holonomy:
    """Images, tiles, classes, depths, representatives and holonomy groups of a semiautomaton.

    Args:
        n: number of states.
        maps: the distinct letter maps (the generators of the semigroup).
        image_budget: most images enumerated before :class:`BudgetError`.

    Attributes (after construction):
        images: the sets X·w, breadth-first (X first); ``succ[p]`` their images under each map.
        class_members: subduction classes of non-singleton images (representative first);
            ``class_of[p]`` a set's class, ``class_depth[c]`` its depth.
        levels: number of holonomy levels (= deepest class depth; singletons lie one below).
        from_rep, to_rep: FromRep(P) and ToRep(P) for every non-singleton image P (full maps).
        blocks: one :class:`Block` per class, sorted by depth; ``level_blocks[d-1]`` those at depth d.
        dummy: per level, the value meaning "the chain has no set at this depth".
    """

    def __init__(self, n: int, maps: Sequence[Map], image_budget: int = DEFAULT_IMAGE_BUDGET):
        self.n = n
        self.maps = tuple(tuple(m) for m in maps)
        self.full = (1 << n) - 1
        self.mapper = SetMapper(n, self.maps)
        self._tiles: dict[int, tuple[int, ...]] = {}
        self._first_tile: dict[int, dict[int, int]] = {}
        self._tile_values: dict[tuple[int, int], int] = {}
        self._value_tiles: dict[tuple[int, int], int] = {}
        self._tile_sets: dict[int, frozenset[int]] = {}
        self._fill: dict[tuple[int, int], tuple[int, ...]] = {}
        self._perm_cache: dict[tuple[int, int], Perm] = {}
        if n > HOLONOMY_MAX_STATES:
            raise BudgetError(f"the holonomy decomposition takes on at most {HOLONOMY_MAX_STATES:,} states (full maps "
                              f"of |Q| entries per image), this automaton has {n:,} -- use the scan construction")
        self.images, self.succ, self.is_image = orbit(self.mapper, self.full, len(self.maps), image_budget)
        cells = len(self.images) * n
        if cells > HOLONOMY_CELLS:
            raise BudgetError(f"the holonomy decomposition would hold {len(self.images):,} images x {n:,} states = "
                              f"{cells:,} map entries, over the budget of {HOLONOMY_CELLS:,}; its decomposition is too "
                              f"large -- use the scan construction")
        self._extended()
        self.class_members, self.class_of = subduction_classes(self.images, self.succ)
        self.class_depth, self.class_edges = class_depths(self.class_members, self.class_of, self.succ, self.tiles,
                                                          self.full)
        self.levels = max(self.class_depth, default=0)
        self.from_rep, self.to_rep = representatives(n, self.maps, self.class_members, self.succ)
        self._holonomy_groups()

    # -- 2. tiles ---------------------------------------------------------------

    def _extended(self) -> None:
        ext = set(self.images) | {1 << x for x in range(self.n)}
        self.extended = sorted(ext, key=lambda s: (-popcount(s), s))
        self._first_of_size: dict[int, int] = {}
        for i, s in enumerate(self.extended):
            self._first_of_size.setdefault(popcount(s), i)
        self._ext_array = None
        if self.n <= 64 and len(self.extended) > 256:
            self._ext_array = np.array(self.extended, dtype=np.uint64)

    def tiles(self, p: int) -> tuple[int, ...]:
        """The maximal proper subsets of p in the extended image set, largest first.

        E is sorted by decreasing size, so the first candidate not inside an
        already kept tile is maximal.  With many images (and at most 64 states)
        the candidate filtering is vectorised with numpy.
        """
        cached = self._tiles.get(p)
        if cached is not None:
            return cached
        size = popcount(p)
        start = next((self._first_of_size[k] for k in range(size - 1, 0, -1) if k in self._first_of_size),
                     len(self.extended))
        if self._ext_array is not None and len(self.extended) - start > 256:
            cand = self._ext_array[start:]
            sel = cand[(cand & np.uint64(~p & self.full)) == 0]
            kept = []
            while sel.size:
                t = sel[0]
                kept.append(int(t))
                sel = sel[(sel & ~t) != 0]
        else:
            kept, union = [], 0
            notp = ~p
            for q in self.extended[start:]:
                if q & notp:
                    continue
                # inside a kept tile only if inside their union (a singleton then is): the pairwise
                # comparison, quadratic in the tiles, runs only for those
                if q & ~union == 0 and (q & (q - 1) == 0 or any(q & ~t == 0 for t in kept)):
                    continue
                kept.append(q)
                union |= q
        out = tuple(kept)
        self._tiles[p] = out
        return out

    def first_tile_containing(self, p: int, sub: int) -> int:
        """The first of p's tiles (largest first) that contains ``sub``; a single state is looked
        up in p's index of first tiles per state (:meth:`_first_tile_of_state`)."""
        if sub & (sub - 1) == 0 and sub:
            found = self._first_tile_of_state(p).get(sub.bit_length() - 1)
            if found is not None:
                return found
        else:
            for t in self.tiles(p):
                if sub & ~t == 0:
                    return t
        raise HolonomyError("no tile contains a proper subset in E (tiles must cover)")

    def _first_tile_of_state(self, p: int) -> dict[int, int]:
        """State -> the first tile of p containing it, built once per p in one pass over the tiles
        (each state's bit read once: every state of p is encoded through it, and scanning the
        tiles per state is quadratic when p has thousands of them)."""
        index = self._first_tile.get(p)
        if index is None:
            index, covered = {}, 0
            for t in self.tiles(p):
                for x in members(t & ~covered):
                    index[x] = t
                covered |= t
            self._first_tile[p] = index
        return index

    # -- 6. holonomy groups -----------------------------------------------------

    def _holonomy_groups(self) -> None:
        order = sorted(range(len(self.class_members)), key=lambda c: (self.class_depth[c], c))
        self.blocks: list[Block] = []
        self.block_of_class: dict[int, int] = {}
        for c in order:
            mem = self.class_members[c]
            r = mem[0]
            tiles = self.tiles(r)
            block = Block(len(self.blocks), self.class_depth[c], r, tuple(mem), tiles,
                          {t: i for i, t in enumerate(tiles)})
            self.block_of_class[c] = block.index
            self.blocks.append(block)
        for block in self.blocks:
            gens: dict[Perm, None] = {}
            inside = set(block.members)
            for p in block.members:
                for a, q in enumerate(self.succ[p]):
                    if q in inside:
                        g = self.round_trip(p, a, q)
                        if not is_identity(g):
                            gens[g] = None
            block.generators = tuple(gens)
        self.level_blocks: list[list[Block]] = [[] for _ in range(self.levels)]
        for block in self.blocks:
            lvl = self.level_blocks[block.depth - 1]
            block.offset = sum(len(b.tiles) for b in lvl)
            lvl.append(block)
        self.dummy = [sum(len(b.tiles) for b in lvl) for lvl in self.level_blocks]

    def round_trip(self, p: int, a: int, q: int) -> Perm:
        """FromRep(P)·a·ToRep(Q) (Q = P·a in P's class) as a permutation of the representative's tiles."""
        key = (p, a)
        cached = self._perm_cache.get(key)
        if cached is not None:
            return cached
        block = self.blocks[self.block_of_class[self.class_of[p]]]
        g = then(then(self.from_rep[p], self.maps[a]), self.to_rep[q])
        try:
            perm = tuple(block.tile_index[set_image(t, g)] for t in block.tiles)
        except KeyError:
            raise HolonomyError("a round trip does not permute the tiles of the representative") from None
        self._perm_cache[key] = perm
        return perm


    # -- coordinates ------------------------------------------------------------

    def depth_of(self, p: int) -> int:
        """Depth of a set of E; singletons sit one below the deepest class."""
        if p & (p - 1):
            return self.class_depth[self.class_of[p]]
        return self.levels + 1

    def block_of(self, p: int) -> Block:
        return self.blocks[self.block_of_class[self.class_of[p]]]

    def tile_value(self, p: int, t: int) -> int:
        """The level value of "tile t of the chain set p": t·ToRep(p) as a tile of the representative."""
        key = (p, t)
        v = self._tile_values.get(key)
        if v is None:  # memoised: the exploration asks for the same (set, tile) from many trie nodes
            b = self.block_of(p)
            v = self._tile_values[key] = b.offset + b.tile_index[set_image(t, self.to_rep[p])]
        return v

    def tile_of_value(self, p: int, v: int) -> int:
        """The tile of the chain set p that level value v stands for (inverse of :meth:`tile_value`)."""
        key = (p, v)
        t = self._value_tiles.get(key)
        if t is None:  # memoised, as :meth:`tile_value`
            b = self.block_of(p)
            i = v - b.offset
            if not 0 <= i < len(b.tiles):
                raise HolonomyError("a level value does not belong to the class of its chain set")
            t = self._value_tiles[key] = set_image(b.tiles[i], self.from_rep[p])
        return t

    def chain_coords(self, chain: Sequence[int]) -> tuple[int, ...]:
        """Coordinates of a tile chain: one value per level, the dummy where the chain skips it."""
        coords = list(self.dummy)
        for p, t in zip(chain, chain[1:]):
            coords[self.depth_of(p) - 1] = self.tile_value(p, t)
        return tuple(coords)

    def chain(self, coords: Sequence[int]) -> list[int]:
        """The tile chain X ⊃ ... ⊃ {x} a coordinate tuple stands for."""
        p = self.full
        out = [p]
        while p & (p - 1):
            p = self.tile_of_value(p, coords[self.depth_of(p) - 1])
            out.append(p)
        return out

    def encode(self, x: int) -> tuple[int, ...]:
        """The canonical coordinates of state x (the first tile containing x at each step)."""
        p = self.full
        chain = [p]
        while p & (p - 1):
            p = self.first_tile_containing(p, 1 << x)
            chain.append(p)
        return self.chain_coords(chain)

    def decode(self, coords: Sequence[int]) -> int:
        return self.chain(coords)[-1].bit_length() - 1

    def fill(self, top: int, sub: int) -> tuple[int, ...]:
        """Sets strictly between ``top`` and ``sub`` (sub ⊊ top) on the dominating chain:
        repeatedly the first tile containing ``sub``."""
        key = (top, sub)
        out = self._fill.get(key)
        if out is None:
            path = []
            while sub not in self._tile_set(top):
                top = self.first_tile_containing(top, sub)
                path.append(top)
            out = tuple(path)
            self._fill[key] = out
        return out

    def _tile_set(self, p: int) -> frozenset[int]:
        s = self._tile_sets.get(p)
        if s is None:
            s = self._tile_sets[p] = frozenset(self.tiles(p))
        return s

    def mapped_chain(self, chain: Sequence[int], a: int) -> list[int]:
        """The chain after letter-map a: images of the sets, X re-inserted, gaps filled."""
        seq = [self.full]
        for p in chain:
            q = self.mapper.image(p, a)
            if q != seq[-1]:
                seq.append(q)
        out = [seq[0]]
        for q in seq[1:]:
            out.extend(self.fill(out[-1], q))
            out.append(q)
        return out

    def chain_step(self, coords: Sequence[int], a: int) -> tuple[tuple[int, ...], list[object]]:
        """Reference semantics of one letter on whole chains: new coordinates and each level's action.

        A level whose chain set P maps onto the new chain's set Q at that depth
        (P·a = Q) gets ``(block index, permutation of its tiles)``; every other
        level gets a reset to its new value (an ``int``).
        :class:`~compiler.automata.exploration.Exploration` computes the same thing level by
        level; this version is kept as an independent check.
        """
        chain = self.chain(coords)
        new = self.mapped_chain(chain, a)
        new_coords = self.chain_coords(new)
        old_at = {self.depth_of(p): p for p in chain[:-1]}
        new_at = {self.depth_of(q): q for q in new[:-1]}
        actions: list[object] = []
        for d in range(1, self.levels + 1):
            p, q = old_at.get(d), new_at.get(d)
            if p is not None and q is not None and self.mapper.image(p, a) == q:
                actions.append((self.block_of(p).index, self.round_trip(p, a, q)))
            else:
                actions.append(new_coords[d - 1])
        return new_coords, actions
