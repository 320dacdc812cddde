"""`shortcut plan` on the inputs of issue 30 that did not scale: exit status, wall time, max RSS.

Each input is planned in a separate process, as typed, under ``/usr/bin/time -v`` with a
``--timeout`` (default 120 s): ``shortcut plan SPEC --max-len 16``.  The inputs: the big
catalog families (``grid:2000``, ``grid:300``, ``grid:626`` -- the new catalog limit --,
``cyclic:1000``, ``memory:1000``, ``cyclic-product:10,10,10``, ``nth-last:11``,
``nth-last:12``), a regular expression with an exponential DFA, a random 10,000-state
automaton (2 letters, a JSON spec written here) and a 4096 x 4096 transition table
(``table[q][a] = (q + a) mod 4096``, a ``.npz`` written here).  Each row: the exit status,
seconds, max RSS in GB and the chosen construction or the error's first words.

    python benchmarks/bounded_analysis.py --out benchmarks/results/bounded_analysis.md
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from compiler.automata.catalog import random_automaton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

CATALOG = ["grid:2000", "grid:300", "grid:626", "cyclic:1000", "memory:1000", "cyclic-product:10,10,10", "nth-last:11",
           "nth-last:12"]
REGEX = ("regex:(a|b)*a(a|b){20}", "a,b")
RANDOM_STATES, RANDOM_LETTERS = 10_000, 2
TABLE_SIZE = 4096
MAX_LEN = 16
SHOWN = 160
"""Characters of the outcome shown per row."""


def timed(argv: list[str], timeout: float) -> tuple[int | str, float, float, str]:
    """``argv`` under ``/usr/bin/time -v``: exit status ("timeout" past ``timeout``), wall
    seconds, max RSS in GB, and the outcome (the chosen line, or the error line)."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - t0, float("nan"), f"(killed after {timeout:.0f} s)"
    seconds = time.perf_counter() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.startswith(("chosen:", "error:"))]
    outcome = lines[0] if lines else "(no outcome line)"
    return r.returncode, seconds, int(rss.group(1)) / 1e6 if rss else float("nan"), outcome


def inputs(work: Path) -> list[tuple[str, list[str]]]:
    """(label, extra arguments) of every input, writing the random spec and the table into ``work``."""
    spec = work / "random10k.json"
    a = random_automaton(random.Random(0), RANDOM_STATES, RANDOM_LETTERS)
    spec.write_text(json.dumps(a.to_dict()))
    table = work / "table4096.npz"
    n = TABLE_SIZE
    np.savez_compressed(table, table=((np.arange(n)[:, None] + np.arange(n)[None, :]) % n).astype(np.int16))
    rows = [(name, [name]) for name in CATALOG]
    rows.append((REGEX[0], [REGEX[0], "--alphabet", REGEX[1]]))
    rows.append((f"random {RANDOM_STATES:,} states x {RANDOM_LETTERS} letters (JSON, "
                 f"{spec.stat().st_size // 1000} KB)", [str(spec)]))
    rows.append((f"{n} x {n} table (.npz, {table.stat().st_size // 1000} KB)", [str(table)]))
    return rows


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the Markdown table here")
    p.add_argument("--timeout", type=float, default=120.0)
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    lines = [header("Bounded analysis: `shortcut plan` on the inputs that did not scale"), "",
             f"`shortcut plan SPEC --max-len {MAX_LEN}`, one process each under `/usr/bin/time -v` (seconds: wall time "
             f"end to end, interpreter start and `import torch` included; GB: max resident set), killed after "
             f"{args.timeout:.0f} s. Outcome: the chosen construction, or the one-line error.", "",
             "| input | exit | seconds | GB | outcome |", "|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for label, extra in inputs(Path(tmp)):
            rc, s, gb, outcome = timed(["shortcut", "plan", *extra, "--max-len", str(MAX_LEN)], args.timeout)
            text = outcome if len(outcome) <= SHOWN else outcome[:SHOWN] + " ..."
            emit(lines, f"| `{label}` | {rc} | {s:.1f} | {gb:.2f} | {text.replace('|', '/')} |")
    return finish(lines, t_start, args.out)


if __name__ == "__main__":
    main()
