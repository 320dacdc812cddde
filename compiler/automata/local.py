"""Local descriptions: the state as a function of the last k letters, the position mod p,
a saturating count of a local event and the latest local anchor.

A *local description* of an automaton (for a start state q0) is

* a window length k and a period p: the *window state* of position t is
  s_t = (t mod p, c_0, ..., c_{k-1}) with c_j = (letter at t - j) + 1, or 0 when t - j <= 0
  ("before the start"); s_0 = (0, 0, ..., 0) belongs to the start only;
* optionally an *event* e(s) in {0, 1} and a bound B: the level
  lambda_t = min(B, sum_{1 <= sigma <= t} e(s_sigma));
* optionally *anchors* (a set of window states) with a colour col(s): the anchor value
  mu_t = col(s_sigma) for the latest sigma <= t with s_sigma an anchor, or the start's
  colour col_0 when there is none;
* a table F with q_t = F(s_t, lambda_t, mu_t) for every input and every t >= 0.

Then a Transformer computes q_t in two attention layers (constructions/local.py): offset
heads copy the window, an MLP evaluates e and (anchor?, col) per position, a prefix-count
head sums e, a most-recent-flag head fetches the latest anchor's colour, and a lookup MLP
evaluates F.  Without event and anchors it is one layer (the lookback of definite
automata, with a phase).

**Detection** (:func:`detect`) looks for a description valid from *every* start state
(so that moving the start keeps every shape), trying window lengths k <= MAX_WINDOW and
periods p <= MAX_PERIOD in order of table size, first with no aggregate (one layer),
then with the event, the anchors, or both.  The candidate e and anchors come from the
automaton, never from names:

* the *level* of a state is the length of the longest path from q0's strongly connected
  component to its own in the condensation of the part reachable from q0 (levels never
  decrease along a transition); B is the largest level (over all starts) and e(s') is
  the level increase lambda(q') - lambda(q) on product transitions (q, s) -> (q', s')
  with lambda(q) below the start's top level -- it must be 0 or 1 and the same for every
  such transition into s', else the event is rejected;
* an *anchor* is a window state s whose fibre {q : (q, s) reachable from (q0, s_0)} is a
  single state (the window determines the state); its raw value is s itself, and the
  raw values are then coloured greedily so that two values share a colour only when F
  stays a function (two raw values conflict when some (s, lambda) reached with both
  leads to different states).

**Verification is the reachability argument, not sampling**: the pair (q_t, x_t) with
x_t = (s_t, lambda_t, raw mu_t) evolves deterministically with the letters, so the set of
pairs reached from (q0, x_0) over all inputs of all lengths is the closure computed by
the breadth-first search (:func:`_closure`), finite and exhaustive.  A description is
accepted only when q is a function of (s, lambda, colour) on that whole set: then
q_t = F(s_t, lambda_t, col(mu_t)) for every input by induction on t.  The rules for
e and the anchors are only how candidates are proposed; the closure is the proof.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SpecError
from .spec import Semiautomaton

MAX_WINDOW = 4
"""Longest window (offset heads) the search tries."""
MAX_PERIOD = 4
"""Largest period of the position phase the search tries."""
MAX_WINDOW_STATES = 4096
"""Largest number of window states (|Sigma| + 1)^k * p the search tries."""
MAX_STATES = 64
"""Largest automaton the search inspects (it runs a closure per start state)."""
MAX_NODES = 1 << 20
"""Largest closure (reachable (state, window, level, anchor) tuples, per start) before giving up."""
MAX_SPACE = 1 << 26
"""Largest code space of a closure (one visited flag per (state, window, level, anchor))."""
MAX_KEYS = 1 << 14
"""Largest lookup table (units of the final MLP) a plan may have."""

MODES = ("window", "count", "anchor", "count+anchor")
"""The aggregates tried for each (k, p), in order: none (one layer), the event count, the
latest anchor, both."""


@dataclass(frozen=True)
class StartTables:
    """What depends on the start state: per local key (the plan's ``local_keys`` order)
    the triple (anchor flag, colour, event); the start's colour; per final key the state,
    or -1 where the key is not reached from this start."""

    local: tuple[tuple[int, int, int], ...]
    init_class: int
    final: tuple[int, ...]


@dataclass(frozen=True)
class LocalPlan:
    """A local description valid from every start state (module docstring).

    ``local_keys``: (c_0, ..., c_{k-1}[, phase]) for every window state of a position t >= 1;
    ``final_keys``: (c_0, ..., c_{k-1}[, phase][, level][, colour]) reached from some start
    (the bracketed parts only when the period is above 1, the bound above 0, the colours
    above 0).  ``starts[q]`` holds the tables for start state q."""

    k: int
    period: int
    n_symbols: int
    n_states: int
    bound: int
    n_classes: int
    local_keys: tuple[tuple[int, ...], ...]
    final_keys: tuple[tuple[int, ...], ...]
    starts: tuple[StartTables, ...]

    @property
    def letter_local(self) -> bool:
        """Whether the anchor flags, colours and events depend on the current letter alone
        (period 1 and every start's local row the same for keys with the same c_0): then
        they are token embeddings and the aggregates run in the first layer."""
        if self.period > 1:
            return False
        for st in self.starts:
            seen: dict[int, tuple[int, int, int]] = {}
            for key, row in zip(self.local_keys, st.local):
                if seen.setdefault(key[0], row) != row:
                    return False
        return True

    @property
    def layers(self) -> int:
        """1 when the window and phase alone decide the state or the aggregates read only the
        current letter, else 2."""
        return 1 if (self.bound == 0 and self.n_classes == 0) or self.letter_local else 2

    @property
    def mode(self) -> str:
        return MODES[(self.bound > 0) + 2 * (self.n_classes > 0)]

    def to_dict(self) -> dict[str, Any]:
        return {"k": self.k, "period": self.period, "n_symbols": self.n_symbols, "n_states": self.n_states,
                "bound": self.bound, "n_classes": self.n_classes,
                "local_keys": [list(x) for x in self.local_keys], "final_keys": [list(x) for x in self.final_keys],
                "starts": [{"rows": [list(x) for x in s.local], "init_class": s.init_class, "final": list(s.final)}
                           for s in self.starts]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> LocalPlan:
        """The plan of :meth:`to_dict`; SpecError when the tables do not fit the sizes."""
        k, p, s, n = int(d["k"]), int(d["period"]), int(d["n_symbols"]), int(d["n_states"])
        bound, n_classes = int(d["bound"]), int(d["n_classes"])
        if k < 1 or p < 1 or s < 1 or n < 1 or bound < 0 or n_classes < 0:
            raise SpecError(f"a local plan needs k, period, n_symbols, n_states >= 1, got {k}, {p}, {s}, {n}")
        local = tuple(tuple(int(v) for v in x) for x in d["local_keys"])
        final = tuple(tuple(int(v) for v in x) for x in d["final_keys"])
        width_local = k + (p > 1)
        width_final = width_local + (bound > 0) + (n_classes > 0)
        if any(len(x) != width_local for x in local) or any(len(x) != width_final for x in final):
            raise SpecError("a local plan's keys do not match its window, period, bound and colours")
        starts = tuple(StartTables(tuple(_local_row(x) for x in st["rows"]), int(st["init_class"]),
                                   tuple(int(v) for v in st["final"])) for st in d["starts"])
        if len(starts) != n or any(len(st.local) != len(local) or len(st.final) != len(final) for st in starts):
            raise SpecError(f"a local plan needs tables for each of its {n} start states, sized as its keys")
        if any(not -1 <= q < n for st in starts for q in st.final):
            raise SpecError(f"a local plan's final tables need states in 0..{n - 1}")
        colours = max(n_classes, 1)
        if any(row[0] not in (0, 1) or not 0 <= row[1] < colours or row[2] not in (0, 1)
               for st in starts for row in st.local) or any(not 0 <= st.init_class < colours for st in starts):
            raise SpecError(f"a local plan's local rows need (flag 0/1, colour in 0..{colours - 1}, event 0/1)")
        return LocalPlan(k, p, s, n, bound, n_classes, local, final, starts)


def _local_row(x: Any) -> tuple[int, int, int]:
    """One row of a stored start table's ``rows``: (anchor flag, colour, event); SpecError
    unless it has three entries."""
    row = tuple(int(v) for v in x)
    if len(row) != 3:
        raise SpecError(f"a local plan's local rows need (flag 0/1, colour, event 0/1), got {len(row)} entries")
    return row[0], row[1], row[2]


# ---------------------------------------------------------------------------------------
# window states


@dataclass(frozen=True)
class Windows:
    """Every window state (phase, c_0..c_{k-1}) as an index; ``step[i, a]`` the next one."""

    k: int
    period: int
    states: list[tuple[int, ...]]
    step: np.ndarray  # [n_windows, n_symbols]


@functools.lru_cache(maxsize=32)
def windows(k: int, p: int, n_symbols: int) -> Windows:
    """Window states reachable from s_0 = (0, 0, ..., 0) (index 0), and their transitions."""
    start = (0,) + (0,) * k
    index = {start: 0}
    states = [start]
    rows: list[list[int]] = []
    i = 0
    while i < len(states):
        ph, *c = states[i]
        row = []
        for a in range(n_symbols):
            nxt = ((ph + 1) % p, a + 1, *c[: k - 1])
            if nxt not in index:
                index[nxt] = len(states)
                states.append(nxt)
            row.append(index[nxt])
        rows.append(row)
        i += 1
    return Windows(k, p, states, np.array(rows, dtype=np.int64))


def window_key(w: tuple[int, ...], period: int) -> tuple[int, ...]:
    """The lookup key of window state w = (phase, c_0..c_{k-1}): the codes, then the phase when p > 1."""
    return tuple(w[1:]) + ((w[0],) if period > 1 else ())


# ---------------------------------------------------------------------------------------
# the closure


class _TooBig(Exception):
    """A closure outgrew :data:`MAX_NODES`."""


def _closure(maps: np.ndarray, win: Windows, q0: int, bound: int, event: np.ndarray | None,
             anchor_id: np.ndarray | None) -> np.ndarray:
    """Every (q, s, lambda, v) reached from (q0, s_0, 0, v_0) over all inputs, as an int array
    [N, 4].  lambda' = min(bound, lambda + event[s']); v' = anchor_id[s'] where >= 0, else v
    (v_0 = -1: the start's own value)."""
    n_sym = maps.shape[0]
    S = len(win.states)
    L = bound + 1
    V = (int(anchor_id.max()) + 2) if anchor_id is not None else 1
    enc = lambda q, s, lam, v: ((q * S + s) * L + lam) * V + (v + 1)  # noqa: E731
    space = maps.shape[1] * S * L * V
    if space > MAX_SPACE:
        raise _TooBig
    seen = np.zeros(space, dtype=bool)
    front = np.array([[q0, 0, 0, -1]], dtype=np.int64)
    seen[enc(q0, 0, 0, -1)] = True
    found = [front]
    total = 1
    while len(front):
        q, s, lam, v = front.T
        nq = maps[:, q].reshape(-1)  # [a * n + i]
        ns = win.step[s].T.reshape(-1)
        nlam = np.tile(lam, n_sym)
        if event is not None:
            nlam = np.minimum(bound, nlam + event[ns])
        nv = np.tile(v, n_sym)
        if anchor_id is not None:
            nv = np.where(anchor_id[ns] >= 0, anchor_id[ns], nv)
        codes = enc(nq, ns, nlam, nv)
        fresh = ~seen[codes]
        codes, first = np.unique(codes[fresh], return_index=True, sorted=True)
        if not len(codes):
            break
        seen[codes] = True
        total += len(codes)
        if total > MAX_NODES:
            raise _TooBig
        front = np.stack([nq, ns, nlam, nv], 1)[fresh][first]
        found.append(front)
    return np.concatenate(found)


def _levels(maps: np.ndarray, q0: int) -> np.ndarray:
    """Level of each state reachable from q0 (-1 elsewhere): the longest path from q0's
    component in the condensation of the reachable part (strongly connected components)."""
    n = maps.shape[1]
    succ = [set(int(x) for x in maps[:, q]) for q in range(n)]
    reach = []
    for q in range(n):
        r, stack = {q}, [q]
        while stack:
            for y in succ[stack.pop()]:
                if y not in r:
                    r.add(y)
                    stack.append(y)
        reach.append(r)
    alive = sorted(reach[q0])
    comp = {q: min(x for x in alive if q in reach[x] and x in reach[q]) for q in alive}
    level = {c: 0 for c in set(comp.values())}
    # components in topological order: a component reaches fewer states than its predecessors
    order = sorted(set(comp.values()), key=lambda c: -len(reach[c]))
    for c in order:
        for q in (x for x in alive if comp[x] == c):
            for y in succ[q]:
                if comp[y] != c:
                    level[comp[y]] = max(level[comp[y]], level[c] + 1)
    out = np.full(n, -1, dtype=np.int64)
    for q in alive:
        out[q] = level[comp[q]]
    return out


@dataclass
class _StartResult:
    local: list[tuple[int, int, int]]
    init_class: int
    final: dict[tuple[int, ...], int]
    n_classes: int


def _events(maps: np.ndarray, win: Windows, level: np.ndarray, pairs: np.ndarray) -> np.ndarray | None:
    """e(s') from the level increases on the reachable product transitions (module docstring),
    or None when some increase is not 0/1 or two transitions into s' disagree.  ``level``:
    :func:`_levels` of the start."""
    top = level.max()
    event = np.full(len(win.states), -1, dtype=np.int64)
    q, s = pairs[:, 0], pairs[:, 1]
    low = level[q] < top
    q, s = q[low], s[low]
    ns = win.step[s].T.reshape(-1)
    d = level[maps[:, q].reshape(-1)] - np.tile(level[q], maps.shape[0])
    if len(d) and (d.min() < 0 or d.max() > 1):
        return None
    lo = np.full(len(win.states), 2, dtype=np.int64)
    hi = np.full(len(win.states), -1, dtype=np.int64)
    np.minimum.at(lo, ns, d)
    np.maximum.at(hi, ns, d)
    if ((hi >= 0) & (lo != hi)).any():
        return None
    event = hi
    return np.maximum(event, 0)


def _colour(rows: np.ndarray, n_keys: int) -> tuple[np.ndarray, int]:
    """Greedy colouring of the raw anchor values: ``rows`` [N, 3] = (key, v, q) with q a
    function of (key, v).  Two values conflict when a key reached with both gives different
    states.  Returns the colour of each raw value (index v + 1) and the number of colours."""
    V = int(rows[:, 1].max()) + 2
    colour = np.full(V, -1, dtype=np.int64)
    tables: list[np.ndarray] = []
    rows = rows[np.argsort(rows[:, 1], kind="stable")]
    cuts = np.flatnonzero(np.diff(rows[:, 1])) + 1
    for group in np.split(rows, cuts):
        v, keys, qs = int(group[0, 1]), group[:, 0], group[:, 2]
        for c, tab in enumerate(tables):
            have = tab[keys]
            if np.all((have == -1) | (have == qs)):
                tab[keys] = qs
                colour[v + 1] = c
                break
        else:
            tab = np.full(n_keys, -1, dtype=np.int64)
            tab[keys] = qs
            tables.append(tab)
            colour[v + 1] = len(tables) - 1
    return colour, len(tables)


def _function(keys: np.ndarray, qs: np.ndarray) -> bool:
    """Whether qs is a function of keys (rows of a non-negative int array)."""
    code = np.zeros(len(keys), dtype=np.int64)
    for col in keys.T:
        code = code * (int(col.max()) + 1) + col
    order = np.argsort(code, kind="stable")
    c, q = code[order], qs[order]
    return not np.any((c[1:] == c[:-1]) & (q[1:] != q[:-1]))


SAMPLE_WORDS, SAMPLE_LENGTH = 32, 128
"""Random walks :func:`_sampled_conflict` runs before a closure (fixed seed: detection is deterministic)."""
SAMPLE_ABOVE = 1 << 15
"""Closure code spaces above which the walks run first (smaller closures are cheaper than the walks)."""


def _sampled_conflict(maps: np.ndarray, win: Windows, q0: int, bound: int, event: np.ndarray | None,
                      anchor_id: np.ndarray | None) -> bool:
    """Whether random words already reach two tuples (q, s, lambda, v) with equal features and
    different states.  Those tuples lie in the closure, so a conflict refutes the description
    (soundly) at the cost of a few walks -- it spares the closure for groups and the like."""
    rng = np.random.default_rng(0)
    letters = rng.integers(0, maps.shape[0], (SAMPLE_LENGTH, SAMPLE_WORDS))
    q = np.full(SAMPLE_WORDS, q0)
    s = np.zeros(SAMPLE_WORDS, dtype=np.int64)
    lam = np.zeros(SAMPLE_WORDS, dtype=np.int64)
    v = np.full(SAMPLE_WORDS, -1)
    rows, states = [], []
    for a in letters:
        q, s = maps[a, q], win.step[s, a]
        if event is not None:
            lam = np.minimum(bound, lam + event[s])
        if anchor_id is not None:
            v = np.where(anchor_id[s] >= 0, anchor_id[s], v)
        rows.append(np.stack([s, lam, v + 1], 1))
        states.append(q)
    return not _function(np.concatenate(rows), np.concatenate(states))


def _try_start(maps: np.ndarray, win: Windows, q0: int, mode: str, bound: int,
               level: np.ndarray, cache: dict) -> _StartResult | None:
    """The description for start q0 in ``mode`` (bound: the shared B; level: q0's
    :func:`_levels`; cache: the (state, window) closures already computed), or None."""
    n_win = len(win.states)
    n = maps.shape[1]
    if mode == "window" and n * n_win > SAMPLE_ABOVE and _sampled_conflict(maps, win, q0, 0, None, None):
        return None
    key = (win.k, win.period, q0)
    if key not in cache:
        cache[key] = _closure(maps, win, q0, 0, None, None)[:, :2]
    pairs = cache[key]
    event = None
    if "count" in mode:
        event = _events(maps, win, level, pairs)
        if event is None:
            return None
    anchor_id = None
    if "anchor" in mode:
        counts = np.bincount(pairs[:, 1], minlength=n_win)  # the closure's pairs are distinct
        anchor_id = np.where(counts == 1, np.arange(n_win), -1)
        anchor_id[0] = -1  # s_0 is the start's own value (v = -1)
    space = n * n_win * (bound + 1) * (int((anchor_id >= 0).sum()) + 1 if anchor_id is not None else 1)
    if space > SAMPLE_ABOVE and _sampled_conflict(maps, win, q0, bound, event, anchor_id):
        return None
    nodes = _closure(maps, win, q0, bound if event is not None else 0, event, anchor_id)
    q, s, lam, v = nodes.T
    if not _function(np.stack([s, lam, v + 1], 1), q):
        return None
    if anchor_id is not None:
        key = s * (bound + 1) + lam
        colour, n_classes = _colour(np.stack([key, v, q], 1), n_win * (bound + 1))
        cls = colour[v + 1]
        init = int(colour[0])
    else:
        n_classes, cls, init = 0, np.zeros_like(q), 0
    final: dict[tuple[int, ...], int] = {}
    L, C = int(lam.max()) + 1, int(cls.max()) + 1  # q is a function of (s, lam, cls): one row per key
    _, first = np.unique((s * L + lam) * C + cls, return_index=True)
    first = first[s[first] != 0]  # BOS (s = 0): read out by no key
    for si, li, ci, qi in zip(s[first].tolist(), lam[first].tolist(), cls[first].tolist(), q[first].tolist()):
        final[window_key(win.states[si], win.period) + ((li,) if event is not None else ())
              + ((ci,) if anchor_id is not None else ())] = qi
    local = []
    for i in range(1, n_win):
        flag, c = (1, int(colour[anchor_id[i] + 1])) if anchor_id is not None and anchor_id[i] >= 0 else (0, 0)
        local.append((flag, c, int(event[i]) if event is not None else 0))
    return _StartResult(local, init, final, n_classes)


def _try(a: Semiautomaton, k: int, p: int, mode: str, levels: list[np.ndarray], cache: dict) -> LocalPlan | None:
    """A plan with window k, period p and the aggregates of ``mode``, valid from every start
    (``levels[q]``: :func:`_levels` of start q; ``cache``: see :func:`_try_start`)."""
    maps = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    win = windows(k, p, a.n_symbols)
    bound = 0
    if "count" in mode:
        bound = max(int(lv.max()) for lv in levels)
        if bound == 0:
            return None  # no level to count
    results = []
    for q0 in range(a.n_states):
        r = _try_start(maps, win, q0, mode, bound, levels[q0], cache)
        if r is None:
            return None
        results.append(r)
    n_classes = max(r.n_classes for r in results) if "anchor" in mode else 0
    if "anchor" in mode and n_classes <= 1:
        return None  # one colour: the anchors carry nothing (the window mode would have done)
    if "count" in mode and all(r.local[i][2] == 0 for r in results for i in range(len(r.local))):
        return None
    final_keys = sorted(set().union(*(r.final for r in results)))
    if len(final_keys) > MAX_KEYS:
        raise _TooBig
    local_keys = tuple(window_key(w, p) for w in win.states[1:])
    starts = tuple(StartTables(tuple(r.local), r.init_class, tuple(r.final.get(key, -1) for key in final_keys))
                   for r in results)
    return LocalPlan(k, p, a.n_symbols, a.n_states, bound, n_classes, local_keys, tuple(final_keys), starts)


def candidates(n_symbols: int, max_k: int = MAX_WINDOW, max_period: int = MAX_PERIOD) -> list[tuple[int, int]]:
    """(k, p) pairs in the order the search tries them: fewest window states first, at most
    :data:`MAX_WINDOW_STATES` of them."""
    pairs = [(k, p) for k, p in itertools.product(range(1, max_k + 1), range(1, max_period + 1))
             if (n_symbols + 1) ** k * p <= MAX_WINDOW_STATES]
    return sorted(pairs, key=lambda kp: ((n_symbols + 1) ** kp[0] * kp[1], kp[0]))


def _size(plan: LocalPlan) -> int:
    """What :func:`detect` compares plans of one depth by: their keys, final and local."""
    return len(plan.final_keys) + len(plan.local_keys)


def detect(a: Semiautomaton, max_k: int = MAX_WINDOW, max_period: int = MAX_PERIOD,
           modes: tuple[str, ...] = MODES) -> tuple[LocalPlan | None, str]:
    """The cheapest local description of ``a`` valid from every start, or None and why there
    is none within the limits: per mode the first (k, p) of :func:`candidates` that works,
    then the fewest layers and the smallest tables among the modes (the search stops at the
    first one-layer description, and a mode at the first (k, p) whose local keys alone are as many
    as a description found has keys: candidates come in order of window states)."""
    name = a.name or "the automaton"
    if a.n_states > MAX_STATES:
        return None, f"{name} has {a.n_states} states, over the local search's limit of {MAX_STATES}"
    maps = np.asarray(a.maps, dtype=np.int64).reshape(a.n_symbols, a.n_states)
    levels = [_levels(maps, q) for q in range(a.n_states)]
    gave_up = []
    cache: dict = {}
    found: list[tuple[LocalPlan, str]] = []
    for mode in modes:
        for k, p in candidates(a.n_symbols, max_k, max_period):
            if found and len(windows(k, p, a.n_symbols).states) - 1 >= min(_size(f) for f, _ in found):
                break  # its local keys alone make it no smaller than a plan found (as deep): nor the rest
            try:
                plan = _try(a, k, p, mode, levels, cache)
            except _TooBig:
                gave_up.append((k, p))
                continue
            if plan is not None:
                found.append((plan, f"{mode} description with k = {k}, period {p}"))
                break
        if found and found[-1][0].layers == 1:
            break
    if found:
        return min(found, key=lambda f: (f[0].layers, _size(f[0])))
    why = (f"no description of the state by the last k <= {max_k} letters, the position mod p <= {max_period}, "
           f"a count of a local event and the latest local anchor is valid from every start state")
    if gave_up:
        why += f" (gave up on {len(gave_up)} window/period pairs over {MAX_NODES:,} closure states)"
    return None, f"{name}: {why}"
