"""Krohn–Rhodes decomposition: automaton -> verified cascade of counters and resets.

Orchestration (the holonomy decomposition; docs/architecture.md):

1. semigroup analysis -- size under a budget, group?, letters merged by map;
2. holonomy decomposition (:mod:`compiler.automata.holonomy`, explored by
   :mod:`compiler.automata.exploration`) -- one level per depth of
   the subduction order, each a permutation-reset action on tiles, explored
   lazily over reachable coordinate prefixes;
3. refinement, level by level -- every class whose holonomy group H is
   non-trivial becomes "group then reset": H run on itself (left regular,
   g <- g·π on a permutation, identity on resets) as counter levels along its
   derived series (:mod:`compiler.automata.groups`), or kept whole as one ``group``
   component when H is not solvable; the level's tiles go into one reset unit
   which, on "reset to tile z" of class b, stores y = z·g_b^-1 so that the tile
   is always y·g_b (a *view*).  Classes with trivial H (counter-free parts)
   need only the reset unit.  Permutation automata are the one-level case
   (H = the automaton's group on the states); counter-free automata the case
   with no groups at all -- both fall out of the same code with no extra work
   (the plan of a level and its semantics: :mod:`compiler.automata.refine`);
4. tables -- every component's input as an explicit table over the reachable
   (pre-update upper signals, letter) keys, then dependencies minimised by
   dropping reads the table does not need (:mod:`compiler.automata.tables`; the
   level's tables are made here, :func:`_build_level`);
5. verification -- see :func:`~compiler.automata.decompose_checks.verify_cascade`;
   :func:`decompose` raises :class:`~compiler.automata.refine.DecompositionError`
   rather than return an unverified cascade.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import groups as G
from .cascade import Cascade, Component, HolonomyGroupInfo, Readout, View, assign_levels
from .decompose_checks import verify_cascade
from .errors import BudgetError
from .exploration import Exploration
from .holonomy import DEFAULT_CHAIN_BUDGET, DEFAULT_IMAGE_BUDGET, Holonomy, members
from .load import load_spec
from .refine import KEEP_ALL, GroupPart, Level, initial_local, level_actions, part_input, plan_level, reset_target
from .semigroup import LetterNormalisation, analyse_semigroup, normalise_letters
from .spec import Semiautomaton
from .tables import TableBudget, minimise, minimise_rows

DEFAULT_COUNT_BUDGET = 50_000
"""Largest semigroup whose size is counted; past it the size is reported as unknown."""

DEFAULT_TABLE_BUDGET = 600_000
"""Most table rows (all components, views and the readout together)."""

DIRECT_CHECK_BUDGET = 60_000
"""Component updates spent on the direct breadth-first check of the final cascade (steps times
components), and again on random words."""

LEVEL_CHECK_BUDGET = 300_000
"""Most (prefix, letter, local state) checks of the final tables, level by level (see :func:`verify_cascade`)."""


FINAL_MINIMISE_BUDGET = 2_000_000
"""Largest table (rows times reads) given a last whole-table minimisation pass; bigger ones keep
the reads found by minimising their factors (upper signals, then the level's own coordinates)."""


@dataclass(frozen=True)
class _Upper:
    """What a level's tables read above it: the upper signals (``reads``), each reachable upper
    prefix's values (``keys``, also as the matrix ``mat``) and the level's holonomy input per
    prefix and letter (``acts``)."""

    reads: tuple[str, ...]
    keys: list[tuple[int, ...]]
    mat: np.ndarray
    acts: list[list[object]]


def _group_components(part: GroupPart, d: int, up: _Upper, budget: TableBudget) -> list[Component]:
    """A class's group as components of level d: one ``group`` component when not solvable, else
    one counter per factor of its derived series, each increment a function of (input element,
    own upper coordinates) minimised on that small table, then spread over the upper rows."""
    outs = [[part.gs.index[part_input(part, act)] for act in acts] for acts in up.acts]
    ureads, rows = minimise_rows(up.reads, up.keys, up.mat, outs)
    rep = ",".join(map(str, members(part.block.rep)))
    role_group = f"{part.gs.name} on the {len(part.block.tiles)} tiles of {{{rep}}}"
    if not part.gs.solvable:
        budget.add(len(rows))
        return [Component(part.names[0], "group", part.gs.order, ureads, rows,
                          holonomy_level=d, role=f"non-solvable holonomy group {role_group}",
                          elements=part.gs.elements)]
    comps: list[Component] = []
    hs = sorted(set(rows.values()))
    for i, (s, e) in enumerate(part.slices):
        prefixes = sorted({c[:s] for c in part.unflat})
        own = tuple(part.names[:s])
        for k in range(e - s):
            local = {}
            for hidx in hs:
                h = part.gs.elements[hidx]
                for prefix in prefixes:
                    nested = [prefix[s2:e2] if e2 <= len(prefix) else (0,) * (e2 - s2)
                              for s2, e2 in part.slices]
                    local[(prefix, hidx)] = part.gs.increments(nested, h)[i][k]
            lreads, local = minimise(own, local)
            kept = sorted({pk for pk, _ in local})
            table: dict[tuple[tuple[int, ...], int], int | None] = {}
            for (ukey, a), hidx in rows.items():
                for pk in kept:
                    table[(ukey + pk, a)] = local[(pk, hidx)]
            budget.add(len(table))
            m = part.gs.levels[i].moduli[k]
            comps.append(Component(part.names[s + k], "counter", m, ureads + lreads, table, holonomy_level=d,
                                   role=f"derived level {i} (factor C{m}) of holonomy group {role_group}"))
    return comps


def _reset_component(lvl: Level, hol: Holonomy, up: _Upper, budget: TableBudget) -> Component:
    """The level's reset unit (named into ``lvl.reset``): on "reset to z" of class b it stores
    y = z·g_b^-1, reading the coordinates of class b's group only when some reset targets class b."""
    d = lvl.depth
    lvl.reset = f"h{d}.reset"
    outs = [[None if act == KEEP_ALL or isinstance(act, tuple) else act for act in acts]
            for acts in up.acts]
    ureads, rows = minimise_rows(up.reads, up.keys, up.mat, outs)
    targets = {lvl.block_of_value[z].index for z in rows.values() if z is not None and z != lvl.dummy}
    used = [pi for pi, part in enumerate(lvl.parts) if part.block.index in targets]
    names = tuple(n for pi in used for n in lvl.parts[pi].names)
    ident = [p.identity_coords for p in lvl.parts]
    zs = sorted({z for z in rows.values() if z is not None})
    local = {}
    for combo in itertools.product(*(list(lvl.parts[pi].unflat) for pi in used)):
        full = list(ident)
        for pi, c in zip(used, combo):
            full[pi] = c
        gk = tuple(itertools.chain.from_iterable(full))
        for z in zs:
            local[(tuple(itertools.chain.from_iterable(combo)), z)] = lvl.y_index[reset_target(lvl, gk, z)]
    lreads, local = minimise(names, local)
    kept = sorted({pk for pk, _ in local}) or [()]
    table = {}
    for (ukey, a), z in rows.items():
        for pk in kept:
            table[(ukey + pk, a)] = None if z is None else local[(pk, z)]
    budget.add(len(table))
    what = "tiles" if lvl.parts else "tiles (the level's value)"
    return Component(lvl.reset, "reset", len(lvl.ys), ureads + lreads, table, holonomy_level=d,
                     role=f"holonomy level {d}: {what} of {len(hol.level_blocks[d - 1])} class(es)"
                          + (", stored as y with tile = y·g" if lvl.parts else ""))


def _tile_view(lvl: Level, budget: TableBudget) -> list[View]:
    """The level's tile y·g as a view of its group coordinates and reset unit, with the codes its
    readers key on (``lvl.codes``); a level without groups has no view, its codes are its y's."""
    if not lvl.parts:
        lvl.codes = list(lvl.ys)
        lvl.code_index = dict(lvl.y_index)
        return []
    d = lvl.depth
    raw = {}
    for gk in lvl.gkeys():
        for y in lvl.ys:
            raw[(gk, y)] = lvl.tile(gk, y)
    lvl.codes = sorted(set(raw.values()))
    lvl.code_index = {v: i for i, v in enumerate(lvl.codes)}
    lvl.view = f"h{d}.tile"
    gnames = tuple(n for p in lvl.parts for n in p.names)
    reads = gnames + ((lvl.reset,) if lvl.reset else ())
    vt = {}
    for (gk, y), v in raw.items():
        vt[gk + ((lvl.y_index[y],) if lvl.reset else ())] = lvl.code_index[v]
    budget.add(len(vt))
    return [View(lvl.view, reads, vt, len(lvl.codes), d,
                 f"tile of holonomy level {d} (y·g of the reset value and the group coordinates)")]


def _build_level(lvl: Level, hol: Holonomy, ex: Exploration, letters: LetterNormalisation,
                 upper: list[Level], budget: TableBudget) -> tuple[list[Component], list[View]]:
    """The level's components and view, with tables factored through the holonomy input.

    Each component's input depends on the upper signals only through a small
    "reduced input" (its class's permutation, or the reset target), so the
    upper reads are minimised on the (node, letter) -> reduced input table
    first, then combined with the level's own coordinates.
    """
    d = lvl.depth
    up_levels = [u for u in upper if u.signal is not None]
    nodes = ex.level_nodes[d - 1]
    upkeys = [tuple(u.code_index[ex.path[n][u.depth - 1]] for u in up_levels) for n in nodes]
    up = _Upper(tuple(u.signal for u in up_levels if u.signal is not None), upkeys,
                np.asarray(upkeys, dtype=np.int64).reshape(len(nodes), len(up_levels)),
                [level_actions(ex, letters, d, n) for n in nodes])
    comps = [c for part in lvl.parts for c in _group_components(part, d, up, budget)]
    if len(lvl.ys) > 1:
        comps.append(_reset_component(lvl, hol, up, budget))
    return comps, _tile_view(lvl, budget)


def _orbits(gens: tuple, k: int) -> list[frozenset[int]]:
    """The orbit of each of ``k`` tiles under the permutations ``gens`` (one shared set per orbit)."""
    of: list[frozenset[int] | None] = [None] * k
    for t in range(k):
        if of[t] is not None:
            continue
        seen, queue = {t}, [t]
        while queue:
            u = queue.pop()
            for g in gens:
                if g[u] not in seen:
                    seen.add(g[u])
                    queue.append(g[u])
        orbit = frozenset(seen)
        for u in orbit:
            of[u] = orbit
    return [o for o in of if o is not None]


def view_floor(hol: Holonomy, ex: Exploration, depth: int) -> int:
    """A lower bound on the rows of level ``depth``'s tile view (:func:`_tile_view`), from the
    holonomy generators' orbits alone, before any group is analysed (:func:`plan_level`): the view
    has a row per (joint group element, stored value y); a group has at least as many elements as
    its largest orbit on the tiles (orbit-stabiliser), and the stored values include the whole
    orbit of every reset target in a class with a group.  Zero when the level has no group."""
    blocks = hol.level_blocks[depth - 1]
    if not any(b.generators for b in blocks):
        return 0
    joint, ys = 1, 0
    for b in blocks:
        targets = {act - b.offset for act in ex.actions[depth].values()
                   if isinstance(act, int) and b.offset <= act < b.offset + len(b.tiles)}
        if not b.generators:
            ys += len(targets)
            continue
        orbits = _orbits(b.generators, len(b.tiles))
        joint *= max(len(o) for o in orbits)
        ys += len(set().union(*(orbits[t] for t in targets)))
    return joint * max(ys, 1)


def decompose(automaton: Any, *, count_budget: int = DEFAULT_COUNT_BUDGET,
              image_budget: int = DEFAULT_IMAGE_BUDGET, chain_budget: int = DEFAULT_CHAIN_BUDGET,
              group_budget: int = G.DEFAULT_GROUP_BUDGET, table_budget: int = DEFAULT_TABLE_BUDGET,
              direct_budget: int = DIRECT_CHECK_BUDGET, level_budget: int = LEVEL_CHECK_BUDGET,
              seed: int = 0) -> Cascade:
    """Decompose an automaton (Semiautomaton, dict, JSON path or catalog name) into a verified cascade.

    Raises :class:`BudgetError` (one line) when any budget is exceeded: images,
    reachable coordinate prefixes (``chain_budget``), group order, table rows.
    The semigroup's size is counted up to ``count_budget`` and otherwise
    reported as unknown (the decomposition does not need it).
    """
    a: Semiautomaton = load_spec(automaton)
    letters = normalise_letters(a.maps)
    sg = analyse_semigroup(a.maps, a.n_states, count_budget, strict=False)
    hol = Holonomy(a.n_states, letters.maps, image_budget)
    ex = Exploration(hol, chain_budget)
    budget = TableBudget(table_budget)
    levels: list[Level] = []
    components: list[Component] = []
    views: list[View] = []
    for depth in range(1, hol.levels + 1):
        floor = view_floor(hol, ex, depth)
        if budget.used + floor > budget.limit:
            raise BudgetError(f"the cascade's tables need more than {budget.limit} rows (table budget): the tile "
                              f"view of holonomy level {depth} alone needs at least {floor:,} (its groups' orbits "
                              f"times the reset values), known before its groups are analysed; use the scan "
                              f"construction for this automaton")
        lvl = plan_level(hol, ex, depth, group_budget)
        comps, vs = _build_level(lvl, hol, ex, letters, levels, budget)
        levels.append(lvl)
        for c in comps:  # a last pass over the whole table, where that is cheap
            if len(c.table) * max(1, len(c.reads)) <= FINAL_MINIMISE_BUDGET:
                c.reads, c.table = minimise(c.reads, c.table)
        components.extend(comps)
        views.extend(vs)
    sig_levels = [lvl for lvl in levels if lvl.signal is not None]
    rt = {}
    for leaf in ex.leaves:
        rt[tuple(lvl.code_index[ex.path[leaf][lvl.depth - 1]] for lvl in sig_levels)] = ex.state_of_leaf(leaf)
    budget.add(len(rt))
    reads, rt = minimise(tuple(lvl.signal for lvl in sig_levels if lvl.signal is not None), rt, letter_keyed=False)
    readout = Readout(reads, rt)
    # Encodings: per state, each component's value.
    values_by_state: list[dict[str, int]] = []
    for q in range(a.n_states):
        vals: dict[str, int] = {}
        for lvl in levels:
            gk, y = initial_local(lvl, ex.encodings[q][lvl.depth - 1])
            names = [n for p in lvl.parts for n in p.names]
            vals.update(zip(names, gk))
            if lvl.reset:
                vals[lvl.reset] = lvl.y_index[y]
        values_by_state.append(vals)
    assign_levels(components, views)
    encoding = tuple(tuple(vals[c.name] for c in components) for vals in values_by_state)
    for c, v in zip(components, encoding[a.start]):
        c.initial = v
    infos = []
    for lvl in levels:
        for b in hol.level_blocks[lvl.depth - 1]:
            pi = lvl.part_of_block.get(b.index)
            gs = lvl.parts[pi].gs if pi is not None else None
            infos.append(HolonomyGroupInfo(
                lvl.depth, tuple(members(b.rep)), len(b.members), len(b.tiles),
                gs.order if gs else 1, gs.name if gs else "1", gs.solvable if gs else True,
                gs.derived_length if gs else 0))
    cascade = Cascade(a, components, views, readout, encoding, sg, letters, hol.levels, infos)
    cascade.verification = verify_cascade(cascade, ex, levels, seed, direct_budget, level_budget)
    return cascade
