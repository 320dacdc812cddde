"""The state as a function of the previous position's state in a smaller quotient and the letter.

Call two states *one-step equal* when every letter sends them to the same state:
p ~ p' iff delta(p, a) = delta(p', a) for every a.  It is a congruence (equal successors are
equal, so their successors are too), so A/~ is an automaton Q that reads the same letters, and
after t letters Q is in the class of A's state q_t.  And q_t = delta(q_{t-1}, a_t) depends on
q_{t-1} only through its class: q_t = step(c_{t-1}, a_t) with c_{t-1} Q's state after t - 1
letters (Q's start for t = 1).  So A is compiled as Q plus one layer that fetches Q's state at
t - 1 and looks up ``step`` (``constructions/transition.py``).

It pays where Q is much smaller than A: the Moore machine over a Mealy machine's transitions
(``compiler/automata/mealy.py``), whose states (q, a) every letter b sends to (delta(q, a), b),
is one-step equal exactly on the transitions into one state -- its Q is the Mealy machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .spec import Semiautomaton, from_dict


@dataclass(frozen=True)
class TransitionPlan:
    """A's one-step quotient and its step table.

    quotient: Q = A/~ (states named by their first member, the start's class as its start).
    classes: Q's state of each of A's states.
    step: ``step[a][c]`` = A's state after letter a from any state of class c.
    codes: the integer code of each of A's states in the model (ordered by A's output label
        where A has outputs, so that each label's states are a run of codes: a label readout is
        then linear, ``constructions/labels.py``), centred on 0 (:func:`centred`).
    """

    quotient: Semiautomaton
    classes: tuple[int, ...]
    step: tuple[tuple[int, ...], ...]
    codes: tuple[int, ...]

    @property
    def n_states(self) -> int:
        return len(self.classes)

    def to_dict(self) -> dict[str, Any]:
        return {"quotient": self.quotient.to_dict(), "classes": list(self.classes),
                "step": [list(r) for r in self.step], "codes": list(self.codes)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "TransitionPlan":
        return TransitionPlan(from_dict(d["quotient"]), tuple(int(c) for c in d["classes"]),
                              tuple(tuple(int(x) for x in r) for r in d["step"]), tuple(int(c) for c in d["codes"]))


def one_step_classes(a: Semiautomaton) -> list[int]:
    """The class of each state under one-step equality, classes numbered in order of first state."""
    ids: dict[tuple[int, ...], int] = {}
    return [ids.setdefault(tuple(m[q] for m in a.maps), len(ids)) for q in range(a.n_states)]


def transition_plan(a: Semiautomaton) -> TransitionPlan | None:
    """``a``'s one-step quotient and step table (module docstring); None when no two states are
    one-step equal (Q would be ``a`` itself)."""
    classes = one_step_classes(a)
    n = max(classes) + 1
    if n == a.n_states:
        return None
    reps = [classes.index(c) for c in range(n)]
    maps = tuple(tuple(classes[m[r]] for r in reps) for m in a.maps)
    quotient = Semiautomaton(a.name, tuple(a.states[r] for r in reps), a.alphabet, maps, classes[a.start])
    step = tuple(tuple(m[r] for r in reps) for m in a.maps)
    if a.outputs is None:
        ranks = list(range(a.n_states))
    else:
        order = list(dict.fromkeys(a.outputs))
        ranked = sorted(range(a.n_states), key=lambda q: (order.index(a.outputs[q]), q))  # type: ignore[index]
        ranks = [ranked.index(q) for q in range(a.n_states)]
    return TransitionPlan(quotient, tuple(classes), step, centred(ranks))


def centred(ranks: list[int]) -> tuple[int, ...]:
    """Codes 0..n-1 shifted to -(n-1)//2..n//2: the model writes a state's code through a lookup
    whose key unit carries a relative rounding error, so the code's error bound (a radius over
    every code) scales with the largest |code|; centring halves it (a nearest-integer-point readout
    and a label readout's lines read signed codes alike)."""
    shift = (len(ranks) - 1) // 2
    return tuple(r - shift for r in ranks)
