"""Why a rotated model's TransformerLens export is not bit-exact: the padded shapes' rounding.

Two measurements:

1. Per model (standard basis and ``rotate(model, 9)``): the export's shapes against ours
   (TransformerLens needs one d_model, head count and MLP width for every block, so unfolded
   scratch dims, head slots and MLP units are zero-padded) and the largest logit difference
   between the bridge and our explicit attention path, also in units of float32 eps x the
   largest |logit|.
2. torch's own ``F.linear`` (TransformerLens's ``nn.Linear``) on random dense float32 data
   [M, K] x [N, K]: for which zero-padded widths K' >= K the result equals the unpadded one.
   Zero padding changes no exact value, but the BLAS kernel chooses its reduction order from
   the shape, so a dense dot product rounds differently once K changes.

    python benchmarks/rotated_export_rounding.py --out benchmarks/results/rotated_export_rounding.md
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from _common import emit, finish, header

MODELS = ("parity", "nth-last:3", "dyck:2,2", "symmetric:4")
T = 16
M = 3 * (T + 1)  # rows of every projection: batch 3 x positions with BOS
WIDTHS = (4, 8, 64)
DEPTHS = (8, 31, 45, 64)
PAD_RANGE = 64


def model_rows(lines: list[str]) -> None:
    import compiler
    from compiler.export import bos_tokens, to_transformer_bridge, to_transformer_lens
    from constructions.rotate import rotate

    emit(lines, "| model | basis | our layers / d_model / heads / MLP widths | export blocks / d_model / heads / d_mlp "
                "| max |logit diff| | in eps x max|logit| |")
    emit(lines, "|---|---|---|---|---|---|")
    eps = torch.finfo(torch.float32).eps
    for name in MODELS:
        plain = compiler.compile_automaton(name, max_len=T)
        tokens = torch.randint(0, plain.config.n_symbols, (3, T), generator=torch.Generator().manual_seed(1))
        for basis, model in (("standard", plain), ("orthogonal", rotate(plain, 9))):
            c, x = model.config, to_transformer_lens(model).config
            with torch.no_grad():
                ours = model.run_with_cache(tokens)[0]
                theirs = to_transformer_bridge(model)(bos_tokens(tokens, model.bos_id))[:, 1:]
            diff = float((ours - theirs).abs().max())
            ours_shape = (f"{len(c.blocks)} / {c.d_model} / {[b.n_heads for b in c.blocks]} / "
                          f"{[list(b.mlp_hidden) for b in c.blocks]}")
            emit(lines, f"| {name} | {basis} | {ours_shape} | {x['n_layers']} / {x['d_model']} / {x['n_heads']} / "
                        f"{x['d_mlp']} | {diff:.2e} | {diff / (eps * float(ours.abs().max())):.2f} |")


def padding_rows(lines: list[str]) -> None:
    emit(lines, "\n| N (outputs) | K (inputs) | zero-padded K' in K..K+63 giving the unpadded result |")
    emit(lines, "|---|---|---|")
    g = torch.Generator().manual_seed(0)
    for n in WIDTHS:
        for k in DEPTHS:
            x, w = torch.randn(M, k, generator=g), torch.randn(n, k, generator=g)
            base = F.linear(x, w)
            same = [kp for kp in range(k, k + PAD_RANGE)
                    if torch.equal(base, F.linear(F.pad(x, (0, kp - k)), F.pad(w, (0, kp - k))))]
            emit(lines, f"| {n} | {k} | {_ranges(same)} |")


def _ranges(values: list[int]) -> str:
    """``[8, 12, 16]`` as ``8, 12, 16`` and runs of consecutive values as ``a-b``."""
    out, i = [], 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    args = parser.parse_args()
    start = time.perf_counter()
    lines = [header("Rotated models' TransformerLens export: where the rounding differs"), ""]
    model_rows(lines)
    padding_rows(lines)
    print(finish(lines, start, args.out))


if __name__ == "__main__":
    main()
