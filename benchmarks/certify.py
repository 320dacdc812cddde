"""Certificates: which models are proved exact, how long the proof takes, and what it saves.

Four parts, in one run:

* the paper's 19 automata as ``auto`` compiles them, at T = 100 and 1024: certified, or why not
  (the construction declares no obligations yet), and the checker's time;
* the same 19 forced to the scan (Theorem 10, certified for every automaton), at 100 and 1024;
* one model of each certified construction at T = 4096 (and the rare-suffix KMP automaton of
  the soundness tests at 1024): seconds and peak memory of ``shortcut certify`` in a process;
* ``shortcut verify`` on the 19 ``auto`` models at T = 100, each a new process: with the
  certificate first (the default; a small sampled cross-check when it holds) and without it
  (``--no-certify``, the old sampling).

    python benchmarks/certify.py --out benchmarks/results/certify.md
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compiler.automata.catalog import paper_suite
from compiler.automata.load import load_spec
from compiler.pipeline import compile_automaton
from constructions.checkpoint import save
from verify.certify import certify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

LONG = [("symmetric:5", "scan", 4096), ("quaternion", "scan", 4096), ("nth-last:6", "lookback", 4096),
        ("regex:ab(a|b)*ba", "lookback", 4096), ("regex:(a|b)*abbabaabbabaabbbabab", "scan", 1024)]


def _model(spec: str, T: int, method: str):
    alphabet = ["a", "b"] if spec.startswith("regex:") else None
    return compile_automaton(load_spec(spec, alphabet=alphabet), max_len=T, method=method)


def _timed(cmd: list[str]) -> tuple[int, float, float, str]:
    """Exit status, seconds, peak resident GB and the last stdout line of a new process."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    kb = re.findall(r"^(\d+)$", p.stderr, re.MULTILINE)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    return p.returncode, time.perf_counter() - t, int(kb[-1]) / 2**20 if kb else float("nan"), last


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--lengths", default="100,1024")
    args = ap.parse_args()
    start = time.perf_counter()
    lines = [header("Certificates: what is proved exact, and how fast"), ""]
    for method in ("auto", "scan"):
        for T in (int(x) for x in args.lengths.split(",")):
            emit(lines, f"\n## The paper's 19 automata, `--method {method}`, T = {T}\n")
            emit(lines, "| spec | method | layers | certified | checker s | readout margin / why not |")
            emit(lines, "|---|---|---|---|---|---|")
            total, n_ok = 0.0, 0
            for spec in paper_suite():
                model = _model(spec, T, method)
                cert = certify(model)
                total += cert["seconds"]
                n_ok += cert["certified"]
                why = (f"{cert['readout']['min_margin']:.4g}" if cert["certified"] else cert["reason"][:90])
                emit(lines, f"| `{spec}` | {model.meta['method']} | {len(model.blocks)} | {cert['certified']} | "
                            f"{cert['seconds']:.2f} | {why} |")
            emit(lines, f"\n{n_ok} of 19 certified; checker time {total:.1f} s in all.")
    with tempfile.TemporaryDirectory() as tmp:
        emit(lines, "\n## One model per certified construction, `shortcut certify` in a new process\n")
        emit(lines, "| spec | method | T | exit | seconds | peak GB | verdict |")
        emit(lines, "|---|---|---|---|---|---|---|")
        for spec, method, T in LONG:
            path = Path(tmp) / "long.safetensors"
            save(_model(spec, T, method), path)
            rc, s, gb, last = _timed(["shortcut", "certify", str(path)])
            emit(lines, f"| `{spec}` | {method} | {T} | {rc} | {s:.1f} | {gb:.2f} | {last.split(': ', 1)[-1][:80]} |")
        emit(lines, "\n## `shortcut verify` on the 19 `auto` models at T = 100, each a new process\n")
        emit(lines, "| spec | certify + cross-check s | exit | `--no-certify` s | exit |")
        emit(lines, "|---|---|---|---|---|")
        sums = [0.0, 0.0]
        for spec in paper_suite():
            path = Path(tmp) / "m.safetensors"
            save(_model(spec, 100, "auto"), path)
            rc1, s1, _, _ = _timed(["shortcut", "verify", str(path)])
            rc2, s2, _, _ = _timed(["shortcut", "verify", "--no-certify", str(path)])
            sums[0] += s1
            sums[1] += s2
            emit(lines, f"| `{spec}` | {s1:.1f} | {rc1} | {s2:.1f} | {rc2} |")
        emit(lines, f"\nSum: {sums[0]:.0f} s with the certificate, {sums[1]:.0f} s without "
                    f"(ratio {sums[0] / sums[1]:.2f}).")
    print(finish(lines, start, args.out))


if __name__ == "__main__":
    main()
