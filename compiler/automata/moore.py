"""Moore machines: the smallest automaton that gives the same output label after every input.

A Semiautomaton with ``outputs`` is a Moore machine.  When only the label is wanted, two
states are interchangeable when every word takes them to states with the same label (the
Myhill-Nerode congruence of the output map); the quotient by that congruence, restricted to
the states reachable from the start, is the minimal Moore machine, and compiling it instead
of the whole automaton can only shrink what the constructions see.

:func:`minimise` computes it by partition refinement (Moore's algorithm: start from the
partition by label, split blocks by the blocks their successors fall in, until nothing
splits) and orders the quotient's states so that each label's states are consecutive (the
scalar readouts of the constructions need that, see ``constructions/labels.py``).

A partial automaton under the promise of legal inputs is an *incompletely specified* Moore
machine, whose minimisation is NP-hard (Pfleeger 1973).  :func:`merge_compatible` is a greedy
heuristic: two states are *compatible* when no word legal from both reaches states of different
labels (a greatest fixpoint over the pairs, :func:`incompatible_pairs`); pairs of compatible
states are tried in breadth-first order, each merge closed under the transitions (merging two
classes merges, per letter, their defined successors, as in Hopcroft and Karp's equivalence
test) and kept only when every class it makes is pairwise compatible.  The quotient is again
partial (a class's letter is undefined only where none of its states defines it), and it gives
the same label as the automaton after every legal word: a class's defined successor is unique
by the closure, and its states share their label.  Not always minimal (the merge order
matters), never wrong.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SpecError
from .promise import defined_table, legal_reachable
from .spec import Semiautomaton


@dataclass(frozen=True)
class Minimised:
    """The minimal Moore machine of an automaton and how it was obtained.

    quotient: the minimal machine (``outputs`` set; states named by their first member).
    labels: the distinct labels, in the order the readout scores them.
    state_label: ``labels`` index of each quotient state (non-decreasing: classes consecutive).
    classes: the original states each quotient state stands for (names).
    states_before, reachable, states_after: sizes (all states, reachable from the start, quotient).
    """

    quotient: Semiautomaton
    labels: tuple[str, ...]
    state_label: tuple[int, ...]
    classes: tuple[tuple[str, ...], ...]
    states_before: int
    reachable: int
    states_after: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (stored in a label model's ``meta["readout"]``)."""
        return {"labels": list(self.labels), "state_label": list(self.state_label),
                "classes": [list(c) for c in self.classes], "states_before": self.states_before,
                "reachable": self.reachable, "states_after": self.states_after}


def _outputs(a: Semiautomaton) -> tuple[str, ...]:
    """``a``'s output label per state; SpecError when it has none (a Moore machine needs them)."""
    if a.outputs is None:
        raise SpecError(f"{a.name} has no outputs: label readout needs an output label per state "
                        f"('outputs' or 'final_states' in the spec)")
    return a.outputs


def reachable_states(a: Semiautomaton) -> list[int]:
    """States reachable from the start, breadth first (letters in alphabet order)."""
    seen, order, todo = {a.start}, [a.start], deque([a.start])
    while todo:
        q = todo.popleft()
        for m in a.maps:
            r = m[q]
            if r not in seen:
                seen.add(r)
                order.append(r)
                todo.append(r)
    return order


def refine(a: Semiautomaton, states: list[int], initial: dict[int, Any]) -> dict[int, int]:
    """Moore's partition refinement on ``states`` (closed under the transitions): the coarsest
    partition finer than ``initial`` (state -> key) that the transitions respect.  Returns
    state -> block number, blocks numbered in order of their first state in ``states``."""
    block = _number(states, {q: initial[q] for q in states})
    while True:
        new = _number(states, {q: (block[q], *(block[m[q]] for m in a.maps)) for q in states})
        if len(set(new.values())) == len(set(block.values())):
            return new
        block = new


def _number(states: list[int], key: dict[int, Any]) -> dict[int, int]:
    ids: dict[Any, int] = {}
    return {q: ids.setdefault(key[q], len(ids)) for q in states}


def incompatible_pairs(a: Semiautomaton, states: list[int]) -> np.ndarray:
    """[i, j] over ``states`` (closed under the defined transitions): some word legal from both
    states i and j reaches states of different labels (the greatest fixpoint of compatibility)."""
    pos = {q: i for i, q in enumerate(states)}
    outputs = _outputs(a)
    label_id = {x: i for i, x in enumerate(dict.fromkeys(outputs))}
    labels = np.array([label_id[outputs[q]] for q in states], dtype=np.int64)
    bad = labels[:, None] != labels[None, :]
    ok = defined_table(a)[:, states]
    succ = np.array([[pos.get(m[q], 0) for q in states] for m in a.maps], dtype=np.int64)
    while True:
        new = bad.copy()
        for row, row_ok in zip(succ, ok):
            new |= bad[np.ix_(row, row)] & row_ok[:, None] & row_ok[None, :]
        if np.array_equal(new, bad):
            return bad
        bad = new


def merge_compatible(a: Semiautomaton, states: list[int]) -> dict[int, int]:
    """The greedy heuristic of the module docstring: state -> class number (classes numbered in
    order of their first state in ``states``)."""
    pos = {q: i for i, q in enumerate(states)}
    bad = incompatible_pairs(a, states)
    ok = defined_table(a)
    owner = {q: q for q in states}  # state -> its class's key
    members = {q: [q] for q in states}
    for i, p in enumerate(states):
        for q in states[i + 1:]:
            if owner[p] != owner[q] and not bad[pos[p], pos[q]]:
                trial = _closed_merge(a, ok, bad, pos, dict(owner), {k: v[:] for k, v in members.items()}, p, q)
                if trial is not None:
                    owner, members = trial
    return _number(states, {q: pos[owner[q]] for q in states})


def _closed_merge(a: Semiautomaton, ok: np.ndarray, bad: np.ndarray, pos: dict[int, int], owner: dict[int, int],
                  members: dict[int, list[int]], p: int, q: int) -> tuple[dict, dict] | None:
    """Merge the classes of ``p`` and ``q`` and, per letter, their defined successors, until closed;
    None when a class would hold two incompatible states."""
    todo = [(p, q)]
    while todo:
        x, y = todo.pop()
        cx, cy = owner[x], owner[y]
        if cx == cy:
            continue
        mx, my = members[cx], members[cy]
        if bad[np.ix_([pos[s] for s in mx], [pos[s] for s in my])].any():
            return None
        for letter, m in enumerate(a.maps):
            sx = next((m[s] for s in mx if ok[letter, s]), None)
            sy = next((m[s] for s in my if ok[letter, s]), None)
            if sx is not None and sy is not None:
                todo.append((sx, sy))
        for s in my:
            owner[s] = cx
        members[cx] = mx + my
        del members[cy]
    return owner, members


def minimise(a: Semiautomaton) -> Minimised:
    """The minimal Moore machine of ``a`` (which must have outputs): reachable states, merged by
    partition refinement from the partition by label; quotient states ordered by label (labels in
    order of first appearance, breadth first from the start), then by their first member."""
    outputs = _outputs(a)
    order = [int(q) for q in legal_reachable(a)] if a.partial else reachable_states(a)
    block = merge_compatible(a, order) if a.partial else refine(a, order, {q: outputs[q] for q in order})
    labels: list[str] = []
    for q in order:
        if outputs[q] not in labels:
            labels.append(outputs[q])
    members: dict[int, list[int]] = {}
    for q in order:
        members.setdefault(block[q], []).append(q)
    blocks = sorted(members, key=lambda b: (labels.index(outputs[members[b][0]]), b))
    new_id = {b: i for i, b in enumerate(blocks)}
    reps = [members[b][0] for b in blocks]
    ok = defined_table(a)
    successor = [[next((m[q] for q in members[b] if ok[s, q]), None) for b in blocks] for s, m in enumerate(a.maps)]
    maps = tuple(tuple(i if r is None else new_id[block[r]] for i, r in enumerate(row)) for row in successor)
    undefined = tuple((s, i) for s, row in enumerate(successor) for i, r in enumerate(row) if r is None)
    quotient = Semiautomaton(name=a.name, states=tuple(a.states[q] for q in reps), alphabet=a.alphabet, maps=maps,
                             start=new_id[block[a.start]], outputs=tuple(outputs[q] for q in reps),
                             undefined=undefined)
    return Minimised(quotient=quotient, labels=tuple(labels),
                     state_label=tuple(labels.index(outputs[q]) for q in reps),
                     classes=tuple(tuple(a.states[q] for q in members[b]) for b in blocks),
                     states_before=a.n_states, reachable=len(order), states_after=len(reps))


def labelling(a: Semiautomaton, m: Minimised) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(labels, state_label) over every state of ``a`` itself (not the quotient): ``m.labels``
    first (same indices), then the labels only unreachable states carry, in state order."""
    labels = list(m.labels)
    for x in a.outputs or ():
        if x not in labels:
            labels.append(x)
    return tuple(labels), tuple(labels.index(x) for x in a.outputs or ())
