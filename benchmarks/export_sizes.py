"""Size of the TransformerLens export against the model: blocks per layer, parameters per parameter.

For the paper's 19 automata (``--method auto``) and one model of every construction, at max_len
T (default 100): our attention layers and parameters, the exported blocks and state-dict
entries (``compiler.export.to_transformer_lens``: MLPs unfolded to one hidden layer per
block, heads and widths zero-padded), each ratio, and whether both stay within 2x.  Needs
no TransformerLens.  One command regenerates the committed table:

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
                      "dyck:2,2@bounded-stack", "adder:2@local", "cyclic-product:2,2@product", "dyck:32,1", "dyck:1,8"]
"""One model per construction (spec@method), then the issue's two wide Dyck languages (auto)."""
BOUND = 2.0
NOTE = """

What the export does (`constructions/unfold.py`, `compiler/export.py`): a k-hidden-layer MLP
becomes k blocks; across each boundary the narrower of the next pre-activation and the
current activations is carried in scratch dims; heads and MLP widths are zero-padded to the
largest, since TransformerLens has one head count and one MLP width. The non-zero column
shows that what remains is padding: every construction's export holds at most 1.6x our
non-zero weights. Within 2x needs constructions whose MLPs have at most 2 hidden layers
(blocks) and whose widest layer does not dominate (parameters): krohn-rhodes and product
(6-7 hidden layers: each block's decode, views, next inputs and readout run as Steps in one
MLP), gridworld (4), bounded-stack (4 in its first layer); lookback and local have 2 and are
within 2x in blocks but not in parameters (the stage block's padded heads and MLP width).
Layers with many heads (dyck:32,1: 32; grid:9: 16) pad every block to that many head slots."""


def row(spec: str, T: int) -> str:
    """One table row for ``spec`` (``name`` or ``name@method``)."""
    name, method = (spec.split("@") + ["auto"])[:2]
    model = compiler.compile_automaton(name, max_len=T, method=method)
    export = to_transformer_lens(model)
    layers, blocks = len(model.blocks), export.config["n_layers"]
    ours = sum(p.numel() for p in model.parameters())
    theirs = sum(v.numel() for v in export.state_dict.values())
    hidden = max((len(b["mlp_hidden"]) for b in model.config["blocks"]), default=0)
    nonzero = sum(int((v != 0).sum()) for v in export.state_dict.values()) / sum(int((p != 0).sum())
                                                                                 for p in model.parameters())
    within = blocks <= BOUND * layers and theirs <= BOUND * ours
    return (f"| `{name}` | {model.meta['method']} | {layers} | {hidden} | {blocks} | {blocks / layers:.1f} | "
            f"{ours:,} | {theirs:,} | {theirs / ours:.2f} | {export.config['n_heads']} | "
            f"{model.config['d_model']} → {export.config['d_model']} | {nonzero:.2f} | {'yes' if within else 'no'} |")


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
