"""The window lemma (verify/certify/windows.py) against the heads' own semantics: the plain locally
testable construction's offset heads forget the window letters no key goes on to read, yet the
readout agrees with the full memory's at every position of every input up to a length; a model
broken on one rare window is still refused, naming an input that separates it."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.automata.subregular_families import random_language
from compiler.pipeline import compile_automaton
from constructions import factors
from verify.certify import certify
from verify.certify import program as program_module
from verify.certify.certificate import obligations_of
from verify.certify.program import _fixed_values, build
from verify.certify.windows import FORGOTTEN

from tests.verify.test_residues import side_by_side


def _model(max_len: int = 12):
    """SL_4 on 4 letters: three offset heads read by one suffix lookup."""
    return compile_automaton(random_language("sl", k=4, letters=4, seed=0), max_len=max_len, method=factors.NAME)


def test_the_lemmas_memory_reads_out_as_the_full_memory():
    """Every input of length <= 6: the readout under the lemma (forgotten window letters) and under
    the heads' own semantics, position by position; the lemma's memories are fewer."""
    model = _model()
    ob = obligations_of(model)
    lemma = build(ob, model.max_len, _fixed_values(model))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(program_module, "window_settings", lambda *args: [])
        full = build(ob, model.max_len, _fixed_values(model))
    assert lemma.canonical is not None and full.canonical is None
    pairs = side_by_side(lemma, full, " + ".join(ob.readout.reads), model.automaton.n_symbols, 6)
    assert len(pairs) == sum(4**i for i in range(1, 7))
    assert any(v == FORGOTTEN for nl, _ in pairs for part in nl if isinstance(part, tuple) for v in part)
    assert len({nl for nl, _ in pairs}) < len({nf for _, nf in pairs}) // 2


def test_a_model_wrong_on_one_rare_window_is_refused(monkeypatch):
    """The longest key of the first lookup loses its row, in the weights and the obligations alike
    (both read factors.first_rows): the model is wrong only on inputs ending with that window, and
    the certificate refuses it under the lemma, naming such an input."""
    good = factors.first_rows

    def bad(plan):
        rows = good(plan)
        key = max(rows, key=lambda k: (len(k), k))
        rows[key] = np.zeros_like(rows[key])
        return rows
    monkeypatch.setattr(factors, "first_rows", bad)
    model = _model()
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "program", cert.reason
    word = cert.failure["detail"].split("'")[1]
    a = model.automaton
    states = [a.states[q] for q in a.run([a.alphabet.index(x) for x in word.split()])]
    assert model.simulate([word.split()])[0] != states
