"""Parameters of the scan construction (Theorem 10) per layer, beside 16·m³.

For each of the paper's 19 automata compiles ``--method scan`` at max_len T (default 100)
and prints: states, points m the maps act on, attention layers, d_model, MLP hidden
widths, parameters of one scan layer (its attention head and composition MLP, block 1)
and of the whole model, 16·m³, and whether the model verifies exact (exhaustive up to
the budget, random full-length sequences, adversarial families, layer-wise invariants,
and whether every composition ran bit-exactly).  Then random automata (seeded, 4
letters) with the given numbers of states at ``--random-max-len``.

``--json FILE`` writes the measured numbers; ``--before FILE`` reads such a file made
at an earlier commit and adds its per-layer and total parameters as "before" columns
(layers must agree).  The committed table was made by

    git archive 36fa54a | tar -x -C /tmp/before    # the commit before the O(m³) composition
    PYTHONPATH=/tmp/before python benchmarks/scan_params.py --no-verify --json /tmp/before.json
    python benchmarks/scan_params.py --before /tmp/before.json --out benchmarks/results/scan_params.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import compiler
from compiler.automata.catalog import paper_suite

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header
from compile_scaling import random_automaton
from paper_suite import PAPER_NAMES


def measure(spec, label: str, T: int, verify_it: bool, samples: int, budget: int) -> dict:
    """Compile one scan model and count its parameters (and verify it)."""
    t0 = time.perf_counter()
    try:
        model = compiler.compile_automaton(spec, max_len=T, method="scan")
    except compiler.ShortcutError as e:
        return {"label": label, "T": T, "refused": str(e)}
    compile_s = time.perf_counter() - t0
    meta = model.meta["scan"]
    layer = sum(p.numel() for p in model.blocks[0].parameters())
    row = {"label": label, "T": T, "states": model.automaton.n_states, "m": meta["n_points"],
           "layers": len(model.blocks), "d_model": model.config.d_model,
           "hidden": list(model.config.blocks[0].mlp_hidden), "layer_params": layer,
           "largest_layer_params": max(sum(p.numel() for p in b.parameters()) for b in model.blocks),
           "params": sum(p.numel() for p in model.parameters()), "compile_s": compile_s}
    if verify_it:
        from verify.check import verify

        t0 = time.perf_counter()
        r = verify(model, samples=samples, seed=0, exhaustive_budget=budget)
        mlps = (r.margins or {}).get("mlps") or []
        row.update(exact=r.exact, verify_s=time.perf_counter() - t0,
                   bit_exact=all(x.get("bit_exact") for x in mlps) if mlps else None)
    return row


def fmt_row(r: dict, before: dict | None) -> str:
    b = (before or {}).get(r["label"], {})
    if "refused" in r:
        return f"| {r['label']} | | | | | | refused: {r['refused'][:80]} | | | | | |"
    m = r["m"]
    if b and "refused" not in b and b.get("layers") != r["layers"]:
        raise SystemExit(f"{r['label']}: layers changed ({b.get('layers')} -> {r['layers']})")
    b_layer = "refused" if "refused" in b else (f"{b['largest_layer_params']:,}" if b else "—")
    b_total = ("refused: " + b["refused"].split("would have")[-1].split("parameters")[0].strip() + " est."
               if "refused" in b else (f"{b['params']:,}" if b else "—"))
    exact = "—" if "exact" not in r else f"{r['exact']}" + (" (bit-exact)" if r.get("bit_exact") else "")
    return (f"| {r['label']} | {r['states']} | {m} | {r['layers']} | {r['d_model']} | "
            f"{'×'.join(map(str, r['hidden']))} | {b_layer} | {r['largest_layer_params']:,} | {16 * m ** 3:,} | "
            f"{b_total} | {r['params']:,} | {exact} |")


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--automata", nargs="+", default=paper_suite())
    p.add_argument("--random-states", nargs="*", type=int, default=[32, 64])
    p.add_argument("--random-max-len", type=int, default=256)
    p.add_argument("--samples", type=int, default=8, help="random full-length sequences per automaton")
    p.add_argument("--exhaustive-budget", type=int, default=512, help="sequences in the exhaustive check")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--before", help="JSON written by --json at an earlier commit")
    p.add_argument("--json", help="write the measured rows here")
    p.add_argument("--out", help="also write the table to this file")
    args = p.parse_args(argv)
    before = None
    if args.before:
        before = {r["label"]: r for r in json.loads(Path(args.before).read_text())["rows"]}
    lines = [header(f"Scan parameters per layer (--method scan, float32), paper suite at T = {args.max_len}"), "",
             "m: points the maps act on (a faithful quotient for group automata). Per layer: the largest "
             "block (attention head + composition MLP), parameters as stored (dense). "
             + ("Before: the same script at the commit before the O(m³) composition MLP (Lemma 14's indicators "
                "and dense m²-wide middle layer; element readouts fused into the last layer). " if before else "")
             + f"Exact: verify with {args.samples} random full-length sequences, exhaustive up to "
             f"{args.exhaustive_budget} sequences, adversarial families, layer-wise invariants, seed 0; "
             "bit-exact: every composition MLP's inputs were integers up to its float exact-input noise.", "",
             ("| automaton | states | m | attn layers | d_model | MLP hidden | params/layer before | params/layer | "
              "16·m³ | params before | params | exact |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    t_all = time.perf_counter()
    rows = []
    jobs = [(name, PAPER_NAMES.get(name, name), args.max_len) for name in args.automata]
    jobs += [(random_automaton(n, 4, seed=n), f"random {n} states", args.random_max_len) for n in args.random_states]
    for i, (spec, label, T) in enumerate(jobs):
        if i == len(args.automata):
            lines += ["", f"Random automata (4 letters, seed = states) at T = {T}:", "", lines[4], lines[5]]
            print("\n".join(lines[-5:]), flush=True)
        r = measure(spec, label, T, not args.no_verify, args.samples, args.exhaustive_budget)
        rows.append(r)
        lines.append(fmt_row(r, before))
        print(lines[-1], flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"max_len": args.max_len, "rows": rows}, indent=1))
    return finish(lines, t_all, args.out)


if __name__ == "__main__":
    main()
