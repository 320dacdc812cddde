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
*pre-update* values of the levels above -- a cascade.  :class:`Exploration`
builds these wiring tables lazily, over the coordinate prefixes reachable from
encodings of real states, and checks the result against the automaton;
:meth:`Holonomy.chain_step` is the same semantics on whole chains, kept as an
independent reference.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .errors import BudgetError, ShortcutError
from .groups import Perm, is_identity
from .semigroup import Map, then

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

Action = "tuple[int, Perm] | int"
"""A level's input: ``(block index, permutation of that block's tiles)``, or ``int`` v = reset to value v."""


class HolonomyError(ShortcutError):
    """An internal check of the holonomy decomposition failed (a bug, never the user's input)."""


def popcount(x: int) -> int:
    """Number of states in a bitmask set."""
    return bin(x).count("1")


def members(mask: int) -> list[int]:
    """The states of a bitmask set, in increasing order."""
    out, i = [], 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


class _SetMapper:
    """Images of bitmask sets under fixed maps.

    Up to 64 states: 8-bit chunk lookup tables per map (built on first use);
    beyond that, the set unpacked to an array and gathered through the map
    (building tables would cost |maps|·|Q|·256 operations up front).
    """

    def __init__(self, n: int, maps: Sequence[Map]):
        self.n = n
        self.maps = maps
        self.chunks = (n + 7) // 8
        self.tables: list[list[list[int]] | None] = [None] * len(maps)
        self.arrays: np.ndarray | None = None

    def _build(self, a: int) -> list[list[int]]:
        m, n = self.maps[a], self.n
        tabs = []
        for k in range(self.chunks):
            tab = [0] * 256
            for byte in range(1, 256):
                low = byte & -byte
                bit = low.bit_length() - 1
                q = 8 * k + bit
                tab[byte] = tab[byte ^ low] | ((1 << m[q]) if q < n else 0)
            tabs.append(tab)
        self.tables[a] = tabs
        return tabs

    def image(self, mask: int, a: int) -> int:
        if self.n > 64:
            return self._vector_image(mask, a)
        tabs = self.tables[a] or self._build(a)
        r = 0
        for k, tab in enumerate(tabs):
            r |= tab[(mask >> (8 * k)) & 255]
        return r


    def _vector_image(self, mask: int, a: int) -> int:
        """:func:`set_image` for many states: the set's bits unpacked, gathered through the map and
        packed again by numpy (O(|Q|) in C rather than a Python step per member)."""
        if self.arrays is None:
            self.arrays = np.asarray(self.maps, dtype=np.int64)
        nbytes = (self.n + 7) // 8
        bits = np.unpackbits(np.frombuffer(mask.to_bytes(nbytes, "little"), dtype=np.uint8), bitorder="little")
        out = np.zeros(8 * nbytes, dtype=np.uint8)
        out[self.arrays[a][np.flatnonzero(bits[:self.n])]] = 1
        return int.from_bytes(np.packbits(out, bitorder="little").tobytes(), "little")


def set_image(mask: int, m: Map) -> int:
    """The image P·m of a bitmask set under an arbitrary map (one step per member)."""
    r = 0
    while mask:
        low = mask & -mask
        r |= 1 << m[low.bit_length() - 1]
        mask ^= low
    return r


def _order_on(m: Map, points: list[int]) -> int:
    """The smallest k >= 1 with m^k the identity on ``points`` (which m permutes): the least
    common multiple of its cycle lengths there."""
    order, seen = 1, set()
    for x in points:
        if x in seen:
            continue
        length, y = 0, x
        while y not in seen:
            seen.add(y)
            y = m[y]
            length += 1
        order = math.lcm(order, length)
    return order


def _power(m: Map, k: int) -> Map:
    """The map m applied k times (the identity for k = 0), by repeated squaring."""
    base = np.asarray(m, dtype=np.int64)
    out = np.arange(len(m), dtype=np.int64)
    while k:
        if k & 1:
            out = base[out]
        base = base[base]
        k >>= 1
    return tuple(int(x) for x in out)


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
        self.mapper = _SetMapper(n, self.maps)
        self._tiles: dict[int, tuple[int, ...]] = {}
        self._tile_sets: dict[int, frozenset[int]] = {}
        self._fill: dict[tuple[int, int], tuple[int, ...]] = {}
        self._perm_cache: dict[tuple[int, int], Perm] = {}
        if n > HOLONOMY_MAX_STATES:
            raise BudgetError(f"the holonomy decomposition takes on at most {HOLONOMY_MAX_STATES:,} states (full maps "
                              f"of |Q| entries per image), this automaton has {n:,} -- use the scan construction")
        self._orbit(image_budget)
        cells = len(self.images) * n
        if cells > HOLONOMY_CELLS:
            raise BudgetError(f"the holonomy decomposition would hold {len(self.images):,} images x {n:,} states = "
                              f"{cells:,} map entries, over the budget of {HOLONOMY_CELLS:,}; its decomposition is too "
                              f"large -- use the scan construction")
        self._extended()
        self._classes()
        self._depths()
        self._representatives()
        self._holonomy_groups()

    # -- 1. images ------------------------------------------------------------

    def _orbit(self, budget: int) -> None:
        images = [self.full]
        succ: dict[int, tuple[int, ...]] = {}
        seen = {self.full}
        i = 0
        while i < len(images):
            p = images[i]
            i += 1
            out = tuple(self.mapper.image(p, a) for a in range(len(self.maps)))
            succ[p] = out
            for q in out:
                if q not in seen:
                    seen.add(q)
                    images.append(q)
                    if len(images) > budget:
                        raise BudgetError(
                            f"the automaton has more than {budget} images X·w (image budget); "
                            f"its holonomy decomposition is too large -- use the scan construction"
                        )
        self.images = images
        self.succ = succ
        self.is_image = seen

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
            kept = []
            notp = ~p
            for q in self.extended[start:]:
                if q & notp:
                    continue
                for t in kept:
                    if q & ~t == 0:
                        break
                else:
                    kept.append(q)
        out = tuple(kept)
        self._tiles[p] = out
        return out

    def first_tile_containing(self, p: int, sub: int) -> int:
        for t in self.tiles(p):
            if sub & ~t == 0:
                return t
        raise HolonomyError("no tile contains a proper subset in E (tiles must cover)")

    # -- 3. subduction classes --------------------------------------------------

    def _classes(self) -> None:
        """Strongly connected components of the image graph (iterative Tarjan), singletons left out."""
        nodes = [p for p in self.images if popcount(p) > 1]
        index: dict[int, int] = {}
        low: dict[int, int] = {}
        on_stack: set[int] = set()
        stack: list[int] = []
        comps: list[list[int]] = []
        counter = 0
        for root in nodes:
            if root in index:
                continue
            work = [(root, 0)]
            while work:
                v, i = work.pop()
                if i == 0:
                    index[v] = low[v] = counter
                    counter += 1
                    stack.append(v)
                    on_stack.add(v)
                succ = self.succ[v]
                recurse = False
                while i < len(succ):
                    w = succ[i]
                    i += 1
                    if popcount(w) <= 1:
                        continue
                    if w not in index:
                        work.append((v, i))
                        work.append((w, 0))
                        recurse = True
                        break
                    if w in on_stack:
                        low[v] = min(low[v], index[w])
                if recurse:
                    continue
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(comp)
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
        order = {p: i for i, p in enumerate(self.images)}
        comps = [sorted(c, key=order.__getitem__) for c in comps]
        comps.sort(key=lambda c: order[c[0]])
        self.class_members: list[list[int]] = comps
        self.class_of: dict[int, int] = {p: k for k, c in enumerate(comps) for p in c}

    # -- 4. depth ---------------------------------------------------------------

    def _depths(self) -> None:
        """Longest path from X's class over image edges and tiles of representatives."""
        k = len(self.class_members)
        edges: list[set[int]] = [set() for _ in range(k)]
        for p, outs in self.succ.items():
            if popcount(p) <= 1:
                continue
            cp = self.class_of[p]
            for q in outs:
                if popcount(q) > 1 and self.class_of[q] != cp:
                    edges[cp].add(self.class_of[q])
        for c, mem in enumerate(self.class_members):
            for t in self.tiles(mem[0]):
                if popcount(t) > 1:
                    ct = self.class_of[t]
                    if ct == c:
                        raise HolonomyError("a tile is equivalent to its parent set")
                    edges[c].add(ct)
        indeg = [0] * k
        for c in range(k):
            for d in edges[c]:
                indeg[d] += 1
        queue = deque(c for c in range(k) if indeg[c] == 0)
        topo = []
        while queue:
            c = queue.popleft()
            topo.append(c)
            for d in sorted(edges[c]):
                indeg[d] -= 1
                if indeg[d] == 0:
                    queue.append(d)
        if len(topo) != k:
            raise HolonomyError("the subduction order has a cycle")
        depth = [0] * k
        if k:
            top = self.class_of[self.full]
            if top != topo[0] or self.class_members[top] != [self.full]:
                raise HolonomyError("X is not alone at the top of the subduction order")
            depth[top] = 1
            for c in topo:
                if depth[c] == 0:
                    raise HolonomyError("a class is not below X")
                for d in edges[c]:
                    depth[d] = max(depth[d], depth[c] + 1)
        self.class_depth = depth
        self.levels = max(depth, default=0)
        self.class_edges = edges

    # -- 5. representatives -----------------------------------------------------

    def _representatives(self) -> None:
        n = self.n
        ident = tuple(range(n))
        self.from_rep: dict[int, Map] = {}
        self.to_rep: dict[int, Map] = {}
        for mem in self.class_members:
            r = mem[0]
            inside = set(mem)
            preds: dict[int, list[tuple[int, int]]] = {p: [] for p in mem}
            for p in mem:
                for a, q in enumerate(self.succ[p]):
                    if q in inside:
                        preds[q].append((p, a))
            # FromRep: BFS forward from r inside the class.
            frm = {r: ident}
            queue = deque([r])
            while queue:
                p = queue.popleft()
                for a, q in enumerate(self.succ[p]):
                    if q in inside and q not in frm:
                        frm[q] = then(frm[p], self.maps[a])
                        queue.append(q)
            # ToRep (raw): BFS backward from r inside the class.
            to = {r: ident}
            queue = deque([r])
            while queue:
                q = queue.popleft()
                for p, a in preds[q]:
                    if p not in to:
                        to[p] = then(self.maps[a], to[q])
                        queue.append(p)
            if len(frm) != len(mem) or len(to) != len(mem):
                raise HolonomyError("a subduction class is not strongly connected")
            rpts = members(r)
            for p in mem:
                if set_image(r, frm[p]) != p or set_image(p, to[p]) != r:
                    raise HolonomyError("FromRep/ToRep do not map between r and P")
                loop = then(frm[p], to[p])
                fixed = then(to[p], _power(loop, _order_on(loop, rpts) - 1))
                back = then(frm[p], fixed)
                if any(back[i] != i for i in rpts):
                    raise HolonomyError("FromRep(P)·ToRep(P) is not the identity on the representative")
                self.from_rep[p] = frm[p]
                self.to_rep[p] = fixed

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
            gens = {}
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
        b = self.block_of(p)
        return b.offset + b.tile_index[set_image(t, self.to_rep[p])]

    def tile_of_value(self, p: int, v: int) -> int:
        """The tile of the chain set p that level value v stands for (inverse of :meth:`tile_value`)."""
        b = self.block_of(p)
        i = v - b.offset
        if not 0 <= i < len(b.tiles):
            raise HolonomyError("a level value does not belong to the class of its chain set")
        return set_image(b.tiles[i], self.from_rep[p])

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
        level gets a reset to its new value (an ``int``).  :meth:`explore` computes
        the same thing level by level; this version is kept as an independent check.
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

    def explore(self, budget: int = DEFAULT_CHAIN_BUDGET) -> "Exploration":
        """The reachable part of the holonomy cascade, level by level (see :class:`Exploration`)."""
        return Exploration(self, budget)


def apply_action(h: Holonomy, depth: int, action: object, v: int) -> int:
    """The new value of a level after ``action`` (a reset value, or (block, permutation))."""
    if isinstance(action, int):
        return action
    b, perm = action
    block = h.blocks[b]
    i = v - block.offset
    if block.depth != depth or not 0 <= i < len(block.tiles):
        raise HolonomyError("a permutation reaches a level value outside its block")
    return block.offset + perm[i]


class Exploration:
    """The holonomy cascade restricted to what is reachable, built lazily as a trie.

    A *node* at depth k stands for the values of levels 1..k (a prefix of a
    coordinate tuple); the root is the empty prefix and the leaves (depth L) are
    the reachable coordinate tuples.  Because the cascade is feed-forward, the
    prefixes of depth k are closed under letters on their own, so the search
    runs level by level: once every node of depth k and its transitions are
    known, level k+1's input ``actions[k+1][(node, a)]`` -- a function of the
    *pre-update* upper coordinates (the node) and the letter -- is computed from
    the node's chain prefix, and the nodes of depth k+1 are closed under
    ``child(T(parent, a), action(value))``.

    Per (node, letter) we keep the *unsettled tail* of the mapped chain: the sets
    of the new chain deeper than the node's level.  Its first set decides the
    next level's input (a reset to the tile below it, a permutation when it is
    the image of the node's frontier set in the same class, or the dummy), and a
    child's tail extends its parent's by the gap fill down to the image of the
    child's frontier.  Work is proportional to the number of nodes times letters.

    Checks: every leaf (a reachable coordinate tuple) decodes, under every
    letter, to delta of its state; encodings round-trip; level values stay
    inside the block of their chain set.
    """

    def __init__(self, hol: Holonomy, budget: int = DEFAULT_CHAIN_BUDGET):
        self.hol = hol
        self.budget = budget
        L = hol.levels
        A = len(hol.maps)
        self.parent: list[int] = [-1]
        self.value: list[int] = [-1]
        self.frontier: list[int] = [hol.full]
        self.path: list[tuple[int, ...]] = [()]
        self.child: dict[tuple[int, int], int] = {}
        self.level_nodes: list[list[int]] = [[0]] + [[] for _ in range(L)]
        self.trans: dict[tuple[int, int], int] = {}
        self.actions: list[dict[tuple[int, int], object]] = [{} for _ in range(L + 1)]
        tails: dict[tuple[int, int], tuple[int, ...]] = {}
        for a in range(A):
            self.trans[(0, a)] = 0
            xa = hol.mapper.image(hol.full, a)
            tails[(0, a)] = (hol.full,) if xa == hol.full else (hol.full, *hol.fill(hol.full, xa), xa)
        self.encodings = [hol.encode(x) for x in range(hol.n)]
        self.leaf_of_state = []
        for coords in self.encodings:
            node = 0
            for v in coords:
                node = self._child(node, v)
            self.leaf_of_state.append(node)
        for k in range(L):
            d = k + 1
            acts = self.actions[d]
            for node in self.level_nodes[k]:
                for a in range(A):
                    acts[(node, a)] = self._action(d, node, a, tails[(node, a)])
            queue = deque(self.level_nodes[d])
            while queue:
                c = queue.popleft()
                p = self.parent[c]
                v = self.value[c]
                for a in range(A):
                    pn = self.trans[(p, a)]
                    nv = apply_action(hol, d, acts[(p, a)], v)
                    before = len(self.value)
                    cn = self._child(pn, nv)
                    if len(self.value) > before:
                        queue.append(cn)
                    self.trans[(c, a)] = cn
                    if d < L:
                        tails[(c, a)] = self._tail(d, p, c, a, tails[(p, a)])
            for node in self.level_nodes[k]:
                for a in range(A):
                    del tails[(node, a)]
        self.leaves = self.level_nodes[L]
        self._check_leaves()

    def _child(self, node: int, v: int) -> int:
        """The node for prefix(node) + (v,), created (and checked) if new."""
        key = (node, v)
        c = self.child.get(key)
        if c is not None:
            return c
        hol = self.hol
        f = self.frontier[node]
        d = len(self.path[node]) + 1
        if hol.depth_of(f) == d:
            nf = hol.tile_of_value(f, v)
        elif v == hol.dummy[d - 1]:
            nf = f
        else:
            raise HolonomyError("a level the chain skips holds a non-dummy value")
        c = len(self.value)
        self.parent.append(node)
        self.value.append(v)
        self.frontier.append(nf)
        self.path.append(self.path[node] + (v,))
        self.child[key] = c
        self.level_nodes[d].append(c)
        if c > self.budget:
            raise BudgetError(
                f"the holonomy cascade has more than {self.budget} reachable coordinate prefixes "
                f"(chain budget); use the scan construction for this automaton"
            )
        return c

    def _action(self, d: int, node: int, a: int, tail: tuple[int, ...]) -> object:
        """Input of level d given the node (values of levels < d) and the letter-map a."""
        hol = self.hol
        u = tail[0]
        if hol.depth_of(u) != d:
            return hol.dummy[d - 1]
        if len(tail) >= 2:
            return hol.tile_value(u, tail[1])
        f = self.frontier[node]
        if hol.depth_of(f) != d or hol.class_of[f] != hol.class_of[u]:
            raise HolonomyError("a level keeps its set but the set changed class")
        return (hol.block_of(f).index, hol.round_trip(f, a, u))

    def _tail(self, d: int, p: int, c: int, a: int, ptail: tuple[int, ...]) -> tuple[int, ...]:
        """Unsettled tail (sets deeper than d) of the mapped chain of node c, from its parent's."""
        hol = self.hol
        fp, fc = self.frontier[p], self.frontier[c]
        tail = ptail
        if fc != fp:
            last = ptail[-1]
            img = hol.mapper.image(fc, a)
            if img != last:
                tail = ptail + hol.fill(last, img) + (img,)
        if hol.depth_of(tail[0]) == d:
            tail = tail[1:]
        return tail

    def _check_leaves(self) -> None:
        hol = self.hol
        for x, leaf in enumerate(self.leaf_of_state):
            if self.frontier[leaf] != 1 << x or hol.decode(self.path[leaf]) != x:
                raise HolonomyError("holonomy encode/decode do not round-trip")
        self.checks = 0
        for leaf in self.leaves:
            f = self.frontier[leaf]
            if f & (f - 1):
                raise HolonomyError("a leaf of the coordinate trie is not a single state")
            x = f.bit_length() - 1
            for a, m in enumerate(hol.maps):
                if self.frontier[self.trans[(leaf, a)]] != 1 << m[x]:
                    raise HolonomyError("the holonomy cascade does not emulate the automaton")
                self.checks += 1

    def state_of_leaf(self, leaf: int) -> int:
        return self.frontier[leaf].bit_length() - 1
