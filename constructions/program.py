"""Programs: what a construction emits before assembly.

A :class:`Program` is a list of :class:`Block` s over a :class:`Workspace`.  A
block has attention heads (each with its own ``W_Q, W_K, W_V, W_O`` over the
full residual width) and at most one residual MLP.  Weights are float64 numpy
arrays; the assembler casts them once, which keeps builds deterministic.

``notes`` on heads and MLPs record the derived constants (temperatures, slopes,
gaps, tolerances) so they can be reported as margins.  ``reads`` and ``writes``
declare, by workspace subspace name, what each head and MLP touches: every gadget
sets them, :func:`fuse` and :func:`parallel` combine them, and the tests check
them against the nonzero weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .workspace import Workspace


@dataclass
class Head:
    """One causal softmax attention head; scores are ``(x W_Q)(x W_K)^T`` (no 1/sqrt(d) scale:
    the temperature lives in ``W_Q``)."""

    name: str
    W_Q: np.ndarray  # [d_model, d_qk]
    W_K: np.ndarray  # [d_model, d_qk]
    W_V: np.ndarray  # [d_model, d_v]
    W_O: np.ndarray  # [d_v, d_model]
    notes: dict[str, Any] = field(default_factory=dict)
    reads: dict[str, tuple[str, ...]] = field(default_factory=dict)  # {"query": .., "key": .., "value": ..}
    writes: tuple[str, ...] = ()


@dataclass
class MLP:
    """A residual ReLU MLP: ``out = W_k relu(... relu(x W_0 + b_0) ...) + b_k``.

    ``weights[0]`` is ``W_in`` [d_model, h_1]; ``weights[-1]`` is ``W_out`` [h_k, d_model].
    """

    name: str
    weights: list[np.ndarray]
    biases: list[np.ndarray]
    notes: dict[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    @property
    def hidden_sizes(self) -> list[int]:
        return [w.shape[1] for w in self.weights[:-1]]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on residual vectors ``x`` [..., d_model] (float64 reference)."""
        h = x
        for w, b in zip(self.weights[:-1], self.biases[:-1]):
            h = np.maximum(h @ w + b, 0.0)
        return h @ self.weights[-1] + self.biases[-1]


@dataclass
class Block:
    """Attention (heads side by side, outputs summed into the residual), then an MLP."""

    heads: list[Head]
    mlp: MLP | None = None


@dataclass
class Program:
    """Everything the assembler needs to build a :class:`CompiledTransformer`."""

    workspace: Workspace
    W_E: np.ndarray  # [n_symbols + 1, d_model]; the last row is BOS
    W_pos: np.ndarray  # [max_len + 1, d_model]; row 0 is BOS's position
    blocks: list[Block]
    W_U: np.ndarray  # [d_model, n_out]
    b_U: np.ndarray  # [n_out]
    notes: dict[str, Any] = field(default_factory=dict)


def union(*groups: tuple[str, ...]) -> tuple[str, ...]:
    """Subspace names of several declarations, each once, in first-seen order."""
    return tuple(dict.fromkeys(n for g in groups for n in g))


def fuse(first: MLP, second: MLP, name: str | None = None) -> MLP:
    """One MLP computing ``x + first(x) + second(x + first(x))``'s update.

    The residual dims that ``second`` reads are carried through ``first``'s hidden
    layers as ``relu(x) - relu(-x)`` pairs, and ``first``'s result is carried through
    ``second``'s hidden layers (its last hidden layer, or its output as +/- pairs when
    that is narrower), so the fused
    MLP has ``len(first.hidden) + len(second.hidden)`` hidden layers.  Used to
    place a readout inside the last block's MLP without an extra layer.
    """
    d_model = first.weights[0].shape[0]
    read = np.flatnonzero(np.any(second.weights[0] != 0, axis=1))
    P = np.zeros((d_model, len(read)))
    P[read, np.arange(len(read))] = 1.0
    weights: list[np.ndarray] = []
    biases: list[np.ndarray] = []
    # first's hidden layers, with [+x_S, -x_S] carried alongside
    for i, (w, b) in enumerate(zip(first.weights[:-1], first.biases[:-1])):
        n_prev = w.shape[0] if i == 0 else weights[-1].shape[1] - 2 * len(read)
        h = w.shape[1]
        if i == 0:
            W = np.concatenate([w, P, -P], axis=1)
        else:
            W = np.zeros((n_prev + 2 * len(read), h + 2 * len(read)))
            W[:n_prev, :h] = w
            W[n_prev:, h:] = np.eye(2 * len(read))
        weights.append(W)
        biases.append(np.concatenate([b, np.zeros(2 * len(read))]))
    h_last = first.weights[-1].shape[0]
    O1, c1 = first.weights[-1], first.biases[-1]
    # carry first's result through second's hidden layers: either its last hidden layer
    # (non-negative, identity) or, when narrower, its output on the dims it writes as +/- pairs
    written = np.flatnonzero(np.any(O1 != 0, axis=0) | (c1 != 0))
    if 2 * len(written) < h_last:
        E = np.zeros((d_model, len(written)))
        E[written, np.arange(len(written))] = 1.0
        C_in, C_b = np.concatenate([O1 @ E, -O1 @ E], axis=1), np.concatenate([c1 @ E, -c1 @ E])
        C_out, out_bias = np.concatenate([E.T, -E.T], axis=0), np.zeros(d_model)
    else:
        C_in, C_b, C_out, out_bias = np.eye(h_last), np.zeros(h_last), O1, c1
    k = C_in.shape[1]
    for j, (w, b) in enumerate(zip(second.weights[:-1], second.biases[:-1])):
        h = w.shape[1]
        if j == 0:
            W = np.zeros((h_last + 2 * len(read), h + k))
            W[:h_last, :h] = O1 @ w  # second reads first's output ...
            W[h_last:h_last + len(read), :h] = w[read]  # ... and x_S = p - m
            W[h_last + len(read):, :h] = -w[read]
            W[:h_last, h:] = C_in
            B = np.concatenate([b + c1 @ w, C_b])
        else:
            n_prev = weights[-1].shape[1] - k
            W = np.zeros((n_prev + k, h + k))
            W[:n_prev, :h] = w
            W[n_prev:, h:] = np.eye(k)
            B = np.concatenate([b, np.zeros(k)])
        weights.append(W)
        biases.append(B)
    n_prev = weights[-1].shape[1] - k
    weights.append(np.concatenate([second.weights[-1][:n_prev], C_out], axis=0))
    biases.append(second.biases[-1] + out_bias)
    notes = {**first.notes, "fused": [first.name, second.name], second.name: second.notes}
    return MLP(name or f"{first.name}+{second.name}", weights, biases, notes,
               reads=union(first.reads, second.reads), writes=union(first.writes, second.writes))


def parallel(mlps: list[MLP], name: str) -> MLP:
    """One MLP running ``mlps`` side by side (a direct product, Lemma 17).

    All must have the same number of hidden layers; hidden layers are concatenated,
    hidden-to-hidden weights are block diagonal, and the outputs add up (so the
    parts should write disjoint residual dims).
    """
    if len(mlps) == 1:
        m = mlps[0]
        return MLP(name, m.weights, m.biases, m.notes, reads=m.reads, writes=m.writes)
    depth = {len(m.weights) for m in mlps}
    if len(depth) != 1:
        raise ValueError("parallel MLPs need the same number of hidden layers")
    weights = [np.concatenate([m.weights[0] for m in mlps], axis=1)]
    biases = [np.concatenate([m.biases[0] for m in mlps])]
    for i in range(1, len(mlps[0].weights) - 1):
        rows = sum(m.weights[i].shape[0] for m in mlps)
        cols = sum(m.weights[i].shape[1] for m in mlps)
        W = np.zeros((rows, cols))
        r = c = 0
        for m in mlps:
            h, w = m.weights[i].shape
            W[r : r + h, c : c + w] = m.weights[i]
            r, c = r + h, c + w
        weights.append(W)
        biases.append(np.concatenate([m.biases[i] for m in mlps]))
    weights.append(np.concatenate([m.weights[-1] for m in mlps], axis=0))
    biases.append(np.sum([m.biases[-1] for m in mlps], axis=0))
    return MLP(name, weights, biases, {"parallel": [m.notes for m in mlps]},
               reads=union(*(m.reads for m in mlps)), writes=union(*(m.writes for m in mlps)))
