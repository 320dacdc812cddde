"""Rotate a compiled model into a random orthogonal basis (see ``constructions/basis.py``).

Every weight that reads or writes the residual is transformed in float64 from the model's
weights and cast back once, so the same model and seed give bit-identical weights; the new
header is stamped (``meta["basis"]`` is part of it).
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from compiler.automata.errors import ShortcutError

from .basis import ORTHOGONAL, basis_of, basis_rngs, check_seed, random_orthogonal
from .checkpoint import stamp_header
from .model import CompiledTransformer


def rotate(model: CompiledTransformer, seed: int, heads: bool = True) -> CompiledTransformer:
    """A copy of ``model`` in a random orthogonal residual basis (and, with ``heads``, random
    orthogonal maps inside each head), drawn from ``seed``; see the module docstring."""
    check_seed(seed)
    if basis_of(model.meta) is not None:
        raise ShortcutError("this model is already in a rotated basis; rotate the standard-basis model instead")
    out = copy.deepcopy(model)
    residual_rng, head_rng = basis_rngs(seed)
    Q = random_orthogonal(model.config.d_model, residual_rng)
    d_head = model.config.d_head
    with torch.no_grad():
        _transform(out, Q, lambda: random_orthogonal(d_head, head_rng) if heads else None)
    out.set_meta({**out.meta, "basis": {"kind": ORTHOGONAL, "seed": seed, "heads": heads}})
    stamp_header(out)
    return out


def _set(param: torch.nn.Parameter, value: np.ndarray) -> None:
    param.copy_(torch.from_numpy(value).to(param.dtype))


def _transform(model: CompiledTransformer, Q: np.ndarray, head_map) -> None:
    """Apply Q to every weight that reads or writes the residual (in place, float64 then cast)."""
    w = lambda p: p.detach().double().numpy()  # noqa: E731
    for p in (model.W_E, model.W_pos):
        _set(p, w(p) @ Q)
    _set(model.W_U, Q.T @ w(model.W_U))
    for block in model.blocks:
        a = block.attn
        WQ, WK, WV, WO = (Q.T @ w(a.W_Q), Q.T @ w(a.W_K), Q.T @ w(a.W_V), w(a.W_O) @ Q)
        for h in range(WQ.shape[0]):
            A, B = head_map(), head_map()
            if A is not None:
                WQ[h], WK[h], WV[h], WO[h] = WQ[h] @ A, WK[h] @ A, WV[h] @ B, B.T @ WO[h]
        for p, value in ((a.W_Q, WQ), (a.W_K, WK), (a.W_V, WV), (a.W_O, WO)):
            _set(p, value)
        m = block.mlp
        if m is not None:
            first, last = m.weight_name(0), m.weight_name(m.n_hidden)
            _set(getattr(m, first), Q.T @ w(getattr(m, first)))
            _set(getattr(m, last), w(getattr(m, last)) @ Q)
            bias = m.bias(m.n_hidden)
            _set(bias, w(bias) @ Q)
