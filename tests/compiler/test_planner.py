"""The cost planner (compiler/pipeline.py): auto takes the fewest attention layers, then the
fewest parameters, among every construction that fits; ``prefer="size"`` the fewest parameters
within one layer of the shallowest; it never refuses while one fits and names every reason
when none does; ``shortcut plan`` shows the candidates (text and JSON, exit codes)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

import compiler
from compiler import pipeline, planner
from compiler.automata.errors import BudgetError, PrecisionError, ShortcutError
from compiler.automata.load import load_spec
from compiler.automata.spec import Semiautomaton
from compiler.cli import main
from constructions import registry
from constructions.construction import Construction, Cost

ONE_STAR = {"name": "one-star", "states": ["ok", "sink"], "alphabet": ["0", "1"],
            "transitions": {"ok": {"0": "sink", "1": "ok"}, "sink": {"0": "sink", "1": "sink"}}}


def C(name: str, layers: int | None, params: int | None) -> pipeline.Candidate:
    return pipeline.Candidate(name, applies=layers is not None, layers=layers, params=params,
                              fits=layers is not None)


# --- the ranking, on made-up candidates ------------------------------------------------------


def test_depth_first_then_parameters_then_registry_order():
    cands = [C("a", 3, 10), C("b", 2, 900), C("c", None, None), C("d", 2, 500), C("e", 2, 500)]
    assert [c.name for c in pipeline.ranking(cands, "depth")] == ["d", "e", "b", "a"]


def test_prefer_size_looks_one_layer_deeper_and_no_further():
    cands = [C("shallow", 1, 9_000), C("plus-one", 2, 100), C("plus-two", 3, 10)]
    assert [c.name for c in pipeline.ranking(cands, "size")] == ["plus-one", "shallow", "plus-two"]
    assert pipeline.ranking(cands, "depth")[0].name == "shallow"
    assert pipeline.ranking([C("x", None, None)], "size") == []


# --- real automata ----------------------------------------------------------------------------


def test_auto_is_never_deeper_than_an_applicable_construction():
    """``1*`` with a sink is a 2-cell line world (gridworld, 2 layers), a 1-level reset
    cascade (krohn-rhodes, 1 layer) and a 1-layer local description: a 1-layer one wins,
    whatever the registry order, and among those the smaller."""
    model = compiler.compile_automaton(ONE_STAR, max_len=256)
    cands = {c["name"]: c for c in model.meta["candidates"]}
    chosen = model.meta["method"]
    assert model.info()["n_layers"] == 1 and cands[chosen]["chosen"]
    assert cands["krohn-rhodes"]["fits"] and cands["krohn-rhodes"]["layers"] == 1
    assert cands[chosen]["params"] == min(c["params"] for c in cands.values() if c["fits"] and c["layers"] == 1)
    assert cands["gridworld"]["fits"] and cands["gridworld"]["layers"] == 2
    assert cands["gridworld"]["note"] == f"2 attention layers, {chosen} 1"
    assert list(cands) == registry.names()  # every construction, in registry order
    assert model.meta["why"].startswith(f"auto: {chosen} (") and "not gridworld: 2 attention" in model.meta["why"]


def test_prefer_size_trades_one_layer_for_parameters():
    a = load_spec("symmetric:4")  # krohn-rhodes 3 layers 13,135 parameters, the scan 4 layers 12,878 at T = 16
    deep = pipeline.decide(a, "auto", 16)
    small = pipeline.decide(a, "auto", 16, prefer="size")
    assert (deep.method, deep.chosen.layers) == ("krohn-rhodes", 3)
    assert (small.method, small.chosen.layers) == ("scan", 4) and small.chosen.params < deep.chosen.params
    assert "prefer size" in small.why
    model = compiler.compile_automaton("cyclic:3", max_len=16, prefer="size")
    assert model.meta["method"] == "krohn-rhodes"


def test_auto_takes_whatever_fits_the_budget():
    a = load_spec("parity")
    cands = {c.name: c for c in pipeline.survey(a, 64)[0]}
    budget = cands["krohn-rhodes"].params  # the scan is larger
    assert pipeline.decide(a, "auto", 64, max_params=budget).method == "krohn-rhodes"
    d = pipeline.decide(a, "auto", 64, max_params=cands["scan"].params)
    assert d.method == "krohn-rhodes"
    with pytest.raises(BudgetError, match="over the budget"):
        pipeline.decide(a, "scan", 64, max_params=budget)


def test_refusal_names_every_constructions_reason():
    with pytest.raises(BudgetError) as e:
        compiler.compile_automaton("parity", max_len=64, max_params=100)
    msg = str(e.value)
    assert msg.startswith("no construction compiles parity at max_len 64: ")
    for name in registry.names():
        assert f"{name}: " in msg
    assert "not definite" in msg and "line or box world" in msg and "over the budget of 100" in msg


def _broken() -> Construction:
    """A construction that applies wherever the scan does, costs 1 layer and 1 parameter, and never builds."""
    def broken(*args, **kwargs):
        raise ShortcutError("broken on purpose")

    return replace(registry.get("scan"), name="fake", estimate=lambda rep, T, pos: Cost(1, 1), build=broken)


def test_a_failing_build_falls_through_to_the_next_candidate():
    with registry.registered(_broken(), position=0):
        d = pipeline.decide(load_spec("parity"), "auto", 16)
        assert d.method == "krohn-rhodes"  # the next best: 1 layer
        fake_cand = d.candidates[0]
        assert fake_cand.name == "fake" and not fake_cand.fits and "broken on purpose" in fake_cand.refusal


def test_auto_skips_an_estimate_whose_floor_is_deeper_and_the_pick_is_the_full_surveys():
    """krohn-rhodes's floor (its tables' dependency chain) is deeper than the scan's 2 layers on a bounded
    stack: auto does not estimate it, and picks what the full survey (every estimate) picks."""
    a = load_spec("dyck:4,2")
    full, _, _ = pipeline.survey(a, 4)
    quick, _, errors = pipeline.survey(a, 4, prefer="depth")
    kr = {c.name: c for c in quick}["krohn-rhodes"]
    assert errors["krohn-rhodes"] is planner.Skipped and kr.applies and kr.layers is None
    assert {c.name: c for c in full}["krohn-rhodes"].layers > 2
    assert planner.ranking(full)[0].name == planner.ranking(quick)[0].name == "scan"


def test_a_failing_build_estimates_the_skipped_candidates():
    """The best's build fails: the skipped krohn-rhodes is estimated in full and ranked with the rest."""
    with registry.registered(_broken(), position=0):
        d = pipeline.decide(load_spec("dyck:4,2"), "auto", 4)
    cands = {c.name: c for c in d.candidates}
    assert d.method == "scan" and cands["krohn-rhodes"].layers is not None and cands["krohn-rhodes"].fits
    assert not cands["fake"].fits and "broken on purpose" in cands["fake"].refusal


def test_a_build_beyond_its_float_reach_falls_through_when_certified():
    """The CLI's default (``allow_inexact=False``): a candidate whose build carries a precision
    warning does not fit, auto takes the next one and says why; forced, or with nothing left,
    it is a PrecisionError; with ``allow_inexact`` the shallowest is taken as before."""
    scan = registry.get("scan")

    def inexact(*args, **kwargs):
        program, meta = scan.build(*args, **kwargs)
        return program, {**meta, "warnings": ["rounding bound over its tolerance, on purpose"]}

    fake = replace(scan, name="fake", estimate=lambda rep, T, pos: Cost(1, 1), build=inexact)
    with registry.registered(fake, position=0):
        assert pipeline.decide(load_spec("parity"), "auto", 16).method == "fake"
        d = pipeline.decide(load_spec("parity"), "auto", 16, certified=True)
        assert d.method == "krohn-rhodes"
        fake_cand = d.candidates[0]
        assert not fake_cand.fits and fake_cand.refusal.startswith("beyond its certified float reach: rounding")
        assert "not fake: beyond its certified float reach" in d.why
        model = compiler.compile_automaton("parity", max_len=16, allow_inexact=False)
        assert model.meta["method"] == "krohn-rhodes"
        with pytest.raises(PrecisionError, match="parity at max_len 16 in float32 is beyond the certified float "
                                                 "reach of fake: rounding bound over"):
            compiler.compile_automaton("parity", max_len=16, method="fake", allow_inexact=False)
    only = replace(fake, estimate=lambda rep, T, pos: Cost(1, 1))
    with registry.registered(only, position=0), pytest.MonkeyPatch.context() as mp:
        mp.setattr(planner, "ranking", lambda cands, prefer="depth": [c for c in cands if c.name == "fake"])
        with pytest.raises(PrecisionError, match="certified float reach of fake"):
            pipeline.decide(load_spec("parity"), "auto", 16, certified=True)


def test_bad_options_are_clean_errors():
    for kwargs, match in [({"prefer": "fast"}, "unknown preference"), ({"max_params": 0}, "max_params"),
                          ({"max_params": 10**12}, "max_params"), ({"method": "nope"}, "unknown method")]:
        with pytest.raises(ShortcutError, match=match):
            compiler.compile_automaton("parity", max_len=8, **kwargs)


# --- shortcut plan, info ----------------------------------------------------------------------


def test_plan_lists_every_candidate_and_the_choice(tmp_path, capsys):
    spec = tmp_path / "one_star.json"
    spec.write_text(json.dumps(ONE_STAR))
    assert main(["plan", str(spec), "--max-len", "256"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "plan for one-star at max_len 256 (prefer depth, budget 150,000,000 parameters):"
    rows = {line.split()[1 if line.startswith("*") else 0]: line for line in out[2:2 + len(registry.names())]}
    chosen = [name for name, line in rows.items() if line.startswith("*")]
    assert set(rows) == set(registry.names()) and len(chosen) == 1 and rows["krohn-rhodes"].split()[3:5] == ["yes", "1"]
    g = rows["gridworld"].split()  # gridworld Theorem 12 yes 2 <params> yes 2 attention layers, <chosen> 1
    assert g[3:5] == ["yes", "2"] and g[6] == "yes" and " ".join(g[7:]) == f"2 attention layers, {chosen[0]} 1"
    assert out[-1].startswith(f"chosen: {chosen[0]} -- auto: {chosen[0]}")
    assert main(["plan", str(spec), "--max-len", "256", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["chosen"] == chosen[0] and j["error"] is None and j["prefer"] == "depth"
    assert [c["name"] for c in j["candidates"]] == registry.names()
    assert {"applies", "layers", "params", "fits", "refusal", "note", "chosen"} <= set(j["candidates"][0])


def test_plan_exit_codes(capsys):
    assert main(["plan", "parity", "--max-len", "64", "--max-params", "100", "--json"]) == 2
    captured = capsys.readouterr()
    j = json.loads(captured.out)
    assert j["chosen"] is None and not any(c["fits"] for c in j["candidates"])
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no construction compiles parity")
    for argv in (["plan", "nope", "--max-len", "8"], ["plan", "parity", "--max-len", "0"],
                 ["plan", "parity", "--prefer", "fast"], ["plan", "parity", "--max-params", "-1"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ")


def test_info_shows_the_candidates(tmp_path, capsys):
    path = tmp_path / "p.safetensors"
    assert main(["compile", "parity", "-o", str(path), "--max-len", "16", "--prefer", "size", "--no-verify"]) == 0
    capsys.readouterr()
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "candidates:" in out and re.search(r"construction +theorem +applies +layers +params", out)
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in info["candidates"]] == registry.names()
    assert sum(c["chosen"] for c in info["candidates"]) == 1


def test_candidates_are_deterministic():
    a = Semiautomaton("toggle-reset", ("0", "1", "2"), ("t", "r"), ((1, 0, 2), (0, 0, 0)))
    assert pipeline.candidates(a, max_len=32) == pipeline.candidates(a, max_len=32)


def test_candidate_table_reads_old_and_edited_records():
    from compiler.cli import candidates_text

    old = [{"name": "scan", "layers": 7, "params": 1234, "refusal": None, "chosen": True},
           {"name": "gridworld", "layers": None, "params": None, "refusal": "not a world", "chosen": False}]
    lines = candidates_text(old)
    assert lines[1].split()[:6] == ["*", "scan", "yes", "7", "1,234", "yes"] and lines[2].endswith("not a world")
    assert len(candidates_text([{"name": 3, "layers": "x", "params": [1], "note": "a\nb"}])) == 2
