"""Tiers: a factor description of the projection onto the letters that change a state (tier-based
strictly local and locally (threshold) testable automata, TSL_k, TLT_k, TLTT_{k,t}).

The *tier* of an automaton is the set of letters whose map is not the identity on the states
reachable from the start.  A letter off the tier leaves every reachable state unchanged, so
q_t = q(pi(w_1..w_t)) with pi the projection onto the tier (erase the other letters): the
state is the tier automaton's (the same states, the tier's letters only) after the projection.
When that automaton has a factor description (compiler/automata/factors.py), the state at t
is F(window and capped factor counts of pi(w_1..w_t)) once a tier letter has occurred, and the
start q0 before: the plan is that description with its tier and an extra key, the start's
(window class len(windows) + 1, counts 0), with k at least 2.  A tier's description may have no
factor (the tier automaton is definite: its last k - 1 letters decide, which
:func:`~.factors.detect` refuses off a tier, the lookback construction's case).  The construction
(constructions/factors.py) fetches the most recent tier letter and the k - 1 before it: at k = 2
by an offset head, at k >= 3 by matching the tier count.
"""

from __future__ import annotations

import numpy as np

from .factors import MAX_K, MAX_WORK, FactorPlan, detect
from .spec import Semiautomaton

TIER_KS = (4, MAX_K)
"""The factor widths a tier's description is searched at, in order: k = 4 first (the search's
candidates grow with k: a strictly 4-local tier on 8 letters that k = 4 finds in 3 s exhausts the
budget at k = 6), then the widest."""


def reachable(a: Semiautomaton) -> np.ndarray:
    """The states reachable from the start, sorted."""
    maps = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    seen = np.zeros(a.n_states, dtype=bool)
    seen[a.start] = True
    frontier = np.array([a.start])
    while len(frontier):
        nxt = np.unique(maps[:, frontier])
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        frontier = nxt
    return np.flatnonzero(seen)


def tier(a: Semiautomaton) -> tuple[int, ...]:
    """The letters whose map moves some reachable state (module docstring)."""
    maps = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    live = reachable(a)
    return tuple(int(x) for x in np.flatnonzero(np.any(maps[:, live] != live[None, :], axis=1)))


def detect_tier(a: Semiautomaton) -> tuple[FactorPlan | None, str]:
    """The tier's factor description, k >= 2 (module docstring), or None and why: no letter off
    the tier (the plain case), no tier letter, or the tier automaton's own refusal."""
    name = a.name or "the automaton"
    if a.partial:
        return None, f"{name} is partial (tiers are searched on complete automata)"
    letters = tier(a)
    if len(letters) == a.n_symbols:
        return None, f"every letter of {name} changes a reachable state (no tier: the plain case)"
    if not letters:
        return None, f"no letter of {name} changes a state (constant)"
    projected = Semiautomaton(name=f"{name} on its tier", states=a.states, start=a.start,
                              alphabet=tuple(a.alphabet[x] for x in letters), maps=tuple(a.maps[x] for x in letters))
    for max_k in TIER_KS:  # the detection's budget, shared
        plan, why = detect(projected, max_k=max_k, budget=MAX_WORK // len(TIER_KS), definite=True)
        if plan is not None:
            break
    if plan is None:
        return None, f"on its tier of {len(letters)} letters: {why}"
    top = max(plan.classes) + 1  # the letters off the tier: a class no pattern holds
    classes = [top] * a.n_symbols
    for x, c in zip(letters, plan.classes):
        classes[x] = c
    start = (len(plan.windows) + 1,) + (0,) * plan.n_groups
    return FactorPlan(max(2, plan.k), plan.threshold, a.n_symbols, a.n_states, tuple(classes), plan.windows,
                      plan.factors, plan.groups, (start, *plan.keys), (a.start, *plan.states), letters), \
        f"tier-based ({len(letters)} of {a.n_symbols} letters): {why}"
