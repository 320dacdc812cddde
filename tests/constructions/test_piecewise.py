"""The piecewise construction (constructions/piecewise.py): SP and PT languages compile with auto
at <= k layers, exact and certified; a model broken on one key is refused; a language outside the
class is refused by name."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from compiler.automata.errors import ShortcutError
from compiler.automata.load import load_spec
from compiler.automata.subregular_families import random_language
from compiler.pipeline import compile_automaton, set_start
from constructions import piecewise
from verify.certify import certify
from verify.check import verify


def _compiled(cls: str, k: int, letters: int, seed: int, max_len: int, **kw):
    return compile_automaton(random_language(cls, k=k, letters=letters, seed=seed), max_len=max_len, **kw)


def test_auto_takes_piecewise():
    model = _compiled("sp", 2, 4, 0, 50)
    assert model.meta["method"] == "piecewise" and len(model.blocks) <= 2


@pytest.mark.parametrize("cls,k,letters,seed", [("sp", 2, 4, 0), ("pt", 3, 4, 2)])
@pytest.mark.parametrize("max_len", [50, 256])
def test_at_most_k_layers_exact_and_certified(cls, k, letters, seed, max_len):
    model = _compiled(cls, k, letters, seed, max_len, method="piecewise")
    assert len(model.blocks) <= k
    assert verify(model, samples=8, seed=0).exact
    cert = certify(model)
    assert cert.certified is True, cert.reason


def test_labels_read_acceptance_and_are_certified():
    model = _compiled("sp", 3, 4, 1, 64, method="piecewise", readout="labels")
    assert len(model.blocks) <= 3
    assert verify(model, samples=8, seed=0).exact
    assert certify(model).certified is True


def test_a_model_wrong_on_one_key_is_refused():
    """Send one final-lookup key unit to another state: wrong exactly on the inputs whose progress
    is that key; the certificate names the last MLP."""
    model = _compiled("pt", 3, 4, 2, 50, method="piecewise")
    assert certify(model).certified
    misroute_last_key(model, "pw:state")
    cert = certify(model)
    assert cert.certified is False and cert.supported is True
    assert "pw.mlp" in cert.failure["where"]


def test_outside_the_class_is_refused_by_name():
    with pytest.raises(ShortcutError, match="is not a self-loop: not piecewise testable"):
        compile_automaton(load_spec("parity"), max_len=16, method="piecewise")


def test_start_moves_by_detecting_again():
    """From a later start the relevant subsequences differ: the plan is detected again, and a plan
    of another shape is refused with a message (the model is left as it was)."""
    model = _compiled("sp", 2, 4, 0, 32, method="piecewise")
    set_start(model, model.automaton.states[model.automaton.start])
    assert verify(model, samples=4, seed=1).exact
    sink = next(q for q, o in zip(model.automaton.states, model.automaton.outputs) if o == "reject")
    with pytest.raises(ShortcutError, match="piecewise"):
        set_start(model, sink)
    assert verify(model, samples=4, seed=1).exact


MAX_CERTIFIED_KEYS = 700
"""The checker's bound on the last MLP costs about keys^3: larger final lookups are verified by
sampling here (benchmarks/piecewise.py measures them)."""


@pytest.mark.slow
@pytest.mark.parametrize("cls", ["sp", "pt"])
@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("letters", [4, 16, 64])
def test_sweep_at_most_k_layers_certified_at_50_and_256(cls, k, letters):
    a = random_language(cls, k=k, letters=letters, seed=0)
    for max_len in (50, 256):
        model = compile_automaton(a, max_len=max_len, method="piecewise")
        assert len(model.blocks) <= k
        if model.meta["piecewise"]["final_keys"] > MAX_CERTIFIED_KEYS:
            assert verify(model, samples=16, seed=0).exact
            continue
        cert = certify(model)
        assert cert.certified is True, cert.reason


def misroute_last_key(model, subspace: str) -> None:
    """Send the last MLP's last key unit that writes ``subspace`` (a state one-hot) to the next
    state instead: one table entry wrong, reached on the inputs of that key only."""
    mlp = model.blocks[-1].mlp
    W = getattr(mlp, mlp.weight_name(mlp.n_hidden))
    cols = torch.as_tensor(model.subspace(subspace))
    with torch.no_grad():
        out = W.T if W.shape[-1] != model.config.d_model else W  # [units, d_model]
        unit = int(torch.nonzero(out[:, cols].abs().sum(1))[-1])
        q = int(torch.argmax(out[unit, cols]))
        out[unit, cols[q]], out[unit, cols[(q + 1) % len(cols)]] = 0.0, 1.0


def test_the_declared_program_is_certified_and_a_wrong_key_state_is_refused(monkeypatch, declared_then_refused):
    """The obligations certified are the program's own declaration, proved against the automaton;
    one progress tuple's state changed in the plan -- so in the final lookup's weights and its
    declared table alike -- is refused by the program proof, naming an input the model gets wrong."""
    good = piecewise.detect

    def bad(automaton):
        p, reason = good(automaton)
        i = len(p.states) - 1
        return dataclasses.replace(p, states=(*p.states[:i], (p.states[i] + 1) % p.n_states)), reason

    def corrupt():
        monkeypatch.setattr(piecewise, "detect", bad)
        return _compiled("pt", 3, 3, 0, 24, method="piecewise")
    declared_then_refused(_compiled("pt", 3, 3, 0, 24, method="piecewise"), piecewise.build, corrupt)
