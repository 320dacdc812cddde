"""The local construction on the automata it targets: depth, size and exactness at T = 256.

For each automaton: the `local` model (float32, sinusoidal positions) -- layers, parameters,
its exact estimate, and verification with ``--samples`` random full-length inputs, every
input up to the longest length whose count fits ``--exhaustive-budget``, the adversarial
families (the generic ones and local's own: quiet walks, anchors/events at both ends,
event-seeking walks) and the layer-wise invariants -- beside what the other constructions
give (layers, parameters where known, or the refusal).  nth-last:n ("the n-th letter from
the end is a", the regex DFA with 2^n states) is the lookback's target, listed to show
it keeps its one layer.

    python benchmarks/local_targets.py --out benchmarks/results/local_targets.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import finish, header  # noqa: E402

import compiler  # noqa: E402
from compiler.automata.catalog import build  # noqa: E402
from compiler.automata.load import load_spec  # noqa: E402
from compiler.automata.spec import Semiautomaton  # noqa: E402
from compiler.pipeline import decide  # noqa: E402
from constructions import local  # noqa: E402
from verify.check import verify  # noqa: E402

TARGETS = ["adder:2", "adder:3", "repeat:2", "blocks:4", "blocks:1", "flipflop", "memory:3"]
OTHERS = ["krohn-rhodes", "gridworld", "scan"]


def nth_last(n: int) -> Semiautomaton:
    """"The n-th letter from the end is a" (the catalog's nth-last:n, n-definite)."""
    return build(f"nth-last:{n}")


def other(a, method: str, T: int) -> str:
    try:
        c = decide(a, method, T).candidates[-1]
    except compiler.ShortcutError as e:
        return f"refused ({str(e)[:40]}...)"
    return f"{c.layers}" + (f" / {c.params:,}" if c.params is not None else "")


def row(a, method: str, T: int, samples: int, budget: int) -> str:
    t0 = time.perf_counter()
    model = compiler.compile_automaton(a, max_len=T, method=method, allow_inexact=False)
    seconds = time.perf_counter() - t0
    info = model.info()
    est = decide(a, method, T).candidates[-1].params
    r = verify(model, samples=samples, exhaustive_budget=budget)
    fams = sum(r.checked["adversarial_families"].values())
    desc = ""
    if method == local.NAME:
        m = model.meta[local.NAME]
        desc = f"{m['mode']}, k={m['k']}, p={m['period']}, B={m['bound']}, colours={m['colours']}"
    others = " | ".join(other(a, o, T) for o in OTHERS)
    return (f"| {a.name} | {method} | {desc} | {info['n_layers']} | {info['n_params']:,} | {est == info['n_params']} "
            f"| {r.exact} | {r.checked['exhaustive_length']} | {r.checked['random_sequences']} | {fams} | "
            f"{seconds:.1f} | {others} |")


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--exhaustive-budget", type=int, default=1 << 14)
    p.add_argument("--out")
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    T = args.max_len
    lines = [header(f"local construction: target automata at T = {T}, float32"), "",
             f"Verification: every input up to the exhaustive length, {args.samples} random inputs of length {T}, "
             "the adversarial families (generic and local's own) and the layer-wise invariants. "
             "`estimate exact`: the planner's estimate equals the assembled parameter count. "
             f"Last columns: layers / parameters of the other constructions at T = {T} (krohn-rhodes "
             "estimates no parameter count).", "",
             "| automaton | method | description | layers | params | estimate exact | exact | exhaustive length "
             "| random | family inputs | compile s | krohn-rhodes | gridworld | scan |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in TARGETS:
        lines.append(row(load_spec(name), local.NAME, T, args.samples, args.exhaustive_budget))
        print(lines[-1], flush=True)
    for n in range(3, 7):
        lines.append(row(nth_last(n), "lookback", T, args.samples, args.exhaustive_budget))
        print(lines[-1], flush=True)
    text = finish(lines, t_start, args.out)
    return text


if __name__ == "__main__":
    main()
