"""The starfree construction (constructions/starfree.py): generated star-free languages (past LTL of
temporal depth k) compile to since programs, exact and certified; the planner takes it where it is
the shallowest; a corrupted declaration entry is refused with a separating input; a language that
is not aperiodic is refused by name."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from compiler.automata.errors import ShortcutError
from compiler.automata.load import load_spec
from compiler.automata.starfree import detect
from compiler.automata.subregular_families import draw, random_language
from compiler.pipeline import compile_automaton, set_start
from constructions import starfree
from verify.certify import certify
from verify.check import verify


def _compiled(k: int, letters: int, seed: int, max_len: int, **kw):
    return compile_automaton(random_language("sf", k=k, letters=letters, seed=seed), max_len=max_len, **kw)


@pytest.mark.parametrize("k,letters,seed", [(2, 4, 0), (2, 64, 0), (3, 4, 0), (4, 4, 0)])
def test_exact_and_certified(k, letters, seed):
    model = _compiled(k, letters, seed, 50, method="starfree")
    assert len(model.blocks) <= k
    assert verify(model, samples=8, seed=0).exact
    cert = certify(model)
    assert cert.certified is True, cert.reason


@pytest.mark.parametrize("k,letters,seed", [(3, 64, 1), (5, 4, 0)])
def test_a_language_the_greedy_search_refused_compiles_and_certifies(k, letters, seed):
    """Aperiodic automata the one-pass greedy search refused: the backtracking beam's program
    compiles, is exact on sampled inputs, and certifies (the walk's keys checked by the program proof)."""
    model = _compiled(k, letters, seed, 50, method="starfree")
    assert model.meta["method"] == "starfree"
    assert verify(model, samples=8, seed=0).exact
    cert = certify(model)
    assert cert.certified is True, cert.reason


def test_the_program_is_the_definition_on_every_short_word():
    """The walk's proof, checked against the language's own definition (the formula's semantics),
    on every word up to length 5 over 4 letters: the model's state is accepting exactly there."""
    lang, a = draw("sf", k=3, letters=4, seed=0)
    model = compile_automaton(a, max_len=8, method="starfree")
    words = [list(w) for n in range(1, 6) for w in itertools.product(range(4), repeat=n)]
    got = model.simulate([[a.alphabet[x] for x in w] for w in words])
    final = {s: o for s, o in zip(a.states, a.outputs)}
    assert all((final[g[-1]] == "accept") == lang.accepts(w) for g, w in zip(got, words))


def test_auto_takes_it_where_the_cascade_is_deeper():
    """sf k = 2 on 64 letters: krohn-rhodes takes 5 layers, the since program 2."""
    model = _compiled(2, 64, 0, 50, readout="labels")
    assert model.meta["method"] == "starfree" and len(model.blocks) == 2
    cands = {c["name"]: c for c in model.meta["candidates"]}
    kr = cands["krohn-rhodes"]  # deeper, or skipped: its floor is deeper
    assert (kr["layers"] or 0) > 2 or kr["refusal"].startswith("skipped: at least")


@pytest.mark.parametrize("k,letters,seed", [(2, 4, 0), (3, 64, 1)])
def test_a_wrong_table_entry_is_refused(monkeypatch, declared_then_refused, k, letters, seed):
    """One key of the last lookup sent to another state in the plan -- so in the weights and the
    declared table alike -- is refused by the program proof, naming an input the model gets wrong
    (also in a 4-layer program the backtracking search found where the greedy one refused)."""
    good = starfree.detect

    def bad(automaton):
        p, reason = good(automaton)
        last = p.layers[-1]
        i = len(last.values) - 1
        wrong = dataclasses.replace(last, values=(*last.values[:i], (last.values[i] + 1) % p.n_states))
        return dataclasses.replace(p, layers=(*p.layers[:-1], wrong)), reason

    def corrupt():
        monkeypatch.setattr(starfree, "detect", bad)
        return _compiled(k, letters, seed, 24, method="starfree")
    declared_then_refused(_compiled(k, letters, seed, 24, method="starfree"), starfree.build, corrupt)


def test_a_wrong_reset_colour_is_refused(monkeypatch):
    """One flagged code's colour changed in a reset feature, in the weights and the declaration alike:
    the next lookup then reads a key the walk never proved, which the program proof refuses on a
    named input (the model may still be right there: the claim, not the output, fails first)."""
    good = starfree.detect

    def bad(automaton):
        p, reason = good(automaton)
        i = next(i for i, x in enumerate(p.layers) if x.resets)
        layer = p.layers[i]
        (code, colour), *rest = layer.resets[0]
        flipped = ((code, (colour + 1) % layer.colours[0]), *rest)
        changed = dataclasses.replace(layer, resets=(flipped, *layer.resets[1:]))
        return dataclasses.replace(p, layers=(*p.layers[:i], changed, *p.layers[i + 1:])), reason

    monkeypatch.setattr(starfree, "detect", bad)
    cert = certify(_compiled(2, 4, 0, 24, method="starfree"))
    assert cert.certified is False and cert.failure["where"] == "program"
    assert "on the input 'a0'" in cert.failure["detail"]


def test_not_aperiodic_is_refused_by_name():
    with pytest.raises(ShortcutError, match="not aperiodic"):
        compile_automaton(load_spec("parity"), max_len=16, method="starfree")
    plan, why = detect(load_spec("cyclic:3"))
    assert plan is None and "cycle of length >= 2" in why


def test_plan_round_trips():
    plan, _ = detect(random_language("sf", k=3, letters=16, seed=0))
    assert plan is not None
    assert type(plan).from_dict(plan.to_dict()) == plan


def test_start_moves_by_detecting_again():
    model = _compiled(2, 4, 0, 32, method="starfree")
    a = model.automaton
    for q in a.states:
        try:
            set_start(model, q)
        except ShortcutError as e:
            assert "starfree" in str(e) or "star-free" in str(e)
            continue
        assert verify(model, samples=4, seed=1).exact


@pytest.fixture(scope="module")
def deep_256():
    """sf k = 6 on 16 letters at max_len 256: a 5-layer since program whose third layer's heads
    compare flags the second lookup writes at a precision of 1/(2 * 257)."""
    return _compiled(6, 16, 0, 256, readout="labels")


@pytest.mark.slow
def test_a_deep_program_certifies_at_256(deep_256):
    """The second lookup's flags are charged one rounding per step unit (verify/certify/affine.py),
    about 3e-5, not u (|4 x| + |b|) = 7e-4, a third of the recency gap (sf.step3 was refused)."""
    assert deep_256.meta["method"] == "starfree"
    cert = certify(deep_256)
    assert cert.certified is True, cert.reason


@pytest.mark.slow
def test_a_flag_written_a_little_high_on_one_key_is_refused(deep_256):
    """One key of the second lookup writes layer 3's first flag as 1.3, within half its gap of 1:
    that key's positions outscore later flagged ones by up to 0.6 (T + 1) positions, so the head
    may copy a stale colour -- refused where the heads' copies are read."""
    mlp = deep_256.blocks[1].mlp
    flag = deep_256.meta["subspaces"]["sf:flag3.0"][0]
    W = mlp.weight(mlp.n_hidden)
    units = torch.nonzero(W[:, flag] == 1).flatten()
    assert len(units) > 1
    with torch.no_grad():
        W[units[-1], flag] = 1.3
    try:
        cert = certify(deep_256)
        assert cert.certified is False
        assert "layer 3" in cert.failure["where"], cert.reason
    finally:
        with torch.no_grad():
            W[units[-1], flag] = 1.0
