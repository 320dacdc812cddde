"""Adversarial input families of a local model (constructions/local.py), from the plan alone.

Walks that keep away from anchors and events as long as the letters allow (the latest anchor is
then the start's or far back), walks whose only anchors or events fall on the first and the last
position, and walks that seek events (the count saturates early and stays saturated).  The
verifier adds them to its adversarial families and runs the layer-wise check
(``verify/layerwise.py``) on one of each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.automata.local import LocalPlan, Windows, window_key, windows

if TYPE_CHECKING:  # annotations only: this module does not import torch
    from .model import CompiledTransformer

FAMILY_SEED_OFFSET = 14
"""The local families draw from ``seed + FAMILY_SEED_OFFSET``."""


def _key_index(plan: LocalPlan) -> dict[tuple[int, ...], int]:
    return {key: i for i, key in enumerate(plan.local_keys)}


def _hits(plan: LocalPlan, start: int, win: Windows) -> np.ndarray:
    """Per window state: whether it is an anchor or has an event (s_0: no)."""
    index = _key_index(plan)
    rows = plan.starts[start].local
    hit = np.zeros(len(win.states), dtype=bool)
    for i, w in enumerate(win.states[1:], 1):
        flag, _, event = rows[index[window_key(w, plan.period)]]
        hit[i] = bool(flag or event)
    return hit


def _sustain(win: Windows, quiet: np.ndarray) -> np.ndarray:
    """Quiet window states from which some infinite walk stays quiet (greatest fixed point)."""
    keep = quiet.copy()
    while True:
        nxt = keep & keep[win.step].any(1)
        if (nxt == keep).all():
            return keep
        keep = nxt


def _quiet_cost(win: Windows, hit: np.ndarray) -> np.ndarray:
    """Fewest hits a walk from each window state meets before it can stay quiet forever
    (0 inside :func:`_sustain`; value iteration over the window graph)."""
    cost = np.where(_sustain(win, ~hit), 0.0, np.inf)
    for _ in range(len(win.states)):
        nxt = np.minimum(cost, hit + cost[win.step].min(1))
        if (nxt == cost).all():
            break
        cost = nxt
    return cost


def _walk(win: Windows, hit: np.ndarray, T: int, rng: np.random.Generator, want: str) -> np.ndarray:
    """One input of length T: ``quiet`` meets as few anchors and events as the letters allow
    (it steers into the window states that can stay quiet forever); ``ends`` makes positions 1
    and T hits and, where possible, nothing in between; ``event`` seeks hits at every step.
    Ties are broken uniformly; a random letter where nothing qualifies."""
    n_sym = win.step.shape[1]
    cost = _quiet_cost(win, hit)
    reach = [hit]  # reach[m]: window states from which a hit is exactly m steps away
    for _ in range(len(win.states)):
        reach.append(reach[-1][win.step].any(1))
    s, seq = 0, []
    for t in range(1, T + 1):
        nxt = win.step[s]
        left = T - t
        score = hit[nxt] + cost[nxt]  # future hits of each choice (inf: no quiet future)
        if want == "event":
            ok = hit[nxt]
        elif want == "ends" and t in (1, T) and hit[nxt].any():
            ok = hit[nxt] & (cost[nxt] == cost[nxt][hit[nxt]].min())
        elif want == "ends" and left < len(reach) and reach[left][nxt].any():
            ok = reach[left][nxt] & (score == score[reach[left][nxt]].min())
        else:
            ok = score == score.min()
        options = np.flatnonzero(ok)
        a = int(rng.choice(options)) if len(options) else int(rng.integers(n_sym))
        seq.append(a)
        s = int(nxt[a])
    return np.array(seq, dtype=np.int64)


def families(model: CompiledTransformer, plan: LocalPlan, T: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``local-quiet`` (no anchor, no event for as long as possible), ``local-ends`` (anchors or
    events at the first and last positions, none in between where possible) and
    ``local-events`` (hits as often as possible) walks of length T."""
    rng = np.random.default_rng(seed + FAMILY_SEED_OFFSET)
    win = windows(plan.k, plan.period, plan.n_symbols)
    hit = _hits(plan, model.automaton.start, win)
    return {
        "local-quiet": np.stack([_walk(win, hit, T, rng, "quiet") for _ in range(6)]),
        "local-ends": np.stack([_walk(win, hit, T, rng, "ends") for _ in range(6)]),
        "local-events": np.stack([_walk(win, hit, T, rng, "event") for _ in range(4)]),
    }
