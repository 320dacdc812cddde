"""TransformerLens padding of standard-shape models, before and after balancing their MLP widths.

TransformerLens has one ``d_mlp`` and one ``n_heads`` for every block, so the export
(``compiler.export.to_transformer_lens``) zero-pads every block to the widest MLP and the most
heads.  A standard-shape model's unfolding moves hidden units between blocks where no value
changes (``constructions/unfold.py``, ``balance``).  For the paper's 19 automata (the Dyck task
under its promise, as ``benchmarks/standard_blocks.py``) and one model of every construction,
compiled ``shape="standard"`` at max_len T (float32): the blocks' head counts, their MLP widths
before balancing (the same model unfolded with ``balanced=False``) and after (the compiled model),
the export's parameters over ours before and after, and, where balancing moved units, whether
the balanced model is certified (``verify.certify``).  One command regenerates the committed table:

    python benchmarks/tl_padding.py --out benchmarks/results/tl_padding.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import compiler
from compiler.export import to_transformer_lens
from constructions.model import CompiledTransformer
from constructions.unfold import unfold
from verify.certify.certificate import certify
from verify.certify.unfolded import folded

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import automaton, emit, finish, header  # noqa: E402
from paper_suite import PAPER_NAMES, suite  # noqa: E402
from standard_blocks import EVERY_CONSTRUCTION  # noqa: E402


def exported(model: CompiledTransformer) -> int:
    """Parameters of ``model``'s TransformerLens export (its state dict, zero biases included)."""
    return sum(v.numel() for v in to_transformer_lens(model).state_dict.values())


def widths(model: CompiledTransformer) -> str:
    return ", ".join(str(b.mlp_hidden[0]) if b.mlp_hidden else "-" for b in model.config.blocks)


def row(spec: str, T: int) -> str:
    """One table row for ``spec`` (``name`` or ``name@method``)."""
    name, method = (spec.split("@") + ["auto"])[:2]
    t0 = time.perf_counter()
    model = compiler.compile_automaton(automaton(name), max_len=T, method=method, shape="standard")
    ours = sum(p.numel() for p in model.parameters())
    balanced = "units" in model.meta.get("unfolded", {})
    before = unfold(folded(model), balanced=False) if balanced else model
    heads = ", ".join(str(b.n_heads) for b in model.config.blocks)
    cert = "-"
    if balanced:
        c = certify(model)
        cert = "yes" if c.certified else f"no: {(c.reason or '')[:80]}"
    return (f"| {PAPER_NAMES.get(name, name)} | `{spec}` | {model.meta['method']} | {len(model.blocks)} | {heads} | "
            f"{widths(before)} | {exported(before) / ours:.2f} | {widths(model)} | {exported(model) / ours:.2f} | "
            f"{ours:,} | {cert} | {time.perf_counter() - t0:.1f} |")


NOTE = """

What the rows say. Balancing (constructions/balance.py) moves a part (the units of one MLP that write a
common residual dim) to any block where every dim it reads has the same writes before it and every dim
it writes the same accesses around it, wider to narrower; then it splits every sum nothing wrote before
into one piece per unit, each free between the blocks before the sum's first reader (the first piece
added to an exact zero, the rest after it: the same terms in another blocking, which the certificate's
rounding covers), and moves pieces the same way; it is kept where the widest MLP narrows. D8 and Q8 are
under 1.25x as before (D8 305/305/305, 1.00x; Q8 1.09x). A4 now too: level 0's one-hot decode (a sum of
203 units read only by the unembedding) is formed in blocks 1 and 2, beside level 1's increments (203,
read by block 2's head) and level 1's interpolated readout (202): 205/303/304, 1.11x (was 204/203/405,
1.46x). dyck:2,2's
bounded stack is small (14,595 parameters, MLPs of 1-20 units over 6 blocks) and nothing of it moves;
what its export pads is block 2's second head and the 20-unit MLP in every block: 1.66x. All certified. A sum all of whose units read what one block's MLP
writes and are read by the next block's head or MLP has one block to sit in, split or not; what moves
the rest is building less into such a block. D6 -- before: block 1 held level 0's code (102 units, read
only by the readout's one-hot in block 3), level 1's increments (102, block 2's head) and 103 units
clearing level 0's ramps from scratch region a, all reading the ramps block 0 writes: 306 of 819, 1.46x.
The last block interpolates level 0's one-hot off its prefix sum (krohn_rhodes_readout.late_one_hots,
one hidden layer) and block 1 computes the code for its increments without writing it (Steps.unwritten);
unfolded, the interpolation exits at its first stage and balances into the blocks before: 203/204/202/203,
1.01x. Now level 1's decode is interpolated too (two-sided: its one-hot's float32 bound 0.096 at T = 100,
0.34 one-sided), so D6 is 3 blocks, 153/152/202, 1.18x, 144,027 parameters (was 397,222). S4 -- level 2's
increment table reads block 2's ramps and block 4's head reads it: gated at level 1's increments (1 or 2
at its letter, krohn_rhodes_layout.increments_at) it was 2 x 203 = 406 units in block 3, with level 2's
interpolated readout and level 1's one-hot about 405 in block 4 (1.40x). Level 1's one-hot is now
interpolated late beside level 2's readout (the two-sided bound fits the budget), so level 1's ramps of X
have no other reader, and the table reads level 1's value before the update off a ramp of its own
(Y = X - increment + 2, krohn_rhodes_flat._old_ramp: 205 ramps in block 2 and 205 gated units in
block 3, one gate combination): 203/204/271/271/272, 1.11x, 678,789 parameters (was 791,236). A4's level
0 one-hot is late the same way: 270/270/270, 1.00x. At T = 512 the interpolations are past the budget:
A4 is 4 blocks in D6's old pattern (block 1: 1,026 + 1,027 decode and increment units and 1,028 clearing
units, 3,081 of 6,171: 1.95x; a fresh region: 1.57x at +65% parameters) and S4's block 3 holds 4,111
units (was 5,137). C6 -- C2's one-hidden-layer decode beside C3's two-layer staircase (the product pads
it with identity copies) exits at the first unfolded stage (constructions/unfold.py, exits): neither its
activations in scratch nor its copies, 451,525 -> 268,412 parameters, then balanced to 253/253 (1.01x),
certified; blocks:4, repeat:2 and the piecewise-local row drop two copies each the same way.
The gridworld rows (and adder:2's transition, which contains one) do not move: every part's reach is its
own block, and their padding is block 0's 400-unit one-hot and 6 or 16 find heads in block 1. The
unfolding clears only the scratch dims a later use writes again (every use writes from the region's
first dim), which shrinks ours, not the export. TransformerLens 4.x cannot carry per-block widths: its
native model builds every block's MLP as nn.Linear(d_model, cfg.d_mlp) from one config value."""


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--automata", nargs="+", default=suite() + EVERY_CONSTRUCTION)
    p.add_argument("--out", help="also write the table to this file")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    lines = [header(f"TransformerLens padding of standard-shape models at T = {args.max_len}, float32"), "",
             "Blocks of `shape=\"standard\"` (auto, or the method after @); heads and MLP hidden widths per block; "
             "'before': the model unfolded without balancing, 'after': as compiled (MLP widths balanced when "
             "unfolded); TL / ours: the TransformerLens export's parameters (every block padded to the widest MLP "
             "and the most heads, zero attention biases included) over the standard model's. Certified: "
             "`verify.certify` on the balanced model, where balancing moved units.", "",
             "| paper | spec | method | blocks | heads | MLP widths before | TL / ours before | MLP widths after | "
             "TL / ours after | params (ours) | certified | s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for spec in args.automata:
        emit(lines, row(spec, args.max_len))
    return finish(lines, t0, args.out, NOTE)


if __name__ == "__main__":
    main()
