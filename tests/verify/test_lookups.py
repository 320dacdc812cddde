"""The weight checker's lookup rule on an MLP split into independent parts (stage A): a part's
contribution to the next layer keeps its input-error coefficients through that layer's weights,
so the two units of a step pair cancel there (verify/certify/lookups.py)."""

import itertools
import math
from contextlib import contextmanager

import pytest
import torch

from compiler import compile_automaton
from compiler.automata.subregular_families import random_language
from verify.certify import lookups
from verify.certify.certificate import certify


@pytest.fixture(scope="module")
def ltt_256():
    """LTT k = 6 on 4 letters (84 states) at max_len 256: its caps read counts up to 256 (input
    radius ~0.06), which the part-by-part bound charged twice per step pair (0.515 > 1/2)."""
    return compile_automaton(random_language("ltt", k=6, letters=4, seed=0), max_len=256, readout="labels")


def test_capped_counts_up_to_256_are_certified_through_the_step_pairs_cancellation(ltt_256):
    cert = certify(ltt_256)
    assert cert.certified is True, cert.reason


@contextmanager
def cap_one_too_low(model):
    """The model with the first cap's step units shifted by one count (it caps count - 1): wrong
    wherever that count is 1 or 2; restored afterwards."""
    mlp = model.blocks[1].mlp
    count = model.meta["subspaces"]["fac:count0"][0]
    units = torch.nonzero(mlp.W_in[count]).flatten()
    assert len(units) > 0
    with torch.no_grad():
        mlp.b_in[units] -= mlp.W_in[count, units]
    try:
        yield model
    finally:
        with torch.no_grad():
            mlp.b_in[units] += mlp.W_in[count, units]


def test_a_cap_reading_its_count_one_too_low_is_still_refused(ltt_256):
    """Refused at the fused caps and final lookup."""
    with cap_one_too_low(ltt_256) as broken:
        cert = certify(broken)
    assert cert.certified is False
    assert "fac.final" in cert.failure["where"]


def test_stage_b_goes_through_in_chunks_of_bounded_floats(ltt_256, monkeypatch):
    """Stage B with chunks of 2^12 floats of the next layer's width (the default, 2^22, holds
    this model's cuts whole): several chunks, each within them, each chunk's radius its own rows'
    -- still certified, and the cap one too low still refused."""
    monkeypatch.setattr(lookups, "AFFINE_CHUNK", 1 << 12)
    chunks = []

    def recorded(*args, **kw):
        grid, cut, Ws = args[-1], args[8], args[1]
        chunks.append(len(grid) * Ws[cut + 1].shape[1])
        return rows(*args, **kw)

    rows = lookups._stage_b_rows
    monkeypatch.setattr(lookups, "_stage_b_rows", recorded)
    cert = certify(ltt_256)
    assert cert.certified is True, cert.reason
    assert len(chunks) > 1 and max(chunks) <= 1 << 12
    with cap_one_too_low(ltt_256) as broken:
        cert = certify(broken)
    assert cert.certified is False and "fac.final" in cert.failure["where"]


def test_combinations_over_the_row_float_budget_are_refused_naming_it(ltt_256, monkeypatch):
    """A lookup whose combinations times written dims exceed ROW_FLOAT_BUDGET is refused (not
    certifiable), the refusal naming the budget, before any array of that size is built."""
    monkeypatch.setattr(lookups, "ROW_FLOAT_BUDGET", 1000)
    cert = certify(ltt_256)
    assert cert.certified is False and cert.supported is False
    assert "ROW_FLOAT_BUDGET 1,000 floats" in cert.reason


def test_the_cheapest_cut_is_tried_first(monkeypatch):
    """PT_6 on 64 letters (600 states): its state lookup splits at two cuts, the tighter one
    with ~1.4M signature combinations; the cheap cut settles every write, so stage B checks a few
    thousand combinations (it checked the 1.4M when the tightest hull was taken first)."""
    model = compile_automaton(random_language("pt", k=6, letters=64, seed=0), max_len=50, readout="labels",
                              method="piecewise")
    checked = []

    class TooMany(Exception):
        """Raised before stage B checks a costly cut (certify passes it on)."""

    def counted(*args, **kw):
        parts = args[9]
        checked.append(math.prod(len(p[1]) for p in parts))
        if sum(checked) >= 100_000:
            raise TooMany(checked)
        return stage_b(*args, **kw)

    stage_b = lookups._stage_b
    monkeypatch.setattr(lookups, "_stage_b", counted)
    cert = certify(model)
    assert cert.certified is True, cert.reason
    assert checked and sum(checked) < 100_000


@pytest.fixture(scope="module")
def plt_5_4():
    """PLT k = 5 on 4 letters (piecewise-local): its last MLP runs the parts' steps, then the
    joint lookup's step units and its 138 key units, then the state's one-hot."""
    return compile_automaton(random_language("plt", k=5, letters=4, seed=0), max_len=50, readout="labels")


def _key_layer(model):
    """The last MLP's key-unit layer: its weights and biases (as torch parameters) and each key
    unit's label (its state's row of the output layer, then the unembedding)."""
    mlp = model.blocks[-1].mlp
    W, b, out = mlp.weight(mlp.n_hidden - 1), mlp.bias(mlp.n_hidden - 1), mlp.weight(mlp.n_hidden)
    labels = [int(torch.argmax(model.W_U[torch.argmax(out[u])])) for u in range(W.shape[1])]
    return W, b, labels


@contextmanager
def fires_on_two_keys(model):
    """The model with a key unit u of the joint lookup firing on its own key and, harder, on the
    next key v (the last such pair whose states have different labels; adjacent keys differ in
    one input): its pre-activation pre_u + 2 pre_v + 2 is 1 at u's key, 3 at v's (u's state wins
    there) and at most -1 elsewhere; restored afterwards."""
    W, b, labels = _key_layer(model)
    u = max(i for i in range(W.shape[1] - 1) if labels[i] != labels[i + 1])
    saved = W[:, u].clone(), b[u].clone()
    with torch.no_grad():
        W[:, u] += 2 * W[:, u + 1]
        b[u] += 2 * b[u + 1] + 2
    try:
        yield model
    finally:
        with torch.no_grad():
            W[:, u], b[u] = saved


def test_stage_b_leaves_out_units_off_in_every_row_and_still_refuses_a_key_unit_firing_on_two_keys(
        plt_5_4, monkeypatch):
    """The joint lookup split (SPLIT_ABOVE 100) with stage B in chunks of 2^12 floats: its key
    units read the hull sums, and a chunk's rows turn a few of them on -- the others, surely off
    in every row, are left out (:func:`~verify.certify.affine.possibly_on`).  Certified; and with
    one key unit also firing on a neighbouring key (wrong on some words of 6 letters), refused at
    the fused final lookup."""
    keys = _key_layer(plt_5_4)[0].shape[1]
    monkeypatch.setattr(lookups, "SPLIT_ABOVE", 100)
    monkeypatch.setattr(lookups, "AFFINE_CHUNK", keys)  # one row per chunk
    kept = []

    def recorded(x, r, u):
        on = possibly_on(x, r, u)
        if x.shape[1] == keys:
            kept.append(len(on))
        return on

    possibly_on = lookups.possibly_on
    monkeypatch.setattr(lookups, "possibly_on", recorded)
    cert = certify(plt_5_4)
    assert cert.certified is True, cert.reason
    assert kept and max(kept) < keys / 2
    a = plt_5_4.automaton
    words = [[a.alphabet[i] for i in w] for w in itertools.product(range(a.n_symbols), repeat=6)]
    right = plt_5_4.simulate(words)
    with fires_on_two_keys(plt_5_4) as broken:
        assert broken.simulate(words) != right
        cert = certify(broken)
    assert cert.certified is False
    assert "plt.final" in cert.failure["where"], cert.failure
