"""Layer-wise checks for krohn-rhodes models: every component's subspace against the cascade.

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

from compiler.automata.decompose import decompose
from constructions.budget import STEP_TOLERANCE


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


def invariants(model, tokens: np.ndarray) -> dict[str, Any]:
    """Compare each component's decoded subspaces with the cascade's simulation."""
    cascade = decompose(model.automaton)
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
    return {"checked": checked, "sequences": int(tokens.shape[0]),
            "components": rows, "failures": failures}
