"""Mealy machines: what the planner compiles for random machines, its size, and the time to compile and certify.

For each (states, inputs, outputs) a random complete Mealy machine (seeded) is compiled with its
default readout (the outputs, ``auto``) at ``--max-len``: the table gives the Mealy machine's size
after minimisation by outputs, the Moore machine over its transitions and its minimal form, the
construction the planner took and which automaton it compiled, layers, parameters, compile time,
the certificate (and its time) and a sampled verification against the Mealy machine.  The
alternatives are the planner's candidates on the compiled automaton: the scan's and the
transition construction's estimates are printed beside the choice ("-" where one is refused).

    python benchmarks/mealy.py --out benchmarks/results/mealy.md
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compiler  # noqa: E402
from compiler.automata.spec import from_dict  # noqa: E402
from verify.certify import certify  # noqa: E402
from verify.check import verify  # noqa: E402

from _common import emit, finish, header  # noqa: E402

SIZES = [(2, 2, 2), (4, 2, 3), (8, 4, 4), (16, 4, 8), (16, 8, 8), (32, 8, 16), (64, 16, 32)]


def random_mealy(n: int, k: int, o: int, seed: int) -> dict:
    """A random complete Mealy spec (every transition's target and output uniform)."""
    r = random.Random(seed)
    S, A, O = [f"s{i}" for i in range(n)], [f"i{j}" for j in range(k)], [f"o{j}" for j in range(o)]
    return {"name": f"mealy{n}.{k}.{o}", "states": S, "alphabet": A,
            "transitions": {q: {a: r.choice(S) for a in A} for q in S},
            "transition_outputs": {q: {a: r.choice(O) for a in A} for q in S}}


def _candidate(model, name: str) -> str:
    for c in model.meta.get("candidates", []):
        if c["name"] == name:
            return f"{c['layers']}, {c['params']:,}" if c.get("fits") else "-"
    return "-"


def row(n: int, k: int, o: int, max_len: int, samples: int) -> str:
    a = from_dict(random_mealy(n, k, o, n * 1000 + k * 10 + o))
    t = time.perf_counter()
    try:
        model = compiler.compile_automaton(a, max_len=max_len, allow_inexact=False)
    except compiler.ShortcutError as e:
        return f"| {n} | {k} | {o} | {max_len} | - | - | refused: {str(e)[:120]} | | | | | | | |"
    compile_s = time.perf_counter() - t
    r = model.metadata.readout
    m = r["mealy"]
    params = sum(p.numel() for p in model.parameters())
    cert = certify(model)
    ok = "yes" if cert.certified else f"no ({(cert.reason or '')[:60]})"
    exact = verify(model, samples=samples, exhaustive_budget=2000).exact
    return (f"| {n} | {k} | {o} | {max_len} | {m['states_after']} | {m['transitions'] + 1} -> {r['states_after']} | "
            f"{model.metadata.method} on the {'minimal ' if r['states'] == 'quotient' else ''}Moore machine "
            f"| {len(model.blocks)} | {params:,} | {_candidate(model, 'scan')} | {_candidate(model, 'transition')} | "
            f"{compile_s:.1f} | {ok}, {cert.seconds:.1f} s | {'exact' if exact else 'NOT EXACT'} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, nargs="+", default=[64, 256])
    p.add_argument("--sizes", nargs="+", default=None, help="n,k,o triples (default: the table's)")
    p.add_argument("--samples", type=int, default=16, help="random full-length sequences verified")
    p.add_argument("--out")
    args = p.parse_args()
    sizes = [tuple(int(x) for x in s.split(",")) for s in args.sizes] if args.sizes else SIZES
    t0 = time.perf_counter()
    lines = [header("Mealy machines: the planner's model of their outputs"), "",
             "| states | inputs | outputs | max_len | after minimising | Moore over transitions -> minimal | "
             "method | layers | params | scan (layers, params) | transition (layers, params) | compile s | "
             "certified | verified |", "|" + "---|" * 14]
    for max_len in args.max_len:
        for n, k, o in sizes:
            emit(lines, row(n, k, o, max_len, args.samples))
    print(finish(lines, t0, args.out, " Candidates are the planner's estimates on the automaton it compiled."))


if __name__ == "__main__":
    main()
