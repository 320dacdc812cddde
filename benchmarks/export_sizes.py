"""Size of the TransformerLens export against the model: blocks per layer, parameters per parameter.

For the paper's 19 automata (``--method auto``) and one model of every construction, at max_len
T (default 100), then the constructions that take ``one_hidden_layer`` (``+1hl``: compiled with
it): our attention layers and parameters, the exported blocks and state-dict entries
(``compiler.export.to_transformer_lens``: MLPs unfolded to one hidden layer per block, heads
and widths zero-padded), each ratio, and whether both stay within 2x.  Needs no
TransformerLens.  One command regenerates the committed table:

    python benchmarks/export_sizes.py --out benchmarks/results/export_sizes.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import compiler
from compiler.automata.catalog import paper_suite
from compiler.export import to_transformer_lens

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

EVERY_CONSTRUCTION = ["symmetric:5@scan", "quaternion@krohn-rhodes", "grid:9@gridworld", "nth-last:3@lookback",
                      "dyck:2,2@bounded-stack", "adder:2@local", "cyclic-product:2,2@product", "dyck:32,1", "dyck:1,8",
                      "nth-last:3@lookback+1hl", "memory:3@local", "memory:3@local+1hl"]
"""One model per construction (spec@method), the issue's two wide Dyck languages (auto), then the
constructions with one-hidden-layer lookups compiled that way (``+1hl``; local's only in one-layer
models, so a one-layer one beside its default build)."""
ONE_HIDDEN_LAYER = "+1hl"
BOUND = 2.0
NOTE = """

What the export does (`constructions/unfold.py`, `compiler/export.py`): a k-hidden-layer MLP
becomes k blocks; across each boundary the narrower of the next pre-activation and the
current activations is carried in scratch dims, cleared only where a later stage writes that
region again; a unit whose activation reaches the output only through identity copies (a product's
shallower factor, padded) writes the output from its own block and crosses nothing
(`unfold.exits`); heads and MLP widths are zero-padded to the largest, since TransformerLens has one
head count and one MLP width. The non-zero column shows that what remains is padding: every
export holds at most 1.6x our non-zero weights.

Within 2x takes MLPs of one hidden layer. The scans have them; lookback, and local's one-layer
models, get them with `one_hidden_layer` (`shortcut compile --one-hidden-layer`; the `+1hl`
rows): the lookup reads its codes as one mixed-radix integer through threshold pairs
(`gadgets.flat_lookup_mlp`), its heads copy within that lookup's tighter tolerance, and the
model is certified as before (nth-last:3 and memory:3 also at T = 1024). Our model grows
(nth-last:3 +20%, memory:3 +15% parameters) and exports block for block at 1.01x.
local's two-layer models build as without the option: their first lookup's flags feed the
latest-anchor head, whose recency gap 1/(2(T+1)) a flat lookup's rounding overtakes (its ramps
grow along the code; adder:2 built that way certifies at T = 100 but not at 256), and flattening
only the final lookup leaves three blocks (adder:2: 2.9x). A final lookup that reads the event
count keeps two hidden layers too: the count saturates at the bound, and no one code covers
every count.

Two hidden layers [h0, h1] already miss: the second block carries min(h0, h1) scratch dims in
every block's residual and pays a whole zero attention (lookback 2.36x, local 2.32-4.99x).
krohn-rhodes and product (6-7 hidden layers), gridworld (4) and bounded-stack (4 in its first
layer) are deep because of their exact decodes: `residue_mlp` (coarse ramps, exact clips, fine
ramps, exact one-hot: 4 hidden layers of O(sqrt T) units) and `round_mlp` (2), whose exact 0/1
outputs the later flag heads, lookups and compose units are proved against; then the cascade's
views, next inputs and readout. Two hidden layers per layer (the blocks bound) would need a
decode and a lookup in one layer each: a decode in one hidden layer is exact only up to
rounding (not the exact codes those proofs take), and at two per MLP the scratch and zero
attention already cost more than 2x as above. Head padding adds to it where head counts differ:
grid:9's layers have 1 and 16 heads, so even one block per layer would hold 32 head slots for
our 17. dyck:32,1 is a scan now: the stack construction's declared stack table would have 34 x 2^32
x 2 rows (`bounded_stack.STACK_TABLE_BUDGET`), where it padded 32 head slots into all 8 blocks."""


def row(spec: str, T: int) -> str:
    """One table row for ``spec`` (``name`` or ``name@method``, ``+1hl``: with ``one_hidden_layer``)."""
    flat = spec.endswith(ONE_HIDDEN_LAYER)
    name, method = (spec.removesuffix(ONE_HIDDEN_LAYER).split("@") + ["auto"])[:2]
    model = compiler.compile_automaton(name, max_len=T, method=method, one_hidden_layer=flat)
    export = to_transformer_lens(model)
    layers, blocks = len(model.blocks), export.config["n_layers"]
    ours = sum(p.numel() for p in model.parameters())
    theirs = sum(v.numel() for v in export.state_dict.values())
    hidden = max((len(b.mlp_hidden) for b in model.config.blocks), default=0)
    nonzero = sum(int((v != 0).sum()) for v in export.state_dict.values()) / sum(int((p != 0).sum())
                                                                                 for p in model.parameters())
    within = blocks <= BOUND * layers and theirs <= BOUND * ours
    method_text = f"{model.meta['method']}{' (one hidden layer)' * flat}"
    return (f"| `{name}` | {method_text} | {layers} | {hidden} | {blocks} | {blocks / layers:.1f} | "
            f"{ours:,} | {theirs:,} | {theirs / ours:.2f} | {export.config['n_heads']} | "
            f"{model.config.d_model} → {export.config['d_model']} | {nonzero:.2f} | {'yes' if within else 'no'} |")


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--out")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    lines = [header(f"TransformerLens export size at T = {args.max_len}, float32"), "",
             f"'within 2x': exported blocks ≤ {BOUND:g} × our layers and exported parameters ≤ {BOUND:g} × ours "
             "(zero padding counted, as a state dict holds it). 'non-zero params, ratio': the export's non-zero "
             "entries over ours (what the padding adds beyond zeros: the scratch's identities).", "",
             "| spec | method | our layers | most MLP hidden layers | exported blocks | blocks / layer | our params | "
             "exported params | ratio | exported heads | d_model → with scratch | non-zero params, ratio | within 2x |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for spec in [*paper_suite(), *EVERY_CONSTRUCTION]:
        emit(lines, row(spec, args.max_len))
    return finish(lines, t0, args.out, NOTE)


if __name__ == "__main__":
    main()
