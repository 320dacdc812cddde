"""The MLPs' obligations: a finite function of integer codes each MLP (or each step fused into
one MLP) must compute.  Every subspace an MLP writes holds 0 (or one known code) before it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kind import ARRAY, KIND, KIND_TUPLE, TABLE, TUPLE, Codec, Container, Kind, Part, registered


@registered
@dataclass(frozen=True)
class Compose(Kind):
    """MLP ``mlp`` composes transition maps held as integer codes (one dim per point):
    ``maps[q]`` holds f(q), ``fetched[q]`` holds g(q); the result is f(g(q)) ("g, then f").
    ``into`` names where the result goes: ``maps`` (and ``fetched`` is cleared to 0) or
    ``fetched`` (and ``maps`` is left as it is)."""

    kind = "compose"
    LABELS, READS, WRITES, NAMES = ("mlp",), ("maps", "fetched"), ("maps", "fetched"), ("into",)

    mlp: str
    maps: str
    fetched: str
    into: str


@registered
@dataclass(frozen=True)
class Lookup(Kind):
    """MLP ``mlp`` maps the integer codes of ``reads`` (every dim of each, in order) to the code
    ``table[key]`` added into ``out`` (which holds one known code before: 0, or at BOS what BOS
    wrote there); a key missing from the table must never occur -- or, with a ``default``, writes
    that code (a lookup whose units match no key writes 0)."""

    kind = "lookup"
    LABELS, READS, WRITES = ("mlp",), ("reads",), ("out",)
    CODECS, OPTIONAL = {"reads": TUPLE, "table": TABLE, "default": ARRAY}, ("default",)

    mlp: str
    reads: tuple[str, ...]
    out: str
    table: dict[tuple[int, ...], np.ndarray]
    default: np.ndarray | None = None


@registered
@dataclass(frozen=True)
class SuffixLookup(Kind):
    """MLP ``mlp`` adds into ``out`` (0 before) the sum of ``rows[key]`` over every key the integer
    codes of ``reads`` (every dim of each, in order) start with -- a key fixes the leading codes
    only, so the keys a combination starts with form a chain (Lemma 11 with suffix keys: a
    window's patterns, their values telescoping, each a unit on its last letters); no key
    started: 0.  Unlike :class:`Lookup` it never lists the combinations, only the keys."""

    kind = "suffix-lookup"
    LABELS, READS, WRITES, CODECS = ("mlp",), ("reads",), ("out",), {"reads": TUPLE, "rows": TABLE}

    mlp: str
    reads: tuple[str, ...]
    out: str
    rows: dict[tuple[int, ...], np.ndarray]

    def value(self, codes: tuple[int, ...], width: int) -> np.ndarray:
        """The code written for the combination ``codes``: the rows of every key it starts with, summed."""
        total = np.zeros(width)
        for n in range(len(codes) + 1):
            row = self.rows.get(codes[:n])
            if row is not None:
                total = total + np.asarray(row, dtype=np.float64).reshape(-1)
        return total


@registered
@dataclass(frozen=True)
class Modular(Kind):
    """An MLP step ``name``: X = ``scale`` * (the code of ``reads``, one dim) + ``shift`` is an
    integer; ``out`` gets ``table[X mod p]`` (p = len(table)) and, with ``minus`` (a dim holding an
    integer D), ``minus_out`` gets ``table[(X - D) mod p]`` (a counter's value before the update
    at t; Lemma 15's decode).  Both hold 0 before."""

    kind = "modular"
    LABELS, READS, WRITES, CODECS = ("name",), ("reads", "minus"), ("out", "minus_out"), {"table": ARRAY}

    name: str
    reads: str
    scale: float
    shift: int
    table: np.ndarray  # [p, dims of out]
    out: str
    minus: str | None = None
    minus_out: str | None = None


@registered
@dataclass(frozen=True)
class Round(Kind):
    """An MLP step ``name``: ``dst`` (0 before) gets the integer code nearest to ``src``'s (a copy
    an attention head left, with noise below 1/4), and ``src`` is cleared to 0 (scratch)."""

    kind = "round"
    LABELS, READS, WRITES = ("name",), ("src",), ("dst", "src")

    name: str
    src: str
    dst: str


@dataclass(frozen=True)
class Race(Part):
    """One term of a :class:`Races` MLP: 1 when the recency ``first`` is larger than ``second``
    (each 0 for "never", else a position); when both are 0, 1 exactly when the sum of the integer
    codes of ``level`` is at least ``threshold``; else 0.  The term adds into ``out``."""

    READS, WRITES, CODECS = ("first", "second", "level"), ("out",), {"level": TUPLE}

    first: str
    second: str
    level: tuple[str, ...]
    threshold: int
    out: str


@registered
@dataclass(frozen=True)
class Races(Kind):
    """MLP ``mlp`` writes into each ``out`` (0 before) the sum of its :class:`Race` terms: which of
    two last visits is more recent, a count of comparisons (Theorem 12's boundary count,
    Algorithm 1 / Lemma 22 as a sum).  The recencies range over every position, so the checker
    proves the terms on cells of the order of each pair (which is larger, or both 0), not per
    value."""

    kind = "races"
    LABELS, INNER = ("mlp",), ("races",)
    CODECS = {"races": Codec(lambda rs: [r.to_json() for r in rs], lambda ds: tuple(Race.from_json(d) for d in ds))}

    mlp: str
    races: tuple[Race, ...]


@registered
@dataclass(frozen=True)
class Threshold(Kind):
    """MLP ``mlp`` reads what an :class:`~.heads.AnyFlag` head left in ``src`` and writes into
    ``dst`` (0 before) exactly the bit "some flag so far": 0 where ``src`` is 0, 1 where it is at
    least the head's bound."""

    kind = "threshold"
    LABELS, READS, WRITES = ("mlp",), ("src",), ("dst",)

    mlp: str
    src: str
    dst: str


@registered
@dataclass(frozen=True)
class Steps(Container):
    """MLP ``mlp`` runs ``steps`` one after another (stages fused into one MLP): each reads the
    residual as the earlier steps left it; every subspace a step writes holds 0 before the MLP.
    With ``first`` (a :class:`Compose` or :class:`Races`: a scan's or gridworld's last MLP with a
    label lookup fused after it) that MLP's work runs before the steps, which then read its result
    (they are :class:`Lookup` s)."""

    kind = "steps"
    LABELS, INNER, NAMES = ("mlp",), ("first", "steps"), ("unwritten",)
    CODECS, OPTIONAL = {"steps": KIND_TUPLE, "first": KIND, "unwritten": TUPLE}, ("first", "unwritten")

    mlp: str
    steps: tuple[Lookup | Modular | Round, ...]
    first: Compose | Races | None = None
    unwritten: tuple[str, ...] | None = None
    """Subspaces a step computes for later steps that the MLP does not write (a code read off the
    same units by the steps after it): they keep their value (0) in the residual."""

    def names_written(self) -> tuple[str, ...]:
        return tuple(n for n in super().names_written() if n not in (self.unwritten or ()))


@registered
@dataclass(frozen=True)
class Beside(Container):
    """MLP ``mlp`` is several MLPs side by side (a direct product, Lemma 17): each part's hidden
    units read and write only its own subspaces, and each part runs its own obligation."""

    kind = "beside"
    LABELS, INNER, CODECS = ("mlp",), ("parts",), {"parts": KIND_TUPLE}

    mlp: str
    parts: tuple[Compose | Lookup | SuffixLookup | Steps | Races | Threshold, ...]


MLPKind = Compose | Lookup | SuffixLookup | Steps | Beside | Races | Threshold
"""Every kind a layer's MLP obligation may be (:class:`Modular` and :class:`Round` are steps)."""
