"""Wall time of `shortcut compile` with its default verification, as a user runs it.

Two parts, in one run:

* the paper's 19 automata at T = 100: ``shortcut compile NAME --max-len 100 -o FILE`` through
  ``compiler.cli.main`` in this process (so the one-off ``import torch`` is not counted 19
  times), one row each: method, layers, parameters, seconds, the stored verification line;
* ``--long`` specs (default quaternion at 4096) as separate processes, the command exactly as
  typed: seconds end to end (interpreter start, imports, compile, verification, writing).

    python benchmarks/cli_compile_time.py --out benchmarks/results/cli_compile_time.md
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import compiler
from compiler.automata.catalog import paper_suite
from compiler.cli import main as cli
from verify.report import summary_line

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402


def in_process(name: str, T: int, out: Path) -> tuple[str, float]:
    """One in-process ``shortcut compile`` (default options): its table row and seconds."""
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = cli(["compile", name, "--max-len", str(T), "-o", str(out)])
    seconds = time.perf_counter() - t0
    m = compiler.load(out)
    i = m.info()
    return (f"| `{name}` | {status} | {i['method']} | {i['n_layers']} | {i['n_params']:,} | {seconds:.2f} | "
            f"{summary_line(m.meta['verification'])} |"), seconds


def as_typed(spec: str, T: int, out: Path) -> str:
    """``shortcut compile SPEC --max-len T -o OUT`` in a new process: a row with its wall time."""
    argv = ["shortcut", "compile", spec, "--max-len", str(T), "-o", str(out)]
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    info = compiler.load(out).info() if r.returncode == 0 else None
    what = (f"{info['method']}, {info['n_layers']} layers, {info['n_params']:,} params" if info
            else r.stderr.strip().splitlines()[-1])
    verdict = next((ln for ln in r.stdout.splitlines() if ln.startswith("verification:")), "")
    return f"| `{' '.join(argv)}` | {r.returncode} | {what} | {seconds:.1f} | {verdict} |"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--automata", nargs="+", default=paper_suite())
    p.add_argument("--long", nargs="*", default=["quaternion@4096"], help="SPEC@MAX_LEN run as separate processes")
    p.add_argument("--out", help="also write the table to this file")
    args = p.parse_args(argv)
    T = args.max_len
    lines = [header(f"`shortcut compile` with its default verification: the paper's 19 automata at T = {T}, "
                    "and long inputs end to end"), "",
             "| spec | exit | method | layers | params | seconds (compile + verify + write) | stored verification |",
             "|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    t_all = time.perf_counter()
    total = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.automata:
            row, seconds = in_process(name, T, Path(tmp) / "m.safetensors")
            total += seconds
            emit(lines, row)
        lines += ["", f"**Sum over the {len(args.automata)} automata: {total:.1f} s** (in one process).", ""]
        if args.long:
            lines += ["| command (a new process) | exit | model | seconds end to end | verification |",
                      "|---|---|---|---|---|"]
            for item in args.long:
                spec, length = item.rsplit("@", 1)
                emit(lines, as_typed(spec, int(length), Path(tmp) / "long.safetensors"))
    text = finish(lines, t_all, args.out)
    print(lines[-1])
    return text


if __name__ == "__main__":
    main()
