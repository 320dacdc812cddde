"""Lookback for definite automata: detection (compiler/automata/definite.py), the one-layer
construction (constructions/lookback.py), its layer-wise checks, the registry and the CLI."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build, paper_suite
from compiler.automata.definite import (
    LookbackPlan,
    definite_depth,
    detect,
    window_table,
)
from compiler.automata.errors import ShortcutError, SpecError
from compiler.automata.load import load_spec
from compiler.automata.spec import Semiautomaton
from compiler.cli import main
from constructions import lookback
from constructions.construction import Refusal
from verify.check import verify
from verify.layerwise import invariants

CHECK = {"samples": 32, "exhaustive_budget": 4096}


def nth_last(n: int) -> Semiautomaton:
    """"The n-th letter from the end is a" (the catalog's nth-last:n, n-definite)."""
    return build(f"nth-last:{n}")


def last_letter() -> Semiautomaton:
    """1-definite: the state is the last letter (or "none" before any)."""
    return Semiautomaton("last-letter", ("none", "a", "b", "c"), ("a", "b", "c"),
                         ((1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)), start=0)


def pair_sum() -> Semiautomaton:
    """2-definite over {0, 1, 2}: state (last letter, sum of the last two mod 3); before any
    letter the previous one counts as 0."""
    states = [("^", 0)] + [(p, s) for p in range(3) for s in range(3)]
    idx = {st: i for i, st in enumerate(states)}
    prev = lambda st: 0 if st[0] == "^" else st[0]  # noqa: E731
    maps = tuple(tuple(idx[(a, (prev(st) + a) % 3)] for st in states) for a in range(3))
    return Semiautomaton("pair-sum", tuple(f"{p}{s}" for p, s in states), ("0", "1", "2"), maps, start=0)


EXAMPLES = [(last_letter, 1), (lambda: nth_last(1), 1), (pair_sum, 2), (lambda: nth_last(2), 2),
            (lambda: nth_last(3), 3), (lambda: nth_last(4), 4)]


# --- detection (the IR layer) -----------------------------------------------------------------


@pytest.mark.parametrize("make,k", EXAMPLES)
def test_smallest_k_golden(make, k):
    assert definite_depth(make())[0] == k


@pytest.mark.parametrize("name", ["parity", "cyclic:3", "flipflop", "grid:4", "memory:3"])
def test_not_definite(name):
    k, reason = definite_depth(load_spec(name))
    assert k is None and reason.startswith("not definite")


def test_single_state_is_one_definite():
    a = Semiautomaton("one", ("q",), ("x", "y"), ((0,), (0,)))
    assert definite_depth(a)[0] == 1


def brute_depth(a: Semiautomaton, limit: int) -> int | None:
    for k in range(1, limit + 1):
        if all(len(set(a.run(w, start=q)[-1] for q in range(a.n_states))) == 1
               for w in itertools.product(range(a.n_symbols), repeat=k)):
            return k
    return None


def test_depth_agrees_with_brute_force_on_random_automata():
    rng = np.random.default_rng(0)
    found = set()
    for _ in range(400):
        n, s = int(rng.integers(1, 5)), int(rng.integers(1, 3))
        maps = tuple(tuple(int(x) for x in rng.integers(0, n, n)) for _ in range(s))
        a = Semiautomaton("r", tuple(map(str, range(n))), tuple("xyz"[:s]), maps)
        k = definite_depth(a)[0]
        assert k == brute_depth(a, 6)  # a definite n-state automaton is (n-1)-definite: 6 is enough
        found.add(k)
    assert {None, 1, 2} <= found


def test_window_table_is_the_state_after_every_window_from_every_start():
    a = pair_sum()
    plan, _ = detect(a)
    assert plan.k == 2 and len(plan.windows) == 9
    for w in itertools.product(range(3), repeat=2):
        assert {a.run(w, start=q)[-1] for q in range(a.n_states)} == {plan.window_state(w)}


def test_refusals_name_the_limit():
    plan, reason = detect(nth_last(9))
    assert plan is None and "9-definite, beyond the lookback limit k <= 8" in reason
    plan, reason = detect(nth_last(4), max_keys=8)
    assert plan is None and "2^4 = 16 entries, over the budget of 8" in reason
    k, reason = definite_depth(nth_last(3), max_pairs=1)
    assert k is None and reason.startswith("gave up: the definiteness test walks the 28 pairs of 8 states")
    assert "not definite" in detect(load_spec("parity"))[1]


def test_plan_round_trip_and_bad_plans():
    plan = detect(nth_last(3))[0]
    d = json.loads(json.dumps(plan.to_dict()))
    assert LookbackPlan.from_dict(d) == plan
    with pytest.raises(SpecError, match="window table"):
        LookbackPlan.from_dict({**d, "windows": d["windows"][:-1]})
    with pytest.raises(SpecError, match="window table"):
        LookbackPlan.from_dict({**d, "windows": [99] * 8})
    assert window_table(nth_last(3), 3) == plan.windows


# --- the construction ---------------------------------------------------------------------


@pytest.mark.parametrize("make,k", EXAMPLES)
def test_compiles_to_one_layer_and_verifies(make, k):
    a = make()
    model = compiler.compile_automaton(a, max_len=64, method="lookback")
    assert len(model.blocks) == 1 and model.config.blocks[0].n_heads == k
    assert model.meta["lookback"]["k"] == k
    plan = lookback.CONSTRUCTION.applies(a)
    assert lookback.estimate(plan, 64).params == model.info()["n_params"]  # the estimate is exact
    res = verify(model, **CHECK)
    assert res.exact, res.counterexample
    assert res.checked["layerwise"].startswith("every tracked subspace")
    assert len(res.margins["heads"]) == k and all(h["worst_leaked_mass"] < 1e-3 for h in res.margins["heads"])
    assert res.margins["mlps"][0]["distance_to_boundary"] > 0.2


@pytest.mark.parametrize("make,k", EXAMPLES[2:])
def test_one_hidden_layer_lookup_verifies_certifies_and_keeps_its_shape_from_another_start(make, k):
    from verify.certify import certify

    a = make()
    deep = compiler.compile_automaton(a, max_len=64, method="lookback")
    model = compiler.compile_automaton(a, max_len=64, method="lookback", one_hidden_layer=True)
    assert [b.mlp_hidden for b in deep.config.blocks][0] != [b.mlp_hidden for b in model.config.blocks][0]
    assert len(model.config.blocks[0].mlp_hidden) == 1 and model.meta["one_hidden_layer"]
    assert model.meta["layers"][0]["mlp"]["kind"] == "flat lookup"
    # the heads copy within the flat lookup's tolerance: a sharper softmax than the deep lookup's
    assert model.meta["lookback"]["beta"] > deep.meta["lookback"]["beta"]
    res = verify(model, **CHECK)
    assert res.exact, res.counterexample
    assert certify(model).certified
    other = compiler.with_start(model, a.states[-1])
    assert other.config == model.config and other.meta["one_hidden_layer"]
    assert verify(other, **CHECK).exact


def test_one_hidden_layer_lookup_is_held_to_the_budget_by_its_own_size():
    """The planner's estimate is of the two-layer lookup; the one-hidden-layer build checks its own."""
    from compiler.automata.errors import BudgetError

    deep = compiler.compile_automaton(nth_last(3), max_len=64, method="lookback")
    flat = compiler.compile_automaton(nth_last(3), max_len=64, method="lookback", one_hidden_layer=True)
    budget = (deep.info()["n_params"] + flat.info()["n_params"]) // 2
    assert compiler.compile_automaton(nth_last(3), max_len=64, method="lookback", max_params=budget)
    with pytest.raises(BudgetError, match="one-hidden-layer lookup"):
        compiler.compile_automaton(nth_last(3), max_len=64, method="lookback", one_hidden_layer=True, max_params=budget)


def test_long_inputs_exact_at_256_in_float32():
    model = compiler.compile_automaton(nth_last(3), max_len=256, method="lookback", allow_inexact=False)
    assert model.meta["method"] == "lookback" and not model.meta["warnings"]
    a = model.automaton
    toks = torch.randint(0, 2, (64, 256), generator=torch.Generator().manual_seed(1))
    assert model.predict(toks).tolist() == [a.run(r) for r in toks.tolist()]


def test_start_state_enters_only_the_lookup_output():
    model = compiler.compile_automaton(pair_sum(), max_len=32, method="lookback")
    a = model.automaton
    before = {k: v.clone() for k, v in model.state_dict().items()}
    other = compiler.with_start(model, "12")
    changed = {k for k, v in other.state_dict().items() if not torch.equal(v, before[k])}
    assert changed == {"blocks.0.mlp.W_out"}  # only rows of keys with a before-start entry move
    assert other.meta["plan"] == model.meta["plan"]  # the window table does not depend on q0
    toks = torch.randint(0, 3, (16, 32), generator=torch.Generator().manual_seed(2))
    q = a.state_index["12"]
    assert other.predict(toks).tolist() == [a.run(r, start=q) for r in toks.tolist()]
    assert verify(other, **CHECK).exact


def test_layerwise_checks_name_a_broken_head():
    model = compiler.compile_automaton(nth_last(3), max_len=16, method="lookback")
    with torch.no_grad():
        model.blocks[0].attn.W_O[1] *= 0.0  # head 1 no longer copies the letter at t - 1
    toks = np.array(list(itertools.product(range(2), repeat=6)), dtype=np.int64)
    out = invariants(model, toks)  # the generic check of the declared program
    assert any("lb.back1" in f for f in out.failures) and any("lb:state" in f for f in out.failures)
    assert not any("lb.back0" in f or "lb.back2" in f for f in out.failures)


def test_refusal_for_a_non_definite_automaton():
    r = lookback.applies(load_spec("parity"))
    assert isinstance(r, Refusal) and "not definite" in r.reason
    with pytest.raises(ShortcutError, match="lookback needs a k-definite automaton"):
        compiler.compile_automaton("parity", max_len=8, method="lookback")


# --- the planner and the CLI ----------------------------------------------------------------


@pytest.mark.parametrize("make,k", EXAMPLES)
def test_auto_picks_lookback(make, k):
    """Lookback is 1 layer; auto takes it unless another 1-layer construction is smaller
    (the last letter's 2 states are also a 1-layer krohn-rhodes reset)."""
    model = compiler.compile_automaton(make(), max_len=64)
    cands = {c["name"]: c for c in model.meta["candidates"]}
    assert len(model.blocks) == 1 and cands["lookback"]["fits"] and cands["lookback"]["layers"] == 1
    best = min((c for c in cands.values() if c["fits"]), key=lambda c: (c["layers"], c["params"]))
    assert model.meta["method"] == best["name"]
    if best["name"] == "lookback":
        assert model.meta["why"].startswith(f"auto: lookback (k-definite automata): {k}-definite")


@pytest.mark.parametrize("name", list(paper_suite()))
def test_no_paper_automaton_is_definite(name):
    assert isinstance(lookback.applies(load_spec(name)), Refusal)


def test_cli_method_lookback(tmp_path, capsys):
    spec = tmp_path / "nth3.json"
    spec.write_text(json.dumps(nth_last(3).to_dict()))
    out = tmp_path / "m.safetensors"
    assert main(["compile", str(spec), "-o", str(out), "--max-len", "16", "--method", "lookback"]) == 0
    assert main(["verify", str(out), "--samples", "4", "--exhaustive-budget", "256"]) == 0
    assert compiler.load(out).meta["method"] == "lookback"
    capsys.readouterr()
    assert main(["compile", "parity", "-o", str(tmp_path / "p.safetensors"), "--max-len", "8",
                 "--method", "lookback"]) == 2
    assert "not definite" in capsys.readouterr().err
