"""Layer-wise checks of a scan model (Theorem 10): the invariant its docstring states.

After layer l, position t holds in ``scan:map`` the map of its last 2^l letters (exact
integer codes, compared with :func:`compiler.automata.simulate.window_maps`) and the
scratch ``scan:prev`` is cleared; head l attends to t - 2^(l-1) (or BOS).  After the last
layer L the whole map is in ``scan:prev`` and ``scan:map`` still holds the 2^(L-1)-letter
window (the last MLP composes into the fetched map, constructions/scan.py), except in
checkpoints from before that change (no ``into`` in the last MLP's notes).  That map is
exact but for the scratch's sub-rounding residue where its code is 0 (the float claim of
:func:`constructions.gadgets.compose_mlp`): ``worst_result_deviation``, below the
composition's ``exact_input_noise``; ``worst_map_deviation`` (the windows in ``scan:map``)
is 0 when every layer was bit-exact.

Margins: per head the score gap and leaked mass against the derived bound; per
composition MLP the noise of its inputs -- the fetched codes against both its
exact-arithmetic ``input_tolerance`` (1/4) and its float ``exact_input_noise`` (below which
it computes bit-exactly, constructions/gadgets.compose_mlp), and the maps' own distance
from integers (0 when every layer was bit-exact).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from compiler.automata.representation import Representation
from compiler.automata.simulate import window_maps

from .budget import STEP_TOLERANCE
from .construction import InvariantReport
from .margins import target_margins


def result_of(meta: dict[str, Any]) -> str:
    """The subspace a scan model's readout reads: where its last composition MLP writes the map
    (its notes' ``into``), or ``scan:map`` for a checkpoint written before the last layer
    composed into the fetched map."""
    return meta["layers"][-1]["mlp"].get("into", "scan:map")


def invariants(model, plan: Representation, tokens: np.ndarray) -> InvariantReport:
    """Decode ``scan:map`` / ``scan:prev`` after every layer and compare with the exact windows;
    measure each lookback head (score gap and leaked mass at t - 2^(l-1)) and each composition
    MLP (noise of its integer inputs against its tolerances, see the module docstring)."""
    F, G = model.subspace("scan:map"), model.subspace("scan:prev")
    letter_maps = np.asarray(plan.letter_maps)
    L = len(model.blocks)
    into_fetched = result_of(model.meta) == "scan:prev"
    want = window_maps(letter_maps, tokens, L)
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    worst_map, worst_scratch, worst_result, failures = 0.0, 0.0, None, []
    heads, mlps = [], []
    T = tokens.shape[1]
    t = torch.arange(T + 1)
    for l in range(L):
        post = cache[f"blocks.{l}.hook_resid_post"].double().numpy()
        if into_fetched and l == L - 1:  # the whole map in scan:prev, scan:map one window back
            checks = [("scan:prev", G, l + 1), ("scan:map", F, l)]
        else:
            checks = [("scan:map", F, l + 1)]
            worst_scratch = max(worst_scratch, float(np.abs(post[..., G]).max()))
        for name, dims, k in checks:
            dev = np.abs(post[..., dims] - want[k]).max()
            if name == "scan:map":
                worst_map = max(worst_map, float(dev))
            else:  # exact but for the scratch's sub-rounding residue on codes 0 (compose_mlp)
                worst_result = float(dev)
            if dev >= STEP_TOLERANCE:
                failures.append(f"layer {l + 1}: {name} deviates by {dev:.3g} from the 2^{k}-window map")
        # attention: weight on the intended position (t - 2^l, or BOS)
        notes = model.metadata.layers[l]["heads"][0]
        target = torch.clamp(t - 2**l, min=0)[None, :]
        gap, leak = target_margins(cache[f"blocks.{l}.attn.hook_attn_scores"][:, 0], cache[f"blocks.{l}.attn.hook_pattern"][:, 0],
                                   target)
        heads.append({"layer": l + 1, "head": notes.get("kind", "offset"), "target": f"t - {2**l} or BOS",
                      "worst_score_gap": gap, "worst_leaked_mass": leak,
                      "derived_leak_bound": notes.get("leak_bound"), "score_gap": notes.get("score_gap")})
        mid = cache[f"blocks.{l}.hook_resid_mid"].double().numpy()
        noise_prev = float(np.abs(mid[..., G] - np.rint(mid[..., G])).max())
        noise_map = float(np.abs(mid[..., F] - np.rint(mid[..., F])).max())
        noise = max(noise_prev, noise_map)
        mlp_notes = model.metadata.layers[l]["mlp"]
        tol, exact_noise = mlp_notes.get("input_tolerance"), mlp_notes.get("exact_input_noise")
        heads[-1]["worst_mlp_input_noise"] = noise_prev
        heads[-1]["mlp_input_tolerance"] = tol
        mlps.append({"layer": l + 1, "mlp": mlp_notes.get("kind", "compose"),
                     "inputs": "scan:map, scan:prev", "input_tolerance": tol, "worst_input_noise": noise,
                     "distance_to_boundary": None if tol is None else tol - noise,
                     "worst_fetched_noise": noise_prev, "worst_map_noise": noise_map,
                     "exact_input_noise": exact_noise,
                     "bit_exact": None if exact_noise is None else bool(noise_map == 0 and noise_prev < exact_noise)})
    if worst_scratch >= STEP_TOLERANCE:
        failures.append(f"scan:prev not cleared (max |value| {worst_scratch:.3g})")
    return InvariantReport("scan windows per layer", int(tokens.shape[0]), failures, heads, mlps,
                           {"worst_map_deviation": worst_map, "worst_scratch_residue": worst_scratch,
                            "worst_result_deviation": worst_result})


def head_target(layer: int, rows: torch.Tensor) -> tuple[torch.Tensor, str]:
    """The key head ``layer`` (0-based) reads for query rows ``rows``: t - 2^layer, or BOS."""
    return torch.clamp(rows - 2**layer, min=0), f"t - {2**layer} or BOS"
