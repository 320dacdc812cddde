"""What planning costs, construction by construction, and whether ``auto``'s pick moved.

Two modes.  ``--grid`` plans generated languages (:mod:`compiler.automata.subregular_families`),
each in a fresh process: every registry entry's ``applies`` and ``estimate`` timed in CPU seconds
(``time.process_time``: comparable under load), the whole plan (``compiler.pipeline.candidates``,
what ``shortcut plan`` runs) in CPU and wall seconds, and auto's pick (method, layers, parameters).
``--suite`` records auto's pick on the paper's automata (``catalog.paper_suite()``), every catalog
family's example and ``examples/`` at each T, for ``prefer`` depth and size; ``--before`` compares a
saved record (the same command on an older tree) and names every pick that moved.

    OPENBLAS_NUM_THREADS=1 python benchmarks/plan_speed.py --grid --classes pt --k 4 --letters 64
    python benchmarks/plan_speed.py --grid --language ltt:4:64:0:threshold=2,factors=5 --max-len 50
    python benchmarks/plan_speed.py --suite --json before.json        # on the old tree
    python benchmarks/plan_speed.py --suite --before before.json      # on the new one
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.automata.subregular_families import CLASSES, random_language  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _parse(text: str) -> tuple[str, int, int, int, dict[str, int]]:
    """``cls:k:letters:seed[:name=v,...]``: a generated language and its extra arguments."""
    cls, k, letters, seed, *rest = text.split(":")
    extra = {n: int(v) for n, v in (kv.split("=") for kv in rest[0].split(","))} if rest and rest[0] else {}
    return cls, int(k), int(letters), int(seed), extra


def measure(language: str, max_len: int) -> dict:
    """One language in this process: each entry's analysis and estimate, then the whole plan."""
    import torch  # noqa: F401  (imported before timing, as the CLI would)

    from constructions import registry
    from constructions.construction import Refusal

    cls, k, letters, seed, extra = _parse(language)
    a = random_language(cls, k=k, letters=letters, seed=seed, **extra)
    entries = {}
    for c in registry.entries():
        t = time.process_time()
        plan = c.applies(a)
        t1 = time.process_time()
        if isinstance(plan, Refusal):
            got = f"refused: {plan.reason[:90]}"
        else:
            try:
                cost = c.estimate(plan, max_len, "sinusoidal")
                got = f"{cost.layers} L, {cost.params:,}"
            except Exception as e:  # noqa: BLE001  (a budget refusal is a row too)
                got = f"estimate refused: {str(e)[:90]}"
        entries[c.name] = {"applies_s": round(t1 - t, 2), "estimate_s": round(time.process_time() - t1, 2),
                           "result": got}
    return {"language": language, "states": a.n_states, "T": max_len, "entries": entries}


def plan_once(language: str, max_len: int) -> dict:
    """``candidates`` (the plan ``shortcut plan`` makes) on a fresh process's first call."""
    import torch  # noqa: F401

    from compiler.pipeline import candidates

    cls, k, letters, seed, extra = _parse(language)
    a = random_language(cls, k=k, letters=letters, seed=seed, **extra)
    t, c = time.perf_counter(), time.process_time()
    out = candidates(a, max_len=max_len)
    rec = {"language": language, "states": a.n_states, "T": max_len, "plan_cpu_s": round(time.process_time() - c, 2),
           "plan_s": round(time.perf_counter() - t, 2), "error": out["error"]}
    if out["error"] is None:
        ch = next(x for x in out["candidates"] if x["name"] == out["chosen"])
        rec.update(method=ch["name"], layers=ch["layers"], params=ch["params"])
    return rec


def _worker(mode: str, language: str, max_len: int, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--worker", mode, "--language", language, "--max-len", str(max_len)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"language": language, "T": max_len, "error": f"timeout after {timeout:.0f} s"}
    if p.returncode:
        return {"language": language, "T": max_len, "error": (p.stderr.strip().splitlines() or ["?"])[-1][:200]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def grid(languages: list[str], max_len: int, timeout: float, per_entry: bool) -> list[dict]:
    """Each language planned in a fresh process (and its entries timed in another, ``per_entry``)."""
    recs = []
    for lang in languages:
        rec = _worker("plan", lang, max_len, timeout)
        if per_entry:
            rec["entries"] = _worker("entries", lang, max_len, timeout).get("entries")
        print(json.dumps(rec), flush=True)
        recs.append(rec)
    return recs


def suite_automata() -> list[tuple[str, object]]:
    """The paper's automata, each catalog family's example and the example files."""
    from compiler.automata.catalog import entries, paper_suite

    names = paper_suite()
    names += [e.example for e in entries() if e.example not in names]
    files = sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in (".json", ".dot"))
    return [(n, n) for n in names] + [(str(p.relative_to(ROOT)), str(p)) for p in files]


def suite(lens: list[int]) -> list[dict]:
    """auto's pick (method, layers, params) for every suite automaton, T and preference."""
    from compiler.pipeline import candidates

    recs = []
    for name, spec in suite_automata():
        for T in lens:
            for prefer in ("depth", "size"):
                t = time.process_time()
                try:
                    out = candidates(spec, max_len=T, prefer=prefer)
                except Exception as e:  # noqa: BLE001  (a spec the planner refuses is a row too)
                    out = {"error": f"{type(e).__name__}: {e}"[:200], "candidates": []}
                rec = {"automaton": name, "T": T, "prefer": prefer, "cpu_s": round(time.process_time() - t, 2),
                       "error": out["error"]}
                if out["error"] is None:
                    ch = next(x for x in out["candidates"] if x["name"] == out["chosen"])
                    rec.update(method=ch["name"], layers=ch["layers"], params=ch["params"])
                print(json.dumps(rec), flush=True)
                recs.append(rec)
    return recs


def compare(before: list[dict], after: list[dict]) -> list[str]:
    """The rows whose pick (method, layers, params, or error) differs."""
    key = ("automaton", "T", "prefer")
    old = {tuple(r[k] for k in key): r for r in before}
    moved = []
    for r in after:
        o = old.get(tuple(r[k] for k in key))
        pick = ("method", "layers", "params", "error")
        if o is None or any(o.get(p) != r.get(p) for p in pick):
            moved.append(f"{r['automaton']} T={r['T']} {r['prefer']}: "
                         f"{None if o is None else [o.get(p) for p in pick]} -> {[r.get(p) for p in pick]}")
    return moved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", action="store_true", help="plan generated languages (fresh process each)")
    ap.add_argument("--suite", action="store_true", help="auto's pick on the paper suite and the examples")
    ap.add_argument("--classes", default=",".join(c for c in CLASSES))
    ap.add_argument("--k", default="2,4,6")
    ap.add_argument("--letters", default="4,16,64")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--language", action="append", default=[], help="cls:k:letters:seed[:name=v,...] (repeatable)")
    ap.add_argument("--max-len", default="50", help="T for --grid (one), T list for --suite (default 100,256)")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--entries", action="store_true", help="also time each registry entry (another process)")
    ap.add_argument("--json", default=None, help="write the records")
    ap.add_argument("--before", default=None, help="--suite: a saved record to compare against")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        lang, T = args.language[0], int(args.max_len)
        print(json.dumps(measure(lang, T) if args.worker == "entries" else plan_once(lang, T)))
        return 0
    if args.suite:
        lens = [int(x) for x in (args.max_len if args.max_len != "50" else "100,256").split(",")]
        recs = suite(lens)
        if args.before:
            moved = compare(json.loads(Path(args.before).read_text()), recs)
            print(f"{len(recs)} picks, {len(moved)} moved" + "".join(f"\n  {m}" for m in moved))
    else:
        langs = args.language or [f"{c}:{k}:{n}:{s}" for c in args.classes.split(",") for k in args.k.split(",")
                                  for n in args.letters.split(",") for s in args.seeds.split(",")]
        recs = grid(langs, int(args.max_len), args.timeout, args.entries)
    if args.json:
        Path(args.json).write_text(json.dumps(recs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
