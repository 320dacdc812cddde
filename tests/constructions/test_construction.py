"""The typed report every construction's layer-wise invariants return (constructions/construction.py,
``InvariantReport``): its JSON form is flat and lossless, and it is what the verifier's report prints."""

from __future__ import annotations

import json

import numpy as np
import pytest

import compiler
from constructions import registry
from constructions.construction import InvariantReport
from verify.check import verify
from verify.layerwise import invariants
from verify.report import report_dict


@pytest.fixture(scope="module")
def parity():
    return compiler.compile_automaton("parity", max_len=8, method="scan")


def test_a_scan_report_is_typed_and_its_json_is_flat_and_lossless(parity):
    construction, plan = registry.plan_of(parity)
    assert construction.invariants is None  # the generic check of the declared program
    report = invariants(parity, np.zeros((2, 8), dtype=np.int64))
    assert isinstance(report, InvariantReport) and report.failures == [] and report.sequences == 2
    out = report.to_json()
    assert list(out) == ["checked", "sequences", "deviations", "worst_deviation", "not_compared",
                         "program_readout_errors", "heads", "mlps", "failures"]
    assert out["worst_deviation"]["scan:map"] == report.measured["worst_deviation"]["scan:map"] == 0.0
    assert InvariantReport.from_json(json.loads(json.dumps(out))) == report


def test_a_skipped_report_keeps_only_what_it_says():
    skipped = InvariantReport(None, skipped="too long")
    assert skipped.to_json() == {"checked": None, "skipped": "too long", "failures": []}
    assert InvariantReport.from_json(skipped.to_json()) == skipped


def test_a_measured_entry_may_not_shadow_a_field():
    with pytest.raises(ValueError, match="failures"):
        InvariantReport("x", 1, measured={"failures": 0})


def test_the_verify_report_prints_the_json_form_without_the_margins_it_moved(parity):
    r = verify(parity, samples=4)
    printed = report_dict(r, parity)["invariants"]
    assert printed == r.invariants.to_json() and "heads" not in printed and "mlps" not in printed
    assert r.margins["heads"] and r.margins["mlps"] and r.invariant_failures == []
    assert report_dict(verify(parity, samples=4, layerwise=False), parity)["invariants"] == {}
