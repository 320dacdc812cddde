"""First contact with the command, as typed in a shell: wall time of each command, end to end.

Rows: ``shortcut --version``, ``shortcut --help`` (answered before torch loads), and the
hopeless ``shortcut compile grid:5 -o m.safetensors --max-len 1048576`` (refused before
compiling: its exit status, wall time and how many lines it printed).  Each command runs
``--repeat`` times in a new process; the table gives the fastest and the median.

    python benchmarks/first_contact.py --out benchmarks/results/first_contact.md
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

COMMANDS = [["shortcut", "--version"], ["shortcut", "--help"],
            ["shortcut", "compile", "grid:5", "-o", "{dir}/m.safetensors", "--max-len", "1048576"]]


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time and result of ``argv`` in a new process."""
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    return time.perf_counter() - t0, r


def row(argv: list[str], repeat: int) -> str:
    """One table row: the command, exit status, lines printed, fastest and median seconds."""
    with tempfile.TemporaryDirectory() as d:
        runs = [timed([a.format(dir=d) for a in argv]) for _ in range(repeat)]
    seconds = [s for s, _ in runs]
    r = runs[-1][1]
    lines = len((r.stdout + r.stderr).strip().splitlines())
    shown = " ".join(a.replace("{dir}/", "") for a in argv)
    return f"| `{shown}` | {r.returncode} | {lines} | {min(seconds):.2f} | {statistics.median(seconds):.2f} |"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    lines = [header("First contact: wall time of commands as typed"), "",
             "| command | exit | lines printed | fastest s | median s |", "|---|---|---|---|---|"]
    for command in COMMANDS:
        emit(lines, row(command, args.repeat))
    return finish(lines, t0, args.out)


if __name__ == "__main__":
    main()
