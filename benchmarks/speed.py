"""Forward-pass throughput: compiled Transformer vs explicit recurrent module vs numpy simulation.

Sequences per second at batch B (default 64) and T in {256, 1024, 4096}, float32 on the
CPU (and on a GPU when one is present).  Columns:

* ``model.forward``: the compiled model's own forward pass (fused attention, ``model.fused``),
  in micro-batches bounded like ``verify``'s (a [64, H, 4097, 4097] score tensor is 4.3 GB
  per head; a krohn-rhodes counter MLP is ~4T wide); when the batch needs several, one
  micro-batch is timed (throughput = its size / its time);
* ``chunked``: ``verify.chunked.forward_chunked`` (query-chunked; one attention pattern
  for the batch when the heads select by position only, as in the scan);
* ``recurrent``: ``verify.recurrent.RecurrentSimulator``, T sequential steps;
* ``numpy``: ``compiler.automata.simulate.simulate``, the integer table lookup, T sequential steps.

    python benchmarks/speed.py --out benchmarks/results/speed.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

import compiler
from verify.check import ACTIVATION_BUDGET, SCORE_BUDGET, model_width
from verify.chunked import forward_chunked, positional_layers
from verify.recurrent import RecurrentSimulator
from compiler.automata.simulate import simulate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402

DEFAULT = ["parity:auto", "symmetric:5:auto", "grid:9:auto"]


def timed(fn, min_seconds: float = 0.5, max_reps: int = 3) -> float:
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


def parse(item: str) -> tuple[str, str]:
    name, _, method = item.rpartition(":")
    if method not in ("auto", "scan", "gridworld", "krohn-rhodes"):
        return item, "auto"
    return name, method


def rows(item: str, lengths: list[int], B: int, device: str) -> list[str]:
    name, method = parse(item)
    out = []
    for T in lengths:
        model = compiler.compile_automaton(name, max_len=T, method=method).to(device)
        a = model.automaton
        toks = torch.from_numpy(np.random.default_rng(0).integers(0, a.n_symbols, (B, T))).to(device)
        heads = max(b["n_heads"] for b in model.config["blocks"])
        micro = max(1, min(B, SCORE_BUDGET // ((T + 1) ** 2 * heads), ACTIVATION_BUDGET // ((T + 1) * model_width(model))))
        sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

        def plain():  # one micro-batch when the batch needs several: throughput = micro / time
            with torch.no_grad():
                model(toks[:micro])
            sync()

        def chunked():
            forward_chunked(model, toks[:micro_c])
            sync()

        rnn = RecurrentSimulator(a, torch.float32).to(device)

        def recurrent():
            with torch.no_grad():
                rnn(toks)
            sync()

        micro_c = max(1, min(B, ACTIVATION_BUDGET // ((T + 1) * model_width(model))))
        np_toks = toks.cpu().numpy()
        with torch.no_grad():  # warm-up on a short prefix
            model(toks[:1, : min(T, 16)])
        t_plain = timed(plain)
        t_chunk = timed(chunked)
        t_rnn = timed(recurrent)
        t_np = timed(lambda: simulate(a, np_toks))
        i = model.info()
        shared = " (shared pattern)" if all(positional_layers(model)) else ""
        out.append(f"| {name} | {i['method']} | {i['n_layers']} | {i['d_mlp']:,} | {T} | {B} ({micro} / {micro_c}) | "
                   f"{micro / t_plain:,.1f} | {micro_c / t_chunk:,.1f}{shared} | {B / t_rnn:,.1f} | {B / t_np:,.1f} |")
        print(out[-1], flush=True)
    return out


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--automata", nargs="+", default=DEFAULT, help="NAME or NAME:METHOD")
    p.add_argument("--lengths", nargs="+", type=int, default=[256, 1024, 4096])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--out")
    args = p.parse_args(argv)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    lines = [header("Forward-pass throughput, float32 (sequences per second; higher is better)"), "",
             "Each cell is the batch size over the best wall time of up to 3 runs (1 when a run takes > 0.5 s). "
             "Both forwards run in micro-batches that keep [B, H, T, T] scores under 2^26 and "
             "[B, T, MLP width] activations under 2^27 floats (the sizes `shortcut verify` uses); when B = 64 needs "
             "several, one micro-batch is timed and throughput is its size over its time. "
             + ("" if torch.cuda.is_available() else "No GPU on this machine: CPU only."), ""]
    t_all = time.perf_counter()
    for device in devices:
        lines += [f"## {device}", "",
                  "| automaton | method | layers | d_mlp | T | B (micro-batches: forward / chunked) | model.forward | "
                  "chunked | recurrent module | numpy |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        print("\n".join(lines), flush=True)
        for item in args.automata:
            lines += rows(item, args.lengths, args.batch, device)
        lines.append("")
    return finish(lines, t_all, args.out)


if __name__ == "__main__":
    main()
