"""Fused attention (``scaled_dot_product_attention``) against the explicit scores/softmax path.

In one run:

* exactness: for the 19 paper automata plus parity, flipflop and grid2d:3,4 (``--method
  auto``, max_len ``--max-len``, default 256; ``--long`` names a few compiled at 1024 too),
  the largest |logit difference| between ``model.fused = True`` and ``False`` on 32 random
  full-length inputs and every adversarial family (the generic ones and the construction's
  own), whether the argmax agrees at every position, and the full verifier
  (``verify.check.verify``) run on the fused path, the path ``model(tokens)`` takes;
* forward throughput at B = 64, T = 1024, fused / explicit, for the S5 scan, the Q8
  krohn-rhodes cascade and the Grid9 gridworld (same process, best of a few runs);
* peak RSS of one forward of the S5 scan at B = 64, T = 4096, fused (and explicit with
  ``--explicit-rss``), each in a fresh subprocess (``resource.getrusage(RUSAGE_SELF).ru_maxrss``,
  compiling included), measured first: on Linux a child's ru_maxrss starts at its parent's RSS.

    python benchmarks/fused_attention.py --out benchmarks/results/fused_attention.md
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

import compiler
from compiler.automata.catalog import build, paper_suite
from constructions import registry
from verify.check import adversarial_families, verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402

EXTRA = ["parity", "flipflop", "grid2d:3,4"]
SPEED = [("symmetric:5", "scan"), ("quaternion", "krohn-rhodes"), ("grid:9", "gridworld")]
BATCH = 256 * 1024
"""Positions per forward batch in the exactness check."""


def inputs(model, T: int, seed: int = 0) -> np.ndarray:
    """32 random length-T inputs, then every adversarial family (generic and the construction's own)."""
    a = model.automaton
    rows = [np.random.default_rng(seed).integers(0, a.n_symbols, (32, T))]
    rows += list(adversarial_families(a.n_symbols, T).values())
    construction, plan = registry.plan_of(model)
    if construction.families is not None:
        rows += list(construction.families(model, plan, T, seed).values())
    return np.concatenate([r for r in rows if len(r)])


@torch.no_grad()
def run(model, t: torch.Tensor, fused: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Logits and every block's attention output (``hook_attn_out`` sits outside the attention
    module, so hooking it keeps the fused path)."""
    outs: list[torch.Tensor] = []
    model.fused = fused
    with model.hooks([(f"blocks.{l}.hook_attn_out", lambda m, i, o: outs.append(o))
                      for l in range(len(model.blocks))]):
        logits = model(t)
    model.fused = True
    return logits, outs


def compare(model, toks: np.ndarray) -> tuple[float, float, int, int]:
    """Largest |fused - explicit| logit and attention output, and positions where the argmax
    differs, out of all positions."""
    worst, worst_attn, differ = 0.0, 0.0, 0
    step = max(1, BATCH // toks.shape[1])
    for i in range(0, len(toks), step):
        t = torch.from_numpy(toks[i : i + step])
        fused, fused_attn = run(model, t, True)
        explicit, explicit_attn = run(model, t, False)
        worst = max(worst, float((fused.double() - explicit.double()).abs().max()))
        for a, b in zip(fused_attn, explicit_attn):
            worst_attn = max(worst_attn, float((a.double() - b.double()).abs().max()))
        differ += int((fused.argmax(-1) != explicit.argmax(-1)).sum())
    return worst, worst_attn, differ, toks.size


def exactness_row(name: str, T: int) -> str:
    t0 = time.perf_counter()
    model = compiler.compile_automaton(build(name), max_len=T, method="auto")
    assert model.fused
    toks = inputs(model, T)
    worst, worst_attn, differ, n = compare(model, toks)
    res = verify(model)  # fused: the plain forward users run
    margin = res.margins.get("readout_min_logit_margin")
    return (f"| {name} | {model.meta['method']} | {T} | {len(toks)} | {worst:.3g} | {worst_attn:.3g} | {differ}/{n} | "
            f"{margin:.3g} | {'yes' if res.exact else '**NO**'} | {res.checked['forward']} | "
            f"{time.perf_counter() - t0:.0f} |")


def best_time(fn, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@torch.no_grad()
def speed_row(name: str, method: str, B: int, T: int) -> str:
    model = compiler.compile_automaton(name, max_len=T, method=method)
    toks = torch.from_numpy(np.random.default_rng(0).integers(0, model.automaton.n_symbols, (B, T)))
    times = {}
    for fused in (True, False):
        model.fused = fused
        model(toks[:2])  # warm up
        times[fused] = best_time(lambda: model(toks))
    model.fused = True
    return (f"| {name} | {method} | {B} | {T} | {B / times[True]:.1f} | {B / times[False]:.1f} | "
            f"**{times[False] / times[True]:.1f}×** |")


RSS_CHILD = """
import resource, sys, numpy as np, torch, compiler
name, method, B, T, fused = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
model = compiler.compile_automaton(name, max_len=T, method=method)
model.fused = fused
toks = torch.from_numpy(np.random.default_rng(0).integers(0, model.automaton.n_symbols, (B, T)))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.no_grad():
    pred = model(toks).argmax(-1)
from compiler.automata.simulate import simulate
exact = bool((pred.numpy() == simulate(model.automaton, toks.numpy())).all())
print(before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, exact)
"""


def rss_row(name: str, method: str, B: int, T: int, fused: bool) -> str:
    """Peak RSS of one forward in a fresh interpreter (kB from getrusage)."""
    out = subprocess.run([sys.executable, "-c", RSS_CHILD, name, method, str(B), str(T), "1" if fused else "0"],
                         capture_output=True, text=True, check=True).stdout.split()
    before, peak, exact = int(out[0]), int(out[1]), out[2] == "True"
    return (f"| {name} | {method} | {B} | {T} | {'fused' if fused else 'explicit'} | {before / 2**20:.2f} | "
            f"{peak / 2**20:.2f} | {'yes' if exact else '**NO**'} |")


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--long", default="cyclic:2,symmetric:5",
                   help="comma-separated automata also checked at max_len 1024 ('' for none)")
    p.add_argument("--only", default="", help="comma-separated automata (default: all 22)")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--explicit-rss", action="store_true",
                   help="also the explicit path's peak RSS at T = 4096 (about 9 GB, minutes)")
    p.add_argument("--out")
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    lines = [header("Fused attention against the explicit path"), ""]
    names = args.only.split(",") if args.only else [*paper_suite(), *EXTRA]
    lines += ["## Exactness: fused vs explicit logits, and the verifier on the fused path", "",
              "Inputs: 32 random full-length sequences and every adversarial family (generic and the "
              "construction's own). `max |Δlogit|`: largest |fused − explicit| logit; `max |Δattn|`: the same "
              "for every block's attention output (`hook_attn_out`, before the MLPs clean it up); `argmax "
              "differs`: positions where the two argmaxes differ / all positions; `min margin` and `exact`: "
              "`verify.check.verify(model)` with the default options, the plain forward on the fused path.", "",
              "| automaton | method | T | inputs | max \\|Δlogit\\| | max \\|Δattn\\| | argmax differs | min margin | exact | forward | s |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    rss = []
    if not args.skip_speed:  # first, while this process is small: a child's ru_maxrss starts at its parent's RSS
        rss += ["", "## Peak memory of one forward (fresh subprocess, `getrusage` ru_maxrss, compiling included)",
                "", "| automaton | method | B | T | path | RSS before forward (GiB) | peak RSS (GiB) | exact |",
                "|---|---|---|---|---|---|---|---|"]
        for fused in (True, False) if args.explicit_rss else (True,):
            rss.append(rss_row("symmetric:5", "scan", 64, 4096, fused))
            print(rss[-1], flush=True)
    runs = [(n, args.max_len) for n in names]
    runs += [(n, 1024) for n in args.long.split(",") if n and (not args.only or n in names)]
    for name, T in runs:
        lines.append(exactness_row(name, T))
        print(lines[-1], flush=True)
    if not args.skip_speed:
        lines += ["", "## Forward throughput, fused / explicit (same process, best of 3)", "",
                  "| automaton | method | B | T | fused seq/s | explicit seq/s | ratio |", "|---|---|---|---|---|---|---|"]
        for name, method in SPEED:
            lines.append(speed_row(name, method, 64, 1024))
            print(lines[-1], flush=True)
    text = finish(lines + rss, t_start, args.out)
    print(text)
    return text


if __name__ == "__main__":
    main()
