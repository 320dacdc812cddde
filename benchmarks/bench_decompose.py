"""Krohn–Rhodes decomposition times: catalog automata, full transformation monoids, random automata.

Prints one markdown row per automaton: states, letters, semigroup size,
holonomy levels, cascade levels, components (counters/resets/groups), table
rows, wall and CPU seconds of ``compiler.automata.decompose`` (which includes its own
verification), and the outcome -- or the one-line BudgetError that stopped it.
Targets: every catalog automaton under 1 s, T6 under 10 s, random 16-state
4-letter automata under 5 s (decomposed, or stopped by a budget).  Example:

    python benchmarks/bench_decompose.py --random 8 --seed 1
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time

from compiler.automata import catalog
from compiler.automata.cascade import summary_json
from compiler.automata.decompose import decompose
from compiler.automata.errors import BudgetError
from compiler.automata.spec import Semiautomaton

CATALOG = catalog.paper_suite() + ["parity", "flipflop", "memory:3", "grid2d:3,4", "grid:9,noop", "dyck:3,3",
                                   "dihedral:10", "cyclic-product:4,6", "alternating:6", "symmetric:6",
                                   "grid2d:5,5", "dyck:6,2", "memory:50"]


def full_transformation_monoid(n: int) -> Semiautomaton:
    """T_n from an n-cycle, a transposition and a rank-(n-1) collapse."""
    maps = (tuple(list(range(1, n)) + [0]), (1, 0) + tuple(range(2, n)), (0, 0) + tuple(range(2, n)))
    return Semiautomaton(f"T{n}", tuple(map(str, range(n))), ("cycle", "swap", "collapse"), maps, 0)


def random_automaton(rng: random.Random, n: int, k: int, family: str, i: int) -> Semiautomaton:
    """``uniform``: every letter an arbitrary map; ``mixed``: as in the property test."""
    return catalog.random_automaton(rng, n, k, family, name=f"random-{family}-{n}x{k}#{i}")


def row(a: Semiautomaton | str) -> str:
    name = a if isinstance(a, str) else a.name
    a = catalog.build(a) if isinstance(a, str) else a
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        c = decompose(a)
    except BudgetError as e:
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return (f"| {name} | {a.n_states} | {a.n_symbols} | | | | | | {wall:.2f} | {cpu:.2f} | "
                f"BudgetError: {e} |")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = summary_json(c)
    kinds = [x["kind"] for lvl in s["levels"] for x in lvl]
    comps = "/".join(str(kinds.count(k)) for k in ("counter", "reset", "group"))
    rows = sum(x["table_rows"] for lvl in s["levels"] for x in lvl)
    size = s["semigroup_size"] if s["semigroup_size"] is not None else f">{s['semigroup_size_exceeds']}"
    how = "exhaustive" if s["verification"]["final_tables_exhaustive"] else "by level"
    extra = "" if s["solvable"] else f", contains {', '.join(s['non_solvable_groups'])}"
    return (f"| {name} | {a.n_states} | {a.n_symbols} | {size} | {s['holonomy_levels']} | {s['n_levels']} | "
            f"{comps} | {rows:,} | {wall:.2f} | {cpu:.2f} | verified ({how}){extra} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog", nargs="*", default=CATALOG, help="catalog names")
    p.add_argument("--tn", nargs="*", type=int, default=[3, 4, 5, 6, 7], help="full transformation monoids T_n")
    p.add_argument("--random", type=int, default=8, help="random automata per family")
    p.add_argument("--states", type=int, default=16)
    p.add_argument("--letters", type=int, default=4)
    p.add_argument("--families", nargs="*", default=["uniform", "mixed"])
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    decompose("cyclic:3")  # warm up: imports (numpy, sympy) are not part of any row
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# compiler.automata.decompose timings ({platform.machine()}, {os.cpu_count()} CPUs, load {load:.1f}, "
          f"Python {platform.python_version()})")
    print("| automaton | states | letters | semigroup | holonomy levels | levels | counters/resets/groups | "
          "table rows | wall s | CPU s | outcome |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.catalog:
        print(row(name), flush=True)
    for n in args.tn:
        print(row(full_transformation_monoid(n)), flush=True)
    for family in args.families:
        rng = random.Random(args.seed)
        for i in range(args.random):
            print(row(random_automaton(rng, args.states, args.letters, family, i)), flush=True)


if __name__ == "__main__":
    main()
