"""The construction registry: one record per construction, plans carried in the checkpoint,
no method names outside the registry entries, and a new construction in one line."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

import compiler
from compiler.automata.errors import ShortcutError
from compiler.cli import main
from constructions import registry
from verify.check import verify

ROOT = Path(__file__).resolve().parents[2]
FAST = {"samples": 2, "exhaustive_budget": 64}


def test_entries_in_preference_order_and_unknown_names_are_clean_errors():
    assert registry.names() == ["lookback", "gridworld", "bounded-stack", "krohn-rhodes", "locally-testable",
                                "piecewise", "piecewise-local", "local", "starfree", "product", "transition", "scan"]
    assert registry.get("scan").name == "scan" and registry.get("scan").theorem == "Theorem 10"
    with pytest.raises(ShortcutError, match="unknown construction 'nope'"):
        registry.get("nope")
    with pytest.raises(ShortcutError, match="unknown method"):
        compiler.compile_automaton("parity", max_len=8, method="nope")


# --- method-name literals live only in the registry entries ----------------------------------


def _method_literals(path: Path, names: set[str]) -> list[int]:
    """Lines of string constants equal to a method name, except the module's ``NAME = "..."``
    (the name its ``CONSTRUCTION = Construction(name=NAME, ...)`` entry declares).  Pieces
    of f-strings are text, not string tokens (``f"scan{l}.lookback"`` is a label)."""
    tree = ast.parse(path.read_text())
    allowed = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    allowed |= {id(node.value) for node in tree.body
               if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["NAME"]}
    allowed |= {id(kw.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "Construction" for kw in node.keywords if kw.arg == "name"}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in allowed]


def test_method_names_appear_only_in_the_registry_entries():
    names = set(registry.names())
    found = {}
    for package in ("compiler", "constructions", "verify"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if lines := _method_literals(path, names):
                found[str(path.relative_to(ROOT))] = lines
    assert found == {}, f"method-name literals outside the registry entries: {found}"
    declared = {p.name for p in (ROOT / "constructions").glob("*.py") if 'NAME = "' in p.read_text()}
    assert declared == {"scan.py", "gridworld.py", "krohn_rhodes.py", "lookback.py", "bounded_stack.py", "local.py",
                        "product.py", "factors.py", "transition.py", "piecewise.py", "starfree.py",
                        "piecewise_local.py"}


def test_literal_finder_finds_a_stray_literal(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('NAME = "scan"\nx = Construction(name="scan")\nif method == "gridworld":\n    pass\n'
                 'y = f"scan{x}"\nz = {"scan": 1}\n')
    assert _method_literals(p, {"scan", "gridworld"}) == [3, 6]


def test_names_read_from_the_sources_are_the_modules_own_and_get_imports_one_construction():
    import importlib

    for entry, c in zip(registry._ENTRIES, registry.entries()):
        assert isinstance(entry, str) and importlib.import_module(entry).NAME == c.name
    code = ("import sys; from constructions import registry; registry.names(); c = registry.get('krohn-rhodes'); "
            "print(c.name, sorted(m for m in sys.modules if m.split('.')[-1] in "
            "('lookback', 'gridworld', 'bounded_stack', 'krohn_rhodes', 'factors', 'piecewise', 'local', 'product', "
            "'transition', 'scan') and m.startswith('constructions.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.split() == ["krohn-rhodes", "['constructions.krohn_rhodes']"]


# --- one module + one registry line ------------------------------------------------------------


def test_a_new_construction_needs_one_registry_line(tmp_path):
    toy = replace(registry.get("scan"), name="toy-scan", theorem="Theorem 10, renamed")
    with registry.registered(toy):
        assert registry.names() == ["lookback", "gridworld", "bounded-stack", "krohn-rhodes", "locally-testable",
                                    "piecewise", "piecewise-local", "local", "starfree", "product", "transition",
                                    "toy-scan", "scan"]
        model = compiler.compile_automaton("quaternion", max_len=16, method="toy-scan")
        assert model.meta["method"] == "toy-scan" and model.meta["why"].startswith("requested with --method toy-scan")
        assert verify(model, **FAST).exact
        # auto reaches it through the registry: symmetric:5 is not solvable, toy-scan is as deep as the scan
        auto = compiler.compile_automaton("symmetric:5", max_len=16)
        assert auto.meta["method"] == "toy-scan"
        cands = auto.meta["candidates"]
        assert [c["name"] for c in cands] == ["lookback", "gridworld", "bounded-stack", "krohn-rhodes",
                                              "locally-testable", "piecewise", "piecewise-local", "local",
                                              "starfree", "product", "transition", "toy-scan", "scan"]
        assert cands[-1]["fits"] and "ties with toy-scan" in cands[-1]["note"]  # registry order breaks the tie
        other = compiler.with_start(model, "-1")
        a = model.automaton
        toks = torch.randint(0, a.n_symbols, (3, 16), generator=torch.Generator().manual_seed(0))
        assert other.predict(toks).tolist() == [a.run(r, start=a.state_index["-1"]) for r in toks.tolist()]
        path = tmp_path / "toy.safetensors"
        assert main(["compile", "parity", "-o", str(path), "--max-len", "8", "--method", "toy-scan"]) == 0
        assert main(["verify", str(path), "--samples", "2", "--exhaustive-budget", "64"]) == 0
    assert "toy-scan" not in registry.names()
    with pytest.raises(ShortcutError, match="unknown construction 'toy-scan'"):
        verify(compiler.load(path), **FAST)  # the checkpoint names a construction no longer registered


def test_registering_a_taken_name_is_refused():
    with pytest.raises(ShortcutError, match="already registered"):
        with registry.registered(registry.get("scan")):
            pass
    assert registry.names() == ["lookback", "gridworld", "bounded-stack", "krohn-rhodes", "locally-testable",
                                "piecewise", "piecewise-local", "local", "starfree", "product", "transition", "scan"]


# --- the plan is carried, never recomputed ---------------------------------------------------------


def test_checkpoint_carries_the_plan_and_every_candidate(tmp_path):
    model = compiler.compile_automaton("dyck:4,2", max_len=4)  # stack and krohn-rhodes deeper than the scan
    cands = {c["name"]: c for c in model.meta["candidates"]}
    assert model.meta["method"] == "scan" and cands["scan"]["chosen"] and cands["scan"]["layers"] == 2
    assert cands["bounded-stack"]["layers"] == 3 and cands["bounded-stack"]["fits"]
    assert cands["bounded-stack"]["note"] == "3 attention layers, scan 2" and cands["bounded-stack"]["refusal"] is None
    kr = cands["krohn-rhodes"]  # its floor is deeper than the scan: auto does not estimate it
    assert kr["applies"] and kr["layers"] is None and not kr["fits"]
    assert kr["refusal"].startswith("skipped: at least") and "picks among at most 2" in kr["refusal"]
    assert "line or box world" in cands["gridworld"]["refusal"] and cands["gridworld"]["layers"] is None
    path = tmp_path / "m.safetensors"
    compiler.save(model, path)
    scan = registry.get("scan")
    assert scan.plan_from_json(compiler.load(path).meta["plan"]) == scan.applies(model.automaton)


def _patch_everywhere(monkeypatch, module_name: str, attr: str, message: str) -> int:
    """Replace ``module.attr`` and every module-level alias of it with a function that raises."""
    original = getattr(sys.modules[module_name], attr)

    def boom(*args, **kwargs):
        raise AssertionError(message)

    n = 0
    for mod in list(sys.modules.values()):
        if getattr(mod, attr, None) is original:
            monkeypatch.setattr(mod, attr, boom)
            n += 1
    return n


def test_krohn_rhodes_verify_report_and_set_start_never_decompose(tmp_path, monkeypatch, capsys):
    import compiler.cli  # noqa: F401  (imports decompose too: patched below)

    model = compiler.compile_automaton("dyck:2,2", max_len=16, method="krohn-rhodes")
    path = tmp_path / "kr.safetensors"
    compiler.save(model, path)
    assert _patch_everywhere(monkeypatch, "compiler.automata.decompose", "decompose", "decomposed again") >= 3
    with pytest.raises(AssertionError, match="decomposed again"):
        compiler.decompose("parity")  # the patch is live
    loaded = compiler.load(path)
    assert verify(loaded, **FAST).exact
    assert main(["verify", str(path), "--report", str(tmp_path / "r"), "--samples", "2",
                 "--exhaustive-budget", "64"]) == 0
    assert "<h2>Cascade</h2>" in (tmp_path / "r" / "report.html").read_text()
    a = loaded.automaton
    q0 = a.states[2]
    other = compiler.with_start(loaded, q0)
    assert other.meta["plan"]["automaton"]["start"] == q0  # the carried cascade moved with the start
    toks = np.random.default_rng(1).integers(0, a.n_symbols, (4, 16))
    assert other.predict(torch.from_numpy(toks)).tolist() == [a.run(r, start=2) for r in toks.tolist()]
    assert verify(other, **FAST).exact  # invariants follow the cascade from the new start


def test_gridworld_verify_and_set_start_never_detect(tmp_path, monkeypatch):
    model = compiler.compile_automaton("grid2d:3,4", max_len=16)
    assert model.meta["method"] == "gridworld"
    assert _patch_everywhere(monkeypatch, "compiler.automata.gridworld_detect", "detect", "detected again") >= 2
    r = verify(model, **FAST)
    assert r.exact and "wall-pinned" in r.checked["adversarial_families"] and r.seeds["gridworld_families"] == 12
    other = compiler.with_start(model, "2,1")
    a = model.automaton
    toks = np.random.default_rng(2).integers(0, a.n_symbols, (4, 16))
    assert other.predict(torch.from_numpy(toks)).tolist() == [a.run(r, start=a.state_index["2,1"])
                                                              for r in toks.tolist()]
    assert verify(other, **FAST).exact


def test_checkpoint_without_plan_or_with_unknown_method_is_an_error(tmp_path, capsys):
    model = compiler.compile_automaton("parity", max_len=8, method="scan")
    model.meta = {k: v for k, v in model.meta.items() if k != "plan"}
    with pytest.raises(ShortcutError, match="carries no plan"):
        verify(model, **FAST)
    model.meta = {**model.meta, "method": "mystery"}
    path = tmp_path / "m.safetensors"
    compiler.save(model, path)
    assert main(["verify", str(path)]) == 2
    assert "unknown construction 'mystery'" in capsys.readouterr().err
    with pytest.raises(ShortcutError, match="unknown construction"):
        compiler.with_start(model, "1")


def test_cli_method_choices_come_from_the_registry(capsys):
    with pytest.raises(SystemExit):
        main(["compile", "--help"])
    out = capsys.readouterr().out
    choices = ("{auto,lookback,gridworld,bounded-stack,krohn-rhodes,locally-testable,piecewise,piecewise-local,local,"
               "starfree,product,transition,scan}")
    assert choices in out
    assert json.dumps(registry.names())  # JSON-able names
