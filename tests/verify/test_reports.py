"""Verification reports (json, md, html), a perturbed checkpoint, compile-time verification."""

import json
import sys

import numpy as np
import pytest
import torch

import compiler
from compiler.cli import main
from verify.check import verify
from verify.report import REPORT_SCHEMA, file_sha256, report_dict, write_report

FAST = ["--samples", "4", "--exhaustive-budget", "256"]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    out = {}
    for name, spec in (("scan", "quaternion"), ("gridworld", "grid:4"), ("krohn-rhodes", "dyck:2,2")):
        path = d / f"{name}.safetensors"
        compiler.save(compiler.compile_automaton(spec, max_len=16, method=name), path)
        out[name] = path
    return out


@pytest.mark.parametrize("method", ["scan", "gridworld", "krohn-rhodes"])
def test_verify_writes_three_reports(checkpoints, method, tmp_path, capsys):
    ckpt = checkpoints[method]
    out = tmp_path / "rep"
    assert main(["verify", str(ckpt), "--report", str(out), *FAST]) == 0
    assert "report.html" in capsys.readouterr().out
    rep = json.loads((out / "report.json").read_text())
    assert rep["schema"] == REPORT_SCHEMA and rep["tool_version"] == compiler.__version__
    assert rep["exact"] is True and rep["counterexample"] is None and rep["method"] == method
    assert rep["checkpoint_sha256"] == file_sha256(ckpt) and len(rep["automaton"]["sha256"]) == 64
    assert rep["max_len"] == 16 and rep["dtype"] == "float32" and rep["seeds"]["random_sequences"] == 0
    c = rep["checked"]
    assert c["exhaustive_length"] >= 1 and c["random_sequences"] == 4 and c["adversarial_families"]
    assert c["layerwise"] and c["forward"] == "plain"
    assert len(rep["accuracy_by_position"]) == 16 and rep["accuracy"] == 1.0
    heads, mlps = rep["margins"]["heads"], rep["margins"]["mlps"]
    assert heads and all(h["worst_leaked_mass"] < 0.125 for h in heads if "worst_leaked_mass" in h)
    assert all(h["worst_score_gap"] > 0 for h in heads if "worst_score_gap" in h)
    assert mlps and all(m["distance_to_boundary"] > 0 for m in mlps)
    assert rep["margins"]["readout_min_logit_margin"] >= 0.5
    assert rep["margin_summary"]["mlps_min_distance_to_boundary"] > 0
    assert "EXACT" in (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "Attention patterns" in page and "Accuracy by position" in page
    assert "http://" not in page and "https://" not in page  # self-contained
    n_layers = len(compiler.load(ckpt).blocks)
    assert page.count("<svg") >= n_layers + 2  # heatmaps of every layer, the accuracy plot, the margins
    assert all(f"<h3>Layer {l + 1}</h3>" in page for l in range(n_layers))
    assert ("<h2>Cascade</h2>" in page) == (method == "krohn-rhodes")


def test_html_has_svg_plots_without_any_plotting_library(checkpoints, tmp_path, monkeypatch):
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # any import of it now fails
    model = compiler.load(checkpoints["gridworld"])
    write_report(verify(model, samples=2, exhaustive_budget=64), model, tmp_path, checkpoints["gridworld"])
    page = (tmp_path / "report.html").read_text()
    assert "<img" not in page and "pip install" not in page
    heatmaps = [b for b in page.split("<svg")[1:] if "<title>L" in b[:200]]
    assert len(heatmaps) == sum(min(b.attn.W_Q.shape[0], 16) for b in model.blocks)
    assert "fraction of scored sequences right at position t" in page and "worst leaked softmax mass" in page


def test_bar_plot_marks_a_zero_instead_of_drawing_a_tiny_bar():
    from verify import svg

    page = svg.bar_plot([0.0, 1e-9, None, 1e-3], "t", "x", "y", log=True)
    assert page.count("<rect x=") == 1 + 2  # the frame, and bars for the two positive values only
    assert ">0</text>" in page and ">–</text>" in page
    # the axis starts one decade below the smallest positive value (so its bar shows), not at a 1e-18 stand-in
    assert ">1e-10</text>" in page and "1e-11" not in page and "1e-18" not in page
    assert svg.colour(0.0) == "#440154" and svg.colour(1.0) == "#fde725"


def test_diagram_section_is_generic(checkpoints):
    from dataclasses import replace

    from constructions import registry
    from verify.html import plan_diagram, report_html

    model = compiler.load(checkpoints["scan"])
    assert plan_diagram(model) is None  # the scan draws no diagram
    drawn = replace(registry.get("scan"), name="scan-drawn",
                    diagram=lambda plan: ("Cascade", "digraph cascade {\n  a -> b;\n}\n"))
    with registry.registered(drawn):
        model.meta = {**model.meta, "method": "scan-drawn"}
        rep = report_dict(verify(model, samples=1, exhaustive_budget=16, families=False, layerwise=False), model)
        page = report_html(rep, model)
    assert "<h2>Cascade</h2>" in page and "a -&gt; b" in page


def test_perturbed_checkpoint_fails_with_counterexample(checkpoints, tmp_path, capsys):
    model = compiler.load(checkpoints["scan"])
    W = model.blocks[1].mlp.W_in
    with torch.no_grad():
        W.view(-1)[int(W.abs().argmax())] += 0.5  # one weight
    bad = tmp_path / "bad.safetensors"
    compiler.save(model, bad)
    assert main(["verify", str(bad), "--report", str(tmp_path / "r"), *FAST]) == 1
    out = capsys.readouterr().out
    assert "NOT exact" in out and "counterexample" in out
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["exact"] is False and rep["n_errors"] > 0
    ce = rep["counterexample"]
    assert ce["position"] == len(ce["input"]) == len(ce["trace"]) and ce["expected"] != ce["got"]
    last = ce["trace"][-1]
    assert last["expected"] == ce["expected"] and last["got"] == ce["got"] and last["logit_gap"] < 0
    # the trace agrees with the reference simulation step by step
    a = model.automaton
    ref = a.run(a.symbol_ids(ce["input"]))
    assert [s["expected"] for s in ce["trace"]] == [a.states[q] for q in ref]
    assert "NOT EXACT" in (tmp_path / "r" / "report.md").read_text()
    assert "First counterexample" in (tmp_path / "r" / "report.html").read_text()


def test_compile_stores_verification_and_no_verify_skips(tmp_path, capsys):
    a, b, c = (tmp_path / f"{x}.safetensors" for x in "abc")
    assert main(["compile", "parity", "-o", str(a), "--max-len", "16"]) == 0
    assert "verification: exact" in capsys.readouterr().out
    v = compiler.load(a).info()["verification"]
    assert v["exact"] is True and v["n_errors"] == 0 and v["checked"]["random_sequences"] == 16
    assert v["checked"]["exhaustive_length"] >= 1 and v["margins"]["readout_min_logit_margin"] > 0
    assert main(["compile", "parity", "-o", str(b), "--max-len", "16"]) == 0
    assert a.read_bytes() == b.read_bytes()  # the stored summary is deterministic
    assert main(["compile", "parity", "-o", str(c), "--max-len", "16", "--no-verify"]) == 0
    assert "verification" not in capsys.readouterr().out.split("->")[-1]
    assert compiler.load(c).info()["verification"] is None
    assert main(["info", str(a)]) == 0
    assert "verification: exact" in capsys.readouterr().out
    assert main(["info", str(c)]) == 0
    assert "none stored" in capsys.readouterr().out


def test_chunked_forward_matches_plain_forward():
    from verify.chunked import forward_chunked, positional_layers

    for name, method in (("quaternion", "scan"), ("grid:4", "gridworld"), ("dyck:2,2", "krohn-rhodes")):
        model = compiler.compile_automaton(name, max_len=40, method=method)
        toks = torch.from_numpy(np.random.default_rng(3).integers(0, model.automaton.n_symbols, (3, 40)))
        with torch.no_grad():
            want = model(toks)
        got = forward_chunked(model, toks, chunk=7)
        assert torch.allclose(got, want, atol=1e-5) and torch.equal(got.argmax(-1), want.argmax(-1))
    assert all(positional_layers(compiler.compile_automaton("parity", max_len=8, method="scan")))


def test_long_inputs_get_head_margins_from_the_chunked_forward(monkeypatch):
    import verify.check as check

    monkeypatch.setattr(check, "LAYERWISE_MAX_LEN", 16)
    model = compiler.compile_automaton("parity", max_len=32, method="scan")
    r = check.verify(model, samples=3, exhaustive_budget=64)
    assert r.exact and r.checked["forward"] == "plain" and r.checked["layerwise"] is None
    assert any("chunked" in n for n in r.notes) and any("skipped" in n for n in r.notes)
    heads = r.margins["heads"]
    assert len(heads) == len(model.blocks) and all(0 <= h["worst_leaked_mass"] < 0.125 for h in heads)
    c = check.verify(model, samples=3, exhaustive_budget=64, forward="chunked")
    assert c.exact and "chunked" in c.checked["forward"] and c.n_positions == r.n_positions
