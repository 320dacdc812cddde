"""Compile time vs max_len for each method, and vs number of states for the scan.

Table 1: ``compile_automaton`` wall time (no verification) at T = 2^6 .. 2^16 for every
method that applies to grid:9 (gridworld, krohn-rhodes, scan) and to quaternion
(krohn-rhodes, scan), with layers and parameters.  Table 2: the scan on random automata
(seeded, |Sigma| = 4, transitions uniform) with n = 4 .. 64 states at T = 256; models over
the scan's parameter budget are refused, and the row says so.

    python benchmarks/compile_scaling.py --out benchmarks/results/compile_scaling.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import compiler
from constructions import registry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402


def random_automaton(n: int, k: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    states = [f"q{i}" for i in range(n)]
    letters = [f"a{j}" for j in range(k)]
    return {"name": f"random-{n}x{k}#{seed}", "states": states, "alphabet": letters,
            "transitions": {q: {a: states[int(rng.integers(n))] for a in letters} for q in states}}


def compile_row(spec, label: str, method: str, T: int) -> str:
    t0 = time.perf_counter()
    try:
        model = compiler.compile_automaton(spec, max_len=T, method=method)
    except compiler.ShortcutError as e:
        return f"| {label} | {method} | {T} | refused: {str(e)[:90]} | | | |"
    s = time.perf_counter() - t0
    i = model.info()
    return f"| {label} | {method} | {T} | {i['n_layers']} | {i['d_model']} | {i['n_params']:,} | {s:.2f} |"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-exp", type=int, default=6)
    p.add_argument("--max-exp", type=int, default=16)
    p.add_argument("--states", nargs="+", type=int, default=[4, 8, 16, 24, 32, 48, 64])
    p.add_argument("--states-max-len", type=int, default=256)
    p.add_argument("--out")
    args = p.parse_args(argv)
    methods = [m for m in ("gridworld", "krohn-rhodes", "scan") if m in registry.names()]
    lines = [header("Compile time (compile_automaton only, no verification), float32"), "",
             "## Compile time vs max_len", "",
             "| automaton | method | T | attn layers | d_model | params | compile s |", "|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    t_all = time.perf_counter()
    for name, ms in (("grid:9", methods), ("quaternion", [m for m in methods if m != "gridworld"])):
        for method in ms:
            compiler.compile_automaton(name, max_len=2**args.min_exp, method=method)  # warm-up (imports, caches)
            for k in range(args.min_exp, args.max_exp + 1):
                lines.append(compile_row(name, name, method, 2**k))
                print(lines[-1], flush=True)
    lines += ["", f"## Scan compile time vs number of states (random automata, 4 letters, T = {args.states_max_len})",
              "", "| automaton | method | T | attn layers | d_model | params | compile s |", "|---|---|---|---|---|---|---|"]
    for n in args.states:
        spec = random_automaton(n, 4, seed=n)
        lines.append(compile_row(spec, f"random {n} states", "scan", args.states_max_len))
        print(lines[-1], flush=True)
    return finish(lines, t_all, args.out)


if __name__ == "__main__":
    main()
