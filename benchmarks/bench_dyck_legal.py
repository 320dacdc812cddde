"""The paper's Dyck (no error state, inputs promised legal) compiled with ``auto``.

For ``dyck-legal:D,k`` ((D, k) = (4, 2), the paper's Dyck_{4,2}, and (2, 3), (3, 2), (6, 1))
and a renamed, shuffled 31-state transition table of Dyck_{4,2} (missing transitions marked -1,
loaded with the promise): what ``auto`` builds at each max_len (method, attention layers,
parameters) and ``verify``'s verdict on legal inputs (every legal word up to the exhaustive
length, random words drawn uniformly among legal continuations, the adversarial families cut
at their first illegal letter, the stack's own legal families, the layer-wise invariants).
Beside it, ``dyck:D,k`` with its error sink, compiled for every input. Example (the committed
results):

    python benchmarks/bench_dyck_legal.py --out benchmarks/results/dyck_legal.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import compiler
from compiler.automata.formats import MISSING, from_table
from compiler.automata.load import load_spec
from compiler.automata.spec import LEGAL
from verify.check import verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402

SPECS = ["dyck-legal:4,2", "dyck-legal:2,3", "dyck-legal:3,2", "dyck-legal:6,1", "shuffled dyck-legal:4,2"]
SHUFFLE_SEED = 7


def shuffled_table(name: str = "dyck-legal:4,2", seed: int = SHUFFLE_SEED):
    """``name`` as a bare integer table, states and letters shuffled, undefined cells -1, read back
    under the promise: nothing of the catalog's names or order survives."""
    a = load_spec(name)
    rng = np.random.default_rng(seed)
    perm, cols = rng.permutation(a.n_states), rng.permutation(a.n_symbols)
    table = np.full((a.n_states, a.n_symbols), MISSING, dtype=np.int64)
    for q in range(a.n_states):
        for c, s in enumerate(cols):
            if a.defined[s][q]:
                table[perm[q], c] = perm[a.maps[s][q]]
    return from_table(table, start=int(perm[a.start]), name=f"shuffled {name}", promise=LEGAL)


def automaton(spec: str):
    return shuffled_table(spec.removeprefix("shuffled ")) if spec.startswith("shuffled ") else load_spec(spec)


def row(spec: str, T: int, samples: int, budget: int) -> str:
    a = automaton(spec)
    t0 = time.perf_counter()
    model = compiler.compile_automaton(a, max_len=T)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = verify(model, samples=samples, exhaustive_budget=budget, family_limit=8)
    verify_s = time.perf_counter() - t0
    i = model.info()
    c = r.checked
    return (f"| `{spec}` | {a.n_states} | {T} | {i['method']} | {i['n_layers']} | {i['n_params']:,} | "
            f"{c['exhaustive_length']} ({c['exhaustive_sequences']:,}) | {c['random_sequences']} | "
            f"{sum(c['adversarial_families'].values())} | {r.n_positions:,} | {compile_s:.1f} | {verify_s:.1f} | "
            f"{r.exact} |")


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--specs", nargs="+", default=SPECS)
    p.add_argument("--max-lens", nargs="+", type=int, default=[100, 1024, 4096])
    p.add_argument("--samples", nargs="+", type=int, default=[64, 16, 4],
                   help="random legal words per max_len (same order as --max-lens)")
    p.add_argument("--exhaustive-budget", type=int, default=4096)
    p.add_argument("--sink", nargs="*", default=["dyck:4,2"], help="error-sink versions compiled beside them")
    p.add_argument("--out")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    lines = [header("The paper's Dyck (inputs promised legal) with `auto`, float32"), "",
             f"Verification: `verify` on legal inputs only (exhaustive budget {args.exhaustive_budget} legal words, "
             f"random words uniform among legal continuations, adversarial families cut at their first illegal "
             f"letter and at most 8 per family, layer-wise invariants); seed 0. The shuffled table is Dyck_{{4,2}} "
             f"as integers with states and letters permuted (seed {SHUFFLE_SEED}) and -1 for undefined transitions, "
             f"loaded with `promise=\"legal\"`.", "",
             "| spec | states | max_len | method | attn layers | params | exhaustive length (words) | random | "
             "adversarial | scored positions | compile s | verify s | exact on legal inputs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for spec in [*args.specs, *args.sink]:
        for T, n in zip(args.max_lens, args.samples):
            r = row(spec, T, n, args.exhaustive_budget)
            print(r, flush=True)
            lines.append(r)
    return finish(lines, t0, args.out)


if __name__ == "__main__":
    main()
