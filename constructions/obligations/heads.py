"""The heads' obligations: which key each attention head must attend to from every query
position, and what it copies (or sums) where.  Each writes its ``dst``, which holds 0 (or one
known code) before the head."""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from .kind import ARRAY, CODE_SET, TUPLE, Kind, registered


@registered
@dataclass(frozen=True)
class Fetch(Kind):
    """Head ``head`` must attend, from every query position t, to ``key[t]`` (0 is BOS) and
    copy subspace ``src`` there into ``dst`` (which holds 0 before the head)."""

    kind = "fetch"
    LABELS, READS, WRITES, CODECS = ("head",), ("src",), ("dst",), {"key": ARRAY}

    head: str
    key: np.ndarray  # [max_len + 1] int
    src: str
    dst: str


@registered
@dataclass(frozen=True)
class Recent(Kind):
    """Head ``head`` must attend, from every query position t, to the most recent position s <= t
    whose ``flag`` (one dim, code 0 or 1) is 1 -- BOS's is -- and copy ``src`` there into ``dst``
    (which holds 0 before the head): Lemma 16's most-recent flag.  Which key that is depends on
    the input, so the checker bounds the pattern for every position the key can be."""

    kind = "recent"
    LABELS, READS, WRITES = ("head",), ("flag", "src"), ("dst",)

    head: str
    flag: str
    src: str
    dst: str


@registered
@dataclass(frozen=True)
class Average(Kind):
    """Heads ``heads`` (head h over the keys ``first[h]`` .. min(``last[h]``, t)) together write into
    ``dst``, from every query position t, ``scale`` / ``mass`` times the sum of ``src`` over their
    keys: weight 1/mass on each, the rest on BOS, whose ``src`` holds 0 (Lemma 15's prefix mean;
    one head over 1..T, or one per position block).  ``dst`` holds 0 before the heads."""

    kind = "average"
    LABELS, READS, WRITES = ("heads",), ("src",), ("dst",)
    CODECS = {"heads": TUPLE, "first": TUPLE, "last": TUPLE}

    heads: tuple[str, ...]
    first: tuple[int, ...]
    last: tuple[int, ...]
    mass: int
    scale: float
    src: str
    dst: str


@registered
@dataclass(frozen=True)
class Match(Kind):
    """Head ``head`` must attend, from every query position t, to the most recent position s in
    1..t whose ``key`` code is ``codes[match[i]]`` when t's ``query`` code is ``codes[i]`` -- or to
    BOS when there is none -- and copy ``src`` there (a tracked subspace, or a positional one such
    as the position index itself) into ``dst`` (which holds 0 before the head): Theorem 12's
    nearest value (the last visit to a level).  Which key that is depends on the input, so the
    checker bounds the pattern for every query code and every position the key can be."""

    kind = "match"
    LABELS, READS, WRITES = ("head",), ("query", "key", "src"), ("dst",)
    CODECS = {"codes": ARRAY, "match": ARRAY}

    head: str
    query: str
    key: str
    codes: np.ndarray  # [n, dims]: every code query and key may hold (after BOS)
    match: np.ndarray  # [n] int: the key code each query code looks for
    src: str
    dst: str


@registered
@dataclass(frozen=True)
class Latest(Kind):
    """Head ``head`` must attend, from every query position t, to the most recent position
    1 <= s <= t whose ``keys`` (the input-dependent dims its key reads besides fixed ones) hold one
    of the codes ``match`` -- BOS when there is none -- and copy the sum of the ``src`` subspaces
    there into ``dst`` (0 before).  :class:`Recent` with a flag that is a set of codes: a bounded
    stack's level head takes the last push that raised the depth to its level (match: level
    bit 1 and push bit 1).  Which key wins depends on the input, so the checker bounds the
    pattern for every position the key can be (``verify/certify/latest.py``)."""

    kind = "latest"
    LABELS, READS, WRITES = ("head",), ("keys", "src"), ("dst",)
    CODECS = {"match": CODE_SET, "src": TUPLE}

    head: str
    keys: str
    match: tuple[tuple[int, ...], ...]
    src: tuple[str, ...]
    dst: str


@registered
@dataclass(frozen=True)
class AnyFlag(Kind):
    """Head ``head`` scores every position s <= t (BOS included) by its ``flags`` (one dim, or
    several summed: a non-negative integer code) and copies that sum into ``dst`` (0 before):
    ``dst`` is then exactly 0 at t when no s <= t has a nonzero flag, and at least a bound the
    checker computes when one has ("some error so far", the bounded stack's layer 3).  Not a
    code: only a :class:`~.mlps.Threshold` in the same layer may read it."""

    kind = "any-flag"
    LABELS, READS, WRITES = ("head",), ("flags",), ("dst",)

    head: str
    flags: str
    dst: str


HeadKind = Fetch | Recent | Average | Match | Latest | AnyFlag
"""Every head obligation kind."""


def offset_keys(max_len: int, offset: int, skip_below: int = 0) -> np.ndarray:
    """The key of an offset head (Theorem 10's look-back) at every query position t = 0..max_len:
    t - offset when that position exists and lies beyond the first ``skip_below`` positions,
    else BOS (0)."""
    t = np.arange(max_len + 1)
    s = t - offset
    return np.where((s >= 1) & (s > skip_below), s, 0)


def absolute_keys(max_len: int, position: int) -> np.ndarray:
    """The key of an absolute head: ``position`` once it exists (t >= position), else BOS."""
    t = np.arange(max_len + 1)
    return np.where(t >= position, position, 0)
