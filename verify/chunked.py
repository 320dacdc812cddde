"""The compiled model's forward pass with query-chunked attention, for long inputs.

``CompiledTransformer.forward`` materialises [B, H, T+1, T+1] attention scores: 17 GB
per head at T = 2^16 in float32.  :func:`forward_chunked` computes the same thing a
block of query rows at a time (keys up to the block's last row), so memory is
[B, H, chunk, T+1].  Each row sees the same operations as in the plain forward
(q.k scores, causal mask, softmax over the row, weighted sum of values); only the
blocking of the matrix products differs, which can change the last bit of a score.

When every head of a layer reads only dimensions that are the same for every input
(``pos:*``, ``one``, ``bos``: no symbol writes them differently and no block writes
them at all), the attention pattern does not depend on the input: it is computed once
for the whole batch (``shared_pattern``).  This holds for the scan construction, whose
heads select purely by position.

The residual-stream hook points (``hook_embed``, ``hook_pos_embed``, each block's
``hook_resid_pre``, ``hook_attn_out``, ``hook_resid_mid``, the MLP's hooks,
``hook_mlp_out``, ``hook_resid_post``, and ``hook_resid_final``) fire as in the plain
forward; the attention-internal ones (``attn.hook_q`` ... ``attn.hook_z``) do not --
use ``observe`` for scores and patterns.
"""

from __future__ import annotations

from typing import Callable

import torch

from constructions.model import CompiledTransformer, input_independent_dims, positional_layers

__all__ = ["Observer", "forward_chunked", "input_independent_dims", "positional_layers"]

Observer = Callable[[int, int, int, int, torch.Tensor, torch.Tensor], None]
"""observe(layer, head, row_start, row_stop, scores [B', rows, keys], pattern) for each block of rows
(B' = 1 when the layer's pattern is shared by the batch); called last, so it may overwrite both."""


def _live(W_a: torch.Tensor, W_b: torch.Tensor) -> list[torch.Tensor]:
    """Per head, the head dims e that both [H, d_model, d_head] weights use (others add exact zeros)."""
    used_a = W_a.detach().abs().sum(1) > 0  # [H, d_head]
    used_b = W_b.detach().abs().sum(1) > 0
    return [torch.nonzero(used_a[h] & used_b[h]).flatten() for h in range(W_a.shape[0])]


@torch.no_grad()
def forward_chunked(model: CompiledTransformer, tokens: torch.Tensor, chunk: int = 1024, shared_pattern: bool = True,
                    observe: Observer | None = None) -> torch.Tensor:
    """Logits [B, T, n_out], as ``model(tokens)``, with attention computed ``chunk`` query rows at a time.

    Head dimensions that a head's weights never use are dropped (they add exact zeros)."""
    x = model.residual(tokens)
    B, T1, _ = x.shape
    positional = positional_layers(model) if shared_pattern else [False] * len(model.blocks)
    rows = torch.arange(T1, device=x.device)
    for l, block in enumerate(model.blocks):
        x = block.hook_resid_pre(x)
        a = block.attn
        qk_live = _live(a.W_Q, a.W_K)
        vo_live = _live(a.W_V, a.W_O.transpose(1, 2))
        xs = x[:1] if positional[l] else x
        out = torch.zeros_like(x)
        for h in range(a.W_Q.shape[0]):
            if len(vo_live[h]) == 0:
                continue
            q = xs @ a.W_Q[h][:, qk_live[h]]  # [B', T1, e]
            k = xs @ a.W_K[h][:, qk_live[h]]
            v = x @ a.W_V[h][:, vo_live[h]]  # [B, T1, e']
            z = torch.empty_like(v)
            ev = v.shape[-1]
            for i in range(0, T1, chunk):
                j = min(i + chunk, T1)
                scores = q[:, i:j] @ k[:, :j].transpose(-1, -2)  # [B', rows, keys]
                diag = scores[:, :, i:j]
                diag.masked_fill_(rows[i:j][None, :] > rows[i:j][:, None], float("-inf"))
                pattern = torch.softmax(scores, dim=-1)
                if positional[l]:  # one pattern for the whole batch: one matrix product
                    vb = v[:, :j].permute(1, 0, 2).reshape(j, B * ev)
                    z[:, i:j] = (pattern[0] @ vb).reshape(j - i, B, ev).permute(1, 0, 2)
                else:
                    z[:, i:j] = pattern @ v[:, :j]
                if observe is not None:
                    observe(l, h, i, j, scores, pattern)
            out += z @ a.W_O[h][vo_live[h]]
        x = block.hook_resid_mid(x + block.hook_attn_out(out))
        if block.mlp is not None and block.hook_mlp_out is not None:  # both or neither
            x = x + block.hook_mlp_out(block.mlp(x))
        x = block.hook_resid_post(x)
    x = model.hook_resid_final(x)
    return (x @ model.W_U + model.b_U)[:, 1:]
