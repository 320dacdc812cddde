"""No regression: what `auto` compiles for the paper's 19 automata and every catalog family, before and after.

For each automaton (``catalog.paper_suite()`` and each catalog family's example) at each T
(default 100 and 1024), compiles with ``--method auto`` and records (method, attention layers,
parameters).  Only ``compile_automaton`` and ``model.info()`` are used, so the same command
runs against an older checkout (``PYTHONPATH=<old tree>``) to record the planner it replaces:

    PYTHONPATH=<tree at 36fa54a> python benchmarks/planner_before_after.py \
        --json-out benchmarks/results/planner_before_after_36fa54a.json
    python benchmarks/planner_before_after.py --before benchmarks/results/planner_before_after_36fa54a.json \
        --out benchmarks/results/planner_before_after.md

The same against the tree before the product construction (47c82f0): ``--before-commit 47c82f0``,
``planner_before_after_47c82f0.json`` and ``planner_product_before_after.md``.

The table marks a row ``deeper`` or ``larger`` where the new choice has more attention layers,
or more parameters, than the old one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import compiler
from compiler.automata.catalog import entries, paper_suite

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402


def suite() -> list[str]:
    """The paper's 19 automata, then each catalog family's example not already among them."""
    names = paper_suite()
    return names + [e.example for e in entries() if e.example not in names]


def auto_compiled(name: str, T: int) -> dict:
    t0 = time.perf_counter()
    try:
        model = compiler.compile_automaton(name, max_len=T)
    except compiler.ShortcutError as e:
        return {"method": None, "refusal": str(e)}
    info = model.info()
    return {"method": info["method"], "layers": info["n_layers"], "params": info["n_params"],
            "seconds": round(time.perf_counter() - t0, 2)}


def verdict(old: dict, new: dict) -> str:
    if new.get("layers") is None:
        return "refused" if old.get("layers") is not None else "refused before and now"
    if old.get("layers") is None:
        return "compiles now"
    if new["layers"] > old["layers"]:
        return "**deeper**"
    if new["params"] > old["params"]:
        return "**larger**" + (" (shallower)" if new["layers"] < old["layers"] else "")
    if (new["layers"], new["params"]) == (old["layers"], old["params"]):
        return "same"
    return "shallower and smaller" if new["layers"] < old["layers"] else "smaller"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, nargs="+", default=[100, 1024])
    p.add_argument("--automata", nargs="+", default=None)
    p.add_argument("--json-out", help="write the records as JSON")
    p.add_argument("--before", help="the --json-out file of the old planner")
    p.add_argument("--out", help="also write the table to this file")
    p.add_argument("--before-commit", default="36fa54a", help="the commit the --before file was recorded on")
    args = p.parse_args(argv)
    t_all = time.perf_counter()
    names = args.automata or suite()
    rows = {f"{n}@{T}": auto_compiled(n, T) for T in args.max_len for n in names}
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1) + "\n")
    old = json.loads(Path(args.before).read_text()) if args.before else {}
    fmt = lambda r: ("refused" if r.get("layers") is None  # noqa: E731
                     else f"{r['method']}, {r['layers']}, {r['params']:,}")
    c = args.before_commit
    lines = [header(f"auto before ({c}) and after: the paper's automata and every catalog family"), "",
             "Each cell: method, attention layers, parameters (float32, `compile_automaton(name, max_len=T)`). "
             f"Before: this script with `--json-out` run on the tree of commit {c}, committed as "
             f"`{Path(args.before).name if args.before else '-'}`.", "",
             "| automaton | T | before | after | change |", "|---|---|---|---|---|"]
    bad = []
    for key, r in rows.items():
        name, T = key.rsplit("@", 1)
        o = old.get(key, {})
        v = verdict(o, r) if old else ""
        if v.startswith("**") or v == "refused":
            bad.append(key)
        lines.append(f"| `{name}` | {T} | {fmt(o) if old else ''} | {fmt(r)} | {v} |")
    if old:
        lines.insert(4, f"Regressions (deeper, larger or refused): {len(bad)}"
                     + (f" -- {', '.join(bad)}" if bad else "") + ".\n")
    text = finish(lines, t_all, args.out)
    print(text)
    return text


if __name__ == "__main__":
    main()
