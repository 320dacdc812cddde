"""Numerical reach of the scan construction: at which max_len does it stop being exact?

For each automaton, positions code and dtype, compiles at T = 2^k and verifies with
random full-length sequences plus the adversarial families (exhaustive checks are
short-length and do not depend on T much, so they are skipped here).  Prints a
table: 'exact' or the first failure.  Example:

    python benchmarks/numerical_reach.py --automata parity quaternion --max-exp 12
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

import compiler
from verify.check import verify


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--automata", nargs="+", default=["parity", "quaternion", "alternating:5", "symmetric:5"])
    p.add_argument("--positions", nargs="+", default=["sinusoidal", "circle"])
    p.add_argument("--dtypes", nargs="+", default=["float32"])
    p.add_argument("--min-exp", type=int, default=4)
    p.add_argument("--max-exp", type=int, default=12)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--stop-at-failure", action="store_true", help="stop a row at its first failure")
    args = p.parse_args()
    print(f"# numerical reach of scan models ({platform.machine()}, {torch.get_num_threads()} threads, "
          f"torch {torch.__version__}); samples={args.samples} random full-length sequences + adversarial families")
    print("| automaton | positions | dtype | T | exact | errors/positions | readout margin | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.automata:
        for positions in args.positions:
            for dt in args.dtypes:
                for k in range(args.min_exp, args.max_exp + 1):
                    T = 2**k
                    t0 = time.time()
                    model = compiler.compile_automaton(name, max_len=T, dtype=getattr(torch, dt), positions=positions)
                    r = verify(model, samples=args.samples, exhaustive_budget=1, layerwise=False)
                    print(f"| {name} | {positions} | {dt} | {T} | {r.exact} | {r.n_errors}/{r.n_positions} | "
                          f"{r.margins['readout_min_logit_margin']} | {time.time() - t0:.1f} |", flush=True)
                    if not r.exact and args.stop_at_failure:
                        break


if __name__ == "__main__":
    main()
