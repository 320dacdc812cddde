"""Lookback for generalised definite automata (the first m and the last k letters decide the
state from q0): detection (compiler/automata/definite.py), the one-layer construction with
absolute front heads (constructions/lookback.py), its layer-wise checks, set_start, the CLI."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.catalog import build, random_automaton
from compiler.automata.definite import LookbackPlan, detect, generalised_depth
from compiler.automata.errors import InputError, SpecError
from compiler.automata.load import load_spec
from compiler.automata.spec import Semiautomaton
from compiler.cli import main
from constructions import lookback, registry
from constructions.construction import Refusal
from verify.check import verify
from verify.layerwise import invariants

CHECK = {"samples": 16, "exhaustive_budget": 4096}

FIRST_EQUALS_LAST = "regex:a|b|c|a(a|b|c)*a|b(a|b|c)*b|c(a|b|c)*c"
"""Over {a, b, c}: the first letter equals the last letter."""

EXAMPLES = [("regex:a(a|b)*b", "a,b", 1, 1), ("regex:ab(a|b)*ba", "a,b", 2, 2), (FIRST_EQUALS_LAST, "a,b,c", 1, 1)]


def load(spec: str, alphabet: str) -> Semiautomaton:
    return load_spec(spec, alphabet=alphabet.split(","))


def last_letter_behind_a_gate() -> Semiautomaton:
    """From ``s`` the state is the last letter (s -x-> x): generalised definite with m = k = 1
    (not definite: the parity pair p0/p1, unreachable from s, never collapses)."""
    states = ("s", "x", "y", "p0", "p1")
    maps = ((1, 1, 1, 4, 3), (2, 2, 2, 3, 4))  # x: to x, flip p; y: to y, keep p
    return Semiautomaton("gate", states, ("x", "y"), maps, start=0)


def brute_valid(a: Semiautomaton, m: int, k: int) -> bool:
    """delta(q0, u v w) is the same for all v (|v| < n suffices to reach every state)."""
    letters = range(a.n_symbols)
    vs = [v for t in range(a.n_states) for v in itertools.product(letters, repeat=t)]
    return all(len({a.run(u + v + w)[-1] if u + v + w else a.start for v in vs}) == 1
               for u in itertools.product(letters, repeat=m) for w in itertools.product(letters, repeat=k))


def brute_definite(a: Semiautomaton, k: int) -> bool:
    return all(len({a.run(w, start=q)[-1] for q in range(a.n_states)}) == 1
               for w in itertools.product(range(a.n_symbols), repeat=k))


# --- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spec,alphabet,m,k", EXAMPLES)
def test_detection_finds_the_smallest_m_and_k(spec, alphabet, m, k):
    a = load(spec, alphabet)
    plan, reason = detect(a)
    assert (plan.m, plan.k) == (m, k) and "generalised definite" in reason
    assert brute_valid(a, m, k) and not any(brute_valid(a, m2, k2) for m2 in range(1, m + k)
                                             for k2 in range(m + k - m2))
    assert len(plan.windows) == a.n_symbols ** (m + k)
    assert lookback.n_keys(plan) == sum(a.n_symbols**t for t in range(m + k + 1))


def test_detection_agrees_with_brute_force_on_random_automata():
    rng = random.Random(3)
    found = set()
    for _ in range(150):
        a = random_automaton(rng, rng.randint(2, 4), rng.randint(1, 2))
        plan, _ = detect(a, max_k=3)
        valid = [(m + k, m) for m in range(1, 4) for k in range(4 - m) if brute_valid(a, m, k)]
        valid += [(k, 0) for k in range(1, 4) if brute_definite(a, k)]
        if plan is None:
            assert not valid
            continue
        assert (plan.m + plan.k, plan.m) == min(valid)  # the smallest table, the definite plan on a tie
        found.add(plan.m > 0)
        for m in range(1, 3):
            k = generalised_depth(a, m, 3)
            assert k is None or (brute_valid(a, m, k) and (k == 0 or not brute_valid(a, m, k - 1)))
    assert found == {False, True}


def test_refusal_for_parity_names_both_cases():
    plan, reason = detect(load_spec("parity"))
    assert plan is None and "not definite" in reason and "nor is it generalised definite" in reason
    r = lookback.applies(load_spec("parity"))
    assert isinstance(r, Refusal) and "first m and last k letters" in r.reason


def test_over_budget_window_table_is_refused():
    plan, reason = detect(load("regex:ab(a|b)*ba", "a,b"), max_keys=8)
    assert plan is None and "window table of at most 8 entries" in reason


def test_generalised_plan_round_trip_and_bad_plans():
    plan = detect(load(FIRST_EQUALS_LAST, "a,b,c"))[0]
    d = json.loads(json.dumps(plan.to_dict()))
    assert d["m"] == 1 and LookbackPlan.from_dict(d) == plan
    assert "m" not in detect(build("nth-last:2"))[0].to_dict()  # m = 0: today's plan
    with pytest.raises(SpecError, match="window table"):
        LookbackPlan.from_dict({**d, "m": 2})
    with pytest.raises(SpecError, match="m >= 0"):
        LookbackPlan.from_dict({**d, "m": -1, "k": 3})
    assert LookbackPlan.from_dict({**d, "m": 2, "k": 0}).m == 2  # k = 0 is allowed when m >= 1


# --- the construction ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec,alphabet,m,k", EXAMPLES)
def test_auto_compiles_to_one_exact_layer_at_256(spec, alphabet, m, k):
    model = compiler.compile_automaton(load(spec, alphabet), max_len=256)
    assert model.meta["method"] == "lookback" and len(model.blocks) == 1
    assert model.config.blocks[0].n_heads == m + k
    assert model.meta["lookback"]["m"] == m and model.meta["lookback"]["k"] == k
    assert not model.meta["warnings"]
    plan = registry.plan_of(model)[1]
    assert lookback.estimate(plan, 256).params == model.info()["n_params"]
    res = verify(model, **CHECK)  # exhaustive short inputs, random at 256, adversarial families, layer-wise
    assert res.exact, res.counterexample
    assert res.checked["layerwise"].startswith("every tracked subspace")
    heads = res.margins["heads"]
    assert [h["head"] for h in heads] == [f"lb.front{i}" for i in range(1, m + 1)] + [f"lb.back{j}" for j in range(k)]
    assert [h["target"] for h in heads] == [f"position {i} or BOS" for i in range(1, m + 1)] + [
        f"t - {j} or BOS" for j in range(k)]
    assert all(h["worst_leaked_mass"] < 1e-3 for h in heads)
    assert res.margins["mlps"][0]["distance_to_boundary"] > 0.2


def test_random_full_length_inputs_match_the_automaton():
    model = compiler.compile_automaton(load("regex:ab(a|b)*ba", "a,b"), max_len=256, method="lookback")
    a = model.automaton
    toks = torch.randint(0, 2, (64, 256), generator=torch.Generator().manual_seed(4))
    toks[:32, :2] = torch.tensor([0, 1])  # half start with "ab", so the accepting states are reached
    assert model.predict(toks).tolist() == [a.run(r) for r in toks.tolist()]


def test_layerwise_checks_name_a_broken_front_head():
    model = compiler.compile_automaton(load("regex:ab(a|b)*ba", "a,b"), max_len=16, method="lookback")
    with torch.no_grad():
        model.blocks[0].attn.W_O[1] *= 0.0  # front head 2 no longer copies the letter at position 2
    toks = np.array(list(itertools.product(range(2), repeat=6)), dtype=np.int64)
    out = invariants(model, toks)  # the generic check of the declared program
    assert any("lb.front2" in f for f in out.failures) and any("lb:state" in f for f in out.failures)
    assert not any("lb.front1" in f or "lb.back" in f for f in out.failures)


def test_set_start_recomputes_the_table_or_refuses():
    model = compiler.compile_automaton(load(FIRST_EQUALS_LAST, "a,b,c"), max_len=32, method="lookback")
    a = model.automaton
    q = a.run([0])[-1]  # after "a": the first letter is fixed, the last letter decides
    other = compiler.with_start(model, a.states[q])
    toks = torch.randint(0, 3, (16, 32), generator=torch.Generator().manual_seed(5))
    assert other.predict(toks).tolist() == [a.run(r, start=q) for r in toks.tolist()]
    assert other.meta["plan"] != model.meta["plan"] and verify(other, **CHECK).exact
    gate = compiler.compile_automaton(last_letter_behind_a_gate(), max_len=32, method="lookback")
    assert gate.meta["plan"]["m"] == 1
    with pytest.raises(InputError, match="no longer decide the state"):
        compiler.with_start(gate, "p0")  # from p0: the parity pair never collapses


def test_cli_plan_and_compile(tmp_path, capsys):
    out = tmp_path / "m.safetensors"
    assert main(["compile", "regex:a(a|b)*b", "--alphabet", "a,b", "-o", str(out), "--max-len", "32",
                 "--verify-samples", "4"]) == 0
    assert compiler.load(out).meta["method"] == "lookback"
    assert main(["run", str(out), "--input", "a b b a b"]) == 0
    capsys.readouterr()
    assert main(["compile", "parity", "-o", str(tmp_path / "p.safetensors"), "--max-len", "8",
                 "--method", "lookback"]) == 2
    assert "nor is it generalised definite" in capsys.readouterr().err


def test_first_letter_only_needs_no_back_heads():
    """``a(a|b)*``: the first letter decides (m = 1, k = 0): one absolute head, no skip flag."""
    model = compiler.compile_automaton(load("regex:a(a|b)*", "a,b"), max_len=64, method="lookback")
    assert (model.meta["lookback"]["m"], model.meta["lookback"]["k"]) == (1, 0)
    assert model.config.blocks[0].n_heads == 1 and "lb:early" not in model.meta["subspaces"]
    assert verify(model, **CHECK).exact
