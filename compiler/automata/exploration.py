"""The reachable part of the holonomy cascade, built level by level as a trie
(:class:`Exploration`), and one level's action on its value (:func:`apply_action`): the wiring
tables :mod:`compiler.automata.decompose` turns into a cascade."""

from __future__ import annotations

from collections import deque
from typing import cast

from .errors import BudgetError
from .groups import Perm
from .holonomy import DEFAULT_CHAIN_BUDGET, DEFAULT_CHAIN_WORK, Holonomy
from .subduction import HolonomyError


def apply_action(h: Holonomy, depth: int, action: object, v: int) -> int:
    """The new value of a level after ``action`` (a reset value, or (block, permutation))."""
    if isinstance(action, int):
        return action
    b, perm = cast("tuple[int, Perm]", action)
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

    def __init__(self, hol: Holonomy, budget: int = DEFAULT_CHAIN_BUDGET, work: int = DEFAULT_CHAIN_WORK):
        self.hol = hol
        L = hol.levels
        A = len(hol.maps)
        self.budget = min(budget, work // max(1, A))  # every prefix is stepped by every letter map
        self.work = work
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
        self.encodings: list[tuple[int, ...]] = []
        self.leaf_of_state = []
        for x in range(hol.n):  # each state's path into the trie as soon as it is encoded: the chain
            coords = hol.encode(x)  # budget then stops the encoding too, not only the search after it
            self.encodings.append(coords)
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
                f"(chain budget, at most {self.work:,} prefixes x letter maps); use the scan construction "
                f"for this automaton"
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
