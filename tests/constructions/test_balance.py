"""Balancing a standard-shape model's MLP widths (constructions/balance.py): units move, and a sum
nothing wrote before is split, only where every value every later operation reads is unchanged."""

import torch

import compiler
from constructions.balance import _accesses, _pieces, _reach, _rebuilt, balance
from constructions.config import ModelConfig
from constructions.model import CompiledTransformer
from constructions.unfold import unfold
from verify.certify.certificate import certify
from verify.certify.unfolded import folded


def _model(widths: list[int]) -> CompiledTransformer:
    """Blocks of one head and one MLP of the given widths over exact small integers: dim 0 is 1,
    dim 1 the position, dim 3 the token's value 1, 2 or 3; every head attends to BOS and writes nothing."""
    config = {"format": "shortcut-transformer", "dtype": "float32", "d_model": 12, "d_head": 1, "n_symbols": 3,
              "max_len": 20, "n_out": 4, "blocks": [{"n_heads": 1, "mlp_hidden": [w]} for w in widths]}
    model = CompiledTransformer(ModelConfig.from_json(config), {})
    with torch.no_grad():
        model.W_E[:, 0] = 1.0
        model.W_E[:3, 3] = torch.tensor([1.0, 2.0, 3.0])
        model.W_pos[:, 1] = torch.arange(21.0)
        for b in model.blocks:
            b.attn.W_Q[0, 0, 0], b.attn.W_K[0, 1, 0] = 1.0, -1000.0
    return model


def _chain_model() -> CompiledTransformer:
    """Three one-hidden-layer blocks over exact small integers (every head on BOS): block 0's MLP
    has six units reading the token dim 3 -- u0 writes dim 4 (block 1's head reads it), u1 dim 6
    (the unembedding only), u2 dim 7 (block 1's MLP reads it), u3 and u4 both dim 8 (the
    unembedding only: one sum), u5 dim 9 (block 1's head writes it too); block 1's unit reads 7
    and writes 10, block 2's reads 5 (block 1's head output: dim 4 at the current position) and
    writes 11; heads 0 and 2 attend to BOS and write nothing."""
    model = _model([6, 1, 1])
    with torch.no_grad():
        attn1 = model.blocks[1].attn  # on the current position: dim 5 (and 9) gets its dim 4
        attn1.W_K[0, 1, 0] = 1000.0
        attn1.W_V[0, 4, 0], attn1.W_O[0, 0, 5], attn1.W_O[0, 0, 9] = 1.0, 1.0, 1.0
        m0, m1, m2 = (b.mlp for b in model.blocks)
        m0.W_in[3] = torch.tensor([1.0, 2.0, 1.0, 1.0, 3.0, 2.0])
        m0.b_in.copy_(torch.tensor([0.0, -1.0, 1.0, 0.0, -2.0, 0.0]))
        for u, dim in enumerate([4, 6, 7, 8, 8, 9]):
            m0.W_out[u, dim] = 1.0 + u
        m0.b_out[8] = 5.0
        m1.W_in[7, 0], m1.W_out[0, 10] = 1.0, 2.0
        m2.W_in[5, 0], m2.W_out[0, 11] = 1.0, 3.0
        model.W_U[[6, 8, 9, 10, 11], :] = torch.tensor([[1.0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 1], [1, 1, 0, 0],
                                                        [0, 0, 0, 1]])
    return model


def test_balancing_moves_only_units_whose_reads_and_writes_keep_their_order():
    """Of block 0's six units only u1 and the pair (u3, u4) may leave it: each of the others reads
    or writes a dim some head or MLP touches in between.  They move to the narrow blocks (widths
    6, 1, 1 -> 3, 3, 2), with their output bias, the logits bitwise the same; a unit put beyond
    its reach (u0 after the head that reads it) changes them."""
    model = _chain_model()
    parts, acc = _accesses(model)
    reach = {tuple(pt.units): _reach(pt, acc, 3) for pt in parts if pt.home == 0}
    assert reach == {(0,): (0, 0), (1,): (0, 2), (2,): (0, 0), (3, 4): (0, 2), (5,): (0, 0)}
    flat = balance(model)
    assert [b.mlp_hidden for b in flat.config.blocks] == [(3,), (3,), (2,)]
    assert flat.meta["unfolded"]["units"] == [[[0, 0, 1], [0, 2, 3], [0, 5, 6]], [[1, 0, 1], [0, 3, 5]],
                                              [[2, 0, 1], [0, 1, 2]]]
    assert flat.blocks[1].mlp.b_out[8] == 5.0 and flat.blocks[0].mlp.b_out[8] == 0.0
    assert flat.config.n_params() == model.config.n_params() and balance(flat) is flat  # a fixed point
    tokens = torch.randint(0, 3, (50, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(tokens)
        assert logits.abs().max() > 0 and torch.equal(logits, flat(tokens))
        parts[0].block = 2  # u0 after block 1's head, which reads dim 4
        assert not torch.equal(logits, _rebuilt(model, parts)(tokens))


def test_a_balanced_standard_model_is_certified_and_a_misplaced_unit_is_refused():
    """The standard D8 cascade: its staircase stages and readout balanced to equal widths, certified
    (through the model it unfolds); the same model with one part moved before the head whose
    output it reads is not that model's unfolding, and the certificate refuses it."""
    model = compiler.compile_automaton("dihedral:4", max_len=24, shape="standard")
    widths = [b.mlp_hidden[0] for b in model.config.blocks]
    assert len(widths) == 3 and max(widths) - min(widths) <= 1  # balanced to one unit
    assert certify(model).certified
    flat = unfold(folded(model), balanced=False)
    assert max(b.mlp_hidden[0] for b in flat.config.blocks) > 100  # 102, 104, 25 before balancing
    parts, _ = _accesses(model)
    late = next(pt for pt in parts if pt.block == 2 and pt.home == 2)  # the readout: reads block 2's head
    late.block = 1
    moved = _rebuilt(model, parts)
    moved.meta = {k: v for k, v in model.meta.items()}
    cert = certify(moved)
    assert not cert.certified and "not the unfolding" in (cert.reason or "")


def _sum_model() -> CompiledTransformer:
    """Block 0's MLP: u0..u3 read the token dim 3 and form one sum in dim 6 (output bias 5), which
    nothing wrote before and block 2's MLP reads (its unit writes dim 10); u4 and u5 form one in dim 7,
    where the embedding wrote 1 before; blocks 1 and 2 have one unit each (block 1's reads dim 3 and
    writes dim 9).  The unembedding reads dims 7, 9 and 10."""
    model = _model([6, 1, 1])
    with torch.no_grad():
        model.W_E[:, 7] = 1.0
        m0, m1, m2 = (b.mlp for b in model.blocks)
        m0.W_in[3] = torch.tensor([1.0, 2.0, 1.0, 3.0, 1.0, 2.0])
        m0.b_in.copy_(torch.tensor([0.0, -1.0, 1.0, -2.0, 0.0, -1.0]))
        m0.W_out[:, 6] = torch.tensor([1.0, 2.0, -1.0, 3.0, 0.0, 0.0])
        m0.W_out[4:, 7] = torch.tensor([2.0, 3.0])
        m0.b_out[6] = 5.0
        m1.W_in[3, 0], m1.W_out[0, 9] = 1.0, 2.0
        m2.W_in[6, 0], m2.W_out[0, 10] = 1.0, 3.0
        model.W_U[[7, 9, 10], :] = torch.tensor([[1.0, 0, 0, 1], [0, 1, 0, 1], [0, 0, 1, 1]])
    return model


def test_a_sum_nothing_wrote_before_is_split_between_blocks_before_its_reader():
    """u0..u3's sum in dim 6 splits into one piece per unit, each free in blocks 0 and 1 (block 2's
    MLP reads the sum); u4 and u5's sum in dim 7 (which the embedding wrote before) stays whole.
    Balanced to widths 3, 3, 2: the whole sum moves to block 1, block 1's own unit to block 2, then
    u0 back to block 0, so the sum is formed in blocks 0 and 1, its bias in block 0 (the earliest),
    the logits bitwise the same; a piece put after its sum's reader changes them."""
    model = _sum_model()
    parts, acc = _accesses(model)
    assert [(pt.units, bool(pt.pieces)) for pt in parts if pt.home == 0] == [([0, 1, 2, 3], True), ([4, 5], False)]
    pieces = _pieces(parts, acc)
    assert {tuple(pt.units): _reach(pt, acc, 3) for pt in pieces if pt.home == 0} == {
        (0,): (0, 1), (1,): (0, 1), (2,): (0, 1), (3,): (0, 1), (4, 5): (0, 2)}
    flat = balance(model)
    assert [b.mlp_hidden for b in flat.config.blocks] == [(3,), (3,), (2,)]
    runs = flat.meta["unfolded"]["units"]
    assert runs[:2] == [[[0, 0, 1], [0, 4, 6]], [[0, 1, 4]]]  # the sum in blocks 0 and 1
    assert flat.blocks[0].mlp.b_out[6] == 5.0 and flat.blocks[1].mlp.b_out[6] == 0.0
    tokens = torch.randint(0, 3, (50, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(tokens)
        assert logits.abs().max() > 0 and torch.equal(logits, flat(tokens))
        late = next(pt for pt in pieces if pt.units == [0])
        late.block = 2  # u0's term added after block 2's MLP read the sum
        assert not torch.equal(logits, _rebuilt(model, pieces)(tokens))


def test_a_standard_a4_cascade_splits_its_first_levels_decode_and_is_certified():
    """A4's first level's one-hot decode (one sum of the staircase's gated units, read only by the
    unembedding) is formed in blocks 1 and 2 beside level 1's increments and readout, which then hold
    as many units to one (block 0's ramps stay: blocks 1 and 2 read them); certified.  At T = 150,
    where that one-hot's interpolation in the last block is past the readout's budget (up to T = 100
    it is taken late, :func:`krohn_rhodes_flat.late_one_hots`, and no sum is split)."""
    model = compiler.compile_automaton("alternating:4", max_len=150, shape="standard")
    flat = unfold(folded(model), balanced=False)
    before = [b.mlp_hidden[0] for b in flat.config.blocks]
    after = [b.mlp_hidden[0] for b in model.config.blocks]
    assert sum(after) == sum(before) and max(after[1:]) - min(after[1:]) <= 1 < max(before) - max(after)
    homes = [{home for home, _, _ in runs} for runs in model.meta["unfolded"]["units"]]
    assert 1 in homes[1] and 1 in homes[2]
    assert certify(model).certified
