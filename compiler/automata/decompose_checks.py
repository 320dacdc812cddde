"""Verification of a decomposition (step 5 of :mod:`compiler.automata.decompose`): the holonomy
cascade, the groups' coordinates, each level's refinement, the final tables level by level, the
readout, round trips and a direct search of the final cascade (:func:`verify_cascade`)."""

from __future__ import annotations

import random

from . import groups as G
from .cascade import Cascade, Component, Verification, View
from .exploration import Exploration, apply_action
from .refine import KEEP_ALL, DecompositionError, Level, local_step
from .semigroup import LetterNormalisation

GROUP_CHECK_BUDGET = 20_000_000
"""Most work (checks times the degree of the permutations) spent checking a group's counters, and
a level's group-then-reset, on every input; past it only the inputs in a generating set are
checked (the others follow, see :func:`verify_cascade`)."""


def _check_actions(lvl: Level, ex: Exploration, budget: int = GROUP_CHECK_BUDGET) -> tuple[int, bool]:
    """For every distinct holonomy input of the level and every local state (group coordinates, y)
    standing for a value it applies to, the local update stands for the input's result.

    A reset to z does not look at the old tile, so it is checked once per
    joint group coordinate (y·g must become z whatever g is).  When the
    permutations times the local states pass ``budget``, only permutations
    in the groups' reduced generating sets are checked.  Returns (checks, all inputs checked).
    """
    d = lvl.depth
    values = sorted({ex.value[c] for c in ex.level_nodes[d]})
    acts = set(ex.actions[d].values()) | {KEEP_ALL}
    n_local = len(lvl.gkeys())
    perms = [act for act in acts if isinstance(act, tuple)]
    degree = max((p.gs.degree for p in lvl.parts), default=1)
    complete = len(perms) * n_local * degree <= budget
    if not complete:
        reduced = {(p.block.index, g) for p in lvl.parts for g in p.gs.reduced_generators}
        acts = {act for act in acts if not isinstance(act, tuple) or act in reduced}
    checks = 0
    any_y = lvl.ys[0]
    gkeys = lvl.gkeys()
    for act in acts:
        if isinstance(act, int):
            cases = [(gk, any_y) for gk in gkeys]
            targets = [act] * len(cases)
        else:
            cases, targets = [], []
            for v in values:
                if isinstance(act, tuple):
                    b = lvl.block_of_value.get(v)
                    if b is None or b.index != act[0]:
                        continue
                t = v if act == KEEP_ALL else apply_action(ex.hol, d, act, v)
                for local in lvl.local_states(v):
                    cases.append(local)
                    targets.append(t)
        for (gk, y), target in zip(cases, targets):
            ngk, nyi = local_step(lvl, act, gk, lvl.y_index[y])
            if lvl.tile(ngk, lvl.ys[nyi]) != target:
                raise DecompositionError(f"group-then-reset of level {d} does not follow its input")
            checks += 1
    return checks, complete


def _check_level(lvl: Level, comps: list[Component], views: list[View], upper: list[Level],
                 ex: Exploration, letters: LetterNormalisation) -> int:
    """Every (reachable upper prefix, letter, local state of the level) gives, through the final
    tables, the level value the holonomy cascade prescribes.  Returns the number of checks."""
    d = lvl.depth
    children: dict[int, list[int]] = {}
    for c in ex.level_nodes[d]:
        children.setdefault(ex.parent[c], []).append(c)
    local_names = [n for p in lvl.parts for n in p.names] + ([lvl.reset] if lvl.reset else [])
    up_levels = [u for u in upper if u.signal is not None]
    slots = {u.signal: i for i, u in enumerate(up_levels)}
    for i, n in enumerate(local_names):
        slots[n] = len(up_levels) + i
    plans = [(tuple(slots[r] for r in c.reads), c) for c in comps]
    view = next((v for v in views if v.name == lvl.view), None)
    view_pos = tuple(slots[r] - len(up_levels) for r in view.reads) if view else None
    local_cache: dict[int, list] = {}
    checks = 0
    for node in ex.level_nodes[d - 1]:
        upvals = tuple(u.code_index[ex.path[node][u.depth - 1]] for u in up_levels)
        for c in children.get(node, []):
            v = ex.value[c]
            states = local_cache.get(v)
            if states is None:
                states = local_cache[v] = [gk + ((lvl.y_index[y],) if lvl.reset else ())
                                           for gk, y in lvl.local_states(v)]
            for a, m in enumerate(letters.map_of_letter):
                target = v if m is None else ex.value[ex.trans[(c, m)]]
                for local in states:
                    sig = upvals + local
                    new = tuple([comp.apply(old, comp.table[(tuple([sig[i] for i in reads]), a)])
                                 for (reads, comp), old in zip(plans, local)])
                    ny = lvl.ys[new[-1]] if lvl.reset else lvl.ys[0]
                    got = lvl.tile(new[:len(new) - (1 if lvl.reset else 0)], ny)
                    if (view is not None and view_pos is not None
                            and lvl.codes[view.table[tuple([new[i] for i in view_pos])]] != got):
                        raise DecompositionError(f"the tile view of level {d} disagrees with y·g")
                    if got != target:
                        raise DecompositionError(
                            f"level {d} of the cascade does not follow the holonomy cascade"
                        )
                    checks += 1
    return checks


def _level_check_cost(lvl: Level, ex: Exploration, n_letters: int) -> int:
    """An upper bound on the number of checks :func:`_check_level` makes."""
    g = 1
    for p in lvl.parts:
        g *= p.gs.order
    return len(ex.level_nodes[lvl.depth]) * n_letters * g


def verify_cascade(cascade: Cascade, ex: Exploration, levels: list[Level], seed: int,
            direct_budget: int, level_budget: int) -> Verification:
    """Exhaustive verification; raises :class:`DecompositionError` on any failure.

    1. holonomy cascade: every reachable coordinate tuple and letter (done by
       :class:`~compiler.automata.exploration.Exploration`): decode(step(c, a)) = delta(decode(c), a);
    2. group coordinates: for every element and input, the counters multiply correctly;
    3. refinement: for every level, every distinct holonomy input and every
       local state (group coordinates, y) standing for a value it applies to,
       the local update stands for the input's result;
    4. final tables, level by level: for every reachable upper prefix, letter
       and local state standing for a reachable value, the final (minimised)
       tables move the level to the value the holonomy cascade prescribes.
       With 1 and the readout check this proves, by induction on time,
       decode(step(c, a)) = delta(decode(c), a) for every reachable
       configuration c of the final cascade.  Done while the total stays under
       ``level_budget`` checks (``final_tables_exhaustive``); past it, the
       tables are correct by construction from 1-3 (they are built from the
       same functions and minimised only where that keeps them functions) and
       5 checks them directly;
    5. encode/decode round trips, the readout on every reachable leaf, a
       breadth-first search of the final cascade's configurations from every
       state's encoding and random words (each up to ``direct_budget`` component updates).
    """
    ver = Verification(holonomy_checks=ex.checks)
    _check_refinement(ver, levels, ex)
    _check_final_tables(ver, cascade, levels, ex, level_budget)
    _check_readout(cascade, levels, ex)
    max_steps = max(500, direct_budget // max(1, len(cascade.components)))
    _check_directly(ver, cascade, max_steps)
    _check_random_words(ver, cascade, seed, max_steps)
    ver.verified = True
    return ver


def _check_refinement(ver: Verification, levels: list[Level], ex: Exploration) -> None:
    """Checks 2 and 3 of :func:`verify_cascade`: every solvable group's counters multiply
    correctly (on a generating set of its inputs past :data:`GROUP_CHECK_BUDGET`), and each
    level's group-then-reset follows its holonomy input (:func:`_check_actions`)."""
    for lvl in levels:
        for part in lvl.parts:
            if part.gs.solvable:
                inputs = part.gs.generators
                if len(inputs) * part.gs.order * part.gs.degree > GROUP_CHECK_BUDGET:
                    inputs = part.gs.reduced_generators
                    ver.notes.append(f"level {lvl.depth}: counters of {part.gs.name} checked on a generating "
                                     f"set of its {len(part.gs.generators)} inputs")
                ver.group_checks += G.check_coordinates(part.gs, inputs)
        checks, complete = _check_actions(lvl, ex)
        ver.action_checks += checks
        if not complete:
            ver.notes.append(f"level {lvl.depth}: group-then-reset checked on generating permutations only")


def _check_final_tables(ver: Verification, cascade: Cascade, levels: list[Level], ex: Exploration,
                        level_budget: int) -> None:
    """Check 4 of :func:`verify_cascade`: the final tables, level by level, when all the levels'
    checks together stay within ``level_budget`` (``final_tables_exhaustive``)."""
    by_level: dict[int, list[Component]] = {}
    for c in cascade.components:
        by_level.setdefault(c.holonomy_level, []).append(c)
    costs = [_level_check_cost(lvl, ex, cascade.automaton.n_symbols) for lvl in levels]
    ver.final_tables_exhaustive = sum(costs) <= level_budget
    if ver.final_tables_exhaustive:
        for lvl in levels:
            comps = sorted(by_level.get(lvl.depth, []), key=lambda c: _local_order(lvl, c.name))
            ver.level_checks += _check_level(lvl, comps, cascade.views, levels[:lvl.depth - 1], ex,
                                             cascade.letters)


def _check_readout(cascade: Cascade, levels: list[Level], ex: Exploration) -> None:
    """Part of check 5 of :func:`verify_cascade`: the readout gives every reachable leaf's state."""
    sig_levels = [lvl for lvl in levels if lvl.signal is not None]
    for leaf in ex.leaves:
        key = tuple(lvl.code_index[ex.path[leaf][lvl.depth - 1]] for lvl in sig_levels)
        pos = [i for i, lvl in enumerate(sig_levels) if lvl.signal in cascade.readout.reads]
        if cascade.readout.table[tuple(key[i] for i in pos)] != ex.state_of_leaf(leaf):
            raise DecompositionError("the readout does not give the leaf's state")


def _check_directly(ver: Verification, cascade: Cascade, max_steps: int) -> None:
    """Part of check 5 of :func:`verify_cascade`: encode/decode round trips, then a breadth-first
    search of the final cascade's configurations from every state's encoding, each step
    against the automaton, for at most ``max_steps`` steps."""
    a = cascade.automaton
    for q in range(a.n_states):
        if cascade.decode(cascade.encode(q)) != q:
            raise DecompositionError("encode/decode do not round-trip")
        ver.round_trips += 1
    seen = dict.fromkeys(cascade.encoding)
    queue = list(seen)
    steps = i = 0
    while i < len(queue) and steps < max_steps:
        c = queue[i]
        i += 1
        x = cascade.decode(c)
        for letter in range(a.n_symbols):
            nc = cascade.step(c, letter)
            steps += 1
            if cascade.decode(nc) != a.maps[letter][x]:
                raise DecompositionError("the cascade does not emulate the automaton (direct check)")
            if nc not in seen:
                seen[nc] = None
                queue.append(nc)
    ver.direct_configurations = i
    ver.direct_complete = i == len(queue)


def _check_random_words(ver: Verification, cascade: Cascade, seed: int, max_steps: int) -> None:
    """Part of check 5 of :func:`verify_cascade`: random words of 64 letters (about ``max_steps``
    steps in all) from the start state and from random states, against the automaton."""
    a = cascade.automaton
    rng = random.Random(seed)
    length = 64
    n_words = max(4, min(33, max_steps // length))
    starts = [a.start] + [rng.randrange(a.n_states) for _ in range(n_words - 1)]
    for s in starts:
        word = [rng.randrange(a.n_symbols) for _ in range(length)]
        if cascade.simulate(word, start=s) != a.run(word, start=s):
            raise DecompositionError("the cascade does not emulate the automaton on a random word")
        ver.random_steps += length


def _local_order(lvl: Level, name: str) -> int:
    names = [n for p in lvl.parts for n in p.names] + ([lvl.reset] if lvl.reset else [])
    return names.index(name)

