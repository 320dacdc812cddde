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
value and every layer's code), a layer's walk the product of the walk below with that layer's
features -- and adds layers until every reachable configuration's last code names one state.  The
walk is the proof: a code that two reachable configurations with different states share is a
*conflict*.  A layer's reset features come from partitions of the reachable configurations: a
partition pi is a valid feature when every group of steps (c -> c', grouped by c''s code below)
is a reset (pi constant on the group's targets: flag the code, colour that block) or an identity
(pi(c') = pi(c) on the group: no flag).  Both are equalities, so the finest partition for a choice
per group is a union-find closure; for each conflicting pair a depth-first search over the choices
keeps the pair apart (the choice merging fewer blocks first, back to the latest open choice when
neither does), and its blocks are merged wherever no state is lost (:func:`_coarsen`).  Each
layer's new code is (the letter class, the set of states the walk finds with its key): the
knowledge stays as small as what the layer proves about the state.  Every layer is tried with and
without a yesterday feature, and the search keeps the :data:`BEAM` partial programs that leave the
fewest pairs of states apart (a layer that leaves as many, with no more codes, is dropped): the
shallowest program the beam reaches is the plan.

Refusals name what fails: a letter whose map cycles states (not aperiodic: no since program
exists), no partial program that a layer improves (the search's limit: an aperiodic automaton may
still be refused), or a budget -- every search bounded by :data:`MAX_WORK` elementary steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .spec import Semiautomaton
from .shares import share, share_text

MAX_LAYERS = 6
"""Most since layers a plan may have."""

MAX_CONFIGS = 50_000
"""Most (state, program memory) configurations one walk may visit (the program proof's bound too)."""

MAX_HEADS = 8
"""Most reset features (heads) one layer may keep (the first after pruning).  Each head is one more
input of the next lookup, and the certificate's float error bound grows with a lookup's inputs:
sf k = 6 on 64 letters, seed 0, has a 6-layer program that certifies with 8 heads a layer and is
refused at float32 with up to 14; the 90 generated sf languages of seeds 0-5 get programs of the same
depths with 6, 8 or 16."""

MAX_TRIES = 16
"""Most conflicting pairs one layer's search tries to separate (each try is a depth-first search
over every group's choice)."""

MAX_BACKTRACK = 16
"""Most choices one separation may revisit (the depth-first search's bound per conflicting pair)."""

BEAM = 4
"""Most partial programs the search keeps per depth."""

MAX_WORK = 8_000_000
"""Most elementary steps (union-find merges and finds, walk steps) one detection may take: the bound
on its cost, whatever the automaton (past it the refusal names the budget).  The generated sf
languages of benchmarks/starfree.py need at most 5.3M; a refusal at the budget takes about 2 CPU s."""

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


Walk = tuple[list[Config], list[tuple[int, int]]]
"""Every reachable configuration (breadth first from the start, BOS's first) and the steps between them."""


def _letters_walk(a: Semiautomaton, classes: list[int], reps: list[int], work: _Work) -> Walk:
    """The program of no layers beside the automaton: (state, (the letter's class,), ())."""
    order: list[Config] = [(a.start, (BOS,), ())]
    seen, edges, i = {order[0]: 0}, set(), 0
    while i < len(order):
        q = order[i][0]
        work.add(4 * len(reps))
        for x in reps:
            d = (a.maps[x][q], (classes[x],), ())
            j = seen.setdefault(d, len(order))
            if j == len(order):
                order.append(d)
            edges.add((i, j))
        i += 1
    return order, sorted(edges)


def _extend(walk: Walk, layer: _Layer, work: _Work) -> tuple[list[tuple[int, tuple[int, ...]]], list] | None:
    """The walk of the program with ``layer`` on top, as the product of the walk below with the layer's
    features: a node (configuration below, the features' values) steps along every step c -> d below,
    each reset feature taking its colour of d's top code when it flags it (the code below *at t*), the
    yesterday feature c's top code (the code below at t - 1).  None past :data:`MAX_CONFIGS`."""
    order, edges = walk
    after: list[list[int]] = [[] for _ in order]
    for c, d in edges:
        after[c].append(d)
    nodes = [(0, tuple(layer.inits) + ((BOS,) if layer.yesterday else ()))]
    seen, steps, i = {nodes[0]: 0}, [], 0
    memo: dict[tuple[tuple[int, ...], int, int], tuple[int, ...]] = {}
    while i < len(nodes):
        c, vals = nodes[i]
        work.add(4 + 4 * len(after[c]))
        y = order[c][1][-1] if layer.yesterday else BOS
        for d in after[c]:
            b = order[d][1][-1]
            new = memo.get((vals, b, y))
            if new is None:
                new = memo[(vals, b, y)] = (tuple(r.get(b, vals[j]) for j, r in enumerate(layer.resets))
                                             + ((y,) if layer.yesterday else ()))
            j = seen.get((d, new))
            if j is None:
                if len(nodes) >= MAX_CONFIGS:
                    return None
                j = seen[(d, new)] = len(nodes)
                nodes.append((d, new))
            steps.append((i, j))
        i += 1
    return nodes, steps


class _Budget(Exception):
    """The detection's work passed :data:`MAX_WORK`."""


class _Work:
    """A counter of elementary steps against :data:`MAX_WORK`."""

    def __init__(self) -> None:
        self.done = 0
        self.limit = MAX_WORK // share()  # a share of it where many automata are planned together

    def add(self, n: int) -> None:
        self.done += n
        if self.done > self.limit:
            raise _Budget


class _Blocks:
    """A union-find with undo (union by size, no path compression: a find is O(log n)), over the
    configurations: the partition a feature's choices force."""

    def __init__(self, n: int, work: _Work):
        self.parent, self.size, self.work = list(range(n)), [1] * n, work
        self.log: list[int] = []

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            x = self.parent[x]
        return x

    def merge(self, pairs: list[tuple[int, int]], p: int, r: int) -> tuple[bool, int]:
        """Merge every pair (stopping once p and r merge); whether p and r stay apart, and how many
        merges joined two blocks."""
        self.work.add(1 + 2 * len(pairs))
        parent, size, find = self.parent, self.size, self.find
        rp, rr, joined = find(p), find(r), 0
        for fx, fy in pairs:
            while parent[fx] != fx:  # find, inlined: most of the search's time is these walks
                fx = parent[fx]
            while parent[fy] != fy:
                fy = parent[fy]
            if fx == fy:
                continue
            if size[fx] > size[fy]:
                fx, fy = fy, fx
            parent[fx], size[fy] = fy, size[fy] + size[fx]
            self.log.append(fx)
            joined += 1
            rp, rr = (fy if rp == fx else rp), (fy if rr == fx else rr)
            if rp == rr:
                return False, joined
        return True, joined

    def undo(self, mark: int) -> None:
        """Undo the merges back to ``mark`` (a length of the log)."""
        while len(self.log) > mark:
            fx = self.log.pop()
            fy = self.parent[fx]
            self.parent[fx], self.size[fy] = fx, self.size[fy] - self.size[fx]

    def labels(self) -> list[int]:
        roots: dict[int, int] = {}
        return [roots.setdefault(self.find(x), len(roots)) for x in range(len(self.parent))]


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


def _options(uf: _Blocks, reset: list, ident: list, p: int, r: int) -> list[bool]:
    """A group's choices that keep p and r apart (True: reset, False: identity), the one merging
    fewer blocks first (a reset on a tie)."""
    mark, opts = len(uf.log), []
    for is_reset, pairs in ((True, reset), (False, ident)):
        ok, joined = uf.merge(pairs, p, r)
        uf.undo(mark)
        if ok:
            opts.append((joined, not is_reset))
    return [not x for _, x in sorted(opts)]


def _separate(n: int, cons: list[tuple[Any, list, list]], p: int, r: int,
              work: _Work) -> tuple[list[int], set] | None:
    """A valid partition keeping configurations p and r apart, and the groups chosen as resets; None
    when none is found.  Depth first over the groups' choices (reset or identity), the one merging
    fewer blocks first, back to the latest open choice when neither keeps p and r apart, at most
    :data:`MAX_BACKTRACK` times."""
    uf, choice = _Blocks(n, work), [False] * len(cons)
    stack: list[tuple[int, int]] = []  # (group index, log mark) of choices whose other option is open
    i, backs = 0, 0
    while i < len(cons):
        opts = _options(uf, cons[i][1], cons[i][2], p, r)
        if not opts:
            if not stack or backs >= MAX_BACKTRACK:
                return None
            backs += 1
            i, mark = stack.pop()
            uf.undo(mark)
            opts = [not choice[i]]
        elif len(opts) == 2:
            stack.append((i, len(uf.log)))
        choice[i] = opts[0]
        uf.merge(cons[i][1] if choice[i] else cons[i][2], p, r)
        i += 1
    return uf.labels(), {cons[j][0] for j in range(len(cons)) if choice[j]}


def reset_features(order: list[Config], edges: list[tuple[int, int]], targets: list[tuple[int, int]],
                   work: _Work) -> list[tuple[list[int], dict[Any, int]]]:
    """Valid partitions (each with its flag table: group code -> colour) separating as many of the
    ``targets`` as :func:`_separate` can (at most :data:`MAX_TRIES` tries), then pruned to those whose
    meet separates as many."""
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
        found.append(_coarsen(order, pi, flags, work))
    return _prune(found, targets, work)


def _coarsen(order: list[Config], pi: list[int], flags: dict[Any, int],
             work: _Work) -> tuple[list[int], dict[Any, int]]:
    """The partition with blocks merged, as few colours as a greedy colouring finds: two blocks share a
    colour when on every top code below they hold configurations of one state, the same.  Any
    coarsening of a valid partition is valid (equalities stay equalities), and this one tells apart
    every two configurations with one code below and two states that it did, so every key of the
    layer finds the same states: the layer's codes do not change, its heads copy smaller values
    (their error and the next lookup's step units scale with the largest).  BOS's block is colour 0."""
    sig: dict[int, dict[Any, int]] = {}
    for c, (q, codes, _) in enumerate(order):
        s = sig.setdefault(pi[c], {})
        s[codes[-1]] = q if s.get(codes[-1], q) == q else -1
    merged: list[dict[Any, int]] = []
    colour = {}
    for b in sorted(sig, key=lambda b: (b != pi[0], b)):
        work.add(1 + len(merged) * len(sig[b]))
        for i, m in enumerate(merged):
            if all(q >= 0 and m.get(g, q) == q for g, q in sig[b].items()):
                m.update(sig[b])
                colour[b] = i
                break
        else:
            colour[b] = len(merged)
            merged.append({g: q for g, q in sig[b].items()})
    return [colour[b] for b in pi], {g: colour[c] for g, c in flags.items()}


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


def _knowledge(order: list[Config]) -> dict[int, frozenset[int]]:
    """Each reachable top code's states (BOS's aside): what the program knows of the state."""
    seen: dict[int, set[int]] = {}
    for q, codes, _ in order:
        if codes[-1] != BOS:
            seen.setdefault(codes[-1], set()).add(q)
    return {c: frozenset(qs) for c, qs in seen.items()}


def _tabulate(walk: Walk, layer: _Layer, work: _Work) -> tuple[Walk, bool] | None:
    """The walk with ``layer`` on top, its code table found: each reachable key's code is (letter
    class, the states the walk finds with that key), numbered 1.. in order; in a layer whose keys
    each name one state the code is that state (the last layer).  And whether it is the last."""
    got = _extend(walk, layer, work)
    if got is None:
        return None
    order, (nodes, steps) = walk[0], got
    found: dict[tuple[int, ...], tuple[int, set[int]]] = {}
    for c, vals in nodes[1:]:
        q, codes, _ = order[c]
        found.setdefault((codes[-1], *vals), (codes[0], set()))[1].add(q)
    last = all(len(s) == 1 for _, s in found.values())
    if last:
        layer.table = {k: next(iter(s)) for k, (_, s) in found.items()}
    else:
        names = {v: i + 1 for i, v in enumerate(sorted({(c, tuple(sorted(s))) for c, s in found.values()}))}
        layer.table = {k: names[(c, tuple(sorted(s)))] for k, (c, s) in found.items()}
    table = layer.table
    work.add(len(nodes))
    out = [(order[c][0], order[c][1] + (table[(order[c][1][-1], *vals)] if i else BOS,), order[c][2] + (vals,))
           for i, (c, vals) in enumerate(nodes)]
    return (out, steps), last


def _freeze(a: Semiautomaton, classes: list[int], program: list[_Layer], configurations: int) -> StarFreePlan:
    layers = []
    for layer in program:
        assert layer.table is not None
        keys = sorted(layer.table)
        colours = tuple(max([layer_init] + list(r.values())) + 1 for r, layer_init in zip(layer.resets, layer.inits))
        layers.append(SinceLayer(tuple(tuple(sorted(r.items())) for r in layer.resets), tuple(layer.inits), colours,
                                 layer.yesterday, tuple(keys), tuple(layer.table[k] for k in keys)))
    return StarFreePlan(len(a.alphabet), len(a.states), a.start, tuple(classes), tuple(layers), configurations)


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
        return None, f"the since program's search needs more than {MAX_WORK // share():,} steps (budget{share_text()})"


@dataclass
class _Node:
    """A partial program in the beam: its layers, its walk, its score (:func:`_score`)."""

    layers: list[_Layer]
    walk: Walk
    score: tuple[int, int]


def _score(order: list[Config]) -> tuple[int, int]:
    """How much a partial program leaves open (smaller is better): the pairs of states some top code
    does not tell apart (counted with one bit mask per state, not enumerated), then the number of
    top codes, negated (more codes keep more of the past for the layers above)."""
    know = _knowledge(order)
    confused: dict[int, int] = {}
    for qs in set(know.values()):
        mask = sum(1 << q for q in qs)
        for q in qs:
            confused[q] = confused.get(q, 0) | mask
    return sum(m.bit_count() - 1 for m in confused.values()) // 2, -len(know)


def _search(a: Semiautomaton) -> tuple[StarFreePlan | None, str]:
    """:func:`detect`'s search, layer by layer, keeping the :data:`BEAM` most knowing partial programs
    (raises :class:`_Budget` past :data:`MAX_WORK`)."""
    classes, reps = letter_classes(a)
    work = _Work()
    walked = _letters_walk(a, classes, reps, work)
    beam, why = [_Node([], walked, _score(walked[0]))], ""
    for depth in range(MAX_LAYERS):
        nxt: list[_Node] = []
        for node in beam:
            order, edges = node.walk
            features = reset_features(order, edges, conflicts(order), work)
            resets, inits = [flags for _, flags in features], [pi[0] for pi, _ in features]
            for yesterday in (False, True):
                layer = _Layer(resets, inits, yesterday)
                got = _tabulate(node.walk, layer, work)
                if got is None:
                    why = f"more than {MAX_CONFIGS:,} configurations"
                elif got[1]:
                    return _freeze(a, classes, [*node.layers, layer], len(got[0][0])), ""
                elif _score(got[0][0]) < node.score:
                    nxt.append(_Node([*node.layers, layer], got[0], _score(got[0][0])))
        if not nxt:
            if why:
                return None, f"the since program's search needs {why} (budget)"
            pair = sorted(min((s for s in _knowledge(beam[0].walk[0]).values() if len(s) > 1), key=sorted))[:2]
            return None, (f"no since layer tells states {a.states[pair[0]]!r} and {a.states[pair[1]]!r} apart after "
                          f"{depth} layer(s) (the search of reset features found none)")
        nxt.sort(key=lambda n: (n.score, len(n.walk[0])))
        beam = nxt[:BEAM]
    return None, f"the since program's search needs more than {MAX_LAYERS} layers (budget)"
