"""The step-by-step reference: integer simulation of a semiautomaton (numpy)."""

from __future__ import annotations

import numpy as np

from .spec import Semiautomaton


def transition_table(automaton: Semiautomaton) -> np.ndarray:
    """[n_symbols, n_states] integer table: table[a, q] = delta(q, a)."""
    return np.asarray(automaton.maps, dtype=np.int64).reshape(automaton.n_symbols, automaton.n_states)


def simulate(automaton: Semiautomaton, tokens: np.ndarray, start: int | None = None) -> np.ndarray:
    """States [B, T] after each token of ``tokens`` [B, T], one step at a time."""
    tokens = np.asarray(tokens, dtype=np.int64)
    table = transition_table(automaton)
    q = np.full(tokens.shape[0], automaton.start if start is None else start, dtype=np.int64)
    out = np.empty_like(tokens)
    for t in range(tokens.shape[1]):
        q = table[tokens[:, t], q]
        out[:, t] = q
    return out


def window_maps(letter_maps: np.ndarray, tokens: np.ndarray, n_layers: int) -> list[np.ndarray]:
    """The scan invariant, in exact integers: entry l is [B, T+1, n] holding at position t
    the map of letters max(1, t - 2^l + 1)..t (applied first to last); position 0 (BOS)
    holds the identity.  Computed by doubling: window 2^l = window 2^(l-1) at t - 2^(l-1),
    then window 2^(l-1) at t.  Entry n_layers is the full prefix map once 2^n_layers >= T."""
    letter_maps = np.asarray(letter_maps, dtype=np.int64)
    B, T = tokens.shape
    n = letter_maps.shape[1]
    cur = np.empty((B, T + 1, n), dtype=np.int64)
    cur[:, 0] = np.arange(n)
    cur[:, 1:] = letter_maps[np.asarray(tokens, dtype=np.int64)]
    out = [cur]
    for l in range(1, n_layers + 1):
        d = 2 ** (l - 1)
        prev = np.empty_like(cur)
        prev[:, :] = np.arange(n)
        if d <= T:
            prev[:, d:] = cur[:, : T + 1 - d]
        prev[:, : d + 1] = np.arange(n)  # BOS (identity) wins when t - d <= 0
        cur = np.take_along_axis(cur, prev, axis=2)  # x -> cur[prev[x]]
        out.append(cur)
    return out
