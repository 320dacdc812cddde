"""Gridworld (Theorem 12) against the other constructions on the same worlds.

For each world and method, compiles at ``--max-len`` and prints one table row:
layers, heads per layer, d_model, d_mlp, MLP hidden layers, parameters, compile
time, and whether verification (``--samples`` random full-length sequences, the
adversarial families, short exhaustive sequences and the layer-wise invariants)
found the model exact.  Example:

    python benchmarks/bench_gridworld.py --max-len 1024 --samples 16
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

import compiler
from verify.check import verify

WORLDS = ["grid:4", "grid:9", "grid:16", "grid:9,noop", "grid2d:3,4", "grid2d:5,5"]

COMPARED = ["gridworld", "scan", "krohn-rhodes"]


def row(name: str, method: str, max_len: int, samples: int, check: bool) -> str:
    t0 = time.time()
    try:
        model = compiler.compile_automaton(name, max_len=max_len, method=method)
    except compiler.ShortcutError as e:
        return f"| {name} | {method} | refused: {e} | | | | | | | |"
    seconds = time.time() - t0
    i = model.info()
    exact = "-"
    if check:
        r = verify(model, samples=samples, exhaustive_budget=4096)
        exact = str(r.exact)
    heads = "+".join(str(h) for h in i["heads_by_layer"])
    return (f"| {name} | {method} | {i['n_layers']} | {heads} | {i['d_model']} | {i['d_mlp']} | "
            f"{i['mlp_hidden_layers']} | {i['n_params']:,} | {seconds:.2f} | {exact} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worlds", nargs="+", default=WORLDS)
    p.add_argument("--methods", nargs="+", default=COMPARED)
    p.add_argument("--max-len", type=int, default=1024)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--no-verify", action="store_true", help="sizes only")
    args = p.parse_args()
    print(f"# gridworld vs other constructions at max_len {args.max_len}, float32 "
          f"({platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__})")
    print("| world | method | layers | heads | d_model | d_mlp | MLP hidden layers | params | compile s | exact |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.worlds:
        for method in args.methods:
            print(row(name, method, args.max_len, args.samples, not args.no_verify), flush=True)


if __name__ == "__main__":
    main()
