"""An explicit recurrent network with hand-set weights.

State h_t is one-hot over Q.  One ReLU layer has a unit per (state, symbol) pair,
u[q, a] = relu(h[q] + x[a] - 1) = 1 exactly when the state is q and the symbol a;
a linear map sends unit (q, a) to the one-hot of delta(q, a).  T steps deep: the
baseline the shallow Transformers shortcut.
"""

from __future__ import annotations

import torch
from torch import nn

from compiler.automata.spec import Semiautomaton


class RecurrentSimulator(nn.Module):
    """h_{t} = W_out relu(W_h h_{t-1} + W_x x_t - 1); prediction argmax h_t."""

    def __init__(self, automaton: Semiautomaton, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        n, k = automaton.n_states, automaton.n_symbols
        self.n_states, self.n_symbols = n, k
        W_h = torch.zeros(n * k, n, dtype=dtype)
        W_x = torch.zeros(n * k, k, dtype=dtype)
        W_out = torch.zeros(n, n * k, dtype=dtype)
        for q in range(n):
            for a in range(k):
                u = q * k + a
                W_h[u, q] = 1.0
                W_x[u, a] = 1.0
                W_out[automaton.maps[a][q], u] = 1.0
        self.W_h = nn.Parameter(W_h, requires_grad=False)
        self.W_x = nn.Parameter(W_x, requires_grad=False)
        self.W_out = nn.Parameter(W_out, requires_grad=False)
        h0 = torch.zeros(n, dtype=dtype)
        h0[automaton.start] = 1.0
        self.register_buffer("h0", h0)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """One-hot states [B, T, n] after each token of ``tokens`` [B, T]."""
        B, T = tokens.shape
        x = torch.nn.functional.one_hot(tokens.long(), self.n_symbols).to(self.h0.dtype)
        h = self.h0.expand(B, -1)
        out = []
        for t in range(T):
            h = torch.relu(h @ self.W_h.T + x[:, t] @ self.W_x.T - 1.0) @ self.W_out.T
            out.append(h)
        return torch.stack(out, dim=1) if out else h.new_zeros(B, 0, self.n_states)
