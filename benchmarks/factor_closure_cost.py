"""What one closure of the factor search costs: a fixed part and a part per row and letter class.

Runs the factor detection (:func:`compiler.automata.factors.detect`, with a large budget) on
generated languages, collects every description it closes, then times each closure again alone
(``closure_of`` with its tracker, CPU seconds, best of three) and the passes a kept closure still
gets (``conflict`` and ``confused_share``).  Least squares: closure time = a + b * rows * classes,
pass time = c + d * rows.  ``a / b`` is the fixed cost per closure in the budget's unit
(:data:`compiler.automata.factors.CLOSURE_COST`), ``d / b`` what reading a kept row costs in it.

    OPENBLAS_NUM_THREADS=1 python benchmarks/factor_closure_cost.py
    OPENBLAS_NUM_THREADS=1 python benchmarks/factor_closure_cost.py --language ltt:4:64:0:factors=5
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.automata import factor_closure, factors  # noqa: E402
from compiler.automata.subregular_families import random_language  # noqa: E402

DEFAULT = ("ltt:4:64:0:factors=5", "lt:4:64:1:factors=5", "sl:6:64:0:factors=5", "ltt:4:16:0:factors=4")


def descriptions(language: str, most: int) -> tuple[np.ndarray, int, list[tuple]]:
    """The class maps, the start and up to ``most`` distinct descriptions the detection closes."""
    cls, k, letters, seed, *rest = language.split(":")
    extra = {n: int(v) for n, v in (kv.split("=") for kv in rest[0].split(","))} if rest else {}
    a = random_language(cls, k=int(k), letters=int(letters), seed=int(seed), **extra)
    keys: dict[tuple, None] = {}
    closure = factors._Memo.closure

    def record(memo: factors._Memo, maps: np.ndarray, q0: int, key: tuple) -> tuple:
        keys.setdefault(key)
        return closure(memo, maps, q0, key)

    setattr(factors._Memo, "closure", record)  # noqa: B010 (a recorder around the method, undone below)
    try:
        factors.detect(a, budget=4 * factors.MAX_WORK)
    finally:
        setattr(factors._Memo, "closure", closure)  # noqa: B010
    maps, _ = factors.class_maps(a)
    return maps, a.start, list(keys)[:most]


def timed(maps: np.ndarray, q0: int, key: tuple) -> tuple[float, float, int] | None:
    """(closure CPU s, passes CPU s, rows), best of three; None for a closure over its size."""
    k, threshold, windows, facs, groups = key
    best, passes = float("inf"), float("inf")
    for _ in range(3):
        t0 = time.process_time()
        tr = factor_closure.tracker(k, maps.shape[0] + 1, windows, facs, groups)
        try:
            cl = factor_closure.closure_of(maps, tr, q0, max(groups) + 1 if groups else 0, threshold)
        except factor_closure.TooBig:
            return None
        t1 = time.process_time()
        factor_closure.conflict(cl)
        factor_closure.confused_share(cl)
        best, passes = min(best, t1 - t0), min(passes, time.process_time() - t1)
    return best, passes, len(cl.q)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--language", action="append", default=[], help="cls:k:letters:seed[:name=v,...] (repeatable)")
    ap.add_argument("--most", type=int, default=150, help="descriptions timed per language")
    args = ap.parse_args(argv)
    rows = []
    for language in args.language or DEFAULT:
        maps, q0, keys = descriptions(language, args.most)
        got = [r for r in (timed(maps, q0, key) for key in keys) if r is not None]
        rows += [(c, p, n, maps.shape[0]) for c, p, n in got]
        print(f"{language}: {len(got)} closures, {maps.shape[0]} letter classes", flush=True)
    r = np.array(rows)
    (a, b), *_ = np.linalg.lstsq(np.c_[np.ones(len(r)), r[:, 2] * r[:, 3]], r[:, 0], rcond=None)
    (c, d), *_ = np.linalg.lstsq(np.c_[np.ones(len(r)), r[:, 2]], r[:, 1], rcond=None)
    print(f"closure: {a:.2e} s fixed + {b:.2e} s per row x class -> fixed cost {a / b:,.0f} row x class units")
    print(f"kept (conflict + share passes): {c:.2e} s fixed + {d:.2e} s per row -> {d / b:.2f} units per row")
    print(f"{len(r)} closures, {int(r[:, 2].min())}..{int(r[:, 2].max())} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
