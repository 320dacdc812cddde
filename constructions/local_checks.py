"""Layer-wise checks and adversarial families of a local model (constructions/local.py).

Reference values are computed from the plan's tables for the model's start state and the
tokens, never from the network:

* after layer 1's attention, ``loc:back{j}`` at t holds the letter code at t - j (0 before
  the start) within STEP_TOLERANCE (``loc:letter`` for j = 0); offset head j attends to
  t - j or BOS;
* after layer 1's MLP (two layers; in one layer: in the embedding), ``loc:flag``,
  ``loc:colour`` and ``loc:event`` hold the exact (anchor flag, colour, event) of t's
  window state (BOS: flag 1 and the start's colour, from the embedding);
* after the aggregating layer's attention (the last), ``loc:latest`` holds the colour of
  the latest anchor at a position <= t (the start's colour if none) and the latest-anchor
  head attends to that position (BOS if none); ``loc:count`` holds the number of events
  at positions <= t;
* after the last MLP, ``loc:state`` is the exact one-hot of the reference state.

A failure names the layer and the quantity, so a broken model points at its gadget.

Families (:func:`families`): walks that keep away from anchors and events as long as the
letters allow (the latest anchor is then the start's or far back), walks whose only
anchors or events fall on the first and the last position, and walks that seek events
(the count saturates early and stays saturated).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from compiler.automata.local import LocalPlan, Windows, window_key, windows

from .budget import STEP_TOLERANCE
from .construction import InvariantReport
from .lookback_checks import back_codes, reference_states
from .margins import target_margins

FAMILY_SEED_OFFSET = 14
"""The local families draw from ``seed + FAMILY_SEED_OFFSET``."""


def _key_index(plan: LocalPlan) -> dict[tuple[int, ...], int]:
    return {key: i for i, key in enumerate(plan.local_keys)}


def reference(plan: LocalPlan, start: int, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """[B, T+1] reference values per position (index 0 = BOS): ``flag``, ``colour``, ``event``
    (layer 1's lookup), ``latest`` (colour of the latest anchor), ``source`` (its position,
    0 = BOS) and ``count`` (events so far)."""
    B, T = tokens.shape
    codes = back_codes(tokens, plan.k)
    index = _key_index(plan)
    rows = plan.starts[start].local
    out = {name: np.zeros((B, T + 1), dtype=np.int64) for name in ("flag", "colour", "event", "latest", "source",
                                                                    "count")}
    out["latest"][:, 0] = plan.starts[start].init_class
    for b in range(B):
        latest, source, count = plan.starts[start].init_class, 0, 0
        for t in range(1, T + 1):
            key = tuple(codes[b, t]) + ((t % plan.period,) if plan.period > 1 else ())
            flag, colour, event = rows[index[key]]
            if flag:
                latest, source = colour, t
            count += event
            out["flag"][b, t], out["colour"][b, t], out["event"][b, t] = flag, colour, event
            out["latest"][b, t], out["source"][b, t], out["count"][b, t] = latest, source, count
    return out


def _deviation(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max()) if got.size else 0.0


def _check_window(model, plan: LocalPlan, cache: dict[str, torch.Tensor], want_back: np.ndarray,
                  failures: list[str], heads: list[dict[str, Any]]) -> float:
    """The window codes after block 1's attention: the letter at t - j (j < k) from the embedding
    (j = 0) or offset head j, within the step tolerance; the offset heads' margins appended to
    ``heads``.  Returns the codes' worst deviation (the input noise of the lookups reading them)."""
    mid0 = cache["blocks.0.hook_resid_mid"].double().numpy()
    t = torch.arange(want_back.shape[1])
    noise = 0.0
    for j in range(plan.k):
        name = f"loc:back{j}" if j else "loc:letter"
        dev = _deviation(mid0[..., model.subspace(name)[0]], want_back[..., j])
        noise = max(noise, dev)
        if dev >= STEP_TOLERANCE:
            failures.append(f"layer 1, {f'head loc.back{j}' if j else 'embedding'}: the letter code of t - {j} "
                            f"deviates by {dev:.3g}")
        if j == 0:
            continue
        gap, leak = target_margins(cache["blocks.0.attn.hook_attn_scores"][:, j - 1],
                                   cache["blocks.0.attn.hook_pattern"][:, j - 1], torch.clamp(t - j, min=0)[None, :])
        notes = model.metadata.layers[0]["heads"][j - 1]
        heads.append({"layer": 1, "head": f"offset {j}", "target": f"t - {j} or BOS", "worst_score_gap": gap,
                      "worst_leaked_mass": leak, "derived_leak_bound": notes.get("leak_bound"),
                      "score_gap": notes.get("score_gap"), "worst_copy_deviation": dev})
    return noise


def invariants(model, plan: LocalPlan, tokens: np.ndarray) -> InvariantReport:
    """Decode every subspace after every block on ``tokens`` and compare it with
    :func:`reference`; measure the offset and latest-anchor heads' margins and every lookup's
    input noise against the step units' tolerance."""
    a = model.automaton
    want_back = back_codes(tokens, plan.k)
    ref = reference(plan, a.start, tokens)
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    last = len(model.blocks) - 1
    agg = last  # the block whose heads aggregate (the first when the aggregates read only the token)
    failures: list[str] = []
    heads: list[dict[str, Any]] = []
    mlps: list[dict[str, Any]] = []
    noise = _check_window(model, plan, cache, want_back, failures, heads)
    if plan.n_classes or plan.bound:
        where = "layer 1, local lookup" if last == 1 else "embedding"
        feats = (cache["blocks.0.hook_resid_post"] if last == 1 else cache["blocks.0.hook_resid_pre"]).double().numpy()
        if last == 1:
            mlps.append({"layer": 1, "mlp": "local lookup", "input_tolerance": STEP_TOLERANCE,
                         "worst_input_noise": noise, "distance_to_boundary": STEP_TOLERANCE - noise})
        for name in (["flag", "colour"] if plan.n_classes else []) + (["event"] if plan.bound else []):
            want = ref[name].astype(np.float64)
            if name in ("flag", "colour"):
                want[:, 0] = (1 if name == "flag" else plan.starts[a.start].init_class)  # BOS: from the embedding
            dev = _deviation(feats[..., model.subspace(f"loc:{name}")[0]], want)
            if dev >= STEP_TOLERANCE:
                failures.append(f"{where}: loc:{name} deviates by {dev:.3g}")
        mid = cache[f"blocks.{agg}.hook_resid_mid"].double().numpy()
        h = plan.k - 1 if last == 0 else 0
        if plan.n_classes:
            dev = _deviation(mid[..., model.subspace("loc:latest")[0]][:, 1:], ref["latest"][:, 1:])
            noise = max(noise, dev)
            if dev >= STEP_TOLERANCE:
                failures.append(f"layer {agg + 1}, head loc.latest: the latest anchor's colour deviates by {dev:.3g}")
            gap, leak = target_margins(cache[f"blocks.{agg}.attn.hook_attn_scores"][:, h],
                                       cache[f"blocks.{agg}.attn.hook_pattern"][:, h], torch.from_numpy(ref["source"]))
            notes = model.metadata.layers[agg]["heads"][h]
            heads.append({"layer": agg + 1, "head": "latest anchor", "target": "latest anchor at or before t, or BOS",
                          "worst_score_gap": gap, "worst_leaked_mass": leak,
                          "derived_leak_bound": notes.get("leak_bound"), "score_gap": notes.get("score_gap"),
                          "worst_copy_deviation": dev})
            h += 1
        if plan.bound:
            dev = _deviation(mid[..., model.subspace("loc:count")[0]][:, 1:], ref["count"][:, 1:])
            noise = max(noise, dev)
            if dev >= STEP_TOLERANCE:
                failures.append(f"layer {agg + 1}, head loc.count: the event count deviates by {dev:.3g}")
            heads.append({"layer": agg + 1, "head": "event count", "target": "uniform over positions 1..t",
                          "worst_count_deviation": dev})
    post = cache[f"blocks.{last}.hook_resid_post"].double().numpy()[..., model.subspace("loc:state")]
    want_state = np.eye(plan.n_states)[reference_states(a, tokens)]
    dev_state = _deviation(post[:, 1:], want_state[:, 1:])
    if dev_state >= STEP_TOLERANCE:
        bad = np.argwhere(np.abs(post[:, 1:] - want_state[:, 1:]).max(-1) >= STEP_TOLERANCE)[0]
        failures.append(f"layer {last + 1}, final lookup: loc:state deviates by {dev_state:.3g} from the state's "
                        f"one-hot (first at sequence {bad[0]}, position {bad[1] + 1})")
    mlps.append({"layer": last + 1, "mlp": "final lookup", "input_tolerance": STEP_TOLERANCE,
                 "worst_input_noise": noise, "distance_to_boundary": STEP_TOLERANCE - noise})
    what = ["window codes"] + (["local features"] if plan.n_classes or plan.bound else []) \
        + (["latest anchor"] if plan.n_classes else []) + (["event count"] if plan.bound else []) + ["state one-hot"]
    return InvariantReport(", ".join(what) + " per layer", int(tokens.shape[0]), failures, heads, mlps,
                           {"worst_state_deviation": dev_state})


# ---------------------------------------------------------------------------------------
# adversarial families


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


def families(model, plan: LocalPlan, T: int, seed: int = 0) -> dict[str, np.ndarray]:
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
