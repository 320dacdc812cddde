"""Layer-wise checks of a lookback model (definite automata, constructions/lookback.py).

After layer 1's attention, ``lb:back{j}`` at position t must hold the integer code of the
letter at t - j (a + 1), or 0 when t - j <= m (BOS stands in before the start and, for a
generalised plan, for the first m positions the front heads read), within the step
units' tolerance; head j must attend to t - j, or to BOS.  ``lb:front{i}`` (i = 1..m) must
hold the code of the letter at position i, or 0 when t < i; front head i must attend to
position i, or to BOS.  After the lookup
MLP, ``lb:state`` must be the exact one-hot of the reference state (the automaton run
from its start).  A failure names the offset head or the state, so a broken model
points at the gadget that broke.
"""

from __future__ import annotations


import numpy as np
import torch

from compiler.automata.definite import LookbackPlan

from .budget import STEP_TOLERANCE
from .construction import InvariantReport
from .margins import target_margins


def back_codes(tokens: np.ndarray, k: int, skip: int = 0) -> np.ndarray:
    """[B, T+1, k]: the letter code (a + 1) at t - j, 0 when t - j <= ``skip`` (index 0 = BOS)."""
    B, T = tokens.shape
    codes = np.zeros((B, T + 1), dtype=np.int64)
    codes[:, 1 + skip :] = tokens[:, skip:] + 1
    out = np.zeros((B, T + 1, k), dtype=np.int64)
    for j in range(k):
        out[:, j:, j] = codes[:, : T + 1 - j]  # codes[:, 0] = 0 (BOS); positions t < j stay 0
    return out


def front_codes(tokens: np.ndarray, m: int) -> np.ndarray:
    """[B, T+1, m]: the letter code (a + 1) at position i = 1..m, 0 when t < i."""
    B, T = tokens.shape
    out = np.zeros((B, T + 1, m), dtype=np.int64)
    for i in range(1, min(m, T) + 1):
        out[:, i:, i - 1] = tokens[:, i - 1 : i] + 1
    return out


def reference_states(automaton, tokens: np.ndarray) -> np.ndarray:
    """[B, T+1]: the state after each prefix (index 0: the start)."""
    return np.array([[automaton.start, *automaton.run(row)] for row in tokens.tolist()], dtype=np.int64)


def invariants(model, plan: LookbackPlan, tokens: np.ndarray) -> InvariantReport:
    """Decode the copied letters after the heads and the state one-hot after the MLP, on every
    sequence of ``tokens``; measure each head (score gap and leaked mass at its target:
    position i for front head i, t - j for back head j) and the lookup's input noise
    against the step units' tolerance."""
    m, k = plan.m, plan.k
    want = np.concatenate([front_codes(tokens, m), back_codes(tokens, k, skip=m)], axis=-1)
    subs = [f"lb:front{i}" for i in range(1, m + 1)] + [f"lb:back{j}" for j in range(k)]
    want_state = np.eye(plan.n_states)[reference_states(model.automaton, tokens)]
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    mid = cache["blocks.0.hook_resid_mid"].double().numpy()
    post = cache["blocks.0.hook_resid_post"].double().numpy()
    failures, heads = [], []
    worst_back = 0.0
    T = tokens.shape[1]
    t = torch.arange(T + 1)
    for h, name in enumerate(subs):
        got = mid[..., model.subspace(name)[0]]
        dev = float(np.abs(got - want[..., h]).max())
        worst_back = max(worst_back, dev)
        if h < m:
            i = h + 1
            where, label = f"position {i}", f"position {i} or BOS"
            target = torch.where(t >= i, torch.full_like(t, i), torch.zeros_like(t))[None, :]
        else:
            j = h - m
            where, label = f"t - {j}", f"t - {j} or BOS" if not m else f"t - {j} when past {m}, or BOS"
            target = torch.where(t - j > m, t - j, torch.zeros_like(t))[None, :]
        if dev >= STEP_TOLERANCE:
            failures.append(f"layer 1, head {name.replace(':', '.')}: the letter copied from {where} deviates by "
                            f"{dev:.3g}")
        notes = model.metadata.layers[0]["heads"][h]
        gap, leak = target_margins(cache["blocks.0.attn.hook_attn_scores"][:, h],
                                   cache["blocks.0.attn.hook_pattern"][:, h], target)
        heads.append({"layer": 1, "head": f"absolute {h + 1}" if h < m else f"offset {h - m}", "target": label,
                      "worst_score_gap": gap, "worst_leaked_mass": leak, "derived_leak_bound": notes.get("leak_bound"),
                      "score_gap": notes.get("score_gap"), "worst_copy_deviation": dev})
    state = post[..., model.subspace("lb:state")]
    dev_state = float(np.abs(state - want_state).max())
    if dev_state >= STEP_TOLERANCE:
        bad = np.argwhere(np.abs(state - want_state).max(-1) >= STEP_TOLERANCE)[0]
        failures.append(f"layer 1, lookup: lb:state deviates by {dev_state:.3g} from the state's one-hot "
                        f"(first at sequence {bad[0]}, position {bad[1]})")
    noise = float(np.abs(mid[..., [model.subspace(name)[0] for name in subs]] - want).max())
    mlps = [{"layer": 1, "mlp": "lookup", "inputs": ", ".join(subs),
             "input_tolerance": STEP_TOLERANCE, "worst_input_noise": noise,
             "distance_to_boundary": STEP_TOLERANCE - noise}]
    return InvariantReport("copied letters and the state one-hot after layer 1", int(tokens.shape[0]), failures, heads,
                           mlps, {"worst_copy_deviation": worst_back, "worst_state_deviation": dev_state})
