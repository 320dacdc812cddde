"""The layers of :class:`~constructions.model.CompiledTransformer`: the identity
:class:`HookPoint` every activation passes through, causal multi-head :class:`Attention` (fused
or explicit), the ReLU :class:`MLP` (over bounded chunks of positions outside autograd) and the
residual :class:`Block`, held in order by :class:`Blocks`; named as in TransformerLens (see
:mod:`constructions.model`)."""

from __future__ import annotations

import functools
from typing import Iterable, Iterator, cast, overload

import torch
from torch import nn


class HookPoint(nn.Module):
    """An identity module marking one named activation (TransformerLens style).

    ``forward`` returns its input unchanged; a torch forward hook registered on it
    sees the activation and may return a replacement, which is what flows on.
    ``name`` is the module's dotted path in the model (e.g. ``blocks.0.hook_resid_mid``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.name = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def observed(points: "list[HookPoint]") -> bool:
    """Does anything watch one of ``points``: a torch forward hook or pre-hook (on it or global),
    or a ``forward`` replaced on the instance (nnsight 0.8 wraps every module so, registering no
    hook)?  Then the caller runs the path that passes through them."""
    if nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks:
        return True
    return any(hp._forward_hooks or hp._forward_pre_hooks or "forward" in vars(hp) for hp in points)


def _heads_last(x: torch.Tensor) -> torch.Tensor:
    """[b, h, t, e] <-> [b, t, h, e] (a view: the hooks see TransformerLens's shape)."""
    return x.transpose(1, 2)


@functools.lru_cache(maxsize=4)
def _above_diagonal(T: int, device: torch.device) -> torch.Tensor:
    """The [T, T] boolean mask of key positions after the query (built once per length and device)."""
    with torch.inference_mode(False):  # a plain tensor, usable outside inference mode too
        return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)


class Attention(nn.Module):
    """Causal multi-head softmax attention without biases.

    Two paths compute the same thing (scores ``q . k``, the causal mask, a softmax over
    keys, the weighted sum of values):

    * fused (``fused`` True, the default): ``scaled_dot_product_attention`` with
      ``is_causal`` and scale 1 -- no [T, T] tensor is kept;
    * explicit: scores, mask and softmax as tensors, through ``hook_attn_scores`` and
      ``hook_pattern``.  Used when ``fused`` is False or when any forward (pre-)hook is
      registered on one of this module's hook points, or a global module hook (so torch
      hooks see and patch patterns), or when a hook point's ``forward`` is wrapped (nnsight;
      :func:`observed`); :meth:`CompiledTransformer.run_with_cache` turns ``fused`` off while
      it runs.

    In a layer whose queries and keys read only input-independent dims (``shared``: every scan
    layer, for instance) the fused path computes the pattern once for the batch, with the
    sequences' values side by side (:meth:`shared_attention`): the same logits as sequence by
    sequence, at a fraction of the cost.

    The two paths may differ in the last bits of the logits (summation order); see
    ``benchmarks/results/fused_attention.md`` for the measured differences.

    Hooks: ``hook_q``, ``hook_k``, ``hook_v``, ``hook_z`` [batch, pos, head, d_head];
    ``hook_attn_scores`` (after the causal mask, -inf above the diagonal) and
    ``hook_pattern`` [batch, head, query_pos, key_pos].
    """

    fused: bool = True
    shared: bool = False
    """Set by :meth:`CompiledTransformer.forward` when every head's query and key read only
    input-independent dims (:func:`positional_layers`): the pattern is the same for every
    sequence of the batch, so the fused path computes it once (:meth:`shared_attention`)."""

    def __init__(self, d_model: int, n_heads: int, d_head: int, dtype: torch.dtype) -> None:
        super().__init__()
        shape_in, shape_out = (n_heads, d_model, d_head), (n_heads, d_head, d_model)
        self.W_Q = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_K = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_V = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_O = nn.Parameter(torch.zeros(shape_out, dtype=dtype))
        self.hook_q = HookPoint()
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_attn_scores = HookPoint()
        self.hook_pattern = HookPoint()
        self.hook_z = HookPoint()

    def hooked(self) -> bool:
        """Is any of this module's hook points observed (:func:`observed`)?"""
        return observed([self.hook_q, self.hook_k, self.hook_v, self.hook_attn_scores, self.hook_pattern, self.hook_z])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = _heads_last(self.hook_q(_heads_last(torch.einsum("btd,hde->bhte", x, self.W_Q))))
        k = _heads_last(self.hook_k(_heads_last(torch.einsum("btd,hde->bhte", x, self.W_K))))
        v = _heads_last(self.hook_v(_heads_last(torch.einsum("btd,hde->bhte", x, self.W_V))))
        explicit = not self.fused or self.hooked()
        z = self.explicit_attention(q, k, v) if explicit else self.fused_attention(q, k, v)
        z = _heads_last(self.hook_z(_heads_last(z)))  # [b, h, t, e]
        return torch.einsum("bhte,hed->btd", z, self.W_O)

    def fused_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(q k^T + causal mask) v by ``scaled_dot_product_attention`` (scale 1: the
        temperature is in W_Q), [b, h, t, e]; once for the whole batch when ``shared``."""
        if self.shared and q.shape[0] > 1:
            return self.shared_attention(q, k, v)
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)

    def shared_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The fused path when the pattern is the same for the whole batch (``shared``): one
        ``scaled_dot_product_attention`` over the first sequence's queries and keys, with the
        batch's values side by side as one wide value per head, [b, h, t, e]."""
        b, h, t, e = v.shape
        wide = v.permute(1, 2, 0, 3).reshape(1, h, t, b * e)
        pad = (0, b * e - q.shape[-1])  # queries and keys as wide as the values (zeros add nothing to a
        q1, k1 = nn.functional.pad(q[:1], pad), nn.functional.pad(k[:1], pad)  # score): torch's fast kernel
        z = nn.functional.scaled_dot_product_attention(q1, k1, wide, is_causal=True, scale=1.0)
        return z.reshape(h, t, b, e).permute(2, 0, 1, 3)

    def explicit_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The same with the [b, h, T, T] scores and pattern as tensors (through their hook points)."""
        scores = q @ k.transpose(-1, -2)
        scores = self.hook_attn_scores(scores.masked_fill(_above_diagonal(q.shape[2], q.device), float("-inf")))
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1))
        return pattern @ v


CHUNK_ELEMENTS = 1 << 24
"""Largest positions x hidden width an unhooked MLP evaluates at once (64 MB in float32):
long or large batches run through the MLP in chunks of positions (:meth:`MLP.forward_rows`)."""


class MLP(nn.Module):
    """ReLU MLP with any number of hidden layers (``hidden`` = their widths).

    Hooks: ``hook_pre[i]`` / ``hook_post[i]`` (names ``hook_pre.{i}``, ``hook_post.{i}``)
    before and after hidden layer i's ReLU.  Without a hook on them the MLP runs over
    chunks of positions (:meth:`forward_rows`), so its memory does not grow with the input.
    """

    def __init__(self, d_model: int, hidden: list[int], dtype: torch.dtype) -> None:
        super().__init__()
        sizes = [d_model, *hidden, d_model]
        self.n_hidden = len(hidden)
        for i in range(len(sizes) - 1):
            setattr(self, self.weight_name(i), nn.Parameter(torch.zeros(sizes[i], sizes[i + 1], dtype=dtype)))
            setattr(self, self.bias_name(i), nn.Parameter(torch.zeros(sizes[i + 1], dtype=dtype)))
        self.hook_pre = nn.ModuleList(HookPoint() for _ in hidden)
        self.hook_post = nn.ModuleList(HookPoint() for _ in hidden)

    def weight_name(self, i: int) -> str:
        return "W_in" if i == 0 else ("W_out" if i == self.n_hidden else f"W_hid{i}")

    def bias_name(self, i: int) -> str:
        return "b_in" if i == 0 else ("b_out" if i == self.n_hidden else f"b_hid{i}")

    def weight(self, i: int) -> nn.Parameter:
        """Layer ``i``'s weight [in, out] (``W_in``, ``W_hid{i}`` or ``W_out``, :meth:`weight_name`)."""
        return getattr(self, self.weight_name(i))

    def bias(self, i: int) -> nn.Parameter:
        """Layer ``i``'s bias [out] (``b_in``, ``b_hid{i}`` or ``b_out``, :meth:`bias_name`)."""
        return getattr(self, self.bias_name(i))

    def hooked(self) -> bool:
        """Is a hidden layer's hook point observed (:func:`observed`)?"""
        return observed([*self.hook_pre, *self.hook_post])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP at every position: :meth:`forward_rows` when no gradient is recorded and no
        hidden hook point is hooked, else whole [batch, pos, width] activations through the hook
        points (as hooks and autograd expect)."""
        if self.n_hidden and not (torch.is_grad_enabled() and self.W_in.requires_grad) and not self.hooked():
            return self.forward_rows(x)
        h = x
        for i in range(self.n_hidden):
            pre = self.hook_pre[i](h @ self.weight(i) + self.bias(i))
            h = self.hook_post[i](torch.relu(pre))
        return h @ self.weight(self.n_hidden) + self.bias(self.n_hidden)

    def forward_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The same, over at most :data:`CHUNK_ELEMENTS` // (widest hidden layer) positions at a
        time (the MLP acts on each position alone, so memory is bounded for any batch and
        length), each hidden layer written in place into one buffer reused across chunks.  The
        operations per position are those of the hooked path (matrix product, then bias, then
        ReLU), so the values are the same up to the blocking of the matrix products."""
        d = x.shape[-1]
        rows = x.reshape(-1, d)
        n = rows.shape[0]
        step = max(1, min(n, CHUNK_ELEMENTS // max(self.hidden_widths())))
        weights = [self.weight(i) for i in range(self.n_hidden + 1)]
        biases = [self.bias(i) for i in range(self.n_hidden + 1)]
        bufs = [rows.new_empty(step, w.shape[1]) for w in weights[:-1]]
        out = rows.new_empty(n, weights[-1].shape[1])
        for i in range(0, n, step):
            h = rows[i : i + step]
            m = h.shape[0]
            for W, b, buf in zip(weights, biases, bufs):
                h = torch.mm(h, W, out=buf[:m]).add_(b).relu_()
            torch.mm(h, weights[-1], out=out[i : i + m]).add_(biases[-1])
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def hidden_widths(self) -> list[int]:
        """The width of each hidden layer."""
        return [self.weight(i).shape[1] for i in range(self.n_hidden)]


class Block(nn.Module):
    """Residual attention then residual MLP.

    Hooks: ``hook_resid_pre``, ``hook_attn_out``, ``hook_resid_mid``, ``hook_mlp_out``
    (only when the block has an MLP) and ``hook_resid_post``, all [batch, pos, d_model].
    """

    def __init__(self, d_model: int, n_heads: int, d_head: int, mlp_hidden: list[int], dtype: torch.dtype) -> None:
        super().__init__()
        self.hook_resid_pre = HookPoint()  # registered in forward order (hook_points() lists them so)
        self.attn = Attention(d_model, n_heads, d_head, dtype)
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        self.mlp = MLP(d_model, mlp_hidden, dtype) if mlp_hidden else None
        self.hook_mlp_out = HookPoint() if self.mlp is not None else None
        self.hook_resid_post = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.hook_attn_out(self.attn(x)))
        if self.mlp is not None and self.hook_mlp_out is not None:  # both or neither
            x = x + self.hook_mlp_out(self.mlp(x))
        return self.hook_resid_post(x)


class Blocks(nn.ModuleList):
    """The model's blocks in order: an ``nn.ModuleList`` (so the state-dict names stay
    ``blocks.{l}.…``) that holds only :class:`Block` and says so to the type checker."""

    def __init__(self, blocks: Iterable[Block]) -> None:
        super().__init__(blocks)

    @overload
    def __getitem__(self, idx: slice) -> Blocks: ...

    @overload
    def __getitem__(self, idx: int) -> Block: ...

    def __getitem__(self, idx: int | slice) -> Block | Blocks:
        return cast("Block | Blocks", super().__getitem__(idx))  # __init__ takes only blocks

    def __iter__(self) -> Iterator[Block]:
        return cast(Iterator[Block], super().__iter__())
