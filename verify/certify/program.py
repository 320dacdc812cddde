"""The second half of a certificate: the declared program computes the automaton.

The weights are proved to run the declared program (the obligations, :mod:`.certificate`);
this module proves that the program's readout is the automaton's state (or label) at every
position of every input up to max_len -- every legal input, for a partial automaton -- from
the obligations and the spec stored in the checkpoint alone.  No construction or decomposer
code is trusted: not the plan's tables, not the cascade.

Method (the semantics of each kind: :mod:`.semantics`).  The program carries, from position to
position, a finite *memory*: each head's (a window of codes, a latched code, a residue of a
sum, a bit) and, for a scan, the prefix's composed map.  Its step at position t is a function
of (memory, letter, clock(t)): the clock is t until every head's keys keep one form and the
positional features read (a phase) repeat with a period, then the place in that period.  So
the triples (automaton state, memory, clock) that inputs of length <= max_len reach are found by
breadth-first search, and at each the program's readout must be the automaton's.  Breadth-first
order makes the first failure a shortest input on which program and automaton differ.  The
search also checks the program's own claims (:class:`~constructions.obligations.Joint`, a
promise's claims), which the weight checker relies on.

The scan's lemma (Theorem 10): when the letters embed maps on m points (integer codes in
0..m-1) with BOS the identity, and layer l = 1..L fetches that subspace at offsets t - 2^(l-1)
(BOS below 1) and composes f(g(q)) into it (the last layer into either subspace), then after
layer l it holds the composition of the letters' maps over positions (t - 2^l, t] (by induction:
the fetched window ends where the own one begins, and BOS's identity pads positions below 1);
with 2^L >= max_len that is the prefix's map.  The program's memory is then that map, on the
points something reads, and the window maps of the inner layers are never read (a read of one is
not covered).

The latch lemma (:func:`_latch`): a bounded stack's error sink keeps an exact depth that grows
with max_len; once its "some error so far" bit is set the readout is fixed for good, and the
memory collapses to one settled value.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

import numpy as np

from compiler.automata.moore import reachable_states
from compiler.automata.spec import Semiautomaton, from_dict
from constructions.labels import readout_of
from constructions.model import CompiledTransformer
from constructions.obligations import Compose, Fetch, Layer, Match, Obligations, Races, offset_keys

from .latch import Claims, latch
from .memo import HeadCache, Numbers, StepCache
from .semantics import (HEADS, OPAQUE, Context, Env, Head, NotCovered, ProgramError, Special, add, integers, mark_far,
                        read, reads_of, run_mlp)
from .state import CertificateFailure, arrays
from .residues import canonical_memory, live_heads, residue_groups
from .walk import walk_heads
from .windows import canonical_windows, window_settings

NODE_BUDGET = 50_000
"""Largest number of (automaton state, program memory) pairs the search explores."""
RECENCY_CODES = 8
"""Largest number of key codes the recency heads outside the walk's lemmas (:mod:`.walk`) keep
ranks for, over all their keys together: their memory is an order of last visits, which grows
about factorially with the codes."""


@dataclass(frozen=True)
class Chain:
    """A scan (the module docstring's lemma): ``maps`` holds the letters' maps, ``fetched`` the
    fetched windows, ``composes`` the layers' compositions; the last composes ``into``."""

    maps: str
    fetched: str
    composes: tuple[Compose, ...]
    heads: tuple[Fetch, ...]
    letters: tuple[tuple[int, ...], ...]
    points: tuple[int, ...]
    """The points whose images the program reads (the natural readout: q0's alone): the prefix's
    map is tracked on them only -- f then a letter's map sends x to letter[f(x)], on the same x."""


def _composes(layer: Layer) -> list[Compose]:
    """The compositions of one layer's MLP (alone, beside others, or before fused steps)."""
    return [o for o in layer.mlp_leaves() if isinstance(o, Compose)]


def _chains(ob: Obligations, T: int) -> list[Chain]:
    """Every scan in the program, each checked against the lemma's conditions (NotCovered names
    the one that fails)."""
    groups: dict[str, list[tuple[int, Compose]]] = {}
    for l, layer in enumerate(ob.layers):
        for c in _composes(layer):
            groups.setdefault(c.maps, []).append((l, c))
    chains = []
    for maps, found in groups.items():
        composes = tuple(c for _, c in found)
        fetched, L = composes[0].fetched, len(found)
        where = f"the composition into {maps!r}"
        if [l for l, _ in found] != list(range(L)) or any(c.fetched != fetched for c in composes):
            raise NotCovered(f"{where} (its compositions are not in layers 1..L in a row)")
        if any(c.into != maps for c in composes[:-1]) or composes[-1].into not in (maps, fetched):
            raise NotCovered(f"{where} (an inner layer composes into {fetched!r})")
        if 2 ** L < T:
            raise NotCovered(f"{where} ({L} doublings cover 2^{L} < max_len {T} positions)")
        heads = []
        for l in range(L):
            hs = [f for f in ob.layers[l].fetches if isinstance(f, Fetch) and f.src == maps and f.dst == fetched]
            if len(hs) != 1 or not np.array_equal(np.asarray(hs[0].key), offset_keys(T, 2 ** l)):
                raise NotCovered(f"{where} (layer {l + 1} does not fetch it at t - {2 ** l})")
            heads.append(hs[0])
        rows = ob.embedding.codes.get(maps), ob.embedding.codes.get(fetched)
        if rows[0] is None or rows[1] is None or np.any(np.asarray(rows[1]) != 0):
            raise NotCovered(f"{where} (its maps or fetched maps are not embedded, or fetched is not 0)")
        F = np.asarray(rows[0], dtype=np.float64)
        m = F.shape[1]
        if not np.array_equal(F[-1], np.arange(m)) or np.any((F != np.round(F)) | (F < 0) | (F >= m)):
            raise NotCovered(f"{where} (BOS's map is not the identity, or a letter's is not a map on {m} points)")
        chains.append(Chain(maps, fetched, composes, tuple(heads),
                            tuple(tuple(int(v) for v in row) for row in F[:-1]), _points_read(ob, composes, m)))
    return chains


def _points_read(ob: Obligations, composes: tuple[Compose, ...], m: int) -> tuple[int, ...]:
    """Which points of a scan's result anything but its own compositions reads (all, where a
    reader takes the whole map)."""
    into = composes[-1].into
    pairs = [p for layer in ob.layers for x in (*layer.fetches, layer.mlp) if x is not None for p in reads_of(x)]
    names = [n for n, r in pairs if r not in composes] + [p for n in ob.readout.reads for p in n.split(" + ")]
    points = set()
    for n in names:
        if n == into:
            return tuple(range(m))
        if n.startswith(into + "[") and n.endswith("]"):
            points.add(int(n[len(into) + 1 : -1]))
    return tuple(sorted(points))


@dataclass
class Program:
    """The declared program as a machine on memories (module docstring)."""

    ob: Obligations
    T: int
    chains: list[Chain]
    heads: list[list[Head | None]]  # per layer, per fetch: its semantics (None: a scan's fetch)
    stable: int
    claims: Claims  # per layer
    positional: dict[str, np.ndarray] = field(default_factory=dict)  # [T + 1, dims]: the fixed dims it reads
    clock: Callable[[int], Hashable] = lambda t: 0
    """The step at t depends on t only through clock(t) (heads' stable forms, positional features' periods)."""
    current: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the scans' maps at this position
    special: Special = field(default_factory=dict)
    rows: list[Env] = field(default_factory=list)  # the embedding's codes per token row
    at: dict[int, Env] = field(default_factory=dict)  # the positional features' codes per position
    start: Any = ()
    latch: tuple[int, int] | None = None
    memo: StepCache = field(default_factory=StepCache)
    head_memo: HeadCache = field(default_factory=HeadCache)
    """The MLP steps' cache (:mod:`.memo`); a layer whose MLP holds a scan's composition runs uncached."""
    uncached: dict[int, bool] = field(default_factory=dict)  # per layer: its MLP runs a special rule
    readouts: dict[Any, Any] = field(default_factory=dict)
    """What each readout code (by its number) says: its table entry, or the code itself."""
    numbers: Numbers = field(default_factory=Numbers)
    canonical: Callable[[Any], Any] | None = None
    """One memory of each class whose readouts agree on every continuation (:func:`.residues.canonical_memory`)."""

    def env(self, row: int, t: int) -> Env:
        """The residual's codes at position ``t`` holding token ``row`` (the last row: BOS): the
        embedding's codes and the positional features."""
        if not self.rows:
            self.rows.extend({name: tuple(float(v) for v in np.asarray(codes)[r])
                              for name, codes in self.ob.embedding.codes.items()}
                             for r in range(len(next(iter(self.ob.embedding.codes.values())))))
        if t not in self.at:
            self.at[t] = {name: tuple(float(v) for v in values[t]) for name, values in self.positional.items()}
        return {**self.rows[row], **self.at[t]}


def _clock(stable: int, values: list[np.ndarray], T: int) -> Callable[[int], Hashable]:
    """A key of t on which the step depends: min(t, stable) and, for the positional features
    read (``values``, each [T + 1, k]), t's place in their eventual period (the shortest prefix
    plus period, period <= 64, that repeats them on 1..T; t itself when none does)."""
    if not values:
        return lambda t: min(t, stable)
    v = np.concatenate([x[1:] for x in values], axis=1)  # positions 1..T
    best = (T + 1, 1)
    for P in range(1, min(64, T) + 1):
        bad = np.nonzero(np.any(v[:-P] != v[P:], axis=1))[0] if P < T else np.array([], dtype=np.int64)
        t0 = int(bad[-1]) + 2 if len(bad) else 1  # the first t from which v(t) = v(t + P)
        if t0 + P < best[0] + best[1]:
            best = (t0, P)
    t0, P = best
    return lambda t: (min(t, stable), t if t < t0 else t0 + (t - t0) % P)


def _compose_rule(program: Program, chain: Chain, c: Compose) -> Callable[[Env], None]:
    """A scan layer's composition by the lemma: inner layers leave an (unread) window map; the
    last writes the prefix's map into ``into``, and clears or leaves the other subspace."""
    last = c is chain.composes[-1]

    def rule(env: Env) -> None:
        m = len(chain.letters[0]) if chain.letters else 0
        if not last:
            env[chain.maps], env[chain.fetched] = OPAQUE, (0.0,) * m
            return
        value = [math.nan] * m  # points nothing reads: no code (a read would not be an integer)
        for x, fx in zip(chain.points, program.current[chain.maps]):
            value[x] = float(fx)
        other = chain.fetched if c.into == chain.maps else chain.maps
        env[c.into], env[other] = tuple(value), ((0.0,) * m if other == chain.fetched else OPAQUE)
    return rule


def _readers(ob: Obligations) -> tuple[Callable[[str], list[Any]], list[str]]:
    """Who reads a dim: every obligation that reads it (the readout and claims as themselves)."""
    pairs = [p for layer in ob.layers for f in layer.fetches for p in reads_of(f)]
    pairs += [p for layer in ob.layers if layer.mlp is not None for p in reads_of(layer.mlp)]
    claims = ob.joint + (ob.promise.claims if ob.promise is not None else ())
    pairs += [(part, ob.readout) for n in ob.readout.reads for part in n.split(" + ")]
    pairs += [(part, j) for j in claims for n in j.names for part in n.split(" + ")]

    def readers(name: str) -> list[Any]:
        base = name.split("[")[0]
        return [r for n, r in pairs if n in (name, base) or (n.split("[")[0] == base and name == base)]
    return readers, [n for n, _ in pairs]


def _claims(ob: Obligations, bos: Env) -> Claims:
    """Per layer, each claim as (the columns of its names written by the end of that layer, the
    rows projected onto them, its names)."""
    claims = ob.joint + (ob.promise.claims if ob.promise is not None else ())
    later = [{part for n in layer.names_written() for part in n.split(" + ")} for layer in ob.layers]
    written = set(ob.embedding.codes) - set().union(*later)
    out = []
    for writes in later:
        written |= writes
        per = []
        for j in claims:
            at = np.cumsum([0] + [len(read(bos, n)) for n in j.names])
            cols = [c for i, n in enumerate(j.names) if n in written for c in range(at[i], at[i + 1])]
            if cols:
                rows = np.asarray(j.rows, dtype=np.float64)[:, cols]
                per.append((cols, {tuple(float(v) for v in r) for r in rows}, " + ".join(j.names)))
        out.append(per)
    return out


def _context(ob: Obligations, readers: Callable[[str], list[Any]], positional: dict[str, np.ndarray]) -> Context:
    """What the heads' rules may ask: who reads a name, its token rows' largest |code|, its
    width, whether it is a position (0 at BOS, increasing)."""
    def codes(name: str) -> np.ndarray:
        base, _, index = name.partition("[")
        rows = ob.embedding.codes.get(name, ob.embedding.codes.get(base))
        if rows is None:
            rows = positional.get(name, positional.get(base))
        if rows is None:
            raise NotCovered(f"the subspace {name!r}")
        rows = np.asarray(rows, dtype=np.float64)
        return rows[:, [int(index[:-1])]] if index and name not in ob.embedding.codes and name not in positional \
            else rows

    def increasing(name: str) -> bool:
        v = positional.get(name)
        return v is not None and v.shape[1] == 1 and v[0, 0] == 0 and bool(np.all(np.diff(v[:, 0]) > 0))
    return Context(readers=readers, bound=lambda n: float(np.abs(codes(n)).max(initial=0.0)),
                   width=lambda n: sum(codes(p).shape[1] for p in n.split(" + ")), increasing=increasing)


def _check_races(ob: Obligations, ctx: Context, walks: dict[int, Head]) -> None:
    """A race compares two recencies as ranks: both must come from position-copying heads with
    the same key and codes (whose ranks then agree), each into a destination 0 in every row.  The
    heads under the walk's lemmas (``walks``, :mod:`.walk`) keep no order, so no budget."""
    heads = {f.dst: f for layer in ob.layers for f in layer.fetches if isinstance(f, Match) and ctx.increasing(f.src)}
    groups = {(f.key, _exact_rows(f.codes)) for f in heads.values() if id(f) not in walks}
    if sum(len(codes) for _, codes in groups) > RECENCY_CODES:
        raise NotCovered(f"the recency heads {', '.join(sorted(f.head for f in heads.values())[:2])}..: an order "
                         f"of last visits over {sum(len(c) for _, c in groups)} key codes (the search keeps at most "
                         f"{RECENCY_CODES})")
    for o in (x for layer in ob.layers for x in layer.mlp_leaves() if isinstance(x, Races)):
        for r in o.races:
            a, b = heads.get(r.first), heads.get(r.second)
            if a is None or b is None or a.key != b.key or not np.array_equal(a.codes, b.codes):
                raise NotCovered(f"MLP {o.mlp}: a race of {r.first} and {r.second}, not two recencies of one key")
            if any(ctx.bound(n) != 0 for n in (r.first, r.second)):
                raise NotCovered(f"MLP {o.mlp}: a recency not 0 before its head")


def _exact_rows(codes: Any) -> tuple[tuple[float, ...], ...]:
    """A code table as a hashable key."""
    return tuple(tuple(float(v) for v in row) for row in np.asarray(codes))


def build(ob: Obligations, T: int, fixed: Callable[[str], np.ndarray | None]) -> Program:
    """The program of ``ob`` at max_len ``T``: its scans, each head's semantics, its claims.
    ``fixed(name)``: the values [T + 1, dims] of an input-independent subspace the program
    reads (from the model: the position features, ``one``, ``bos``), None for another name."""
    chains = _chains(ob, T)
    scan_heads = {id(h) for c in chains for h in c.heads}
    readers, names = _readers(ob)
    positional = {}
    for name in sorted({n.split("[")[0] for n in names if n not in ob.embedding.codes} - set(ob.embedding.codes)):
        values = fixed(name)
        if values is None:
            raise NotCovered(f"the subspace {name!r} (read by the program; not embedded, not positional)")
        positional[name] = values
    if any(type(f) not in HEADS for layer in ob.layers for f in layer.fetches):
        raise NotCovered(f"the head kinds {sorted({type(f).__name__ for layer in ob.layers for f in layer.fetches})}")
    ctx = _context(ob, readers, positional)
    walks = walk_heads(ob, ctx)
    _check_races(ob, ctx, walks)
    groups = residue_groups(ob, ctx)
    walks.update(live_heads(groups))
    heads = [[None if id(f) in scan_heads else walks.get(id(f)) or HEADS[type(f)](f, T, ctx) for f in layer.fetches]
             for layer in ob.layers]
    # a position copied by a recency head enters as a rank, not as its value: no clock for it
    clocked = sorted(n for n in positional if not all(isinstance(r, Match) and r.src == n for r in readers(n)))
    stable = max([1] + [h.stable for layer in heads for h in layer if h is not None])
    program = Program(ob, T, chains, heads, stable, [], positional, _clock(stable, [positional[n] for n in clocked], T))
    order = [f for layer, hs in zip(ob.layers, heads) for f, h in zip(layer.fetches, hs) if h is not None]
    program.canonical = _then(canonical_memory(ob, ctx, groups, order),
                              canonical_windows(window_settings(ob, ctx, T, order)))
    for chain in chains:
        for c in chain.composes:
            program.special[id(c)] = _compose_rule(program, chain, c)
    program.current = {c.maps: c.points for c in chains}
    bos = program.env(-1, 0)
    program.claims = _claims(ob, bos)
    starts: list[Hashable] = []
    for l, layer in enumerate(ob.layers):  # BOS's run: every head attends to BOS; the memories start there
        after = dict(bos)
        for f, h in zip(layer.fetches, heads[l]):
            if h is None:
                after[f.dst] = OPAQUE
                continue
            starts.append(h.start(bos))
            add(after, h.dst, h.bos(bos))
        run_mlp(layer.mlp, after, program.special) if layer.mlp is not None else None
        bos = after
    program.start = (*starts, *(program.current[c.maps] for c in chains))
    program.latch = latch(ob, heads, program.claims, program.env(-1, 0))
    return program


def _then(first: Callable[[Any], Any] | None, second: Callable[[Any], Any] | None) -> Callable[[Any], Any] | None:
    """Two memory canonicalizations in a row (either may be None: none)."""
    if first is None or second is None:
        return first or second
    return lambda memory: second(first(memory))


def _special(program: Program, l: int, layer: Layer) -> bool:
    """Whether layer l's MLP holds a step with a special rule (a scan's composition: run uncached);
    asked once per layer (the rules are fixed once the program is built)."""
    if l not in program.uncached:
        program.uncached[l] = any(id(o) in program.special for o in layer.mlp_leaves())
    return program.uncached[l]


def step(program: Program, memory: Any, letter: int, t: int) -> tuple[Any, Env]:
    """One position: the memory after reading ``letter`` at position ``t`` and the residual the
    last layer leaves (ProgramError / NotCovered from the kinds' rules; CertificateFailure-free)."""
    n_heads = len(memory) - len(program.chains)
    new: list[Any] = []
    for c, f in zip(program.chains, memory[n_heads:]):  # the prefix's map: f, then the letter's
        program.current[c.maps] = tuple(c.letters[letter][x] for x in f)  # type: ignore[attr-defined]
    env = program.env(letter, t)
    k = 0
    for l, layer in enumerate(program.ob.layers):
        after = dict(env)
        for f, h in zip(layer.fetches, program.heads[l]):
            if h is None:
                after[f.dst] = OPAQUE
                continue
            mem, value = program.head_memo.step(f, h, memory[k], env, t)
            new.append(mem)
            k += 1
            add(after, h.dst, value)
            mark_far(after, h.dst, value)
        if layer.mlp is not None:
            if _special(program, l, layer):
                run_mlp(layer.mlp, after, program.special)
            else:
                program.memo.run(layer.mlp, after, program.special)
        for cols, rows, names in program.claims[l]:
            have = read(after, names)
            if tuple(have[c_] for c_ in cols) not in rows:
                raise ProgramError(f"after layer {l + 1} the program holds {have} at {names}, which "
                                   f"its claim (a Joint or the promise's) does not list")
        env = after
    return (*new, *(program.current[c.maps] for c in program.chains)), env


@dataclass(frozen=True)
class Truth:
    """What the readout must say: ``automaton``'s ``want[q]`` at its state q (a state index, or
    a label index for a label model), with ``names`` for messages."""

    automaton: Semiautomaton
    want: tuple[int, ...]
    names: tuple[str, ...]
    what: str


def truth_of(model: CompiledTransformer) -> Truth:
    """The spec in the checkpoint: the compiled automaton's states, or for a label model the
    labels' source automaton's outputs (the readout's label indices)."""
    labels = readout_of(model.meta)
    if labels is None:
        a = model.automaton
        return Truth(a, tuple(range(a.n_states)), tuple(a.states), "state")
    source = from_dict(labels["source"])
    index = {x: i for i, x in enumerate(labels["labels"])}
    if source.outputs is None or any(source.outputs[q] not in index for q in reachable_states(source)):
        raise CertificateFailure("program", "the labels' source automaton reaches outputs outside the labels")
    # a state no input reaches may carry a label the readout lacks (-1: never compared)
    return Truth(source, tuple(index.get(o, -1) for o in source.outputs), tuple(str(x) for x in labels["labels"]),
                 "label")


def _word(parents: dict[Any, Any], node: Any, letter: int, alphabet: tuple[str, ...]) -> str:
    """The input that reaches ``node`` and then reads ``letter`` (parent pointers)."""
    letters = [letter]
    while parents[node] is not None:
        node, a = parents[node]
        letters.append(a)
    return " ".join(alphabet[a] for a in reversed(letters))


SETTLED = "settled"
"""The memory once a latch fixes the readout for good (:func:`_latch`)."""


def _outcome(program: Program, cache: dict[Any, Any], memory: Any, x: int, t: int, tt: Hashable) -> tuple[Any, Any]:
    """The memory after letter ``x`` at position ``t`` and the readout there (cached by the clock)."""
    if memory == SETTLED:
        return SETTLED, program.latch[1]  # type: ignore[index]
    key = (memory, x, tt)
    if key not in cache:
        new, env = step(program, memory, x, t)
        if program.canonical is not None:
            new = program.canonical(new)
        said = _said(program, read(env, " + ".join(program.ob.readout.reads)))
        if program.latch is not None and new[program.latch[0]]:
            new = SETTLED
        cache[key] = (new, said)
    return cache[key]


def _said(program: Program, raw: Any) -> Any:
    """What the readout code ``raw`` says: its table entry, or the code itself; each code decoded
    once, found by its :class:`~.memo.Numbers` number (a one-hot over many states is slow to hash)."""
    n = program.numbers(raw)
    said = program.readouts.get(n)
    if said is None:
        code = integers(raw, "the readout")
        said = program.readouts[n] = program.ob.readout.table.get(code, code)
    return said


def letter_classes(ob: Obligations, a: Semiautomaton) -> list[int]:
    """One letter (the first) of each class of letters that neither the program nor the automaton
    tells apart: the same codes in every embedded subspace (the step reads a letter only through
    its token row, a scan's letter maps included) and the same column of the automaton (its map
    and where it is defined).  Two such letters lead every (state, memory) pair to the same pair
    with the same readout, so searching one of them covers both."""
    rows = [np.asarray(ob.embedding.codes[n], dtype=np.float64) for n in sorted(ob.embedding.codes)]
    if any(len(r) != a.n_symbols + 1 for r in rows):
        raise NotCovered(f"an embedding of other than {a.n_symbols} letters and BOS")
    seen: dict[Any, int] = {}
    for x in range(a.n_symbols):
        key = (b"".join(r[x].tobytes() for r in rows), tuple(a.maps[x]), tuple(a.defined[x]))
        seen.setdefault(key, x)
    return sorted(seen.values())


def search(program: Program, truth: Truth) -> dict[str, Any]:
    """Breadth-first over (automaton state, memory, t while t < stable): at every position of every
    input of length <= max_len (legal input, for a partial automaton) the readout must be the
    automaton's; the first input that fails is a shortest one (CertificateFailure names it).  One
    letter of each :func:`letter_classes` class is searched."""
    a = truth.automaton
    letters = letter_classes(program.ob, a)
    start = (a.start, program.start, None)
    parents: dict[Any, Any] = {start: None}
    frontier: list[Any] = [start]
    cache: dict[Any, Any] = {}
    memories = set()
    for t in range(1, program.T + 1):
        tt, nxt = program.clock(t), []  # type: ignore[var-annotated]
        for node in frontier:
            q, memory, _ = node
            for x in letters:
                if not a.defined[x][q]:
                    continue
                try:
                    new, got = _outcome(program, cache, memory, x, t, tt)
                except ProgramError as e:
                    raise CertificateFailure("program", f"on the input {_word(parents, node, x, a.alphabet)!r} "
                                             f"(position {t}): {e}") from None
                q2 = a.maps[x][q]
                if got != truth.want[q2]:
                    said = (f"the final code {got}, which its readout's table does not hold" if isinstance(got, tuple)
                            else f"{truth.what} {truth.names[got]!r}" if 0 <= got < len(truth.names) else repr(got))
                    raise CertificateFailure("program", f"on the input {_word(parents, node, x, a.alphabet)!r} the "
                                             f"declared program reads out {said} at position {t}, where the automaton's "
                                             f"{truth.what} is {truth.names[truth.want[q2]]!r}")
                child = (q2, new, tt)
                if child not in parents:
                    parents[child] = (node, x)
                    nxt.append(child)
                    memories.add(new)
                    if len(parents) > NODE_BUDGET:
                        raise NotCovered(f"the program's memory (over {NODE_BUDGET:,} pairs with the automaton's "
                                         f"states)")
        frontier = nxt
        if not frontier:
            break
    return {"proved": True, "pairs": len(parents) - 1, "memories": len(memories),
            "inputs": "legal" if a.partial else "every", "letters": len(letters)}


def _fixed_values(model) -> Callable[[str], np.ndarray | None]:
    """The values of the model's input-independent subspaces (computed from its tensors once, when asked)."""
    got: list[Any] = []

    def values(name: str) -> np.ndarray | None:
        if not got:
            got.append(arrays(model))
        m = got[0]
        try:
            dims = m.dims(name)
        except CertificateFailure:
            return None
        return m.fixed[:, dims] if set(dims) <= m.fixed_dims else None
    return values


def prove(model: CompiledTransformer, ob: Obligations) -> dict[str, Any]:
    """The program proof of ``model``'s obligations ``ob`` against the spec in its checkpoint:
    ``{"proved": True, ...}``, or ``{"proved": False, "not_covered": NAME}`` where a kind (or a
    use of one) has no rule yet; CertificateFailure (where ``program``) names a shortest input on
    which program and automaton differ."""
    began = time.perf_counter()
    try:
        out = search(build(ob, model.max_len, _fixed_values(model)), truth_of(model))
    except NotCovered as e:
        out = {"proved": False, "not_covered": str(e)}
    except ProgramError as e:
        raise CertificateFailure("program", f"at BOS: {e}") from None
    out["seconds"] = round(time.perf_counter() - began, 3)
    return out
