"""Permutations of 0..m-1 as image tuples, and their arithmetic (the holonomy groups' elements,
:mod:`compiler.automata.groups`)."""

from __future__ import annotations

from math import gcd

from .errors import ShortcutError

Perm = tuple[int, ...]
"""A permutation of 0..m-1 as an image tuple: ``p[x]`` is the image of x."""


class GroupError(ShortcutError):
    """An internal consistency check on a group failed (a bug, never the user's input)."""



def mul(p: Perm, q: Perm) -> Perm:
    """The permutation "apply p, then q" (sympy's ``p*q``)."""
    return tuple(q[x] for x in p)


def inverse(p: Perm) -> Perm:
    """The inverse permutation."""
    inv = [0] * len(p)
    for x, y in enumerate(p):
        inv[y] = x
    return tuple(inv)


def power(p: Perm, e: int) -> Perm:
    """``p`` multiplied with itself ``e`` times (e >= 0), by squaring."""
    result = tuple(range(len(p)))
    base = p
    while e:
        if e & 1:
            result = mul(result, base)
        e >>= 1
        if e:
            base = mul(base, base)
    return result


def cycle_lengths(p: Perm) -> list[int]:
    """The lengths of the cycles of a permutation (fixed points included), by first point."""
    seen = [False] * len(p)
    out = []
    for x in range(len(p)):
        if not seen[x]:
            length, y = 0, x
            while not seen[y]:
                seen[y] = True
                y = p[y]
                length += 1
            out.append(length)
    return out


def perm_order(p: Perm) -> int:
    """The order of a permutation: the lcm of its cycle lengths."""
    order = 1
    for length in cycle_lengths(p):
        order = order * length // gcd(order, length)
    return order


def is_even(p: Perm) -> bool:
    """Whether a permutation is even: a cycle of length l is l - 1 transpositions."""
    return sum(length - 1 for length in cycle_lengths(p)) % 2 == 0


def identity(m: int) -> Perm:
    return tuple(range(m))


def is_identity(p: Perm) -> bool:
    return all(x == y for x, y in enumerate(p))
