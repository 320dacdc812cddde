"""Layer-wise checks for Krohn-Rhodes models (Theorem 11): every component's subspace against the cascade.

After the block that runs component c, ``kr:c.new`` at position t must hold c's value
in the cascade's own step-by-step simulation, and ``kr:c.old`` (where the model has
it) the value before step t; a view the model evaluates in the network
(``kr:v.old`` / ``kr:v.new``) must hold the view of those values.  A failure names
the component or view and the block, so a broken model points at the gadget that broke.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from compiler.automata.cascade import Cascade

from .budget import STEP_TOLERANCE
from .margins import generic_head_margins


def cascade_coordinates(cascade, tokens: np.ndarray) -> np.ndarray:
    """[B, T+1, n_components]: the cascade's values after each letter (index 0 = start)."""
    B, T = tokens.shape
    out = np.empty((B, T + 1, len(cascade.components)), dtype=np.int64)
    for b in range(B):
        coords = cascade.start
        out[b, 0] = coords
        for t in range(T):
            coords = cascade.step(coords, int(tokens[b, t]))
            out[b, t + 1] = coords
    return out


def cascade_signals(cascade, coords: np.ndarray) -> np.ndarray:
    """[..., n_components + n_views]: component values followed by view values, per configuration."""
    flat = coords.reshape(-1, coords.shape[-1])
    memo: dict[tuple[int, ...], list[int]] = {}
    out = np.array([memo.setdefault(k, cascade.signals(k)) for k in map(tuple, flat.tolist())], dtype=np.int64)
    return out.reshape(*coords.shape[:-1], -1)


def invariants(model, cascade: Cascade, tokens: np.ndarray) -> dict[str, Any]:
    """Compare each component's decoded subspaces with the cascade's simulation (all of
    ``tokens``), and measure head and MLP margins on the first two sequences."""
    want = cascade_coordinates(cascade, tokens)
    labels = {lab: i for i, lab in enumerate(model.meta["residual_labels"])}
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    index = {c.name: i for i, c in enumerate(cascade.components)}
    rows, failures = [], []
    last = f"blocks.{len(model.blocks) - 1}.hook_resid_post"
    for comp in model.meta["krohn_rhodes"]["components"]:
        name, block = comp["name"], comp["block"]
        col = want[..., index[name]]
        resid = cache[f"blocks.{block - 1}.hook_resid_post"].double().numpy()
        dev_new = float(np.abs(resid[..., labels[f"kr:{name}.new"]] - col).max())
        row = {"component": name, "kind": comp["kind"], "block": block, "worst_new_deviation": dev_new}
        if f"kr:{name}.old" in labels:
            final = cache[last].double().numpy()
            old = np.concatenate([col[:, :1], col[:, :-1]], axis=1)  # value before step t (BOS: initial)
            row["worst_old_deviation"] = float(np.abs(final[:, 1:, labels[f"kr:{name}.old"]] - old[:, 1:]).max())
        rows.append(row)
        if dev_new >= STEP_TOLERANCE:
            failures.append(f"{name} ({comp['kind']}, block {block}): value deviates by {dev_new:.3g} from the cascade")
        if row.get("worst_old_deviation", 0) >= STEP_TOLERANCE:
            failures.append(f"{name} ({comp['kind']}): pre-update value deviates by {row['worst_old_deviation']:.3g}")
    views = model.meta["krohn_rhodes"].get("views", [])
    if views:
        signals = cascade_signals(cascade, want)
        slot = {v.name: len(cascade.components) + j for j, v in enumerate(cascade.views)}
        final = cache[last].double().numpy()
        for view in views:
            col = signals[..., slot[view["name"]]]
            row = {"view": view["name"], "block": view["block"]}
            for when, target in (("old", col[:, :-1]), ("new", col[:, 1:])):  # position t: before / after step t
                if view[when]:
                    dev = float(np.abs(final[:, 1:, labels[f"kr:{view['name']}.{when}"]] - target).max())
                    row[f"worst_{when}_deviation"] = dev
                    if dev >= STEP_TOLERANCE:
                        failures.append(f"view {view['name']} ({'pre-update' if when == 'old' else 'updated'} values, "
                                        f"block {view['block']}): deviates by {dev:.3g} from the cascade")
            rows.append(row)
    checked = "cascade component values per block" + (" and views evaluated in the network" if views else "")
    del cache
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens[:2]))
    return {"checked": checked, "sequences": int(tokens.shape[0]),
            "components": rows, "failures": failures,
            "heads": generic_head_margins(model, cache), "mlps": mlp_margins(model, cache)}


def mlp_margins(model, cache: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """Per krohn-rhodes MLP, the noise of the integer codes it reads (dims found from ``W_in``).

    ``kr:c.mean`` (a counter's prefix mean, decoded mod n) is an integer count once
    multiplied by the prefix-mean head's ``scale``; ``kr:c.fetched`` / ``.prev`` (a reset
    unit's fetched value, rounded) and ``kr:c.new`` / ``.old`` (codes keying the input
    lookups) are integers.  Step units decide at 1/4 from an integer (STEP_TOLERANCE)."""
    labels = model.meta["residual_labels"]
    out = []
    for l, block in enumerate(model.blocks):
        if block.mlp is None:
            continue
        reads = torch.nonzero(block.mlp.W_in.detach().abs().sum(1) > 0).flatten().tolist()
        heads = model.meta["layers"][l].get("heads", [])
        scale = next((h["scale"] for h in heads if h.get("kind") == "prefix-mean" and "scale" in h), None)
        groups: dict[str, tuple[list[int], float]] = {}
        for i in reads:
            lab = labels[i]
            if not lab.startswith("kr:") or lab.startswith("kr:state"):
                continue
            suffix = lab.rsplit(".", 1)[-1]
            if suffix == "mean":
                if scale is None:
                    continue
                groups.setdefault("counter sums (mean x scale)", ([], float(scale)))[0].append(i)
            else:
                groups.setdefault(f"codes .{suffix}", ([], 1.0))[0].append(i)
        mid = cache[f"blocks.{l}.hook_resid_mid"].double()
        for what, (dims, sc) in groups.items():
            x = mid[..., dims] * sc
            noise = float((x - x.round()).abs().max())
            names = sorted({labels[i][3:].rsplit(".", 1)[0] for i in dims})
            out.append({"layer": l + 1, "mlp": f"block{l + 1}: {what}",
                        "inputs": ", ".join(names[:4]) + (f", … ({len(names)})" if len(names) > 4 else ""),
                        "input_tolerance": STEP_TOLERANCE, "worst_input_noise": noise,
                        "distance_to_boundary": STEP_TOLERANCE - noise,
                        **({"input_scale": sc} if sc != 1.0 else {})})
    return out
