"""A compiled model's config, typed: the shapes of ``CompiledTransformer``'s tensors.

``model.config`` is a :class:`ModelConfig`; a checkpoint stores its JSON (:meth:`ModelConfig.to_json`,
read back by :meth:`ModelConfig.from_json`: the same object, so stored checkpoints load and
their header digests hold).  ``constructions/checkpoint.py`` checks a stored config's JSON
types and limits before it becomes one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FORMAT = "shortcut-transformer"
"""The config's ``format``: the layout of :class:`constructions.model.CompiledTransformer`."""


@dataclass(frozen=True)
class BlockShape:
    """One block: ``n_heads`` heads (at least one; a block without attention has one zero head)
    and its MLP's hidden widths (empty: no MLP)."""

    n_heads: int
    mlp_hidden: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"n_heads": self.n_heads, "mlp_hidden": list(self.mlp_hidden)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> BlockShape:
        return BlockShape(int(d["n_heads"]), tuple(int(x) for x in d["mlp_hidden"]))


@dataclass(frozen=True)
class ModelConfig:
    """The sizes of a compiled model: residual width ``d_model``, the heads' width ``d_head``
    (every head zero-padded to it), ``n_symbols`` letters (the embedding has one more row, BOS),
    positions 0..``max_len``, ``n_out`` outputs (states or labels), its ``blocks`` and the
    weights' ``dtype`` (a torch dtype's name; a program is float64 until it is assembled)."""

    d_model: int
    d_head: int
    n_symbols: int
    max_len: int
    n_out: int
    blocks: tuple[BlockShape, ...]
    dtype: str = "float64"
    format: str = FORMAT

    def to_json(self) -> dict[str, Any]:
        """The JSON object a checkpoint stores (its keys sorted when written)."""
        return {"format": self.format, "dtype": self.dtype, "d_model": self.d_model, "d_head": self.d_head,
                "n_symbols": self.n_symbols, "max_len": self.max_len, "n_out": self.n_out,
                "blocks": [b.to_json() for b in self.blocks]}

    @staticmethod
    def from_json(d: dict[str, Any]) -> ModelConfig:
        """The config of a JSON object (:meth:`to_json`'s; its types checked by the caller)."""
        return ModelConfig(d_model=int(d["d_model"]), d_head=int(d["d_head"]), n_symbols=int(d["n_symbols"]),
                           max_len=int(d["max_len"]), n_out=int(d["n_out"]),
                           blocks=tuple(BlockShape.from_json(b) for b in d["blocks"]), dtype=str(d["dtype"]),
                           format=str(d.get("format", FORMAT)))

    def n_params(self) -> int:
        """The number of parameters these shapes imply (``CompiledTransformer``'s layout)."""
        d, n_out = self.d_model, self.n_out
        n = (self.n_symbols + 1 + self.max_len + 1) * d + d * n_out + n_out
        for b in self.blocks:
            n += 4 * b.n_heads * self.d_head * d
            sizes = [d, *b.mlp_hidden, d] if b.mlp_hidden else []
            n += sum(x * y + y for x, y in zip(sizes, sizes[1:]))
        return n

    @property
    def n_heads(self) -> int:
        """The most heads of any block (0 without blocks)."""
        return max((b.n_heads for b in self.blocks), default=0)
