"""Gridworld-specific checks: input families and layer-wise invariants.

Families (at max_len): walks pinned against a wall for long stretches, and walks that
never reach a wall after the start (the two regimes of the nearest-boundary formula:
a recent wall contact decides, or only the start and the prefix sums do).

Invariants, decoded from the named subspaces of ``constructions/gridworld.py`` and
compared with exact integer recomputation (each failure names its component):

* layer 1 attention (``gw.prefix``): ``gw{a}:z`` = z_t, the prefix sum of the moves;
* layer 1 MLP (``gw{a}.residue``): ``gw{a}:code`` = code(z_t mod M), and 0 at BOS;
* layer 2 heads (``gw{a}.find{d}``): ``gw{a}:rec:{d}`` = the last j >= 1 with
  z_j = z_t + d (mod M), else 0; and the attention mass left off that position;
* layer 2 MLP (``gw{a}.boundary``): ``gw{a}:state`` = the true coordinate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from compiler.automata.gridworld_detect import BoxWorld

from .budget import STEP_TOLERANCE
from .construction import InvariantReport
from .krohn_rhodes_checks import block_leaks
from .margins import target_margins
from .positions import PositionCode

FAMILY_SEED_OFFSET = 12
"""The gridworld families draw from ``seed + FAMILY_SEED_OFFSET``."""


def _axis_symbols(moves: Sequence[Any], n_axes: int) -> list[dict[int, int]]:
    """For each axis, {+1: a symbol moving up, -1: a symbol moving down} (when present)."""
    out: list[dict[int, int]] = [{} for _ in range(n_axes)]
    for s, mv in enumerate(moves):
        if mv is not None:
            out[mv[0]].setdefault(mv[1], s)
    return out


def families(model, world: BoxWorld, T: int, seed: int = 0) -> dict[str, np.ndarray]:
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


def _expected(model, world: BoxWorld, axes: list[dict[str, Any]], tokens: np.ndarray) -> list[dict[str, np.ndarray]]:
    """Exact z, codes, head targets and coordinates per axis ([B, T+1, ...], BOS at 0)."""
    a = model.automaton
    moves = np.zeros((len(world.sizes), a.n_symbols), dtype=np.int64)
    for s, mv in enumerate(world.moves):
        if mv is not None:
            moves[mv[0], s] = mv[1]
    B, T = tokens.shape
    states = np.array([a.run(row) for row in tokens.tolist()]).reshape(B, T)
    coords = np.asarray(world.coords)
    out = []
    for ax, info in enumerate(axes):
        M = info["modulus"]
        z = np.zeros((B, T + 1), dtype=np.int64)
        z[:, 1:] = np.cumsum(moves[ax][tokens], axis=1)
        code = PositionCode(model.metadata.positions, M, tuple(info["code_periods"]))
        codes = code.code(np.mod(z, M))
        codes[:, 0] = 0.0
        offs = info["offsets"]
        rec = np.zeros((B, T + 1, len(offs)), dtype=np.int64)
        last = np.zeros((B, M), dtype=np.int64)
        rows = np.arange(B)
        for t in range(1, T + 1):
            last[rows, np.mod(z[:, t], M)] = t
            for i, d in enumerate(offs):
                rec[:, t, i] = last[rows, np.mod(z[:, t] + d, M)]
        state = np.zeros((B, T + 1), dtype=np.int64)
        state[:, 1:] = coords[states][..., ax]
        out.append({"z": z, "code": codes, "rec": rec, "state": state})
    return out


@dataclass
class _Report:
    """What :func:`invariants` collects over its sequences: the worst deviation per quantity, the
    finder heads' margins, the MLPs' worst input noise and the failures (each once)."""

    worst: dict[str, float] = field(default_factory=lambda: {"z": 0.0, "code": 0.0, "rec_matched": 0.0,
                                                             "rec_unmatched": 0.0, "state": 0.0})
    heads: dict[str, dict[str, Any]] = field(default_factory=dict)
    mlp_noise: dict[tuple[int, str], Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def fail(self, msg: str) -> None:
        """Record a failure (once)."""
        if msg not in self.failures:
            self.failures.append(msg)


def invariants(model, world: BoxWorld, details: dict[str, Any], tokens: np.ndarray) -> InvariantReport:
    """Decode every gridworld subspace after each layer; compare with :func:`_expected`.
    ``details``: the gridworld section of the model's metadata (per-axis constants).
    Sequences are run one at a time (the cached patterns are [heads, T+1, T+1])."""
    g = details
    dims = model.subspace
    layer2 = model.metadata.layers[1]["heads"]
    rep = _Report()
    worst = rep.worst
    prefix_heads = _prefix_reports(model.metadata.layers[0]["heads"], tokens.shape[1])
    for row in tokens:
        one = row[None, :]
        with torch.no_grad():
            _, cache = model.run_with_cache(torch.from_numpy(one))
        mid0 = cache["blocks.0.hook_resid_mid"][0].double().numpy()
        post0 = cache["blocks.0.hook_resid_post"][0].double().numpy()
        mid1 = cache["blocks.1.hook_resid_mid"][0].double().numpy()
        post1 = cache["blocks.1.hook_resid_post"][0].double().numpy()
        pattern = cache["blocks.1.attn.hook_pattern"][0]  # [H, T+1, T+1]
        scores = cache["blocks.1.attn.hook_attn_scores"][0]
        _check_prefix_heads(rep, prefix_heads, model, cache)
        head0 = 0
        for ax, (want, info) in enumerate(zip(_expected(model, world, g["axes"], one), g["axes"])):
            zt = info["z_tolerance"]
            dz = float(np.abs(mid0[:, dims(f"gw{ax}:z")][:, 0] - want["z"][0]).max())
            worst["z"] = max(worst["z"], dz)
            rep.mlp_noise[(ax, "z")] = max(rep.mlp_noise.get((ax, "z"), 0.0), dz)
            if dz >= zt:
                rep.fail(f"layer 1 attention (gw.prefix): gw{ax}:z deviates from the prefix sum by {dz:.3g} "
                         f"(tolerance {zt:.3g})")
            dc = float(np.abs(post0[:, dims(f"gw{ax}:code")] - want["code"][0]).max())
            worst["code"] = max(worst["code"], dc)
            if dc >= 1e-5:
                rep.fail(f"layer 1 MLP (gw{ax}.residue): gw{ax}:code deviates from code(z mod {info['modulus']}) "
                         f"by {dc:.3g}")
            dev = np.abs(mid1[:, dims(f"gw{ax}:rec")] - want["rec"][0])  # [T+1, heads]
            _check_finders(rep, ax, info, want["rec"][0], dev, scores[head0:], pattern[head0:], layer2[head0:], dz)
            head0 += len(info["offsets"])
            ds = float(np.abs(post1[1:, dims(f"gw{ax}:state")][:, 0] - want["state"][0, 1:]).max())
            worst["state"] = max(worst["state"], ds)
            if ds >= STEP_TOLERANCE:
                rep.fail(f"layer 2 MLP (gw{ax}.boundary): gw{ax}:state deviates from the coordinate by {ds:.3g}")
    return InvariantReport("gridworld prefix sums, residue codes, nearest-value heads, coordinates", int(len(tokens)),
                           rep.failures, [*prefix_heads, *rep.heads.values()], _mlp_margins(g["axes"], rep.mlp_noise),
                           {"worst_deviation": worst})


def _prefix_reports(notes: list[dict[str, Any]], T: int) -> list[dict[str, Any]]:
    """One report per layer-1 head: the single prefix head over positions 1..t, or one per
    position block (notes ``block_keys``, krohn_rhodes_layout.block_heads)."""
    out = []
    for h, n in enumerate(notes):
        first, last = n.get("block_keys", [1, T])
        out.append({"layer": 1, "head": "gw.prefix" if len(notes) == 1 else f"gw.prefix.{h}",
                    "target": f"uniform over positions {first}..min({last}, t)", "keys": [first, last],
                    "worst_score_spread": 0.0})
    return out


def _check_prefix_heads(rep: _Report, reports: list[dict[str, Any]], model, cache) -> None:
    """Layer 1's prefix heads: the spread of each head's scores over its own keys (equal in exact
    arithmetic), and a block head's weight outside its block against its leak bound
    (krohn_rhodes_checks.block_leaks)."""
    scores = cache["blocks.0.attn.hook_attn_scores"][0].double()
    for h, r in enumerate(reports):
        first, last = r["keys"]
        s = scores[h, 1:, first : last + 1]
        fin = torch.isfinite(s)
        if fin.any():
            spread = (torch.where(fin, s, -np.inf).max(-1).values - torch.where(fin, s, np.inf).min(-1).values)
            r["worst_score_spread"] = max(r["worst_score_spread"], float(spread[fin.any(-1)].max()))
    for leak in block_leaks(model, cache, 0):
        if leak["worst_outside_weight"] > leak["allowed"]:
            rep.fail(f"layer 1 head gw.prefix.{leak['head']} (block keys {leak['block_keys']}): weight "
                     f"{leak['worst_outside_weight']:.3g} outside its block, above its bound {leak['allowed']:.3g}")


def _check_finders(rep: _Report, ax: int, info: dict[str, Any], rec: np.ndarray, dev: np.ndarray,
                   scores: torch.Tensor, pattern: torch.Tensor, notes: list[dict[str, Any]], dz: float) -> None:
    """Axis ``ax``'s layer-2 heads (one per offset; ``scores``, ``pattern`` and ``notes`` start at
    its first head): each fetches the last position whose value is z_t + offset (``rec``, 0 for
    BOS) within 1/8 where it matches and within the unmatched tolerance left by the prefix sum's
    deviation ``dz`` elsewhere (``dev``: the fetched values' deviations)."""
    matched = rec > 0
    unmatched_tol = (STEP_TOLERANCE - dz) / (2 * info["G"])
    for i, d in enumerate(info["offsets"]):
        name = f"gw{ax}.find{d:+d}"
        tgt = torch.from_numpy(rec[:, i])  # 0 means BOS
        gap, leaked = target_margins(scores[i][None], pattern[i][None], tgt[None])
        m = matched[1:, i]
        dmi = float(dev[1:, i][m].max()) if m.any() else 0.0
        dui = float(dev[1:, i][~m].max()) if (~m).any() else 0.0
        rep.worst["rec_matched"] = max(rep.worst["rec_matched"], dmi)
        rep.worst["rec_unmatched"] = max(rep.worst["rec_unmatched"], dui)
        h = rep.heads.setdefault(name, {"layer": 2, "head": name, "score_gap": notes[i]["score_gap"],
                                        "target": f"last j with z_j = z_t{d:+d} (mod {info['modulus']}), else BOS",
                                        "worst_score_gap": math.inf,
                                        "worst_leaked_mass": 0.0, "derived_leak_bound": notes[i]["leak_bound"],
                                        "worst_mlp_input_noise": 0.0,
                                        "mlp_input_tolerance": notes[i]["output_error_bound"]})
        h["worst_leaked_mass"] = max(h["worst_leaked_mass"], leaked)
        h["worst_score_gap"] = min(h["worst_score_gap"], gap)
        key = (ax, "rec")
        rep.mlp_noise[key] = (max(rep.mlp_noise.get(key, (0.0, 0.0, 0.0))[0], dmi),
                              max(rep.mlp_noise.get(key, (0.0, 0.0, 0.0))[1], dui),
                              min(rep.mlp_noise.get(key, (0.0, 0.0, math.inf))[2], unmatched_tol))
        h["worst_mlp_input_noise"] = max(h["worst_mlp_input_noise"], dmi, dui)
        if dmi >= 0.125 or dui >= unmatched_tol:
            rep.fail(f"layer 2 head {name}: gw{ax}:rec:{d:+d} is off the last position with value z_t{d:+d} "
                     f"(mod {info['modulus']})")


def _mlp_margins(axes: list[dict[str, Any]], mlp_noise: dict[tuple[int, str], Any]) -> list[dict[str, Any]]:
    """Per axis, the worst input noise of its residue MLP (layer 1) and of its boundary MLP (layer
    2: the matched finder heads within 1/8, the unmatched ones near 0), against their tolerances."""
    mlps = []
    for ax, info in enumerate(axes):
        dz = mlp_noise.get((ax, "z"), 0.0)
        mlps.append({"layer": 1, "mlp": f"gw{ax}.residue", "inputs": f"gw{ax}:z", "input_tolerance": info["z_tolerance"],
                     "worst_input_noise": dz, "distance_to_boundary": info["z_tolerance"] - dz})
        dm, du, ut = mlp_noise.get((ax, "rec"), (0.0, 0.0, math.inf))
        mlps.append({"layer": 2, "mlp": f"gw{ax}.boundary", "inputs": f"gw{ax}:rec (matched heads)",
                     "input_tolerance": 0.125, "worst_input_noise": dm, "distance_to_boundary": 0.125 - dm})
        mlps.append({"layer": 2, "mlp": f"gw{ax}.boundary", "inputs": f"gw{ax}:rec (unmatched heads, near 0)",
                     "input_tolerance": ut, "worst_input_noise": du, "distance_to_boundary": ut - du})
    return mlps
