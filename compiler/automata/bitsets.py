"""Sets of states as integer bitmasks, their images under maps, and powers and orders of maps
(the holonomy decomposition's arithmetic, :mod:`compiler.automata.holonomy`)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .semigroup import Map


def popcount(x: int) -> int:
    """Number of states in a bitmask set."""
    return x.bit_count()


def members(mask: int) -> list[int]:
    """The states of a bitmask set, in increasing order."""
    if mask.bit_length() > 256:
        return member_array(mask).tolist()
    bits = bin(mask)[:1:-1]  # string search: shifting a |Q|-bit integer bit by bit is quadratic in |Q|
    out, i = [], bits.find("1")
    while i >= 0:
        out.append(i)
        i = bits.find("1", i + 1)
    return out


def member_array(mask: int) -> np.ndarray:
    """The states of a bitmask set as an array, in increasing order (unpacked by numpy)."""
    raw = np.frombuffer(mask.to_bytes((mask.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little"))


class SetMapper:
    """Images of bitmask sets under fixed maps.

    Up to 64 states: 8-bit chunk lookup tables per map (built on first use);
    beyond that, the set unpacked to an array and gathered through the map
    (building tables would cost |maps|·|Q|·256 operations up front).
    """

    def __init__(self, n: int, maps: Sequence[Map]):
        self.n = n
        self.maps = maps
        self.chunks = (n + 7) // 8
        self.tables: list[list[list[int]] | None] = [None] * len(maps)
        self.arrays: np.ndarray | None = None

    def _build(self, a: int) -> list[list[int]]:
        m, n = self.maps[a], self.n
        tabs = []
        for k in range(self.chunks):
            tab = [0] * 256
            for byte in range(1, 256):
                low = byte & -byte
                bit = low.bit_length() - 1
                q = 8 * k + bit
                tab[byte] = tab[byte ^ low] | ((1 << m[q]) if q < n else 0)
            tabs.append(tab)
        self.tables[a] = tabs
        return tabs

    def image(self, mask: int, a: int) -> int:
        """The image of the set ``mask`` under map ``a``."""
        if self.n > 64:
            return self._vector_image(mask, a)
        tabs = self.tables[a] or self._build(a)
        r = 0
        for k, tab in enumerate(tabs):
            r |= tab[(mask >> (8 * k)) & 255]
        return r

    def _vector_image(self, mask: int, a: int) -> int:
        """:func:`set_image` for many states: the set's bits unpacked, gathered through the map and
        packed again by numpy (O(|Q|) in C rather than a Python step per member)."""
        if self.arrays is None:
            self.arrays = np.asarray(self.maps, dtype=np.int64)
        nbytes = (self.n + 7) // 8
        bits = np.unpackbits(np.frombuffer(mask.to_bytes(nbytes, "little"), dtype=np.uint8), bitorder="little")
        out = np.zeros(8 * nbytes, dtype=np.uint8)
        out[self.arrays[a][np.flatnonzero(bits[:self.n])]] = 1
        return int.from_bytes(np.packbits(out, bitorder="little").tobytes(), "little")


def set_image(mask: int, m: Map) -> int:
    """The image P·m of a bitmask set under an arbitrary map (one step per member)."""
    r = 0
    while mask:
        low = mask & -mask
        r |= 1 << m[low.bit_length() - 1]
        mask ^= low
    return r


def order_on(m: Map, points: list[int]) -> int:
    """The smallest k >= 1 with m^k the identity on ``points`` (which m permutes): the least
    common multiple of its cycle lengths there."""
    order, seen = 1, set()
    for x in points:
        if x in seen:
            continue
        length, y = 0, x
        while y not in seen:
            seen.add(y)
            y = m[y]
            length += 1
        order = math.lcm(order, length)
    return order


def power(m: Map, k: int) -> Map:
    """The map m applied k times (the identity for k = 0), by repeated squaring."""
    base = np.asarray(m, dtype=np.int64)
    out = np.arange(len(m), dtype=np.int64)
    while k:
        if k & 1:
            out = base[out]
        base = base[base]
        k >>= 1
    return tuple(int(x) for x in out)


