"""Export to TransformerLens 4.x and compare: the paper's 19 automata, bitwise.

For each automaton compiles with ``--method auto`` at max_len T (default 100), exports it
(``compiler.export.to_transformer_bridge``: unfolded to one MLP hidden layer per block,
loaded into a native ``TransformerBridge`` with no weight processing) and runs ``--inputs``
random sequences of length T (seed 0) through both.  One row per automaton: our layers and
the exported blocks, d_model with scratch, whether the bridge's logits are ``torch.equal``
to ours on the explicit attention path (TransformerLens's) and on our default fused path
(largest |difference| otherwise), and whether the bridge's argmax is the reference
simulation at every position.  Needs the ``transformer-lens`` extra.  One command
regenerates the committed table:

    python benchmarks/transformer_lens_export.py --out benchmarks/results/transformer_lens_export.md

and one model of every construction at T = 1024:

    python benchmarks/transformer_lens_export.py --max-len 1024 --automata symmetric:5@scan quaternion@krohn-rhodes \
        grid:9@gridworld 'regex:(a|b)*a(a|b)(a|b)(a|b)(a|b)(a|b)@lookback' adder:2@local dyck:4,2@bounded-stack \
        --out benchmarks/results/transformer_lens_export_1024.md
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
import time
from pathlib import Path

import numpy as np
import torch

import compiler
from compiler.automata.catalog import paper_suite
from compiler.automata.load import load_spec
from compiler.automata.simulate import simulate
from compiler.export import bos_tokens, to_transformer_bridge, to_transformer_lens

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402

BATCH = 100
"""Default sequences per forward (``--batch``; bounds the explicit path's [B, H, T, T] memory:
grid:9's 8 heads at T = 1024 need ``--batch 8`` within 24 GiB)."""


def row(name: str, T: int, n_inputs: int, method: str = "auto", batch: int = BATCH) -> str:
    if "@" in name:  # spec@method forces a construction for that row
        name, method = name.rsplit("@", 1)
    a = load_spec(name)
    t0 = time.perf_counter()
    model = compiler.compile_automaton(a, max_len=T, method=method)
    export = to_transformer_lens(model)
    bridge = to_transformer_bridge(export)
    toks = np.random.default_rng(0).integers(0, a.n_symbols, (n_inputs, T))
    reference = simulate(a, toks)
    same_explicit = same_fused = agree = True
    worst_fused = 0.0
    with torch.no_grad():
        for i in range(0, n_inputs, batch):
            x = torch.from_numpy(toks[i:i + batch])
            theirs = bridge(bos_tokens(x, model.bos_id))[:, 1:]
            with model.explicit_attention():
                explicit = model(x)
            fused = model(x)
            same_explicit &= torch.equal(explicit, theirs)
            same_fused &= torch.equal(fused, theirs)
            worst_fused = max(worst_fused, float((fused - theirs).abs().max()))
            agree &= bool(np.array_equal(theirs.argmax(-1).numpy(), reference[i:i + batch]))
    c = export.config
    fused_text = "True" if same_fused else f"False (max {worst_fused:.1e})"
    return (f"| `{name}` | {model.meta['method']} | {len(model.blocks)} | {c['n_layers']} | "
            f"{model.config.d_model} → {c['d_model']} | {c['n_heads']} | {c['d_mlp']} | {same_explicit} | "
            f"{fused_text} | {agree} | {time.perf_counter() - t0:.1f} |")


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--inputs", type=int, default=1000, help="random sequences of length max_len per automaton")
    p.add_argument("--automata", nargs="+", default=paper_suite(),
                   help="specs as `compile` takes them (catalog names, regex:PATTERN, ...); SPEC@METHOD forces a "
                        "construction for that row")
    p.add_argument("--batch", type=int, default=BATCH, help="sequences per forward")
    p.add_argument("--out", help="also write the table to this file")
    args = p.parse_args(argv)
    T = args.max_len
    lines = [header(f"TransformerLens export at T = {T}: {args.inputs} random inputs per automaton, float32"),
             "",
             f"transformer-lens {importlib.metadata.version('transformer-lens')} (native TransformerBridge, "
             f"no weight processing). Logits compared at positions 1..T (position 0 is BOS). "
             f"'explicit': our explicit attention path (scores and softmax as tensors, as TransformerLens "
             f"computes them); 'fused': our default scaled_dot_product_attention path. "
             f"'argmax = reference': the bridge's argmax is the integer simulation at every position.",
             "",
             "| spec | method | our layers | exported blocks | d_model → with scratch | heads | d_mlp | "
             "torch.equal (explicit) | torch.equal (fused) | argmax = reference | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    t_all = time.perf_counter()
    for name in args.automata:
        r = row(name, T, args.inputs, batch=args.batch)
        print(r, flush=True)
        lines.append(r)
    text = finish(lines, t_all, args.out)
    print(lines[-1])
    return text


if __name__ == "__main__":
    main()
