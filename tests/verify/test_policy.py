"""Which checks a model gets (verify/policy.py): a proof, then only a cross-check."""

from __future__ import annotations

from dataclasses import replace

from verify.certify import SCHEMA, Certificate
from verify.policy import COMPILE_SAMPLING, CROSS_CHECK, VERIFY_SAMPLING, Sampling, sampling_for


def test_a_proved_model_gets_the_cross_check_without_the_layerwise_samples():
    proved = Certificate(SCHEMA, "scan", 8, "float32", certified=True)
    got = sampling_for(proved, VERIFY_SAMPLING)
    assert got == CROSS_CHECK and got.layerwise is False
    smaller = sampling_for(proved, replace(COMPILE_SAMPLING, samples=3))  # never more than the caller asked
    assert smaller.samples == 3 and smaller.exhaustive_budget == CROSS_CHECK.exhaustive_budget
    assert smaller.family_limit == min(CROSS_CHECK.family_limit, COMPILE_SAMPLING.family_limit)


def test_an_unproved_model_gets_the_full_sampling_with_its_invariants():
    for cert in (None, Certificate(SCHEMA, "scan", 8, "float32", certified=False, supported=False),
                 Certificate(SCHEMA, "scan", 8, "float32", certified=False)):
        got = sampling_for(cert, VERIFY_SAMPLING)
        assert got == VERIFY_SAMPLING and got.layerwise is True  # verify's default: invariants on


def test_a_sampling_is_verify_keyword_arguments():
    assert Sampling(5, 10, None).options() == {"samples": 5, "exhaustive_budget": 10, "family_limit": None,
                                               "layerwise": True}
    assert Sampling(5, 10, None).at_most(Sampling(3, 100, 2, layerwise=False)) == Sampling(3, 10, 2, layerwise=False)
