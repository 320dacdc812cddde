"""Realistic bases: the residual stream of a compiled model in a random orthogonal basis.

This module says what a basis is (drawn from a seed, recorded in ``meta["basis"]``) and how a
rotated residual decodes back to the named dims; ``constructions/rotate.py`` rotates a model.

A compiled model's residual dims are named and its weights are sparse and axis-aligned.  With
no LayerNorm, any orthogonal Q (d_model x d_model) gives the same function in exact arithmetic
when the residual x is replaced by x Q and every weight that touches it is changed to match::

    W_E, W_pos, W_O, W_out, b_out   ->  (.) Q        (they write the residual)
    W_Q, W_K, W_V, W_in, W_U        ->  Q^T (.)      (they read it)

Inside each head, ``heads=True`` also applies random orthogonal maps A (query/key) and
B (value/output): W_Q A, W_K A (scores q A A^T k = q k), W_V B, B^T W_O.  A and B are
orthogonal, so they are invertible with inverse transpose and add little rounding; they act
on the head's whole (zero-padded) d_head.  Attention patterns are unchanged up to rounding
(the scores are the same numbers, summed in another order).

Everything is computed in float64 from the model's weights and cast back once, so the same
model and seed give bit-identical weights.  The basis is recorded in ``meta["basis"]``
(``kind``, ``seed``, ``heads``); :func:`basis_matrix` rebuilds Q from it, and
:func:`standard_residual` maps a rotated residual back to the named dims (x Q^T), which is
how subspaces are decoded in a rotated model.  ``meta["subspaces"]`` and the layout keep
their standard-basis meaning: in the rotated model, subspace dims index rows of Q (the
directions ``Q[dims]``), not coordinates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from compiler.automata.errors import ShortcutError

STANDARD, ORTHOGONAL = "standard", "orthogonal"
BASES = (STANDARD, ORTHOGONAL)
"""``--basis`` choices."""
MAX_SEED = 2**63 - 1


def random_orthogonal(n: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random n x n orthogonal matrix (QR of a Gaussian matrix, signs fixed), float64."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def basis_rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent streams for the residual basis and the per-head maps of ``seed``."""
    residual, heads = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(residual), np.random.default_rng(heads)


def basis_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The model's recorded basis (``meta["basis"]``), None for the standard one."""
    b = meta.get("basis")
    return b if isinstance(b, dict) and b.get("kind") == ORTHOGONAL else None


def basis_matrix(model) -> np.ndarray | None:
    """Q (float64, d_model x d_model) of a rotated model: residual_rotated = residual_standard Q."""
    b = basis_of(model.meta)
    if b is None:
        return None
    return random_orthogonal(model.config.d_model, basis_rngs(int(b["seed"]))[0])


def standard_residual(model, x: torch.Tensor) -> torch.Tensor:
    """A residual-stream activation [..., d_model] in the standard (named) basis, float64."""
    Q = basis_matrix(model)
    x = x.detach().double()
    return x if Q is None else x @ torch.from_numpy(Q).T


def check_seed(seed: int) -> None:
    """ShortcutError unless ``seed`` is an integer from 0 to :data:`MAX_SEED`."""
    if type(seed) is not int or not 0 <= seed <= MAX_SEED:
        raise ShortcutError(f"the basis seed must be an integer from 0 to {MAX_SEED}, got {seed!r}")
