"""Bounded stacks (Dyck) compiled with ``auto``: sizes, exactness and the float32 reach.

Table 1: for each spec and max_len, what ``auto`` builds (method, attention layers,
parameters) and whether it matches the reference simulation on every sequence of the
longest length whose count fits ``--exhaustive-budget``, on ``--random`` full-length
sequences that stay inside the depth bound most of the time (legal letters, one random
letter with probability 1/T per step: about a third end in the sink), on balanced excursions to depth D and back (T / 2D of them per sequence), and
with each error kind (overflow, underflow, mismatch) as the last letter (or the one
before it, where the depth's parity forbids the last); the uniform-random and
constant-run inputs of ``verify`` are added (they hit the sink at once).

Table 2 (``--reach``): dyck:4,2 at growing max_len, the layer-1 depth error up to the
first error (tolerance 1/4) and exactness on the same families.  Example (the committed
results, about 3 minutes on 2 CPUs):

    python benchmarks/bench_bounded_stack.py --out benchmarks/results/bounded_stack.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

import compiler
from compiler.automata.load import load_spec
from compiler.automata.spec import from_dict
from compiler.automata.stack_detect import POP, PUSH
from constructions import bounded_stack_families as stack_families
from constructions import registry
from verify.check import adversarial_families, all_sequences, exhaustive_length

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header

SPECS = ["dyck:4,2", "dyck:2,2", "dyck:3,3", "dyck:6,1", "renamed dyck:4,2"]


def renamed_dyck():
    """dyck:4,2 as a plain transition table with states and letters renamed and shuffled."""
    a = load_spec("dyck:4,2")
    rng = np.random.default_rng(7)
    sp, lp = rng.permutation(a.n_states), rng.permutation(a.n_symbols)
    sname = {int(q): f"q{i}" for i, q in enumerate(sp)}
    lname = {int(s): f"x{i}" for i, s in enumerate(lp)}
    return from_dict({"name": "renamed dyck:4,2", "states": [sname[int(q)] for q in sp],
                      "alphabet": [lname[int(s)] for s in lp], "start": sname[a.start],
                      "transitions": {sname[int(q)]: {lname[int(s)]: sname[a.maps[s][q]] for s in lp} for q in sp}})


def automaton(spec: str):
    return renamed_dyck() if spec.startswith("renamed") else load_spec(spec)


def forward(model, rows: np.ndarray, batch: int = 64) -> np.ndarray:
    out = []
    with torch.no_grad():
        for i in range(0, len(rows), batch):
            out.append(model(torch.from_numpy(rows[i:i + batch])).argmax(-1).numpy())
    return np.concatenate(out) if out else np.zeros((0, rows.shape[1]), dtype=np.int64)


def exact_on(model, rows: np.ndarray) -> bool:
    a = model.automaton
    ref = np.array([a.run(r) for r in rows.tolist()]).reshape(rows.shape)
    return bool((forward(model, rows) == ref).all())


def checks(model, T: int, n_random: int, budget: int, seed: int = 0) -> dict[str, object]:
    a = model.automaton
    _, plan = registry.plan_of(model)
    rng = np.random.default_rng(seed)
    start = plan.stacks[a.start]
    L = exhaustive_length(a.n_symbols, T, budget)
    rand = np.array([stack_families.legal_walk(plan, start, T, rng, p_error=1.0 / T) for _ in range(n_random)])
    fams = stack_families.families(model, plan, T, seed)
    ends = stack_families.error_at_end(plan, start, T, np.random.default_rng(seed))
    generic = np.concatenate([v[:4] for v in adversarial_families(a.n_symbols, T).values()])
    sink_share = np.mean([a.run(r)[-1] == plan.sink for r in rand.tolist()])
    return {"exhaustive": (L, exact_on(model, all_sequences(a.n_symbols, L))),
            "random": (len(rand), float(sink_share), exact_on(model, rand)),
            "deep": exact_on(model, fams["deep-cycles"]),
            "ends": (sorted(ends), exact_on(model, np.array(list(ends.values()), dtype=np.int64).reshape(-1, T))),
            "generic": exact_on(model, np.concatenate([generic, fams["in-bounds"]]))}


def depth_error(model, rows: np.ndarray) -> float:
    """Worst |st:depth - x_t| after layer 1, up to each row's first error."""
    _, plan = registry.plan_of(model)
    got: dict[str, np.ndarray] = {}
    dim = model.subspace("st:depth")[0]

    def grab(mod, inp, out):
        got["x"] = out[..., dim].double().numpy()

    worst = 0.0
    a = model.automaton
    step = np.array([1 if kind == PUSH else -1 if kind == POP else 0 for kind, _ in plan.letters])
    with torch.no_grad(), model.hooks([("blocks.0.hook_resid_mid", grab)]):
        for r in rows:
            model(torch.from_numpy(r[None]))
            x = len(plan.stacks[a.start] or ()) + np.concatenate([[0], np.cumsum(step[r])])  # x_t, BOS at 0
            sink = [i + 1 for i, q in enumerate(a.run(r.tolist())) if q == plan.sink]
            n = (sink[0] if sink else len(r)) + 1  # up to and including the first error
            worst = max(worst, float(np.abs(got["x"][0, :n] - x[:n]).max()))
    return worst


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--specs", nargs="+", default=SPECS)
    p.add_argument("--max-lens", nargs="+", type=int, default=[100, 1024, 4096])
    p.add_argument("--random", nargs="+", type=int, default=[1000, 1000, 32],
                   help="in-bounds random sequences per max_len (same order as --max-lens)")
    p.add_argument("--exhaustive-budget", type=int, default=4096)
    p.add_argument("--reach", nargs="*", type=int, default=[4096, 8192, 16384])
    p.add_argument("--out")
    args = p.parse_args()
    t0 = time.perf_counter()
    lines = [header("Bounded stacks (Dyck) with `auto`, float32"), "",
             "| spec | max_len | method | attn layers | params | exhaustive (length) | in-bounds random (share "
             "ending in the sink) | deep cycles | error kinds at the end | generic families | exact |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for spec in args.specs:
        a = automaton(spec)
        for T, n in zip(args.max_lens, args.random):
            m = compiler.compile_automaton(a, max_len=T)
            i = m.info()
            c = checks(m, T, n, args.exhaustive_budget)
            L, ex = c["exhaustive"]
            nr, share, rx = c["random"]
            kinds, ek = c["ends"]
            ok = ex and rx and c["deep"] and ek and c["generic"]
            lines.append(f"| `{spec}` | {T} | {i['method']} | {i['n_layers']} | {i['n_params']:,} | {ex} ({L}) | "
                         f"{rx} ({nr}, {share:.0%}) | {c['deep']} | {ek} ({', '.join(kinds)}) | {c['generic']} | "
                         f"{ok} |")
            print(lines[-1], flush=True)
    if args.reach:
        lines += ["", "Reach (`dyck:4,2`, in-bounds, deep-cycle and error-at-end families, 8 random in-bounds "
                  "sequences): worst layer-1 depth error up to the first error (tolerance 1/4), exactness, and "
                  "whether the model warns.", "",
                  "| max_len | depth error | exact | warns |", "|---|---|---|---|"]
        a = load_spec("dyck:4,2")
        for T in args.reach:
            m = compiler.compile_automaton(a, max_len=T, allow_inexact=True)
            _, plan = registry.plan_of(m)
            rng = np.random.default_rng(1)
            rows = np.concatenate([*stack_families.families(m, plan, T, 0).values(),
                                   np.array([stack_families.legal_walk(plan, (), T, rng, 1.0 / T) for _ in range(8)])])
            err = depth_error(m, rows)
            lines.append(f"| {T} | {err:.2g} | {exact_on(m, rows)} | {bool(m.meta['warnings'])} |")
            print(lines[-1], flush=True)
    print(finish(lines, t0, args.out))


if __name__ == "__main__":
    main()
