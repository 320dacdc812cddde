"""How long the factor search (compiler/automata/factors.py ``detect``) takes to refuse -- and to
accept -- beside an earlier revision of the same module, in one process, interleaved (the machine
is shared: compare ratios, not seconds across runs).

Cases: bounded stacks ``dyck:d,k`` (aperiodic, not locally threshold testable: the refusals the
planner pays for on every stack), the detector sweep's seeded near-stack tables (a stack's table
with a few transitions changed and some stacks dropped, renumbered;
tests/constructions/test_detector_sweep.py), and locally (threshold) testable languages of the
generator (the same plan must come out, as fast).  Per case and revision: the median of
``--repeat`` runs, and the outcome (k, t of the plan, or the refusal's
kind: a letter's cycle, a sampled witness, a conflict's words, the budget).

    python benchmarks/factor_refusals.py --before ee26c72 --out benchmarks/results/factor_refusals.md
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "constructions"))

from _common import emit, finish, header  # noqa: E402

from compiler.automata import factors  # noqa: E402
from compiler.automata.formats import from_table  # noqa: E402
from compiler.automata.load import load_spec  # noqa: E402
from compiler.automata.subregular_families import random_language  # noqa: E402
from test_detector_sweep import tables  # noqa: E402  (the detector sweep's near-stacks)

STACKS = ["dyck:1,2", "dyck:2,2", "dyck:3,2", "dyck:4,2", "dyck:2,3", "dyck:3,3"]
LANGUAGES = [("sl", 3, 4, 0), ("sl", 4, 16, 0), ("lt", 3, 4, 0), ("lt", 2, 16, 0), ("ltt", 2, 4, 0)]


def module_at(rev: str):
    """``compiler/automata/factors.py`` as of git revision ``rev``, loaded as a sibling module (its
    relative imports resolve to this tree's compiler.automata)."""
    text = subprocess.run(["git", "show", f"{rev}:compiler/automata/factors.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "factors_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("compiler.automata.factors_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def cases(n_near: int, seed: int) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = [(s, load_spec(s)) for s in STACKS]
    for i, (rows, start) in enumerate(tables(n_near, seed)):
        out.append((f"near-stack #{i} ({len(rows)} states)", from_table(rows, start=start)))
    out += [(f"{c}:k={k},{n} letters,seed {s}", random_language(c, k=k, letters=n, seed=s)) for c, k, n, s in LANGUAGES]
    return out


def outcome(plan, why: str) -> str:
    if plan is not None:
        return f"k = {plan.k}, t = {plan.threshold}"
    for key, label in (("no power of the letter", "letter cycle"), ("budget", "budget"), ("is definite", "definite"),
                       ("equally often", "witness"), ("partial", "partial")):
        if key in why:
            return label
    return why[:40]


def timed(mod, a, repeat: int) -> tuple[float, str]:
    times, got = [], ""
    for _ in range(repeat):
        t = time.perf_counter()
        plan, why = mod.detect(a)
        times.append(time.perf_counter() - t)
        got = outcome(plan, why)
    return statistics.median(times), got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default="ee26c72", help="git revision of the baseline factors.py")
    ap.add_argument("--near", type=int, default=20, help="near-stack tables")
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    t0 = time.perf_counter()
    before = module_at(args.before)
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    lines = [header(f"Factor detection: refusals and acceptances, {args.before} against this tree ({rev})"), "",
             f"`python benchmarks/factor_refusals.py --before {args.before} --near {args.near} --seed {args.seed} "
             f"--repeat {args.repeat}`; each case runs the two revisions back to back (median of {args.repeat}).", "",
             "| case | before s | before | after s | after | ratio |", "|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    tot_b = tot_a = 0.0
    for name, a in cases(args.near, args.seed):
        tb, ob = timed(before, a, args.repeat)
        ta, oa = timed(factors, a, args.repeat)
        tot_b, tot_a = tot_b + tb, tot_a + ta
        emit(lines, f"| {name} | {tb:.3f} | {ob} | {ta:.3f} | {oa} | {tb / max(ta, 1e-9):.1f}x |")
    emit(lines, f"| **total** | {tot_b:.2f} | | {tot_a:.2f} | | {tot_b / max(tot_a, 1e-9):.1f}x |")
    finish(lines, t0, args.out)


if __name__ == "__main__":
    main()
