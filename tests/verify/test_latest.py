"""Most-recent-match heads and "some flag so far" (verify/certify/latest.py): the bounded stack certified.

The stack's level heads take, for each level, the last push that raised the depth to it (which
key wins depends on the input); its error bit asks whether any flag occurred so far.  Both
variants are certified: ``dyck:n,k`` (error sink) on every input, ``dyck-legal:n,k`` under the
promise of legal inputs.  Soundness first: a model made wrong on rare inputs -- one position's
recency, one stack-lookup entry, a too-cold error head -- is refused naming the obligation."""

from __future__ import annotations

import pytest
import torch

from compiler.automata.load import load_spec
from compiler.pipeline import compile_automaton, with_start
from verify.certify import certificate_text, certify
from verify.check import verify


def _stack(spec: str, max_len: int, readout: str = "states"):
    promise = "legal" if spec.startswith("dyck-legal") else None
    return compile_automaton(load_spec(spec, promise=promise), max_len=max_len, method="bounded-stack",
                             readout=readout)


@pytest.mark.parametrize("spec, max_len", [
    ("dyck-legal:4,2", 64),  # the paper's Dyck: 2 layers, depth prefix sum + last push per level
    ("dyck-legal:2,3", 48),
    ("dyck:2,2", 64),  # the error sink: a third layer, "some flag so far"
    ("dyck:4,2", 48),
])
def test_bounded_stacks_are_certified_and_the_promise_is_recorded(spec, max_len):
    cert = certify(_stack(spec, max_len))
    assert cert.certified is True, cert.reason
    legal = spec.startswith("dyck-legal")
    assert (cert.promise is not None) is legal  # the legal variant holds on legal inputs only, and says so
    assert ("every legal input" in certificate_text(cert)) is legal
    heads = [h["name"] for layer in cert.layers for h in layer.get("heads", [])]
    assert "st.open1" in heads and ("st.any" in heads) is not legal


@pytest.mark.parametrize("start", ["[[(", "error"])
def test_a_start_stack_is_certified(start):
    """A start state with levels already full (the depth sum starts at d0, BOS holds s0), or the
    sink (BOS carries the error flag)."""
    model = with_start(_stack("dyck:3,2", 32), start)
    cert = certify(model)
    assert cert.certified is True, cert.reason


def test_a_level_head_that_takes_one_old_push_for_a_recent_one_is_refused_naming_it():
    """Position 30 looks five positions more recent than it is: a push there outranks the pushes
    to its level at 31..34 -- wrong only on inputs that push to one level at 30 and again soon
    after.  The certificate names the head and the position."""
    model = _stack("dyck-legal:2,2", 64)
    with torch.no_grad():
        model.W_pos[30, model.subspace("pos:index")] += 5
    cert = certify(model)
    assert cert.certified is False and cert.supported is True
    assert cert.failure["where"].startswith("layer 2 head st.open")
    assert "key 30 may score as high" in cert.failure["detail"]
    a = model.automaton
    word = ["(", ")"] * 14 + ["(", "[", "]", "("]  # level 2 pushed at 30 ([) and again at 32 (()
    assert a.states[a.run([a.symbol_index[x] for x in word])[-1]] != model.simulate([word])[0][-1]


def test_a_wrong_stack_entry_for_one_level_and_symbol_is_refused_naming_the_lookup():
    """The stack bit of level 4 holding symbol 1 negated: wrong only at depth 4 with a 1 on top."""
    model = _stack("dyck-legal:4,2", 64)
    with torch.no_grad():
        model.blocks[1].mlp.W_out[4 * 2 - 1] *= -1
    cert = certify(model)
    assert cert.certified is False
    assert cert.failure["where"] == "layer 2 MLP st.stack"
    assert "code combination (" in cert.failure["detail"]


def test_an_error_head_too_cold_to_see_one_flag_is_refused_naming_it():
    """beta3 / 40: one flag among hundreds of clean positions no longer lifts the head's output
    over the threshold -- wrong on inputs with a single early error and a long clean tail."""
    model = _stack("dyck:2,2", 256)
    with torch.no_grad():
        model.blocks[2].attn.W_Q /= 40
    cert = certify(model)
    assert cert.certified is False
    assert cert.failure["where"] in ("layer 3 head st.any", "layer 3 MLP st.error")


def test_the_depth_decode_and_its_promise_claim():
    """Under the promise the depth decode is checked on 0..D only; the sink variant on every
    depth -T..T, the residue gadget's exact output past the first error included."""
    legal, sink = certify(_stack("dyck-legal:2,2", 32)), certify(_stack("dyck:2,2", 32))
    assert legal.certified and sink.certified
    assert legal.obligations_sha256 != sink.obligations_sha256


SWEEP = [("dyck:2,1", 10, "states"), ("dyck:2,2", 6, "states"), ("dyck-legal:2,2", 12, "states"),
         ("dyck-legal:3,1", 12, "states"),
         ("dyck:2,1", 8, "labels")]  # accept/reject: the label lookup beside the error threshold


@pytest.mark.slow
@pytest.mark.parametrize("spec, max_len, readout", SWEEP)
def test_random_perturbations_certified_only_when_exact_on_every_input(spec, max_len, readout, perturbation_sweep):
    """Soundness sweep over small stacks: random perturbations of one weight tensor (a few
    entries, relative sizes 1e-7 .. 1e-1); whenever the certificate passes, the exhaustive check
    over every input (every legal input, under the promise) up to max_len finds no error.  Both
    outcomes must occur (a label model too: its lookup beside the last MLP)."""
    base = _stack(spec, max_len, readout)

    def errors(model) -> int:
        result = verify(model, samples=0, seed=0, exhaustive_budget=model.automaton.n_symbols ** max_len * 2,
                        family_limit=1)
        assert result.checked["exhaustive_length"] == max_len
        return result.n_errors

    last_mlp = f"blocks.{len(base.blocks) - 1}.mlp."  # a label model: its last MLP, where the lookup sits
    skip = tuple(k for k in base.state_dict() if not k.startswith(last_mlp)) if readout == "labels" else ()
    outcomes = perturbation_sweep(base, errors, seed=1, skip=skip)
    assert outcomes["certified"] and outcomes["refused"], outcomes
