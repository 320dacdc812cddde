"""The generic layer-wise check (verify/layerwise.py) on one model of each construction.

For each model (max_len 256): the sequences `verify` gives the layer-wise check (4 random ones and
one of each of the construction's own families), the check's time (best of 3), its failures, the
worst deviation from the declared program against its tolerance (the ratio), and the whole
`verify` (sampling only, the default options) with its verdict and time.

    python benchmarks/layerwise.py --out benchmarks/results/layerwise.md
"""

from __future__ import annotations

import argparse
import time

import torch

import compiler
from compiler.automata.catalog import build
from compiler.automata.subregular_families import random_language
from constructions import registry
from verify.check import _inputs, _layerwise_sample, verify
from verify.layerwise import invariants

from _common import emit, finish, header

MODELS = {"parity": ("parity", "scan"), "nth-last:3": (build("nth-last:3"), "lookback"),
          "quaternion": ("quaternion", "krohn-rhodes"), "symmetric:3": ("symmetric:3", "krohn-rhodes"),
          "grid:9": ("grid:9", "gridworld"), "dyck:4,2": ("dyck:4,2", "bounded-stack"),
          "dyck-legal:4,2": ("dyck-legal:4,2", "bounded-stack"), "memory:3": ("memory:3", "local"),
          "LT k=2 (3 letters, seed 0)": (random_language("lt", k=2, letters=3, seed=0), "locally-testable"),
          "SP k=2 (4 letters, seed 0)": (random_language("sp", k=2, letters=4, seed=0), "piecewise")}


def row(name: str, spec, method: str, T: int) -> str:
    model = compiler.compile_automaton(spec, max_len=T, method=method)
    c, plan = registry.plan_of(model)
    inp = _inputs(model, c, plan, samples=64, seed=0, exhaustive_budget=1 << 15, families=True, family_limit=None)
    lw = _layerwise_sample(T, inp.sample, inp.own, 4)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        with torch.no_grad():
            out = invariants(model, lw)
        times.append(time.perf_counter() - t0)
    worst = max(out.measured["deviations"], key=lambda d: d["worst_deviation"] / d["tolerance"])
    t0 = time.perf_counter()
    r = verify(model)
    return (f"| {name} | {method} | {len(model.blocks)} | {len(lw)} | {min(times):.2f} | {len(out.failures)} | "
            f"{worst['worst_deviation'] / worst['tolerance']:.2g} ({worst['subspace']}) | {r.exact} | "
            f"{time.perf_counter() - t0:.1f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--out")
    args = p.parse_args()
    t0 = time.perf_counter()
    lines = [header("The generic layer-wise check"), "",
             "| automaton | method | layers | sequences | check s (best of 3) | failures | worst deviation / "
             "tolerance | verify exact | verify s |", "|---|---|---|---|---|---|---|---|---|"]
    for name, (spec, method) in MODELS.items():
        emit(lines, row(name, spec, method, args.max_len))
    print(finish(lines, t0, args.out))


if __name__ == "__main__":
    main()
