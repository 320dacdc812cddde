"""The one assembler: :class:`Program` -> :class:`CompiledTransformer`.

Heads of a layer are stacked and zero-padded to a shared ``d_head``; every
float64 weight is cast once to the target dtype, so the same program always
gives bit-identical parameters.  :func:`layout_of` records, by subspace name, what
every head and MLP reads and writes; it is stored in the model's ``meta["layout"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from .model import CompiledTransformer
from .program import MLP, Head, Program
from .workspace import Workspace


def _pad(a: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols))
    out[: a.shape[0], : a.shape[1]] = a
    return out


def _names(ws: Workspace, used: np.ndarray) -> list[str]:
    """The subspaces (in allocation order) holding at least one residual dim flagged in ``used``."""
    hit = set(np.flatnonzero(used).tolist())
    return [name for name, sub in ws.subspaces.items() if hit.intersection(sub.dims)]


def _declared(part: "Head | MLP", attr: str) -> "list[str] | Mapping | None":
    value = getattr(part, attr, None)
    return value if value is None or isinstance(value, Mapping) else list(value)


def _head_layout(ws: Workspace, index: int, head: Head) -> dict[str, Any]:
    """A head's reads (query/key/value) and writes: declared ``reads``/``writes`` when the head
    has them (a mapping by role, or one list that each role's nonzero rows narrow down), else the
    subspaces its weights touch."""
    derived = {"query": _names(ws, np.any(head.W_Q != 0, axis=1)),
               "key": _names(ws, np.any(head.W_K != 0, axis=1)),
               "value": _names(ws, np.any(head.W_V != 0, axis=1))}
    reads = _declared(head, "reads")
    if isinstance(reads, Mapping):
        derived = {role: list(reads.get(role, ())) for role in derived}
    elif reads is not None:
        derived = {role: [n for n in reads if n in names] or names for role, names in derived.items()}
    writes = _declared(head, "writes")
    if writes is None:
        writes = _names(ws, np.any(head.W_O != 0, axis=0))
    return {"index": index, "name": head.name, "reads": derived, "writes": list(writes)}


def _mlp_layout(ws: Workspace, mlp: MLP) -> dict[str, Any]:
    """An MLP's hidden widths, reads and writes (declared, else from its first and last weights)."""
    reads, writes = _declared(mlp, "reads"), _declared(mlp, "writes")
    if reads is None:
        reads = _names(ws, np.any(mlp.weights[0] != 0, axis=1))
    if writes is None:
        writes = _names(ws, np.any(mlp.weights[-1] != 0, axis=0) | (mlp.biases[-1] != 0))
    return {"name": mlp.name, "hidden": list(mlp.hidden_sizes), "reads": list(reads), "writes": list(writes)}


def layout_of(program: Program) -> dict[str, Any]:
    """The program's residual layout (JSON-able): every subspace's dims and labels, and per
    block what each head's query, key and value read and what it writes, and what the MLP
    reads and writes, by subspace name."""
    ws = program.workspace
    return {
        "subspaces": {name: {"dims": list(sub.dims), "labels": list(sub.labels)}
                      for name, sub in ws.subspaces.items()},
        "blocks": [{"layer": l,
                    "heads": [_head_layout(ws, i, h) for i, h in enumerate(block.heads)],
                    "mlp": _mlp_layout(ws, block.mlp) if block.mlp is not None else None}
                   for l, block in enumerate(program.blocks)],
    }


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
            "subspaces": {name: list(sub.dims) for name, sub in ws.subspaces.items()},
            "layout": layout_of(program)}
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
