"""The local construction (constructions/local.py): the gadgets it combines, exact models for
the target automata, exact estimates, moving the start, layer-wise checks that name the
broken gadget, adversarial families, the registry and the CLI."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.local import detect
from compiler.automata.load import load_spec
from compiler.cli import main
from constructions import local, registry
from constructions.budget import STEP_TOLERANCE
from constructions.gadgets import ABSORB, CodeInput, absorb_feature, lookup_mlp, prefix_mean_head, recent_flag_head
from constructions.local_families import families
from constructions.workspace import Workspace
from verify.certify import certify
from verify.check import verify
from verify.layerwise import declared_codes

CHECK = {"samples": 8, "exhaustive_budget": 256, "family_limit": 2}
TARGETS = {"adder:2": 2, "adder:3": 2, "repeat:2": 2, "blocks:4": 2, "blocks:1": 1, "flipflop": 1, "memory:3": 1}


def _attend(head, ws: Workspace, x: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Causal softmax attention of one local head on residual rows x [T+1, d], in ``dtype``."""
    W_Q, W_K, W_V, W_O = (m.astype(dtype) for m in head.embed(ws))
    x = x.astype(dtype)
    s = (x @ W_Q) @ (x @ W_K).T
    s[np.triu_indices(len(x), 1)] = -np.inf
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return ((p @ (x @ W_V)) @ W_O).astype(np.float64)


# --- the gadgets as local uses them ----------------------------------------------------------


@pytest.mark.parametrize("pattern", ["none", "first", "last", "both", "dense"])
def test_latest_flag_at_the_ends_and_after_long_runs_in_float32(pattern):
    """Lemma 16 at T = 256 in float32: a flag only at position 1, only at T, at both, none
    (BOS's value everywhere) or often; the copy is within STEP_TOLERANCE / 2."""
    T = 256
    ws = Workspace()
    one, flag, rec, val, out = ws.add("one"), ws.add("flag"), ws.add("rec"), ws.add("val"), ws.add("out")
    head = recent_flag_head("h", flag, rec, one, val, out, T, value_range=3)
    flags = np.zeros(T + 1, dtype=bool)
    flags[0] = True
    if pattern in ("first", "both"):
        flags[1] = True
    if pattern in ("last", "both"):
        flags[T] = True
    if pattern == "dense":
        flags[np.random.default_rng(0).random(T + 1) < 0.3] = True
    vals = np.random.default_rng(1).integers(0, 4, T + 1)
    x = np.zeros((T + 1, ws.d_model))
    x[:, one[0]] = 1
    x[:, flag[0]] = flags
    x[:, rec[0]] = np.arange(T + 1) / (T + 1)
    x[:, val[0]] = vals * flags  # as local: unflagged positions carry 0
    got = _attend(head, ws, x)[:, out[0]]
    last = np.maximum.accumulate(np.where(flags, np.arange(T + 1), 0))
    assert np.abs(got - (vals * flags)[last]).max() < STEP_TOLERANCE / 2


@pytest.mark.parametrize("bound", [1, 4])
def test_prefix_count_saturates_in_the_lookup(bound):
    """Lemma 15 with value scale = mass gives the count itself; a lookup reading it with
    bound + 1 values sees min(bound, count) -- saturation costs no unit."""
    T = 256
    ws = Workspace()
    bos, absorb, event, count, out = ws.add("bos"), ws.add(ABSORB), ws.add("event"), ws.add("count"), ws.add("out", bound + 1)
    head = prefix_mean_head("h", absorb, bos, event, count, mass=2 * T, value_scale=2.0 * T)
    table = {(v,): np.eye(bound + 1)[v] for v in range(bound + 1)}
    mlp = lookup_mlp("m", [CodeInput(count, bound + 1)], out, table).embed(ws)
    events = np.zeros(T + 1)
    events[1:] = np.random.default_rng(bound).random(T) < 0.02  # long runs without an event
    events[1] = events[T] = 1  # and events at both ends
    x = np.zeros((T + 1, ws.d_model))
    x[0, bos[0]] = 1
    x[:, absorb[0]] = absorb_feature(2 * T, T)
    x[:, event[0]] = events
    x = x + _attend(head, ws, x)
    assert np.abs(x[1:, count[0]] - np.cumsum(events)[1:]).max() < 1e-3
    y = np.stack([mlp(r) for r in x])[1:, out.dims[0]:out.dims[-1] + 1]
    np.testing.assert_array_equal(y.argmax(1), np.minimum(bound, np.cumsum(events)[1:]))
    assert np.abs(y.max(1) - 1).max() < 1e-9


# --- models ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name,layers", sorted(TARGETS.items()))
def test_targets_compile_exactly_with_exact_estimates(name, layers):
    a = load_spec(name)
    plan = local.CONSTRUCTION.applies(a)
    T = 16 if name == "adder:3" else 32
    model = compiler.compile_automaton(a, max_len=T, method="local")
    assert len(model.blocks) == layers == plan.layers
    assert local.estimate(plan, T).params == model.info()["n_params"]  # the estimate is the count
    res = verify(model, **CHECK)
    assert res.exact, res.counterexample
    assert res.checked["layerwise"].startswith("every tracked subspace") and not res.invariants.failures
    assert all(m["distance_to_boundary"] > 0.2 for m in res.margins["mlps"])
    assert {"local-quiet", "local-ends", "local-events"} <= set(res.checked["adversarial_families"])


def test_estimates_are_exact_at_256_and_grow_slowly():
    for name in ("adder:2", "repeat:2", "blocks:4", "flipflop"):
        plan = local.CONSTRUCTION.applies(load_spec(name))
        model = compiler.compile_automaton(name, max_len=256, method="local")
        assert local.estimate(plan, 256) == local.Cost(plan.layers, model.info()["n_params"])
        assert model.info()["n_params"] < 50_000 and not model.meta["warnings"]


def test_every_start_state_is_exact_without_reshaping():
    model = compiler.compile_automaton("blocks:4", max_len=32, method="local")
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    toks = torch.from_numpy(np.concatenate([np.random.default_rng(0).integers(0, 2, (64, 32)),
                                            families(model, registry.plan_of(model)[1], 32)["local-events"]]))
    for q0 in model.automaton.states:
        other = compiler.with_start(model, q0)
        assert {k: v.shape for k, v in other.state_dict().items()} == shapes
        a = other.automaton
        assert other.predict(toks).tolist() == [a.run(r) for r in toks.tolist()], q0


@pytest.mark.parametrize("name,hidden", [("memory:3", [1]), ("flipflop", [1]), ("blocks:1", [2]), ("adder:2", [2, 2])])
def test_one_hidden_layer_lookups_verify_certify_and_keep_their_shape_from_every_start(name, hidden):
    """``one_hidden_layer``: a one-layer model's final lookup in one hidden layer, unless it reads the
    saturating event count (blocks:1); a two-layer model (adder:2) builds as without the option."""
    model = compiler.compile_automaton(name, max_len=32, method="local", one_hidden_layer=True)
    assert [len(b.mlp_hidden) for b in model.config.blocks] == hidden and model.meta["one_hidden_layer"]
    flat = {k for k in model.meta["local"]["precision"] if k.startswith("flat_")}
    assert flat == ({"flat_final_margin"} if hidden == [1] else set())
    assert all(model.meta["local"]["precision"][k] > 1 for k in flat)
    if hidden != [1]:  # the same weights as without the option
        default = compiler.compile_automaton(name, max_len=32, method="local")
        assert all(torch.equal(v, default.state_dict()[k]) for k, v in model.state_dict().items())
    assert verify(model, **CHECK).exact
    assert certify(model).certified
    shapes = {k: v.shape for k, v in model.state_dict().items()}
    for q0 in model.automaton.states:
        other = compiler.with_start(model, q0)
        assert {k: v.shape for k, v in other.state_dict().items()} == shapes
        assert verify(other, **CHECK).exact, q0


def test_families_put_anchors_and_events_where_wanted():
    model = compiler.compile_automaton("adder:2", max_len=40, method="local")
    plan = registry.plan_of(model)[1]
    fam = families(model, plan, 40, seed=0)
    flags = declared_codes(model, fam["local-quiet"])["loc:flag"][..., 0]  # the declared program's anchor flags
    assert flags[:, 2:].sum() == 0  # only propagating columns after the first: the carry is old
    flags = declared_codes(model, fam["local-ends"])["loc:flag"][..., 0]
    assert flags[:, [1, 40]].all() and flags[:, 2:40].sum() == 0
    blocks = compiler.compile_automaton("blocks:4", max_len=40, method="local")
    bplan = registry.plan_of(blocks)[1]
    count = declared_codes(blocks, families(blocks, bplan, 40, seed=0)["local-events"])["loc:count"][..., 0]
    assert (count[:, -1] >= bplan.bound).all()  # the count saturates


def test_layerwise_checks_name_the_broken_gadget():
    model = compiler.compile_automaton("adder:2", max_len=24, method="local")
    with torch.no_grad():  # break the latest-anchor head's value
        model.blocks[1].attn.W_V[0].mul_(0.0)
    res = verify(model, **CHECK)
    assert not res.exact
    assert any("head loc.latest" in f for f in res.invariants.failures)
    model = compiler.compile_automaton("blocks:4", max_len=24, method="local")
    with torch.no_grad():  # halve the count head's value scale
        model.blocks[1].attn.W_V[0].mul_(0.5)
    res = verify(model, **CHECK)
    assert any("head loc.count" in f for f in res.invariants.failures)


def test_one_layer_plans_put_the_aggregates_in_the_embedding():
    model = compiler.compile_automaton("memory:3", max_len=32, method="local")
    assert len(model.blocks) == 1 and model.meta["positions"] is None  # no offset head: no position code
    assert model.meta["local"]["mode"] == "anchor" and model.meta["local"]["colours"] == 3
    assert verify(model, **CHECK).exact


def test_auto_and_the_registry():
    assert "local" in registry.names() and registry.names()[-1] == "scan"
    d = compiler.pipeline.decide(load_spec("blocks:4"), "auto", 256)
    cand = {c.name: c for c in d.candidates}
    assert cand["local"].layers == 2 or d.method == "local"


def test_cli_compiles_and_refuses(tmp_path, capsys):
    out = tmp_path / "adder.safetensors"
    assert main(["compile", "adder:2", "-o", str(out), "--max-len", "32", "--method", "local"]) == 0
    assert main(["run", str(out), "--input", "11 01 10 00"]) == 0
    assert capsys.readouterr().out.split()[-4:] == ["d0c1", "d0c1", "d0c1", "d1c0"]
    assert main(["compile", "parity", "-o", str(tmp_path / "p.safetensors"), "--method", "local"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: local needs") and len(err.strip().splitlines()) == 1


def test_detection_is_not_repeated_after_planning(monkeypatch, tmp_path):
    model = compiler.compile_automaton("repeat:2", max_len=16, method="local")
    path = tmp_path / "m.safetensors"
    compiler.save(model, path)
    monkeypatch.setattr(local, "detect", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-detected")))
    loaded = compiler.load(path)
    assert verify(loaded, **CHECK).exact
    assert verify(compiler.with_start(loaded, "1"), **CHECK).exact


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_targets_at_256_on_1000_random_inputs(name):
    model = compiler.compile_automaton(name, max_len=256, method="local", allow_inexact=False)
    res = verify(model, samples=1000, exhaustive_budget=1 << 14)
    assert res.exact, res.counterexample


def test_detect_is_what_applies_uses():
    plan, _ = detect(load_spec("repeat:2"))
    assert local.CONSTRUCTION.applies(load_spec("repeat:2")) == plan


# --- one declaration: the program the gadgets declare is the one certified ----------------------


@pytest.mark.parametrize("name", ["adder:2", "regex:b*ab*a(a|b)*"])
def test_the_declared_program_is_certified_and_a_wrong_final_entry_is_refused(monkeypatch, declared_then_refused,
                                                                              name):
    """The obligations certified are the program's own declaration (its gadgets' and its
    :class:`Declaration`), proved against the automaton; one reached key of the final table sent
    to another state in the plan -- so in the weights and the declaration alike -- is refused by
    the program proof, naming an input the model gets wrong."""
    good = local.detect

    def bad(automaton):
        p, reason = good(automaton)
        st = p.starts[automaton.start]
        i = max(i for i, q in enumerate(st.final) if q >= 0)
        final = tuple((q + 1) % p.n_states if j == i else q for j, q in enumerate(st.final))
        return dataclasses.replace(p, starts=tuple(dataclasses.replace(s, final=final) if s is st else s
                                                   for s in p.starts)), reason

    def corrupt():
        monkeypatch.setattr(local, "detect", bad)
        return compiler.compile_automaton(name, max_len=16, method="local")
    declared_then_refused(compiler.compile_automaton(name, max_len=16, method="local"), local.build, corrupt)
