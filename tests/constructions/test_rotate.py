"""A model in a random orthogonal basis computes the same function: exact, same patterns."""

from __future__ import annotations

import pytest
import torch

from compiler.automata.errors import ShortcutError
from compiler.pipeline import compile_automaton, set_start
from constructions.basis import basis_matrix, standard_residual
from constructions.rotate import rotate
from constructions.checkpoint import load, save
from verify.policy import COMPILE_SAMPLING, check

PATTERN_ATOL = 1e-5
"""Attention patterns of the rotated model agree with the original's to this (float32; measured: <= 2e-6)."""


@pytest.fixture(scope="module", params=["dyck:2,2", "nth-last:3", "dihedral:4"])
def pair(request):
    model = compile_automaton(request.param, max_len=24)
    return model, rotate(model, seed=5)


def test_rotated_models_are_exact_and_patterns_unchanged(pair):
    model, rotated = pair
    tokens = torch.randint(0, model.config.n_symbols, (6, 24), generator=torch.Generator().manual_seed(0))
    _, a = model.run_with_cache(tokens)
    _, b = rotated.run_with_cache(tokens)
    patterns = [k for k in a if k.endswith("hook_pattern")]
    assert patterns
    for k in patterns:
        assert torch.allclose(a[k], b[k], atol=PATTERN_ATOL), k
    assert torch.equal(model.predict(tokens), rotated.predict(tokens))
    result = check(rotated, sampling=COMPILE_SAMPLING)
    assert result.exact and result.n_positions > 0
    assert result.certificate is not None and result.certificate.supported is False
    assert "rotated basis" in (result.certificate.reason or "")


def test_the_weights_really_move_and_decode_back(pair):
    model, rotated = pair
    assert not torch.allclose(model.W_E, rotated.W_E)
    assert (rotated.W_E.abs() > 1e-6).float().mean() > (model.W_E.abs() > 1e-6).float().mean()  # denser
    tokens = torch.zeros(1, 5, dtype=torch.long)
    x = standard_residual(rotated, rotated.residual(tokens))
    assert torch.allclose(x, model.residual(tokens).double(), atol=1e-5)
    Q = basis_matrix(rotated)
    assert Q is not None and torch.allclose(torch.from_numpy(Q @ Q.T), torch.eye(Q.shape[0], dtype=torch.float64))


def test_rotation_is_deterministic_and_seed_dependent(tmp_path):
    model = compile_automaton("parity", max_len=8)
    save(rotate(model, 3), tmp_path / "a.safetensors")
    save(rotate(model, 3), tmp_path / "b.safetensors")
    save(rotate(model, 4), tmp_path / "c.safetensors")
    data = [(tmp_path / f"{n}.safetensors").read_bytes() for n in "abc"]
    assert data[0] == data[1] != data[2]
    assert load(tmp_path / "a.safetensors").meta["basis"] == {"kind": "orthogonal", "seed": 3, "heads": True}


def test_refusals():
    model = compile_automaton("flipflop", max_len=8)
    rotated = rotate(model, 1)
    with pytest.raises(ShortcutError, match="already in a rotated basis"):
        rotate(rotated, 2)
    with pytest.raises(ShortcutError, match="seed"):
        rotate(model, -1)
    with pytest.raises(ShortcutError, match="rotated basis keeps its start"):
        set_start(rotated, rotated.automaton.states[1])


@pytest.mark.integration  # runs in CI's TransformerLens environment (the README's integration command)
@pytest.mark.parametrize("name", ["dyck:2,2", "nth-last:3"])
def test_transformer_lens_export_of_a_rotated_model_agrees_up_to_rounding(name):
    """Known limit (docs/zoo.md, benchmarks/results/rotated_export_rounding.md): the export is
    bit-exact in the standard basis but cannot be in a rotated one -- TransformerLens computes
    every projection at the export's zero-padded widths (one d_model with the unfolded scratch
    dims, one head count, one MLP width), and the BLAS kernel picks its reduction order from the
    shape, so dense dot products round differently from ours.  What holds: the embedding bit for
    bit, the same argmax everywhere, and logits and every layer's pattern within the first-order
    float32 bound of the chain (exported blocks x d_model x eps x the largest value)."""
    pytest.importorskip("transformer_lens.model_bridge", reason="the transformer-lens extra (4.x) is not installed")
    from compiler.export import bos_tokens, to_transformer_bridge, to_transformer_lens
    from constructions.unfold import origins

    plain = compile_automaton(name, max_len=16)
    tokens = torch.randint(0, plain.config.n_symbols, (3, 16), generator=torch.Generator().manual_seed(1))
    eps = torch.finfo(plain.W_E.dtype).eps
    for model, exact in ((plain, True), (rotate(plain, 9), False)):
        bridge = to_transformer_bridge(model)
        with torch.no_grad():
            ours, cache = model.run_with_cache(tokens)  # the explicit attention path, as TransformerLens's
            theirs, tcache = bridge.run_with_cache(bos_tokens(tokens, model.bos_id))
        d = model.config.d_model
        assert torch.equal(tcache["blocks.0.hook_resid_pre"][..., :d], cache["blocks.0.hook_resid_pre"])
        config = to_transformer_lens(model).config
        chain = config["n_layers"] * config["d_model"] * eps  # relative first-order rounding of the whole chain
        if exact:
            assert torch.equal(ours, theirs[:, 1:])
        else:
            assert torch.equal(ours.argmax(-1), theirs[:, 1:].argmax(-1))
            assert float((ours - theirs[:, 1:]).abs().max()) <= chain * float(ours.abs().max())
        for i, o in enumerate(origins(model)):
            if o.stage == 0:
                H = model.config.blocks[o.layer].n_heads
                a, b = tcache[f"blocks.{i}.attn.hook_pattern"][:, :H], cache[f"blocks.{o.layer}.attn.hook_pattern"]
                assert torch.equal(a, b) if exact else float((a - b).abs().max()) <= chain


def test_read_decodes_named_subspaces_in_a_rotated_basis(pair):
    model, rotated = pair
    tokens = torch.randint(0, model.config.n_symbols, (2, 24), generator=torch.Generator().manual_seed(3))
    _, a = model.run_with_cache(tokens)
    _, b = rotated.run_with_cache(tokens)
    for name in model.meta["subspaces"]:
        for layer in range(len(model.blocks) + 1):
            assert torch.allclose(model.read(a, name, layer), rotated.read(b, name, layer), atol=1e-3), (name, layer)
