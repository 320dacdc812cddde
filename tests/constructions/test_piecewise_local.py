"""The piecewise-local construction (constructions/piecewise_local.py): PLT languages compile at
max(2, runs) <= k layers, exact and certified; a model wrong on one key is refused; a language
outside the class is refused by name."""

from __future__ import annotations

import dataclasses

import pytest

from compiler.automata.errors import ShortcutError
from compiler.automata.load import load_spec
from compiler.automata.shares import shared_budget
from compiler.automata.subregular_families import random_language
from compiler.pipeline import compile_automaton
from constructions import piecewise_local
from constructions.construction import Refusal
from verify.certify import certify
from verify.check import verify

from tests.constructions.test_piecewise import misroute_last_key


def _compiled(k: int, letters: int, seed: int, max_len: int, **kw):
    return compile_automaton(random_language("plt", k=k, letters=letters, seed=seed), max_len=max_len, **kw)


@pytest.mark.slow
def test_auto_takes_piecewise_local():
    """PLT_2 on 64 letters (8 states): 2 layers (product and starfree were 3 and 5)."""
    model = _compiled(2, 64, 0, 50, readout="labels")
    assert model.meta["method"] == "piecewise-local" and len(model.blocks) == 2
    assert certify(model).certified is True


@pytest.mark.parametrize("k,letters,seed,max_len", [(2, 16, 0, 50), (2, 16, 0, 256), (3, 3, 4, 50)])
def test_at_most_k_layers_exact_and_certified(k, letters, seed, max_len):
    model = _compiled(k, letters, seed, max_len, method="piecewise-local")
    assert len(model.blocks) <= max(2, k)
    assert verify(model, samples=8, seed=0).exact
    cert = certify(model)
    assert cert.certified is True, cert.reason


def test_a_model_wrong_on_one_key_is_refused():
    """Send one joint-lookup key unit to another state: the certificate names the last MLP."""
    model = _compiled(2, 16, 0, 50, method="piecewise-local")
    misroute_last_key(model, piecewise_local.STATE)
    cert = certify(model)
    assert cert.certified is False and cert.supported is True
    assert "plt" in cert.failure["where"]


def test_outside_the_class_is_refused_by_name():
    with pytest.raises(ShortcutError, match="a letter has a cycle"):
        compile_automaton(load_spec("parity"), max_len=16, method="piecewise-local")


def test_the_declared_program_is_certified_and_a_wrong_key_state_is_refused(monkeypatch, declared_then_refused):
    """One key's state changed in the plan -- in the joint lookup's weights and its declared table
    alike -- is refused by the program proof, naming an input the model gets wrong."""
    good = piecewise_local.detect

    def bad(automaton):
        p, reason = good(automaton)
        i = len(p.states) - 1
        return dataclasses.replace(p, states=(*p.states[:i], (p.states[i] + 1) % p.local.n_states)), reason

    def corrupt():
        monkeypatch.setattr(piecewise_local, "detect", bad)
        return _compiled(2, 16, 0, 24, method="piecewise-local")
    declared_then_refused(_compiled(2, 16, 0, 24, method="piecewise-local"), piecewise_local.build, corrupt)


def test_a_shared_budget_is_refused_by_name_and_the_automaton_alone_is_searched():
    """Planned among a product's quotients (a shared budget) the detection does not run; alone, the
    same automaton gets its plan."""
    a = random_language("plt", k=2, letters=16, seed=0)
    with shared_budget(4):
        refused = piecewise_local.applies(a)
    assert isinstance(refused, Refusal) and "planned together" in refused.reason
    assert not isinstance(piecewise_local.applies(a), Refusal)
