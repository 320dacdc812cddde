"""Is a label model ever larger than its state model?  A sweep over random labellings.

Draws N random automata with the project's generator (``catalog.random_automaton``, ``mixed``
maps: 2-8 states, 2-4 letters, seed 0) and labels each state at random with one of 2 or 3
labels (every label used), plus the 19 paper automata with 2 random labels each.  For each,
at max_len T (default 64), compiles the state model (``auto``) and the label model
(``--readout labels``, ``auto``), and records both parameter counts and depths, the states
before/after Moore minimisation, how the labels are read (``meta["readout"]["form"]`` and the
lookup kind) and, for the first ``--verify`` label models, the verdict of a quick verification.
The table counts label models larger than, equal to and smaller than their state models and
deeper than them, and lists every larger one.

    python benchmarks/label_sizes.py --out benchmarks/results/label_sizes.md
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import sys
import time
from pathlib import Path

import compiler
from compiler.automata.catalog import build, paper_suite, random_automaton
from verify.check import verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402


def _random_labels(rng: random.Random, n_states: int) -> tuple[str, ...]:
    """2 or 3 labels (at most one per state), each used at least once, in a random assignment."""
    k = min(n_states, rng.randint(2, 3))
    labels = [f"l{i}" for i in range(k)] + [f"l{rng.randrange(k)}" for _ in range(n_states - k)]
    rng.shuffle(labels)
    return tuple(labels)


def labelled(n: int, seed: int):
    """(name, automaton with outputs): N random automata, then the paper suite, in a fixed order."""
    rng = random.Random(seed)
    for i in range(n):
        a = random_automaton(rng, rng.randint(2, 8), rng.randint(2, 4), name=f"random{i}")
        yield a.name, dataclasses.replace(a, outputs=_random_labels(rng, a.n_states))
    for name in paper_suite():
        a = build(name)
        yield name, dataclasses.replace(a, outputs=_random_labels(rng, a.n_states)[:a.n_states])


def _size(model) -> tuple[int, int]:
    info = model.info()
    return info["n_layers"], info["n_params"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-len", type=int, default=64)
    ap.add_argument("--verify", type=int, default=60, help="verify the first N label models")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    lines = [header(f"Label model against state model on random labellings (auto, max_len {args.max_len})"), ""]
    count: collections.Counter = collections.Counter()
    forms: collections.Counter = collections.Counter()
    larger, refused, inexact = [], [], []
    worst = (0.0, "")
    for i, (name, a) in enumerate(labelled(args.n, args.seed)):
        try:
            s = compiler.compile_automaton(a, max_len=args.max_len)
        except compiler.ShortcutError:
            count["state model refused"] += 1
            continue
        try:
            m = compiler.compile_automaton(a, max_len=args.max_len, readout="labels")
        except compiler.ShortcutError as e:
            refused.append(f"{name}: {e}")
            continue
        (ls, ps), (lm, pm) = _size(s), _size(m)
        r = m.meta["readout"]
        lookup = (r.get("notes") or {}).get("lookup")
        forms[r["form"] + (f" ({lookup})" if lookup and lookup not in r["form"] else "")] += 1
        count["larger" if pm > ps else "equal" if pm == ps else "smaller"] += 1
        count["deeper"] += lm > ls
        worst = max(worst, (pm / ps, name))
        if pm > ps:
            larger.append(f"| {name} | {r['states_before']} → {r['states_after']} | {s.meta['method']}, {ls}, {ps:,} "
                          f"| {r['states']}: {m.meta['method']}, {lm}, {pm:,}, {r['form']} |")
        if i < args.verify:
            count["verified"] += 1
            if not verify(m, samples=8, exhaustive_budget=1024, family_limit=2).exact:
                inexact.append(name)
    n = sum(count[k] for k in ("larger", "equal", "smaller"))
    lines += [f"{n} labelled automata compiled both ways ({args.n} random, then the paper suite); "
              f"{count['state model refused']} whose state model was refused are left out.", "",
              "| label model vs state model | count |", "|---|---|",
              *(f"| {k} | {count[k]} |" for k in ("smaller", "equal", "larger", "deeper")),
              f"| label compile refused | {len(refused)} |",
              f"| verified (first {args.verify}) / not exact | {count['verified']} / {len(inexact)} |",
              f"| largest label/state ratio | {worst[0]:.3f} ({worst[1]}) |", "",
              "| how the labels are read | count |", "|---|---|",
              *(f"| {k} | {v} |" for k, v in forms.most_common())]
    if larger:
        lines += ["", "Larger label models:", "",
                  "| automaton | states before → after | state model | label model |", "|---|---|---|---|", *larger]
    for x in refused + [f"not exact: {x}" for x in inexact]:
        emit(lines, f"* {x}")
    print(finish(lines, t0, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
