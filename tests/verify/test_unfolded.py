"""An unfolded standard-shape model is certified through the model it unfolds
(verify/certify/unfolded.py), and refused when it is not exactly that unfolding."""

from __future__ import annotations

import torch

import compiler
from verify.certify.certificate import certify


def test_an_unfolded_cascade_is_certified_through_its_folded_model():
    model = compiler.compile_automaton("cyclic:3", max_len=24, method="krohn-rhodes", shape="standard")
    assert len(model.blocks) == 6  # one 6-hidden-layer MLP unfolded
    cert = certify(model)
    assert cert["certified"], cert.get("reason")
    assert cert["unfolded"]["layers"] == 1


def test_one_changed_scratch_weight_is_refused():
    """A weight only the unfolding has (a scratch identity of a middle stage): no longer the unfolding."""
    model = compiler.compile_automaton("cyclic:3", max_len=24, method="krohn-rhodes", shape="standard")
    scratch = model.subspace("unfold:a")
    with torch.no_grad():
        w = model.blocks[1].mlp.weight(0)
        row = scratch[0]
        col = int(torch.nonzero(w[row]).flatten()[0])
        w[row, col] *= 1.0 + 2.0**-10
    cert = certify(model)
    assert not cert["certified"]
    assert cert["failure"]["where"] == "unfolded"
