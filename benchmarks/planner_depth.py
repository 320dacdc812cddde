"""The planner on random automata: is `auto` ever deeper than a forced method, does it ever refuse?

Draws N automata with the project's random generator (``catalog.random_automaton``, ``mixed``
maps: 2-8 states, 2-4 letters, seed 0) and, at max_len T (default 256):

* ``--auto-only``: compiles each with ``--method auto`` and records (method, attention layers,
  parameters) or the refusal -- only ``compile_automaton`` and ``model.info()``, so the same
  command runs against an older checkout (``PYTHONPATH=<old tree>``) to record the planner
  it replaces (``--json-out``);
* otherwise: every registered construction's plan and estimate (layers, params) or refusal,
  auto's decision (from the estimates), and the checks -- auto's depth is at most the
  smallest forced depth, auto never refuses while a forced method fits; on the first
  ``--verify`` automata every applicable construction is also built and assembled and its
  parameter count and depth compared with the estimate.  With ``--before FILE`` (the
  ``--auto-only`` JSON of the old planner) the table shows both depth histograms.

    PYTHONPATH=<tree at 36fa54a> python benchmarks/planner_depth.py --auto-only \
        --json-out benchmarks/results/planner_depth_36fa54a.json
    python benchmarks/planner_depth.py --before benchmarks/results/planner_depth_36fa54a.json \
        --out benchmarks/results/planner_depth.md

(``git archive 36fa54a | tar -x -C DIR`` gives the old tree.)  Against the tree before the product
construction: ``--before-commit 47c82f0`` with ``planner_depth_47c82f0.json`` (``planner_depth_product.md``).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
from pathlib import Path

import compiler
from compiler.automata.catalog import random_automaton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402


def automata(n: int, seed: int):
    """The sweep: N random automata, 2-8 states and 2-4 letters each, in a fixed order."""
    rng = random.Random(seed)
    for i in range(n):
        n_states, n_letters = rng.randint(2, 8), rng.randint(2, 4)
        yield random_automaton(rng, n_states, n_letters, name=f"random{i}")


def auto_compiled(a, T: int) -> dict:
    """``--method auto`` compiled: method, layers, params (or the refusal).  Old-planner safe."""
    try:
        model = compiler.compile_automaton(a, max_len=T)
    except compiler.ShortcutError as e:
        return {"method": None, "refusal": str(e)}
    info = model.info()
    return {"method": info["method"], "layers": info["n_layers"], "params": info["n_params"]}


def planned(a, T: int, verify: bool) -> dict:
    """Every construction's estimate or refusal and auto's choice (the planner's candidates);
    with ``verify``, each applicable construction built and assembled too."""
    import torch

    from compiler import pipeline
    from constructions.assemble import assemble
    from constructions.construction import BuildOptions
    from constructions.registry import entries

    try:
        d = pipeline.decide(a, pipeline.AUTO, T)
        auto = {"method": d.method, "layers": None, "params": None}
        cands = d.candidates
    except compiler.ShortcutError as e:
        auto, cands = {"method": None, "refusal": str(e)}, pipeline.survey(a, T)[0]
    forced = {}
    for c in cands:
        forced[c.name] = {"layers": c.layers, "params": c.params, "refusal": c.refusal if c.layers is None else None}
        if c.chosen:
            auto.update(layers=c.layers, params=c.params)
    out = {"auto": auto, "forced": forced, "n_states": a.n_states, "n_letters": a.n_symbols}
    if verify:
        built = {}
        for c in entries():
            if forced[c.name]["layers"] is None:
                continue
            program, meta = c.build(a, c.applies(a), BuildOptions(T))
            m = assemble(program, max_len=T, dtype=torch.float32, meta=meta)
            built[c.name] = {"layers": len(m.config.blocks), "params": sum(p.numel() for p in m.parameters())}
        out["built"] = built
    return out


def histogram(depths: list[int | None]) -> dict[str, int]:
    h = collections.Counter("refused" if x is None else x for x in depths)
    return {str(k): h[k] for k in sorted(h, key=lambda k: (isinstance(k, str), k))}


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=1000, help="number of random automata")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--auto-only", action="store_true", help="only compile with auto (runs against old checkouts)")
    p.add_argument("--json-out", help="write the per-automaton records as JSON")
    p.add_argument("--before", help="an --auto-only JSON of the old planner, for the before/after histogram")
    p.add_argument("--verify", type=int, default=100, help="build and assemble every applicable construction "
                   "for the first this many automata and compare with the estimates")
    p.add_argument("--out", help="also write the table to this file")
    p.add_argument("--before-commit", default="36fa54a", help="the commit the --before file was recorded on")
    args = p.parse_args(argv)
    T = args.max_len
    t_all = time.perf_counter()
    rows = []
    for i, a in enumerate(automata(args.n, args.seed)):
        rows.append(auto_compiled(a, T) if args.auto_only else planned(a, T, i < args.verify))
        if (i + 1) % 100 == 0:
            print(f"{i + 1} automata, {time.perf_counter() - t_all:.0f} s", file=sys.stderr, flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=None) + "\n")
    if args.auto_only:
        h = histogram([r.get("layers") for r in rows])
        text = json.dumps(h)
        print(text)
        return text
    return report(rows, args, t_all)


def report(rows: list[dict], args, t_all: float) -> str:
    """The checks (assertions) and the Markdown table."""
    T = args.max_len
    names = list(rows[0]["forced"])
    deeper, refused_but_fits, mismatches, verified = [], [], [], 0
    for i, r in enumerate(rows):
        fits = [f["layers"] for f in r["forced"].values() if f["layers"] is not None]
        if r["auto"]["method"] is None and fits:
            refused_but_fits.append(i)
        elif fits and r["auto"]["layers"] > min(fits):
            deeper.append(i)
        for name, b in r.get("built", {}).items():
            verified += 1
            f = r["forced"][name]
            if (f["layers"], f["params"]) != (b["layers"], b["params"]):
                mismatches.append((i, name, f, b))
    after = histogram([r["auto"].get("layers") for r in rows])
    shallowest = histogram([min((f["layers"] for f in r["forced"].values() if f["layers"] is not None), default=None)
                            for r in rows])
    before = None
    if args.before:
        old = json.loads(Path(args.before).read_text())
        assert len(old) == len(rows), "the before file has another number of automata"
        before = histogram([r.get("layers") for r in old])
        worse_than_before = [i for i, (o, r) in enumerate(zip(old, rows))
                             if o.get("layers") is not None and (r["auto"]["layers"] or 0) > o["layers"]]
    lines = [header(f"The planner on {len(rows)} random automata at T = {T}"), "",
             f"`catalog.random_automaton` (mixed maps), seed {args.seed}: 2-8 states, 2-4 letters.  For each, every "
             f"construction's estimate (attention layers, parameters) or refusal, and `auto`'s choice.  Estimates "
             f"were checked against the built and assembled models of every applicable construction for the first "
             f"{min(args.verify, len(rows))} automata ({verified} models): {len(mismatches)} mismatches.",
             "",
             f"* auto deeper than the shallowest forced method: {len(deeper)} automata",
             f"* auto refused although a forced method fits: {len(refused_but_fits)} automata"]
    if before is not None:
        lines.append(f"* auto deeper than the old planner ({args.before_commit}): {len(worse_than_before)} automata")
    keys = sorted(set(after) | set(shallowest) | set(before or {}), key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0))
    lines += ["", "Depth histogram (number of automata per attention-layer count):", "",
              "| attention layers | " + (f"auto before ({args.before_commit}) | " if before is not None else "")
              + "auto now | shallowest forced |",
              "|---|" + ("---|" if before is not None else "") + "---|---|"]
    for k in keys:
        lines.append(f"| {k} | " + (f"{before.get(k, 0)} | " if before is not None else "")
                     + f"{after.get(k, 0)} | {shallowest.get(k, 0)} |")
    chosen = collections.Counter(r["auto"]["method"] for r in rows)
    applies = {n: sum(r["forced"][n]["layers"] is not None for r in rows) for n in names}
    lines += ["", "| construction | applies and fits | chosen by auto |", "|---|---|---|"]
    lines += [f"| {n} | {applies[n]} | {chosen.get(n, 0)} |" for n in names]
    text = finish(lines, t_all, args.out)
    print(text)
    assert not mismatches, f"estimates differ from the built models: {mismatches[:3]}"
    assert not deeper, f"auto is deeper than a forced method for automata {deeper[:10]}"
    assert not refused_but_fits, f"auto refused although a forced method fits: {refused_but_fits[:10]}"
    return text


if __name__ == "__main__":
    main()
