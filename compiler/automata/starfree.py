"""Since programs: a short cascade of "latest reset" levels found from the automaton itself.

A *since program* of L layers computes, at every position t, a knowledge code S_i(t) per layer
(S_0(t) = the class of the letter w_t: letters with equal maps share one), from the codes below:

* a *reset feature* (one per most-recent-flag head) reads S_{i-1} at every position s <= t: a
  table F (knowledge code -> colour) flags the codes it lists, and the feature's value at t is
  F(S_{i-1}(s)) at the latest flagged s <= t (its initial colour when none): past LTL's
  "f since g" is such a feature (flag g or not f, colour g);
* a *yesterday feature* (an offset-1 fetch, LTL's Y) is S_{i-1}(t-1) (0 at t = 1);
* S_i(t) is a table of (S_{i-1}(t), the layer's features at t).

The last layer's table is the automaton's state.  Detection (:func:`detect`) runs the program
beside the automaton -- a breadth-first walk over (state, the program's memory: every feature's
value and every layer's code) -- and adds layers until every reachable configuration's last code
names one state.  The walk is the proof: a code that two reachable configurations with different
states share is a *conflict*.  A layer's reset features come from partitions of the reachable
configurations: a partition pi is a valid feature when every group of steps (c -> c', grouped by
c''s code below) is a reset (pi constant on the group's targets: flag the code, colour that
block) or an identity (pi(c') = pi(c) on the group: no flag).  Both are equalities, so the finest
partition for a choice per group is a union-find closure; for each conflicting pair a greedy
choice keeps the pair apart (a reset where that and the identity both do, whichever merges
fewer).  A yesterday feature is added when the reset features alone do not resolve every
conflict.  Each layer's new code is (the letter class, the set of states the walk finds with its
key): the knowledge stays as small as what the layer proves about the state.

Refusals name what fails: a letter whose map cycles states (not aperiodic: no since program
exists), a layer that separates nothing more (the greedy search's limit), or a budget.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .spec import Semiautomaton

MAX_LAYERS = 6
"""Most since layers a plan may have."""

MAX_CONFIGS = 50_000
"""Most (state, program memory) configurations one walk may visit (the program proof's bound too)."""

MAX_HEADS = 16
"""Most reset features (heads) one layer may keep."""

MAX_TRIES = 48
"""Most conflicting pairs one layer's greedy search tries to separate (each try is a union-find
pass over every group): the search's cost bound."""

MAX_WORK = 1_200_000
"""Most elementary steps (union-find merges, parent entries copied, walk steps) one detection may
take: the bound on its cost, whatever the automaton (past it the refusal names the budget)."""

BOS = 0
"""Every knowledge code's value at BOS (and a yesterday feature's at t = 1)."""


@dataclass(frozen=True)
class SinceLayer:
    """One layer of a since program.

    resets: per reset feature, the flagged codes of the layer below and their colours, sorted.
    inits: per reset feature, its value at BOS.  colours: per reset feature, how many colours.
    yesterday: whether the layer fetches the code below at t - 1.
    keys: the reachable (code below, the reset features' values..., the yesterday value if any).
    values: each key's new code (1-based), or in the last layer the automaton's state.
    """

    resets: tuple[tuple[tuple[int, int], ...], ...]
    inits: tuple[int, ...]
    colours: tuple[int, ...]
    yesterday: bool
    keys: tuple[tuple[int, ...], ...]
    values: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"resets": [[list(p) for p in r] for r in self.resets], "inits": list(self.inits),
                "colours": list(self.colours), "yesterday": self.yesterday, "keys": [list(k) for k in self.keys],
                "values": list(self.values)}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> SinceLayer:
        return SinceLayer(tuple(tuple((int(a), int(b)) for a, b in r) for r in d["resets"]),
                          tuple(int(v) for v in d["inits"]), tuple(int(v) for v in d["colours"]),
                          bool(d["yesterday"]), tuple(tuple(int(v) for v in k) for k in d["keys"]),
                          tuple(int(v) for v in d["values"]))


@dataclass(frozen=True)
class StarFreePlan:
    """A since program proved by the walk from ``start``: letter classes (1-based, per letter) and
    the layers; ``codes[i]`` how many codes layer i writes (``codes[0]``: the letter classes)."""

    n_symbols: int
    n_states: int
    start: int
    letter_class: tuple[int, ...]
    layers: tuple[SinceLayer, ...]
    configurations: int

    @property
    def codes(self) -> tuple[int, ...]:
        """Codes written per level (0 is BOS's, not counted): letter classes, then each layer's."""
        out = [max(self.letter_class)]
        for layer in self.layers[:-1]:
            out.append(max(layer.values))
        return tuple(out)

    @property
    def depth(self) -> int:
        return len(self.layers)

    def to_dict(self) -> dict[str, Any]:
        return {"n_symbols": self.n_symbols, "n_states": self.n_states, "start": self.start,
                "letter_class": list(self.letter_class), "layers": [x.to_dict() for x in self.layers],
                "configurations": self.configurations}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> StarFreePlan:
        return StarFreePlan(int(d["n_symbols"]), int(d["n_states"]), int(d["start"]),
                            tuple(int(c) for c in d["letter_class"]),
                            tuple(SinceLayer.from_dict(x) for x in d["layers"]), int(d["configurations"]))


# --- the program's semantics, as the walk runs it ---------------------------------------------

Config = tuple[int, tuple[int, ...], tuple[tuple[int, ...], ...]]
"""(state, codes per level, per layer the features' values (resets, then yesterday))."""


@dataclass
class _Layer:
    """A layer while it is searched: reset tables as dicts, the code table possibly not yet known."""

    resets: list[dict[int, int]]
    inits: list[int]
    yesterday: bool
    table: dict[tuple[int, ...], int] | None = None


class _Program:
    """The since program under construction, stepped beside the automaton."""

    def __init__(self, a: Semiautomaton, classes: list[int], reps: list[int], work: _Work):
        self.a, self.classes, self.reps, self.work = a, classes, reps, work
        self.layers: list[_Layer] = []

    def initial(self) -> Config:
        feats = tuple(tuple(x.inits) + ((BOS,) if x.yesterday else ()) for x in self.layers)
        return self.a.start, (BOS,) * (len(self.layers) + 1), feats

    def step(self, c: Config, letter: int) -> Config:
        """Read ``letter``: each layer's reset features see the code below *at t* (after the update),
        the yesterday feature the code below at t - 1; the code is the layer's table (the raw key
        while the layer's table is being found)."""
        q, codes, feats = c
        new_codes: list[Any] = [self.classes[letter]]
        new_feats = []
        for i, layer in enumerate(self.layers):
            below = new_codes[i]
            vals = tuple(r.get(below, feats[i][j]) for j, r in enumerate(layer.resets))
            if layer.yesterday:
                vals += (codes[i],)
            new_feats.append(vals)
            key = (below, *vals)
            new_codes.append(layer.table.get(key, -1) if layer.table is not None else key)
        return self.a.maps[letter][q], tuple(new_codes), tuple(new_feats)

    def walk(self) -> tuple[list[Config], list[tuple[int, int]]] | None:
        """Every reachable configuration (breadth first from the start) and the steps between them;
        None past :data:`MAX_CONFIGS`."""
        c0 = self.initial()
        seen = {c0: 0}
        order, todo, edges = [c0], deque([c0]), []
        while todo:
            c = todo.popleft()
            self.work.add(4 * len(self.reps) * (len(self.layers) + 1))  # a step costs about four merges
            for letter in self.reps:
                d = self.step(c, letter)
                if d not in seen:
                    if len(seen) >= MAX_CONFIGS:
                        return None
                    seen[d] = len(order)
                    order.append(d)
                    todo.append(d)
                edges.append((seen[c], seen[d]))
        return order, edges


class _Budget(Exception):
    """The detection's work passed :data:`MAX_WORK`."""


class _Work:
    """A counter of elementary steps against :data:`MAX_WORK`."""

    def __init__(self) -> None:
        self.done = 0

    def add(self, n: int) -> None:
        self.done += n
        if self.done > MAX_WORK:
            raise _Budget


def _find(parent: list[int], x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _merged(pairs: list[tuple[int, int]], parent: list[int], work: _Work) -> tuple[list[int], int]:
    """A copy of the union-find ``parent`` with every pair merged, and how many merges joined two blocks."""
    work.add(len(parent) // 8 + len(pairs))
    out, joined = parent[:], 0
    for x, y in pairs:
        fx, fy = _find(out, x), _find(out, y)
        if fx != fy:
            out[fx] = fy
            joined += 1
    return out, joined


def _blocks(parent: list[int]) -> list[int]:
    roots: dict[int, int] = {}
    return [roots.setdefault(_find(parent, x), len(roots)) for x in range(len(parent))]


def conflicts(order: list[Config]) -> list[tuple[int, int]]:
    """Pairs of reachable configurations (indices) with one top code and two states (BOS's aside)."""
    seen: dict[Any, dict[int, int]] = {}
    for i, (q, codes, _) in enumerate(order):
        if codes[-1] != BOS:
            seen.setdefault(codes[-1], {}).setdefault(q, i)
    return [(min(v.values()), x) for v in seen.values() for x in sorted(v.values())[1:]]


def _groups(order: list[Config], edges: list[tuple[int, int]]) -> dict[Any, list[tuple[int, int]]]:
    """The steps grouped by their target's top code: a reset feature flags a whole group or none."""
    groups: dict[Any, list[tuple[int, int]]] = {}
    for c, d in edges:
        groups.setdefault(order[d][1][-1], []).append((c, d))
    return groups


def _separate(n: int, cons: list[tuple[Any, list, list]], p: int, r: int,
              work: _Work) -> tuple[list[int], set] | None:
    """A valid partition keeping configurations p and r apart, greedily, and the groups chosen as
    resets; None when the greedy choice merges them."""
    parent, resets = list(range(n)), set()
    for g, reset, ident in cons:
        (pr, jr), (pi, ji) = _merged(reset, parent, work), _merged(ident, parent, work)
        ok_r, ok_i = _find(pr, p) != _find(pr, r), _find(pi, p) != _find(pi, r)
        if ok_r and ok_i:
            ok_r = jr <= ji
            ok_i = not ok_r
        if ok_r:
            parent = pr
            resets.add(g)
        elif ok_i:
            parent = pi
        else:
            return None
    return _blocks(parent), resets


def reset_features(order: list[Config], edges: list[tuple[int, int]], targets: list[tuple[int, int]],
                   work: _Work) -> list[tuple[list[int], dict[Any, int]]]:
    """Valid partitions (each with its flag table: group code -> colour) separating as many of the
    ``targets`` as the greedy search can, then pruned to those whose meet separates as many."""
    n = len(order)
    work.add(len(edges) + len(targets))
    groups = _groups(order, edges)
    cons = []
    for g, steps in groups.items():
        if all(c == d for c, d in steps):
            continue
        images = sorted({d for _, d in steps})
        cons.append((g, [(images[0], x) for x in images[1:]], [(c, d) for c, d in steps if c != d]))
    found: list[tuple[list[int], dict[Any, int]]] = []
    tries = 0
    for p, r in targets:
        if tries >= MAX_TRIES:
            break
        if any(pi[p] != pi[r] for pi, _ in found):
            continue
        tries += 1
        got = _separate(n, cons, p, r, work)
        if got is None:
            continue
        pi, chosen = got
        flags = {}
        for g, steps in groups.items():
            colours = {pi[d] for _, d in steps}
            if len(colours) == 1 and (g in chosen or any(pi[c] != pi[d] for c, d in steps)):
                flags[g] = colours.pop()
        found.append((pi, flags))
    return _prune(found, targets, work)


def _prune(found: list[tuple[list[int], dict[Any, int]]], targets: list[tuple[int, int]],
           work: _Work) -> list[tuple[list[int], dict[Any, int]]]:
    """Drop a feature (last first) when the others still separate every target it helps with."""
    def separated(fs: list) -> int:
        work.add(len(targets) * max(1, len(fs)))
        return sum(any(pi[p] != pi[r] for pi, _ in fs) for p, r in targets)
    keep, full = list(found), separated(found)
    for f in reversed(found):
        rest = [g for g in keep if g is not f]
        if separated(rest) == full:
            keep = rest
    return keep[:MAX_HEADS]


# --- detection ----------------------------------------------------------------------------------


def letter_classes(a: Semiautomaton) -> tuple[list[int], list[int]]:
    """Each letter's class (1-based: letters with one map share it) and a representative per class."""
    first: dict[tuple[int, ...], int] = {}
    classes = [first.setdefault(tuple(m), len(first) + 1) for m in a.maps]
    reps = [classes.index(c) for c in range(1, len(first) + 1)]
    return classes, reps


def cycling_letter(a: Semiautomaton) -> tuple[int, int] | None:
    """A letter and a state on a cycle of length >= 2 of that letter's map (the map is not aperiodic:
    no since program, no star-free language), or None.  m^N with N >= n (by squaring) sends every
    state onto its cycle; the map is aperiodic iff m fixes every such image."""
    n = len(a.states)
    for x, m in enumerate(a.maps):
        power, steps = list(m), 1
        while steps < n:
            power = [power[p] for p in power]
            steps *= 2
        for p in set(power):
            if m[p] != p:
                return x, p
    return None


def _confusable(order: list[Config]) -> set[tuple[int, int]]:
    """The pairs of states some reachable top code does not tell apart."""
    seen: dict[Any, set[int]] = {}
    for q, codes, _ in order:
        if codes[-1] != BOS:
            seen.setdefault(codes[-1], set()).add(q)
    return {(p, r) for qs in seen.values() for p in qs for r in qs if p < r}


def _tabulate(prog: _Program, layer: _Layer) -> tuple[list[Config], list[tuple[int, int]], bool] | None:
    """Add ``layer`` and give it its code table: each reachable key's code is (letter class, the states
    the walk finds with that key), numbered 1.. in order; in a layer whose keys each name one state
    the code is that state (the last layer).  The walk again, with the table; and whether it is the last."""
    prog.layers.append(layer)
    raw = prog.walk()
    if raw is None:
        return None
    found: dict[Any, tuple[int, set[int]]] = {}
    for q, codes, _ in raw[0]:
        if codes[-2] != BOS:
            found.setdefault(codes[-1], (codes[0], set()))[1].add(q)
    last = all(len(s) == 1 for _, s in found.values())
    if last:
        layer.table = {k: next(iter(s)) for k, (_, s) in found.items()}
        return raw[0], raw[1], True
    names = {v: i + 1 for i, v in enumerate(sorted({(c, tuple(sorted(s))) for c, s in found.values()}))}
    layer.table = {k: names[(c, tuple(sorted(s)))] for k, (c, s) in found.items()}
    walked = prog.walk()
    return None if walked is None else (walked[0], walked[1], False)


def _freeze(prog: _Program, configurations: int) -> StarFreePlan:
    a = prog.a
    layers = []
    for layer in prog.layers:
        assert layer.table is not None
        keys = sorted(layer.table)
        colours = tuple(max([layer_init] + list(r.values())) + 1 for r, layer_init in zip(layer.resets, layer.inits))
        layers.append(SinceLayer(tuple(tuple(sorted(r.items())) for r in layer.resets), tuple(layer.inits), colours,
                                 layer.yesterday, tuple(keys), tuple(layer.table[k] for k in keys)))
    return StarFreePlan(len(a.alphabet), len(a.states), a.start, tuple(prog.classes), tuple(layers), configurations)


def detect(a: Semiautomaton) -> tuple[StarFreePlan | None, str]:
    """A since program whose last code is the state at every position, from ``a``'s start, or None
    and why not (module docstring)."""
    cyc = cycling_letter(a)
    if cyc is not None:
        return None, (f"letter {a.alphabet[cyc[0]]!r} moves state {a.states[cyc[1]]!r} round a cycle of length >= 2: "
                      f"not aperiodic (no star-free language)")
    try:
        return _search(a)
    except _Budget:
        return None, f"the since program's search needs more than {MAX_WORK:,} steps (budget)"


def _search(a: Semiautomaton) -> tuple[StarFreePlan | None, str]:
    """:func:`detect`'s layer-by-layer search (raises :class:`_Budget` past :data:`MAX_WORK`)."""
    classes, reps = letter_classes(a)
    prog = _Program(a, classes, reps, _Work())
    walked = prog.walk()
    for _ in range(MAX_LAYERS):
        if walked is None:
            break
        order, edges = walked[0], walked[1]
        features = reset_features(order, edges, conflicts(order), prog.work)
        resets = [flags for _, flags in features]
        inits = [pi[0] for pi, _ in features]
        got = _tabulate(prog, _Layer(resets, inits, False))
        if got is not None and got[2]:
            return _freeze(prog, len(got[0])), ""
        prog.layers.pop()
        got = _tabulate(prog, _Layer(resets, inits, True))
        if got is None:
            break
        if got[2]:
            return _freeze(prog, len(got[0])), ""
        if not _confusable(got[0]) < _confusable(order) and len({c[1][-1] for c in got[0]}) <= len(
                {c[1][-1] for c in order}):
            pair = sorted(_confusable(got[0]))[0]
            return None, (f"no since layer tells states {a.states[pair[0]]!r} and {a.states[pair[1]]!r} apart after "
                          f"{len(prog.layers) - 1} layer(s) (the greedy search of reset features found none)")
        walked = (got[0], got[1])
    if walked is None or len(prog.layers) >= MAX_LAYERS:
        what = f"more than {MAX_CONFIGS:,} configurations" if walked is None else f"more than {MAX_LAYERS} layers"
        return None, f"the since program's search needs {what} (budget)"
    return None, "the since program's search stopped"
