"""The one assembler: :class:`Program` -> :class:`CompiledTransformer`.

Heads of a layer are stacked and zero-padded to a shared ``d_head``; every
float64 weight is cast once to the target dtype, so the same program always
gives bit-identical parameters.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .model import CompiledTransformer
from .program import Program


def _pad(a: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols))
    out[: a.shape[0], : a.shape[1]] = a
    return out


def assemble(program: Program, *, max_len: int, dtype: torch.dtype, meta: dict[str, Any]) -> CompiledTransformer:
    """Build the torch module for ``program`` (weights cast from float64 to ``dtype``)."""
    ws = program.workspace
    d = ws.d_model
    heads = [h for b in program.blocks for h in b.heads]
    d_head = max([max(h.W_Q.shape[1], h.W_V.shape[1]) for h in heads], default=1)
    blocks_cfg = [
        {"n_heads": max(len(b.heads), 1), "mlp_hidden": b.mlp.hidden_sizes if b.mlp else []}
        for b in program.blocks
    ]
    config = {
        "format": "shortcut-transformer",
        "dtype": str(dtype).removeprefix("torch."),
        "d_model": d,
        "d_head": d_head,
        "n_symbols": program.W_E.shape[0] - 1,
        "max_len": max_len,
        "n_out": program.W_U.shape[1],
        "blocks": blocks_cfg,
    }
    meta = {**meta, "residual_labels": list(ws.labels),
            "subspaces": {name: list(sub.dims) for name, sub in ws.subspaces.items()}}
    model = CompiledTransformer(config, meta)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dtype)  # noqa: E731
    with torch.no_grad():
        model.W_E.copy_(t(program.W_E))
        model.W_pos.copy_(t(program.W_pos))
        model.W_U.copy_(t(program.W_U))
        model.b_U.copy_(t(program.b_U))
        for blk, spec in zip(model.blocks, program.blocks):
            for i, h in enumerate(spec.heads):
                blk.attn.W_Q[i] = t(_pad(h.W_Q, d, d_head))
                blk.attn.W_K[i] = t(_pad(h.W_K, d, d_head))
                blk.attn.W_V[i] = t(_pad(h.W_V, d, d_head))
                blk.attn.W_O[i] = t(_pad(h.W_O, d_head, d))
            if spec.mlp is not None:
                for i, (w, b) in enumerate(zip(spec.mlp.weights, spec.mlp.biases)):
                    getattr(blk.mlp, blk.mlp.weight_name(i)).copy_(t(w))
                    getattr(blk.mlp, blk.mlp.bias_name(i)).copy_(t(b))
    return model
