"""The piecewise construction at scale: strictly 6-piecewise languages on 64 letters and PT_6 on
4 letters (compiler/automata/subregular_families.py), compiled with ``auto`` (labels readout) in a
fresh process each, so the peak memory (ru_maxrss of the child) is the compile's own.

Per language: states, auto's method, attention layers, parameters, plan time (the detection
alone), compile wall time, peak memory, and the certificate (at the same max_len) with its time.

    python benchmarks/piecewise.py --out benchmarks/results/piecewise.md
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import emit, finish, header  # noqa: E402

CASES = [("sp", 6, 64, 10), ("sp", 6, 64, 0), ("sp", 4, 64, 0), ("sp", 6, 16, 0), ("pt", 6, 4, 0), ("pt", 6, 16, 0),
         ("pt", 6, 64, 2)]
"""(class, k, letters, seed): SP_6 on 64 letters with 757 and 1,225 states, smaller SP; PT_6 on 4, 16, 64."""

CHILD = """
import json, sys, time
from compiler.automata.subregular_families import random_language
from compiler.automata.piecewise import detect
from compiler.pipeline import compile_automaton
from verify.certify import certify
cls, k, letters, seed, T = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
a = random_language(cls, k=k, letters=letters, seed=seed)
t = time.perf_counter(); plan, why = detect(a); plan_s = time.perf_counter() - t
t = time.perf_counter(); m = compile_automaton(a, max_len=T, readout="labels"); compile_s = time.perf_counter() - t
out = {"states": len(a.states), "method": m.meta["method"], "layers": len(m.blocks),
       "params": sum(p.numel() for p in m.parameters()), "plan_s": plan_s, "compile_s": compile_s,
       "k": plan.k if plan else None, "chains": len(plan.chains) if plan else None,
       "keys": len(plan.keys) if plan else None}
if plan is not None and len(plan.keys) <= int(sys.argv[6]):
    c = certify(m); out["certified"] = c.certified; out["certify_s"] = c.seconds; out["reason"] = c.reason
print("RESULT " + json.dumps(out))
"""


def run(cls: str, k: int, letters: int, seed: int, T: int, certify_keys: int) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([sys.executable, "-c", CHILD, cls, str(k), str(letters), str(seed), str(T),
                           str(certify_keys)], capture_output=True, text=True, cwd=HERE.parent)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    out = json.loads(line[len("RESULT "):])
    out["peak_gb"] = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 2**20
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-len", type=int, default=50)
    ap.add_argument("--certify-max-keys", type=int, default=800,
                    help="certify only models whose final lookup has at most this many keys (the checker's "
                         "last-MLP bound costs about keys^3)")
    ap.add_argument("--out")
    args = ap.parse_args()
    t0 = time.perf_counter()
    lines = [header("The piecewise construction at scale"), "",
             f"`compile_automaton(spec, max_len={args.max_len}, readout=\"labels\")` with auto, float32, one fresh "
             f"process per row (peak: the largest child's max RSS so far).", "",
             "| language | states | auto | layers | params | k, chains, keys | plan s | compile s | peak GB | certified, s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for cls, k, letters, seed in CASES:
        r = run(cls, k, letters, seed, args.max_len, args.certify_max_keys)
        name = f"{cls} k={k}, {letters} letters, seed {seed}"
        if "error" in r:
            emit(lines, f"| {name} | error: {r['error']} |||||||||")
            continue
        cert = "-" if "certified" not in r else f"{r['certified']}, {r['certify_s']:.1f}"
        emit(lines, f"| {name} | {r['states']:,} | {r['method']} | {r['layers']} | {r['params']:,} | {r['k']}, "
                    f"{r['chains']}, {r['keys']} | {r['plan_s']:.2f} | {r['compile_s']:.1f} | {r['peak_gb']:.2f} | {cert} |")
    print(finish(lines, t0, args.out))


if __name__ == "__main__":
    main()
