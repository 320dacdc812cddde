"""Partitions with the substitution property (Hartmanis and Stearns) and the parallel
decompositions they give.

A partition pi of the states has the *substitution property* (SP) when states in one block
go, under every letter, to states in one block: q ~ q' implies delta(q, a) ~ delta(q', a).
Then the blocks form an automaton of their own, the quotient A/pi, which tracks the block of
A's state.  Two SP partitions whose meet is trivial (no two states share a block in both)
*decompose A in parallel*: q -> (block in pi_1, block in pi_2) is one-to-one, so running
A/pi_1 and A/pi_2 side by side on the same letters gives A's state (Lemma 17's direct
product, with a lookup of the pair; ``constructions/product.py`` compiles it).

:func:`sp_partition` closes one identification under the transitions (the smallest SP
partition joining two states); :func:`parallel_pairs` searches pairs of those with a
trivial meet.  Partitions are tuples: entry q is the block index of state q, blocks
numbered by first appearance.

A partial automaton under the promise of legal inputs (compiler/automata/promise.py) is
decomposed on its legal words: the substitution property asks only that two states of a block
both *defined* on a letter go to one block (:func:`legal_congruence`), and a quotient block's
letter is undefined when none of its states defines it.  On every legal word w, the block of
delta(q0, w) is then delta_pi(block of q0, w) (induction: the state's own step is defined, and
it lands in the block's one defined image), so the two quotients still track A's state, and
each is compiled under the promise.  (The self-loops that stand in for missing transitions
would spoil the property where it holds on legal words.)
"""

from __future__ import annotations

import itertools

from .spec import Semiautomaton

Partition = tuple[int, ...]

MAX_SEARCH_STATES = 32
""":func:`parallel_pairs` searches automata of at most this many states (n^2/2 closures)."""


def canonical(blocks: list[int] | tuple[int, ...]) -> Partition:
    """The same partition with blocks numbered by first appearance."""
    ids: dict[int, int] = {}
    return tuple(ids.setdefault(b, len(ids)) for b in blocks)


def _find(parent: list[int], x: int) -> int:
    """The root of ``x`` in the union-find array ``parent`` (halving the path on the way)."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


class DisjointSets:
    """Disjoint sets of 0..n-1 (union-find with path halving, :func:`_find`): which units of a
    network its weights join (the lookup checker's parts, the unfolding's balanced parts)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        """The root of ``x``'s set."""
        return _find(self.parent, x)

    def union(self, a: int, b: int) -> None:
        """Join the sets of ``a`` and ``b``."""
        self.parent[self.find(a)] = self.find(b)


def congruence(a: Semiautomaton, parent: list[int], p: int, q: int) -> list[int]:
    """The finest SP partition coarser than ``parent`` (a union-find array: the root of each
    state's block) that joins ``p`` and ``q``: merge them, then the images of every merged pair
    under every letter, until nothing changes (each merge followed once).  Returns the root of
    each state's block (the smallest state of the block)."""
    parent = list(parent)
    todo = [(p, q)]
    while todo:
        x, y = todo.pop()
        rx, ry = _find(parent, x), _find(parent, y)
        if rx != ry:
            parent[max(rx, ry)] = min(rx, ry)
            todo.extend((m[x], m[y]) for m in a.maps)
    return [_find(parent, x) for x in range(len(parent))]


def legal_congruence(a: Semiautomaton, p: int, q: int) -> list[int]:
    """:func:`congruence` from single states for a partial automaton: the finest partition joining
    ``p`` and ``q`` in which two states of a block both defined on a letter go to one block.  Each
    block keeps one defined successor per letter; merging two blocks merges those."""
    parent = list(range(a.n_states))
    succ = [[m[x] if a.defined[letter][x] else None for letter, m in enumerate(a.maps)] for x in range(a.n_states)]
    todo = [(p, q)]
    while todo:
        x, y = todo.pop()
        rx, ry = _find(parent, x), _find(parent, y)
        if rx == ry:
            continue
        keep, gone = min(rx, ry), max(rx, ry)
        parent[gone] = keep
        for letter, (sk, sg) in enumerate(zip(succ[keep], succ[gone])):
            if sk is not None and sg is not None:
                todo.append((sk, sg))
            elif sk is None:
                succ[keep][letter] = sg
    return [_find(parent, x) for x in range(a.n_states)]


def sp_partition(a: Semiautomaton, p: int, q: int) -> Partition:
    """The smallest SP partition in which states ``p`` and ``q`` share a block (:func:`congruence`
    from the partition into single states; :func:`legal_congruence` for a partial automaton)."""
    if a.partial:
        return canonical(legal_congruence(a, p, q))
    return canonical(congruence(a, list(range(a.n_states)), p, q))


def n_blocks(pi: Partition) -> int:
    return max(pi) + 1 if pi else 0


def is_sp(a: Semiautomaton, pi: Partition) -> bool:
    """Whether ``pi`` has the substitution property for ``a`` (on its defined transitions)."""
    return all(len({pi[m[q]] for q in range(a.n_states) if pi[q] == b and a.defined[x][q]}) <= 1
               for x, m in enumerate(a.maps) for b in range(n_blocks(pi)))


def meet_is_trivial(p1: Partition, p2: Partition) -> bool:
    """No two states share a block in both partitions (q -> (p1[q], p2[q]) is one-to-one)."""
    return len(set(zip(p1, p2))) == len(p1)


def sp_partitions(a: Semiautomaton) -> list[Partition]:
    """The distinct SP partitions generated by one identification (:func:`sp_partition` of
    every pair of states), other than the one-block partition, in a fixed order (most blocks
    last: the coarsest, smallest quotients first)."""
    found = {sp_partition(a, p, q) for p, q in itertools.combinations(range(a.n_states), 2)}
    return sorted((pi for pi in found if n_blocks(pi) > 1), key=lambda pi: (n_blocks(pi), pi))


def parallel_pairs(a: Semiautomaton, max_states: int = MAX_SEARCH_STATES) -> list[tuple[Partition, Partition]]:
    """Pairs (pi_1, pi_2) of the SP partitions of :func:`sp_partitions` with a trivial meet:
    parallel decompositions of ``a``, fewest product states first.  Empty above ``max_states``
    states (the search is quadratic in the states, then in the partitions found)."""
    if a.n_states > max_states or a.n_states < 3:
        return []
    parts = sp_partitions(a)
    pairs = [(p1, p2) for p1, p2 in itertools.combinations(parts, 2) if meet_is_trivial(p1, p2)]
    return sorted(pairs, key=lambda pr: (n_blocks(pr[0]) * n_blocks(pr[1]), pr))


def quotient(a: Semiautomaton, pi: Partition, name: str | None = None) -> Semiautomaton:
    """A/pi: one state per block (named by its states' names joined with "|"), the same
    alphabet, block b going under letter x to the block of delta(q, x) for any q in b, and
    the start's block as start.  ``pi`` must have the substitution property.  A partial
    automaton's quotient is partial: a block's letter is undefined (a self-loop in ``maps``) when
    none of its states defines it."""
    members = [[q for q in range(a.n_states) if pi[q] == b] for b in range(n_blocks(pi))]
    states = tuple("|".join(a.states[q] for q in m) for m in members)
    image = [[next((pi[mp[q]] for q in m if a.defined[x][q]), None) for m in members] for x, mp in enumerate(a.maps)]
    maps = tuple(tuple(b if r is None else r for b, r in enumerate(row)) for row in image)
    undefined = tuple((x, b) for x, row in enumerate(image) for b, r in enumerate(row) if r is None)
    return Semiautomaton(name or f"{a.name}/pi", states, a.alphabet, maps, pi[a.start], undefined=undefined)
