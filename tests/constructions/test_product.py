"""The product construction (constructions/product.py) and its pieces: MLPs beside each other,
programs side by side, the summed readout."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build
from compiler.automata.errors import ShortcutError
from compiler.automata.spec import from_dict
from constructions import registry
from constructions.checkpoint import load, save
from constructions.construction import BuildOptions
from constructions.gadgets import CodeInput, code_function_mlp
from constructions.program import Beside, Head, fuse, renamed
from constructions.workspace import Workspace, beside
from verify.check import verify

QUICK = {"samples": 8, "exhaustive_budget": 1024, "family_limit": 2}

# 4 states, 4 letters (the project's random generator, seed 0, automaton 48): before the product,
# auto compiled it in 3 layers; it is two quotients (2 and 3 states) that one layer each compiles
R48 = {"name": "random48", "states": ["0", "1", "2", "3"], "alphabet": ["a0", "a1", "a2", "a3"], "start": "0",
       "transitions": {"0": {"a0": "1", "a1": "0", "a2": "2", "a3": "3"},
                       "1": {"a0": "1", "a1": "1", "a2": "2", "a3": "3"},
                       "2": {"a0": "2", "a1": "2", "a2": "2", "a3": "3"},
                       "3": {"a0": "1", "a1": "3", "a2": "2", "a3": "3"}}}


def test_beside_runs_mlps_of_different_depths_on_disjoint_dims() -> None:
    """A one-layer MLP beside a two-layer (fused) one: the update is each part's on its own dims."""
    ws = Workspace()
    x, y, u, v, w = (ws.add(n) for n in "xyuvw")
    one = code_function_mlp("f", CodeInput(x, 4), y, np.array([[0.0], [2.0], [1.0], [2.0]]))
    two = fuse(code_function_mlp("g", CodeInput(u, 3), v, np.array([[1.0], [0.0], [3.0]])),
               code_function_mlp("h", CodeInput(v, 4), w, np.array([[0.0], [5.0], [6.0], [7.0]])))
    both = Beside("b", [one, two], reads=("x", "u", "v"), writes=("y", "v", "w")).embed(ws)
    d1, d2 = one.embed(ws), two.embed(ws)
    assert len(both.weights) == 3 and both.hidden_sizes[0] == d1.hidden_sizes[0] + d2.hidden_sizes[0]
    for a in range(4):
        for b in range(3):
            r = np.zeros(ws.d_model)
            r[x[0]], r[u[0]] = a, b
            np.testing.assert_array_equal(both(r), d1(r) + d2(r))


def test_beside_declares_its_parts_and_a_part_side_by_side_gives_its_parts() -> None:
    """A product layer's MLP declares ``Beside`` of its parts' obligations, renamed with their prefix;
    a factor's own side-by-side MLP contributes its parts (the certifier splits parts by the dims
    they touch); one undeclared part leaves the whole undeclared."""
    ws = Workspace()
    x, y, u, v = (ws.add(n) for n in "xyuv")
    f = code_function_mlp("f", CodeInput(x, 2), y, np.array([[0.0], [1.0]]))
    g = code_function_mlp("g", CodeInput(u, 2), v, np.array([[1.0], [0.0]]))
    inner = Beside("in", [renamed(f, "f1."), renamed(g, "f1.")])
    outer = Beside("out", [inner, renamed(f, "f2.")]).obligation
    assert [p.mlp for p in outer.parts] == ["f1.f", "f1.g", "f2.f"]
    assert outer.parts[2].reads == ("f2.x",) and outer.parts[2].out == "f2.y"
    assert Beside("b", [f, dataclasses.replace(g, obligation=None)]).obligation is None


def test_beside_prefixes_names_and_offsets_dims() -> None:
    w1, w2 = Workspace(), Workspace()
    w1.add("bos"), w1.add("s", 2)
    w2.add("bos"), w2.add("s", ["a", "b"])
    ws = beside([w1, w2], ["f1.", "f2."])
    assert ws.labels == ["f1.bos", "f1.s[0]", "f1.s[1]", "f2.bos", "f2.s:a", "f2.s:b"]
    assert ws["f2.s"].dims == (4, 5) and ws.dim("f2.bos") == 3
    h = Head("h", np.eye(2), np.eye(2), np.eye(2), np.eye(2), reads={"query": ("s",)}, writes=("s",))
    r = renamed(h, "f2.")
    assert (r.name, r.reads, r.writes) == ("f2.h", {"query": ("f2.s",)}, ("f2.s",)) and r.W_Q is h.W_Q
    with pytest.raises(ValueError):
        beside([w1, w1], ["f.", "f."])


def test_auto_takes_the_product_where_it_is_shallower_and_it_is_exact() -> None:
    """random48: 4 states, two quotients of 2 and 3 states, one layer each: 1 layer (3 before).  Auto
    now takes the since program (starfree: also 1 layer, 1,720 parameters against 3,043), so the
    product is forced here, and auto is checked to be no deeper."""
    a = from_dict(R48)
    assert len(compiler.compile_automaton(a, max_len=64).blocks) == 1
    m = compiler.compile_automaton(a, max_len=64, method="product")
    info = m.meta["product"]
    assert m.meta["method"] == "product" and len(m.blocks) == 1
    assert sorted(f["states"] for f in info["factors"]) == [2, 3]
    assert all(f["layers"] == 1 for f in info["factors"])
    r = verify(m, **QUICK)
    assert r.exact and r.invariants.failures == [] and r.margins["readout_min_logit_margin"] >= 1.0 - 1e-6
    assert [f["min_logit_margin"] for f in r.invariants.measured["factors"]] == [pytest.approx(1.0, abs=1e-5)] * 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_forced_product_of_a_group_is_exact_and_its_estimate_is_the_build(dtype) -> None:
    """Z2 x Z2 (cyclic-product:2,2) forced: two counters mod 2 side by side; compile checks the
    estimate against the built model (an internal error otherwise), in float32 and float64."""
    m = compiler.compile_automaton(build("cyclic-product:2,2"), max_len=32, method="product", dtype=dtype)
    assert len(m.blocks) == max(f["layers"] for f in m.meta["product"]["factors"])
    assert verify(m, **QUICK).exact


def test_checkpoint_round_trip_and_a_broken_factor_is_named(tmp_path) -> None:
    m = compiler.compile_automaton(from_dict(R48), max_len=32, method="product")
    path = tmp_path / "p.safetensors"
    save(m, path)
    back = load(path)
    assert verify(back, **QUICK).exact
    lo, hi = back.meta["product"]["factors"][1]["dims"]
    with torch.no_grad():
        back.W_E[:, lo:hi] = 0.0  # factor 2 loses its letters
    r = verify(back, **QUICK)
    assert not r.exact and any(f.startswith("factor 2") for f in r.invariants.failures)


def test_set_start_rebuilds_or_refuses() -> None:
    m = compiler.compile_automaton(from_dict(R48), max_len=32, method="product")
    try:
        other = compiler.with_start(m, "3")
    except ShortcutError as e:
        assert "compile the spec again" in str(e)
    else:
        assert other.automaton.start == other.automaton.state_index["3"] and verify(other, **QUICK).exact


def test_no_decomposition_is_a_refusal() -> None:
    with pytest.raises(ShortcutError, match="substitution property"):
        compiler.compile_automaton(build("cyclic:4"), max_len=16, method="product")


@pytest.mark.slow
def test_every_product_auto_takes_on_random_automata_is_exact() -> None:
    """The planner's random sweep (seed 0, 2-8 states, 2-4 letters) at T = 256: every automaton
    auto compiles with the product verifies exact (random full-length, exhaustive short,
    adversarial families, each factor's readout)."""
    import random

    from compiler.automata.catalog import random_automaton

    rng = random.Random(0)
    seen = 0
    for i in range(300):
        a = random_automaton(rng, rng.randint(2, 8), rng.randint(2, 4), name=f"random{i}")
        m = compiler.compile_automaton(a, max_len=256)
        if m.meta["method"] == "product":
            seen += 1
            assert verify(m, samples=16).exact, a.name
    assert seen >= 10


def test_labels_of_a_product_are_read_from_its_factors_one_hots() -> None:
    """counter6.dot (AALpy Moore machine, mod 3 labels) forced to the product: both factors read
    their state out of a one-hot, so the product declares the two one-hots as its state codes,
    and halfspaces of them score the labels in the unembedding (no lookup MLP); smaller than the
    state model, exact."""
    from pathlib import Path

    from compiler.automata.load import load_spec

    a = load_spec(Path(__file__).resolve().parents[2] / "examples" / "aalpy" / "counter6.dot")
    states = compiler.compile_automaton(a, max_len=32, method="product")
    labels = compiler.compile_automaton(a, max_len=32, method="product", readout="labels")
    r = labels.meta["readout"]
    assert labels.meta["method"] == "product" and r["states"] == "original"
    assert r["notes"]["lookup"] == "halfspaces" and r["notes"]["reader"] == "unembedding"
    assert labels.config.blocks == states.config.blocks
    assert sum(p.numel() for p in labels.parameters()) < sum(p.numel() for p in states.parameters())
    assert verify(labels, **QUICK).exact


def _beside_a5(factor: str) -> dict:
    """``factor``'s automaton and A5 on five points read together: letter (x, g) moves the first by x
    and the second by generator g (its quotients: ``factor`` and the A5 part, by their cheapest
    constructions -- a lookback and a scan for a few-letters-back language)."""
    d = compiler.load_spec(factor)
    g = {"c": [1, 2, 0, 3, 4], "f": [1, 2, 3, 4, 0]}
    trans = {f"{d.states[q]}.{i}": {f"{a}{n}": f"{d.states[d.maps[j][q]]}.{g[n][i]}" for j, a in enumerate(d.alphabet)
                                    for n in g} for q in range(d.n_states) for i in range(5)}
    return {"name": f"{factor}xA5", "states": list(trans), "alphabet": [f"{a}{n}" for a in d.alphabet for n in g],
            "start": f"{d.states[d.start]}.0", "transitions": trans}


def _separates(model, word: list[str]) -> bool:
    a = model.automaton
    return model.simulate([word])[0] != [a.states[q] for q in a.run([a.alphabet.index(x) for x in word])]


def test_a_product_of_declared_factors_is_certified_end_to_end_and_a_factor_table_bug_is_refused(monkeypatch) -> None:
    """One declaration: the product's program is its factors' blocks side by side (their obligations
    prefixed), its readout the sum of theirs.  (a) A lookback beside a scan is certified end to end
    against exactly the program its build declares; (b) one window of the lookback factor's table
    mapped to the next state -- in the weights and the declared program alike -- is refused, naming
    an input on which the model is really wrong."""
    from constructions import lookback
    from verify.certify import certify

    a = from_dict(_beside_a5("regex:a(a|b)*b"))
    model = compiler.compile_automaton(a, max_len=16, method="product")
    assert [f["method"] for f in model.meta["product"]["factors"]] == ["lookback", "scan"]
    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    c, plan = registry.plan_of(model)
    declared = c.build(a, plan, BuildOptions.of_model(model))[0].obligations()
    assert cert.obligations_sha256 == declared.digest()
    assert [layer["mlp"]["kind"] for layer in cert.layers][0] == "beside"

    good = lookback.table

    def bad(plan, automaton):
        out = good(plan, automaton)
        key = max(out)
        out[key] = np.roll(out[key], 1)
        return out
    monkeypatch.setattr(lookback, "table", bad)
    broken = compiler.compile_automaton(a, max_len=16, method="product")
    cert = certify(broken)
    assert cert.certified is False and cert.failure["where"] == "program", cert.failure
    word = cert.failure["detail"].split("'")[1].split()
    assert _separates(broken, word)


def test_a_standard_product_records_that_its_factors_were_built_with_one_hidden_layer():
    """C6 as C2 x C3, each built with one hidden layer (at T = 24 both decodes interpolated: one
    block): the model's rebuilds (the certificate, set_start) must build the factors the same way,
    so the product records ``one_hidden_layer``."""
    from verify.certify import certify
    model = compiler.compile_automaton(build("cyclic:6"), max_len=24, method="product", shape="standard")
    assert model.meta["one_hidden_layer"] and len(model.blocks) == 1
    assert certify(model).certified is True


def test_a_factor_deeper_than_its_floor_allows_is_not_estimated_and_the_choice_is_the_full_ones(monkeypatch):
    """The product plans each quotient's cheapest construction, estimating those with a floor last and
    only while the floor is no deeper than the best: the choice equals estimating every construction."""
    from constructions import product

    a = from_dict(R48)
    factors = tuple(c for c in registry.entries() if c.name not in ("product", "transition"))
    plan = registry.get("product").applies(a)
    calls: list[str] = []
    for f in (p for pair in plan.pairs for p in pair.factors):
        fast = product._cheapest(f, 16, "sinusoidal", factors)
        full = product._cheapest(f, 16, "sinusoidal", tuple(dataclasses.replace(c, floor=None) for c in factors))
        assert (fast is None) == (full is None)
        if fast is not None and full is not None:
            assert (fast[0].name, fast[2]) == (full[0].name, full[2])
    kr = next(c for c in factors if c.name == "krohn-rhodes")
    watched = dataclasses.replace(kr, estimate=lambda *x: calls.append("kr") or kr.estimate(*x),
                                  floor=lambda plan: 99)
    picked = product._cheapest(plan.pairs[0].factors[0], 16, "sinusoidal",
                               tuple(watched if c is kr else c for c in factors))
    assert picked is not None and picked[0].name != "krohn-rhodes" and not calls


@pytest.mark.parametrize("max_len,flat", [(36, True), (100, False)])
def test_flat_line_worlds_are_kept_only_while_the_program_proof_can_hold_their_labels(max_len, flat):
    """grid2d:3,3 as two line worlds: one-hidden-layer factors keep 2T + 1 one-hot labels per axis,
    jointly 9 x 73^2 = 47,961 at T = 36 (within the proof's 50,000: 2 blocks), 9 x 201^2 at T = 100
    (rebuilt by default, so unfolded into more blocks, not weight-proved only)."""
    model = compiler.compile_automaton("grid2d:3,3", max_len=max_len, method="product", shape="standard")
    assert bool(model.meta.get("one_hidden_layer")) is flat
    assert (len(model.blocks) == 2) is flat
