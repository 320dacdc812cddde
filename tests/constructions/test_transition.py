"""The transition construction: a one-step quotient's previous state and the letter (constructions/transition.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.errors import InputError
from compiler.automata.mealy import mealy_moore
from compiler.automata.moore import minimise
from compiler.automata.spec import from_dict
from compiler.automata.transitions import transition_plan
from constructions.labels import label_unembedding
from constructions import registry, transition
from tests.compiler.automata.test_mealy import random_mealy
from verify.certify import certify
from verify.check import verify


def _moore(n: int, k: int, o: int, seed: int):
    """The minimal Moore machine over a random Mealy machine's transitions."""
    return minimise(mealy_moore(from_dict(random_mealy(n, k, o, seed))).moore).quotient


def test_it_applies_where_letters_merge_states_and_refuses_elsewhere():
    a = _moore(5, 3, 3, 3)
    plan = registry.get("transition").applies(a)
    assert plan.quotient.n_states == 5 and plan.n_states == a.n_states
    assert transition_plan(compiler.load_spec("cyclic:5")) is None
    assert "same state under every letter" in registry.get("transition").applies(compiler.load_spec("parity")).reason


def test_a_near_full_quotient_is_refused_before_any_detection_runs(monkeypatch):
    """A random 32-state Mealy machine read by its states: one pair of states merges (31 of 32)."""
    a = from_dict(random_mealy(32, 2, 4, 7))
    assert transition_plan(a).quotient.n_states == 31
    c = registry.get("transition")
    refusal = c.applies(a)
    assert "keeps 31 of its 32 states" in refusal.reason
    monkeypatch.setattr(transition, "MAX_QUOTIENT_RATIO", 1.0)  # the rule off: it applies (its estimate would run)
    assert c.applies(a).quotient.n_states == 31


def test_compiled_certified_and_a_broken_lookup_row_is_refused():
    a = _moore(5, 3, 3, 3)
    model = compiler.compile_automaton(a, max_len=16, method="transition")
    assert model.metadata.method == "transition" and model.meta["transition"]["inner"] == "scan"
    cert = certify(model)
    assert cert.certified and verify(model, samples=8).exact
    # the look-back fetches Q's code alone, so the program proof's memory is Q's state (not the
    # scan's whole map: the prefix's map on every point, the transformation semigroup)
    assert cert.program["memories"] <= transition_plan(a).quotient.n_states
    rng = np.random.default_rng(0)
    toks = torch.from_numpy(rng.integers(0, a.n_symbols, (4, 16)))
    assert model.predict(toks).tolist() == [a.run(r) for r in toks.tolist()]
    W = model.blocks[-1].mlp.W_out  # one key's output (one transition's target) made wrong
    col = model.subspace("tr:state")[0]
    unit = int(np.flatnonzero(W[:, col].detach().numpy())[0])
    with torch.no_grad():
        W[unit, col] += 1.0
    cert = certify(model)
    assert not cert.certified and "tr.lookup" in cert.reason
    assert not verify(model, samples=8).exact


def test_labels_and_another_start():
    a = _moore(4, 2, 2, 3)
    labels = compiler.compile_automaton(a, max_len=32, method="transition", readout="labels")
    assert certify(labels).certified and verify(labels, samples=8).exact
    states = compiler.compile_automaton(a, max_len=32, method="transition")
    with pytest.raises(InputError, match="compile the spec again with that start"):  # its lookup's keys change
        compiler.with_start(states, a.states[1])


def test_codes_and_label_slopes_are_centred():
    """The certifier charges each label line |slope| x the code's radius: centred codes and slopes
    halve both (a 16-label transition model's readout is refused otherwise)."""
    a = _moore(6, 3, 4, 5)
    plan = transition_plan(a)
    codes = np.asarray(plan.codes)
    assert sorted(codes.tolist()) == list(range(-((len(codes) - 1) // 2), len(codes) // 2 + 1))
    labels = sorted(set(a.outputs), key=a.outputs.index)
    state_label = [labels.index(o) for o in a.outputs]
    W_U = np.zeros((1, a.n_states))
    W_U[0] = 2.0 * codes
    W, b, notes = label_unembedding(W_U, -(codes.astype(float) ** 2), state_label, len(labels))
    assert np.abs(W).max() == len(labels) - 1 and W.sum() == 0
    logits = codes[:, None] * W[0] + b  # at every exact code its label wins by at least 1
    top = logits[np.arange(len(codes)), state_label]
    others = np.where(np.eye(len(labels), dtype=bool)[state_label], -np.inf, logits).max(1)
    assert (top - others).min() >= 1.0


def test_the_declared_program_is_certified_and_a_wrong_step_entry_is_refused(monkeypatch):
    """One declaration: (a) the model is certified against exactly the program its build declares
    (Q's program, the look-back block's gadgets, the readout); (b) one entry of the step table the
    lookup reads -- the weights and the declared program alike -- sends the start's class to another
    state under the first letter: the program proof refuses, naming an input the model gets wrong."""
    from constructions import transition
    from constructions.construction import BuildOptions

    a = _moore(5, 3, 3, 3)
    model = compiler.compile_automaton(a, max_len=16, method="transition")
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    c, plan = registry.plan_of(model)
    assert cert.obligations_sha256 == c.build(a, plan, BuildOptions.of_model(model))[0].obligations().digest()

    good = transition._entries

    def wrong(plan, keys):
        step = [list(row) for row in plan.step]
        c0 = plan.quotient.start
        step[0][c0] = (step[0][c0] + 1) % plan.n_states
        return good(dataclasses.replace(plan, step=tuple(tuple(r) for r in step)), keys)
    monkeypatch.setattr(transition, "_entries", wrong)
    broken = compiler.compile_automaton(a, max_len=16, method="transition")
    cert = certify(broken)
    assert cert.certified is False and cert.failure["where"] == "program", cert.failure
    word = cert.failure["detail"].split("'")[1].split()
    assert broken.simulate([word])[0] != [a.states[q] for q in a.run([a.alphabet.index(x) for x in word])]
