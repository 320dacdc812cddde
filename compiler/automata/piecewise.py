"""Piecewise testable automata: the state is a function of which of a few subsequences occurred.

A language is *piecewise testable* of level k (PT_k) when membership depends only on the set of
subsequences (scattered subwords) of length <= k of the word; *strictly piecewise* (SP_k) when it
is the set of words avoiding finitely many forbidden subsequences of length <= k.  Simon (1975):
PT is exactly the class whose syntactic monoid is J-trivial; its minimal DFA is *partially
ordered* -- every cycle of the transition graph is a self-loop.

Detection (:func:`detect`) works on the automaton, never on names:

1. *Partially ordered*: the transitions that change the state, over the states reachable from
   the start, must form an acyclic graph (a topological sort); otherwise the refusal names two
   states on a cycle that is not a self-loop.  Then *locally confluent* (Klima and Polak 2013: a
   minimal DFA is piecewise testable iff it is partially ordered and locally confluent): for each
   state q and letters a, b that move it, some word over {a, b} brings q a and q b together
   (:func:`confluence_witness`; "starts with a" is partially ordered and fails here).
2. *Relevant subsequences*: a prefix-closed set S of words (a trie), seeded with the minimal
   words that reach a sink (:func:`sink_words`: an SP language's minimal forbidden subsequences)
   and grown from there.
   The tracker state of a word w is X(w) = {u in S : u is a subsequence of w}; reading a letter
   a from X gives X | {u a in S : u in X or u empty} (the greedy embedding, so a repeated letter
   needs its earlier copy strictly before).  A breadth-first walk of the product (automaton state,
   X) from (q0, {}) either closes -- every reachable X goes with one state: the state *is* a
   function of the flags of S, and the walk is the proof (every reachable pair, every letter) --
   or finds two words w, w' with X(w) = X(w') and different states.  Then a shortest word u that
   is a subsequence of one and not of the other (length <= :data:`MAX_K`; searched level by level
   among the common subsequences) joins S with its prefixes, and the walk starts again.  No such u
   means w and w' have the same subsequences up to length MAX_K but different states: not
   piecewise testable of level <= MAX_K (the refusal says so).
3. *Pruning*: each leaf of S is dropped, longest first, when the product walk still closes
   without it, so S keeps only what the automaton distinguishes (for an SP language drawn from
   forbidden subsequences: their prefixes).

The plan (:class:`PiecewisePlan`) keeps S as its *chains*: the leaves, each a root-to-leaf word,
run-length encoded ((letter, repeat), ...).  Chain c's *progress* is the length of its longest
prefix that occurred (its prefixes' flags are monotone, so this one code holds them all), and the
final product walk over progress tuples gives the table key -> state (the keys the start reaches).
Its depth (layers of the construction, constructions/piecewise.py) is the largest number of runs
of a chain, at most its length k: a run a^m after a prefix v occurred once the count of a's at
positions where v had occurred reaches m, one prefix-count head per run.

Cost: each walk visits at most :data:`MAX_PAIRS` product pairs times |Sigma| letters; S grows by
at most :data:`MAX_NODES` words and each distinguishing search by :data:`MAX_CANDIDATES` common
subsequences per level; past any of them detection gives up with a reason naming the budget.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .moore import reachable_states
from .spec import Semiautomaton

MAX_K = 8
"""Longest relevant subsequence searched for (the construction's depth is at most this)."""

MAX_NODES = 96
"""Most words (trie nodes) the relevant set S may hold."""

MAX_PAIRS = 200_000
"""Most (state, tracker) pairs one product walk may visit."""

MAX_CANDIDATES = 50_000
"""Most common subsequences kept per length while searching a distinguishing word."""

Run = tuple[int, int]
"""(letter, repeat): a maximal block a^m of a chain."""


@dataclass(frozen=True)
class PiecewisePlan:
    """The relevant subsequences as chains and the state of every progress tuple the start reaches.

    chains: per chain its runs ((letter, repeat), ...); a chain's word is their concatenation.
    keys: the progress tuples (per chain 0..len) reachable from ``start``, sorted.
    states: the automaton's state at each key (the product walk's function).
    """

    n_symbols: int
    n_states: int
    start: int
    chains: tuple[tuple[Run, ...], ...]
    keys: tuple[tuple[int, ...], ...]
    states: tuple[int, ...]

    @property
    def k(self) -> int:
        """The longest relevant subsequence."""
        return max((sum(m for _, m in c) for c in self.chains), default=0)

    @property
    def layers(self) -> int:
        """One prefix-count layer per run of the longest chain (at least one: the final lookup)."""
        return max([len(c) for c in self.chains] + [1])

    def lengths(self) -> list[int]:
        return [sum(m for _, m in c) for c in self.chains]

    def to_dict(self) -> dict[str, Any]:
        return {"n_symbols": self.n_symbols, "n_states": self.n_states, "start": self.start,
                "chains": [[list(r) for r in c] for c in self.chains], "keys": [list(k) for k in self.keys],
                "states": list(self.states)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> PiecewisePlan:
        return PiecewisePlan(int(d["n_symbols"]), int(d["n_states"]), int(d["start"]),
                             tuple(tuple((int(a), int(m)) for a, m in c) for c in d["chains"]),
                             tuple(tuple(int(v) for v in k) for k in d["keys"]), tuple(int(q) for q in d["states"]))


def runs(word: tuple[int, ...]) -> tuple[Run, ...]:
    """The run-length encoding of ``word``: its maximal blocks a^m as (a, m)."""
    out: list[list[int]] = []
    for a in word:
        if out and out[-1][0] == a:
            out[-1][1] += 1
        else:
            out.append([a, 1])
    return tuple((a, m) for a, m in out)


def cycle_witness(a: Semiautomaton, states: list[int]) -> tuple[int, int] | None:
    """Two states on a cycle of state-changing transitions (not a self-loop), or None when the
    reachable part is partially ordered (Kahn's topological sort over ``states``)."""
    succ = {q: {m[q] for m in a.maps} - {q} for q in states}
    indeg = {q: 0 for q in states}
    for q in states:
        for r in succ[q]:
            indeg[r] += 1
    todo = deque(q for q in states if indeg[q] == 0)
    done = 0
    while todo:
        q = todo.popleft()
        done += 1
        for r in succ[q]:
            indeg[r] -= 1
            if not indeg[r]:
                todo.append(r)
    if done == len(states):
        return None
    left = {q for q in states if indeg[q] > 0}
    pred = {q: sorted(p for p in left if q in succ[p]) for q in left}
    q = min(left)
    path = [q]
    seen = {q: 0}
    while True:  # every state left has a predecessor left (its in-degree counts those): walk back to a cycle
        q = pred[q][0]
        if q in seen:
            cyc = path[seen[q]:]
            return cyc[-1], cyc[-2 % len(cyc)]
        seen[q] = len(path)
        path.append(q)


def confluence_witness(a: Semiautomaton, states: list[int]) -> tuple[int, int, int] | None:
    """(q, a, b) such that no word over {a, b} brings q a and q b together, or None (Klima and
    Polak's local confluence: when the state is a function of the subsequences of length <= k,
    q a (ab)^k and q b (ab)^k agree, since both suffixes hold every word over {a, b} of length <= k
    as a subsequence).  Letters that fix q need no check (q a b^n = q b^n, and b^n settles in an
    acyclic automaton); each pair walks the pairs of states under a and b, at most
    :data:`MAX_PAIRS` steps in all, after which the check gives up (the walk of :func:`relevant`
    still decides)."""
    budget = MAX_PAIRS
    for q in states:
        moving = [s for s, m in enumerate(a.maps) if m[q] != q]
        for i, x in enumerate(moving):
            for y in moving[i + 1:]:
                seen = {(a.maps[x][q], a.maps[y][q])}
                todo = deque(seen)
                met = False
                while todo and not met:
                    p, r = todo.popleft()
                    met = p == r
                    for s in (x, y):
                        nxt = (a.maps[s][p], a.maps[s][r])
                        if nxt not in seen:
                            seen.add(nxt)
                            todo.append(nxt)
                budget -= len(seen)
                if not met:
                    return q, x, y
                if budget < 0:
                    return None
    return None


class Trie:
    """The prefix-closed word set S: per node its word, parent and, per letter, the nodes it ends."""

    def __init__(self, words: list[tuple[int, ...]]) -> None:
        self.words = sorted(set(words), key=lambda w: (len(w), w))
        index = {w: i for i, w in enumerate(self.words)}
        self.ending: dict[int, list[tuple[int, int]]] = {}  # letter -> [(bit of node, bit of parent or 0)]
        for w in self.words:
            parent = 0 if len(w) == 1 else 1 << index[w[:-1]]
            self.ending.setdefault(w[-1], []).append((1 << index[w], parent))

    def step(self, x: int, a: int) -> int:
        new = x
        for bit, parent in self.ending.get(a, ()):
            if not parent or x & parent:
                new |= bit
        return new


def _walk(a: Semiautomaton, trie: Trie) -> tuple[dict[int, int], tuple[list[int], list[int]] | None]:
    """The product walk from (q0, {}): tracker -> state when it closes, else the two words (letter
    lists) of a conflict.  BudgetError-free: returns a conflict of None words past MAX_PAIRS via
    :class:`Budget`."""
    of: dict[int, int] = {0: a.start}
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {(a.start, 0): None}
    todo = deque([(a.start, 0)])
    maps = a.maps
    while todo:
        pair = todo.popleft()
        q, x = pair
        for s, m in enumerate(maps):
            nxt = (m[q], trie.step(x, s))
            if nxt in parent:
                continue
            parent[nxt] = (pair, s)
            if len(parent) > MAX_PAIRS:
                raise Budget(f"the product of the automaton with the subsequence tracker passes {MAX_PAIRS:,} pairs")
            other = of.setdefault(nxt[1], nxt[0])
            if other != nxt[0]:
                return of, (_word(parent, (other, nxt[1])), _word(parent, nxt))
            todo.append(nxt)
    return of, None


def _word(parent: dict, pair: tuple[int, int]) -> list[int]:
    out: list[int] = []
    while parent[pair] is not None:
        pair, s = parent[pair]
        out.append(s)
    return out[::-1]


class Budget(Exception):
    """A detection budget ran out (the message names it)."""


def embeds(u: tuple[int, ...], w: list[int]) -> bool:
    it = iter(w)
    return all(any(x == y for y in it) for x in u)


def distinguisher(w: list[int], v: list[int]) -> tuple[int, ...] | None:
    """A shortest word (<= MAX_K letters) that is a subsequence of exactly one of ``w``, ``v``
    (the first of :func:`distinguishers`)."""
    return next(iter(distinguishers(w, v, 1)), None)


def distinguishers(w: list[int], v: list[int], most: int, levels: int = 1) -> list[tuple[int, ...]]:
    """Up to ``most`` of the shortest words (<= MAX_K letters) that are subsequences of exactly one
    of ``w``, ``v`` -- of the shortest length where some are, and of the ``levels`` - 1 lengths
    after it, extending the common subsequences -- level by level over the common subsequences (a
    shortest one's prefixes are common); [] when there is none."""
    common: list[tuple[int, ...]] = [()]
    found: list[tuple[int, ...]] = []
    for _ in range(MAX_K):
        nxt: dict[tuple[int, ...], None] = {}
        here = len(found)
        for u in common:
            for x in dict.fromkeys(w + v):
                cand = u + (x,)
                if cand in nxt:
                    continue
                in_w, in_v = embeds(cand, w), embeds(cand, v)
                if in_w != in_v:
                    found.append(cand)
                    if len(found) >= most:
                        return found
                elif in_w:
                    nxt[cand] = None
        if len(found) > here:
            levels -= 1
            if not levels:
                return found
        if len(nxt) > MAX_CANDIDATES:
            raise Budget(f"more than {MAX_CANDIDATES:,} common subsequences of one length")
        common = list(nxt)
        if not common:
            return found
    return found


def changing(a: Semiautomaton, u: tuple[int, ...]) -> bool:
    """Whether every letter of ``u``, read from the start, changes the state (a path of the
    partial order: a relevant subsequence's letters each matter)."""
    q = a.start
    for s in u:
        r = a.maps[s][q]
        if r == q:
            return False
        q = r
    return True


def extension(a: Semiautomaton, words: list[tuple[int, ...]], w: list[int], v: list[int],
              longest: bool = True) -> tuple[int, ...] | None:
    """A word u x (u in S or empty, x a letter) that is a subsequence of exactly one of ``w``,
    ``v``, with u as long (``longest``) or as short as possible, among those whose letters each
    change the state first: the trie grows by one node along what it already tracks."""
    found = []
    order = sorted(words, key=lambda x: (-len(x), x)) + [()]
    for u in order if longest else order[::-1]:
        if len(u) >= MAX_K or embeds(u, w) != embeds(u, v):
            continue
        for x in dict.fromkeys(w + v):
            cand = u + (x,)
            if cand not in words and embeds(cand, w) != embeds(cand, v):
                if changing(a, cand):
                    return cand
                found.append(cand)
    return found[0] if found else None


def _closes(a: Semiautomaton, words: list[tuple[int, ...]]) -> bool:
    return _walk(a, Trie(words))[1] is None


def _prefixes(u: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [u[:i] for i in range(1, len(u) + 1)]


def _run(a: Semiautomaton, u: tuple[int, ...] | list[int]) -> int:
    q = a.start
    for s in u:
        q = a.maps[s][q]
    return q


def sink_words(a: Semiautomaton, states: list[int]) -> list[tuple[int, ...]]:
    """The subsequence-minimal words (<= MAX_K letters) that reach a sink (a state every letter
    fixes) from the start: for a strictly piecewise language, its minimal forbidden subsequences.
    A minimal word's letters each change the state (a letter that does not could be deleted), so
    a depth-first walk over the state-changing paths that avoid the sink finds them; a word is
    kept when no single deletion still reaches the sink.  Gives up (returns []) past
    :data:`MAX_CANDIDATES` paths: the seed is an optimisation, :func:`relevant` decides."""
    sinks = {q for q in states if all(m[q] == q for m in a.maps)} - {a.start}
    if not sinks:
        return []
    out: list[tuple[int, ...]] = []
    todo: list[tuple[int, tuple[int, ...]]] = [(a.start, ())]
    visited = 0
    while todo:
        q, u = todo.pop()
        visited += 1
        if visited > MAX_CANDIDATES:
            return []
        for s, m in enumerate(a.maps):
            r = m[q]
            if r == q:
                continue
            w = u + (s,)
            if r in sinks:
                if all(_run(a, w[:i] + w[i + 1:]) != r for i in range(len(w))):
                    out.append(w)
            elif len(w) < MAX_K:
                todo.append((r, w))
    return sorted(set(out))


def grow(a: Semiautomaton, seed: list[tuple[int, ...]] | None = None, cap: int = MAX_NODES,
         longest: bool = True) -> list[tuple[int, ...]]:
    """The relevant subsequences S grown from ``seed``'s prefixes until the product walk closes
    (module docstring, step 2; ``longest``: :func:`extension`'s order); :class:`Budget` past
    ``cap`` words, ValueError (its message names the two words) when no subsequence of length
    <= MAX_K tells a conflict apart."""
    words: list[tuple[int, ...]] = list(dict.fromkeys(p for u in seed or [] for p in _prefixes(u)))
    if len(words) > cap:
        raise Budget(f"more than {cap} relevant subsequences")
    while True:
        _, conflict = _walk(a, Trie(words))
        if conflict is None:
            return words
        w, v = conflict
        u = extension(a, words, w, v, longest) or distinguisher(w, v)
        if u is None:
            p, q = _run(a, w), _run(a, v)
            raise ValueError(f"the words {_show(a, w)} and {_show(a, v)} have the same subsequences up to length "
                             f"{MAX_K} but reach different states {a.states[p]!r} and {a.states[q]!r}: not "
                             f"piecewise testable of level <= {MAX_K}")
        words = list(dict.fromkeys(words + _prefixes(u)))
        if len(words) > cap:
            raise Budget(f"more than {cap} relevant subsequences")


def prune(a: Semiautomaton, words: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Drop each leaf of S, longest first, while the product walk still closes (step 3)."""
    for leaf in sorted(_leaves(words), key=lambda w: (-len(w), w)):
        fewer = [w for w in words if w != leaf]
        if leaf in _leaves(words) and _closes(a, fewer):
            words = fewer
    return words


def relevant(a: Semiautomaton, states: list[int]) -> list[tuple[int, ...]]:
    """The relevant subsequences: grown from the sink words when they are few (:func:`sink_words`:
    an SP language's forbidden subsequences, found directly; a PT language's sink is reached by
    many interleavings, which only add words) and from the empty set (extending the longest and
    the shortest tracked words first), each later growth capped at the smallest size so far; the
    one with fewer runs in its longest word (the construction's depth), then fewer words, is
    pruned.  The last failure is raised when every growth fails."""
    found: list[list[tuple[int, ...]]] = []
    errors: list[Exception] = []
    seed = sink_words(a, states)
    if seed and len({p for u in seed for p in _prefixes(u)}) <= MAX_NODES // 2:
        try:
            found.append(grow(a, seed))
        except (Budget, ValueError) as e:
            errors.append(e)
    for longest in (True, False):
        try:
            found.append(grow(a, None, min(map(len, found), default=MAX_NODES), longest))
        except (Budget, ValueError) as e:
            errors.append(e)
    if not found:
        raise errors[-1]
    return prune(a, min(found, key=lambda ws: (max(len(runs(w)) for w in ws), len(ws))))


def _leaves(words: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    inner = {w[:-1] for w in words}
    return [w for w in words if w not in inner]


def _show(a: Semiautomaton, w: list[int]) -> str:
    return repr(" ".join(a.alphabet[s] for s in w)) if w else "the empty word"


def progress_table(a: Semiautomaton, chains: list[tuple[int, ...]]) -> tuple[list[tuple[int, ...]], list[int]] | None:
    """The product walk over chain progress tuples from (q0, 0...0): the reachable keys and their
    states, or None when one key goes with two states."""
    start = (0,) * len(chains)
    of = {start: a.start}
    seen = {(a.start, start)}
    todo = deque([(a.start, start)])
    while todo:
        q, key = todo.popleft()
        for s, m in enumerate(a.maps):
            nk = tuple(j + (j < len(c) and c[j] == s) for j, c in zip(key, chains))
            nxt = (m[q], nk)
            if nxt in seen:
                continue
            seen.add(nxt)
            if of.setdefault(nk, nxt[0]) != nxt[0]:
                return None
            todo.append(nxt)
    keys = sorted(of)
    return keys, [of[k] for k in keys]


def detect(a: Semiautomaton) -> tuple[PiecewisePlan | None, str]:
    """The plan (module docstring), or None and the failing property."""
    if a.undefined:
        return None, "the automaton is partial (piecewise testability is checked on complete automata)"
    states = reachable_states(a)
    cyc = cycle_witness(a, states)
    if cyc is not None:
        first, second = (a.states[i] for i in cyc)
        return None, f"a cycle through states {first!r}, {second!r} is not a self-loop: not piecewise testable"
    conf = confluence_witness(a, states)
    if conf is not None:
        at, x, y = conf
        return None, (f"from state {a.states[at]!r} the letters {a.alphabet[x]!r} and {a.alphabet[y]!r} lead to states "
                      f"that no word over those two letters brings together (not locally confluent): not piecewise "
                      f"testable")
    try:
        words = relevant(a, states)
    except ValueError as e:
        return None, str(e)
    except Budget as e:
        return None, f"detection budget: {e}"
    chains = sorted(_leaves(words), key=lambda w: (len(w), w))
    table = progress_table(a, chains)
    if table is None:  # chains carry the same flags as the trie, so this cannot happen
        return None, "the chains' progress does not determine the state"
    keys, of = table
    plan = PiecewisePlan(len(a.alphabet), len(a.states), a.start, tuple(runs(c) for c in chains),
                         tuple(keys), tuple(of))
    return plan, ""
