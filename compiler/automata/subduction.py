"""The holonomy decomposition's analysis steps as functions (numbered as in
:mod:`compiler.automata.holonomy`, whose :class:`~compiler.automata.holonomy.Holonomy` runs them
in order): 1 the images, 3 the subduction classes, 4 their depths, 5 the representatives'
FromRep/ToRep maps.  Step 2 (tiles) and step 6 (holonomy groups) stay on the class, which caches
tiles and round trips."""

from __future__ import annotations

from collections import deque
from typing import Callable

import numpy as np

from .bitsets import SetMapper, member_array, members, order_on, popcount, power
from .errors import BudgetError, ShortcutError
from .graphs import strongly_connected
from .semigroup import Map


class HolonomyError(ShortcutError):
    """An internal check of the holonomy decomposition failed (a bug, never the user's input)."""


def orbit(mapper: SetMapper, full: int, n_maps: int,
          budget: int) -> tuple[list[int], dict[int, tuple[int, ...]], set[int]]:
    """Step 1, images: the orbit of the full set X under the ``n_maps`` letter maps, breadth-first
    (X first), each image's images under every map, and the set of images; past ``budget``
    images a :class:`BudgetError`."""
    images = [full]
    succ: dict[int, tuple[int, ...]] = {}
    seen = {full}
    i = 0
    while i < len(images):
        p = images[i]
        i += 1
        out = tuple(mapper.image(p, a) for a in range(n_maps))
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
    return images, succ, seen



def subduction_classes(images: list[int],
                       succ: dict[int, tuple[int, ...]]) -> tuple[list[list[int]], dict[int, int]]:
    """Step 3, subduction classes: the strongly connected components of the image graph (iterative
    Tarjan), singletons left out, each in breadth-first order (its representative first) and
    ordered by their first member; and each set's class."""
    sets = {p: [w for w in succ[p] if popcount(w) > 1] for p in images if popcount(p) > 1}
    comps = strongly_connected(sets, sets.__getitem__)
    order = {p: i for i, p in enumerate(images)}
    comps = [sorted(c, key=order.__getitem__) for c in comps]
    comps.sort(key=lambda c: order[c[0]])
    return comps, {p: k for k, c in enumerate(comps) for p in c}



def class_depths(class_members: list[list[int]], class_of: dict[int, int], succ: dict[int, tuple[int, ...]],
                 tiles: Callable[[int], tuple[int, ...]], full: int) -> tuple[list[int], list[set[int]]]:
    """Step 4, depth: each class's longest path from X's class (depth 1) over image edges and the
    tiles of representatives (``tiles``), and the class DAG's edges; a :class:`HolonomyError`
    when the order has a cycle or X is not alone at its top."""
    k = len(class_members)
    edges: list[set[int]] = [set() for _ in range(k)]
    for p, outs in succ.items():
        if popcount(p) <= 1:
            continue
        cp = class_of[p]
        for q in outs:
            if popcount(q) > 1 and class_of[q] != cp:
                edges[cp].add(class_of[q])
    for c, mem in enumerate(class_members):
        for t in tiles(mem[0]):
            if popcount(t) > 1:
                ct = class_of[t]
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
        top = class_of[full]
        if top != topo[0] or class_members[top] != [full]:
            raise HolonomyError("X is not alone at the top of the subduction order")
        depth[top] = 1
        for c in topo:
            if depth[c] == 0:
                raise HolonomyError("a class is not below X")
            for d in edges[c]:
                depth[d] = max(depth[d], depth[c] + 1)
    return depth, edges



def _mask(points: np.ndarray, n: int) -> int:
    """The bitmask set of the states ``points`` (numpy: one pass in C, not a shift per state)."""
    bits = np.zeros(8 * ((n + 7) // 8), dtype=np.uint8)
    bits[points] = 1
    return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")


def representatives(n: int, maps: tuple[Map, ...], class_members: list[list[int]],
                    succ: dict[int, tuple[int, ...]]) -> tuple[dict[int, Map], dict[int, Map]]:
    """Step 5, representatives: FromRep(P): r -> P and ToRep(P): P -> r for every non-singleton
    image P (full maps on ``n`` states), with FromRep(P)·ToRep(P) the identity on r (checked).
    The maps are composed as numpy arrays (s then t is ``t[s]``): an image's maps have |Q| entries."""
    arrays = [np.asarray(m, dtype=np.int64) for m in maps]
    ident = np.arange(n, dtype=np.int64)
    from_rep: dict[int, Map] = {}
    to_rep: dict[int, Map] = {}
    for mem in class_members:
        r = mem[0]
        inside = set(mem)
        preds: dict[int, list[tuple[int, int]]] = {p: [] for p in mem}
        for p in mem:
            for a, q in enumerate(succ[p]):
                if q in inside:
                    preds[q].append((p, a))
        # FromRep: BFS forward from r inside the class.
        frm = {r: ident}
        queue = deque([r])
        while queue:
            p = queue.popleft()
            for a, q in enumerate(succ[p]):
                if q in inside and q not in frm:
                    frm[q] = arrays[a][frm[p]]
                    queue.append(q)
        # ToRep (raw): BFS backward from r inside the class.
        to = {r: ident}
        queue = deque([r])
        while queue:
            q = queue.popleft()
            for p, a in preds[q]:
                if p not in to:
                    to[p] = to[q][arrays[a]]
                    queue.append(p)
        if len(frm) != len(mem) or len(to) != len(mem):
            raise HolonomyError("a subduction class is not strongly connected")
        rpts = members(r)
        ridx = np.asarray(rpts, dtype=np.int64)
        for p in mem:
            if _mask(frm[p][ridx], n) != p or _mask(to[p][member_array(p)], n) != r:
                raise HolonomyError("FromRep/ToRep do not map between r and P")
            loop = tuple(to[p][frm[p]].tolist())
            fixed = np.asarray(power(loop, order_on(loop, rpts) - 1), dtype=np.int64)[to[p]]
            if np.any(fixed[frm[p]][ridx] != ridx):
                raise HolonomyError("FromRep(P)·ToRep(P) is not the identity on the representative")
            from_rep[p] = tuple(frm[p].tolist())
            to_rep[p] = tuple(fixed.tolist())
    return from_rep, to_rep
