"""Krohn-Rhodes models at T = 100, 1024, 4096: counter-decode widths and parameters, before and after.

For each solvable automaton of the paper's suite (plus ``--names``) and each max_len,
compiles with ``--method krohn-rhodes`` and records attention layers, d_mlp (the widest
MLP hidden layer), MLP hidden layers and parameters.  ``--json FILE`` saves the rows;
``--before FILE`` puts a run of another commit's code beside them (the script only uses
the public API, so it runs unchanged on older trees); ``--scan NAME ...`` adds the
scan's parameters for those automata; ``--verify`` also verifies each model (random
full-length sequences, adversarial families capped by ``--family-limit``, short
exhaustive sequences within ``--exhaustive-budget``, layer-wise invariants) and reports
the worst MLP input noise the layer-wise check measured (a counter's prefix sum times its decode's scale
among the inputs), in step units, against the tolerance 1/4.
``--reach`` instead runs ``--samples`` random full-length sequences one at a time
(explicit forward, no verifier) and reports errors and the worst prefix-sum noise:
float32's reach, set by the prefix sums, not by the decode.  The committed tables:

    git archive 36fa54a | tar -x -C /tmp/before && cp benchmarks/counter_sizes.py /tmp/before/benchmarks/
    (cd /tmp/before && PYTHONPATH=. python benchmarks/counter_sizes.py --json before.json)
    python benchmarks/counter_sizes.py --before /tmp/before/before.json --scan cyclic:2 quaternion \\
        --out benchmarks/results/counter_sizes.md
    python benchmarks/counter_sizes.py --verify --max-lens 100 --samples 8 --family-limit 1000 \
        --exhaustive-budget 4096 --names <the paper suite's solvable automata, parity, flipflop, memory:3, grid2d:3,4>
    python benchmarks/counter_sizes.py --verify --max-lens 1024 --samples 4 --family-limit 2 --names <...>
    python benchmarks/counter_sizes.py --verify --max-lens 4096 --samples 2 --family-limit 1 \
        --exhaustive-budget 256 --names cyclic:2 quaternion cyclic:8
    python benchmarks/counter_sizes.py --reach --max-lens 4096 8192 16384 --samples 2 --names cyclic:2 cyclic:8
    python benchmarks/counter_sizes.py --names cyclic:2 quaternion cyclic:5 symmetric:4 --max-lens 1024 4096 8192 \
        --scan cyclic:2 quaternion --out benchmarks/results/counter_blocks.md   (with the counters' position blocks)

(benchmarks/results/counter_exact.md gathers the verification and reach runs.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import compiler
from compiler.automata.catalog import paper_suite
from verify.check import verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402

MAX_LENS = [100, 1024, 4096]


def solvable_suite() -> list[str]:
    """The paper's automata that krohn-rhodes compiles (the solvable ones)."""
    out = []
    for name in paper_suite():
        try:
            compiler.compile_automaton(name, max_len=2, method="krohn-rhodes")
        except compiler.ShortcutError:
            continue
        out.append(name)
    return out


def sizes(name: str, T: int, method: str = "krohn-rhodes") -> dict:
    t0 = time.perf_counter()
    model = compiler.compile_automaton(name, max_len=T, method=method)
    i = model.info()
    return {"name": name, "T": T, "method": method, "layers": i["n_layers"], "d_model": i["d_model"],
            "d_mlp": i["d_mlp"], "mlp_hidden_layers": i["mlp_hidden_layers"], "params": i["n_params"],
            "compile_s": time.perf_counter() - t0, "warnings": len(model.meta.get("warnings", [])), "model": model}


def verified(row: dict, args) -> dict:
    t0 = time.perf_counter()
    r = verify(row["model"], samples=args.samples, family_limit=args.family_limit,
               exhaustive_budget=args.exhaustive_budget)
    # the MLPs' input noise in their step units (a counter's sum times its decode's scale among them)
    noise = [m["worst_input_noise"] for m in r.margins.get("mlps") or []]
    return {"exact": r.exact, "verify_s": time.perf_counter() - t0, "sequences": r.n_sequences,
            "sum_noise": max(noise, default=None)}


def reach(row: dict, samples: int) -> dict:
    """Random full-length sequences one at a time: errors against the automaton and the worst
    distance of a counter's prefix sum (2T x mean) from an integer (the decode tolerates 1/4)."""
    model, T = row["model"], row["T"]
    a = model.automaton
    rng = np.random.default_rng(0)
    counters = [c for c in model.meta["krohn_rhodes"]["components"] if c["kind"] == "counter"]
    errors, noise = 0, 0.0
    for _ in range(samples):
        tokens = rng.integers(0, a.n_symbols, (1, T))
        with torch.no_grad():
            logits, cache = model.run_with_cache(torch.from_numpy(tokens),
                                                 names_filter=lambda n: n.endswith("hook_resid_mid"))
        errors += int((logits[0].argmax(-1).numpy() != np.array(a.run(tokens[0].tolist()))).sum())
        for c in counters:
            x = cache[f"blocks.{c['block'] - 1}.hook_resid_mid"][0, :, model.subspace(f"kr:{c['name']}.mean")[0]]
            x = x.double() * 2 * T
            noise = max(noise, float((x - x.round()).abs().max()))
        del cache
    return {"exact": errors == 0, "sequences": samples, "sum_noise": noise if counters else None, "verify_s": 0.0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--names", nargs="*", default=None, help="automata (default: the paper suite's solvable ones)")
    p.add_argument("--max-lens", nargs="+", type=int, default=MAX_LENS)
    p.add_argument("--before", help="JSON rows of an earlier run, shown beside these")
    p.add_argument("--json", help="write the rows as JSON")
    p.add_argument("--scan", nargs="*", default=[], help="automata whose scan parameters are shown too")
    p.add_argument("--verify", action="store_true")
    p.add_argument("--reach", action="store_true", help="random sequences only, one at a time (long max_len)")
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--family-limit", type=int, default=4)
    p.add_argument("--exhaustive-budget", type=int, default=1024)
    p.add_argument("--out")
    args = p.parse_args()
    t_all = time.perf_counter()
    names = args.names or solvable_suite()
    before = {(r["name"], r["T"]): r for r in json.loads(Path(args.before).read_text())} if args.before else {}
    rows = []
    for T in args.max_lens:
        for name in names:
            row = sizes(name, T)
            if args.verify:
                row |= verified(row, args)
            elif args.reach:
                row |= reach(row, args.samples)
            if name in args.scan:
                row["scan_params"] = sizes(name, T, "scan")["params"]
            del row["model"]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    title = "Krohn-Rhodes models: counter-decode widths and parameters, float32"
    lines = [header(title), ""]
    if before:
        lines.append("Before: the previous decoder (one step pair per count value, width 4(n-1)(T+1) per counter), "
                     "measured by this script on that commit's tree; after: the residue gadget (coarse steps, then a "
                     "one-hot over M residues, n | M).\n")
    cols = ["spec", "T", "layers", "MLP hidden layers", "d_model", "d_mlp", "params"]
    if before:
        cols += ["d_mlp before", "params before", "params ratio"]
    if args.scan:
        cols += ["scan params"]
    if args.verify or args.reach:
        cols += ["exact", "sequences", "worst sum noise (tol 0.25)", "verify s"]
    cols += ["warnings"]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"`{r['name']}`", str(r["T"]), str(r["layers"]), str(r["mlp_hidden_layers"]), str(r["d_model"]),
                 f"{r['d_mlp']:,}", f"{r['params']:,}"]
        if before:
            b = before.get((r["name"], r["T"]))
            cells += ([f"{b['d_mlp']:,}", f"{b['params']:,}", f"{r['params'] / b['params']:.2f}"] if b
                      else ["—"] * 3)
        if args.scan:
            cells += [f"{r['scan_params']:,}" if "scan_params" in r else "—"]
        if args.verify or args.reach:
            noise = "—" if r["sum_noise"] is None else f"{r['sum_noise']:.2g}"
            cells += [str(r["exact"]), str(r["sequences"]), noise, f"{r['verify_s']:.1f}"]
        cells += [str(r["warnings"])]
        lines.append("| " + " | ".join(cells) + " |")
    if args.verify:
        lines.append(f"\nVerification per model: {args.samples} random full-length sequences, every adversarial "
                     f"family (at most {args.family_limit} sequences each), every sequence within an exhaustive "
                     f"budget of {args.exhaustive_budget}, layer-wise invariants; seed 0.")
    if args.reach:
        lines.append(f"\nReach: {args.samples} random full-length sequences (seed 0), explicit forward, argmax against "
                     f"the automaton; no verifier.")
    lines.append("\nwarnings: compile-time precision warnings (the float32 worst-case rounding bound of the counters' "
                 "prefix sums, eps (n-1) (s L (L+1) + ...) over s position blocks of length L, s = 1 the single head's "
                 "eps (n-1) T (T+1), exceeds the tolerance 1/4 for every s; the measured noise is far smaller).")
    print(finish(lines, t_all, args.out))


if __name__ == "__main__":
    main()
