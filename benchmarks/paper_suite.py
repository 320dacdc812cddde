"""The paper's 19 automata at T = 100: what `auto` compiles, in attention layers and in standard blocks.

For each automaton of ``compiler.automata.catalog.paper_suite()`` compiles with ``--method auto``
at max_len T (default 100, the paper's sequence length), verifies (exhaustive up to the
budget, random full-length sequences, every adversarial family, layer-wise invariants)
and prints one row: method, attention layers, d_model, d_mlp, parameters, compile and
verify seconds, exact -- beside the depth bounds of the reference's theorems and the
smallest depth at which its trained Transformers first reached 100% accuracy (Figure 3.15), and
whether ours is at or below it.  Beside them, the same automaton in the shape SGD trains
(``shape="standard"``: every block one attention sublayer and one MLP with exactly one hidden
layer, ``auto`` taking the fewest blocks): blocks, parameters, certified (``verify.certify``) and
blocks at or below the trained depth, at T and at ``--standard-long`` (default 512; 0 leaves it
out).  ``benchmarks/standard_blocks.py`` gives more of the standard shape (how each MLP got one
hidden layer, the TransformerLens export).  The Dyck row is the paper's task, ``dyck-legal:4,2`` (31 stacks, no
error state, inputs promised legal: verified on legal inputs only); our ``dyck:4,2`` with its error
sink follows as an extra row outside the 19.  One command regenerates the committed table:

    python benchmarks/paper_suite.py --out benchmarks/results/paper_suite.md
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import sympy
from sympy.combinatorics import Permutation, PermutationGroup

from compiler.automata.catalog import build, paper_suite
from verify.check import verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import certified, compile_or_refusal, finish, header, size  # noqa: E402

PAPER_NAMES = {"dyck-legal:4,2": "Dyck", "dyck:4,2": "Dyck with an error sink (extra)", "grid:4": "Grid4", "grid:9": "Grid9", "cyclic-product:2,2": "C2²",
               "cyclic-product:2,2,2": "C2³", "dihedral:3": "D6", "dihedral:4": "D8", "quaternion": "Q8",
               "alternating:4": "A4", "alternating:5": "A5", "symmetric:4": "S4", "symmetric:5": "S5",
               **{f"cyclic:{n}": f"C{n}" for n in range(2, 9)}}

TRAINED_DEPTH = {"Dyck": "2", "Grid4": "2", "Grid9": "2", "C2": "4", "C3": "5", "C4": "7", "C5": "4", "C6": "8",
                 "C7": "5", "C8": "6", "C2²": "4", "C2³": "5", "D6": "5", "D8": "3", "Q8": "7", "A4": "12",
                 "A5": "7", "S4": "14", "S5": "never (≤16)"}
"""Smallest depth at which the best of 20 trained runs first reached 100% accuracy (reference, Figure 3.15)."""


def suite() -> list[str]:
    """The paper's 19 automata, its Dyck task in its own definition (no error state)."""
    return [name.replace("dyck:", "dyck-legal:") for name in paper_suite()]


EXTRA = ["dyck:4,2"]
"""Rows after the 19: our Dyck with an error sink (compiled for every input, not the paper's task)."""


def at_or_below(layers: int, trained: str) -> str:
    """Whether ``layers`` is at most the paper's trained depth ("n/a" where the paper has none)."""
    if trained.startswith("never"):
        return "yes"
    return ("yes" if layers <= int(trained) else "no") if trained.isdigit() else "n/a"


def group_of(a) -> PermutationGroup | None:
    """The transition group when every letter is a permutation, else None."""
    perms = []
    for m in a.maps:
        if sorted(m) != list(range(a.n_states)):
            return None
        perms.append(Permutation(list(m)))
    return PermutationGroup(perms)


def bounds(a, T: int) -> tuple[str, str, str]:
    """(Theorem 10, Theorem 11/16, Theorem 12) depth bounds, evaluated where concrete."""
    t10 = str(math.ceil(math.log2(T)))
    g = group_of(a)
    if g is not None:
        order = int(g.order())
        if g.is_solvable:
            t11 = f"Thm 16: ≤ 3·log2({order}) = {3 * math.log2(order):.1f}"
        else:
            t11 = f"none: group of order {order} is not solvable (Thm 13)"
    else:
        n = a.n_states
        t11 = f"Thm 11: O(n² log n), n = {n}: n²·log2 n = {n * n * math.log2(n):.0f}"
    from compiler.automata.gridworld_detect import detect

    world, _ = detect(a)
    t12 = "2" if world is not None else "—"
    return t10, t11, t12


def compiled(name: str, T: int, method: str, shape: str):
    """The model of ``name`` by ``method`` in ``shape``, the scan's where ``method`` refuses (e.g.
    krohn-rhodes on A5/S5: the scan is the only shortcut), or the scan's refusal text."""
    model = compile_or_refusal(name, method, T, shape)
    return compile_or_refusal(name, "scan", T, shape) if isinstance(model, str) else model


def standard(name: str, T: int, method: str, trained: str) -> tuple[str, bool, bool]:
    """Cells ``blocks | params | certified | ≤ trained`` of ``name`` in standard blocks at max_len ``T``,
    whether it is certified and whether its blocks are at or below ``trained``."""
    model = compiled(name, T, method, "standard")
    if isinstance(model, str):
        return f"{model[:100]} | - | - | n/a", False, False
    blocks, params = size(model)
    cert, seconds = certified(model)
    below = at_or_below(blocks, trained)
    return f"{blocks} | {params:,} | {cert} ({seconds:.1f} s) | {below}", cert == "yes", below == "yes"


def row(name: str, T: int, samples: int, budget: int, method: str = "auto",
        long: int = 0) -> tuple[str, list[bool]]:
    """One table row and its flags: at or below the trained depth in attention layers, then
    (certified, at or below) in standard blocks at ``T`` and, where ``long``, at max_len ``long``."""
    a = build(name)
    paper = PAPER_NAMES.get(name, name)
    t0 = time.perf_counter()
    model = compiled(name, T, method, "default")
    if isinstance(model, str):
        raise RuntimeError(model)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = verify(model, samples=samples, seed=0, exhaustive_budget=budget)
    verify_s = time.perf_counter() - t0
    i = model.info()
    t10, t11, t12 = bounds(a, T)
    trained = TRAINED_DEPTH.get(paper, "— (not the paper's task)")
    below = at_or_below(i['n_layers'], trained)
    text = (f"| {paper} | `{name}` | {a.n_states} | {i['method']} | {i['n_layers']} | {i['d_model']} | {i['d_mlp']} | "
            f"{i['n_params']:,} | {compile_s:.2f} | {verify_s:.1f} | {r.exact} | {t10} | {t11} | {t12} | "
            f"{trained} | {below} |")
    flags = [below == "yes"]
    for length in [T] + ([long] if long else []):
        cells, cert, std_below = standard(name, length, method, trained)
        text += f" {cells} |"
        flags += [cert, std_below]
    return text, flags


def preamble(args: argparse.Namespace) -> list[str]:
    """The table's title, machine, what each column measures, and its header rows."""
    T, long = args.max_len, args.standard_long
    lengths = [T] + ([long] if long else [])
    std_head = "".join(f" std blocks ({n}) | std params ({n}) | certified ({n}) | std blocks ≤ trained ({n}) |"
                       for n in lengths)
    return [header(f"The paper's suite at T = {T}: compiled with --method {args.method}, float32"),
            "",
            f"Verification per automaton: every sequence of the longest length whose count is within "
            f"{args.exhaustive_budget} (so every shorter one), {args.samples} random "
            f"sequences of length {T}, every adversarial family, layer-wise invariants; seed 0. "
            f"Bounds: Theorem 10 depth ⌈log2 T⌉; Theorem 16 (solvable groups) depth ≤ 3·log2(group order); Theorem 11 "
            f"(solvable semiautomata, n states) depth O(n² log n) with no explicit constant (n²·log2 n shown); "
            f"Theorem 13: non-solvable groups have no constant-depth shortcut unless TC0 = NC1; Theorem 12 (gridworld) "
            f"depth 2. "
            f"Trained depth (100%): smallest depth at which the paper's best of 20 trained runs first reached 100% accuracy (Figure 3.15). "
            f"Dyck is the paper's task, `dyck-legal:4,2`: 31 stacks, no error state, inputs promised legal "
            f"(never a pop of the empty stack, a push onto a full one or a mismatched close), verified on legal inputs "
            f"only; our `dyck:4,2`, with an error sink and exact on every input, is an extra row after the 19.",
            "",
            "Two depths. `attn layers` counts attention layers, whose MLPs may have several hidden layers (the "
            "default shape); `≤ trained` compares it with the trained depth. The `std` columns compile the same "
            f"automaton with `shape='standard'` (--method {args.method}): every block one attention sublayer and "
            "one MLP with exactly one hidden layer, as the paper's trained GPT-2-style models have, `auto` taking "
            "the fewest blocks, then parameters; `std blocks` counts those blocks, `certified` is `verify.certify` "
            "on that model (its wall seconds under the load above), `std blocks ≤ trained` compares the blocks "
            f"with the trained depth (the paper trained at T = 100), at max_len {' and '.join(map(str, lengths))}. "
            "benchmarks/results/standard_blocks.md has how each standard model got one hidden layer per MLP and "
            "its TransformerLens export.",
            "",
            f"| paper | spec | states | method ({args.method}) | attn layers | d_model | d_mlp | params | compile s | verify s | "
            f"exact | Thm 10 depth | Thm 11 / 16 depth | Thm 12 depth | trained depth (100%) | ≤ trained |{std_head}",
            "|" + "---|" * (16 + 4 * len(lengths))]


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--samples", type=int, default=32, help="random full-length sequences per automaton")
    p.add_argument("--exhaustive-budget", type=int, default=4096, help="sequences in the exhaustive check")
    p.add_argument("--automata", nargs="+", default=suite() + EXTRA)
    p.add_argument("--out", help="also write the table to this file")
    p.add_argument("--method", default="auto", choices=["auto", "scan", "krohn-rhodes"],
                   help="force a construction (falls back to scan where it does not apply)")
    p.add_argument("--standard-long", type=int, default=512, metavar="T",
                   help="also compile and certify the standard shape at this max_len (0: only at --max-len)")
    args = p.parse_args(argv)
    T, long = args.max_len, args.standard_long
    lines = preamble(args)
    print("\n".join(lines), flush=True)
    t_all = time.perf_counter()
    flags = []
    for name in args.automata:
        text, f = row(name, T, args.samples, args.exhaustive_budget, args.method, long)
        print(text, flush=True)
        lines.append(text)
        if name in suite():
            flags.append(f)
    n = len(flags)
    count = lambda k: sum(f[k] for f in flags)  # noqa: E731
    lines += ["", f"At or below the paper's trained depth in attention layers: {count(0)} of the {n} paper rows."]
    for k, length in enumerate([T] + ([long] if long else [])):
        lines.append(f"In standard blocks at T = {length}: {count(2 + 2 * k)} of the {n} at or below the trained "
                     f"depth, {count(1 + 2 * k)} of the {n} certified.")
    text = finish(lines, t_all, args.out, f" sympy {sympy.__version__}.")
    print("\n".join(lines[-4:]))
    return text


if __name__ == "__main__":
    main()
