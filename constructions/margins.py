"""Attention margins measured on a model's own cache: how far the intended key wins."""

from __future__ import annotations

import math
from typing import Any

import torch


def target_margins(scores: torch.Tensor, pattern: torch.Tensor, target: torch.Tensor) -> tuple[float, float]:
    """Worst score gap and worst leaked mass of one head over query rows ``1..``.

    ``scores``/``pattern``: [B, rows, keys] (masked keys at -inf); ``target``: [B or 1, rows]
    key index each query should select.  Gap = score(target) - max score of another key."""
    s = scores.double()
    tgt = target.expand(s.shape[0], -1)[..., None]
    want = s.gather(-1, tgt)[..., 0]
    other = s.scatter(-1, tgt, float("-inf")).max(-1).values
    gap = (want - other)[:, 1:] if s.shape[1] > 1 else want[:, :0]
    leaked = 1.0 - pattern.double().gather(-1, tgt)[..., 0]
    leaked = leaked[:, 1:] if s.shape[1] > 1 else leaked[:, :0]
    worst_gap = float(gap[torch.isfinite(gap)].min()) if torch.isfinite(gap).any() else math.inf
    return worst_gap, float(leaked.max()) if leaked.numel() else 0.0


def generic_head_margins(model, cache: dict[str, torch.Tensor], layers: list[int] | None = None) -> list[dict[str, Any]]:
    """Head margins without construction knowledge: the intended key is the argmax key;
    heads whose notes say they average uniformly report the spread of their scores."""
    out = []
    for l in layers if layers is not None else range(len(model.blocks)):
        notes = (model.metadata.layers or [{}] * (l + 1))[l].get("heads", [])
        scores = cache[f"blocks.{l}.attn.hook_attn_scores"]
        pattern = cache[f"blocks.{l}.attn.hook_pattern"]
        for h in range(scores.shape[1]):
            n = notes[h] if h < len(notes) else {}
            entry = {"layer": l + 1, "head": n.get("kind", f"head{h}"), "derived_score_gap": n.get("score_gap"),
                     "derived_leak_bound": n.get("leak_bound")}
            if n.get("kind") in ("prefix-sum", "prefix-mean", "uniform"):
                first, last = n.get("block_keys", (1, scores.shape[-1] - 1))  # a block head: its block's keys
                s = scores[:, h, 1:, first : last + 1].double()  # real keys only; BOS absorbs by design
                fin = torch.isfinite(s)
                hi = torch.where(fin, s, -math.inf).max(-1).values
                lo = torch.where(fin, s, math.inf).min(-1).values
                entry.update(target="uniform over positions 1..t", worst_score_spread=float((hi - lo).max()))
            else:
                tgt = pattern[:, h].argmax(-1)
                gap, leak = target_margins(scores[:, h], pattern[:, h], tgt)
                entry.update(target="argmax key", worst_score_gap=gap, worst_leaked_mass=leak)
            out.append(entry)
    return out
