"""Finite abelian groups given by explicit element sets: the quotient N/M (:class:`Quotient`) and a
basis of cyclic factors of prime-power order (:func:`abelian_basis`), for the counters of one
abelian level of a derived series (:mod:`compiler.automata.groups`)."""

from __future__ import annotations

from typing import Sequence

from .perms import GroupError, Perm, is_identity, mul, perm_order, power


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        if n % p == 0:
            out.append(p)
            while n % p == 0:
                n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


class Quotient:
    """The abelian quotient N/M given by explicit element sets (M normal in N).

    Elements of the quotient are coset ids; ``rep[i]`` is an element of coset i.
    """

    def __init__(self, big: Sequence[Perm], small: set[Perm]):
        if not big or not is_identity(big[0]):
            raise GroupError("the elements of a group must be listed identity first")
        self.coset: dict[Perm, int] = {}
        self.rep: list[Perm] = []
        small_list = list(small)
        for x in big:
            if x in self.coset:
                continue
            cid = len(self.rep)
            self.rep.append(x)
            for n in small_list:
                y = mul(n, x)
                if y in self.coset:
                    raise GroupError("cosets of the derived subgroup overlap: it is not a subgroup")
                self.coset[y] = cid
        if len(self.coset) != len(big):
            raise GroupError("cosets do not cover the group: the series is not a subgroup chain")
        self.order = len(self.rep)
        self._orders: dict[int, int] = {}

    def op(self, a: int, b: int) -> int:
        return self.coset[mul(self.rep[a], self.rep[b])]

    def pow(self, a: int, e: int) -> int:
        return self.coset[power(self.rep[a], e)]

    def elem_order(self, a: int) -> int:
        """Order of coset a: the least divisor k of the order of its representative with rep^k in M."""
        cached = self._orders.get(a)
        if cached is not None:
            return cached
        self._orders[a] = k = self._elem_order(a)
        return k

    def _elem_order(self, a: int) -> int:
        x = self.rep[a]
        n = perm_order(x)
        k = n
        for p in _prime_factors(n):
            while k % p == 0 and self.coset[power(x, k // p)] == 0:
                k //= p
        return k

    def order_mod(self, a: int, span: dict[int, tuple[int, ...]], p: int) -> int:
        """Least p^j with a^(p^j) in ``span`` (a in a p-group)."""
        k, x = 1, a
        while x not in span:
            x = self.pow(x, p)
            k *= p
        return k


def _span(q: Quotient, basis: list[tuple[int, int]]) -> dict[int, tuple[int, ...]]:
    """Every element of the subgroup spanned by ``basis`` [(element, order)], with its exponents."""
    span: dict[int, tuple[int, ...]] = {0: ()}
    for a, m in basis:
        new: dict[int, tuple[int, ...]] = {}
        for x, c in span.items():
            y = x
            for e in range(m):
                new.setdefault(y, c + (e,))
                y = q.op(y, a)
        span = new
    return span


def _p_basis(q: Quotient, part: list[int], p: int) -> list[tuple[int, int]]:
    """A basis of the abelian p-group ``part`` (coset ids), largest orders first.

    Greedy with correction (the standard proof that a finite abelian p-group is a
    direct sum of cyclic groups): take y of maximal order p^b modulo the span H
    of the basis so far; then p^b·y = sum t_i x_i with p^b | t_i, and
    y - sum (t_i / p^b) x_i has order exactly p^b and meets H trivially.
    """
    basis: list[tuple[int, int]] = []
    span = _span(q, basis)
    while len(span) < len(part):
        best, best_order = None, 0
        for y in part:
            k = q.order_mod(y, span, p)
            if k > best_order:
                best, best_order = y, k
        if best is None:
            raise GroupError("no element outside the span of the basis")
        t = span[q.pow(best, best_order)]
        y = best
        for (a, m), ti in zip(basis, t):
            if ti % best_order:
                raise GroupError("abelian basis correction failed (not a p-group?)")
            y = q.op(y, q.pow(a, (m - ti // best_order) % m))
        if q.elem_order(y) != best_order:
            raise GroupError("abelian basis element has the wrong order")
        basis.append((y, best_order))
        span = _span(q, basis)
    return basis


def abelian_basis(q: Quotient) -> list[tuple[int, int]]:
    """A basis of the abelian group ``q`` in invariant-factor form [(element, order)].

    Prime-power bases are found per prime, then the k-th largest factors of the
    primes are multiplied together (orders coprime, so their product has the
    product order): Z_2 × Z_3 becomes one Z_6, so a level needs as few counters
    as the rank of the factor.
    """
    if q.order == 1:
        return []
    per_prime = []
    for p in _prime_factors(q.order):
        part = [x for x in range(q.order) if _is_p_power(q.elem_order(x), p)]
        per_prime.append(_p_basis(q, part, p))
    rank = max(len(b) for b in per_prime)
    combined = []
    for k in range(rank):
        x, m = 0, 1
        for b in per_prime:
            if k < len(b):
                x = q.op(x, b[k][0])
                m *= b[k][1]
        combined.append((x, m))
    return combined


def _is_p_power(n: int, p: int) -> bool:
    while n % p == 0:
        n //= p
    return n == 1
