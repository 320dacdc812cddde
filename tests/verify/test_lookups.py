"""The weight checker's lookup rule on an MLP split into independent parts (stage A): a part's
contribution to the next layer keeps its input-error coefficients through that layer's weights,
so the two units of a step pair cancel there (verify/certify/lookups.py)."""

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
