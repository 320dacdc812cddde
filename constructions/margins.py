"""Attention margins measured on a model's own cache: how far the intended key wins."""

from __future__ import annotations

import math

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
