"""Ground-truth circuits and traces of a compiled model: what every part is meant to do.

:func:`circuit` reads the stored layout (``meta["layout"]``: subspaces, and per block what each
head and MLP reads and writes) and the construction notes (``meta["layers"]``: each head's
kind and margins, each MLP's kind) into one stable, JSON-able record (schema
:data:`CIRCUIT_SCHEMA`, documented in ``docs/zoo.md``): for every layer each head's role, its
intended key (:data:`INTENDED_KEYS`), the subspaces it reads and writes; each MLP's role; and
each residual dim's meaning (its subspace and label).

:func:`traces` runs the model on sample inputs and records the supervised targets a
decompiler learns from: the reference state per position, the model's prediction, the
residual stream after every layer in the standard (named) basis -- so ``x[..., dims]`` is a
named subspace's value, whatever basis the weights are in -- and, per head, the key position
it attends to most.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from compiler.automata.simulate import simulate

from .basis import basis_matrix, basis_of, standard_residual
from .labels import output_names, readout_of
from .model import CompiledTransformer

CIRCUIT_SCHEMA = "shortcut-circuit/1"
TRACE_SCHEMA = "shortcut-trace/1"

INTENDED_KEYS = {
    "offset": "the position t - offset (BOS, position 0, when that is before the first letter)",
    "absolute": "the position given by 'position' (BOS while t is before it)",
    "prefix-mean": "every position 1..t with equal weight, the remaining mass on BOS (a prefix average)",
    "most-recent-flag": "the most recent position s <= t whose key subspace carries the flag (BOS: none yet)",
    "last-push": "the most recent position that pushed onto stack level 'level' (BOS: none yet)",
    "any-flag": "any position s <= t whose key subspace carries a flag (BOS when there is none)",
    "nearest-value": "the most recent position whose prefix-sum code equals the query's shifted by 'offset' "
                     "(BOS: none)",
}
"""Each head kind's intended key: where, for query position t, its attention should go."""


def _notes(model: CompiledTransformer, layer: int) -> dict[str, Any]:
    notes = model.metadata.layers
    return notes[layer] if isinstance(notes, list) and layer < len(notes) and isinstance(notes[layer], dict) else {}


def _head(head: dict[str, Any], notes: dict[str, Any]) -> dict[str, Any]:
    """One head's record: role (its kind), intended key, reads, writes and the construction's notes."""
    kind = notes.get("kind", "unknown")
    key = {"rule": kind, "description": INTENDED_KEYS.get(kind, "not described by the construction")}
    key.update({k: notes[k] for k in ("offset", "position", "level", "axis") if k in notes})
    return {"index": head["index"], "name": head["name"], "role": kind, "intended_key": key,
            "reads": head["reads"], "writes": head["writes"], "notes": notes}


def _mlp(mlp: dict[str, Any] | None, notes: Any) -> dict[str, Any] | None:
    """One MLP's record: role (its kind, or the kinds of the gadgets it runs side by side)."""
    if mlp is None:
        return None
    notes = notes if isinstance(notes, dict) else {}
    parts = notes.get("parallel")
    role = "+".join(p.get("kind", "unknown") for p in parts) if isinstance(parts, list) else notes.get("kind", "unknown")
    return {"name": mlp["name"], "role": role, "hidden": mlp["hidden"], "reads": mlp["reads"], "writes": mlp["writes"],
            "notes": notes}


def residual_meanings(model: CompiledTransformer) -> list[dict[str, Any]]:
    """For each residual dim (standard basis): its subspace and its label."""
    owner = {d: name for name, dims in model.metadata.subspaces.items() for d in dims}
    labels = model.metadata.residual_labels or [""] * model.config.d_model
    return [{"dim": d, "subspace": owner.get(d), "label": labels[d]} for d in range(model.config.d_model)]


def circuit(model: CompiledTransformer) -> dict[str, Any]:
    """The model's ground-truth circuit (see the module docstring); KeyError without a stored layout."""
    layout = model.layout()
    layers = []
    for block in layout["blocks"]:
        notes = _notes(model, block["layer"])
        listed = notes.get("heads")
        head_notes: list[Any] = listed if isinstance(listed, list) else []
        heads = [_head(h, head_notes[i] if i < len(head_notes) and isinstance(head_notes[i], dict) else {})
                 for i, h in enumerate(block["heads"])]
        layers.append({"layer": block["layer"], "heads": heads, "mlp": _mlp(block["mlp"], notes.get("mlp"))})
    a = model.automaton
    return {"schema": CIRCUIT_SCHEMA, "method": model.metadata.method or None, "automaton": a.name,
            "basis": basis_of(model.meta) or {"kind": "standard"},
            "subspaces": layout["subspaces"], "residual": residual_meanings(model), "layers": layers,
            "readout": {"outputs": list(output_names(model)), "start": a.states[a.start], "reads": _readout_reads(model)}}


def _readout_reads(model: CompiledTransformer) -> list[str]:
    """The subspaces the unembedding reads (standard basis: the rows of W_U that are not zero)."""
    W_U = model.W_U.detach().double().numpy()
    Q = basis_matrix(model)
    rows = np.abs(W_U if Q is None else Q @ W_U).max(1) > 1e-6 * max(np.abs(W_U).max(), 1.0)
    used = {d for d in np.nonzero(rows)[0].tolist()}
    return sorted(name for name, dims in model.metadata.subspaces.items() if used & set(dims))


def sample_inputs(model: CompiledTransformer, n: int, seed: int) -> np.ndarray:
    """``n`` random inputs at full max_len (token ids), drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, model.config.n_symbols, size=(n, model.max_len), dtype=np.int64)


@torch.no_grad()
def traces(model: CompiledTransformer, tokens: np.ndarray) -> dict[str, torch.Tensor]:
    """Traces of ``tokens`` [N, T] (see the module docstring), as named tensors:
    ``tokens`` [N, T]; ``states`` [N, T] (the reference simulation's state ids after each
    letter); ``expected`` and ``predicted`` [N, T] (the output the argmax should give -- the state,
    or its label for a label readout -- and the model's argmax); ``resid.{l}`` [N, T+1, d_model] float32,
    the standard-basis residual after l blocks (0: the embedding; position 0 is BOS);
    ``attends.{l}`` [N, heads, T+1] int32, each head's most-attended key position per query."""
    a = model.automaton
    tok = torch.from_numpy(tokens)
    logits, cache = model.run_with_cache(tok, lambda name: name.endswith(("hook_resid_pre", "hook_resid_final",
                                                                          "hook_pattern")))
    states = simulate(a, tokens).astype(np.int64)
    readout = readout_of(model.meta)
    expected = states if readout is None else np.asarray(readout["state_label"], dtype=np.int64)[states]
    out = {"tokens": tok.clone(), "states": torch.from_numpy(states), "expected": torch.from_numpy(expected),
           "predicted": logits.argmax(-1)}
    for l in range(len(model.blocks) + 1):
        out[f"resid.{l}"] = standard_residual(model, cache[model.residual_hook(l)]).float()
    for l in range(len(model.blocks)):
        out[f"attends.{l}"] = cache[f"blocks.{l}.attn.hook_pattern"].argmax(-1).int()
    return out
