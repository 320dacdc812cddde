"""Certificate time of scans (Theorem 10) as the automaton grows: the issue-39 target is any scan
of at most 64 states at max_len <= 1024 certified in under 30 s.

Cases: strictly-local languages (``random_language("sl", ...)``) with a label readout (the scan's
last MLP then carries the label lookup fused after the composition, the check that enumerated
every pair of maps), the same languages with the state readout, and random automata on 2 letters
of 8 .. 64 states and on 4 letters of 64 (the full scan of a large transition monoid).  Each case
runs in its own process (``--baseline`` runs it again over another source tree, in the same run):
certify seconds (wall, and the process's CPU), the verdict (or the reason it is not certified).

    python benchmarks/certify_scans.py --out benchmarks/results/certify_scans.md
    python benchmarks/certify_scans.py --baseline /tmp/base-tree --out ...   # ratios against a checkout
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    ("sl k=3, 4 letters, seed 0", "labels", 256), ("sl k=5, 3 letters, seed 0", "labels", 50),
    ("sl k=5, 3 letters, seed 0", "labels", 1024), ("sl k=4, 5 letters, seed 0", "labels", 1024),
    ("sl k=5, 3 letters, seed 0", "states", 1024),
    ("random 8 states, seed 0", "states", 1024), ("random 17 states, seed 0", "states", 1024),
    ("random 32 states, seed 0", "states", 1024), ("random 64 states, seed 0", "states", 1024),
    ("random 64 states, 4 letters, seed 0", "states", 1024),
]
TIMEOUT = 600
"""Seconds a case may run in its process before it is reported as over the limit."""

CHILD = r"""
import json, random, sys, time
from compiler.automata.catalog import random_automaton
from compiler.automata.subregular_families import random_language
from compiler.pipeline import compile_automaton
from verify.certify import certify
what, readout, T = sys.argv[1], sys.argv[2], int(sys.argv[3])
words = what.replace(",", "").split()
if words[0] == "sl":
    a = random_language("sl", k=int(words[1][2:]), letters=int(words[2]), seed=int(words[-1]))
else:
    a = random_automaton(random.Random(int(words[-1])), int(words[1]), int(words[3]) if "letters" in words else 2)
t = time.perf_counter()
model = compile_automaton(a, max_len=T, method="scan", readout="labels" if readout == "labels" else None)
compiled = time.perf_counter() - t
t, cpu = time.perf_counter(), time.process_time()
cert = certify(model)
print(json.dumps({"states": a.n_states, "layers": len(model.blocks), "compile_s": compiled,
                  "certify_s": time.perf_counter() - t, "cpu_s": time.process_time() - cpu,
                  "certified": cert.certified, "reason": cert.reason or (cert.failure or {}).get("message")}))
"""


def run_case(tree: Path, case: tuple[str, str, int], timeout: int = TIMEOUT) -> dict:
    """One case in a fresh process over ``tree``'s sources."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, case[0], case[1], str(case[2])], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"certify_s": None, "certified": None, "reason": f"over {timeout} s"}
    if done.returncode != 0:
        return {"certify_s": None, "certified": None, "reason": done.stderr.strip().splitlines()[-1][:100]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def cell(r: dict) -> str:
    if r.get("certify_s") is None:
        return f"-- ({r['reason']})"
    verdict = "certified" if r["certified"] else f"not certified ({str(r['reason'])[:70]})"
    cpu = f" ({r['cpu_s']:.1f} s CPU)" if r.get("cpu_s") is not None else ""
    return f"{r['certify_s']:.1f} s{cpu}, {verdict}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--baseline", type=Path, help="a checkout to run the same cases with, for ratios")
    ap.add_argument("--timeout", type=int, default=TIMEOUT, help="seconds a case may run in its process")
    args = ap.parse_args()
    t0 = time.perf_counter()
    lines = [header("Scan certificates as the automaton grows"), "",
             "Each case in its own process (compile, then `certify`); wall seconds on this machine, and the "
             "certifying process's CPU seconds (less sensitive to the machine's load).", ""]
    cols = "| case | readout | T | states | layers | certify (this tree) |"
    lines += [cols + (" certify (baseline) | ratio (CPU s) |" if args.baseline else ""),
              "|---|---|---:|---:|---:|---|" + ("---|---:|" if args.baseline else "")]
    print("\n".join(lines), flush=True)
    for case in CASES:
        new = run_case(ROOT, case, args.timeout)
        row = (f"| {case[0]} | {case[1]} | {case[2]} | {new.get('states', '?')} | {new.get('layers', '?')} | "
               f"{cell(new)} |")
        if args.baseline:
            old = run_case(args.baseline, case, args.timeout)
            ratio = (f"{old['cpu_s'] / new['cpu_s']:.1f}x" if old.get("cpu_s") and new.get("cpu_s") else "--")
            row += f" {cell(old)} | {ratio} |"
        emit(lines, row)
    finish(lines, t0, args.out, f" Load at the end {os.getloadavg()[0]:.1f}.")


if __name__ == "__main__":
    main()
