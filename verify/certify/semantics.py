"""The declared program's concrete semantics: what each obligation kind computes, position by
position, as a function of the input prefix (the second half of a certificate, :mod:`.program`).

The program runs left to right.  At position t every subspace holds a *code* (a tuple of
numbers, one per dim); a layer's heads read the residual before the layer and add what they
fetch into their destination (0 before), then its MLP runs its steps on the result.  What a
head needs of earlier positions is its *memory*, a finite value carried from position to
position -- this is what makes the program a finite-state machine whose product with the
automaton can be explored:

* :class:`~constructions.obligations.Fetch` with offset keys t - c (BOS at or below the skip):
  the last c codes of its source, a window; with an absolute key p: the code latched at p;
* :class:`~constructions.obligations.Recent` / :class:`~constructions.obligations.Latest`: the
  source's code at the most recent flagged (matching) position, BOS's before any;
* :class:`~constructions.obligations.Match`: per key code, the source at its last visit;
* :class:`~constructions.obligations.Average`: the sum of its source over its keys (Lemma 15),
  kept modulo the moduli of the decodes that read it when only decodes do (a counter), or as
  min(sum, c) when only lookups that saturate from c read it (a capped count);
* :class:`~constructions.obligations.AnyFlag`: one bit, "some flag so far".

At BOS (t = 0) every head attends to BOS itself: it copies BOS's source (an average copies 0).
The memories start from BOS's codes.  The MLP kinds are functions of the codes
(:func:`run_mlp`).  A kind (or a use of one) these rules do not describe raises
:class:`NotCovered` with its name; a declared step the program cannot take (a lookup key
missing from its table, a non-integer decode) raises :class:`ProgramError`.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from constructions.obligations import (AnyFlag, Average, Beside, Compose, Fetch, Kind, Latest, Lookup, Match,
                                       Modular, Races, Recent, Round, Steps, SuffixLookup, Threshold, absolute_keys,
                                       offset_keys)

Code = tuple[float, ...]
Env = dict[str, Any]
"""A leaf subspace's code at one position (a tuple), or :data:`OPAQUE` where the program's
value is not described as a finite code (the scan's intermediate maps)."""
OPAQUE = "opaque"


class NotCovered(Exception):
    """The proof does not describe this part of the declared program yet; the message names it."""


class ProgramError(Exception):
    """The declared program cannot take a step it declares (the message says which and why)."""


_PART = re.compile(r"^(.*)\[(\d+)\]$")


@functools.lru_cache(maxsize=None)
def _parts(name: str) -> tuple[tuple[str, int | None], ...]:
    """``a + b[1]`` -> [("a", None), ("b", 1)]."""
    out: list[tuple[str, int | None]] = []
    for part in name.split(" + "):
        m = _PART.match(part)
        out.append((m.group(1), int(m.group(2))) if m and m.group(1) else (part, None))
    return tuple(out)


def read(env: Env, name: str) -> Code:
    """The code of ``name`` (``sub``, ``sub[i]`` or several joined by `` + ``)."""
    if name in env and env[name] is not OPAQUE:  # an embedded name (also one such as ``rec[0]``)
        return env[name]  # type: ignore[no-any-return]
    out: list[float] = []
    for base, i in _parts(name):
        if i is not None and f"{base}[{i}]" in env:
            base, i = f"{base}[{i}]", None
        if base not in env:
            raise NotCovered(f"the positional subspace {base!r} (read by the program)")
        v = env[base]
        if v is OPAQUE:
            raise NotCovered(f"a read of {base!r} where the program holds an intermediate scan map")
        out.extend(v if i is None else (v[i],))
    return tuple(out)


def add(env: Env, name: str, value: Code) -> None:
    """Add ``value`` into ``name``'s dims (in place)."""
    old = env.get(name)
    if type(old) is tuple and len(old) == len(value) and " + " not in name:  # one entry, as wide as the value
        env[name] = tuple(map(operator.add, old, value))
        return
    at = 0
    for base, i in _parts(name):
        if i is not None and f"{base}[{i}]" in env:  # an embedded name such as ``rec[0]``
            base, i = f"{base}[{i}]", None
        old = env.get(base)
        if old is OPAQUE or old is None:
            raise NotCovered(f"a write into {base!r}, which holds no code there")
        if i is None:
            env[base] = tuple(map(operator.add, old, value[at : at + len(old)]))
            at += len(old)
        else:
            env[base] = (*old[:i], old[i] + value[at], *old[i + 1 :])
            at += 1


def put(env: Env, name: str, value: Code) -> None:
    """Set ``name``'s dims to ``value`` (in place)."""
    add(env, name, tuple(-v for v in read(env, name)))
    add(env, name, value)


def integers(code: Code, what: str) -> tuple[int, ...]:
    """``code`` as integers (ProgramError when a value is not one)."""
    try:
        out = tuple(map(int, code))
    except (ValueError, OverflowError):  # NaN, infinity
        raise ProgramError(f"{what} holds the non-integer code {code}") from None
    if out != tuple(code):  # an integer equals its float exactly; a fraction does not
        raise ProgramError(f"{what} holds the non-integer code {code}")
    return out


# --- heads: a memory per head --------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    """What a head's rule may ask of the rest of the program (:func:`.program.build` makes it)."""

    readers: Callable[[str], list[Any]]
    """Every obligation that reads a name (``sub`` or ``sub[i]``)."""
    bound: Callable[[str], float]
    """The largest |code| a tracked name holds in any token row."""
    width: Callable[[str], int]
    """How many dims a name has."""
    increasing: Callable[[str], bool]
    """Whether a positional name's value is 0 at BOS and strictly increases with t (a position)."""


FAR = "far"
"""The env key of the names that hold a sum past its exact range (:func:`_average`)."""


@dataclass(frozen=True)
class Head:
    """A head's semantics: ``start`` (its memory after BOS, from BOS's residual), ``bos`` (what it
    adds at BOS), ``step`` ((memory, residual, t) -> (memory, what it adds)); the step is the same
    for every t >= ``stable``."""

    dst: str
    stable: int
    start: Callable[[Env], Any]
    bos: Callable[[Env], Code]
    step: Callable[[Any, Env, int], tuple[Any, Any]]


def _fetch(f: Fetch, T: int, ctx: Context) -> Head:
    """A copying head: offset keys t - c (BOS at or below ``skip``) keep a window of c codes;
    an absolute key p keeps the code latched at p."""
    key = np.asarray(f.key, dtype=np.int64)
    if len(key) != T + 1:
        raise ProgramError(f"head {f.head} declares keys for {len(key) - 1} positions, max_len is {T}")
    src = f.src
    if not key.any():  # BOS at every position: its code, kept
        return Head(f.dst, 0, lambda e: read(e, src), lambda e: read(e, src), lambda m, e, t: (m, m))
    c = int(T - key[T])
    first = int(np.argmax(key != 0))
    skip = max(0, int(key[first]) - 1)
    if c >= 0 and np.array_equal(key, offset_keys(T, c, skip)):
        if c == 0:
            return Head(f.dst, skip + 1, lambda e: read(e, src), lambda e: read(e, src),
                        lambda m, e, t: (m, read(e, src) if t > skip else m))

        def window(m: Any, e: Env, t: int) -> tuple[Any, Code]:
            new = read(e, src) if t > skip else m[-1]  # BOS's code enters while t <= skip
            return (*m[1:], new), m[0]
        # the window's last slot keeps BOS's code while t <= skip (it is never fetched before t > skip)
        return Head(f.dst, c + skip + 1, lambda e: (read(e, src),) * c, lambda e: read(e, src), window)
    p = int(key[T])
    if np.array_equal(key, absolute_keys(T, p)):
        return Head(f.dst, p + 1, lambda e: read(e, src), lambda e: read(e, src),
                    lambda m, e, t: ((read(e, src),) * 2 if t == p else (m, m)))
    raise NotCovered(f"head {f.head}'s keys (neither an offset t - c nor one absolute position)")


def _recent(f: Recent, T: int, ctx: Context) -> Head:
    """Lemma 16: the source at the most recent position whose flag is 1 (BOS's before any)."""
    def step(m: Any, e: Env, t: int) -> tuple[Any, Code]:
        (flag,) = integers(read(e, f.flag), f"head {f.head}'s flag")
        if flag not in (0, 1):
            raise ProgramError(f"head {f.head}'s flag holds {flag}, not 0 or 1")
        new = read(e, f.src) if flag else m
        return new, new
    return Head(f.dst, 0, lambda e: read(e, f.src), lambda e: read(e, f.src), step)


def _latest(f: Latest, T: int, ctx: Context) -> Head:
    """The sum of the sources at the most recent position whose key codes are in ``match``."""
    match = {tuple(c) for c in f.match}

    def total(e: Env) -> Code:
        codes = [read(e, s) for s in f.src]
        return tuple(sum(v) for v in zip(*codes))

    def step(m: Any, e: Env, t: int) -> tuple[Any, Code]:
        new = total(e) if integers(read(e, f.keys), f"head {f.head}'s keys") in match else m
        return new, new
    return Head(f.dst, 0, total, total, step)


def _exact(c: Any) -> Code:
    """A code as a dictionary key (rounded to 9 decimals: the codes a lookup stores, as stored)."""
    return tuple(round(float(v), 9) for v in c)


def _code_of(f: Match) -> tuple[int, Callable[[Env, str], int]]:
    """A nearest-value head's number of codes, and the index of the code a name holds (a code
    outside the declared ones is a failure of the program)."""
    index = {c: i for i, c in enumerate(_exact(c) for c in np.asarray(f.codes))}
    seen: dict[Code, int] = {}  # each code as read, once rounded

    def at(e: Env, name: str) -> int:
        raw = read(e, name)
        if raw in seen:
            return seen[raw]
        c = _exact(raw)
        if c not in index:
            raise ProgramError(f"head {f.head}: {name} holds {c}, none of its declared codes")
        seen[raw] = index[c]
        return index[c]
    return len(index), at


def _match(f: Match, T: int, ctx: Context) -> Head:
    """Theorem 12's nearest value: per key code, the source at its last visit (BOS's before).
    When the source is a position (the gridworld's recency), see :func:`_recency`."""
    if ctx.increasing(f.src):  # a position
        return _recency(f, ctx)
    n, at = _code_of(f)
    want = [int(x) for x in np.asarray(f.match)]

    def step(m: Any, e: Env, t: int) -> tuple[Any, Code]:
        k = at(e, f.key)
        m = (*m[:k], read(e, f.src), *m[k + 1 :])
        return m, m[want[at(e, f.query)]]
    return Head(f.dst, 0, lambda e: (read(e, f.src),) * n, lambda e: read(e, f.src), step)


def _recency(f: Match, ctx: Context) -> Head:
    """A nearest-value head that copies a position (0 at BOS, increasing in t), read only as a
    race's first or second: then only the order of the copied positions matters, so the memory
    keeps, per key code, the *rank* of its last visit among the codes visited (0: never), the
    most recent highest.  Every head with the same key and codes keeps the same ranks, so ranks
    from two such heads compare as the positions do."""
    if any(not isinstance(r, Races) or any(f.dst in x.level for x in r.races) for r in ctx.readers(f.dst)):
        raise NotCovered(f"head {f.head} (it copies a position, which something other than a race reads)")
    n, at = _code_of(f)
    want = [int(x) for x in np.asarray(f.match)]

    def step(m: Any, e: Env, t: int) -> tuple[Any, Code]:
        ranks = list(m)
        ranks[at(e, f.key)] = max(ranks) + 1  # t is the most recent visit
        order = sorted({r for r in ranks if r})
        ranks = [order.index(r) + 1 if r else 0 for r in ranks]
        return tuple(ranks), (float(ranks[want[at(e, f.query)]]),)
    return Head(f.dst, 0, lambda e: (0,) * n, lambda e: (0.0,), step)


def _any_flag(f: AnyFlag, T: int, ctx: Context) -> Head:
    """"Some flag so far" (BOS's flags included): one bit; only a Threshold reads it."""
    def bit(e: Env) -> bool:
        return sum(read(e, f.flags)) > 0

    def step(m: Any, e: Env, t: int) -> tuple[Any, Code]:
        new = bool(m) or bit(e)
        return new, (float(new),)
    return Head(f.dst, 0, bit, lambda e: (float(bit(e)),), step)


class FarValue(tuple):
    """A sum's code with, per dim, whether it is past the sum's exact range (``far``): a
    representative of its residue that the periodic lookups reading it map as they map the sum."""

    far: tuple[bool, ...] = ()


def mark_far(env: Env, name: str, value: Code) -> None:
    """Record in ``env[FAR]`` the names a :class:`FarValue` written into ``name`` makes far."""
    if isinstance(value, FarValue) and any(value.far):
        env[FAR] = frozenset(env.get(FAR, frozenset()) | {b for (b, i), x in zip(_parts(name), value.far) if x}
                             | {f"{b}[{i}]" for (b, i), x in zip(_parts(name), value.far) if x and i is not None})


def _period(o: Lookup, name: str, ctx: Context) -> tuple[int, int, int] | None:
    """The smallest period P <= 64 of lookup ``o`` in the coordinate ``name`` takes in its key
    (equal values wherever both keys are in the table), with the range of that coordinate."""
    if name not in o.reads:
        return None
    j = sum(ctx.width(r) for r in o.reads[: o.reads.index(name)])
    xs = [k[j] for k in o.table]
    for P in range(1, min(64, (max(xs) - min(xs) + 1) // 2) + 1):  # a period the keys repeat at least twice
        if all(np.array_equal(v, o.table[k2]) for k, v in o.table.items()
               if (k2 := (*k[:j], k[j] - P, *k[j + 1 :])) in o.table):
            return P, min(xs), max(xs)
    return None


def sum_mode(f: Average, name: str, ctx: Context) -> tuple[Any, ...]:
    """How one dim of a sum is kept: ("mod", P) when only decodes X = k sum + c (k an integer)
    read it; ("far", P, C, lo, hi) when only such decodes, lookups P-periodic in it (keys lo..hi)
    and races' level tests do -- exact while |sum| < C, its residue mod P beyond (a race's level
    test there is not covered); else ("exact",)."""
    rs = ctx.readers(name)
    ks = [r.scale * f.scale / f.mass for r in rs if isinstance(r, Modular)]
    if not all(abs(k - round(k)) < 1e-12 for k in ks):
        return ("exact",)
    if rs and len(ks) == len(rs):
        return ("mod", math.lcm(*(len(r.table) for r in rs)))
    if ctx.bound(name) != 0:  # a sum onto a start value: its lookups' keys are shifted by it
        return ("exact",)
    periods, C, lo, hi = [len(r.table) for r in rs if isinstance(r, Modular)], 1, -math.inf, math.inf
    for r in rs:
        if isinstance(r, Lookup) and f.scale == f.mass and (got := _period(r, name, ctx)) is not None:
            periods.append(got[0])
            lo, hi = max(lo, got[1]), min(hi, got[2])
        elif isinstance(r, Races):
            for race in r.races:
                if name in race.level:
                    others = sum(ctx.bound(n) for n in race.level if n != name)
                    C = max(C, int(abs(race.threshold) + others) + 1)
        elif not isinstance(r, Modular):
            return ("exact",)
    return ("far", math.lcm(*periods), C, lo, hi) if periods else ("exact",)


def _saturation(o: Lookup, name: str, ctx: Context) -> tuple[int, int] | None:
    """(c, hi) when lookup ``o`` saturates in the coordinate ``name`` takes in its key: its keys there
    run over 0..hi, and every key with a value x >= c there is in the table exactly when the key with
    c is, with the same row -- so reading min(x, c) for any x <= hi gives what reading x gives."""
    if name not in o.reads or ctx.width(name) != 1 or not o.table:
        return None
    j = sum(ctx.width(r) for r in o.reads[: o.reads.index(name)])
    rows: dict[tuple[int, ...], dict[int, np.ndarray]] = {}
    for k, v in o.table.items():
        rows.setdefault((*k[:j], *k[j + 1 :]), {})[k[j]] = v
    xs = {k[j] for k in o.table}
    lo, hi = min(xs), max(xs)
    if lo < 0:
        return None
    c = 0
    for row in rows.values():  # the smallest c from which this row is constant, present or absent alike
        top = row.get(hi)
        x = hi
        while x - 1 >= 0 and ((x - 1 in row) == (top is not None)
                              and (top is None or np.array_equal(row[x - 1], top))):
            x -= 1
        c = max(c, x)
    return c, hi


def _cap_mode(f: Average, name: str, ctx: Context, T: int) -> tuple[Any, ...] | None:
    """("cap", c, vmax) when only lookups read the sum (its plain count: scale = mass, no start
    value), each saturating from c or below, with keys to hi: the sum is kept as min(sum, c), exact
    while every term added is in 0..vmax = hi // T (so the sum never passes hi)."""
    rs = ctx.readers(name)
    if not rs or f.scale != f.mass or ctx.bound(name) != 0 or not all(isinstance(r, Lookup) for r in rs):
        return None
    sat = [_saturation(r, name, ctx) for r in rs]
    if any(x is None for x in sat):
        return None
    c, hi = max(x[0] for x in sat if x), min(x[1] for x in sat if x)
    return ("cap", c, hi // T) if hi // T >= 1 and c <= hi else None


def _average(f: Average, T: int, ctx: Context) -> Head:
    """Lemma 15: scale/mass times the sum of the source over the heads' keys up to t, kept per
    dim as :func:`sum_mode` says (a counter's residue; a gridworld's level, exact near 0)."""
    firsts, lasts = np.asarray(f.first), np.asarray(f.last)
    mult = [int(np.sum((firsts <= t) & (t <= lasts))) for t in range(T + 1)]
    changes = [t for t in range(1, T + 1) if mult[t] != mult[T]]
    stable = (max(changes) + 1) if changes else 1
    names = [base if i is None else f"{base}[{i}]" for base, i in _parts(f.dst)]
    modes = [sum_mode(f, n, ctx) for n in names]
    modes = [(_cap_mode(f, n, ctx, T) or m) if m == ("exact",) else m for n, m in zip(names, modes)]

    def start(e: Env) -> Any:
        if len(read(e, f.dst)) != len(modes):
            raise NotCovered(f"heads {f.heads[0]}..: a destination part of several dims")
        return (0,) * len(modes)

    def one(s: Any, v: int, mode: tuple[Any, ...]) -> Any:
        if mode[0] == "cap":
            if not 0 <= v <= mode[2]:
                raise NotCovered(f"heads {f.heads[0]}..: a term {v} outside 0..{mode[2]} of a saturating count")
            return min(s + v, mode[1])
        if mode[0] == "mod":
            return (s + v) % mode[1]
        if isinstance(s, tuple):  # far: its residue
            return ("far", (s[1] + v) % mode[1])
        return ("far", (s + v) % mode[1]) if mode[0] == "far" and abs(s + v) >= mode[2] else s + v

    def code(s: Any, mode: tuple[Any, ...]) -> tuple[float, bool]:
        if not isinstance(s, tuple):
            return f.scale / f.mass * s, False
        _, P, C, lo, hi = mode
        x = C + (s[1] - C) % P
        x = x if x <= hi else -C - (-C - s[1]) % P
        if x < lo:
            raise NotCovered(f"heads {f.heads[0]}..: a sum past its exact range with no periodic key for it")
        return float(x), True

    def step(m: Any, e: Env, t: int) -> tuple[Any, Code]:
        src = integers(read(e, f.src), f"the source of {f.heads[0]}")
        new = tuple(one(s, mult[t] * v, mode) for s, v, mode in zip(m, src, modes))
        pairs = [code(s, mode) for s, mode in zip(new, modes)]
        value = FarValue(x for x, _ in pairs)
        value.far = tuple(b for _, b in pairs)
        return new, value
    return Head(f.dst, stable, start, lambda e: (0.0,) * len(modes), step)


HEADS: dict[type, Callable[[Any, int, Any], Head]] = {
    Fetch: _fetch, Recent: _recent, Latest: _latest, Match: _match, AnyFlag: _any_flag, Average: _average}
"""Each head kind's semantics (a kind is added here, with its rule)."""


# --- MLPs: functions of the codes ----------------------------------------------------------------

Special = dict[int, Callable[[Env], None]]
"""MLP obligations (by id) whose semantics a lemma of :mod:`.program` gives instead (a scan's
compositions)."""


def _lookup(o: Lookup, env: Env, special: Special) -> None:
    """Lemma 11: ``out`` += table[the codes read] (or the default)."""
    key = integers(read(env, " + ".join(o.reads)), f"the reads of {o.mlp}")
    value = o.table.get(key, o.default)
    if value is None:
        raise ProgramError(f"MLP {o.mlp} reads the key {key}, which its table does not hold")
    add(env, o.out, tuple(float(v) for v in np.asarray(value).ravel()))


def suffix_key(o: SuffixLookup, raw: Code) -> tuple[int, ...]:
    """The longest key of ``o`` that the codes ``raw`` it reads start with (``()`` where none
    does).  What the lookup adds depends on the codes through it alone: the keys the codes start
    with are prefixes of the codes, so each is one this key starts with, and conversely.  A code a
    memory forgot (NaN, :mod:`.residues`'s matches lemma) is accepted only where no key reads it:
    the keys the codes start with are then the same whatever it was."""
    p = next((i for i, v in enumerate(raw) if v != v), len(raw))  # a code the memory forgot (NaN: residues.py)
    key = integers(raw[:p], f"the reads of {o.mlp}")
    if p < len(raw) and any(len(k) > p and k[:p] == key for k in o.rows):
        raise NotCovered(f"MLP {o.mlp}: a code the program's memory forgot decides its key")
    n = next((n for n in range(len(key), 0, -1) if key[:n] in o.rows), 0)
    return key[:n]


def suffix_rows(o: SuffixLookup, key: tuple[int, ...], width: int) -> Code:
    """The rows of every key ``key`` starts with, summed (``key``: a :func:`suffix_key`)."""
    return tuple(float(v) for v in o.value(key, width))


def suffix_value(o: SuffixLookup, raw: Code, width: int,
                 rows: Callable[[SuffixLookup, tuple[int, ...], int], Code] = suffix_rows) -> Code:
    """What a suffix lookup adds for the codes ``raw`` it reads: the rows of every key they start
    with (``rows`` of their :func:`suffix_key`; the program proof's cache passes a cached one)."""
    return rows(o, suffix_key(o, raw), width)


def suffix_lookup(o: SuffixLookup, env: Env, special: Special,
                  rows: Callable[[SuffixLookup, tuple[int, ...], int], Code] = suffix_rows) -> None:
    """Lemma 11 with suffix keys: ``out`` += the rows of every key the codes read start with
    (:func:`suffix_value`)."""
    add(env, o.out, suffix_value(o, read(env, " + ".join(o.reads)), len(read(env, o.out)), rows))


def _modular(o: Modular, env: Env, special: Special) -> None:
    """A counter's decode: X = scale x + shift; out += table[X mod p] (and minus_out the one of X - D)."""
    (x,) = read(env, o.reads)
    exact = o.scale * x + o.shift  # an exact rational in the program (a sum times scale / mass): float-rounded here
    X = round(exact)
    if abs(exact - X) > 1e-6 * max(1.0, abs(exact)):
        raise ProgramError(f"step {o.name}'s X = {exact} is not an integer")
    table = np.asarray(o.table, dtype=np.float64)
    add(env, o.out, tuple(table[X % len(table)]))
    if o.minus is not None and o.minus_out is not None:
        (D,) = integers(read(env, o.minus), f"step {o.name}'s {o.minus}")
        add(env, o.minus_out, tuple(table[(X - D) % len(table)]))


def _round(o: Round, env: Env, special: Special) -> None:
    """``dst`` += the integer ``src`` holds; ``src`` cleared."""
    v = read(env, o.src)
    add(env, o.dst, tuple(float(x) for x in integers(v, f"step {o.name}'s {o.src}")))
    put(env, o.src, (0.0,) * len(v))


def _threshold(o: Threshold, env: Env, special: Special) -> None:
    """``dst`` += 1 when the AnyFlag bit in ``src`` is set."""
    add(env, o.dst, (float(sum(read(env, o.src)) > 0),))


def in_order(o: Kind) -> tuple[Kind, ...] | None:
    """The obligations a :class:`Steps` (its ``first``, then its steps) or a :class:`Beside` (its
    parts) runs, one after another on the same residual; None for any other kind."""
    if isinstance(o, Steps):
        return ((o.first,) if o.first is not None else ()) + tuple(o.steps)
    if isinstance(o, Beside):
        return tuple(o.parts)
    return None


def _steps(o: Steps, env: Env, special: Special) -> None:
    """The steps one after another (after ``first``); the codes they leave unwritten keep their value."""
    kept = {n: env[n] for n in unwritten(o) if n in env}
    for s in in_order(o) or ():
        run_mlp(s, env, special)
    env.update(kept)


def unwritten(o: Kind) -> tuple[str, ...]:
    """The codes a :class:`Steps` in ``o`` (itself, or nested: a part side by side) computes but does
    not write (``Steps.unwritten``): they keep their value in the residual."""
    own = tuple(o.unwritten or ()) if isinstance(o, Steps) else ()
    return own + tuple(n for part in in_order(o) or () for n in unwritten(part))


def _beside(o: Beside, env: Env, special: Special) -> None:
    """The parts read and write disjoint subspaces: in any order."""
    for part in in_order(o) or ():
        run_mlp(part, env, special)


def _races(o: Races, env: Env, special: Special) -> None:
    """Theorem 12's boundary count: each race adds 1 when its first recency is the larger, or
    when both are 0 (never) and its level codes sum to at least its threshold."""
    far = env.get(FAR, frozenset())
    for r in o.races:
        (a,), (b,) = read(env, r.first), read(env, r.second)
        term = a > b
        if a == 0 and b == 0:
            if any(n in far or n.split("[")[0] in far for n in r.level):
                raise NotCovered(f"MLP {o.mlp}: a race's level test past its sum's exact range")
            term = sum(v for n in r.level for v in read(env, n)) >= r.threshold
        add(env, r.out, (float(term),))


def _compose(o: Compose, env: Env, special: Special) -> None:
    raise NotCovered(f"MLP {o.mlp} (a composition outside a scan of doubling offsets)")


MLPS: dict[type, Callable[[Any, Env, Special], None]] = {
    Lookup: _lookup, SuffixLookup: suffix_lookup, Modular: _modular, Round: _round, Threshold: _threshold,
    Steps: _steps, Beside: _beside,
    Races: _races, Compose: _compose}
"""Each MLP kind's semantics (a kind is added here, with its rule)."""


def run_mlp(o: Kind, env: Env, special: Special) -> None:
    """Run one MLP obligation on ``env`` (in place); ``special`` overrides some by id."""
    if id(o) in special:
        special[id(o)](env)
    elif type(o) in MLPS:
        MLPS[type(o)](o, env, special)
    else:
        raise NotCovered(f"the MLP obligation kind {o.kind!r} (no semantics for it)")


def reads_of(o: Kind) -> list[tuple[str, Any]]:
    """Every (subspace, reader) pair of an obligation: which names each of its leaves reads (the
    parts of a name joined by `` + `` one by one)."""
    return [(part, leaf) for leaf in o.leaves() for n in leaf.names_read() for part in n.split(" + ")]
