"""An unfolded standard-shape model is certified through the model it unfolds
(verify/certify/unfolded.py), and refused when it is not exactly that unfolding."""

from __future__ import annotations

import torch

import compiler
from verify.certify.certificate import certify
from verify.check import UNFOLDED_NOTE, verify


def test_an_unfolded_cascade_is_certified_through_its_folded_model():
    model = compiler.compile_automaton("cyclic:4", max_len=100, method="krohn-rhodes", shape="standard")
    assert len(model.blocks) == 2  # one 2-hidden-layer MLP (the counter's staircase) unfolded
    cert = certify(model)
    assert cert.certified, cert.reason
    assert cert.unfolded["layers"] == 1


def test_one_changed_scratch_weight_is_refused():
    """A weight only the unfolding has (a scratch identity of a middle stage): no longer the unfolding."""
    model = compiler.compile_automaton("cyclic:4", max_len=100, method="krohn-rhodes", shape="standard")
    scratch = model.subspace("unfold:a")
    with torch.no_grad():
        w = model.blocks[1].mlp.weight(0)
        row = scratch[0]
        col = int(torch.nonzero(w[row]).flatten()[0])
        w[row, col] *= 1.0 + 2.0**-10
    cert = certify(model)
    assert not cert.certified
    assert cert.failure["where"] == "unfolded"


def test_verify_skips_the_layerwise_invariants_of_an_unfolded_model_and_checks_every_position():
    model = compiler.compile_automaton("blocks:4", max_len=12, method="local", shape="standard")
    assert model.meta["shape"]["unfolded"]  # (a gridworld is two standard blocks as built)
    result = verify(model, samples=2, seed=0, exhaustive_budget=64)
    assert result.exact and result.invariants is not None and result.invariants.skipped == UNFOLDED_NOTE
