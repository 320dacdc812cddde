"""Positional codes and offset selection (Proposition 2).

Two codes for position t (position 0 is BOS and gets the zero code; heads find
BOS through the ``bos`` dimension instead):

* ``sinusoidal`` (default): cos/sin of pi*t/2^k for k = 0..K, K = ceil(log2(T+1)).
  For offsets m = j - t' with 0 < |m| < 2^(K+1) some term is cos(pi*odd) = -1, so
  sum_k cos(pi*m/2^k) <= K - 1 while m = 0 scores K + 1: a gap of 2 at every T.
* ``circle`` (the paper's Theorem 10): cos/sin of pi*t/T.  The gap is
  1 - cos(pi/T) ~ pi^2/(2T^2), which float32 cannot resolve for large T.

Selecting "the position t - offset" is a fixed rotation of t's code, so the query
is linear in the code: ``code(t) @ rotation(offset) == code(t - offset)``.
The table is computed in float64 from integers and cast once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

KINDS = ("sinusoidal", "circle")


@dataclass(frozen=True)
class PositionCode:
    """Angles ``pi * t / periods[k]`` for each frequency k (one cos and one sin dim each)."""

    kind: str
    max_len: int
    periods: tuple[int, ...]

    @property
    def dim(self) -> int:
        return 2 * len(self.periods)

    @property
    def labels(self) -> list[str]:
        return [f"{f}{k}" for k in range(len(self.periods)) for f in ("cos", "sin")]

    def code(self, t: np.ndarray | int) -> np.ndarray:
        """Codes [.., dim] of integer positions (computed in float64)."""
        t = np.asarray(t, dtype=np.float64)[..., None]
        ang = math.pi * t / np.asarray(self.periods, dtype=np.float64)
        out = np.empty(t.shape[:-1] + (self.dim,))
        out[..., 0::2] = np.cos(ang)
        out[..., 1::2] = np.sin(ang)
        return out

    def rotation(self, offset: int) -> np.ndarray:
        """R with ``code(t) @ R == code(t - offset)`` for every t."""
        R = np.zeros((self.dim, self.dim))
        for k, p in enumerate(self.periods):
            a = math.pi * offset / p
            c, s = math.cos(a), math.sin(a)
            # [cos x, sin x] -> [cos(x-a), sin(x-a)] = [c cos x + s sin x, c sin x - s cos x]
            R[2 * k : 2 * k + 2, 2 * k : 2 * k + 2] = [[c, -s], [s, c]]
        return R

    @property
    def match_score(self) -> float:
        """Score <code(t'), code(t')> of the wanted position."""
        return float(len(self.periods))

    @property
    def miss_score(self) -> float:
        """Largest score of any other position within range (proof in the module doc)."""
        if self.kind == "sinusoidal":
            return float(len(self.periods) - 2)
        return math.cos(math.pi / self.periods[0])


    def precision_margin(self, eps: float) -> float:
        """How many times the half score gap exceeds a rounding bound for this dtype.

        A score is a sum over the frequencies of products of unit-circle entries, each
        stored with relative error ``eps``: its error is at most about 4 eps per
        frequency.  Below 1 the dtype can no longer tell the wanted position from its
        neighbours (the circle code in float32 at a few thousand positions)."""
        return ((self.match_score - self.miss_score) / 2) / (4 * eps * len(self.periods))


def position_code(kind: str, max_len: int) -> PositionCode:
    """The code used for models of length ``max_len``."""
    if kind == "sinusoidal":
        K = max(1, math.ceil(math.log2(max_len + 1)))
        return PositionCode(kind, max_len, tuple(2**k for k in range(K + 1)))
    if kind == "circle":
        return PositionCode(kind, max_len, (max_len,))
    raise ValueError(f"unknown positions {kind!r}; choose one of {KINDS}")


def position_table(code: PositionCode) -> np.ndarray:
    """[max_len + 1, dim]: row t is code(t); row 0 (BOS) is zero."""
    table = code.code(np.arange(code.max_len + 1))
    table[0] = 0.0
    return table
