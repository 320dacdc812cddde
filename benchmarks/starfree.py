"""Star-free languages: the since program (``starfree``) against the Krohn-Rhodes reset cascade.

For each generated ``sf`` language (a random past-LTL formula of temporal depth k,
compiler/automata/subregular_families.py) at max_len T, with the labels readout (acceptance at
every position): every candidate's estimate -- the since program's and the cascade's layers and
parameters, or their refusals --, then auto compiled and certified, and where auto took another
construction the since program forced and certified too.  Each language runs in its own process
with a timeout.

    python benchmarks/starfree.py --k 2,3,4,5,6 --letters 4,16,64 --seeds 0,1 \
        --out benchmarks/results/starfree.md --json benchmarks/results/starfree.json \
        --before benchmarks/results/starfree_greedy.json

``--before`` adds the since program of an earlier run (its JSON) beside each row.  Times are wall
seconds; 'detect cpu s' is the since program's detection alone and 'row cpu s' the row's whole
process (CPU seconds, which the machine's load does not inflate).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402

CASCADE, SINCE = "krohn-rhodes", "starfree"


def _cell(c: dict | None) -> str:
    if c is None:
        return "-"
    if c.get("refusal"):
        return "refused"
    return f"{c['layers']}, {c['params']:,}"


def _certified(model) -> tuple[str, float | None]:
    from verify.certify import certify

    cert = certify(model)
    if cert.certified:
        return "certified", cert.seconds
    return "not certified: " + str((cert.reason or ""))[:90].replace("|", "\\|"), cert.seconds


def measure(k: int, letters: int, seed: int, T: int) -> dict:
    """One language in this process (printed as one JSON line)."""
    from compiler.automata.starfree import detect
    from compiler.automata.subregular_families import random_language
    from compiler.pipeline import candidates, compile_automaton

    a = random_language("sf", k=k, letters=letters, seed=seed)
    rec: dict = {"k": k, "letters": letters, "seed": seed, "T": T, "states": a.n_states}
    t = time.process_time()
    detect(a)
    rec["detect_cpu_s"] = time.process_time() - t
    t = time.perf_counter()
    plan = candidates(a, max_len=T)
    rec["plan_s"] = time.perf_counter() - t
    cands = {c["name"]: c for c in plan["candidates"]}
    rec["since"], rec["cascade"] = cands.get(SINCE), cands.get(CASCADE)
    t = time.perf_counter()
    model = compile_automaton(a, max_len=T, readout="labels")
    info = model.info()
    rec.update(compile_s=time.perf_counter() - t, method=info["method"], layers=info["n_layers"],
               params=info["n_params"])
    print(json.dumps(rec), flush=True)
    rec["status"], rec["certify_s"] = _certified(model)
    print(json.dumps(rec), flush=True)
    since = rec["since"]
    if info["method"] != SINCE and since and not since.get("refusal"):
        forced = compile_automaton(a, max_len=T, readout="labels", method=SINCE)
        rec["since_status"], rec["since_certify_s"] = _certified(forced)
    elif info["method"] == SINCE:
        rec["since_status"], rec["since_certify_s"] = rec["status"], rec["certify_s"]
    print(json.dumps(rec), flush=True)
    return rec


def run_row(k: int, letters: int, seed: int, T: int, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--worker", f"{k}:{letters}:{seed}:{T}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out, why = p.stdout, (f"failed (exit {p.returncode})" if p.returncode else "")
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        why = f"timeout after {timeout:.0f} s"
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    rec = lines[-1] if lines else {"k": k, "letters": letters, "seed": seed, "T": T}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rec["cpu_s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if why:
        rec["status"] = rec.get("status") or why
        rec["since_status"] = rec.get("since_status") or why
    return rec


def _key(r: dict) -> tuple[int, int, int, int]:
    return r["k"], r["letters"], r["seed"], r["T"]


def table(records: list[dict], before: dict | None = None) -> list[str]:
    """One row per language; with ``before`` (rows of an earlier run by :func:`_key`) its since program too."""
    old = "since program before | " if before is not None else ""
    lines = [f"| k | letters | seed | states | {old}since program (layers, params) | cascade (layers, params) | auto | "
             "layers | params | auto certified | since certified | plan s | compile s | certify s | detect cpu s | "
             "row cpu s |", "|---" * (16 + (before is not None)) + "|"]
    for r in records:
        def num(x, f="{:.1f}"):
            return "-" if x is None else f.format(x)
        was = f"{_cell(before.get(_key(r), {}).get('since'))} | " if before is not None else ""
        lines.append(f"| {r['k']} | {r['letters']} | {r['seed']} | {r.get('states', '-')} | {was}"
                     f"{_cell(r.get('since'))} | {_cell(r.get('cascade'))} | {r.get('method', '-')} | "
                     f"{r.get('layers', '-')} | {num(r.get('params'), '{:,}')} | {r.get('status', '-')} | "
                     f"{r.get('since_status', '-')} | {num(r.get('plan_s'))} | {num(r.get('compile_s'))} | "
                     f"{num(r.get('certify_s'))} | {num(r.get('detect_cpu_s'), '{:.2f}')} | {num(r.get('cpu_s'))} |")
    return lines


def _applies(r: dict | None) -> bool:
    return bool(r) and not r.get("refusal")  # type: ignore[union-attr]


def summary(records: list[dict], before: dict | None = None) -> list[str]:
    both = [r for r in records if r.get("since") and not r["since"].get("refusal") and r.get("cascade")
            and not r["cascade"].get("refusal")]
    shallower = sum(r["since"]["layers"] < r["cascade"]["layers"] for r in both)
    deeper = sum(r["since"]["layers"] > r["cascade"]["layers"] for r in both)
    applied = sum(bool(r.get("since")) and not r["since"].get("refusal") for r in records)
    taken = sum(r.get("method") == SINCE for r in records)
    out = [f"\nThe since program applies to {applied} of {len(records)} languages; against the cascade "
           f"(both apply: {len(both)}) it is shallower on {shallower}, deeper on {deeper}; auto takes it on {taken}."]
    if before is not None:
        was = [before.get(_key(r), {}).get("since") for r in records]
        pairs = [(w, r["since"]) for w, r in zip(was, records) if _applies(w) and _applies(r.get("since"))]
        out.append(f"Before (the earlier run): it applied to {sum(map(_applies, was))}; where both runs apply "
                   f"({len(pairs)}), now shallower on {sum(n['layers'] < w['layers'] for w, n in pairs)}, deeper on "
                   f"{sum(n['layers'] > w['layers'] for w, n in pairs)}.")
    cpu = [r["detect_cpu_s"] for r in records if r.get("detect_cpu_s") is not None]
    if cpu:
        out.append(f"The detection takes {sum(cpu):.1f} CPU s in all, at most {max(cpu):.2f} s on one language.")
    return out


def paper_rows(T: int) -> list[str]:
    """The paper's 19 automata and the example specs: auto's plan, the shallowest plan without the
    since program, and the since program's, compiled and certified where it applies (auto is never
    deeper than before: it takes the fewest layers)."""
    import glob

    from compiler.automata.catalog import paper_suite
    from compiler.pipeline import candidates, compile_automaton

    names = [n.replace("dyck:", "dyck-legal:") for n in paper_suite()]
    names += sorted(glob.glob("examples/*.json") + glob.glob("examples/*.dot") + glob.glob("examples/*/*.dot"))
    lines = ["| automaton | auto (layers) | shallowest without starfree | since program | since certified |",
             "|---|---|---|---|---|"]
    for name in names:
        p = candidates(name, max_len=T)
        c = {x["name"]: x for x in p["candidates"]}
        old = min((x["layers"], x["params"], x["name"]) for x in p["candidates"] if x["fits"] and x["name"] != SINCE)
        cert = _certified(compile_automaton(name, max_len=T, method=SINCE))[0] if _applies(c[SINCE]) else "-"
        lines.append(f"| {name} | {p['chosen']} {c[p['chosen']]['layers']} | {old[2]} {old[0]} | {_cell(c[SINCE])} | "
                     f"{cert} |")
        print(lines[-1], flush=True)
    return lines


def detect_rows(ks: list[int], letters: list[int], seeds: list[int]) -> list[str]:
    """The since program's detection alone on every language (no compile): depth or refusal, CPU s."""
    from compiler.automata.starfree import detect
    from compiler.automata.subregular_families import random_language

    lines = ["| k | letters | seed | states | since program (layers, or why not) | detect cpu s |",
             "|---|---|---|---|---|---|"]
    found, cpu = 0, []
    for k in ks:
        for n in letters:
            for seed in seeds:
                a = random_language("sf", k=k, letters=n, seed=seed)
                t = time.process_time()
                plan, why = detect(a)
                cpu.append(time.process_time() - t)
                found += plan is not None
                lines.append(f"| {k} | {n} | {seed} | {a.n_states} | {plan.depth if plan else why} | {cpu[-1]:.2f} |")
                print(lines[-1], flush=True)
    lines.append(f"\nA since program for {found} of {len(cpu)}; the detection takes {sum(cpu):.1f} CPU s in all, "
                 f"at most {max(cpu):.2f} s on one language.")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="2,3,4,5,6")
    ap.add_argument("--letters", default="4,16,64")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--max-len", type=int, default=50)
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--before", default=None, help="an earlier run's JSON: its since program beside each row")
    ap.add_argument("--paper", action="store_true", help="the paper's 19 automata and the examples instead")
    ap.add_argument("--detect-only", action="store_true", help="the since program's detection alone (no compile)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.paper:
        t0 = time.perf_counter()
        lines = [header("The paper's automata and the examples with the since program registered"),
                 f"\n`python benchmarks/starfree.py --paper --max-len {args.max_len}`\n", *paper_rows(args.max_len)]
        print(finish(lines, t0, args.out))
        return 0
    if args.detect_only:
        t0 = time.perf_counter()
        ints = [[int(x) for x in v.split(",")] for v in (args.k, args.letters, args.seeds)]
        lines = [header("Star-free languages: the since program's detection alone"),
                 f"\n`python benchmarks/starfree.py {' '.join(argv if argv is not None else sys.argv[1:])}`\n",
                 *detect_rows(*ints)]
        print(finish(lines, t0, args.out))
        return 0
    if args.worker:
        k, letters, seed, T = (int(x) for x in args.worker.split(":"))
        measure(k, letters, seed, T)
        return 0
    t0 = time.perf_counter()
    records: list[dict] = []
    before = {_key(r): r for r in json.loads(Path(args.before).read_text())} if args.before else None
    for k in map(int, args.k.split(",")):
        for letters in map(int, args.letters.split(",")):
            for seed in map(int, args.seeds.split(",")):
                rec = run_row(k, letters, seed, args.max_len, args.timeout)
                records.append(rec)
                print(table([rec], before)[-1], flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
    lines = [header("Star-free languages: the since program against the Krohn-Rhodes cascade"),
             f"\n`python benchmarks/starfree.py {' '.join(argv if argv is not None else sys.argv[1:])}` "
             f"(T = {args.max_len}, labels readout; each language in its own process, {args.timeout:.0f} s at most; "
             f"'since program' and 'cascade' are the planner's exact estimates).\n", *table(records, before),
             *summary(records, before)]
    print(finish(lines, t0, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
