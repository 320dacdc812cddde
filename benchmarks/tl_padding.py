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
from compiler.automata.catalog import build
from compiler.export import to_transformer_lens
from constructions.model import CompiledTransformer
from constructions.unfold import unfold
from verify.certify.certificate import certify
from verify.certify.unfolded import folded

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402
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
    model = compiler.compile_automaton(build(name), max_len=T, method=method, shape="standard")
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

What the rows say. Balancing moves a part (the units of one MLP that write a common residual dim) to
any block where every dim it reads has the same writes before it and every dim it writes the same
accesses around it, wider to narrower; it is kept where the widest MLP narrows. D8 and Q8 come under
1.25x: their first level's one-hots (read only by the unembedding) move after the next head, and
D8's single-counter ramps to the gated layer, so D8 is 305/305/305 (1.00x) and Q8 1.09x, both
certified. What stays above 1.25x, and why (each a part no balancing can split or move, measured
with `_reach`): A4 -- block 1 holds level 1's increment table (203 units, read by block 2's head)
and level 0's one-hot decode (203, read only by the unembedding: block 1 or 2, where level 1's
interpolated readout holds 202), both off level 0's mod-3 ramps: one MLP has >= 405 of the 812
units, 1.46x either way (it moved to block 2, 406 -> 405). D6 -- block 1 holds level 0's code (102,
a gate of block 2's staircase), level 1's increments (102, block 2's head) and 103 units clearing
level 0's ramps from scratch region a before block 2's staircase writes its own ramps there: 307 of
819, 1.47x. A fresh region for block 2's ramps would drop the clearing units but widen the residual
by 103 dims (computed from the shapes: widest 205, TL / ours 1.14, but ours 403,929 -> 517,744
parameters, +28%, and the export's 591,766 -> 588,032): not taken. S4 -- level 2's increment table
is one part of 609 units (3 gate combinations x 203 thresholds of a mod-3 counter, writing both
increments) that block 4's head reads: 609 of 1,635 units over 5 blocks, 1.82x. The gridworld rows
(and adder:2's transition, which contains one) do not move: every part's reach is its own block (it
reads what the block before wrote, the next block reads it), and their padding is mostly heads (6 or
16 find heads in one block). dyck:2,2 (3.45x at 346,782 parameters on d530ac4, its export 1.20M; now
2.51x at 253,782, its export 637k): its depth MLP's first stage is one 202-unit part (the
pre-activations of a second layer 189 of whose 201 units have zero output weights) that stays in
block 0. Since d530ac4 the unfolding also clears only the scratch dims a later use writes again
(every use writes from the region's first dim), which shrinks ours, not the export: dyck:2,2 drops
193 of its 201 clearing units, Grid4 10 (43,545 -> 42,455 parameters), adder:2's transition 7, D8 at
T = 512 1,537 of 2,054 (31.2M -> 24.8M parameters; its export 69.8M on d530ac4, 2.24x, and 44.1M
now, 1.78x: block 1's stage is 2,573 units, was 4,110). TransformerLens 4.x cannot carry per-block
widths: its native model builds every block's MLP as nn.Linear(d_model, cfg.d_mlp) from one config
value."""


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
