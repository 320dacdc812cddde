"""The fused attention path (scaled_dot_product_attention) against the explicit one, and when each runs."""

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.simulate import simulate
from constructions.layers import Attention
from constructions.model import positional_layers
from verify.check import adversarial_families

CASES = [("quaternion", "scan"), ("cyclic:3", "krohn-rhodes"), ("quaternion", "krohn-rhodes"), ("grid:4", "gridworld")]
T = 128
LOGIT_BOUND = 1e-4
"""Largest |fused - explicit| logit allowed here; benchmarks/results/fused_attention.md records the
measured differences (0 for all 22 automata at T = 256; 2.9e-6 for the S5 scan at T = 1024)."""


@pytest.fixture
def calls(monkeypatch):
    """Counts of Attention.fused_attention / explicit_attention calls."""
    seen = {"fused": 0, "explicit": 0}
    fused, explicit = Attention.fused_attention, Attention.explicit_attention

    def count_fused(self, *args):
        seen["fused"] += 1
        return fused(self, *args)

    def count_explicit(self, *args):
        seen["explicit"] += 1
        return explicit(self, *args)

    monkeypatch.setattr(Attention, "fused_attention", count_fused)
    monkeypatch.setattr(Attention, "explicit_attention", count_explicit)
    return seen


@pytest.mark.parametrize("name,method", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_fused_and_explicit_agree(name, method, calls):
    model = compiler.compile_automaton(name, max_len=T, method=method)
    a = model.automaton
    toks = np.concatenate([np.random.default_rng(0).integers(0, a.n_symbols, (16, T)),
                           *adversarial_families(a.n_symbols, T).values()])
    tokens = torch.from_numpy(toks)
    assert model.fused  # the default
    with torch.no_grad():
        fused = model(tokens)
        assert calls == {"fused": len(model.blocks), "explicit": 0}
        model.fused = False
        explicit = model(tokens)
        assert calls == {"fused": len(model.blocks), "explicit": len(model.blocks)}
        model.fused = True
    assert float((fused - explicit).abs().max()) <= LOGIT_BOUND
    assert torch.equal(fused.argmax(-1), explicit.argmax(-1))
    assert np.array_equal(fused.argmax(-1).numpy(), simulate(a, toks))


def test_a_hook_on_the_pattern_takes_the_explicit_path_until_removed(calls):
    model = compiler.compile_automaton("quaternion", max_len=16, method="scan")
    tokens = torch.randint(0, model.bos_id, (3, 16), generator=torch.Generator().manual_seed(0))
    L = len(model.blocks)
    seen = []
    handle = model.get_submodule("blocks.0.attn.hook_pattern").register_forward_hook(
        lambda mod, inp, out: seen.append(out.shape))
    try:
        hooked = model(tokens)
    finally:
        handle.remove()
    assert seen == [(3, 1, 17, 17)]  # fired once, with the [batch, head, query, key] pattern
    assert calls == {"fused": L - 1, "explicit": 1}  # only the hooked layer materialises its pattern
    again = model(tokens)
    assert calls == {"fused": 2 * L - 1, "explicit": 1}  # removed: back to fused everywhere
    assert torch.equal(hooked.argmax(-1), again.argmax(-1))


def test_a_patching_hook_on_the_pattern_changes_the_plain_forward():
    model = compiler.compile_automaton("quaternion", max_len=16, method="scan")
    tokens = torch.randint(0, model.bos_id, (3, 16), generator=torch.Generator().manual_seed(0))
    want = model(tokens)
    hp = model.get_submodule("blocks.0.attn.hook_pattern")
    handle = hp.register_forward_hook(lambda mod, inp, out: torch.zeros_like(out))
    try:
        patched = model(tokens)
    finally:
        handle.remove()
    assert not torch.equal(patched, want)


def test_run_with_cache_is_explicit_and_restores_the_switch(calls):
    model = compiler.compile_automaton("cyclic:3", max_len=16, method="krohn-rhodes")
    tokens = torch.randint(0, model.bos_id, (3, 16), generator=torch.Generator().manual_seed(0))
    L = len(model.blocks)
    logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n == "hook_resid_final")
    assert calls == {"fused": 0, "explicit": L}  # explicit even when no attention hook is cached
    assert model.fused
    with model.explicit_attention():
        assert not model.fused
        assert torch.equal(logits, model(tokens))  # the cache's logits are the explicit forward's, bit for bit
    assert model.fused
    model.fused = False
    model.run_with_cache(tokens)
    assert not model.fused  # a model switched off stays off


@pytest.mark.parametrize("name,method", [("symmetric:5", "scan"), ("quaternion", "krohn-rhodes"), ("grid:4", "gridworld")])
def test_a_positional_layer_computes_its_pattern_once_for_the_batch(name, method, monkeypatch):
    """Layers whose queries and keys read only input-independent dims (every scan layer, both Q8
    cascade layers, the gridworld's prefix-mean layer, not its nearest-value layer) take
    shared_attention on the fused path, and it gives the per-sequence fused forward bit for bit."""
    model = compiler.compile_automaton(name, max_len=64, method=method)
    tokens = torch.from_numpy(np.random.default_rng(1).integers(0, model.bos_id, (12, 64)))
    shared = positional_layers(model)
    assert shared[0] and (all(shared) if method != "gridworld" else shared == [True, False])
    calls = []
    real = Attention.shared_attention
    monkeypatch.setattr(Attention, "shared_attention", lambda self, *a: calls.append(1) or real(self, *a))
    with torch.no_grad():
        once = model(tokens)
        assert len(calls) == sum(shared)
        per_sequence = torch.cat([model(tokens[i:i + 1]) for i in range(len(tokens))])  # batch 1: plain SDPA
        assert len(calls) == sum(shared)
        with model.explicit_attention():
            explicit = model(tokens)
    assert torch.equal(once, per_sequence)
    assert float((once - explicit).abs().max()) <= LOGIT_BOUND and torch.equal(once.argmax(-1), explicit.argmax(-1))
