"""One torch thread against two for what the CLI does with a model: verification's forward passes.

A compiled model's matrices are tens to hundreds of dims wide; on such small products a second
BLAS thread can cost more in synchronisation than it gains, and on a busy machine it waits for
a core.  For each model this runs, in new processes that alternate between ``OMP_NUM_THREADS=2``
and ``=1`` (so the machine's load is shared), the default ``compile`` verification -- the
certificate's cross-check, and the sampled check an uncertified model gets -- and reports the
median seconds and their ratio: the reason the CLI runs torch on one thread unless
``OMP_NUM_THREADS`` says otherwise (``compiler/command.py``).

    python benchmarks/threads.py --out benchmarks/results/threads.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

MODELS = [("symmetric:4", 100), ("dyck:4,2", 100), ("quaternion", 100), ("grid:9", 100), ("symmetric:5", 1024),
          ("dyck:4,2", 1024), ("nth-last:6", 1024), ("quaternion", 4096)]
CHILD = """
import json, sys, time
import torch
from compiler.automata.load import load_spec
from compiler.pipeline import compile_automaton
from verify.check import verify
from verify.policy import COMPILE_SAMPLING, CROSS_CHECK
model = compile_automaton(load_spec(sys.argv[1]), max_len=int(sys.argv[2]))
out = {"params": sum(p.numel() for p in model.parameters()), "threads": torch.get_num_threads()}
for name, sampling in (("cross-check", CROSS_CHECK.options()), ("sampled", COMPILE_SAMPLING.options())):
    t = time.perf_counter()
    verify(model, **sampling)
    out[name] = time.perf_counter() - t
print(json.dumps(out))
"""


def _child(spec: str, T: int, threads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    p = subprocess.run([sys.executable, "-c", CHILD, spec, str(T)], capture_output=True, text=True, env=env,
                       check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    t0 = time.perf_counter()
    lines = [header("One torch thread against two: verification's forward passes"), "",
             "Median over the repeats, each a new process, alternating `OMP_NUM_THREADS=2` and `=1`. "
             "`cross-check`: the sampled check after a certificate (no layer-wise invariants); `sampled`: "
             "`compile`'s check without one (with them).", "",
             "| spec | T | params | check | 2 threads s | 1 thread s | 2 / 1 |", "|---|---|---|---|---|---|---|"]
    for spec, T in MODELS:
        runs: dict[int, list[dict]] = {1: [], 2: []}
        for _ in range(args.repeats):
            for threads in (2, 1):
                runs[threads].append(_child(spec, T, threads))
        for name in ("cross-check", "sampled"):
            two = statistics.median(r[name] for r in runs[2])
            one = statistics.median(r[name] for r in runs[1])
            emit(lines, f"| `{spec}` | {T} | {runs[1][0]['params']:,} | {name} | {two:.2f} | {one:.2f} | "
                        f"{two / one:.2f} |")
    finish(lines, t0, args.out)


if __name__ == "__main__":
    main()
