"""Layer-wise checks of a factors model (constructions/factors.py).

After the last layer ``fac:state`` must be the exact one-hot of the reference state (the
automaton run from its start) at every position after BOS, within the step units' tolerance;
and each group's count after the count head must be within that tolerance of the number of positions so far whose last k
class codes are one of its factors.  A failure names the subspace and the first place it broke.
"""

from __future__ import annotations

import numpy as np
import torch

from compiler.automata.factors import FactorPlan

from .budget import STEP_TOLERANCE
from .construction import InvariantReport
from .lookback_checks import reference_states


def group_counts(plan: FactorPlan, tokens: np.ndarray) -> np.ndarray:
    """[B, T+1, G]: each group's factor count up to t (index 0 = BOS, 0); with a tier, of the factors
    of the projection onto it (a factor ends at a tier letter only)."""
    B, T = tokens.shape
    classes = np.asarray(plan.classes)[tokens]
    on = np.isin(tokens, plan.tier) if plan.tier else np.ones(tokens.shape, dtype=bool)
    group = dict(zip(plan.factors, plan.groups))
    out = np.zeros((B, T + 1, plan.n_groups))
    for b in range(B):
        padded = [0] * (plan.k - 1)
        for t in range(1, T + 1):
            out[b, t] = out[b, t - 1]
            if not on[b, t - 1]:
                continue
            padded.append(int(classes[b, t - 1]))
            window = tuple(padded[-plan.k:])
            for j in range(1, plan.k + 1):  # every factor the window ends with
                if window[-j:] in group:
                    out[b, t, group[window[-j:]]] += 1
    return out


def invariants(model, plan: FactorPlan, tokens: np.ndarray) -> InvariantReport:
    """The counts after the count head and the state one-hot after the last layer, on ``tokens``."""
    want_state = np.eye(plan.n_states)[reference_states(model.automaton, tokens)]
    want_counts = group_counts(plan, tokens)
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    last = len(model.blocks) - 1
    mid = cache[f"blocks.{last}.hook_resid_mid"].double().numpy()
    post = cache[f"blocks.{last}.hook_resid_post"].double().numpy()
    failures = []
    counts = np.stack([mid[..., model.subspace(f"fac:count{g}")[0]] for g in range(plan.n_groups)], -1)
    dev_count = float(np.abs(counts - want_counts).max()) if counts.size else 0.0
    if dev_count >= STEP_TOLERANCE:
        failures.append(f"layer {last + 1}, head fac.count: a group's count deviates by {dev_count:.3g}")
    state = post[:, 1:][..., model.subspace("fac:state")]  # positions 1..T (BOS reads out nothing)
    want_state = want_state[:, 1:]
    dev_state = float(np.abs(state - want_state).max())
    if dev_state >= STEP_TOLERANCE:
        bad = np.argwhere(np.abs(state - want_state).max(-1) >= STEP_TOLERANCE)[0]
        failures.append(f"layer {last + 1}, final lookup: fac:state deviates by {dev_state:.3g} from the state's "
                        f"one-hot (first at sequence {bad[0]}, position {bad[1] + 1})")
    return InvariantReport("the factor counts and the state one-hot", int(tokens.shape[0]), failures, None, None,
                           {"worst_count_deviation": dev_count, "worst_state_deviation": dev_state})
