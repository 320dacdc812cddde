"""The cascade's tables (step 4 of :mod:`compiler.automata.decompose`): the row budget and the
minimisation of a table's reads (greedy, last read first, vectorised)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .errors import BudgetError


class TableBudget:
    """Counts table rows against the table budget."""

    def __init__(self, limit: int):
        self.limit, self.used = limit, 0

    def add(self, n: int) -> None:
        self.used += n
        if self.used > self.limit:
            raise BudgetError(
                f"the cascade's tables need more than {self.limit} rows (table budget); "
                f"use the scan construction for this automaton"
            )


_CODE_LIMIT = 2 ** 62


def _combine(code, bound: int, col, r: int):
    """Group code of (code, col) for rows; ``bound`` bounds code, ``r`` bounds col.  Re-numbers
    the groups as 0..k-1 when the mixed-radix code would overflow int64."""
    if bound * r >= _CODE_LIMIT:
        uniq, code = np.unique(code, return_inverse=True)
        code, bound = code.reshape(-1).astype(np.int64), len(uniq)
    return code * r + col, bound * r


def _needed(mat, outs, n_reads: int, tried: Sequence[int], extra: Sequence[int] = ()) -> list[int]:
    """Greedy minimal read set: columns 0..n_reads-1 of ``mat`` (non-negative ints), dropping those
    in ``tried`` (last first) while rows agreeing on the remaining columns (and on the columns
    ``extra``) keep equal ``outs``.  Vectorised: prefix group codes are computed once, the
    suffix code grows as columns are kept, and each test is one sort."""
    n = mat.shape[0]
    dropping = set(tried)
    if len(np.unique(outs)) <= 1:
        return [i for i in range(n_reads) if i not in dropping]
    radix = [int(r) for r in mat.max(axis=0) + 1] if n else [1] * mat.shape[1]
    prefix = [(np.zeros(n, dtype=np.int64), 1)]
    for c in range(n_reads):
        prefix.append(_combine(*prefix[-1], mat[:, c], radix[c]))
    suffix, sbound = np.zeros(n, dtype=np.int64), 1
    for c in extra:
        suffix, sbound = _combine(suffix, sbound, mat[:, c], radix[c])
    keep = []
    for j in reversed(range(n_reads)):
        if j in dropping:
            pcode, pbound = prefix[j]
            if pbound * sbound >= _CODE_LIMIT:
                uniq, pcode = np.unique(pcode, return_inverse=True)
                pcode = pcode.reshape(-1).astype(np.int64)
            code = pcode * sbound + suffix
            order = np.lexsort((outs, code))
            sc, so = code[order], outs[order]
            if not np.any((sc[1:] == sc[:-1]) & (so[1:] != so[:-1])):
                continue
        keep.append(j)
        if sbound >= 1 << 40:
            uniq, suffix = np.unique(suffix, return_inverse=True)
            suffix, sbound = suffix.reshape(-1).astype(np.int64), len(uniq)
        suffix, sbound = mat[:, j] * sbound + suffix, sbound * radix[j]
    return sorted(keep)


def minimise(reads: Sequence[str], table: dict, letter_keyed: bool = True,
             candidates: Sequence[int] | None = None) -> tuple[tuple[str, ...], dict]:
    """Drop every read the table does not depend on (greedy, last read first).

    A read can go when the table stays a function after forgetting it -- over
    the keys listed, which cover every reachable configuration.  Only the reads
    at positions ``candidates`` (default: all) are tried.  Returns the kept
    reads and the table keyed by them.  Tables are keyed ``(values, letter)``,
    or ``values`` alone when not ``letter_keyed``.
    """
    tried = list(range(len(reads)) if candidates is None else candidates)
    if not tried or not table:
        return tuple(reads), table
    keys = [vals + (a,) for vals, a in table] if letter_keyed else list(table)
    ids: dict = {}
    outs = np.fromiter((ids.setdefault(o, len(ids)) for o in table.values()), dtype=np.int64, count=len(table))
    mat = np.asarray(keys, dtype=np.int64).reshape(len(keys), -1)
    mat = mat - mat.min(axis=0, initial=0)
    keep = _needed(mat, outs, len(reads), tried, [len(reads)] if letter_keyed else [])
    if len(keep) == len(reads):
        return tuple(reads), table
    proj: dict = {}
    for k, out in zip(keys, table.values()):
        pk = tuple([k[i] for i in keep])
        proj[(pk, k[-1]) if letter_keyed else pk] = out
    return tuple(reads[i] for i in keep), proj


def minimise_rows(up_reads: tuple[str, ...], upkeys: list[tuple[int, ...]], umat, outs: list[list]
                   ) -> tuple[tuple[str, ...], dict]:
    """:func:`minimise` for a table given per node (upper key) and letter: ``outs[node][letter]``."""
    n_letters = len(outs[0]) if outs else 0
    ids: dict = {}
    flat = np.fromiter((ids.setdefault(o, len(ids)) for row in outs for o in row), dtype=np.int64,
                       count=len(outs) * n_letters)
    mat = np.concatenate([np.repeat(umat, n_letters, axis=0),
                          np.tile(np.arange(n_letters, dtype=np.int64), len(outs))[:, None]], axis=1)
    keep = _needed(mat, flat, len(up_reads), range(len(up_reads)), [len(up_reads)])
    rows = {}
    for key, row in zip(upkeys, outs):
        pk = tuple([key[i] for i in keep])
        for a, o in enumerate(row):
            rows[(pk, a)] = o
    return tuple(up_reads[i] for i in keep), rows

