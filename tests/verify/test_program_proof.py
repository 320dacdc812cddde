"""The certificate's second half (verify/certify/program.py): the declared program computes the
automaton, proved from the obligations and the spec alone.

Each soundness test injects a bug the way a real one would sit: in the construction's (or the
decomposer's) table, so that the weights and the obligations agree with each other -- the
weight checker alone certifies such a model.  The program proof must refuse it, naming a
shortest input on which program and automaton differ, and the model must really be wrong there."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from compiler.automata.load import load_spec
from compiler.automata.subregular_families import random_language
from compiler.cli import main
from compiler.pipeline import compile_automaton
from constructions import factors, gridworld, krohn_rhodes, lookback
from constructions.checkpoint import load, save, stamp_header
from constructions.obligations import Joint, Readout
from verify.certify import certificate as certificate_module
from verify.certify import Certificate, certify
from verify.certify.certificate import obligations_of
from verify.certify.program import prove


def _separates(model, word: str) -> bool:
    """Whether the model's output differs from the automaton's state at some position of ``word``."""
    a = model.automaton
    states = [a.states[q] for q in a.run([a.alphabet.index(x) for x in word.split()])]
    return model.simulate([word.split()])[0] != states


def _refused_at(cert: Certificate) -> str:
    """The separating input a program refusal names."""
    assert cert.certified is False and cert.supported is True, cert.reason
    assert cert.failure["where"] == "program", cert.failure
    return cert.failure["detail"].split("'")[1]


def test_a_lookback_window_mapped_to_the_next_state_is_refused_naming_a_shortest_input(monkeypatch):
    """One window of the lookback table maps to the next state, in the weights and the obligations
    alike (both read lookback.table): the weights run that program, the program is not the automaton."""
    good = lookback.table
    spec = load_spec("regex:(a|b)*abba", alphabet=["a", "b"])

    def bad(plan, automaton):
        out = good(plan, automaton)
        key = max(out)  # one full window
        out[key] = np.roll(out[key], 1)
        return out
    monkeypatch.setattr(lookback, "table", bad)
    model = compile_automaton(spec, max_len=10, method="lookback")
    word = _refused_at(certify(model))
    assert _separates(model, word)
    assert len(word.split()) == model.meta["plan"]["k"] + model.meta["plan"].get("m", 0)  # a window's length: shortest


def test_a_krohn_rhodes_readout_entry_changed_is_refused(monkeypatch):
    """One entry of the cascade's readout table (quaternion, max_len 8) changed in the schedule the
    build reads: the readout gadget's weights and its declared obligation change together."""
    good = krohn_rhodes.schedule

    def bad(cascade):
        sched = good(cascade)
        rows = dict(sched.readout.rows)
        key = sorted(rows, key=repr)[-1]
        rows[key] = (rows[key] + 1) % len(rows)
        return dataclasses.replace(sched, readout=dataclasses.replace(sched.readout, rows=rows))
    monkeypatch.setattr(krohn_rhodes, "schedule", bad)
    model = compile_automaton("quaternion", max_len=8, method="krohn-rhodes")
    word = _refused_at(certify(model))
    assert _separates(model, word)


def test_a_forged_krohn_rhodes_checkpoint_is_refused_by_the_cli(tmp_path, capsys):
    """Two targets of the stored plan's readout table swapped, with the two matching columns of the
    last MLP's W_out, digests recomputed: the weights run the stored plan's program, which the
    certificate no longer takes for the automaton."""
    path = tmp_path / "q.safetensors"
    assert main(["compile", "quaternion", "--method", "krohn-rhodes", "--max-len", "16", "-o", str(path)]) == 0
    model = load(path)
    table = model.meta["plan"]["readout"]["table"]
    (k1, q1), (k2, q2) = table[1], table[2]
    table[1], table[2] = [k1, q2], [k2, q1]
    state = model.layout()["subspaces"][obligations_of(model).readout.reads[0]]["dims"]
    with torch.no_grad():
        W = model.blocks[-1].mlp.W_out
        W[:, [state[q1], state[q2]]] = W[:, [state[q2], state[q1]]].clone()
    model.meta.pop("verification", None)
    stamp_header(model)
    save(model, path)
    capsys.readouterr()
    assert main(["certify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "program: on the input" in out
    word = out.split("on the input '")[1].split("'")[0]
    assert _separates(load(path), word)


def _swap_readout(monkeypatch, model, q1: int, q2: int) -> None:
    """The model reads states q1 and q2 out swapped, in its unembedding and in its declared
    readout alike (a readout bug the weight checker cannot see)."""
    with torch.no_grad():
        model.W_U[:, [q1, q2]] = model.W_U[:, [q2, q1]].clone()
        model.b_U[[q1, q2]] = model.b_U[[q2, q1]].clone()
    good = certificate_module.obligations_of
    swap = {q1: q2, q2: q1}

    def bad(m):
        ob = good(m)
        return dataclasses.replace(ob, readout=Readout(ob.readout.reads, {
            k: swap.get(v, v) for k, v in ob.readout.table.items()}))
    monkeypatch.setattr(certificate_module, "obligations_of", bad)


def _proved_then_refused_swapped(monkeypatch, model) -> str:
    """Certify ``model`` end to end, swap the readouts of its start and a state one letter away
    (weights and obligations alike), and return the separating input the refusal names."""
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    a = model.automaton
    q1 = a.start
    q2 = next(a.maps[x][q1] for x in range(a.n_symbols) if a.maps[x][q1] != q1)
    _swap_readout(monkeypatch, model, q1, q2)
    word = _refused_at(certify(model))
    assert _separates(model, word)
    return word


@pytest.mark.parametrize("spec, method, max_len", [
    ("symmetric:3", "scan", 16), ("adder:2", "local", 16), ("cyclic-product:2,3", "product", 16),
    ("dyck:2,2", "bounded-stack", 16), ("dyck-legal:2,2", "bounded-stack", 16), ("nth-last:3", "lookback", 16),
    ("cyclic:3", "krohn-rhodes", 16), ("grid:4", "gridworld", 16)])
def test_every_covered_construction_refuses_two_states_read_out_swapped(monkeypatch, spec, method, max_len):
    """Per construction: certified end to end, then refused (naming a separating input) once two
    states' readouts are swapped consistently in weights and obligations."""
    model = compile_automaton(spec, max_len=max_len, method=method)
    word = _proved_then_refused_swapped(monkeypatch, model)
    assert len(word.split()) == 1  # q2 is one letter away: the shortest input


@pytest.mark.parametrize("cls, k, method", [("sp", 3, "piecewise"), ("pt", 2, "piecewise"),
                                            ("sl", 3, "locally-testable"), ("ltt", 2, "locally-testable")])
def test_the_subregular_constructions_are_proved_and_refuse_a_swapped_readout(monkeypatch, cls, k, method):
    """A piecewise model's prefix counts are kept saturated (min(count, c) where every lookup that
    reads them is constant from c on), so its program is proved; swapping two states' readouts in
    weights and obligations is refused with a separating input."""
    spec = random_language(cls, k=k, letters=3, seed=0)
    _proved_then_refused_swapped(monkeypatch, compile_automaton(spec, max_len=24, method=method))


def test_a_scan_whose_stored_letter_map_is_forged_is_refused():
    """The scan's stored plan gives one letter a wrong map, and the embedding holds that map: the
    weights compose it faithfully, and the prefix's map is not the automaton's."""
    model = compile_automaton("symmetric:3", max_len=16, method="scan")
    plan = model.meta["plan"]
    maps = plan["letter_maps"]
    maps[0] = [maps[0][1], maps[0][0], *maps[0][2:]]
    dims = model.layout()["subspaces"]["scan:map"]["dims"]
    with torch.no_grad():
        model.W_E[0, dims] = torch.tensor(maps[0], dtype=model.W_E.dtype)
    word = _refused_at(certify(model))
    assert _separates(model, word)


def test_a_false_joint_claim_is_refused():
    """A cascade's claim (its reachable configurations) missing one row: the weight checker would
    skip the combinations it excludes, so the program proof checks the claim itself."""
    model = compile_automaton("quaternion", max_len=8, method="krohn-rhodes")
    ob = obligations_of(model)
    j = ob.joint[0]
    bad = dataclasses.replace(ob, joint=(Joint(j.names, np.asarray(j.rows)[1:]), *ob.joint[1:]))
    with pytest.raises(Exception, match="claim"):
        prove(model, bad)


@pytest.mark.parametrize("spec", ["grid:4", "grid:9"])
def test_a_gridworld_with_sixteen_residues_is_certified_end_to_end(spec):
    """The paper's Grid4 and Grid9 at T = 100, residues mod 16: the walk's lemmas
    (verify/certify/walk.py) keep a memory that does not grow with the residues."""
    model = compile_automaton(spec, max_len=100, method="gridworld")
    assert model.meta["gridworld"]["axes"][0]["modulus"] == 16
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    assert cert.program["pairs"] < 1000


def test_recency_heads_outside_the_walk_lemma_beyond_the_budget_are_named_not_covered():
    """One head's match map no longer a power of the codes' cycle (two entries swapped): the walk's
    lemmas do not apply, and the order of last visits over 16 codes is beyond the search's budget,
    so the proof names the heads and never says "proved"."""
    model = compile_automaton("grid:4", max_len=128, method="gridworld")
    ob = obligations_of(model)
    layer = ob.layers[1]
    f = layer.fetches[0]
    match = np.asarray(f.match).copy()
    match[[0, 1]] = match[[1, 0]]
    fetches = (dataclasses.replace(f, match=match), *layer.fetches[1:])
    bad = dataclasses.replace(ob, layers=(ob.layers[0], dataclasses.replace(layer, fetches=fetches)))
    out = prove(model, bad)
    assert out["proved"] is False and out["not_covered"].startswith("the recency heads gw0.find"), out


def test_a_grid9_declaration_with_a_move_reversed_is_refused_beyond_the_order_budget(monkeypatch):
    """grid:9 at T = 100 (16 residues, under the walk's lemmas): the detected world reverses one
    letter's move, in weights and declaration alike; the proof names an input the model gets wrong."""
    good = gridworld.detect

    def bad(automaton):
        world, reason = good(automaton)
        s = next(i for i, mv in enumerate(world.moves) if mv is not None)
        moves = list(world.moves)
        moves[s] = (moves[s][0], -moves[s][1])
        return dataclasses.replace(world, moves=tuple(moves)), reason
    monkeypatch.setattr(gridworld, "detect", bad)
    model = compile_automaton("grid:9", max_len=100, method="gridworld")
    word = _refused_at(certify(model))
    assert _separates(model, word)


def test_a_gridworld_start_rule_shifted_in_weights_and_obligations_is_refused(monkeypatch):
    """The boundary count's start rule (a race's threshold) off by one, in the obligations, with the
    weights proved against them: the race's level test decides wrong from the start state."""
    model = compile_automaton("grid:4", max_len=16, method="gridworld")
    good = certificate_module.obligations_of

    def bad(m):
        ob = good(m)
        layer = ob.layers[1]
        races = layer.mlp.races
        shifted = (dataclasses.replace(races[0], threshold=races[0].threshold - 1), *races[1:])
        return dataclasses.replace(ob, layers=(ob.layers[0], dataclasses.replace(
            layer, mlp=dataclasses.replace(layer.mlp, races=shifted))))
    monkeypatch.setattr(certificate_module, "obligations_of", bad)
    cert = certify(model)
    assert cert.failure["where"] == "program" and "on the input" in cert.failure["detail"]


def test_the_program_proof_is_fast_on_long_inputs():
    """The search's memory does not grow with max_len (a scan, a counter, a stack with its sink)."""
    for spec, method in (("quaternion", "scan"), ("cyclic:5", "krohn-rhodes"), ("dyck:2,2", "bounded-stack")):
        model = compile_automaton(spec, max_len=1024, method=method)
        out = prove(model, obligations_of(model))
        assert out["proved"] is True and out["seconds"] < 5, (spec, out)


def test_a_partial_automaton_is_proved_on_legal_inputs_and_says_so():
    """Without a promise in its obligations (a cascade), a partial automaton's program is proved on
    legal inputs only -- the automaton gives no other input a state -- and the verdict says so."""
    spec = {"states": ["a", "b"], "alphabet": ["x", "y"], "start": "a",
            "transitions": {"a": {"x": "b"}, "b": {"x": "a", "y": "b"}}}
    model = compile_automaton(spec, max_len=16, promise="legal", method="krohn-rhodes")
    cert = certify(model)
    assert cert.certified is True and cert.program["inputs"] == "legal"
    from verify.certify import certificate_text
    assert certificate_text(cert).startswith("certified exact on every legal input")


def test_a_gridworld_whose_detected_world_places_two_cells_swapped_is_refused(monkeypatch):
    """The detector's world (the plan) gives two states each other's coordinates: the embedding, the
    unembedding and the declared readout all read it, so the weights run that program faithfully;
    the program is not the automaton, and the proof names an input on which the model is wrong."""
    good = gridworld.detect

    def bad(automaton):
        world, reason = good(automaton)
        coords = list(world.coords)
        q1, q2 = [q for q in range(len(coords)) if q != automaton.start][:2]
        coords[q1], coords[q2] = coords[q2], coords[q1]
        return dataclasses.replace(world, coords=tuple(coords)), reason
    monkeypatch.setattr(gridworld, "detect", bad)
    model = compile_automaton("grid:4", max_len=16, method="gridworld")
    word = _refused_at(certify(model))
    assert _separates(model, word)


@pytest.mark.parametrize("spec", ["quaternion", "dihedral:4"])
def test_a_krohn_rhodes_input_table_entry_changed_is_refused(monkeypatch, spec):
    """One row of a lower component's input table (the decomposer's cascade, as the schedule plans
    it) changed: its lookup's weights and its declared obligation read the same row."""
    good = krohn_rhodes.schedule

    def bad(cascade):
        sched = good(cascade)
        c = next(c for c in reversed(cascade.components) if sched.inputs[c.name].keys)
        plan = sched.inputs[c.name]
        rows = dict(plan.rows)
        key = sorted(rows, key=repr)[-1]
        rows[key] = (0 if rows[key] is None else rows[key] + 1) % c.size
        return dataclasses.replace(sched, inputs={**sched.inputs, c.name: dataclasses.replace(plan, rows=rows)})
    monkeypatch.setattr(krohn_rhodes, "schedule", bad)
    model = compile_automaton(spec, max_len=8, method="krohn-rhodes")
    word = _refused_at(certify(model))
    assert _separates(model, word)


def test_a_letter_coded_as_another_class_is_refused_though_the_automaton_cannot_tell_it_apart(monkeypatch):
    """The search steps one letter per class of letters with equal token rows and equal automaton
    columns.  One letter the automaton cannot tell from a lower one (the same column) is coded as a
    letter of another class, in the weights and the obligations alike: its token row then differs,
    so it is searched on its own, and the proof names an input holding it."""
    spec = random_language("sl", k=2, letters=16, seed=0)
    cols = [(tuple(spec.maps[x]), tuple(spec.defined[x])) for x in range(spec.n_symbols)]
    x = next(x for x in range(spec.n_symbols) if cols[x] in cols[:x])
    good = compile_automaton(spec, max_len=12, method="locally-testable")
    cert = certify(good)
    assert cert.certified and cert.program["letters"] == len(set(cols)) < spec.n_symbols
    codes = factors.letter_codes

    def bad(plan):
        out = codes(plan)
        out[x] = next(out[z] for z in range(spec.n_symbols) if cols[z] != cols[x] and not np.array_equal(out[z], out[x]))
        return out
    monkeypatch.setattr(factors, "letter_codes", bad)
    model = compile_automaton(spec, max_len=12, method="locally-testable")
    word = _refused_at(certify(model))
    assert spec.alphabet[x] in word.split()
    assert _separates(model, word)


def test_a_readout_code_is_decoded_by_value_and_found_again_by_identity_within_its_budget(monkeypatch):
    """:func:`program._said`: an object met before is found by identity, an equal object or a
    different code by value; past ``KEPT_DIMS`` objects are no longer kept (and still decoded)."""
    from types import SimpleNamespace

    from verify.certify import memo
    from verify.certify import program as program_module
    monkeypatch.setattr(memo, "KEPT_DIMS", 4)
    table = {(1, 0): 0, (0, 1): 1}
    p = SimpleNamespace(ob=SimpleNamespace(readout=SimpleNamespace(table=table)), readouts={}, numbers=memo.Numbers())
    a, b = (1.0, 0.0), (0.0, 1.0)
    assert [program_module._said(p, x) for x in (a, b, a, tuple([1.0, 0.0]), (0.0, 2.0))] == [0, 1, 0, 0, (0, 2)]
    assert [v[0] for v in p.numbers.of_id.values()] == [a, b] and p.numbers.of_id[id(a)][0] is a
    with pytest.raises(program_module.ProgramError):
        program_module._said(p, (0.5, 0.0))
