"""Partial automata under the promise of legal inputs (docs/promises.md).

A transition a spec leaves out is a promise that no input takes it: the *legal* words are
those whose every step is defined, from the start state.  :class:`~.spec.Semiautomaton` keeps
the undefined pairs in ``undefined`` (and a self-loop in ``maps``, so a promise-blind analysis
sees a completion on the same states).  This module holds what works on legal words only:
the domain test (:func:`legal_mask`), counting and enumerating legal words (the exhaustive
check), sampling them uniformly among legal continuations at each step (the paper's input
distribution), and turning a sink into undefined transitions (:func:`drop_state`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .errors import SpecError
from .spec import Semiautomaton, sink_name


def promise_text(undefined: int) -> str:
    """What the promise of legal inputs says of an automaton that leaves ``undefined`` transitions out
    (a model's ``meta["promise"]`` and its certificate's promise)."""
    return (f"exact on legal inputs only: {undefined} transitions are undefined and promised never taken; "
            f"elsewhere the output is unspecified, and run refuses such inputs")


def defined_table(automaton: Semiautomaton) -> np.ndarray:
    """[n_symbols, n_states] bool: whether delta(q, a) is defined."""
    return np.asarray(automaton.defined, dtype=bool).reshape(automaton.n_symbols, automaton.n_states)


def legal_reachable(automaton: Semiautomaton) -> np.ndarray:
    """The states legal words reach from the start, breadth first (the start, then each level in
    index order)."""
    ok = defined_table(automaton)
    table = np.asarray(automaton.maps, dtype=np.int64).reshape(automaton.n_symbols, automaton.n_states)
    seen = np.zeros(automaton.n_states, dtype=bool)
    seen[automaton.start] = True
    frontier = np.array([automaton.start])
    levels = [frontier]
    while len(frontier):
        nxt = np.unique(table[:, frontier][ok[:, frontier]])
        frontier = nxt[~seen[nxt]]
        seen[frontier] = True
        levels.append(frontier)
    return np.concatenate(levels).astype(np.int32)


def legal_mask(automaton: Semiautomaton, tokens: np.ndarray, start: int | None = None) -> np.ndarray:
    """[B, T] bool: position t is inside the domain (letters 1..t all defined, from ``start``).
    All True for a complete automaton.  This is the library's answer for a batch: the model's
    output is vouched for exactly where the mask is True."""
    tokens = np.asarray(tokens, dtype=np.int64)
    if not automaton.partial:
        return np.ones(tokens.shape, dtype=bool)
    table = np.asarray(automaton.maps, dtype=np.int64).reshape(automaton.n_symbols, automaton.n_states)
    ok_table = defined_table(automaton)
    q = np.full(tokens.shape[0], automaton.start if start is None else start, dtype=np.int64)
    ok = np.ones(tokens.shape[0], dtype=bool)
    out = np.empty(tokens.shape, dtype=bool)
    for t in range(tokens.shape[1]):
        ok &= ok_table[tokens[:, t], q]
        q = table[tokens[:, t], q]
        out[:, t] = ok
    return out


def live_states(automaton: Semiautomaton, length: int) -> list[np.ndarray]:
    """``live[r][q]``: some legal word of length r leaves q (r = 0..length; decreasing in r, so
    the list stops early once it is stable and :func:`live_at` repeats its last entry)."""
    table = np.asarray(automaton.maps, dtype=np.int64).reshape(automaton.n_symbols, automaton.n_states)
    ok = defined_table(automaton)
    live = [np.ones(automaton.n_states, dtype=bool)]
    for _ in range(length):
        nxt: np.ndarray = np.asarray((ok & live[-1][table]).any(axis=0))
        if np.array_equal(nxt, live[-1]):
            break
        live.append(nxt)
    return live


def live_at(live: list[np.ndarray], r: int) -> np.ndarray:
    """Entry r of :func:`live_states` (its last entry beyond its end)."""
    return live[min(r, len(live) - 1)]


def count_legal(automaton: Semiautomaton, length: int, cap: int) -> int:
    """The number of legal words of length ``length`` from the start plus the shorter ones that
    cannot be continued (the rows :func:`legal_words` makes), stopping at ``cap`` + 1."""
    table = np.asarray(automaton.maps, dtype=np.int64).reshape(automaton.n_symbols, automaton.n_states)
    ok = defined_table(automaton)
    counts = [0] * automaton.n_states
    counts[automaton.start] = 1
    ended = 0
    for _ in range(length):
        nxt = [0] * automaton.n_states
        for q, c in enumerate(counts):
            if not c:
                continue
            moves = [int(table[a, q]) for a in range(automaton.n_symbols) if ok[a, q]]
            ended += c if not moves else 0
            for r in moves:
                nxt[r] += c
        counts = nxt
        if ended + sum(counts) > cap:
            return cap + 1
    return ended + sum(counts)


def legal_words(automaton: Semiautomaton, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Every legal word of ``length`` letters and every shorter legal word with no legal
    continuation, as rows [N, length] padded with letter 0, and their mask (True on the word's
    own positions): every legal word of length <= ``length`` is a prefix of a row."""
    table = np.asarray(automaton.maps, dtype=np.int64).reshape(automaton.n_symbols, automaton.n_states)
    ok = defined_table(automaton)
    words = np.zeros((1, 0), dtype=np.int64)
    states = np.array([automaton.start], dtype=np.int64)
    done: list[np.ndarray] = []
    for _ in range(length):
        moves = ok[:, states].T  # [N, n_symbols]
        stuck = ~moves.any(axis=1)
        if stuck.any():
            done.append(words[stuck])
        rows, letters = np.nonzero(moves)
        words = np.concatenate([words[rows], letters[:, None]], axis=1)
        states = table[letters, states[rows]]
    done.append(words)
    out = np.zeros((sum(len(w) for w in done), length), dtype=np.int64)
    mask = np.zeros(out.shape, dtype=bool)
    i = 0
    for w in done:
        out[i:i + len(w), :w.shape[1]] = w
        mask[i:i + len(w), :w.shape[1]] = True
        i += len(w)
    return out, mask


def exhaustive_legal_length(automaton: Semiautomaton, max_len: int, budget: int) -> int:
    """Largest L <= max_len whose :func:`legal_words` rows number at most ``budget`` (at least 1)."""
    L = 1
    while L < max_len and count_legal(automaton, L + 1, budget) <= budget:
        L += 1
    return L


def sample_legal(automaton: Semiautomaton, rng: np.random.Generator, n: int,
                 length: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` legal words, each letter drawn uniformly among the legal continuations at that step
    (the paper's input distribution) that can still be continued to ``length`` letters.  When no
    legal word of ``length`` letters exists, the words are as long as legal words get, padded with
    letter 0; returns tokens [n, length] and the mask of the words' own positions."""
    table = np.asarray(automaton.maps, dtype=np.int64).reshape(automaton.n_symbols, automaton.n_states)
    ok = defined_table(automaton)
    live = live_states(automaton, length)
    start = automaton.start
    reach = max(r for r in range(min(length, len(live) - 1) + 1) if live[r][start]) \
        if not live_at(live, length)[start] else length
    tokens = np.zeros((n, length), dtype=np.int64)
    mask = np.zeros((n, length), dtype=bool)
    q = np.full(n, start, dtype=np.int64)
    for t in range(reach):
        options = ok[:, q].T & live_at(live, reach - t - 1)[table[:, q]].T  # [n, n_symbols]
        counts = options.sum(axis=1)
        pick = (rng.random(n) * counts).astype(np.int64)
        letters = (np.cumsum(options, axis=1) > pick[:, None]).argmax(axis=1)
        tokens[:, t] = letters
        mask[:, t] = True
        q = table[letters, q]
    return tokens, mask


def add_sink(automaton: Semiautomaton) -> Semiautomaton:
    """The completion that sends every undefined transition to one added absorbing state, last
    (``--complete``'s automaton, outputs dropped): detection of error-tracking structure reads
    a partial automaton through it."""
    n = automaton.n_states
    missing = set(automaton.undefined)
    maps = tuple(tuple(n if (a, q) in missing else f[q] for q in range(n)) + (n,) for a, f in enumerate(automaton.maps))
    name = sink_name(automaton.states)
    return dataclasses.replace(automaton, states=automaton.states + (name,), maps=maps, outputs=None, undefined=())


def drop_state(automaton: Semiautomaton, state: int) -> Semiautomaton:
    """``automaton`` without ``state`` (an error sink, a regular expression's dead state): every
    transition into it becomes undefined, so the result holds under the promise of legal inputs."""
    if state == automaton.start:
        raise SpecError(f"the start state {automaton.states[state]!r} cannot be dropped")
    keep = [q for q in range(automaton.n_states) if q != state]
    new = {q: i for i, q in enumerate(keep)}
    maps = tuple(tuple(new.get(f[q], new[q]) for q in keep) for f in automaton.maps)
    before = set(automaton.undefined)
    undefined = tuple(sorted({(a, new[q]) for a, f in enumerate(automaton.maps) for q in keep
                              if f[q] == state or (a, q) in before}))
    outputs = None if automaton.outputs is None else tuple(automaton.outputs[q] for q in keep)
    return dataclasses.replace(automaton, states=tuple(automaton.states[q] for q in keep), maps=maps,
                               start=new[automaton.start], outputs=outputs, undefined=undefined)
