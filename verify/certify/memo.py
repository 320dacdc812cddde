"""A cache of the program proof's steps (:mod:`.program`): an MLP step is a function of the codes
it reads, and a head's step of its memory, the codes it reads and min(t, its stable position), so
the search runs each once per combination of those, not once per (memory, letter) pair.

Soundness: the key is the code of every residual entry the MLP's obligations name (read or
written: an addition reads the destination's old code) and the far marks; on a miss the step
runs on an environment that records every entry it touches, and a step that touches an entry
outside its key (a composite name such as ``a + b`` looked up whole, an entry it changes) adds
that entry to the MLP's key from then on (a longer key never matches a shorter one), so every
cached result was computed from codes equal, on every entry its run touched, to the ones it is
used for.  A hit writes back exactly the entries the run left, so the residual after a hit equals
the residual after running the step.  A :class:`Steps` or :class:`Beside` is cached part by part
(:func:`~.semantics.in_order`: the same runs, in the same order, on the same residual), so a part
whose own entries repeat is run once even where the whole MLP's codes never do (the chains' lookups
beside a joint lookup that reads every chain).

A :class:`~constructions.obligations.SuffixLookup` reads a window whose codes seldom repeat, but
what it adds depends on them only through the longest of its keys they start with
(:func:`~.semantics.suffix_key`), so it runs uncached on the residual itself and only that sum of
its declared rows is cached, by (the lookup, that key, the width of ``out``).
"""

from __future__ import annotations

from typing import Any

from constructions.obligations import Kind, SuffixLookup

from .semantics import FAR, Code, Env, Head, Special, _parts, in_order, run_mlp, suffix_lookup, suffix_rows, unwritten

TRIAL = 2000
"""Calls after which a head whose cache hit fewer than half of them runs uncached (its memory is
the large part of the key: a nearest-value head's codes per key code)."""


_ABSENT = object()
WIDE = 32
"""A step keys a code wider than this (a one-hot over many states) on its :class:`Numbers` number."""
KEPT_DIMS = 4_000_000
"""Most dims of code objects a :class:`Numbers` keeps alive (at most 128 MB where nothing else holds
them: a float and a pointer per dim)."""


class Numbers:
    """A number per value met (equal values, the same number), found by the object's identity
    first: hashing a wide code is slow, and a cached step hands back the very objects it stored.
    The objects found by identity are kept alive (so an id there is never another object's), at
    most :data:`KEPT_DIMS` dims; past that a value is found by its hash."""

    def __init__(self) -> None:
        self.of_value: dict[Any, int] = {}
        self.of_id: dict[int, tuple[Any, int]] = {}
        self.dims = 0

    def __call__(self, v: Any) -> int:
        hit = self.of_id.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        n = self.of_value.setdefault(v, len(self.of_value))
        if type(v) is tuple and self.dims + len(v) <= KEPT_DIMS:
            self.of_id[id(v)] = (v, n)
            self.dims += len(v)
        return n


class _Recording(dict):  # type: ignore[type-arg]
    """An environment that records the names read."""

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.seen: set[str] = set()

    def __getitem__(self, k: str) -> Any:
        self.seen.add(k)
        return super().__getitem__(k)

    def get(self, k: str, default: Any = None) -> Any:
        self.seen.add(k)
        return super().get(k, default)

    def __contains__(self, k: object) -> bool:
        self.seen.add(str(k))
        return super().__contains__(k)


def entries(o: Kind) -> tuple[str, ...]:
    """The residual entries obligation ``o`` names (read or written) under every key the
    semantics may look them up by (``a + b[1]``, ``a``, ``b``, ``b[1]``), and the far marks."""
    keys = {FAR}
    for n in (*o.names_read(), *o.names_written()):
        keys.add(n)  # as a whole (an entry of that name is read first, where there is one)
        for base, i in _parts(n):
            keys |= {base, f"{base}[{i}]"} if i is not None else {base}
    return tuple(sorted(keys))


class StepCache:
    """Per MLP obligation: its entries, and the entries it leaves for each combination of their
    codes.  The overrides (``special``) a cache is run with are the same on every call."""

    def __init__(self) -> None:
        self.names: dict[int, tuple[str, ...]] = {}
        self.done: dict[int, dict[Any, tuple[tuple[str, Any], ...]]] = {}
        self.sums: dict[tuple[int, tuple[int, ...], int], Code] = {}
        self.leaves: dict[int, tuple[Kind, ...]] = {}
        self.wide: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}  # per step: its names keyed on codes, on numbers
        self.unwritten: dict[int, tuple[str, ...]] = {}  # per obligation run: the codes its steps leave unwritten
        self.numbers = Numbers()

    def rows(self, o: SuffixLookup, key: tuple[int, ...], width: int) -> Code:
        """:func:`~.semantics.suffix_rows`, cached by (``o``, ``key``, ``width``)."""
        got = self.sums.get((id(o), key, width))
        if got is None:
            got = self.sums[id(o), key, width] = suffix_rows(o, key, width)
        return got

    def run(self, o: Kind, env: Env, special: Special) -> None:
        """``run_mlp(o, env, special)``, cached by the codes of the entries ``o`` names (a
        :class:`Steps` or :class:`Beside` part by part; a suffix lookup by its longest key)."""
        leaves = self.leaves.get(id(o))
        if leaves is None:
            leaves = self.leaves[id(o)] = _in_order(o, special)
            self.unwritten[id(o)] = unwritten(o)
        kept = {n: env[n] for n in self.unwritten[id(o)] if n in env}  # a Steps' unwritten codes keep their value
        for leaf in leaves:
            if type(leaf) is SuffixLookup and id(leaf) not in special:  # run on the residual, its rows' sums cached
                suffix_lookup(leaf, env, special, self.rows)
            else:
                self._run(leaf, env, special)
        env.update(kept)

    def _codes(self, o: Kind, names: tuple[str, ...], env: Env) -> Any:
        """The key of step ``o`` on ``env``: the codes of ``names``, those wider than :data:`WIDE`
        at its first run as their :class:`Numbers` numbers (equal codes, equal numbers)."""
        split = self.wide.get(id(o))
        if split is None:
            wide = tuple(n for n in names if type(env.get(n)) is tuple and len(env[n]) > WIDE)
            split = self.wide[id(o)] = (tuple(n for n in names if n not in wide), wide)
        narrow, wide = split
        if not wide:
            return tuple(map(env.get, narrow))
        return tuple(map(env.get, narrow)), tuple(self.numbers(env.get(n)) for n in wide)

    def _run(self, o: Kind, env: Env, special: Special) -> None:
        """One step that is neither a :class:`Steps` nor a :class:`Beside`, cached (module docstring)."""
        names = self.names.get(id(o))
        if names is None:
            names = self.names[id(o)] = entries(o)
            self.done[id(o)] = {}
        done = self.done[id(o)]
        codes = self._codes(o, names, env)
        got = done.get(codes)
        if got is None:
            rec = _Recording(env)
            run_mlp(o, rec, special)
            touched = rec.seen | {n for n in set(rec) | set(env) if dict.get(rec, n, _ABSENT) != env.get(n, _ABSENT)}
            if not touched <= set(names):  # a name the declaration does not list: key on it from now on
                names = self.names[id(o)] = tuple(sorted(touched | set(names)))
                done = self.done[id(o)] = {}  # the results keyed on fewer names are dropped
                self.wide.pop(id(o))
                codes = self._codes(o, names, env)
            got = done[codes] = tuple((n, dict.__getitem__(rec, n)) for n in names if n in dict.keys(rec))
        env.update(got)


def _in_order(o: Kind, special: Special) -> tuple[Kind, ...]:
    """The steps ``o`` runs one after another (:func:`~.semantics.in_order`, nested), each one
    that is neither a :class:`Steps` nor a :class:`Beside` or has an override."""
    parts = None if id(o) in special else in_order(o)
    return (o,) if parts is None else tuple(leaf for part in parts for leaf in _in_order(part, special))


class HeadCache:
    """Per head: the entries its obligation names, and (memory, what it adds) for each key."""

    def __init__(self) -> None:
        self.names: dict[int, tuple[str, ...]] = {}
        self.done: dict[Any, tuple[Any, Any]] = {}
        self.calls: dict[int, list[int]] = {}

    def step(self, f: Kind, h: Head, memory: Any, env: Env, t: int) -> tuple[Any, Any]:
        """``h.step(memory, env, t)`` for head obligation ``f``, cached by its memory, the codes of
        the entries ``f`` names and min(t, ``h.stable``) (the step is the same from ``h.stable`` on)."""
        calls = self.calls.setdefault(id(f), [0, 0])
        if calls[0] >= TRIAL and 2 * calls[1] < calls[0]:
            return h.step(memory, env, t)
        calls[0] += 1
        names = self.names.get(id(f))
        if names is None:
            names = self.names[id(f)] = entries(f)
        key = (id(f), names, memory, tuple(map(env.get, names)), min(t, h.stable))
        got = self.done.get(key)
        if got is not None:
            calls[1] += 1
            return got
        rec = _Recording(env)
        got = h.step(memory, rec, t)
        if not rec.seen <= set(names):  # a name the declaration does not list: key on it from now on
            names = self.names[id(f)] = tuple(sorted(rec.seen | set(names)))
            key = (id(f), names, memory, tuple(map(env.get, names)), min(t, h.stable))
        self.done[key] = got
        return got
