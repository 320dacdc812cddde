"""Layer-wise checks of a piecewise model (constructions/piecewise.py).

Reference values come from the plan and the tokens, never from the network: chain c's greedy
progress P_c(t) (the longest prefix of its word that occurred by t);

* after layer i's attention, ``pw:count{c}.{i}`` holds #{s <= t : w_s = a_i and P_c(s) >= base_i}
  within STEP_TOLERANCE (base_i: the length of the runs before run i);
* after layer i's MLP, ``pw:prog{c}.{i}`` holds min(P_c(t), base_i + m_i) within STEP_TOLERANCE;
* after the last MLP, ``pw:state`` is the one-hot of the automaton's state (its argmax, and within
  STEP_TOLERANCE of it).
"""

from __future__ import annotations

import numpy as np
import torch

from compiler.automata.piecewise import PiecewisePlan

from .budget import STEP_TOLERANCE
from .construction import InvariantReport


def progress(plan: PiecewisePlan, tokens: np.ndarray) -> np.ndarray:
    """[chains, B, T+1] greedy progress of each chain (index 0: BOS, progress 0)."""
    B, T = tokens.shape
    words = [[a for a, m in ch for _ in range(m)] for ch in plan.chains]
    out = np.zeros((len(words), B, T + 1), dtype=np.int64)
    for c, w in enumerate(words):
        for b in range(B):
            j = 0
            for t in range(T):
                if j < len(w) and tokens[b, t] == w[j]:
                    j += 1
                out[c, b, t + 1] = j
    return out


def _states(model, tokens: np.ndarray) -> np.ndarray:
    a = model.automaton
    B, T = tokens.shape
    q = np.full(B, a.start)
    maps = np.array(a.maps)
    out = np.zeros((B, T), dtype=np.int64)
    for t in range(T):
        q = maps[tokens[:, t], q]
        out[:, t] = q
    return out


def invariants(model, plan: PiecewisePlan, tokens: np.ndarray) -> InvariantReport:
    """The counts, progress codes and state one-hots against the reference (module docstring)."""
    if len(tokens) == 0:
        return InvariantReport(None, 0, skipped="no sequences")
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(np.asarray(tokens)))
    prog = progress(plan, np.asarray(tokens))
    failures: list[str] = []
    worst = 0.0
    for i in range(1, plan.layers + 1):
        for c, ch in enumerate(plan.chains):
            if len(ch) < i:
                continue
            a, m = ch[i - 1]
            base = sum(x for _, x in ch[: i - 1])
            hit = np.concatenate([np.zeros((len(tokens), 1), bool), np.asarray(tokens) == a], axis=1)
            want = np.cumsum(hit & (prog[c] >= base), axis=1)
            got = model.read(cache, f"pw:count{c}.{i}", f"blocks.{i - 1}.hook_resid_mid").double().numpy()[..., 0]
            dev = float(np.abs(got - want).max())
            worst = max(worst, dev)
            if dev >= STEP_TOLERANCE:
                failures.append(f"layer {i} attention: pw:count{c}.{i} off by {dev:.3g}")
            got = model.read(cache, f"pw:prog{c}.{i}", i).double().numpy()[..., 0]
            dev = float(np.abs(got - np.minimum(prog[c], base + m)).max())
            worst = max(worst, dev)
            if dev >= STEP_TOLERANCE:
                failures.append(f"layer {i} MLP: pw:prog{c}.{i} off by {dev:.3g}")
    state = model.read(cache, "pw:state", plan.layers).double().numpy()[:, 1:]
    want = _states(model, np.asarray(tokens))
    onehot = np.eye(plan.n_states)[want]
    if np.any(state.argmax(-1) != want) or float(np.abs(state - onehot).max()) >= STEP_TOLERANCE:
        failures.append("last MLP: pw:state is not the state's one-hot")
    return InvariantReport("counts, progress codes and the state one-hot after every layer", len(tokens), failures,
                           measured={"worst_code_deviation": worst})
