"""Transition tables built like the task families of the paper's training data (parity, gridworld,
abab, add, flipflop, cyclic, dihedral, quaternion, symmetric, alternating, permutation_reset),
compiled with ``compiler.from_table`` and exact at T = 100 on inputs drawn from each family's own
input distribution (written here from the families' descriptions)."""

from __future__ import annotations

import itertools
from typing import Callable

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.formats import from_table
from compiler.automata.simulate import simulate
from verify.check import verify

T = 100
Sampler = Callable[[np.random.Generator, int], np.ndarray]


def perm_table(perms: list[tuple[int, ...]], gens: list[tuple[int, ...]]) -> np.ndarray:
    """States = permutations (one-line), letters = generators applied to the arrangement."""
    index = {p: i for i, p in enumerate(perms)}
    return np.array([[index[tuple(p[g[i]] for i in range(len(p)))] for g in gens] for p in perms])


def binary(prob1: float) -> Sampler:
    return lambda rng, n: (rng.random((n, T)) < prob1).astype(np.int64)


def uniform(k: int) -> Sampler:
    return lambda rng, n: rng.integers(0, k, (n, T))


def parity():
    return np.array([[0, 1], [1, 0]]), 0, binary(0.5)


def gridworld(n: int = 5):
    return np.array([[max(q - 1, 0), min(q + 1, n - 1)] for q in range(n)]), 0, binary(0.5)


def abab():
    def sample(rng, n):  # half the sequences are the pattern 0101..., the rest Bernoulli(1/2)
        x = binary(0.5)(rng, n)
        x[rng.random(n) < 0.5] = np.arange(T) % 2
        return x
    return np.array([[4, 1], [2, 4], [4, 3], [0, 4], [4, 4]]), 3, sample


def add():
    """Two binary addends, letter = a + 2b; state = carry."""
    table = np.array([[(c + (x & 1) + (x >> 1)) // 2 for x in range(4)] for c in range(2)])
    return table, 0, lambda rng, n: binary(0.5)(rng, n) + 2 * binary(0.5)(rng, n)


def flipflop(n: int = 2):
    """State 0 = nothing written yet; letter 0 reads (keeps the state), letter i writes i; reads half the time."""
    table = np.array([[q] + list(range(1, n + 1)) for q in range(n + 1)])
    return table, 0, lambda rng, m: rng.integers(1, n + 1, (m, T)) * (rng.random((m, T)) < 0.5)


def cyclic(n: int = 5, n_actions: int = 3):
    return np.array([[(q + a) % n for a in range(n_actions)] for q in range(n)]), 0, uniform(n_actions)


def dihedral(n: int = 4):
    """State (toggle, position): letter 0 toggles the direction, letter 1 drives one step."""
    def step(s, a):
        tog, pos = divmod(s, n)
        return (1 - tog) * n + pos if a == 0 else tog * n + (pos + (1 if tog == 0 else -1)) % n
    return np.array([[step(s, a) for a in range(2)] for s in range(2 * n)]), 0, uniform(2)


def quaternion():
    pos = [[0, 1, 2, 3], [1, 4, 3, 6], [2, 7, 4, 1], [3, 2, 5, 4]]
    return np.array(pos + [[(x + 4) % 8 for x in row] for row in pos]), 0, uniform(4)


def symmetric(n: int = 4):
    perms = list(itertools.permutations(range(n)))
    gens = [tuple(range(n)), tuple(range(1, n)) + (0,), (1, 0) + tuple(range(2, n))]  # id, shift, swap
    return perm_table(perms, gens), 0, uniform(3)


def alternating(n: int = 4):
    perms = [p for p in itertools.permutations(range(n))
             if sum(p[i] > p[j] for i in range(n) for j in range(i + 1, n)) % 2 == 0]
    gens = [tuple(range(n))]
    for x in range(2, n):  # the 3-cycles (1 2 x)
        g = list(range(n))
        g[0], g[1], g[x] = 1, x, 0
        gens.append(tuple(g))
    return perm_table(perms, gens), 0, uniform(len(gens))


def permutation_reset(n: int = 3):
    """Letters: one reset per permutation, then the generators; resets at gaps drawn from powers of two."""
    perms = list(itertools.permutations(range(n)))
    gens = [tuple(range(1, n)) + (0,), (1, 0) + tuple(range(2, n))]
    resets = np.array([[r] * len(perms) for r in range(len(perms))]).T
    table = np.concatenate([resets, perm_table(perms, gens)], axis=1)
    lags = [1 << k for k in range(T.bit_length()) if 1 << k < T]

    def sample(rng, m):
        x = rng.integers(0, len(gens), (m, T)) + len(perms)
        for row in x:
            i = 0
            while i < T:
                row[i] = rng.integers(0, len(perms))
                i += int(rng.choice(lags))
        return x
    return table, 0, sample


FAMILIES = {f.__name__: f for f in (parity, gridworld, abab, add, flipflop, cyclic, dihedral, quaternion,
                                    symmetric, alternating, permutation_reset)}


SLOW = {"gridworld", "abab"}  # about 10 s each on a 2-core machine


@pytest.mark.parametrize("family", [pytest.param(f, marks=pytest.mark.slow) if f in SLOW else f for f in FAMILIES])
def test_table_family_is_exact_at_T100(family: str) -> None:
    table, start, sample = FAMILIES[family]()
    a = from_table(table, start=start, name=family)
    model = compiler.compile_automaton(a, max_len=T)
    words = sample(np.random.default_rng(0), 32)
    assert words.shape == (32, T) and words.min() >= 0 and words.max() < a.n_symbols
    with torch.no_grad():
        got = model(torch.from_numpy(words)).argmax(-1).numpy()
    assert np.array_equal(got, simulate(a, words)), family
    assert verify(model, samples=4, exhaustive_budget=256, family_limit=1, layerwise=False).exact
