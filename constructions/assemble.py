"""The one assembler: :class:`Program` -> :class:`CompiledTransformer`.

Heads and MLPs are local to the subspaces they declare (constructions/program.py);
this is where they are embedded into the residual width ``d_model``.  Heads of a
layer are stacked and zero-padded to a shared ``d_head``; every float64 weight is
cast once to the target dtype, so the same program always gives bit-identical
parameters.  :func:`layout_of` records, by subspace name, what
every head and MLP reads and writes; it is stored in the model's ``meta["layout"]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .config import BlockShape, ModelConfig
from .model import CompiledTransformer
from .program import MLP, Beside, Block, Dense, Fused, Head, Program
from .workspace import Workspace


def _pad(a: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols))
    out[: a.shape[0], : a.shape[1]] = a
    return out


def _head_layout(index: int, head: Head) -> dict[str, Any]:
    """A head's declared reads (query/key/value) and writes."""
    return {"index": index, "name": head.name,
            "reads": {role: list(head.reads.get(role, ())) for role in ("query", "key", "value")},
            "writes": list(head.writes)}


def _mlp_layout(mlp: MLP | Fused | Beside | None, dense: Dense | None) -> dict[str, Any] | None:
    """An MLP's hidden widths (of its embedding ``dense``) and its declared reads and writes
    (None for a block without an MLP)."""
    if mlp is None or dense is None:
        return None
    return {"name": mlp.name, "hidden": dense.hidden_sizes, "reads": list(mlp.reads), "writes": list(mlp.writes)}


def layout_of(program: Program, mlps: list[Dense | None] | None = None) -> dict[str, Any]:
    """The program's residual layout (JSON-able): every subspace's dims and labels, and per
    block what each head's query, key and value read and what it writes, and what the MLP
    reads and writes, by subspace name.  ``mlps``: the blocks' embedded MLPs, when already made."""
    ws = program.workspace
    if mlps is None:
        mlps = [b.mlp.embed(ws) if b.mlp is not None else None for b in program.blocks]
    return {
        "subspaces": {name: {"dims": list(sub.dims), "labels": list(sub.labels)}
                      for name, sub in ws.subspaces.items()},
        "blocks": [{"layer": l,
                    "heads": [_head_layout(i, h) for i, h in enumerate(block.heads)],
                    "mlp": _mlp_layout(block.mlp, dense)}
                   for l, (block, dense) in enumerate(zip(program.blocks, mlps))],
    }


def shape_config(ws: Workspace, blocks: list[Block], *, n_symbols: int, n_out: int, max_len: int,
                 mlps: list[Dense | None] | None = None, dtype: str = "float64") -> ModelConfig:
    """The config of the model that :func:`assemble` makes of these blocks at ``dtype`` (the
    program's own float64 where only its sizes matter): ``d_model`` (the workspace's width),
    ``d_head`` (the widest head's query/key or value width; every head of a layer is zero-padded
    to it), per block its head count and MLP hidden widths (of the MLPs embedded into the
    residual width; ``mlps``: those embeddings, when already made).  Needs no embedding,
    position or unembedding weight, so a construction can count its parameters before it
    builds them (:func:`count_params`)."""
    if mlps is None:
        widths = [[] if b.mlp is None else (b.mlp if isinstance(b.mlp, MLP) else b.mlp.embed(ws)).hidden_sizes
                  for b in blocks]
    else:
        widths = [[] if m is None else m.hidden_sizes for m in mlps]
    d_head = max([max(h.W_Q.shape[1], h.W_V.shape[1]) for b in blocks for h in b.heads], default=1)
    return ModelConfig(d_model=ws.d_model, d_head=d_head, n_symbols=n_symbols, max_len=max_len, n_out=n_out,
                       blocks=tuple(BlockShape(max(len(b.heads), 1), tuple(w)) for b, w in zip(blocks, widths)),
                       dtype=dtype)


def count_params(ws: Workspace, blocks: list[Block], *, n_symbols: int, n_out: int, max_len: int) -> int:
    """The exact number of parameters :func:`assemble` will give a program with this workspace
    and these blocks (over ``n_symbols`` letters, ``n_out`` states, positions 0..``max_len``):
    what a construction's ``estimate`` returns (constructions/construction.py, ``Cost``)."""
    return shape_config(ws, blocks, n_symbols=n_symbols, n_out=n_out, max_len=max_len).n_params()


def program_params(program: Program) -> int:
    """The exact number of parameters :func:`assemble` will give ``program`` (its letters, states
    and positions read off its embedding, unembedding and position matrices)."""
    return count_params(program.workspace, program.blocks, n_symbols=program.W_E.shape[0] - 1,
                        n_out=program.W_U.shape[1], max_len=program.W_pos.shape[0] - 1)


def assemble(program: Program, *, max_len: int, dtype: torch.dtype, meta: dict[str, Any]) -> CompiledTransformer:
    """Build the torch module for ``program`` (weights cast from float64 to ``dtype``).

    The one place heads and MLPs meet ``d_model``: each is embedded into the residual
    width here (``embed``), its heads zero-padded to the shared ``d_head``."""
    ws = program.workspace
    d = ws.d_model
    heads = [[h.embed(ws) for h in b.heads] for b in program.blocks]
    mlps = [b.mlp.embed(ws) if b.mlp is not None else None for b in program.blocks]
    config = shape_config(ws, program.blocks, n_symbols=program.W_E.shape[0] - 1, n_out=program.W_U.shape[1],
                          max_len=max_len, mlps=mlps, dtype=str(dtype).removeprefix("torch."))
    d_head = config.d_head
    meta = {**meta, "residual_labels": list(ws.labels),
            "subspaces": {name: list(sub.dims) for name, sub in ws.subspaces.items()},
            "layout": layout_of(program, mlps)}
    model = CompiledTransformer(config, meta)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(dtype)  # noqa: E731
    with torch.no_grad():
        model.W_E.copy_(t(program.W_E))
        model.W_pos.copy_(t(program.W_pos))
        model.W_U.copy_(t(program.W_U))
        model.b_U.copy_(t(program.b_U))
        for blk, hs, mlp in zip(model.blocks, heads, mlps):
            for i, (W_Q, W_K, W_V, W_O) in enumerate(hs):
                blk.attn.W_Q[i] = t(_pad(W_Q, d, d_head))
                blk.attn.W_K[i] = t(_pad(W_K, d, d_head))
                blk.attn.W_V[i] = t(_pad(W_V, d, d_head))
                blk.attn.W_O[i] = t(_pad(W_O, d_head, d))
            if mlp is not None:
                assert blk.mlp is not None  # the config gave the block this MLP's hidden widths
                for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases)):
                    blk.mlp.weight(i).copy_(t(w))
                    blk.mlp.bias(i).copy_(t(b))
    return model
