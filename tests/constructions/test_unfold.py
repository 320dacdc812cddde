"""Unfolding multi-layer MLPs into one-hidden-layer blocks is lossless: bitwise-equal logits.

Compared like with like: the original and the unfolded model on the same attention path
(fused with fused, explicit with explicit)."""


import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build
from compiler.automata.spec import Semiautomaton
from constructions.config import ModelConfig
from constructions.model import CompiledTransformer
from constructions.unfold import (SCRATCH, Exits, Origin, carries_activations, cleared, clearing_places,
                                  clearing_stages, exits, origins, scratch_widths, unfold)
from verify.certify.certificate import certify
from verify.check import adversarial_families

T = 32


def nth_last(n: int) -> Semiautomaton:
    """"The n-th letter from the end is a" (the catalog's nth-last:n, n-definite)."""
    return build(f"nth-last:{n}")


CASES = [("quaternion", "scan"), ("symmetric:4", "krohn-rhodes"), ("quaternion", "krohn-rhodes"),
         ("grid:5", "gridworld"), ("grid2d:3,3", "gridworld"), ("nth-last:3", "lookback")]


def _spec(name):
    return name


def _tokens(n_symbols: int, T: int) -> torch.Tensor:
    rng = np.random.default_rng(0)
    return torch.from_numpy(np.concatenate([rng.integers(0, n_symbols, (32, T)),
                                            *adversarial_families(n_symbols, T).values()]))


def _assert_same_logits(model: CompiledTransformer, tokens: torch.Tensor) -> CompiledTransformer:
    """Unfold ``model`` and check bitwise-equal logits on both attention paths."""
    flat = unfold(model)
    assert all(len(b.mlp_hidden) <= 1 for b in flat.config.blocks)
    with torch.no_grad():
        for fused in (True, False):
            model.fused = flat.fused = fused
            assert torch.equal(model(tokens), flat(tokens)), f"fused={fused}"
    model.fused = flat.fused = True
    return flat


@pytest.mark.parametrize("name,method", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_unfolded_logits_are_bitwise_equal(name, method):
    model = compiler.compile_automaton(_spec(name), max_len=T, method=method)
    flat = _assert_same_logits(model, _tokens(model.automaton.n_symbols, T))
    depths = [len(b.mlp_hidden) for b in model.config.blocks]
    assert len(flat.blocks) == sum(max(k, 1) for k in depths)
    assert [Origin(**o) for o in flat.meta["unfolded"]["blocks"]] == origins(model)
    # the model's own dims keep their names; scratch dims are named too
    d = model.config.d_model
    assert flat.meta["residual_labels"][:d] == model.meta["residual_labels"]
    assert len(flat.meta["residual_labels"]) == flat.config.d_model == d + sum(scratch_widths(model))
    assert len(flat.meta["layout"]["blocks"]) == len(flat.blocks)


def _integer_model(blocks: list[dict], d_model: int = 12, seed: int = 0) -> CompiledTransformer:
    """A model with random small-integer weights whose arithmetic is exact in float32 (every
    head attends to BOS alone: dim 0 is 1, dim 1 the position, scores -1000 * key position), so
    any summation order gives the same bits and only the rewrite's structure is tested."""
    config = {"format": "shortcut-transformer", "dtype": "float32", "d_model": d_model, "d_head": 3,
              "n_symbols": 3, "max_len": 20, "n_out": 4, "blocks": blocks}
    model = CompiledTransformer(ModelConfig.from_json(config), {})
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randint(-1, 2, p.shape, generator=g).to(p.dtype))
        model.W_E[:, :2] = torch.tensor([1.0, 0.0])
        model.W_pos[:, :2] = torch.stack([torch.zeros(21), torch.arange(21.0)], 1)
        for b in model.blocks:
            b.attn.W_Q.zero_()
            b.attn.W_K.zero_()
            b.attn.W_Q[:, 0, 0] = 1.0
            b.attn.W_K[:, 1, 0] = -1000.0
            b.attn.W_O[..., :2] = 0.0
            if b.mlp is not None:
                getattr(b.mlp, b.mlp.weight_name(b.mlp.n_hidden))[:, :2] = 0.0
                b.mlp.b_out[:2] = 0.0
    return model


def test_blocks_with_zero_one_and_several_hidden_layers_and_different_head_counts():
    model = _integer_model([{"n_heads": 2, "mlp_hidden": []}, {"n_heads": 1, "mlp_hidden": [5]},
                           {"n_heads": 3, "mlp_hidden": [4, 6, 3, 7]}, {"n_heads": 1, "mlp_hidden": [9, 2]}])
    tokens = torch.randint(0, 3, (50, 20), generator=torch.Generator().manual_seed(1))
    flat = _assert_same_logits(model, tokens)
    with torch.no_grad():
        logits = model(tokens)
        assert logits.abs().min() > 0 and logits.abs().max() < 2 ** 24  # nonzero, exact integers in float32
    assert [(b.n_heads, list(b.mlp_hidden)) for b in flat.config.blocks] == [
        (2, []), (1, [5]), (3, [4]), (1, [6 + 3]), (1, [3]), (1, [7 + 2]), (1, [9]), (1, [2])]
    # region a (odd boundaries) is written again after (2, 1) and (2, 3), so those stages clear
    # it -- the dims a later use writes: 3 of (2, 1)'s 4, 2 of (2, 3)'s 3; (2, 2) is region b's
    # last use and (3, 1) region a's: no clearing units there
    assert clearing_stages(model) == {(2, 1), (2, 3)} and cleared(model) == {(2, 1): 3, (2, 3): 2}
    # the narrower crosses each boundary: 4 activations (not 6 pre-activations), 3 pre-activations,
    # 3 activations (not 7); then 2 pre-activations (not 9 activations)
    assert carries_activations([4, 6, 3, 7]) == [True, False, True] and carries_activations([9, 2]) == [False]
    assert scratch_widths(model) == (4, 3)


def test_scratch_is_written_exactly_and_cleared_before_each_reuse():
    model = compiler.compile_automaton("grid:5", max_len=T, method="gridworld")
    flat = unfold(model)
    tokens = _tokens(model.automaton.n_symbols, T)
    _, cache = model.run_with_cache(tokens)
    _, fcache = flat.run_with_cache(tokens)
    d = model.config.d_model
    scratch = [i for n in SCRATCH for i in flat.meta["subspaces"].get(n, [])]
    assert scratch == list(range(d, flat.config.d_model))
    # 4 hidden layers then 2: boundaries a, b, a, then a; b's only use is not cleared
    assert clearing_stages(model) == {(0, 1), (0, 3)}
    region_b = flat.meta["subspaces"][SCRATCH[1]]
    for i, o in enumerate(origins(model)):
        resid = fcache[f"blocks.{i}.hook_resid_pre"]
        if o.stage == 0:  # the same residual as our block o.layer sees; region a is zero where it writes it
            assert torch.equal(resid[..., :d], cache[f"blocks.{o.layer}.hook_resid_pre"])
            region_a = flat.meta["subspaces"][SCRATCH[0]]
            written = (flat.blocks[i].mlp.W_out[:, region_a] != 0).any(0)
            assert written.any() and not resid[..., region_a][..., written].any()
            assert resid[..., region_b].any() == (o.layer == 1)  # b keeps its value after its last use
            assert torch.equal(fcache[f"blocks.{i}.attn.hook_pattern"], cache[f"blocks.{o.layer}.attn.hook_pattern"])
        else:  # stage j's first units are the original hidden layer j
            h = model.config.blocks[o.layer].mlp_hidden[o.stage]
            assert torch.equal(fcache[f"blocks.{i}.mlp.hook_post.0"][..., :h],
                               cache[f"blocks.{o.layer}.mlp.hook_post.{o.stage}"])
            assert not fcache[f"blocks.{i}.hook_attn_out"].any()
    assert torch.equal(fcache["hook_resid_final"][..., :d], cache["hook_resid_final"])


def test_carried_activations_are_cleared_by_the_narrowest_stage_before_the_next_write():
    """Region a carries 4 activations from (0, 0) to (0, 1) and 3 from (1, 0) to (1, 1): the 3
    dims (1, 0) writes again are cleared (the fourth is never written or read again), by (0, 2)
    (2 units wide) instead of the 9-unit reader, so the widest stage (what TransformerLens pads
    every block to) stays 9; the logits stay bitwise equal and region a is zero again where it is
    written."""
    model = _integer_model([{"n_heads": 1, "mlp_hidden": [4, 9, 2]}, {"n_heads": 1, "mlp_hidden": [3, 5]}])
    assert clearing_places(model) == {(0, 1): (0, 2)} and cleared(model) == {(0, 1): 3}
    tokens = torch.randint(0, 3, (50, 20), generator=torch.Generator().manual_seed(1))
    flat = _assert_same_logits(model, tokens)
    assert [b.mlp_hidden for b in flat.config.blocks] == [(4,), (9,), (2 + 3,), (3,), (5,)]
    region_a = flat.meta["subspaces"][SCRATCH[0]]
    _, cache = flat.run_with_cache(tokens)
    assert cache["blocks.1.hook_resid_pre"][..., region_a].any()  # the activations (0, 1) reads
    assert cache["blocks.2.hook_resid_pre"][..., region_a].any()  # still there: (0, 2) clears them
    assert not cache["blocks.3.hook_resid_pre"][..., region_a[:3]].any()
    assert cache["blocks.3.hook_resid_pre"][..., region_a[3]].any()  # never written again: kept


def test_carried_pre_activations_are_cleared_only_where_the_region_is_written_again():
    """Region a carries 5 pre-activations from (0, 0) to (0, 1) and 3 from (1, 0) to (1, 1): the
    reader clears the first 3 (-ReLU(z) + ReLU(-z) = -z: 3 more units, not 5); the other 2 keep
    their values, which no later weight reads; the logits stay bitwise equal."""
    model = _integer_model([{"n_heads": 1, "mlp_hidden": [9, 5]}, {"n_heads": 1, "mlp_hidden": [7, 3]}])
    assert carries_activations([9, 5]) == [False] and cleared(model) == {(0, 1): 3}
    tokens = torch.randint(0, 3, (50, 20), generator=torch.Generator().manual_seed(1))
    flat = _assert_same_logits(model, tokens)
    assert [b.mlp_hidden for b in flat.config.blocks] == [(9,), (5 + 3,), (7,), (3,)]
    region_a = flat.meta["subspaces"][SCRATCH[0]]
    _, cache = flat.run_with_cache(tokens)
    before = cache["blocks.2.hook_resid_pre"][..., region_a]
    assert not before[..., :3].any() and before[..., 3:].any()


def test_a_standard_q8_cascade_clears_its_ramps_in_the_joint_lookups_stage(monkeypatch):
    """The standard-shape Q8 cascade with its first level's table as a joint lookup (a third hidden
    layer; the build reads it off ramps of sums instead, so that is turned off here): the ramp
    activations are cleared beside the narrow joint lookup, not in the wide gated layer that reads
    them; certified as before."""
    from constructions import krohn_rhodes_flat, krohn_rhodes_readout
    from verify.certify.certificate import certify
    from verify.certify.unfolded import folded

    monkeypatch.setattr(krohn_rhodes_flat, "walsh_ok", lambda *args: False)
    monkeypatch.setattr(krohn_rhodes_readout, "interpolable", lambda *args: [])  # the last level's staircase too

    model = compiler.compile_automaton("quaternion", max_len=24, method="krohn-rhodes", shape="standard")
    assert clearing_places(folded(model)) == {(0, 1): (0, 2)}
    hidden = [b.mlp_hidden[0] for b in model.config.blocks]
    assert max(hidden) <= folded(model).config.blocks[0].mlp_hidden[1]  # the gated layer, no clearing units
    joint = model.meta["layout"]["blocks"][2]["mlp"]
    assert SCRATCH[0] in joint["reads"] and SCRATCH[0] in joint["writes"]
    assert certify(model).certified


def test_a_forced_reset_cascade_unfolds_with_clearing_units_in_its_first_stage():
    """A stage-0 MLP that also holds clearing units (a reset cascade of dyck:4,2 forced to the
    krohn-rhodes construction) keeps its own hidden layer in its first columns: it compiles in
    the standard shape with the default shape's logits (it raised a shape error before)."""
    a = compiler.load_spec("dyck:4,2")
    model = compiler.compile_automaton(a, max_len=12, method="krohn-rhodes", shape="standard")
    ref = compiler.compile_automaton(a, max_len=12, method="krohn-rhodes")
    assert len(model.blocks) > len(ref.blocks)
    assert all(len(b.mlp_hidden) <= 1 for b in model.config.blocks)
    tokens = torch.tensor(np.random.default_rng(0).integers(0, len(a.alphabet), (16, 12)))
    assert torch.equal(model(tokens), ref(tokens))
    assert certify(model).certified is True


def _chain_mlp(bias: float = 0.0, shared: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """Two hidden layers: units 0-2 of layer 0 feed layer 1's units 0-1; unit 3 is copied by layer 1's
    unit 2 (weight 1, bias ``bias``), which alone writes output dim 1 (``shared``: dim 0 too, which
    unit 0 writes)."""
    W0, W1, W2 = np.ones((2, 4)), np.zeros((4, 3)), np.zeros((3, 2))
    W1[:3, :2] = 2.0
    W1[3, 2] = 1.0
    W2[:2, 0], W2[2, 1] = 1.0, 3.0
    if shared:
        W2[2, 0] = 1.0
    return [(W0, np.zeros(4)), (W1, np.array([0.0, 0.0, bias])), (W2, np.array([0.5, 0.25]))]


def test_a_unit_copied_to_the_output_exits_at_its_own_stage_and_nothing_else_does():
    """The chain 3 -> 2 exits at stage 0 (layer 1 computes 2 units, 3 activations cross, not 4);
    a copy with a bias, or an output dim another unit writes too, keeps the chain whole."""
    assert exits(_chain_mlp()) == Exits(keep=((0, 1, 2, 3), (0, 1)), out=({3: 2}, {}))
    assert exits(_chain_mlp()).crossing == (3,) and exits(_chain_mlp()).hidden == (4, 2)
    for layers in (_chain_mlp(bias=1.0), _chain_mlp(shared=True)):
        assert exits(layers) == Exits.none((4, 3))


def test_a_product_factor_in_one_hidden_layer_beside_a_staircase_exits_early_bit_for_bit():
    """C6 in the standard shape: C2's one-hidden-layer decode beside C3's two-layer staircase (the
    product pads it with identity copies) writes its outputs from the first unfolded stage, so
    neither its activations cross in scratch nor do copies run in the second: 2 blocks, logits
    bitwise equal to the folded model's, certified; the scratch is C3's ramps alone."""
    from verify.certify.unfolded import folded

    T = 150  # up to about 100 both factors are interpolated: one block, nothing to unfold
    model = compiler.compile_automaton("cyclic:6", max_len=T, method="product", shape="standard")
    original = folded(model)
    mlp = original.blocks[0].mlp
    e = exits([(mlp.weight(i), mlp.bias(i)) for i in range(mlp.n_hidden + 1)])
    assert len(e.out[0]) == T + 1 and e.crossing[0] == e.hidden[0] - (T + 1)
    assert scratch_widths(original) == (e.crossing[0], 0)
    flat = _assert_same_logits(original, _tokens(model.automaton.n_symbols, T))
    assert flat.config == model.config
    assert certify(model).certified
