"""The generic layer-wise check (verify/layerwise.py): every construction's models hold their declared
program's codes after every layer; a model broken in one head or one MLP entry, on inputs that reach
it, is named by layer, head or MLP, subspace, sequence and position; a declared program that is not
the automaton is named by its readout; under a promise each sequence is checked up to its first
illegal letter."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build
from compiler.automata.promise import legal_mask
from compiler.automata.subregular_families import random_language
from constructions.obligations import Readout
from verify import layerwise
from verify.certify import obligations_of, program
from verify.certify.semantics import read
from verify.check import verify

CASES = [("parity", "scan"), ("quaternion", "krohn-rhodes"), ("grid:5", "gridworld"), ("dyck:2,2", "bounded-stack"),
         ("dyck-legal:2,2", "bounded-stack"), ("memory:3", "local"), ("lt", "locally-testable"),
         ("nth-last:3", "lookback"), ("sp", "piecewise")]


def _model(spec: str, method: str, T: int = 16):
    a = random_language(spec, k=2, letters=3 if spec == "lt" else 4, seed=0) if spec in ("sp", "lt") else build(spec)
    return compiler.compile_automaton(a, max_len=T, method=method)


def _tokens(model, n: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, model.automaton.n_symbols, (n, model.max_len))


@pytest.mark.parametrize("spec,method", CASES)
def test_every_construction_holds_its_declared_program_after_every_layer(spec, method):
    model = _model(spec, method)
    out = layerwise.invariants(model, _tokens(model))
    assert out.failures == [] and out.measured["program_readout_errors"] == 0
    compared = set(out.measured["worst_deviation"])
    tracked = set(obligations_of(model).embedding.codes)
    assert compared == tracked - set(out.measured["not_compared"])  # every tracked subspace but the sums of flags
    assert len(out.measured["deviations"]) == 2 * len(model.blocks)  # after each layer's heads and its MLP
    assert all(row["worst_deviation"] < row["tolerance"] for row in out.measured["deviations"])
    assert all(h.get("worst_leaked_mass", 0.0) < 1e-2 for h in out.heads)


def test_one_mlp_entry_of_a_scan_is_named_by_layer_mlp_and_subspace():
    """Soundness: one hidden unit of layer 2's composition writes one more unit into scan:map[0]."""
    model = _model("cyclic:3", "scan", T=8)
    dim = model.subspace("scan:map")[0]
    mlp = model.blocks[1].mlp
    with torch.no_grad():
        getattr(mlp, mlp.weight_name(mlp.n_hidden))[0, dim] += 1.0
    out = layerwise.invariants(model, _tokens(model, 32))
    first = out.failures[0]
    assert first.startswith("layer 2 MLP, MLP scan2.compose: scan:map deviates") and "sequence" in first
    assert not any(f.startswith("layer 1") for f in out.failures)


def test_a_level_head_of_a_stack_is_named_only_where_the_stack_reaches_its_level():
    """Soundness on a rare input: the value of the level-3 head is halved; inputs that never push to
    depth 3 cannot see it, the deep-cycle family does."""
    model = _model("dyck:4,2", "bounded-stack", T=24)
    with torch.no_grad():
        model.blocks[1].attn.W_V[2].mul_(0.5)
    a = model.automaton
    shallow = np.array([[a.alphabet.index(x) for x in "([])" * 6]], dtype=np.int64)
    assert layerwise.invariants(model, shallow).failures == []
    deep = np.array([[a.alphabet.index(x) for x in "((((" + "))))" + "(((" + ")))" * 3 + "()"]], dtype=np.int64)
    out = layerwise.invariants(model, deep)
    assert any(f.startswith("layer 2 attention, head st.open3: st:open3 deviates") for f in out.failures)
    assert not any("st.open1" in f or "st.open2" in f for f in out.failures)


def test_a_declared_program_that_is_not_the_automaton_is_named_by_its_readout(monkeypatch):
    model = _model("parity", "scan")
    ob = obligations_of(model)
    table = {k: 1 - v for k, v in ob.readout.table.items()}  # the readout's two states swapped
    monkeypatch.setattr(layerwise, "obligations_of", lambda m: replace(ob, readout=Readout(ob.readout.reads, table)))
    out = layerwise.invariants(model, _tokens(model, 2))
    assert out.measured["program_readout_errors"] == 2 * model.max_len
    first = out.failures[0]
    assert first.startswith("the declared program reads out ") and "where the automaton's state is" in first


def test_under_a_promise_each_sequence_is_checked_up_to_its_first_illegal_letter():
    model = _model("dyck-legal:2,2", "bounded-stack")
    rows = _tokens(model, 16, seed=3)  # random letters: illegal within a few positions
    out = layerwise.invariants(model, rows)
    assert out.failures == [] and out.sequences == 16
    r = verify(model, samples=4, exhaustive_budget=64)
    assert r.exact and r.invariants.failures == [] and r.checked["layerwise"].startswith("every tracked")


@pytest.mark.parametrize("spec,method", CASES)
def test_the_concrete_run_reads_out_what_the_proofs_memories_read_out(spec, method):
    """The two semantics of one declaration agree: the proof's step on memories
    (verify/certify/program.py) and the concrete run on whole sequences give the same readout code
    at every position."""
    model = _model(spec, method)
    ob = obligations_of(model)
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.zeros((1, model.max_len), dtype=torch.long))
    embedded = cache["blocks.0.hook_resid_pre"][0].double().numpy()
    positional = {n: embedded[:, model.subspace(n)] for n in layerwise.positional_names(ob)}
    machine = program.build(ob, model.max_len, positional.get)
    reads = " + ".join(ob.readout.reads)
    for row in _tokens(model, 3, seed=1):
        row = row[: int(legal_mask(model.domain, row[None]).cumprod().sum())]
        run, memory = layerwise.run_program(ob, row, positional), machine.start
        for t, letter in enumerate(row, 1):
            memory, env = program.step(machine, memory, int(letter), t)
            assert read(env, reads) == read(run.phases[-1][1][t], reads)
