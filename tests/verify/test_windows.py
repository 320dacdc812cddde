"""The window lemma (verify/certify/windows.py) against the heads' own semantics: the plain locally
testable construction's offset heads forget the window letters no key goes on to read, yet the
readout agrees with the full memory's at every position of every input up to a length; a model
broken on one rare window is still refused, naming an input that separates it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from compiler.automata.subregular_families import random_language
from compiler.pipeline import compile_automaton
from constructions import factors
from constructions.obligations import SuffixLookup
from verify.certify import certify
from verify.certify import program as program_module
from verify.certify.certificate import obligations_of
from verify.certify.program import _fixed_values, build
from verify.certify import windows as windows_module
from verify.certify.windows import FORGOTTEN, Letters, Windows, _forget, _output, quotient, window_settings

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


def _setting(model):
    """The window lemma's setting of a model's program (its first suffix lookup)."""
    ob = obligations_of(model)
    program = build(ob, model.max_len, _fixed_values(model))
    readers, _ = program_module._readers(ob)
    ctx = program_module._context(ob, readers, program.positional)
    order = [f for layer, hs in zip(ob.layers, program.heads) for f, h in zip(layer.fetches, hs) if h is not None]
    (setting,) = window_settings(ob, ctx, model.max_len, order)
    return ob, ctx, order, setting


def test_the_quotient_keeps_one_window_memory_per_class():
    """The quotient's classes: every member reads out, along every word of up to four letters,
    what the class's kept memory reads out (the lookup's additions, NotCovered included); the
    classes are far fewer than the window memories, and the search's pairs fewer than without it."""
    model = _model()
    _, _, _, w = _setting(model)
    classes = quotient(w)
    assert classes is not None and len(set(classes.values())) < len(classes) // 3
    letters, seen = w.letters.codes, {}

    def outputs(memory, depth):
        if depth == 0:
            return ()
        out = []
        for x in letters:
            new = _forget(tuple((*window[1:], x[j]) for j, window in enumerate(memory, start=1)), w)
            out.append((_output(w, memory, x, seen), outputs(new, depth - 1)))
        return tuple(out)
    for member, kept in list(classes.items())[:: max(1, len(classes) // 60)]:
        assert outputs(member, 4) == outputs(kept, 4)
    pairs = certify(model).program["pairs"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(windows_module, "quotient", lambda w: None)
        assert certify(model).program["pairs"] > 2 * pairs


def test_the_quotient_needs_letter_codes():
    """A window head whose destination holds a code in some token row (so the lookup reads more
    than the head's copy): the quotient's conditions fail and it is not taken (the first lemma
    still is)."""
    model = _model()
    ob, ctx, order, w = _setting(model)
    assert w.letters is not None
    name = ob.layers[0].fetches[0].dst
    codes = {**ob.embedding.codes, name: np.ones_like(np.asarray(ob.embedding.codes[name]))}
    bad = replace(ob, embedding=replace(ob.embedding, codes=codes))
    (w2,) = window_settings(bad, ctx, model.max_len, order)
    assert w2.letters is None and quotient(w2) is None


def test_the_quotient_tells_apart_what_only_a_later_letter_shows():
    """One key, 'c b a' read back from offset 0 (the codes a=1, b=2, c=3 at every offset, 0 the
    pad): after 'c' and after nothing every letter adds 0, yet 'b a' then tells them apart -- the
    classes are refined by the letters' successors, not only by what the next letter adds."""
    rows = {(1, 2, 3): np.ones(1)}
    lookup = SuffixLookup("m", ("c0", "back1", "back2"), "out", rows)
    allowed = {(j, d): frozenset(tuple((float(key[o]),) for o in range(j - d, j)) for key in rows if len(key) > j)
               for j in (1, 2) for d in range(j)}
    letters = tuple(((float(x),),) * 3 for x in (1, 2, 3))
    w = Windows({1: 0, 2: 1}, allowed, lookup, Letters(letters, (((0.0,),), ((0.0,), (0.0,))), 1))
    classes = quotient(w)

    def after(word):
        memory = w.letters.start
        for x in word:
            memory = _forget(tuple((*window[1:], letters[x][j]) for j, window in enumerate(memory, start=1)), w)
        return memory
    start, c, cb = after([]), after([2]), after([2, 1])
    seen = {}
    assert {_output(w, m, x, seen) for m in (start, c) for x in letters} == {(0.0,)}
    assert _output(w, cb, letters[0], seen) == (1.0,)
    assert classes[c] != classes[start] and len({classes[m] for m in (start, c, cb)}) == 3
