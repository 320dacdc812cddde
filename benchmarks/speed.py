"""Forward-pass throughput and peak memory: the compiled model (fused and explicit attention)
vs the explicit recurrent module vs the numpy simulation, with achieved GFLOP/s against a
matrix product measured in the same run.

For each automaton and T (default B = 64, T in {256, 1024}; float32, CPU, and a GPU when
present), one process, best wall time of up to 3 runs (1 when a run takes > 1 s):

* ``fused``: ``model(tokens)``, the default forward (``scaled_dot_product_attention``; the
  MLP over bounded chunks of positions, ``constructions.layers.CHUNK_ELEMENTS``);
* ``explicit``: the same model with ``model.fused = False`` ([B, H, T+1, T+1] scores and
  patterns as tensors, the path hooks and ``run_with_cache`` take); skipped when one layer's
  scores would exceed ``--explicit-limit`` GiB;
* ``recurrent``: ``verify.recurrent.RecurrentSimulator``, T sequential steps;
* ``numpy``: ``compiler.automata.simulate.simulate``, the integer table lookup.

GFLOP/s is ``verify.cost.forward_flops`` (the dense matrix products of the forward, 2 per
multiply-add; softmax, ReLU and additions not counted) times B over the wall time, beside a
square float32 matrix product (``--matmul-n``, default 1024) timed in the same run.  Peak
memory is the growth of the process's peak resident set (Linux ``VmHWM``, reset through
``/proc/self/clear_refs`` before each measurement) over its resting size: what one call
adds.  The machine's load average is recorded before and after the run: on a shared machine
read the ratios (measured in one run), not the absolute numbers.

    python benchmarks/speed.py --out benchmarks/results/speed.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import compiler
from compiler.automata.simulate import simulate
from constructions import registry
from verify.cost import forward_flops
from verify.recurrent import RecurrentSimulator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402

DEFAULT = ["symmetric:5:scan", "quaternion:krohn-rhodes", "grid:9:gridworld", "parity:auto"]


def timed(fn, min_seconds: float = 1.0, max_reps: int = 3) -> float:
    """Best wall time of up to ``max_reps`` runs (stops repeating once a run exceeds ``min_seconds``)."""
    best = float("inf")
    for _ in range(max_reps):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best = min(best, dt)
        if dt > min_seconds:
            break
    return best


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def peak_growth(fn) -> float | None:
    """MiB the process's peak RSS rises above its resting RSS while ``fn`` runs (None where
    the peak cannot be reset: not Linux, or /proc/self/clear_refs not writable)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
    except OSError:
        return None
    rest = _status_kb("VmRSS")
    fn()
    peak = _status_kb("VmHWM")
    return None if rest is None or peak is None else (peak - rest) / 1024


def matmul_gflops(n: int, device: str, sync) -> float:
    """GFLOP/s of an n x n float32 matrix product on ``device`` (best of 3)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device)
    b = torch.randn(n, n, generator=g).to(device)
    a @ b
    sync()

    def run():
        a @ b
        sync()

    return 2.0 * n**3 / timed(run, min_seconds=0.0) / 1e9


def parse(item: str) -> tuple[str, str]:
    name, _, method = item.rpartition(":")
    if method not in ("auto", *registry.names()):
        return item, "auto"
    return name, method


def _load() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


@torch.no_grad()
def row(name: str, method: str, T: int, B: int, device: str, ref_gflops: float, explicit_limit: float) -> str:
    model = compiler.compile_automaton(name, max_len=T, method=method).to(device)
    a = model.automaton
    toks = torch.from_numpy(np.random.default_rng(0).integers(0, a.n_symbols, (B, T))).to(device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    flops = forward_flops(model, T) * B
    cells = {}
    H = max(b.n_heads for b in model.config.blocks)
    for path in ("fused", "explicit"):
        if path == "explicit" and B * H * (T + 1) ** 2 * 4 * 2 > explicit_limit * 2**30:
            cells[path] = None  # scores and pattern of one layer over the limit
            continue
        model.fused = path == "fused"
        model(toks[:1, : min(T, 16)])  # warm up

        def run():
            model(toks)
            sync()

        mem = peak_growth(run)
        t = timed(run)
        cells[path] = (B / t, flops / t / 1e9, mem)
    model.fused = True
    rnn = RecurrentSimulator(a, torch.float32).to(device)

    def recurrent():
        rnn(toks)
        sync()

    t_rnn = timed(recurrent)
    np_toks = toks.cpu().numpy()
    t_np = timed(lambda: simulate(a, np_toks))
    exact = bool(np.array_equal(model(toks).argmax(-1).cpu().numpy(), simulate(a, np_toks)))
    f, e = cells["fused"], cells["explicit"]
    mib = lambda m: "—" if m is None else f"{m:,.0f}"  # noqa: E731
    i = model.info()
    return (f"| {name} | {i['method']} | {i['n_layers']} | {i['n_params']:,} | {T} | {B} | {f[0]:,.1f} | "
            f"{f[1]:.3g} ({100 * f[1] / ref_gflops:.0f}%) | {mib(f[2])} | "
            + (f"{e[0]:,.1f} | {e[1]:.3g} ({100 * e[1] / ref_gflops:.0f}%) | {mib(e[2])} | **{f[0] / e[0]:.1f}×** | "
               if e else "— | — | — | — | ")
            + f"{B / t_rnn:,.1f} | {B / t_np:,.1f} | {'yes' if exact else '**NO**'} |")


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--automata", nargs="+", default=DEFAULT, help="NAME or NAME:METHOD")
    p.add_argument("--lengths", nargs="+", type=int, default=[256, 1024])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--matmul-n", type=int, default=1024)
    p.add_argument("--explicit-limit", type=float, default=4.0,
                   help="skip the explicit path when one layer's scores and pattern exceed this many GiB")
    p.add_argument("--out")
    args = p.parse_args(argv)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    t_all = time.perf_counter()
    load_before = _load()
    lines = [header("Forward throughput and peak memory, float32: compiled model (fused / explicit attention) "
                    "vs recurrent module vs numpy"), ""]
    body: list[str] = []
    for device in devices:
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        ref = matmul_gflops(args.matmul_n, device, sync)
        body += [f"## {device}", "",
                 f"Reference: a {args.matmul_n}×{args.matmul_n} float32 matrix product runs at **{ref:.1f} GFLOP/s** "
                 f"here (same run).", "",
                 "| automaton | method | layers | params | T | B | fused seq/s | fused GFLOP/s (of matmul) | "
                 "fused peak MiB | explicit seq/s | explicit GFLOP/s | explicit peak MiB | fused / explicit | "
                 "recurrent seq/s | numpy seq/s | exact |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        print("\n".join(body), flush=True)
        for item in args.automata:
            name, method = parse(item)
            for T in args.lengths:
                body.append(row(name, method, T, args.batch, device, ref, args.explicit_limit))
                print(body[-1], flush=True)
        body.append("")
    lines += [f"Load average (1 / 5 / 15 min) at the start: {load_before}; at the end: {_load()}. "
              "Timings taken while other jobs share the CPU are slower and noisier; ratios measured in one "
              "run (fused / explicit, model / matmul) are the comparable numbers.", "",
              "Columns: sequences per second (B over the best wall time of up to 3 calls); GFLOP/s of the "
              "forward's dense matrix products (`verify.cost.forward_flops`) and, in parentheses, as a share "
              "of the matrix product's; peak MiB: how far one call raises the process's peak RSS above its "
              "resting size (`VmHWM` reset via `/proc/self/clear_refs`); `exact`: the fused forward's argmax "
              "equals the numpy simulation at every position of the batch." + (
                  "" if torch.cuda.is_available() else " No GPU on this machine: CPU only."), "", *body]
    return finish(lines, t_all, args.out)


if __name__ == "__main__":
    main()
