"""The subregular hierarchy at its class depth: what ``auto`` compiles for random languages of each class.

For each class of :mod:`compiler.automata.subregular_families` (strictly local, locally
(threshold) testable, tier-based, strictly piecewise, piecewise testable, piecewise locally
testable, modular counting, star-free), each k, alphabet size and seed, the script draws the
language's minimal DFA, plans it
(``shortcut plan``: :func:`compiler.pipeline.candidates`), compiles it with ``auto`` and
``readout="labels"`` (acceptance at every position) at each max_len, and certifies the model
(:func:`verify.certify.certify`).  It records the states, the depth the class allows (SL, LT, LTT:
2; tier-based: 3; SP, PT, PLT: k; Z_p: 1; star-free: none known below its temporal depth k), the method
chosen, its layers and parameters, the plan / compile / certify seconds, peak memory and whether
the model is certified exact.  Each language runs in its own process under ``--timeout`` seconds;
a planner refusal, a plan over ``--max-params-row`` parameters (not compiled: recorded with the
estimate) and a timeout are rows too.

    python benchmarks/subregular.py --quick --out benchmarks/results/subregular.md \
        --json benchmarks/results/subregular.json
    python benchmarks/subregular.py --classes sp,pt --k 6 --letters 64 --seeds 0,1,2
    python benchmarks/subregular.py --before benchmarks/results/subregular.json --out after.md   # beside a baseline
    python benchmarks/subregular.py --from-json records.json --out table.md   # the tables of saved records
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.automata.subregular_families import CLASSES, random_language  # noqa: E402

from _common import finish, header  # noqa: E402

BOUND = {"sl": "2", "lt": "2", "ltt": "2", "tsl": "3", "tlt": "3", "sp": "k", "pt": "k", "plt": "k", "zp": "1",
         "sf": "-"}
"""The depth each class allows (the issue's table; star-free: its temporal nesting depth k is an
upper bound for B-RASP, no constant is claimed here).  PLT_k (a Boolean combination of an LT_k and
a PT_k condition): max(2, k) = k for k >= 2 -- the LT features (2 layers: window heads, then a
prefix count of factor flags) and the PT features (one prefix-count layer per run of a relevant
subsequence, <= k) side by side in parallel layers, the joint table read by one lookup fused into
the last layer's MLP."""
TITLE = {"sl": "strictly k-local (SL)", "lt": "locally k-testable (LT)",
         "ltt": "locally threshold testable (LTT, t = 2)", "tsl": "tier-based strictly local (TSL, half the letters)",
         "tlt": "tier-based locally testable (TLT)", "sp": "strictly k-piecewise (SP)",
         "pt": "piecewise k-testable (PT)",
         "plt": "piecewise locally k-testable (PLT: LT_k and PT_k combined)", "zp": "counting mod p = k (Z_p)",
         "sf": "star-free (past LTL of temporal depth k)"}
ROW_PARAMS = 20_000_000
"""Plans above this many parameters are recorded, not compiled (memory on a small machine)."""


def _say(rec: dict) -> None:
    """One record as a JSON line, at once: the parent keeps the last one per max_len, even on a timeout."""
    print(json.dumps(rec), flush=True)


def measure(cls: str, k: int, letters: int, seed: int, lens: list[int], max_params_row: int,
            plan_only: bool = False) -> None:
    """One language in this process: every max_len planned first, then each compiled and certified;
    a record per max_len printed after each stage (``stage``: what runs next, ``done`` at the end)."""
    import torch  # noqa: F401  (imported before timing, as the CLI would)

    from compiler.pipeline import candidates, compile_automaton
    from verify.certify import certify

    t = time.perf_counter()
    a = random_language(cls, k=k, letters=letters, seed=seed)
    base = {"class": cls, "k": k, "letters": letters, "seed": seed, "states": a.n_states,
            "generate_s": time.perf_counter() - t}
    recs = {}
    for T in lens:
        rec: dict = {**base, "T": T}
        t = time.perf_counter()
        plan = candidates(a, max_len=T)
        rec["plan_s"] = time.perf_counter() - t
        if plan["error"] is not None:
            rec.update(stage="done", status=f"refused: {plan['error']}")
        else:
            chosen = next(c for c in plan["candidates"] if c["name"] == plan["chosen"])
            rec.update(planned=chosen["name"], planned_layers=chosen["layers"], planned_params=chosen["params"],
                       stage="compile", status="")
            if plan_only:
                rec.update(stage="done", status="planned only")
            elif chosen["params"] > max_params_row:
                rec.update(stage="done", status=f"not compiled: plan {chosen['params']:,} params > {max_params_row:,}")
        recs[T] = rec
        _say(rec)
    for T, rec in recs.items():
        if rec["stage"] == "done":
            continue
        t, c = time.perf_counter(), time.process_time()
        model = compile_automaton(a, max_len=T, readout="labels")
        info = model.info()
        rec.update(compile_s=time.perf_counter() - t, method=info["method"], layers=info["n_layers"],
                   params=info["n_params"], stage="certify")
        _say(rec)
        cert = certify(model)
        rec.update(cpu_s=time.process_time() - c)  # compile + certify, CPU seconds: load-independent
        rec.update(certify_s=cert.seconds, certified=bool(cert.certified), stage="done",
                   status="certified" if cert.certified else f"not certified: {(cert.reason or '')}",
                   peak_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
        _say(rec)


WORKER_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
"""A worker's environment: one BLAS thread unless asked otherwise (a threaded BLAS spins on a busy
machine, about three times the weight checker's CPU seconds, so CPU columns would not compare)."""


def _text(out) -> str:
    return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")


def run_row(cls: str, k: int, letters: int, seed: int, lens: list[int], timeout: float,
            max_params_row: int, plan_only: bool = False) -> list[dict]:
    """:func:`measure` in a new process, killed after ``timeout`` seconds: the last record of
    each max_len (a timeout names the stage it stopped in)."""
    cmd = [sys.executable, __file__, "--worker", f"{cls}:{k}:{letters}:{seed}", "--max-len",
           ",".join(map(str, lens)), "--max-params-row", str(max_params_row), *(["--plan-only"] if plan_only else [])]
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=WORKER_ENV)
        out, err, failed = p.stdout, p.stderr, (f"failed (exit {p.returncode}, {time.perf_counter() - t:.0f} s)"
                                                if p.returncode else None)
    except subprocess.TimeoutExpired as e:
        out, err, failed = _text(e.stdout), _text(e.stderr), f"timeout after {timeout:.0f} s"
    last = {}
    for line in out.splitlines():
        rec = json.loads(line)
        last[rec["T"]] = rec
    why = (err.strip().splitlines() or [""])[-1][:160]
    rows = []
    for T in lens:
        rec = last.get(T, {"class": cls, "k": k, "letters": letters, "seed": seed, "T": T, "stage": "plan"})
        if rec["stage"] != "done":
            rec["status"] = f"{failed or 'failed'} in {rec['stage']}" + (f": {why}" if why and "timeout" not in
                                                                          (failed or "") else "")
        rows.append(rec)
    return rows


def _num(x, fmt: str = "{:,}") -> str:
    return "-" if x is None else fmt.format(x)


def _before_cell(before: dict, r: dict) -> str:
    b = before.get(_key(r))
    if b is None:
        return "-"
    if "method" not in b:
        return b["status"].split(":")[0]
    return f"{b['method']} {b['layers']}, {_num(b['params'])}"


def _key(r: dict) -> str:
    return f"{r['class']}:{r['k']}:{r['letters']}:{r['seed']}:{r['T']}"


def _plan_cell(r: dict) -> str:
    if "planned" not in r:
        return r["status"].split(":")[0].replace("|", "\\|")
    return f"{r['planned']} {r['planned_layers']}, {_num(r['planned_params'])}"


def plan_table(cls: str, rows: list[dict]) -> list[str]:
    """A ``--plan-only`` run's class: one row per language, auto's plan at each max_len."""
    lens = sorted({r["T"] for r in rows})
    lines = [f"\n## {TITLE[cls]}: class depth {BOUND[cls]}\n",
             "| k | letters | seed | states | " + " | ".join(f"auto at T = {T} (layers, params)" for T in lens)
             + " | plan s |", "|---|---|---|---|" + "---|" * len(lens) + "---|"]
    langs: dict[tuple, dict[int, dict]] = {}
    for r in rows:
        langs.setdefault((r["k"], r["letters"], r["seed"]), {})[r["T"]] = r
    for (k, letters, seed), by_T in langs.items():
        first = next(iter(by_T.values()))
        cells = " | ".join(_plan_cell(by_T[T]) if T in by_T else "-" for T in lens)
        worst = max((x.get("plan_s") or 0.0) for x in by_T.values())
        lines.append(f"| {k} | {letters} | {seed} | {_num(first.get('states'))} | {cells} | {worst:.1f} |")
    return lines


def table(records: list[dict], before: dict) -> list[str]:
    """A Markdown table per class (a compact one for a ``--plan-only`` run)."""
    lines = []
    for cls in CLASSES:
        rows = [r for r in records if r["class"] == cls]
        if not rows:
            continue
        if any(r["status"] == "planned only" for r in rows) and not any("compile_s" in r for r in rows):
            lines += plan_table(cls, rows)
            continue
        lines += [f"\n## {TITLE[cls]}: class depth {BOUND[cls]}\n",
                  "| k | letters | seed | states | T | auto | layers | params | plan s | compile s | certify s | "
                  "cpu s | peak GB | exact |" + (" before (auto, layers, params) |" if before else ""),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if before else "")]
        for r in rows:
            exact = "certified" if r.get("certified") else r["status"][:110].replace("|", "\\|")
            method = r.get("method", r.get("planned", "-"))
            layers = r.get("layers", r.get("planned_layers"))
            params = r.get("params", r.get("planned_params"))
            lines.append(f"| {r['k']} | {r['letters']} | {r['seed']} | {_num(r.get('states'))} | {r['T']} | {method} | "
                         f"{_num(layers)} | {_num(params)} | {_num(r.get('plan_s'), '{:.2f}')} | "
                         f"{_num(r.get('compile_s'), '{:.2f}')} | {_num(r.get('certify_s'), '{:.2f}')} | "
                         f"{_num(r.get('cpu_s'), '{:.1f}')} | "
                         f"{_num(r.get('peak_gb'), '{:.2f}')} | {exact} |"
                         + (f" {_before_cell(before, r)} |" if before else ""))
    return lines


def _depth(r: dict) -> int | None:
    """The class depth of a row's language (None where no constant is claimed)."""
    b = BOUND[r["class"]]
    return r["k"] if b == "k" else (int(b) if b.isdigit() else None)


def summary(records: list[dict]) -> list[str]:
    """Per class: rows, rows at or below the class depth, certified, and compiled and certified within
    60 s (wall clock, and CPU seconds where recorded)."""
    lines = ["\n| class | rows | compiled at class depth | certified | compile + certify < 60 s | < 60 CPU s |",
             "|---|---|---|---|---|---|"]
    for cls in CLASSES:
        rows = [r for r in records if r["class"] == cls]
        if not rows:
            continue
        deep = sum(1 for r in rows if r.get("layers") is not None and (d := _depth(r)) is not None and r["layers"] <= d)
        cert = [r for r in rows if r.get("certified")]
        fast = sum(1 for r in cert if r["compile_s"] + r["certify_s"] < 60)
        cpu = sum(1 for r in cert if r.get("cpu_s") is not None and r["cpu_s"] < 60)
        lines.append(f"| {cls} | {len(rows)} | {deep} | {len(cert)} | {fast} | {cpu} |")
    return lines


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="k in 2,4,6, letters 4 and 64, seed 0")
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--k", default="2,3,4,5,6")
    ap.add_argument("--letters", default="4,16,64")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--max-len", default="50,256")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per language (all its max_lens)")
    ap.add_argument("--max-params-row", type=int, default=ROW_PARAMS)
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None, help="write the records (a later run's --before)")
    ap.add_argument("--before", default=None, help="records of an earlier run, put beside")
    ap.add_argument("--from-json", default=None, help="write the tables of saved records (--json) without running")
    ap.add_argument("--plan-only", action="store_true", help="plan only (auto's method, layers, parameters)")
    ap.add_argument("--resume", action="store_true", help="keep the records in --json and run only the others")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    lens = _ints(args.max_len)
    if args.worker:
        cls, k, letters, seed = args.worker.split(":")
        measure(cls, int(k), int(letters), int(seed), lens, args.max_params_row, args.plan_only)
        return 0
    if args.quick:
        args.k, args.letters, args.seeds = "2,4,6", "4,64", "0"
    before = {_key(r): r for r in json.loads(Path(args.before).read_text())} if args.before else {}
    t0 = time.perf_counter()
    records: list[dict] = json.loads(Path(args.from_json).read_text()) if args.from_json else []
    if args.resume and args.json and Path(args.json).exists():
        records = json.loads(Path(args.json).read_text())
    done = {_key(r)[: _key(r).rindex(":")] for r in records}
    for cls in [] if args.from_json else args.classes.split(","):
        for k in _ints(args.k):
            for letters in _ints(args.letters):
                for seed in _ints(args.seeds):
                    if f"{cls}:{k}:{letters}:{seed}" in done:
                        continue
                    rows = run_row(cls, k, letters, seed, lens, args.timeout, args.max_params_row, args.plan_only)
                    records += rows
                    for r in rows:
                        print(json.dumps(r), flush=True)
                    if args.json:
                        Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
    lines = [header("The subregular hierarchy: auto on random languages of each class"),
             f"\n`python benchmarks/subregular.py {' '.join(argv if argv is not None else sys.argv[1:])}` "
             f"(labels readout: acceptance at every position; each language in its own process, "
             f"{args.timeout:.0f} s at most).", *summary(records), *table(records, before)]
    print(finish(lines, t0, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
