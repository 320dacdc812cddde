"""Layer-wise checks for Krohn-Rhodes models (Theorem 11): every component's subspace against the cascade.

After the block that runs component c, ``kr:c.new`` at position t must hold c's value
in the cascade's own step-by-step simulation, and ``kr:c.old`` (where the model has
it) the value before step t; a counter's prefix sum (``kr:c.mean`` times the head's
scale, what its residue decode reads) must lie within STEP_TOLERANCE of an integer;
a counter head restricted to a position block (krohn_rhodes.CounterBlocks) must put no
more weight outside its block (and BOS) than the leak bound its notes record;
a view the model evaluates in the network (``kr:v.old`` / ``kr:v.new``) must hold the
view of those values.  A failure names
the component or view and the block, so a broken model points at the gadget that broke.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch

from compiler.automata.cascade import Cascade

from .budget import STEP_TOLERANCE
from .construction import InvariantReport
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


def invariants(model, cascade: Cascade, tokens: np.ndarray) -> InvariantReport:
    """Compare each component's decoded subspaces with the cascade's simulation (all of
    ``tokens``), measure the MLP margins there and the head margins (and block heads'
    leaks) on the first two sequences."""
    want = cascade_coordinates(cascade, tokens)
    allocated = model.metadata.subspaces

    def at(name: str) -> int:  # a component's or view's one-dim subspace
        return model.subspace(name)[0]
    cache = _residuals(model, torch.from_numpy(tokens))
    index = {c.name: i for i, c in enumerate(cascade.components)}
    rows, failures = [], []
    last = f"blocks.{len(model.blocks) - 1}.hook_resid_post"
    for comp in model.metadata.sections["krohn_rhodes"]["components"]:
        name, block = comp["name"], comp["block"]
        col = want[..., index[name]]
        resid = cache[f"blocks.{block - 1}.hook_resid_post"].double().numpy()
        dev_new = float(np.abs(resid[..., at(f"kr:{name}.new")] - col).max())
        row = {"component": name, "kind": comp["kind"], "block": block, "worst_new_deviation": dev_new}
        if comp["kind"] == "counter":
            row |= _counter_sum(model, cache, name, block)
            if row["distance_to_boundary"] <= 0:
                failures.append(f"{name} (counter, block {block}): prefix sum is {row['worst_sum_noise']:.3g} off an "
                                f"integer (tolerance {STEP_TOLERANCE})")
        if f"kr:{name}.old" in allocated:
            final = cache[last].double().numpy()
            old = np.concatenate([col[:, :1], col[:, :-1]], axis=1)  # value before step t (BOS: initial)
            row["worst_old_deviation"] = float(np.abs(final[:, 1:, at(f"kr:{name}.old")] - old[:, 1:]).max())
        rows.append(row)
        if dev_new >= STEP_TOLERANCE:
            failures.append(f"{name} ({comp['kind']}, block {block}): value deviates by {dev_new:.3g} from the cascade")
        if row.get("worst_old_deviation", 0) >= STEP_TOLERANCE:
            failures.append(f"{name} ({comp['kind']}): pre-update value deviates by {row['worst_old_deviation']:.3g}")
    views = model.metadata.sections["krohn_rhodes"].get("views", [])
    if views:
        signals = cascade_signals(cascade, want)
        slot = {v.name: len(cascade.components) + j for j, v in enumerate(cascade.views)}
        final = cache[last].double().numpy()
        for view in views:
            col = signals[..., slot[view["name"]]]
            row = {"view": view["name"], "block": view["block"]}
            for when, target in (("old", col[:, :-1]), ("new", col[:, 1:])):  # position t: before / after step t
                if view[when]:
                    dev = float(np.abs(final[:, 1:, at(f"kr:{view['name']}.{when}")] - target).max())
                    row[f"worst_{when}_deviation"] = dev
                    if dev >= STEP_TOLERANCE:
                        failures.append(f"view {view['name']} ({'pre-update' if when == 'old' else 'updated'} values, "
                                        f"block {view['block']}): deviates by {dev:.3g} from the cascade")
            rows.append(row)
    checked = "cascade component values per block" + (" and views evaluated in the network" if views else "")
    mlps = mlp_margins(model, cache)
    del cache
    heads, blocks = _head_margins(model, torch.from_numpy(tokens[:2]))
    failures += [f"layer {r['layer']} head {r['head']} (counters of block keys {r['block_keys']}): weight "
                 f"{r['worst_outside_weight']:.3g} outside its block, above its bound {r['allowed']:.3g}"
                 for r in blocks if r["worst_outside_weight"] > r["allowed"]]
    if blocks:
        checked += " and each counter block head's weight outside its block"
    return InvariantReport(checked, int(tokens.shape[0]), failures, heads, mlps, {"components": rows, "blocks": blocks})


def _keep(cache: dict[str, torch.Tensor], names: list[str]) -> list[tuple[str, Callable]]:
    """Forward hooks storing the named hook points' outputs into ``cache``."""
    def keep(name: str) -> Callable:
        def hook(module: Any, inputs: Any, output: torch.Tensor) -> None:
            cache[name] = output
        return hook
    return [(n, keep(n)) for n in names]


def _residuals(model, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """The residual stream after each attention layer and each block, on the model's own
    (fused) forward: hooks on the blocks' residual points keep attention fused."""
    cache: dict[str, torch.Tensor] = {}
    names = [f"blocks.{l}.{p}" for l in range(len(model.blocks)) for p in ("hook_resid_mid", "hook_resid_post")]
    with torch.no_grad(), model.hooks(_keep(cache, names)):
        model(tokens)
    return cache


def _head_margins(model, tokens: torch.Tensor) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Head margins (:func:`generic_head_margins`) and block heads' leaks (:func:`block_leaks`),
    one layer at a time on the explicit attention path: only that layer's [B, H, T, T]
    scores and pattern are kept."""
    heads: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    with torch.no_grad(), model.explicit_attention():
        x = model.residual(tokens)
        for l, block in enumerate(model.blocks):
            cache: dict[str, torch.Tensor] = {}
            with model.hooks(_keep(cache, [f"blocks.{l}.attn.hook_attn_scores", f"blocks.{l}.attn.hook_pattern"])):
                x = block(x)
            heads += generic_head_margins(model, cache, layers=[l])
            blocks += block_leaks(model, cache, l)
    return heads, blocks


def block_leaks(model, cache: dict[str, torch.Tensor], l: int) -> list[dict[str, Any]]:
    """Per counter head of layer ``l`` restricted to a position block (notes ``block_keys``), the most weight
    any query puts on real keys outside the block, against the notes' ``leak_bound`` (the
    exact-arithmetic worst case) widened by the dtype's rounding: the out-of-block score
    -beta - log(mass - c) is rounded (relative eps on a magnitude below beta + log(mass),
    twice: the scores and the softmax's shift) and the normaliser sums T + 1 terms."""
    eps = torch.finfo(model.W_E.dtype).eps
    out = []
    pattern = cache[f"blocks.{l}.attn.hook_pattern"]
    T = pattern.shape[-1] - 1
    for h, notes in enumerate(model.metadata.layers[l]["heads"]):
        if "block_keys" not in notes:
            continue
        first, last = notes["block_keys"]
        p = pattern[:, h]
        outside = p[..., 1:first].sum(-1, dtype=torch.float64) + p[..., last + 1 :].sum(-1, dtype=torch.float64)
        slack = math.exp(2 * eps * (notes["beta"] + math.log(notes["mass"]))) * (1 + eps * (T + 1))
        out.append({"layer": l + 1, "head": h, "block_keys": [first, last],
                    "worst_outside_weight": float(outside.max()), "leak_bound": notes["leak_bound"],
                    "allowed": notes["leak_bound"] * slack})
    return out


def _counter_sum(model, cache: dict[str, torch.Tensor], name: str, block: int) -> dict[str, Any]:
    """A counter's prefix sum after its head (the decode's input): worst distance from an
    integer against STEP_TOLERANCE, and the decode's modulus and coarse steps."""
    layer = model.metadata.layers[block - 1]
    scale = next(h["scale"] for h in layer["heads"] if h.get("kind") == "prefix-mean")
    x = cache[f"blocks.{block - 1}.hook_resid_mid"][..., model.subspace(f"kr:{name}.mean")[0]].double() * scale
    noise = float((x - x.round()).abs().max())
    parts = layer["mlp"].get("parallel", [layer["mlp"]]) if layer["mlp"] else []
    decode: dict[str, Any] = next((n for n in parts if n.get("component") == name), {})
    return {"worst_sum_noise": noise, "sum_tolerance": STEP_TOLERANCE, "distance_to_boundary": STEP_TOLERANCE - noise,
            "residue_modulus": decode.get("modulus"), "coarse_steps": decode.get("coarse_steps")}


ROLES = ("mean", "new", "old", "fetched", "prev", "inc", "flag", "target")
"""A component's subspaces are ``kr:{name}.{role}``; a view's ``kr:{name}.old`` / ``.new``."""


def _owners(model) -> dict[str, tuple[str, str]]:
    """Subspace name -> (component or view, role), for every component and view subspace allocated."""
    kr = model.metadata.sections["krohn_rhodes"]
    allocated = model.metadata.subspaces
    owners = {f"kr:{c['name']}.{role}": (c["name"], role) for c in kr["components"] for role in ROLES}
    owners |= {f"kr:{v['name']}.{when}": (v["name"], when) for v in kr.get("views", []) for when in ("old", "new")}
    return {sub: who for sub, who in owners.items() if sub in allocated}


def mlp_margins(model, cache: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """Per krohn-rhodes MLP, the noise of the integer codes it reads (the component and view
    subspaces its stored layout declares it reads).

    ``kr:c.mean`` (a counter's prefix mean, decoded mod n) is an integer count once
    multiplied by the prefix-mean head's ``scale``; ``kr:c.fetched`` / ``.prev`` (a reset
    unit's fetched value, rounded) and ``kr:c.new`` / ``.old`` (codes keying the input
    lookups) are integers.  Step units decide at 1/4 from an integer (STEP_TOLERANCE)."""
    owners = _owners(model)
    out = []
    for l, block in enumerate(model.layout()["blocks"]):
        if block["mlp"] is None:
            continue
        reads = sorted((model.subspace(sub)[0], *owners[sub]) for sub in block["mlp"]["reads"] if sub in owners)
        heads = model.metadata.layers[l].get("heads", [])
        scale = next((h["scale"] for h in heads if h.get("kind") == "prefix-mean" and "scale" in h), None)
        groups: dict[str, tuple[list[int], float, set[str]]] = {}
        for i, who, role in reads:
            if role == "mean":
                if scale is None:
                    continue
                group = groups.setdefault("counter sums (mean x scale)", ([], float(scale), set()))
            else:
                group = groups.setdefault(f"codes .{role}", ([], 1.0, set()))
            group[0].append(i)
            group[2].add(who)
        mid = cache[f"blocks.{l}.hook_resid_mid"].double()
        for what, (dims, sc, owners_of) in groups.items():
            x = mid[..., dims] * sc
            noise = float((x - x.round()).abs().max())
            names = sorted(owners_of)
            out.append({"layer": l + 1, "mlp": f"block{l + 1}: {what}",
                        "inputs": ", ".join(names[:4]) + (f", … ({len(names)})" if len(names) > 4 else ""),
                        "input_tolerance": STEP_TOLERANCE, "worst_input_noise": noise,
                        "distance_to_boundary": STEP_TOLERANCE - noise,
                        **({"input_scale": sc} if sc != 1.0 else {})})
    return out
