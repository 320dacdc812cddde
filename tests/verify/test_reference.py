"""The references agree: integer simulation, explicit recurrent module, scan windows."""

import itertools

import numpy as np
import pytest
import torch

from compiler.automata.catalog import build, entries
from verify.recurrent import RecurrentSimulator
from compiler.automata.simulate import simulate, window_maps

NAMES = [e.example for e in entries()] + ["symmetric:5", "alternating:5", "dyck:4,2", "grid:9"]


@pytest.mark.parametrize("name", NAMES)
def test_recurrent_module_agrees_with_integer_simulation(name):
    a = build(name)
    rnn = RecurrentSimulator(a)
    rng = np.random.default_rng(0)
    short = np.array(list(itertools.product(range(a.n_symbols), repeat=3)))
    for toks in (short, rng.integers(0, a.n_symbols, (16, 200))):
        want = simulate(a, toks)
        got = rnn(torch.from_numpy(toks)).argmax(-1).numpy()
        assert np.array_equal(got, want)
        # the hidden state stays an exact one-hot
        h = rnn(torch.from_numpy(toks))
        assert torch.all((h == 0) | (h == 1)) and torch.all(h.sum(-1) == 1)
        assert np.array_equal(rnn.states(torch.from_numpy(toks)).numpy(), want)


def test_simulation_matches_automaton_run():
    a = build("dyck:2,2")
    toks = np.random.default_rng(1).integers(0, a.n_symbols, (5, 30))
    want = np.array([a.run(row) for row in toks.tolist()])
    assert np.array_equal(simulate(a, toks), want)


def test_window_maps_end_in_prefix_maps():
    a = build("symmetric:4")
    toks = np.random.default_rng(2).integers(0, a.n_symbols, (3, 20))
    maps = window_maps(np.array(a.maps), toks, 5)
    prefix = maps[-1]  # window 32 >= 20: the whole prefix
    for q0 in range(a.n_states):
        assert np.array_equal(prefix[:, 1:, q0], simulate(a, toks, start=q0))
    # window 2: the map of the last two letters
    t = 7
    two = [a.maps[toks[0, t - 1]][x] for x in range(a.n_states)]
    two = [a.maps[toks[0, t]][x] for x in two]
    assert list(maps[1][0, t + 1]) == two
