"""Mealy machines: outputs on transitions, read out through the Moore machine over transitions.

A Mealy machine (Q, Sigma, O, delta, lambda, q0) writes, on letter a_t in state q_{t-1}, the output
lambda(q_{t-1}, a_t) (a :class:`.spec.Semiautomaton` with ``transition_outputs``).  Its label
readout reduces to what the Moore machinery already compiles and certifies:

1. :func:`minimise_mealy` -- the reachable states merged by partition refinement from the
   partition by output row (Moore's algorithm, :func:`.moore.refine`, keyed by the outputs of
   every letter and, under a promise, by which letters are defined): the smallest complete
   Mealy machine with the same outputs; a partial one is minimised among those with the same
   domain (merging by don't-cares is the NP-hard problem of :mod:`.moore`, not attempted here).
2. :func:`transitions_moore` -- the Moore machine over transitions: a start state ``q0`` plus
   one state ``(q,a)`` per reachable transition, ``(q,a) --b--> (delta(q,a),b)``, labelled with
   lambda(q, a).  After a_1..a_t it is in ``(q_{t-1},a_t)``, so its label is the Mealy output at t
   (the start's label is never read: it is the output of a transition into q0 when there is one,
   so the two can merge).  It is partial exactly where the Mealy machine is.
3. The label planner (:mod:`compiler.label_planner`) then minimises that Moore machine and compiles
   the cheaper of it and the machine as given, as for any Moore machine.

:func:`moore_disagreement` re-derives step 2's claim on every input (a product walk of the two
machines), so the certificate of a Mealy model covers the Mealy machine itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from .errors import SpecError
from .moore import reachable_states, refine
from .promise import legal_reachable
from .simulate import simulate
from .spec import Semiautomaton, from_dict


@dataclass(frozen=True)
class MealyMoore:
    """A Mealy machine's Moore machine over transitions and how it was obtained (``meta["readout"]["mealy"]``).

    moore: the Moore machine over the transitions of the minimised Mealy machine.
    states_before, reachable, states_after: the Mealy machine's sizes (all, reachable, minimised).
    outputs: the distinct outputs of reachable transitions.
    source: the Mealy machine as given (its spec dict), the reference the outputs are checked against.
    """

    moore: Semiautomaton
    states_before: int
    reachable: int
    states_after: int
    outputs: int
    source: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary, with the Mealy spec the verifier and the certificate check against."""
        return {"states_before": self.states_before, "reachable": self.reachable, "states_after": self.states_after,
                "transitions": self.moore.n_states - 1, "outputs": self.outputs, "source": self.source}


def is_mealy(a: Semiautomaton) -> bool:
    """Whether ``a`` carries outputs on its transitions."""
    return a.transition_outputs is not None


def _table(a: Semiautomaton) -> tuple[tuple[str, ...], ...]:
    if a.transition_outputs is None:
        raise SpecError(f"{a.name} is not a Mealy machine (it has no 'transition_outputs')")
    return a.transition_outputs


def mealy_outputs(a: Semiautomaton, letters: Iterable[int], start: int | None = None) -> list[str]:
    """The reference simulation: the output of each transition taken, lambda(q_{t-1}, a_t)."""
    out, q = _table(a), a.start if start is None else start
    said = []
    for x in letters:
        said.append(out[x][q])
        q = a.maps[x][q]
    return said


def output_ids(a: Semiautomaton, tokens: np.ndarray, index: Mapping[str, int]) -> np.ndarray:
    """The reference simulation on a batch: ``index`` of lambda(q_{t-1}, a_t) at every position of
    ``tokens`` [B, T] (-1 for an output ``index`` lacks, such as a missing transition's "")."""
    out = _table(a)
    table = np.array([[index.get(x, -1) for x in row] for row in out], dtype=np.int64)  # [letter, state]
    tokens = np.asarray(tokens, dtype=np.int64)
    after = simulate(a, tokens)
    before = np.concatenate([np.full((tokens.shape[0], 1), a.start, dtype=np.int64), after[:, :-1]], axis=1)
    return table[tokens, before]


def _reachable(a: Semiautomaton) -> list[int]:
    return [int(q) for q in legal_reachable(a)] if a.partial else reachable_states(a)


def minimise_mealy(a: Semiautomaton) -> tuple[Semiautomaton, int]:
    """The minimal Mealy machine of ``a`` (module docstring, step 1) and its reachable count;
    states named by their first member, the start first, then breadth-first order."""
    out, ok = _table(a), a.defined
    order = _reachable(a)
    key = {q: tuple((ok[x][q], out[x][q] if ok[x][q] else "") for x in range(a.n_symbols)) for q in order}
    block = refine(a, order, key)
    reps: dict[int, int] = {}
    for q in order:
        reps.setdefault(block[q], q)
    new = {b: i for i, b in enumerate(reps)}
    keep = list(reps.values())
    maps = tuple(tuple(new[block[m[q]]] if ok[x][q] else i for i, q in enumerate(keep)) for x, m in enumerate(a.maps))
    undefined = tuple(sorted((x, i) for x in range(a.n_symbols) for i, q in enumerate(keep) if not ok[x][q]))
    outs = tuple(tuple(out[x][q] for q in keep) for x in range(a.n_symbols))
    return Semiautomaton(a.name, tuple(a.states[q] for q in keep), a.alphabet, maps, new[block[a.start]], None,
                         undefined, outs), len(order)


def _names(a: Semiautomaton, pairs: list[tuple[int, int]]) -> list[str]:
    """``q0``'s name, then ``(q,a)`` for each transition (primes added where a name repeats)."""
    names, seen = [], set()
    for text in [a.states[a.start]] + [f"({a.states[q]},{a.alphabet[x]})" for q, x in pairs]:
        while text in seen:
            text += "'"
        seen.add(text)
        names.append(text)
    return names


def transitions_moore(a: Semiautomaton) -> Semiautomaton:
    """The Moore machine over ``a``'s reachable transitions (module docstring, step 2): state 0
    the start, then ``(q,x)`` for q reachable (breadth first) and x defined at q, in letter order."""
    out, ok = _table(a), a.defined
    pairs = [(q, x) for q in _reachable(a) for x in range(a.n_symbols) if ok[x][q]]
    if not pairs:
        raise SpecError(f"{a.name}: no transition is defined from the start, so there is no output to read")
    index = {p: i + 1 for i, p in enumerate(pairs)}
    states = [a.start] + [a.maps[x][q] for q, x in pairs]  # the Mealy state each Moore state is in
    into = [out[x][q] for q, x in pairs if a.maps[x][q] == a.start]
    labels = [into[0] if into else out[pairs[0][1]][pairs[0][0]]] + [out[x][q] for q, x in pairs]
    maps = tuple(tuple(index[(p, y)] if ok[y][p] else i for i, p in enumerate(states)) for y in range(a.n_symbols))
    undefined = tuple(sorted((y, i) for y in range(a.n_symbols) for i, p in enumerate(states) if not ok[y][p]))
    return Semiautomaton(a.name, tuple(_names(a, pairs)), a.alphabet, maps, 0, tuple(labels), undefined)


def mealy_moore(a: Semiautomaton) -> MealyMoore:
    """``a`` minimised by its outputs, then its Moore machine over transitions (module docstring)."""
    small, reachable = minimise_mealy(a)
    out = _table(small)
    moore = transitions_moore(small)
    said = {out[x][q] for x in range(small.n_symbols) for q in range(small.n_states) if small.defined[x][q]}
    return MealyMoore(moore, a.n_states, reachable, small.n_states, len(said), a.to_dict())


def moore_disagreement(mealy: dict[str, Any], moore: Semiautomaton) -> str | None:
    """The first input (breadth first over the product's reachable pairs) on which ``moore``'s
    label after a letter is not ``mealy``'s output on it, or has no transition where ``mealy`` has
    one; None when they agree on every input (the product walk covers every word)."""
    m = from_dict(mealy)
    if m.alphabet != moore.alphabet or moore.outputs is None:
        return "the Mealy machine and the compiled automaton have different alphabets"
    out = _table(m)
    seen = {(m.start, moore.start)}
    todo: list[tuple[int, int, tuple[str, ...]]] = [(m.start, moore.start, ())]
    for p, s, word in todo:
        for x in range(m.n_symbols):
            here = (*word, m.alphabet[x])
            if not m.defined[x][p]:  # never taken (the promise): nothing to read
                continue
            if not moore.defined[x][s]:
                return f"after {list(here)} the Mealy machine has a transition and the compiled automaton none"
            nxt = (m.maps[x][p], moore.maps[x][s])
            if moore.outputs[nxt[1]] != out[x][p]:
                return (f"after {list(here)} the Mealy machine outputs {out[x][p]!r}, the compiled automaton's label "
                        f"is {moore.outputs[nxt[1]]!r}")
            if nxt not in seen:
                seen.add(nxt)
                todo.append((*nxt, here))
    return None
