"""Which checks a model gets (verify/policy.py): a proof, then only a cross-check."""

from __future__ import annotations

from verify.policy import COMPILE_SAMPLING, CROSS_CHECK, VERIFY_SAMPLING, sampling_for


def test_a_proved_model_gets_the_cross_check_without_the_layerwise_samples():
    proved = {"certified": True}
    got = sampling_for(proved, VERIFY_SAMPLING)
    assert {k: got[k] for k in CROSS_CHECK} == CROSS_CHECK and got["layerwise"] is False
    smaller = sampling_for(proved, {**COMPILE_SAMPLING, "samples": 3})  # never more than the caller asked
    assert smaller["samples"] == 3 and smaller["exhaustive_budget"] == CROSS_CHECK["exhaustive_budget"]


def test_an_unproved_model_gets_the_full_sampling_with_its_invariants():
    for cert in (None, {"certified": False, "supported": False}, {"certified": False}):
        got = sampling_for(cert, VERIFY_SAMPLING)
        assert got == VERIFY_SAMPLING and "layerwise" not in got  # verify's default: invariants on
