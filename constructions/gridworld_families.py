"""Adversarial input families of a gridworld model (constructions/gridworld.py), at max_len.

Walks pinned against a wall for long stretches, and walks that never reach a wall after the
start: the two regimes of the nearest-boundary formula (a recent wall contact decides, or only
the start and the prefix sums do).  The verifier adds them to its adversarial families and runs
the layer-wise check (``verify/layerwise.py``) on one of each.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from compiler.automata.gridworld_detect import BoxWorld

if TYPE_CHECKING:  # annotations only: this module does not import torch
    from .model import CompiledTransformer

FAMILY_SEED_OFFSET = 12
"""The gridworld families draw from ``seed + FAMILY_SEED_OFFSET``."""


def _axis_symbols(moves: Sequence[Any], n_axes: int) -> list[dict[int, int]]:
    """For each axis, {+1: a symbol moving up, -1: a symbol moving down} (when present)."""
    out: list[dict[int, int]] = [{} for _ in range(n_axes)]
    for s, mv in enumerate(moves):
        if mv is not None:
            out[mv[0]].setdefault(mv[1], s)
    return out


def families(model: CompiledTransformer, world: BoxWorld, T: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``wall-pinned`` and ``wall-free`` walks of length T for a gridworld model."""
    a = model.automaton
    sizes, coords, moves = world.sizes, world.coords, world.moves
    rng = np.random.default_rng(seed + FAMILY_SEED_OFFSET)
    syms = _axis_symbols(moves, len(sizes))
    pinned: list[np.ndarray] = []
    for ax in syms:
        for step, s in ax.items():
            other = ax.get(-step)
            seq = rng.integers(0, a.n_symbols, T)
            seq[T // 2:] = s  # random half, then pinned for T/2 steps
            pinned.append(seq.copy())
            seq = rng.integers(0, a.n_symbols, T)
            seq[: T // 2] = s  # pinned first, then random
            pinned.append(seq.copy())
            if other is not None:  # long pins against alternating walls
                block = max(1, T // 4)
                pinned.append(np.array([s if (i // block) % 2 == 0 else other for i in range(T)]))
    # wall-free: choose uniformly among symbols keeping every axis with an interior strictly inside
    free: list[np.ndarray] = []
    for _ in range(6):
        q = a.start
        walk: list[int] = []
        for _t in range(T):
            ok = []
            for s in range(a.n_symbols):
                c = coords[a.maps[s][q]]
                if all(L < 3 or 0 < x < L - 1 for x, L in zip(c, sizes)):
                    ok.append(s)
            s = int(rng.choice(ok)) if ok else int(rng.integers(0, a.n_symbols))
            walk.append(s)
            q = a.maps[s][q]
        free.append(np.array(walk))
    return {"wall-pinned": np.array(pinned, dtype=np.int64).reshape(-1, T),
            "wall-free": np.array(free, dtype=np.int64).reshape(-1, T)}
