"""The factor search's closure (compiler/automata/factors.py): the Aho-Corasick tracker of the
window patterns and factors, the breadth-first closure of (state, node, capped counts) it runs
beside the automaton -- the proof that the state is a function of the features when no two rows
with equal features hold different states -- and how much confusion a closure leaves, by which a
refinement scores its candidates."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

MAX_NODES = 1 << 19
"""Largest closure (reachable (state, node, counts)) before giving up."""

@dataclass(frozen=True)
class Tracker:
    """``step[node, code]``: the next node (codes 0..s, 0 the pad); ``omega[node]``: the window
    class; ``inc[node, g]``: how many factors of group g end there (the node's suffixes);
    ``start``: the node after the k - 1 pads."""

    step: np.ndarray
    omega: np.ndarray
    inc: np.ndarray
    start: int


def tracker(k: int, n_codes: int, windows: tuple[tuple[int, ...], ...], factors: tuple[tuple[int, ...], ...],
            groups: tuple[int, ...]) -> Tracker:
    """The Aho-Corasick machine of the windows and factors over codes 0..n_codes - 1, built breadth
    first by failure links (a node's failure: its longest proper suffix that is a node; its row of
    ``step``, window class and factor counts are its failure's, then its own)."""
    prefixes: set[tuple[int, ...]] = {()}
    for p in (*windows, *factors):
        prefixes.update(p[:i] for i in range(1, len(p) + 1))
    nodes = sorted(prefixes, key=lambda p: (len(p), p))
    index = {p: i for i, p in enumerate(nodes)}
    where = {p: i + 1 for i, p in enumerate(windows)}
    fac = dict(zip(factors, groups))
    step = np.zeros((len(nodes), n_codes), dtype=np.int64)
    omega = np.zeros(len(nodes), dtype=np.int64)
    inc = np.zeros((len(nodes), max(groups, default=-1) + 1), dtype=np.int64)
    fail = np.zeros(len(nodes), dtype=np.int64)
    children: list[list[int]] = [[] for _ in nodes]
    for i, p in enumerate(nodes[1:], start=1):
        children[index[p[:-1]]].append(i)
    for i, p in enumerate(nodes):  # by length: a node's failure (shorter) is done before it
        if p:
            f = fail[i] = 0 if len(p) == 1 else step[fail[index[p[:-1]]], p[-1]]
            step[i], omega[i], inc[i] = step[f], where.get(p, omega[f]), inc[f]
            if p in fac:
                inc[i, fac[p]] += 1
        for child in children[i]:
            step[i, nodes[child][-1]] = child
    node = 0
    for _ in range(k - 1):
        node = int(step[node, 0])
    return Tracker(step, omega, inc, node)


class TooBig(Exception):
    """A closure or a description outgrew its budget."""


@dataclass
class Closure:
    """Every (q, node, counts) reached after the start (row 0: the start itself, t = 0), as arrays,
    with each row's parent row, letter class and feature code (omega and the counts, one integer)."""

    q: np.ndarray
    node: np.ndarray
    counts: np.ndarray  # [N, G]
    parent: np.ndarray
    letter: np.ndarray
    feature: np.ndarray


DENSE_CODES = 1 << 24
"""Largest code space (states x nodes x count vectors) whose closure marks the codes it met in a
dense boolean array (16 MB at most); a larger one keeps them sorted (:class:`_Met`)."""


class _Met:
    """The codes a closure has met: a dense mark per code where the code space is at most
    :data:`DENSE_CODES`, else a sorted array (the same answers: dense only saves the sorts)."""

    def __init__(self, space: int, first: int) -> None:
        self.dense = np.zeros(space, dtype=bool) if space <= DENSE_CODES else None
        self.sorted = np.array([first], dtype=np.int64)  # the start's code (-1: no word reaches it)

    def fresh(self, codes: np.ndarray) -> np.ndarray:
        """The rows (ascending) of the first occurrence of each code not met before; marks them met."""
        if self.dense is not None:
            cand = np.flatnonzero(~self.dense[codes])
            _, first = np.unique(codes[cand], return_index=True)
            fresh = cand[np.sort(first)]
            self.dense[codes[fresh]] = True
            return fresh
        order = np.argsort(codes, kind="stable")
        ordered = codes[order]
        lead = np.empty(len(order), dtype=bool)  # each code's first row
        lead[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=lead[1:])
        first, code = order[lead], ordered[lead]
        at = np.minimum(np.searchsorted(self.sorted, code), len(self.sorted) - 1)
        new = self.sorted[at] != code
        self.sorted = np.sort(np.concatenate([self.sorted, code[new]]))
        return np.sort(first[new])


def closure_of(maps: np.ndarray, tr: Tracker, q0: int, n_groups: int, threshold: int) -> Closure:
    """The breadth-first closure from (q0, start node, 0) over the letter classes (``maps``:
    [class, state], class c has code c + 1); counts capped at ``threshold``.  The start is its own
    row (t = 0 reads no key), apart from the same triple reached by a word.  Each level's new rows
    are in the order of (parent row, class), the first of equal triples kept."""
    n_cls, n_nodes = maps.shape[0], len(tr.omega)
    radix = threshold + 1
    if radix ** n_groups * n_nodes * maps.shape[1] * 2 >= 1 << 62:
        raise TooBig
    to_q = np.ascontiguousarray(maps.T)  # [state, class]
    to_node = np.ascontiguousarray(tr.step[:, 1 : n_cls + 1])  # [node, class]
    inc_next = tr.inc[to_node]  # [node, class, group]: the counts a class adds from a node
    weights = np.array([radix**g for g in range(n_groups)], dtype=np.int64)
    span = radix**n_groups
    q = np.array([q0])
    node = np.array([tr.start])
    counts = np.zeros((1, n_groups), dtype=np.int64)
    met = _Met(maps.shape[1] * n_nodes * span, -1)  # the start's code: no word reaches it
    qs, nodes, cs, parents, letters = [q], [node], [counts], [np.array([-1])], [np.array([-1])]
    base, total = 0, 1
    while len(q):
        nq = to_q[q].ravel()  # [row * n_cls + class]
        nn = to_node[node].ravel()
        nc = counts[:, None, :] + inc_next[node]
        np.minimum(nc, threshold, out=nc)
        nc = nc.reshape(len(nq), n_groups)
        codes = (nq * n_nodes + nn) * span
        if n_groups:
            codes += nc @ weights
        fresh = met.fresh(codes)
        if not len(fresh):
            break
        total += len(fresh)
        if total > MAX_NODES:
            raise TooBig
        q, node, counts = nq[fresh], nn[fresh], nc[fresh]
        qs.append(q)
        nodes.append(node)
        cs.append(counts)
        parents.append(base + fresh // n_cls)
        letters.append(fresh % n_cls + 1)
        base += len(qs[-2])
    node_all, counts_all = np.concatenate(nodes), np.concatenate(cs)
    return Closure(np.concatenate(qs), node_all, counts_all, np.concatenate(parents), np.concatenate(letters),
                    tr.omega[node_all] * span + counts_all @ weights)


def conflicts(cl: Closure) -> np.ndarray:
    """Pairs of rows (after the start, [n, 2]) with equal features and different states, adjacent
    in the order by (feature, state)."""
    f, q = cl.feature[1:], cl.q[1:]
    order = np.lexsort((q, f))
    a, b = order[:-1], order[1:]
    bad = np.flatnonzero((f[a] == f[b]) & (q[a] != q[b]))
    return np.stack([a[bad], b[bad]], 1) + 1


def confused_share(cl: Closure) -> float:
    """The share of rows (after the start) that no function of the features gets right: in each
    feature class, the rows of a state other than its most common one (:data:`SHARE`)."""
    n = int(cl.q.max()) + 1
    fq, counts = np.unique(cl.feature[1:] * n + cl.q[1:], return_counts=True)
    f = fq // n
    cut = np.r_[0, np.flatnonzero(np.diff(f)) + 1]
    return float(1 - np.maximum.reduceat(counts, cut).sum() / counts.sum()) if len(counts) else 0.0


def confused_pairs(cl: Closure) -> int:
    """How many pairs of states some feature class holds together (rows after the start,
    :data:`PAIRS`): the off-diagonal of A^T A, A the incidence of the classes of two states or more."""
    n = int(cl.q.max()) + 1
    fq = np.unique(cl.feature[1:] * n + cl.q[1:])
    f, q = fq // n, fq % n
    _, cls, size = np.unique(f, return_inverse=True, return_counts=True)
    shared = size[cls] > 1
    if not shared.any():
        return 0
    _, rows = np.unique(cls[shared], return_inverse=True)
    qs, together = q[shared], np.zeros((n, n), dtype=bool)
    top = int(rows.max()) + 1
    chunk = max(1, min(top, (1 << 22) // n))  # classes per product: A's chunk within 16 MB, no more rows than classes
    for lo in range(0, top, chunk):
        at = (rows >= lo) & (rows < lo + chunk)
        A = np.zeros((chunk, n), dtype=np.float32)
        A[rows[at] - lo, qs[at]] = 1.0
        together |= (A.T @ A) > 0
    return int((together.sum() - np.count_nonzero(np.diag(together))) // 2)


def conflict(cl: Closure) -> tuple[int, int] | None:
    """A pair of rows with equal features and different states, or None: in the first feature
    class (by its earliest row) that holds several states, the earliest row of a state other than
    the class's most common one, then the earliest row of the most common state (the minority's
    word is the one whose suffix matters)."""
    pairs = conflicts(cl)
    if not len(pairs):
        return None
    f = cl.feature[int(pairs[0, 0])]
    rows = np.flatnonzero(cl.feature == f)
    rows = rows[rows > 0]
    states, counts = np.unique(cl.q[rows], return_counts=True)
    common = states[np.argmax(counts)]
    return int(rows[cl.q[rows] != common][0]), int(rows[cl.q[rows] == common][0])


def word_of(cl: Closure, row: int) -> list[int]:
    """The (shortest) class codes leading to ``row``."""
    out = []
    while cl.parent[row] >= 0:
        out.append(int(cl.letter[row]))
        row = int(cl.parent[row])
    return out[::-1]


def capped_factors(word: list[int], k: int, j: int, threshold: int) -> dict[tuple[int, ...], int]:
    """Every j-factor ending at a position of ``word`` in its padded text, and its count, capped."""
    x = [0] * (k - 1) + word
    return {f: min(c, threshold) for f, c in Counter(tuple(x[i + k - j : i + k]) for i in range(len(word))).items()}
