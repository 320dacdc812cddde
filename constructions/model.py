"""The compiled model: a plain decoder-only Transformer.

token embedding + fixed positional table (position 0 is BOS)
-> L blocks of (causal multi-head softmax attention, ReLU MLP), residual, no LayerNorm
-> linear unembedding to one logit per state; prediction is argmax.

Weight names follow TransformerLens: ``W_E``, ``W_pos``, per block ``W_Q, W_K,
W_V, W_O`` of shape [n_heads, d_model, d_head] / [n_heads, d_head, d_model], the
MLP's ``W_in, W_hid*, W_out`` and biases, and ``W_U, b_U``.  Attention scores are
``q . k`` with no 1/sqrt(d_head) factor: each head's temperature is folded into
its ``W_Q``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from compiler.automata.errors import InputError
from compiler.automata.spec import from_dict


class Attention(nn.Module):
    """Causal multi-head softmax attention without biases."""

    def __init__(self, d_model: int, n_heads: int, d_head: int, dtype: torch.dtype) -> None:
        super().__init__()
        shape_in, shape_out = (n_heads, d_model, d_head), (n_heads, d_head, d_model)
        self.W_Q = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_K = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_V = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_O = nn.Parameter(torch.zeros(shape_out, dtype=dtype))

    def forward(self, x: torch.Tensor, cache: dict | None = None, prefix: str = "") -> torch.Tensor:
        q = torch.einsum("btd,hde->bhte", x, self.W_Q)
        k = torch.einsum("btd,hde->bhte", x, self.W_K)
        v = torch.einsum("btd,hde->bhte", x, self.W_V)
        T = x.shape[1]
        scores = q @ k.transpose(-1, -2)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        pattern = torch.softmax(scores, dim=-1)
        z = pattern @ v  # [b, h, t, e]
        if cache is not None:
            cache[prefix + "scores"] = scores
            cache[prefix + "pattern"] = pattern
        return torch.einsum("bhte,hed->btd", z, self.W_O)


class MLP(nn.Module):
    """ReLU MLP with any number of hidden layers (``hidden`` = their widths)."""

    def __init__(self, d_model: int, hidden: list[int], dtype: torch.dtype) -> None:
        super().__init__()
        sizes = [d_model, *hidden, d_model]
        self.n_hidden = len(hidden)
        for i in range(len(sizes) - 1):
            setattr(self, self.weight_name(i), nn.Parameter(torch.zeros(sizes[i], sizes[i + 1], dtype=dtype)))
            setattr(self, self.bias_name(i), nn.Parameter(torch.zeros(sizes[i + 1], dtype=dtype)))

    def weight_name(self, i: int) -> str:
        return "W_in" if i == 0 else ("W_out" if i == self.n_hidden else f"W_hid{i}")

    def bias_name(self, i: int) -> str:
        return "b_in" if i == 0 else ("b_out" if i == self.n_hidden else f"b_hid{i}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for i in range(self.n_hidden):
            h = torch.relu(h @ getattr(self, self.weight_name(i)) + getattr(self, self.bias_name(i)))
        return h @ getattr(self, self.weight_name(self.n_hidden)) + getattr(self, self.bias_name(self.n_hidden))


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_head: int, mlp_hidden: list[int], dtype: torch.dtype) -> None:
        super().__init__()
        self.attn = Attention(d_model, n_heads, d_head, dtype)
        self.mlp = MLP(d_model, mlp_hidden, dtype) if mlp_hidden else None

    def forward(self, x: torch.Tensor, cache: dict | None = None, prefix: str = "") -> torch.Tensor:
        x = x + self.attn(x, cache, prefix + "attn.")
        if cache is not None:
            cache[prefix + "resid_mid"] = x
        if self.mlp is not None:
            x = x + self.mlp(x)
        return x


class CompiledTransformer(nn.Module):
    """A compiled automaton simulator.

    ``forward(tokens)`` takes token ids [B, T] in alphabet order (BOS is added
    internally) and returns logits [B, T, n_states]: position t's argmax is the
    state after reading tokens[:, :t+1].

    ``config`` fixes the shapes; ``meta`` carries the automaton spec, method,
    residual labels, readout description and margins (all JSON-able).
    """

    def __init__(self, config: dict[str, Any], meta: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.meta = meta
        dtype = getattr(torch, config["dtype"])
        d = config["d_model"]
        self.W_E = nn.Parameter(torch.zeros(config["n_symbols"] + 1, d, dtype=dtype))
        self.W_pos = nn.Parameter(torch.zeros(config["max_len"] + 1, d, dtype=dtype))
        self.blocks = nn.ModuleList(
            Block(d, b["n_heads"], config["d_head"], b["mlp_hidden"], dtype) for b in config["blocks"]
        )
        self.W_U = nn.Parameter(torch.zeros(d, config["n_out"], dtype=dtype))
        self.b_U = nn.Parameter(torch.zeros(config["n_out"], dtype=dtype))
        self._automaton = None

    @property
    def max_len(self) -> int:
        return self.config["max_len"]

    @property
    def bos_id(self) -> int:
        return self.config["n_symbols"]

    def residual(self, tokens: torch.Tensor) -> torch.Tensor:
        """The embedded input [B, T+1, d_model], BOS prepended."""
        if tokens.dim() != 2:
            raise ValueError("tokens must be a [batch, length] tensor of symbol ids")
        B, T = tokens.shape
        if T > self.max_len:
            raise InputError(f"sequence of length {T} is longer than the model's max_len {self.max_len}")
        if T and (int(tokens.min()) < 0 or int(tokens.max()) >= self.bos_id):
            raise InputError(f"token ids must lie in 0..{self.bos_id - 1}")
        bos = torch.full((B, 1), self.bos_id, dtype=torch.long, device=tokens.device)
        ids = torch.cat([bos, tokens.long()], dim=1)
        return self.W_E[ids] + self.W_pos[: T + 1]

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.residual(tokens)
        for block in self.blocks:
            x = block(x)
        return (x @ self.W_U + self.b_U)[:, 1:]

    def run_with_cache(self, tokens: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Logits and every intermediate: ``resid_pre.{l}``, ``blocks.{l}.attn.pattern``,
        ``blocks.{l}.attn.scores``, ``blocks.{l}.resid_mid``, ``resid_post.{l}``
        (all including the BOS position 0)."""
        cache: dict[str, torch.Tensor] = {}
        x = self.residual(tokens)
        for l, block in enumerate(self.blocks):
            cache[f"resid_pre.{l}"] = x
            x = block(x, cache, f"blocks.{l}.")
            cache[f"resid_post.{l}"] = x
        cache["resid_final"] = x
        return (x @ self.W_U + self.b_U)[:, 1:], cache

    def subspace(self, name: str) -> list[int]:
        """Residual indices of the named subspace (as allocated by the construction's
        workspace and stored in the checkpoint); raises KeyError naming the known ones."""
        subspaces = self.meta.get("subspaces", {})
        if name not in subspaces:
            raise KeyError(f"no subspace {name!r}; this model has {sorted(subspaces)}")
        return list(subspaces[name])

    # --- automaton-level conveniences -------------------------------------------------

    @property
    def automaton(self):
        """The :class:`compiler.automata.spec.Semiautomaton` this model was compiled from."""
        if self._automaton is None:
            self._automaton = from_dict(self.meta["automaton"])
        return self._automaton

    @torch.no_grad()
    def predict(self, tokens: torch.Tensor) -> torch.Tensor:
        """State ids [B, T] (argmax of the logits)."""
        return self.forward(tokens).argmax(-1)

    def simulate(self, words: list[list[str]]) -> list[list[str]]:
        """State names after each symbol, for each word, computed by the Transformer."""
        a = self.automaton
        out = []
        for word in words:
            ids = a.symbol_ids(word)
            if len(ids) > self.max_len:
                raise InputError(f"sequence of length {len(ids)} is longer than the model's max_len {self.max_len}")
            if not ids:
                out.append([])
                continue
            pred = self.predict(torch.tensor([ids]))[0].tolist()
            out.append([a.states[q] for q in pred])
        return out

    def info(self) -> dict[str, Any]:
        """Summary: method, sizes, automaton (the keys of ``shortcut info --json``)."""
        c = self.config
        a = self.automaton
        return {
            "method": self.meta["method"],
            "max_len": c["max_len"],
            "dtype": c["dtype"],
            "n_layers": len(c["blocks"]),
            "d_model": c["d_model"],
            "n_heads": max((b["n_heads"] for b in c["blocks"]), default=0),
            "d_head": c["d_head"],
            "d_mlp": max((max(b["mlp_hidden"], default=0) for b in c["blocks"]), default=0),
            "mlp_hidden_layers": max((len(b["mlp_hidden"]) for b in c["blocks"]), default=0),
            "mlp_hidden_by_layer": [list(b["mlp_hidden"]) for b in c["blocks"]],
            "heads_by_layer": [b["n_heads"] for b in c["blocks"]],
            "n_params": sum(p.numel() for p in self.parameters()),
            "automaton": a.name,
            "n_states": a.n_states,
            "n_symbols": a.n_symbols,
            "positions": self.meta.get("positions"),
            "start": a.states[a.start],
            "why": self.meta.get("why"),
            "warnings": self.meta.get("warnings", []),
            "verification": self.meta.get("verification"),
        }
