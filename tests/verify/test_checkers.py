"""The weight checks by kind (verify/certify/checkers.py): a kind without a rule is refused by
name, never passed, in the heads, the MLPs and the program's semantics alike."""

from __future__ import annotations

import dataclasses

import pytest

from compiler.pipeline import compile_automaton
from constructions.obligations import Fetch, Lookup, Steps
from verify.certify import certificate as certificate_module
from verify.certify import certify
from verify.certify.checkers import CHECKS
from verify.certify.semantics import MLPS, NotCovered, run_mlp


@dataclasses.dataclass(frozen=True)
class NewLookup(Lookup):
    """A kind no checker knows (not registered: the family's table is left as it is)."""

    kind = "new-lookup"


@dataclasses.dataclass(frozen=True)
class NewFetch(Fetch):
    kind = "new-fetch"


@pytest.fixture(scope="module")
def lookback():
    return compile_automaton("nth-last:3", max_len=16, method="lookback")


def _with(monkeypatch, change):
    """Make ``certify`` read the obligations ``change`` returns."""
    good = certificate_module.obligations_of
    monkeypatch.setattr(certificate_module, "obligations_of", lambda m: change(good(m)))


def test_the_lookback_model_is_certified_with_its_own_kinds(lookback):
    assert certify(lookback).certified is True


def test_an_mlp_kind_without_a_weight_check_is_refused_by_name(monkeypatch, lookback):
    def renamed(ob):
        layer = ob.layers[0]
        mlp = NewLookup(**{f.name: getattr(layer.mlp, f.name) for f in dataclasses.fields(layer.mlp)})
        return dataclasses.replace(ob, layers=(dataclasses.replace(layer, mlp=mlp),))
    _with(monkeypatch, renamed)
    cert = certify(lookback)
    assert cert.certified is False and cert.supported is False
    assert "the obligation kind 'new-lookup' has no weight check" in cert.reason, cert.reason
    assert "new-lookup" in cert.program["not_covered"]  # nor has it a semantics


def test_a_known_kind_taken_out_of_the_table_is_refused_not_passed(monkeypatch, lookback):
    monkeypatch.delitem(CHECKS, Lookup)
    cert = certify(lookback)
    assert cert.certified is False and "the obligation kind 'lookup' has no weight check" in cert.reason


def test_a_head_kind_without_a_weight_check_is_refused_by_name(monkeypatch, lookback):
    def renamed(ob):
        layer = ob.layers[0]
        heads = tuple(NewFetch(f.head, f.key, f.src, f.dst) for f in layer.fetches)
        return dataclasses.replace(ob, layers=(dataclasses.replace(layer, fetches=heads),))
    _with(monkeypatch, renamed)
    cert = certify(lookback)
    assert cert.certified is False and "the obligation kind 'new-fetch' has no weight check" in cert.reason


def test_the_semantics_names_an_mlp_kind_it_has_no_rule_for():
    assert NewLookup not in MLPS
    with pytest.raises(NotCovered, match="new-lookup"):
        run_mlp(NewLookup("m", ("x",), "y", {}), {"x": (0.0,), "y": (0.0,)}, {})


def test_a_step_kind_without_a_weight_check_is_refused_by_name(monkeypatch, lookback):
    def stepped(ob):
        layer = ob.layers[0]
        new = NewLookup(**{f.name: getattr(layer.mlp, f.name) for f in dataclasses.fields(layer.mlp)})
        return dataclasses.replace(ob, layers=(dataclasses.replace(layer, mlp=Steps(layer.mlp.mlp, (new,))),))
    _with(monkeypatch, stepped)
    cert = certify(lookback)
    assert cert.certified is False and "the step kind 'new-lookup' has no weight check" in cert.reason
