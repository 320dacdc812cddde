"""Label readout against state readout: parameters and depth of both models, and which automaton
the label model compiles (the minimal Moore machine or the automaton as given).

For each example (a spec with outputs, or a catalog automaton with its state names mapped to a
label), compiles the state model (``auto``) and the label model (``--readout labels``, ``auto``)
at ``--max-len``, verifies the label model (random full-length sequences, short exhaustive
ones, adversarial families, layer-wise invariants) and prints states before/after minimisation,
both models' construction, layers and parameters, the label model's other variant and its ratio
to the state model.  ``--json FILE`` saves the label models' (construction, layers, params);
``--before FILE`` puts such a run of another commit beside them (the script reads the readout
record defensively, so it runs unchanged on trees before the quotient/original choice).  The
committed table:

    git archive 9c850dd | tar -x -C /tmp/before && cp benchmarks/label_readout.py /tmp/before/benchmarks/
    (cd /tmp/before && PYTHONPATH=. python benchmarks/label_readout.py --json before.json)
    python benchmarks/label_readout.py --before /tmp/before/before.json --out benchmarks/results/label_readout.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compiler  # noqa: E402
from compiler.automata.formats import from_regex  # noqa: E402
from compiler.automata.load import load_spec  # noqa: E402
from verify.check import verify  # noqa: E402

from _common import finish, header  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "aalpy"


def _labelled(spec: str, f):
    a = load_spec(spec)
    return dataclasses.replace(a, outputs=tuple(f(s) for s in a.states))


def examples() -> list[tuple[str, object]]:
    """(description, automaton with outputs)."""
    return [
        ("symmetric:5, image of point 1", _labelled("symmetric:5", lambda s: s[0])),
        ("symmetric:4, image of point 1", _labelled("symmetric:4", lambda s: s[0])),
        ("symmetric:5, s[0] < s[1]", _labelled("symmetric:5", lambda s: "lt" if s[0] < s[1] else "ge")),
        ("symmetric:5, in a 3-set", _labelled("symmetric:5", lambda s: "in" if s in ("12345", "21345", "23145")
                                              else "out")),
        ("grid:6, at a wall", _labelled("grid:6", lambda s: "wall" if s in ("0", "5") else "inside")),
        ("grid2d:3,3, in a corner", _labelled("grid2d:3,3", lambda s: "corner" if s in ("0,0", "0,2", "2,0", "2,2")
                                              else "no")),
        ("dihedral:4, last letter of the name", _labelled("dihedral:4", lambda s: s[-1])),
        ("counter6.dot (AALpy Moore, mod 3)", load_spec(EXAMPLES / "counter6.dot")),
        ("regex (ab\\|ba)*a", from_regex("(ab|ba)*a", "a,b")),
        ("parity", load_spec("parity")),
        ("repeat:2", load_spec("repeat:2")),
        ("blocks:4", load_spec("blocks:4")),
        ("dyck:4,2", load_spec("dyck:4,2")),
    ]


def _params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-len", type=int, default=64)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--out", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--before", default=None)
    args = ap.parse_args(argv)
    before = json.loads(Path(args.before).read_text()) if args.before else {}
    rows: dict[str, list] = {}
    t0 = time.perf_counter()
    lines = [header(f"Label readout against state readout (auto, max_len {args.max_len})"), "",
             "Label model: the better (planner's rule: fewest layers, then parameters) of the minimal Moore "
             "machine and the automaton as given, each with its label readout; the one with at most the state "
             "model's parameters when there is one. `exact`: the label model verified (random, exhaustive, "
             f"families, invariants; {args.samples} random full-length sequences). `label / state`: the label "
             "model's parameters over the state model's (`auto` on the automaton as given, same max_len; the "
             "state model scores every state, the label model every label).", "",
             "| example | states before → after | state model: construction, layers, params | label model: "
             "compiles, construction, layers, params, readout | other variant: construction, layers, params "
             "| label / state | exact |" + (" label model before: construction, layers, params |" if before else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if before else "")]
    for name, a in examples():
        s = compiler.compile_automaton(a, max_len=args.max_len)
        m = compiler.compile_automaton(a, max_len=args.max_len, readout="labels")
        r = m.meta["readout"]
        rows[name] = [m.meta["method"], len(m.config.blocks), _params(m)]
        r.setdefault("states", "quotient")
        other = [v for v in r.get("variants", []) if v["states"] != r["states"]]
        other_text = (f"{other[0]['states']}: {other[0]['method']}, {other[0]['layers']}, {other[0]['params']:,}"
                      if other else "refused")
        exact = verify(m, samples=args.samples, exhaustive_budget=4096, family_limit=8).exact
        lines.append(f"| {name} | {r['states_before']} → {r['states_after']} | {s.meta['method']}, "
                     f"{len(s.config.blocks)}, {_params(s):,} | {r['states']}: {m.meta['method']}, "
                     f"{len(m.config.blocks)}, {_params(m):,}, {r['form']} | {other_text} | "
                     f"{_params(m) / _params(s):.3f} | {exact} |" +
                     (f" {before[name][0]}, {before[name][1]}, {before[name][2]:,} |" if name in before else
                      " - |" if before else ""))
        print(lines[-1], flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print(finish(lines, t0, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
