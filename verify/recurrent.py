"""An explicit recurrent network with hand-set weights.

State h_t is one-hot over Q.  One ReLU layer has a unit per (state, symbol) pair,
u[q, a] = relu(h[q] + x[a] - 1) = 1 exactly when the state is q and the symbol a;
a linear map sends unit (q, a) to the one-hot of delta(q, a).  T steps deep: the
baseline the shallow Transformers shortcut.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn

from compiler.automata.errors import BudgetError
from compiler.automata.spec import Semiautomaton

MAX_BYTES = 4 << 30
"""Largest recurrent reference built (its float64 weights), whatever the machine's memory."""


def weight_bytes(n_states: int, n_symbols: int) -> int:
    """Bytes of a :class:`RecurrentSimulator`'s float64 weights: W_h [nk, n], W_x [nk, k] and
    W_out [n, nk] -- ``8 n k (2n + k)``, quadratic in the alphabet."""
    return 8 * n_states * n_symbols * (2 * n_states + n_symbols)


def check_size(n_states: int, n_symbols: int, limit: int = MAX_BYTES) -> None:
    """BudgetError, before anything is allocated, when the reference for ``n_states`` states and
    ``n_symbols`` letters would hold more than ``limit`` bytes of weights."""
    need = weight_bytes(n_states, n_symbols)
    if need > limit:
        raise BudgetError(f"verifying an automaton of {n_states:,} states and {n_symbols:,} letters needs a recurrent "
                          f"reference (a unit per state and letter) of {need / 2**30:,.1f} GiB of weights, over the "
                          f"limit of {limit / 2**30:.1f} GiB: the alphabet is too large to verify here")


class RecurrentSimulator(nn.Module):
    """h_{t} = W_out relu(W_h h_{t-1} + W_x x_t - 1); prediction argmax h_t."""

    h0: torch.Tensor  # the initial state's one-hot (a buffer)

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

    @torch.no_grad()
    def states(self, tokens: torch.Tensor) -> torch.Tensor:
        """State ids [B, T] (the argmax of :meth:`forward`), the same steps holding only the
        current state: memory O(B n) instead of O(B T n).  The letter's column of W_x is
        selected by index, which is the product with its one-hot."""
        B, T = tokens.shape
        toks = tokens.long().to(self.h0.device)
        W_x = self.W_x.T  # [k, n*k]: row a is W_x @ onehot(a)
        h = self.h0.expand(B, -1)
        out = torch.empty(B, T, dtype=torch.long, device=self.h0.device)
        with _one_thread():
            for t in range(T):
                h = torch.relu(h @ self.W_h.T + W_x[toks[:, t]] - 1.0) @ self.W_out.T
                out[:, t] = h.argmax(-1)
        return out


@contextmanager
def _one_thread() -> Iterator[None]:
    """torch's intra-op threads set to 1 for the ``with`` body: T steps of small operations
    gain nothing from threads, and on a busy machine every parallel step waits for a
    descheduled thread (measured 20x slower at load 16 on 2 cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
