"""The staircase (gadgets/staircase.py) and Theorem 11's blocks built with it (krohn_rhodes_flat.py):
exact on every threshold and gate within the input tolerance, the standard shape's cyclic groups in
2 blocks and cascades in 2 per level (a table of two mod-2 counters of one level read off ramps
of their sums, Walsh's basis: no third hidden layer), certified; a ramp broken at one value of the
prefix sum, or of a sum of two, is refused."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build
from compiler.automata.spec import Semiautomaton
from compiler.pipeline import set_start
from constructions import krohn_rhodes, krohn_rhodes_flat, registry
from constructions.construction import BuildOptions
from constructions.krohn_rhodes_layout import schedule
from constructions.gadgets import CodeInput, OneHotInput, Ramp, Stair, StairLookup, interpolation_error, staircase_mlp
from constructions.gadgets.staircase import RAMP_SLOPE
from constructions.workspace import Workspace
from verify.certify import certificate, certify
from verify.check import verify


def _decoder():
    """X = 10 mean + 1 in 0..20 mod 3 (new), (X - inc) mod 3 (old, gated by inc), a state one-hot of
    (X + letter) mod 3 (gated by the letter), and a joint lookup of (new, letter)."""
    ws = Workspace()
    mean, tok, inc = ws.add("mean"), ws.add("tok", ["a", "b", "c"]), ws.add("inc")
    new, old, state, both = ws.add("new"), ws.add("old"), ws.add("state", ["q0", "q1", "q2"]), ws.add("both")
    X = np.arange(21)
    stairs = [Stair(new, 0, (), {(): (X % 3)[:, None].astype(float)}),
              Stair(old, 0, (1,), {(k,): ((X - k) % 3)[:, None].astype(float) for k in range(3)}),
              Stair(state, 0, (0,), {(a,): np.eye(3)[(X + a) % 3] for a in range(3)})]
    joint = StairLookup(both, (("stair", 0), ("gate", 0)), {(v, a): np.array([1.0 + v + 3 * a]) for v in range(3)
                                                       for a in range(3) if (v, a) != (2, 2)})
    gates = [OneHotInput(tok), CodeInput(inc, 3)]
    return staircase_mlp("t", [Ramp(mean, 10.0, 1, 20)], gates, stairs, joints=(joint,))


def test_staircase_is_exact_at_every_threshold_and_gate_within_its_tolerance():
    mlp = _decoder()
    assert len(mlp.hidden_sizes) == 3 and mlp.hidden_sizes[0] == 20 + 2 * 2 + 3
    rng = np.random.default_rng(0)
    for X in range(21):
        for a in range(3):
            for k in range(3):
                for noise in (-0.249, 0.0, 0.249, rng.uniform(-0.249, 0.249)):
                    out = mlp(np.concatenate([[(X - 1 + noise) / 10.0], np.eye(3)[a], [k]]))
                    v = X % 3
                    both = 0.0 if (v, a) == (2, 2) else 1.0 + v + 3 * a
                    want = np.concatenate([[v, (X - k) % 3], np.eye(3)[(X + a) % 3], [both]])
                    assert np.array_equal(out, want), (X, a, k, noise)
    # a letter gate that is all zero (BOS) matches no gated unit: only the ungated code is written
    out = mlp(np.concatenate([[0.4], np.zeros(3), [0.0]]))
    assert out[0] == 5 % 3 and np.all(out[2:] == 0)


def test_thresholds_where_no_table_changes_are_pruned_and_the_function_kept():
    """A table constant past X = 4 (a bounded stack's depth past D, sink rows) needs thresholds 1..4
    only: ramps 5..20 and their gated units are dropped, every X still maps to its row exactly."""
    ws = Workspace()
    mean, out = ws.add("mean"), ws.add("out")
    X = np.arange(21)
    F = np.minimum(X, 4)[:, None].astype(float)
    mlp = staircase_mlp("flat", [Ramp(mean, 10.0, 1, 20)], [], [Stair(out, 0, (), {(): F})])
    assert mlp.hidden_sizes == [4, 5]
    for x in X:
        for noise in (-0.249, 0.0, 0.249):
            assert mlp(np.array([(x - 1 + noise) / 10.0]))[0] == min(x, 4), (x, noise)


def test_ramps_are_off_below_and_past_the_clip_above_their_tolerance():
    """relu(s(X - j) + s(1 - tau)): 0 at X = j - 1 + tau, 2 at X = j - tau (s = 4 at a quarter)."""
    assert RAMP_SLOPE == 4.0
    assert RAMP_SLOPE * (-0.75) + RAMP_SLOPE * 0.75 == 0 and RAMP_SLOPE * (-0.25) + RAMP_SLOPE * 0.75 == 2


@pytest.mark.parametrize("name, T, blocks", [("cyclic:3", 200, 2), ("cyclic:3", 100, 1), ("dihedral:3", 16, 3),
                                             ("quaternion", 16, 3), ("dihedral:4", 16, 3)])
def test_standard_shape_cascades_in_two_blocks_per_level_certified(name, T, blocks):
    """C_n: one level (2 blocks); D6: two levels of one counter; Q8 and D8: a level whose table
    reads its two mod-2 counters (ramps of X_a, X_b and X_a + X_b, 2) then one -- the last level in
    1 where its decode's interpolation stays within its float bound (C3 at T = 100, not 200)."""
    model = compiler.compile_automaton(build(name), max_len=T, method="krohn-rhodes", shape="standard")
    assert model.meta["one_hidden_layer"]
    assert model.meta["shape"]["blocks"] == blocks == len(model.blocks)
    assert all(len(b.mlp_hidden) == 1 for b in model.config.blocks)
    cert = certify(model)
    assert cert.certified is True, cert.reason


def test_auto_takes_two_standard_blocks_for_a_cyclic_group_and_they_run_exactly():
    """C5 at T = 100: its one-hot's interpolation is past the readout's budget (R = 404), so the
    staircase's two blocks."""
    model = compiler.compile_automaton(build("cyclic:5"), max_len=100, shape="standard")
    assert model.meta["method"] == "krohn-rhodes" and len(model.blocks) == 2
    assert verify(model, samples=16, seed=0).exact


def test_default_build_keeps_the_residue_decode():
    """Without ``one_hidden_layer`` the counter is decoded as before: coarse then fine steps."""
    model = compiler.compile_automaton(build("cyclic:3"), max_len=24, method="krohn-rhodes")
    assert "one_hidden_layer" not in model.meta and len(model.config.blocks[0].mlp_hidden) == 6


def test_a_ramp_that_misses_one_prefix_sum_is_refused():
    """Ramp j = 20 lowered by its offset stays off at X = 20 (on from X = 21): the decode is wrong on
    the inputs whose prefix sum is exactly 20 and right elsewhere; the certificate names the MLP."""
    model = compiler.compile_automaton(build("cyclic:3"), max_len=24, method="krohn-rhodes", one_hidden_layer=True)
    assert certify(model).certified is True
    j = 20  # ramp j (unit j - 1) turns on at X = j, X the prefix sum with the initial value
    with torch.no_grad():
        model.blocks[0].mlp.b_in[j - 1] -= RAMP_SLOPE * 0.75
    cert = certify(model)
    assert cert.certified is False
    assert cert.failure["where"] == "layer 1 MLP block1.mlp" and "code combination" in cert.failure["detail"]


def test_set_start_rebuilds_the_staircase():
    model = compiler.compile_automaton(build("cyclic:3"), max_len=16, method="krohn-rhodes", one_hidden_layer=True)
    set_start(model, model.automaton.states[1])
    assert model.meta["one_hidden_layer"] and certify(model).certified is True


def test_a_value_before_the_update_that_no_block_reads_is_not_decoded():
    """D6's first counter: its ``old`` code is read by no other block (the next level's table reads it
    off the ramp, through the increment's gate), so the staircase leaves it out -- no weight writes
    it -- and states the table keyed by (``new``, ``inc``); still certified."""
    model = compiler.compile_automaton(build("dihedral:3"), max_len=16, method="krohn-rhodes", shape="standard")
    old = model.meta["subspaces"]["kr:h1.b0.count0.0.old"]
    assert all(float(b.mlp.W_out.detach()[:, old].abs().sum()) == 0 for b in model.blocks)
    cert = certify(model)
    assert cert.certified is True, cert.reason


def test_a_rekeyed_table_that_is_wrong_at_one_pair_is_refused(monkeypatch):
    """The restated lookup binds: declaring one (new, letter) pair's row wrong (the weights still
    compute the right one; D6's first counter moves by the letter alone, so its value before the
    update is the new one less the letter's increment) is refused by the weight check (the program
    proof, which would refuse it first, is left out here)."""
    rekeyed = krohn_rhodes_flat._rekeyed

    def wrong_at_one_pair(*args):
        st = rekeyed(*args)
        key = max(st.table)
        return replace(st, table={**st.table, key: st.table[key] + 1.0})

    monkeypatch.setattr(krohn_rhodes_flat, "_rekeyed", wrong_at_one_pair)
    monkeypatch.setattr(certificate, "prove_program", lambda model, ob: {"proved": True})
    model = compiler.compile_automaton(build("dihedral:3"), max_len=16, method="krohn-rhodes", shape="standard")
    cert = certify(model)
    assert cert.certified is False
    assert "block1.mlp" in cert.failure["where"], cert.failure


def test_a_readout_of_two_fresh_counters_sums_their_one_hots_in_the_unembedding():
    """C2³: the last (only) block decodes three counters the readout reads together; the staircase
    writes each one's one-hot and the unembedding sums them (the state's logit 3, any other's at
    most 2), so no joint lookup: one block (its decodes interpolated in one hidden layer), certified;
    one weight of the sum lowered (the state 0.0.0 then ties with its neighbours where the first
    counter is 0) is refused."""
    model = compiler.compile_automaton(build("cyclic-product:2,2,2"), max_len=16, method="krohn-rhodes",
                                       shape="standard")
    assert len(model.blocks) == 1 and model.meta["shape"]["blocks"] == 1
    cert = certify(model)
    assert cert.certified is True, cert.reason
    model = compiler.compile_automaton(build("cyclic-product:2,2,2"), max_len=16, method="krohn-rhodes",
                                       one_hidden_layer=True)  # the staircase itself, not its unfolding
    assert certify(model).certified is True
    hot = model.meta["subspaces"]["kr:h1.b0.count0.0.hot"]
    with torch.no_grad():
        model.W_U[hot[0], 0] = 0.0
    cert = certify(model)
    assert cert.certified is False and "readout" in str(cert.failure), cert.failure


def test_a_table_of_two_mod2_counters_reads_a_ramp_of_their_sum_and_a_broken_one_is_refused():
    """D8's first level: the second level's increment f(a, b, letter) of two mod-2 counters is
    c_0 + c_a (-1)^a + c_b (-1)^b + c_ab (-1)^(a + b) (quarter weights), the last off a ramp of
    X_a + X_b (high 2 (T + 1)): block 1's MLP has two hidden layers, certified.  That ramp's unit j
    lowered by its offset stays off at X_a + X_b = j, so the increment is wrong only on inputs whose
    two prefix sums add up to exactly j: refused, at block 1's MLP."""
    T = 16
    model = compiler.compile_automaton(build("dihedral:4"), max_len=T, method="krohn-rhodes", one_hidden_layer=True)
    mlp = model.blocks[0].mlp
    highs = model.meta["layers"][0]["mlp"]["thresholds"]
    assert len(model.config.blocks[0].mlp_hidden) == 2 and highs == [T + 1, T + 1, 2 * (T + 1)]
    assert certify(model).certified is True
    j = 2 * (T + 1) - 3
    with torch.no_grad():
        mlp.b_in[highs[0] + highs[1] + j - 1] -= RAMP_SLOPE * 0.75
    cert = certify(model)
    assert cert.certified is False
    assert cert.failure["where"].startswith("layer 1 MLP block1.mlp"), cert.failure


def test_an_interpolated_decode_is_one_hidden_layer_and_one_broken_at_a_rare_sum_is_refused():
    """C2 in ONE standard block at T = 16: the counter's code and one-hot interpolated off its prefix
    sum X (units relu(X - j)), certified.  Unit j = T - 1's weight on the one-hot entry that is 0 at
    X = T raised by 2: only the input of T increments reaches X = T (1 of 2^T), where that entry
    becomes 2 and outvotes the right one: refused.  At T = 512 the interpolation's float32 bound
    (~T^3 eps) is past its share of the readout's margin: two blocks, the staircase."""
    T = 16
    model = compiler.compile_automaton(build("cyclic:2"), max_len=T, shape="standard")
    assert model.meta["method"] == "krohn-rhodes" and len(model.blocks) == 1
    assert model.config.blocks[0].mlp_hidden == (T + 1,)
    assert certify(model).certified is True
    hot = model.meta["subspaces"]["kr:h1.b0.count0.0.hot"]
    with torch.no_grad():
        model.blocks[0].mlp.W_out[T - 1, hot[(T + 1) % 2]] += 2.0
    cert = certify(model)
    assert cert.certified is False and "block1.mlp" in cert.failure["where"], cert.failure
    assert interpolation_error(np.eye(2)[np.arange(513) % 2], 2.0**-23) > 1


def test_a_table_is_gated_only_at_the_increments_its_letter_allows(monkeypatch):
    """S4's second counter (mod 3) moves by 1 or 2 at its middle letter and by 0 at the others, so
    the third level's increment table, keyed by that counter's value before the update (its ``new``
    code less the increment), needs 2 gate combinations at that letter, not 3: 2 x 35 units at
    T = 16 where all three took 3 x 35, and the model is certified -- read through the increment's
    gate, as where that takes fewer units than a ramp of the value before the update (here forced)."""
    staircase = krohn_rhodes_flat._staircase
    monkeypatch.setattr(krohn_rhodes_flat, "_staircase", lambda blk, before: staircase(blk, frozenset()))
    automaton = build("symmetric:4")
    model = compiler.compile_automaton(automaton, max_len=16, method="krohn-rhodes", shape="standard")
    cascade = krohn_rhodes.applies(automaton)
    at = krohn_rhodes_flat.increments_at(cascade, schedule(cascade), automaton.n_symbols)
    assert at["h1.b0.count1.0"] == {0: (0,), 1: (1, 2), 2: (0,)}
    construction, plan = registry.plan_of(model)
    program, _ = construction.build(automaton, plan, BuildOptions.of_model(model))
    table = program.blocks[1].mlp  # level 1's: its new code and one-hot are the last block's (late)
    assert table.notes["gate_combinations"] == 2 and table.hidden_sizes == [39, 2 * 35]
    cert = certify(model)
    assert cert.certified is True, cert.reason


def test_a_value_before_the_update_is_read_off_a_ramp_of_its_own_and_one_broken_is_refused():
    """S4 at T = 16: level 1's one-hot is interpolated late, so its block decodes no ``new`` code
    and the level-2 table, keyed by level 1's value before the update, reads it off a ramp of
    Y = X - increment + 2 (one gate combination, the letter's, 36 units) instead of gating X's at
    each increment (2 x 35 and X's own ramps): certified.  Soundness: Y's ramp at threshold 32,
    lowered by its offset, turns on one step late, so the table is wrong at Y = 32 alone (a prefix
    sum of 30 at a letter that adds 0); the certificate refuses it in that block's MLP."""
    automaton = build("symmetric:4")
    model = compiler.compile_automaton(automaton, max_len=16, method="krohn-rhodes", one_hidden_layer=True)
    construction, plan = registry.plan_of(model)
    program, _ = construction.build(automaton, plan, BuildOptions.of_model(model))
    assert program.blocks[1].mlp.notes["gate_combinations"] == 1 and program.blocks[1].mlp.hidden_sizes == [37, 37]
    mlp = model.blocks[1].mlp
    inc = model.meta["subspaces"]["kr:h1.b0.count1.0.inc"]
    W_in, b_in = mlp.weight(0), mlp.bias(0)
    old = [int(u) for u in np.nonzero(W_in[inc[0]].detach().numpy())[0]]  # the units reading the increment: Y's ramps
    assert len(old) == 36 and all(W_in[inc[0], u] < 0 for u in old)
    assert certify(model).certified is True
    bias = b_in.detach().numpy().copy()
    by_threshold = sorted(old, key=lambda u: -bias[u])  # bias s (shift - j) + s (1 - tau): j = 1, 2, ...
    with torch.no_grad():
        b_in[by_threshold[32 - 1]] -= RAMP_SLOPE * 0.75
    cert = certify(model)
    assert cert.certified is False and "block2.mlp" in cert.failure["where"], cert.failure


def test_a_value_before_the_update_another_block_reads_is_gated_at_every_increment(monkeypatch):
    """A 4-state permutation automaton whose first counter (mod 2) moves by 1 at one letter and 0 at
    the other, and whose value before the update a later block reads (so it is written: ``kept``).
    Its block's own table reads it through the increment's gate; the obligation's lookup reads the
    written code, which the decode computes from the increment code whatever the letter, so the
    weight check tries every (letter, increment) pair.  Gated only at the increments each letter
    gives (as a dropped code's rekeyed lookup may be), the staircase writes 0 at the others and is
    refused (found by a sweep of random permutation automata); gated at every one, certified."""
    a = Semiautomaton("perm4", ("0", "1", "2", "3"), ("a0", "a1"), ((1, 3, 0, 2), (3, 1, 0, 2)), 0)
    model = compiler.compile_automaton(a, max_len=16, method="krohn-rhodes", shape="standard")
    cert = certify(model)
    assert cert.certified is True, cert.reason
    increments = krohn_rhodes_flat._increments
    monkeypatch.setattr(krohn_rhodes_flat, "_increments", lambda *args: increments(*args[:-1], set()))
    narrow = compiler.compile_automaton(a, max_len=16, method="krohn-rhodes", shape="standard")
    cert = certify(narrow)
    assert cert.certified is False and "block1.mlp" in cert.failure["where"], cert.failure


def test_an_increment_left_out_where_its_letter_can_take_it_is_refused(monkeypatch):
    """Soundness of the gating above: drop one increment the second counter does take at its middle
    letter (2) from both the staircase and the declared lookup, which then agree, writing 0 there;
    the program proof finds the input where the declared program's state differs from S4's."""
    at = krohn_rhodes_flat.increments_at

    def without_one(*args):
        out = at(*args)
        out["h1.b0.count1.0"] = {**out["h1.b0.count1.0"], 1: (1,)}
        return out

    monkeypatch.setattr(krohn_rhodes_flat, "increments_at", without_one)
    model = compiler.compile_automaton(build("symmetric:4"), max_len=16, method="krohn-rhodes", shape="standard")
    cert = certify(model)
    assert cert.certified is False
    assert "program" in (cert.reason or ""), cert.reason


def test_a_ramp_of_the_value_before_the_update_is_not_taken_where_it_widens_the_scratch(monkeypatch):
    """S4 at T = 150: level 1's one-hot is past the interpolation budget, so its block decodes X and
    its ramps stay; a ramp of Y beside them would take fewer units but twice the scratch the unfolded
    ramps cross in (the residual's dims, in every block): the table stays gated, d_model 361. Without
    the scratch rule the build takes Y's ramps and d_model grows to 661 (1.6M -> 3.0M parameters)."""
    model = compiler.compile_automaton(build("symmetric:4"), max_len=150, method="krohn-rhodes", shape="standard")
    assert model.config.d_model == 361 and certify(model).certified is True
    monkeypatch.setattr(krohn_rhodes_flat, "scratch_needed", lambda hidden: 0)
    wider = compiler.compile_automaton(build("symmetric:4"), max_len=150, method="krohn-rhodes", shape="standard")
    assert wider.config.d_model == 661


def test_a_readout_key_of_an_earlier_block_is_interpolated_late_and_its_code_left_unwritten():
    """D6 at T = 100: the readout reads level 0's one-hot, which the last block interpolated off level
    0's prefix sum beside its own interpolated decode (one hidden layer: unfolded, it exits at its
    first stage and balances into blocks 0 and 1); level 0's block computes its code for level 1's
    increments without writing it (``Steps.unwritten``), so its 102 decode units are gone: 3
    standard blocks, certified.  In the folded staircase build, the late unit that
    only the input of 100 reflections turns on (X = 100; j = 99), given 2 more on the one-hot entry
    that is 0 there, is refused; the unit after it (j = 100, which no input turns on) is not read."""
    T = 100
    model = compiler.compile_automaton(build("dihedral:3"), max_len=T, method="krohn-rhodes", shape="standard")
    widths = [b.mlp_hidden[0] for b in model.config.blocks]
    assert widths == [153, 152, 202], widths  # level 1 interpolated too: 101 late units split over blocks 0-1
    assert certify(model).certified is True
    folded = compiler.compile_automaton(build("dihedral:3"), max_len=T, method="krohn-rhodes", one_hidden_layer=True)
    construction, plan = registry.plan_of(folded)
    program, _ = construction.build(build("dihedral:3"), plan, BuildOptions.of_model(folded))
    assert program.blocks[0].mlp.obligation.unwritten == ("kr:h1.b0.count0.0.new",)
    new0 = folded.meta["subspaces"]["kr:h1.b0.count0.0.new"]
    assert not folded.blocks[0].mlp.weight(folded.blocks[0].mlp.n_hidden)[:, new0].any()  # unwritten there
    assert certify(folded).certified is True
    hot = folded.meta["subspaces"]["kr:h1.b0.count0.0.hot"]
    mlp = folded.blocks[-1].mlp
    with torch.no_grad():
        mlp.weight(mlp.n_hidden)[-1, hot[0]] += 2.0  # unit j = 100: X = 101 is past every input
    assert certify(folded).certified is True
    with torch.no_grad():
        mlp.weight(mlp.n_hidden)[-2, hot[1]] += 2.0  # unit j = 99: on at X = 100 alone, where hot[1] is 0
    cert = certify(folded)
    assert cert.certified is False and "block2.mlp" in cert.failure["where"], cert.failure


def test_a_code_a_step_leaves_unwritten_keeps_its_value_in_the_program():
    """The declared program's semantics of ``Steps.unwritten``: the decode computes the code and the
    lookup after it reads it, but the residual keeps the code's value from before the MLP."""
    from constructions.obligations import Lookup as LookupOb, Modular, Steps
    from verify.certify.semantics import run_mlp

    decode = Modular("d", "x", 1.0, 0, np.array([[0.0], [1.0]]), "c")
    look = LookupOb("l", ("c",), "y", {(0,): np.array([5.0]), (1,): np.array([7.0])})
    env = {"x": (3.0,), "c": (0.0,), "y": (0.0,)}
    run_mlp(Steps("m", (decode, look), unwritten=("c",)), env, {})
    assert env == {"x": (3.0,), "c": (0.0,), "y": (7.0,)}
    env = {"x": (3.0,), "c": (0.0,), "y": (0.0,)}
    run_mlp(Steps("m", (decode, look)), env, {})
    assert env["c"] == (1.0,)


def test_a_key_its_block_reads_with_another_counter_it_decodes_is_not_interpolated_late():
    """D12 at T = 100: level 0's two mod-2 counters key level 1's increment table together (read
    in Walsh's basis), so neither is a late one-hot: their codes stay written in block 1 and the
    model is certified (taking them late left a table the weight check could not bound)."""
    model = compiler.compile_automaton(build("dihedral:6"), max_len=100, method="krohn-rhodes", shape="standard")
    cascade = krohn_rhodes.applies(build("dihedral:6"))
    construction, plan = registry.plan_of(model)
    program, _ = construction.build(build("dihedral:6"), plan, BuildOptions.of_model(model))
    assert all(getattr(b.mlp.obligation, "unwritten", None) is None for b in program.blocks if b.mlp is not None)
    assert len(cascade.components) == 3 and len(model.blocks) == 3  # the last level interpolated
    cert = certify(model)
    assert cert.certified is True, cert.reason
