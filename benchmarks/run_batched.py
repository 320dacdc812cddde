"""`shortcut run --input-file` batched and streaming, against the old one-at-a-time path.

For each model (compiled here at max_len 16: parity with ``auto``, ``symmetric:5`` with ``auto``,
Q8 with ``--method scan``) and each input size (2,000 and 100,000 lines of 16 random symbols), in
one run:

* **batched**: ``shortcut run MODEL --input-file FILE > /dev/null`` as typed, under
  ``/usr/bin/time -v`` (wall seconds end to end -- interpreter start, ``import torch``, loading
  -- and max resident set);
* **one at a time**: the path ``run`` took before (read the whole file, check every line, then
  one forward per line, :func:`old_run`) in a separate process, also under ``/usr/bin/time -v``.
  It stops after ``--old-budget`` seconds of forwards; when it did not finish, its wall time for
  the whole file is extrapolated from its rate over the lines it ran (marked "~");
* the outputs of the two are compared where the old one finished (and on the lines it ran).

Last, ``--input-file /dev/zero`` (no line break ever): the exit status, seconds and max RSS.

    python benchmarks/run_batched.py --out benchmarks/results/run_batched.md
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from compiler.automata.load import load_spec
from constructions.checkpoint import load
from constructions.labels import output_names

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

MODELS = (("parity", "parity", []), ("symmetric:5", "symmetric:5", []),
          ("Q8 scan", "quaternion", ["--method", "scan"]))
"""(label, spec, compile options) of the models measured."""
MAX_LEN = 16
LINES = (2_000, 100_000)
OLD_BUDGET_S = 60.0
"""Seconds of one-at-a-time forwards before the old path stops (and is extrapolated)."""
TIME = "/usr/bin/time"


def old_run(model_path: str, input_path: str, budget: float) -> None:
    """The old ``run``: read all input, check every line, then one forward per line, printing
    each result; stops after ``budget`` seconds of forwards and prints ``#done LINES SECONDS``
    on stderr (the lines run and the seconds they took)."""
    model = load(model_path)
    a, names = model.automaton, output_names(model)
    words = [a.symbol_ids(line.split()) for line in Path(input_path).read_text(encoding="utf-8").splitlines()]
    t0, done = time.perf_counter(), 0
    for ids in words:
        if time.perf_counter() - t0 > budget:
            break
        pred = model.predict(torch.tensor([ids]))[0].tolist() if ids else []
        print(" ".join(names[q] for q in pred))
        done += 1
    print(f"#done {done} {time.perf_counter() - t0:.3f}", file=sys.stderr)


def timed(argv: list[str], stdout) -> tuple[int, float, float, str]:
    """Run ``argv`` under ``/usr/bin/time -v``: exit status, wall seconds, max RSS in GB, stderr."""
    t0 = time.perf_counter()
    r = subprocess.run([TIME, "-v", *argv], stdout=stdout, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return r.returncode, seconds, int(rss.group(1)) / 1e6 if rss else float("nan"), r.stderr


def write_inputs(spec_alphabet: list[str], n: int, path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path.write_text("".join(" ".join(rng.choice(spec_alphabet) for _ in range(MAX_LEN)) + "\n" for _ in range(n)))


def measure(label: str, model: Path, inputs: Path, n: int, work: Path, budget: float) -> str:
    """One row: batched and one-at-a-time on ``inputs`` (``n`` lines), their ratio, equal outputs."""
    new_out, old_out = work / "new.txt", work / "old.txt"
    with open(new_out, "w") as f:
        rc, new_s, new_gb, _ = timed(["shortcut", "run", str(model), "--input-file", str(inputs)], f)
    with open(old_out, "w") as f:
        orc, old_s, old_gb, err = timed([sys.executable, __file__, "--old", str(model), str(inputs), str(budget)], f)
    done, spent = re.search(r"#done (\d+) ([\d.]+)", err).groups()
    done, spent = int(done), float(spent)
    old_text = f"{old_s:.1f}"
    if done < n:
        old_s = old_s - spent + spent * n / done
        old_text = f"~{old_s:,.0f} ({done:,} lines in {spent:.0f} s)"
    new_lines = new_out.read_text().splitlines()
    same = new_lines[:done] == old_out.read_text().splitlines()
    return (f"| {label} | {n:,} | {rc} | {new_s:.2f} | {new_gb:.2f} | {old_text} | {old_gb:.2f} | "
            f"{old_s / new_s:,.1f}x | {'yes' if same else 'NO'} ({done:,} lines compared) |")


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="write the Markdown table here")
    p.add_argument("--old-budget", type=float, default=OLD_BUDGET_S)
    p.add_argument("--old", nargs=3, metavar=("MODEL", "INPUT", "BUDGET"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.old:
        old_run(args.old[0], args.old[1], float(args.old[2]))
        return ""
    t_start = time.perf_counter()
    lines = [header("`shortcut run --input-file`: batched and streaming vs one line at a time"), "",
             f"Lines of {MAX_LEN} random symbols, models at max_len {MAX_LEN}. Seconds are wall time end to end "
             f"(`/usr/bin/time -v`, interpreter start and `import torch` included), GB the max resident set. "
             f"The old path ran at most {args.old_budget:.0f} s of forwards; \"~\" marks its time extrapolated "
             f"from its rate on the lines it ran.", "",
             "| model | lines | exit | batched s | batched GB | one at a time s | one at a time GB | ratio | "
             "same output |", "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for label, spec, options in MODELS:
            model = work / f"{spec}.safetensors"
            subprocess.run(["shortcut", "compile", spec, "-o", str(model), "--max-len", str(MAX_LEN), "--no-verify",
                            *options], check=True, capture_output=True)
            alphabet = list(load_spec(spec).alphabet)
            for n in LINES:
                inputs = work / f"{spec}-{n}.txt"
                write_inputs(alphabet, n, inputs, seed=n)
                emit(lines, measure(label, model, inputs, n, work, args.old_budget))
        rc, s, gb, err = timed(["shortcut", "run", str(work / "quaternion.safetensors"), "--input-file", "/dev/zero"],
                               subprocess.DEVNULL)
        last = [x for x in err.splitlines() if x.startswith("error:")]
        lines.append("")
        emit(lines, f"`shortcut run Q8 --input-file /dev/zero`: exit {rc}, {s:.2f} s, {gb:.2f} GB max RSS: "
                    f"{last[0] if last else '(no error line)'}")
    return finish(lines, t_start, args.out)


if __name__ == "__main__":
    main()
