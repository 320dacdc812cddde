"""The factors construction (constructions/factors.py): locally (threshold) testable automata
compile with auto at their class depth, certified exact at max_len 50 and 256; a corrupted model
is refused by the certificate; label readouts are certified too."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from compiler.automata.subregular_families import random_language
from compiler.pipeline import compile_automaton
from constructions import factors
from verify.certify import certify
from verify.layerwise import invariants


def _languages(factor_language):
    return {
        "sl3_4": factor_language(4, 3, 1, [(1, 2, 1), (3, 3, 4)], lambda c: not any(c), name="sl3_4"),
        "lt4_16": factor_language(16, 4, 1, [(3, 1, 4, 1), (0, 5, 9, 2)], lambda c: c[0] > 0 or c[1] > 0,
                                  name="lt4_16"),
        "ltt2": factor_language(2, 2, 2, [(1, 2)], lambda c: c[0] >= 2, name="ltt22"),
        "ltt1": factor_language(3, 1, 3, [(1,)], lambda c: c[0] == 2, name="ltt13"),
    }


@pytest.mark.parametrize("name, layers", [("sl3_4", 2), ("lt4_16", 2), ("ltt2", 2), ("ltt1", 1)])
@pytest.mark.parametrize("max_len", [50, 256])
def test_auto_takes_factors_at_the_class_depth_certified(name, layers, max_len, factor_language):
    a = _languages(factor_language)[name]
    model = compile_automaton(a, max_len=max_len)  # auto: factors, or a smaller model as deep (local)
    assert len(model.blocks) <= layers
    mine = next(c for c in model.meta["candidates"] if c["name"] == factors.NAME)
    assert mine["fits"] and mine["layers"] == layers
    cert = certify(model)
    assert cert.certified is True, cert.reason


@pytest.mark.parametrize("max_len", [50, 256])
def test_the_factors_model_itself_is_certified(max_len, factor_language):
    model = compile_automaton(_languages(factor_language)["ltt2"], max_len=max_len, method=factors.NAME)
    assert certify(model).certified is True


def test_label_readouts_are_certified(factor_language):
    a = _languages(factor_language)["sl3_4"]
    model = compile_automaton(a, max_len=50, readout="labels")
    assert len(model.blocks) <= 2
    assert certify(model).certified is True


def test_a_first_lookup_wrong_on_one_factor_is_refused(factor_language):
    """Soundness: zero the output of the unit of one forbidden factor (a rare 3-letter window):
    the certificate names the first lookup."""
    a = _languages(factor_language)["sl3_4"]
    model = compile_automaton(a, max_len=50, method=factors.NAME)
    assert certify(model).certified is True
    W_out = model.blocks[0].mlp.W_out  # [key units, d_model]
    flag = model.subspace("fac:flag0")[0]
    with torch.no_grad():
        unit = int(torch.nonzero(W_out[:, flag]).reshape(-1)[0])  # the unit of one forbidden factor
        W_out[unit, flag] = 0.0
    cert = certify(model)
    assert cert.certified is False
    assert cert.failure["where"] == "layer 1 MLP fac.first" and "whose longest key is (" in cert.failure["detail"]


def _raise_key_unit(model, block: int) -> int:
    """Raise the bias of the first key unit writing ``fac:flag0`` in ``block``'s MLP by 2, so it
    fires where one of its codes differs (a rare window); returns the unit."""
    mlp = model.blocks[block].mlp
    flag = model.subspace("fac:flag0")[0]
    with torch.no_grad():
        unit = int(torch.nonzero(mlp.W_out[:, flag]).reshape(-1)[0])
        mlp.b_hid1[unit] += 2.0
    return unit


def test_a_key_unit_that_fires_off_its_key_is_refused(factor_language):
    """Soundness of the unit-by-unit rule: raise the bias of one forbidden factor's key unit by 2,
    so it fires where one of its three codes differs (a rare window): the key-unit check refuses it."""
    model = compile_automaton(_languages(factor_language)["sl3_4"], max_len=50, method=factors.NAME)
    unit = _raise_key_unit(model, 0)
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "layer 1 MLP fac.first"
    assert f"second-layer unit {unit} may be on off its key" in cert.failure["detail"], cert.failure


def test_the_estimate_is_the_built_model(factor_language):
    a = _languages(factor_language)["lt4_16"]
    plan = factors.applies(a)
    cost = factors.estimate(plan, 64)
    model = compile_automaton(a, max_len=64, method=factors.NAME)
    assert (len(model.blocks), sum(p.numel() for p in model.parameters())) == (cost.layers, cost.params)
    assert np.all(np.asarray(factors.n_codes(plan)) < 17)  # per offset only the classes its patterns hold


def _tiered(cls: str, letters: int):
    """A tier-based language of the generator (k = 2, seed 0) that no plain description fits."""
    return random_language(cls, k=2, letters=letters, seed=0)


@pytest.mark.parametrize("cls, letters", [("tsl", 16), ("tlt", 4)])
@pytest.mark.parametrize("max_len", [50, 256])
def test_tier_based_languages_compile_with_auto_in_three_layers_certified(cls, letters, max_len):
    a = _tiered(cls, letters)
    assert len(compile_automaton(a, max_len=max_len).blocks) <= 3  # auto: at most the class depth
    # (the tiered TLT on 4 letters has a 2-layer since program, which auto takes)
    model = compile_automaton(a, max_len=max_len, method=factors.NAME)
    assert len(model.blocks) == 3
    assert 0 < model.meta[factors.NAME]["tier"] < letters
    cert = certify(model)
    assert cert.certified is True, cert.reason
    tokens = np.random.default_rng(0).integers(0, letters, (8, 40))
    report = invariants(model, tokens)  # the generic check of the declared program
    assert not report.failures, report.failures


def test_a_tier_model_wrong_on_one_factor_is_refused():
    """Soundness: zero the unit of one factor in the tier's first lookup (layer 2): refused there."""
    model = compile_automaton(_tiered("tsl", 16), max_len=50, method=factors.NAME)
    W_out = model.blocks[1].mlp.W_out
    flag = model.subspace("fac:flag0")[0]
    with torch.no_grad():
        unit = int(torch.nonzero(W_out[:, flag]).reshape(-1)[0])
        W_out[unit, flag] = 0.0
    cert = certify(model)
    assert cert.certified is False
    assert cert.failure["where"] == "layer 2 MLP fac.first"


@pytest.mark.parametrize("cls, k, max_len", [("tsl", 3, 50), ("tlt", 3, 256), ("tsl", 4, 50)])
def test_wider_tier_windows_compile_in_three_layers_certified(cls, k, max_len):
    """k >= 3 on a tier: the tier count's residue mod k, matched (layer 2), fetches the k - 1 tier
    letters before the most recent one; 3 layers, certified end to end."""
    a = random_language(cls, k=k, letters=4, seed=0)
    model = compile_automaton(a, max_len=max_len, method=factors.NAME)
    plan = factors.applies(a)
    assert plan.k == k and factors.matched(plan) and len(model.blocks) == 3
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    tokens = np.random.default_rng(1).integers(0, 4, (8, 40))
    assert not invariants(model, tokens).failures


def _tier3():
    return random_language("tsl", k=3, letters=4, seed=0)


def test_a_match_head_looking_one_tier_letter_too_far_back_is_refused():
    """Soundness (weights): head fac.back1's query for one residue r looks for r - 2 instead of r - 1
    (wrong only where the tier count is r mod 3): the certificate names that head."""
    model = compile_automaton(_tier3(), max_len=50, method=factors.NAME)
    assert certify(model).certified is True
    head = model.blocks[1].attn
    M = 3
    q = model.subspace("fac:tcode")
    h = next(i for i, n in enumerate(model.meta["layers"][1]["heads"]) if n["offset"] == -1)  # fac.back1
    with torch.no_grad():
        row = head.W_Q[h, q[1]].clone()  # the query of residue 1 (looks for residue 0)
        head.W_Q[h, q[1]] = head.W_Q[h, q[(1 + M - 1) % M]]  # now it looks for residue 2 = 1 - 2 mod 3
        assert not torch.equal(row, head.W_Q[h, q[1]])
    cert = certify(model)
    assert cert.certified is False
    assert "fac.back1" in cert.failure["where"], cert.failure


def _definite(k: int):
    """Generated TLT languages whose tier automaton is definite (its last k - 1 tier letters decide)."""
    return random_language("tlt", k=k, letters={2: 4, 3: 6}[k], seed={2: 8, 3: 29}[k])


@pytest.mark.parametrize("k, layers", [(2, 1), (3, 2)])
@pytest.mark.parametrize("max_len", [50, 256])
def test_definite_tiers_compile_without_counts_certified(k, layers, max_len):
    """A definite tier: the first lookup writes the state (no count, no final lookup): 1 layer when
    the most recent tier letter decides, else 2 (the tier count mod k - 1, k - 2 match heads);
    auto is never deeper; certified, program proved, the declared program holds layer by layer."""
    a = _definite(k)
    assert len(compile_automaton(a, max_len=max_len, readout="labels").blocks) <= layers
    model = compile_automaton(a, max_len=max_len, method=factors.NAME)
    meta = model.meta[factors.NAME]
    assert len(model.blocks) == layers and meta["groups"] == 0 and meta["tier"]
    assert len(meta["offset_codes"]) == k - 1
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    assert not invariants(model, np.random.default_rng(2).integers(0, a.n_symbols, (8, 40))).failures


def test_a_definite_tier_key_unit_on_off_its_key_is_refused():
    """Soundness: the key unit of the definite tier's longest window (the rarest key: tier bit and
    the last two tier letters) gets its bias raised by 2, so it fires where one of its codes
    differs: refused by the key-unit check of the first lookup (layer 2)."""
    a = _definite(3)
    keys = sorted(factors.first_rows(factors.applies(a)))
    model = compile_automaton(a, max_len=50, method=factors.NAME)
    unit = keys.index(max(keys, key=len))
    mlp = model.blocks[1].mlp
    assert torch.any(mlp.W_out[unit, model.subspace("fac:state")] != 0)  # a unit of the state's lookup
    with torch.no_grad():
        mlp.b_hid1[unit] += 2.0
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "layer 2 MLP fac.first", cert.failure
    assert f"second-layer unit {unit} may be on off its key" in cert.failure["detail"], cert.failure


@pytest.mark.parametrize("language", [_tier3, lambda: _definite(3)], ids=["tsl3", "definite3"])
def test_a_tier_plan_declaring_a_wrong_state_is_refused_with_a_separating_input(monkeypatch, language):
    """Soundness (declaration): the plan's final table sends its last key to a wrong state; weights
    and obligations follow the plan, so the weights are proved, and the program proof refuses,
    naming an input on which the declared program and the automaton differ."""
    a = language()
    plan = factors.applies(a)
    wrong = next(q for q in range(a.n_states) if q != plan.states[-1])
    bad = dataclasses.replace(plan, states=(*plan.states[:-1], wrong))
    monkeypatch.setattr(factors, "find", lambda automaton: (bad, "corrupted"))
    model = compile_automaton(a, max_len=50, method=factors.NAME)
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "program", cert.reason
    word = cert.failure["detail"].split("on the input '")[1].split("'")[0].split()
    assert model.simulate([word])[0][-1] != a.states[a.run([a.alphabet.index(x) for x in word])[-1]]


def test_the_declared_program_is_certified_and_a_wrong_first_factor_is_refused(monkeypatch, declared_then_refused,
                                                                             factor_language):
    """One declaration: the obligations certified are the program's own (its gadgets' and its
    :class:`Declaration`), proved against the automaton; one factor of the plan (the forbidden
    3-factor 1 2 1 of sl3_4) read as another class at its middle letter -- so in the first lookup's
    weights and its declared table alike -- is refused by the program proof with a separating input."""
    a = _languages(factor_language)["sl3_4"]
    good = factors.find

    def bad(automaton):
        plan, reason = good(automaton)
        f = plan.factors[0]
        wrong = next(c for c in sorted(set(plan.classes)) if c != f[1])
        return dataclasses.replace(plan, factors=((f[0], wrong, *f[2:]), *plan.factors[1:])), reason

    def corrupt():
        monkeypatch.setattr(factors, "find", bad)
        return compile_automaton(a, max_len=16, method=factors.NAME)
    declared_then_refused(compile_automaton(a, max_len=16, method=factors.NAME), factors.build, corrupt)


def test_the_first_lookup_declares_its_keys_and_is_checked_unit_by_unit(factor_language):
    """The first lookup's obligation is its keys and rows (a SuffixLookup), never the product of
    the offsets' codes; the certificate checks it by its key units (verify/certify/suffix.py)."""
    a = _languages(factor_language)["lt4_16"]
    plan = factors.applies(a)
    model = compile_automaton(a, max_len=16, method=factors.NAME)
    cert = certify(model, with_obligations=True)
    assert cert.certified is True, cert.reason
    first = cert.obligations["layers"][0]["mlp"]
    assert first["kind"] == "suffix-lookup" and len(first["rows"]) == len(factors.first_rows(plan))
    assert cert.layers[0]["mlp"]["kind"] == "suffix lookup"
    assert 0 < cert.layers[0]["mlp"]["key units"] <= len(factors.first_rows(plan))  # per class: the keys it can meet


def test_tlt6_on_64_letters_is_certified_and_a_rare_key_unit_on_off_its_key_is_refused():
    """The issue's TLT_6 on 64 letters (seed 0): certified end to end (its first lookup reads 40,320
    code combinations, checked by its 32 key units; the program proof under the residue lemmas).
    Then the key unit of its one 6-factor (the rarest key: tier bit and six tier letters) gets its
    bias raised by 2, so it fires where one of its codes differs: refused by the key-unit check."""
    model = compile_automaton(random_language("tlt", k=6, letters=64, seed=0), max_len=50, method=factors.NAME)
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    assert cert.layers[1]["mlp"]["kind"] == "suffix lookup"
    unit = _raise_key_unit(model, 1)
    cert = certify(model)
    assert cert.certified is False and cert.failure["where"] == "layer 2 MLP fac.first"
    assert f"second-layer unit {unit} may be on off its key" in cert.failure["detail"], cert.failure
