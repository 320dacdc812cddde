"""The transition construction against the others, by how much its one-step quotient is smaller.

For random automata where the transition construction applies (random Mealy machines read by
their states, the Moore machines over their transitions and those minimised, and the zoo's
random classes), the planner's survey at ``--max-len``: the quotient's size over the automaton's
(q / n), the transition candidate's layers and parameters and the seconds its estimate took, and
the best other candidate by ``--prefer depth`` and by ``--prefer size``; "wins" says under which
preference the transition candidate is the pick.  The ratio above which it never wins is the
rule :data:`constructions.transition.MAX_QUOTIENT_RATIO` enforces; ``--no-rule`` measures
without it (every estimate computed).

    python benchmarks/transition_quotients.py --out benchmarks/results/transition_quotients.md
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.automata.families import CLASSES, Sizes  # noqa: E402
from compiler.automata.mealy import mealy_moore  # noqa: E402
from compiler.automata.moore import minimise  # noqa: E402
from compiler.automata.spec import from_dict  # noqa: E402
from compiler.automata.transitions import transition_plan  # noqa: E402
from compiler.planner import ranking, survey  # noqa: E402
from constructions import registry, transition  # noqa: E402

from _common import emit, finish, header  # noqa: E402
from mealy import random_mealy  # noqa: E402


def automata(seeds: int) -> list[tuple[str, object]]:
    """(what, automaton) for every seed: Mealy machines of 8..48 states on 2..4 inputs, read by
    their states, their Moore machine over transitions and its minimal form; and the zoo's random
    classes at 8..40 states on 2..3 letters."""
    out = []
    for seed in range(seeds):
        for n, k in ((8, 2), (16, 2), (32, 2), (32, 3), (48, 2)):
            m = from_dict(random_mealy(n, k, 4, 7919 * seed + n + k))
            moore = mealy_moore(m).moore
            out += [(f"Mealy {n}x{k} states", m), (f"Mealy {n}x{k} Moore", moore),
                    (f"Mealy {n}x{k} minimal Moore", minimise(moore).quotient)]
        rng = random.Random(seed)
        for cls in ("arbitrary", "aperiodic", "local", "product", "definite"):
            out.append((cls, CLASSES[cls](rng, Sizes((8, 40), (2, 3)))))
    return out


def row(what: str, a, max_len: int) -> str | None:
    plan = transition_plan(a)
    if plan is None:
        return None
    c, t = registry.get(transition.NAME), time.perf_counter()
    try:
        got = c.applies(a)
        if not hasattr(got, "reason"):
            c.estimate(got, max_len, "sinusoidal")
    except Exception:  # noqa: BLE001 - the survey below records why
        pass
    seconds = time.perf_counter() - t  # the transition candidate's own time (the survey then reuses its cache)
    cands, _, _ = survey(a, max_len)
    tr = next(c for c in cands if c.name == "transition")
    others = [c for c in cands if c.name != "transition"]
    depth, size = ranking(others, "depth"), ranking(others, "size")
    wins = [p for p in ("depth", "size") if tr.fits and ranking(cands, p)[0] is tr]

    def cost(c) -> str:
        return f"{c.name} {c.layers}, {c.params:,}" if c is not None else "-"
    ratio = plan.quotient.n_states / a.n_states
    mine = f"{tr.layers}, {tr.params:,}" if tr.fits else f"refused: {(tr.refusal or '')[:60]}"
    return (f"| {what} | {a.n_states} | {plan.quotient.n_states} | {ratio:.2f} | {mine} | "
            f"{cost(depth[0] if depth else None)} | {cost(size[0] if size else None)} | "
            f"{', '.join(wins) or 'no'} | {seconds:.1f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--no-rule", action="store_true", help="estimate every quotient (the rule off)")
    p.add_argument("--out")
    args = p.parse_args()
    if args.no_rule:
        transition.MAX_QUOTIENT_RATIO = 1.0
    t0 = time.perf_counter()
    lines = [header("The transition construction by its quotient's size"), "",
             "| automaton | n | q | q / n | transition (layers, params) | best other, depth | best other, size | "
             "wins | transition s |", "|" + "---|" * 9]
    for what, a in automata(args.seeds):
        r = row(what, a, args.max_len)
        if r is not None:
            emit(lines, r)
    print(finish(lines, t0, args.out, f" max_len {args.max_len}; rule {'off' if args.no_rule else 'on'}."))


if __name__ == "__main__":
    main()
