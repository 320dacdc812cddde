"""Ground-truth circuits say what each head does; traces hold what the model computed."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from compiler.pipeline import compile_automaton
from constructions.rotate import rotate
from constructions.circuit import CIRCUIT_SCHEMA, INTENDED_KEYS, circuit, sample_inputs, traces


@pytest.fixture(scope="module")
def nth_last():
    return compile_automaton("nth-last:3", max_len=12)


def test_offset_heads_attend_where_their_intended_key_says(nth_last):
    c = circuit(nth_last)
    assert c["schema"] == CIRCUIT_SCHEMA and json.loads(json.dumps(c)) == c
    heads = [h for layer in c["layers"] for h in layer["heads"]]
    offsets = [h for h in heads if h["role"] == "offset"]
    assert offsets and all(h["intended_key"]["description"] == INTENDED_KEYS["offset"] for h in offsets)
    t = traces(nth_last, sample_inputs(nth_last, 3, seed=1))
    T = nth_last.max_len
    for h in offsets:
        k = h["intended_key"]["offset"]
        want = torch.tensor([max(q - k, 0) for q in range(T + 1)])
        got = t["attends.0"][:, h["index"]]
        assert torch.equal(got, want.expand_as(got)), h["name"]


def test_every_residual_dim_has_a_meaning_and_the_readout_reads_the_state(nth_last):
    c = circuit(nth_last)
    assert [r["dim"] for r in c["residual"]] == list(range(nth_last.config.d_model))
    assert all(r["subspace"] in c["subspaces"] for r in c["residual"])
    assert c["readout"]["reads"] == ["loc:state"]
    assert c["readout"]["outputs"] == list(nth_last.automaton.states)


def test_traces_hold_the_reference_and_decode_the_same_in_any_basis(nth_last):
    tokens = sample_inputs(nth_last, 4, seed=2)
    a, b = traces(nth_last, tokens), traces(rotate(nth_last, 11), tokens)
    assert torch.equal(a["expected"], a["predicted"]) and torch.equal(a["states"], a["expected"])
    assert a.keys() == b.keys() and torch.equal(a["attends.0"], b["attends.0"])
    for l in range(len(nth_last.blocks) + 1):
        assert torch.allclose(a[f"resid.{l}"], b[f"resid.{l}"], atol=1e-4)
    letter = a["resid.0"][:, 1:, nth_last.subspace("loc:letter")].numpy()  # the embedding's letter code
    codes = {tok: np.unique(letter[tokens == tok], axis=0) for tok in (0, 1)}
    assert len(codes[0]) == len(codes[1]) == 1 and not np.array_equal(codes[0], codes[1])


def test_label_models_trace_labels_and_roles_of_other_constructions():
    spec = {"states": ["a", "b", "c"], "alphabet": ["x", "y"], "start": "a",
            "transitions": {"a": {"x": "b", "y": "a"}, "b": {"x": "c", "y": "a"}, "c": {"x": "c", "y": "a"}},
            "outputs": {"a": "no", "b": "no", "c": "yes"}}
    m = compile_automaton(spec, max_len=8, readout="labels")
    t = traces(m, sample_inputs(m, 3, seed=0))
    assert torch.equal(t["expected"], t["predicted"])
    roles = {h["role"] for layer in circuit(compile_automaton("dyck:2,2", max_len=8))["layers"] for h in layer["heads"]}
    assert {"prefix-mean", "last-push", "any-flag"} <= roles
