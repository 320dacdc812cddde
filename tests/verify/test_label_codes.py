"""The verifier's check of a label lookup's input (verify/check.py ``_label_codes``): the state
codes after the last block against the reference state's codes, within the lookup's tolerance."""

from __future__ import annotations

import copy
import dataclasses

import compiler
from compiler.automata.load import load_spec
from verify.check import verify

QUICK = {"samples": 4, "exhaustive_budget": 256, "family_limit": 2}


def _corner_model():
    a = load_spec("grid2d:3,3")
    corners = ("0,0", "0,2", "2,0", "2,2")
    a = dataclasses.replace(a, outputs=tuple("c" if s in corners else "n" for s in a.states))
    return compiler.compile_automaton(a, max_len=16, readout="labels")


def test_the_lookup_input_is_measured_against_its_tolerance() -> None:
    model = _corner_model()
    r = verify(model, **QUICK)
    entry = [m for m in r.margins["mlps"] if m["mlp"].startswith("labels.lookup")]
    assert r.exact and len(entry) == 1
    assert entry[0]["inputs"] == "gw0:state, gw1:state" and entry[0]["worst_input_noise"] == 0.0
    assert entry[0]["distance_to_boundary"] == entry[0]["input_tolerance"] > 0


def test_codes_off_their_record_fail_the_check_by_name() -> None:
    """A model whose recorded codes disagree with what its residual holds (one state's code off
    by one) is not exact, and the failure names the lookup."""
    model = _corner_model()
    meta = copy.deepcopy(model.meta)
    codes = meta["readout"]["notes"]["codes"]
    codes[1] = [c + 1 for c in codes[1]]
    model.meta = meta
    r = verify(model, **QUICK)
    assert not r.exact
    assert any("labels.lookup" in f for f in r.invariants.failures)
