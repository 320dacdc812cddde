"""Regression tests for issue 17 (first contact and hardening): each failure it lists, with
the exit status and the message the CLI now gives, and the exit-code contract itself."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import compiler
from compiler import usage
from compiler.cli import compiling, tools, verifying
from compiler.automata.errors import BudgetError, SpecError
from compiler.automata.load import load_spec
from compiler.cli import main
from constructions import registry
from verify import recurrent
from verify.layerwise import invariants

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def q8(tmp_path_factory) -> Path:
    """A verified quaternion checkpoint (scan, max_len 16): the summary is bound to its content."""
    path = tmp_path_factory.mktemp("q8") / "q8.safetensors"
    assert main(["compile", "quaternion", "-o", str(path), "--max-len", "16", "--method", "scan"]) == 0
    return path


def one_error_line(err: str, needle: str) -> None:
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert needle in err and "Traceback" not in err, err


def fails(argv: list[str], needle: str, capsys, code: int = 2) -> None:
    capsys.readouterr()
    assert main(argv) == code
    one_error_line(capsys.readouterr().err, needle)


def shortcut(*argv: str, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "compiler", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300, **kw)


# --- tracebacks that exited 1 ------------------------------------------------------------------


def test_deeply_nested_json_spec(tmp_path, capsys):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    fails(["compile", str(tmp_path / "deep.json"), "-o", str(tmp_path / "o.safetensors")], "nested too deeply", capsys)


@pytest.mark.parametrize("output,needle", [("missing/dir/o.safetensors", "directory 'missing/dir' does not exist"),
                                           (".", "is a directory"), ("", "the output path is empty")])
def test_output_paths_are_checked_before_compiling(output, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    compiled = []
    monkeypatch.setattr(compiling, "compile_automaton", lambda *a, **k: compiled.append(1))
    fails(["compile", "parity", "-o", output], needle, capsys)
    assert not compiled  # refused before any work


def test_binary_input_file(q8, tmp_path, capsys):
    (tmp_path / "bin").write_bytes(bytes(range(256)))
    fails(["run", str(q8), "--input-file", str(tmp_path / "bin")], "is not UTF-8 text", capsys)


@pytest.mark.parametrize("where,needle", [("file", "exists and is not a directory"),
                                          ("/proc/version/r", "is not a directory"),
                                          ("", "the report directory path is empty")])
def test_report_paths_are_checked_before_verifying(where, needle, q8, tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(verifying, "verify", lambda *a, **k: pytest.fail("verified before checking --report"))
    fails(["verify", str(q8), "--report", where], needle, capsys)


def test_unwritable_report_directory(q8, tmp_path, capsys, monkeypatch):
    if os.geteuid() == 0:
        pytest.skip("root may write anywhere")
    (tmp_path / "ro").mkdir(mode=0o500)
    fails(["verify", str(q8), "--report", str(tmp_path / "ro" / "r")], "permission denied", capsys)


def test_edited_spec_in_the_header_is_bad_input_for_verify(q8, tmp_path, capsys, checkpoint_tools):
    def swap_a_transition(meta):
        row = meta["automaton"]["transitions"]["1"]
        row["i"], row["j"] = row["j"], row["i"]

    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "e.safetensors", swap_a_transition)
    fails(["verify", str(edited)], "header (spec, method, plan, config or notes) was edited after compiling", capsys)
    fails(["run", str(edited), "--input", "i", "--start", "i"], "was edited after compiling", capsys)
    assert main(["info", str(edited)]) == 0
    out = capsys.readouterr().out
    assert "verification: changed since verification: the header (spec, method, plan, config, notes) differ" in out
    assert "(verified)" not in out


def test_edited_construction_notes_are_an_edited_header(q8, tmp_path, capsys, checkpoint_tools):
    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "e.safetensors", lambda m: m.update(layers=None))
    fails(["verify", str(edited)], "was edited after compiling", capsys)


def test_bogus_method_is_refused_not_replaced(q8, tmp_path, capsys, checkpoint_tools):
    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "e.safetensors", lambda m: m.update(method="bogus"))
    fails(["verify", str(edited)], "unknown construction 'bogus'", capsys)


@pytest.mark.parametrize("change,needle", [
    (lambda m: [m["automaton"]["alphabet"].append("z"), *(row.update(z=q) for q, row in
                                                         m["automaton"]["transitions"].items())],
     "has 5 symbols but the embedding is for 4"),
    (lambda m: m["automaton"].update(states=m["automaton"]["states"][:-1]), "invalid"),
    (lambda m: m["layout"]["subspaces"]["bos"].update(dims=[10_000]), "not a list of residual dims"),
    (lambda m: m.pop("method"), "names no construction"),
    (lambda m: m.update(plan={"nonsense": 1}), "cannot be decoded"),
])
def test_header_inconsistent_with_the_tensors(change, needle, q8, tmp_path, capsys, checkpoint_tools):
    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "e.safetensors", change)
    fails(["verify", str(edited)], needle, capsys)


def test_config_inconsistent_with_the_tensors(q8, tmp_path, capsys, checkpoint_tools):
    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "e.safetensors", lambda c: c.update(d_model=10**12),
                                           key="config")
    fails(["info", str(edited)], "parameters but the file holds", capsys)
    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "f.safetensors", lambda c: c.update(dtype="int64"),
                                           key="config")
    fails(["info", str(edited)], "dtype 'int64'", capsys)


def test_info_json_into_a_closed_pipe_is_quiet(q8):
    r = subprocess.run(f"{sys.executable} -m compiler info {q8} --json | head -c 300",
                       shell=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and len(r.stdout) == 300 and r.stderr == ""
    p = subprocess.Popen([sys.executable, "-m", "compiler", "info", str(q8), "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    p.stdout.close()  # the reader is gone before anything is written
    err = p.stderr.read().decode()
    assert p.wait() == 0 and "Traceback" not in err and "BrokenPipe" not in err


# --- unbounded options ---------------------------------------------------------------------------


def test_huge_exhaustive_budget_is_refused_by_its_memory_estimate(q8, capsys):
    fails(["verify", str(q8), "--exhaustive-budget", "1000000000000"], "GiB of inputs", capsys)
    fails(["verify", str(q8), "--samples", str(10**12)], "GiB of inputs", capsys)


@pytest.mark.parametrize("argv,needle", [
    (["verify", "{m}", "--exhaustive-budget", "-1"], "--exhaustive-budget: must be >= 1"),
    (["verify", "{m}", "--exhaustive-budget", "0"], "--exhaustive-budget: must be >= 1"),
    (["verify", "{m}", "--samples", "-3"], "--samples: must be >= 0"),
    (["verify", "{m}", "--seed", "-1"], "--seed: must be >= 0"),
    (["verify", "{m}", "--family-limit", "0"], "--family-limit: must be >= 1"),
    (["verify", "{m}", "--samples", "many"], "expected an integer"),
    (["compile", "parity", "-o", "x.safetensors", "--verify-budget", "-5"], "--verify-budget: must be >= 1"),
    (["compile", "parity", "-o", "x.safetensors", "--verify-samples", "-1"], "--verify-samples: must be >= 0"),
    (["compile", "parity", "-o", "x.safetensors", "--max-len", "-4"], "max_len must be a positive integer"),
])
def test_every_budget_is_validated(argv, needle, q8, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fails([a.replace("{m}", str(q8)) for a in argv], needle, capsys)


def test_max_len_beyond_certified_reach_needs_allow_inexact(tmp_path, capsys):
    out = tmp_path / "g.safetensors"
    gw = ["--method", "gridworld"]
    # (at 2^20 its position blocks alone pass the parameter budget, and verifying would be refused
    # first: tests/compiler/test_command.py)
    fails(["compile", "grid:5", "-o", str(out), "--max-len", "65536", "--no-verify", *gw],
          "beyond the certified float reach", capsys)
    assert not out.exists()
    # grid:5 at 4608: past the gridworld's float32 reach (its residue modulus is 128 from 4225);
    # the gridworld's reach is asked for
    grid5 = ["compile", "grid:5", "-o", str(out), "--max-len", "4608", "--no-verify"]
    fails([*grid5, *gw], "--allow-inexact", capsys)
    assert main([*grid5, "--allow-inexact", *gw]) == 0
    assert capsys.readouterr().err.startswith("warning: gridworld at max_len 4608")
    assert main([*grid5, "--dtype", "float64", *gw]) == 0
    assert main(grid5) == 0
    assert compiler.load(out).meta["method"] == "krohn-rhodes"


def test_auto_passes_over_a_build_beyond_its_reach(capsys):
    """grid:5 at 4608: the gridworld (2 layers) is beyond its float32 reach, so auto takes the
    next candidate, krohn-rhodes, and `plan` says why; with --allow-inexact the gridworld."""
    assert main(["plan", "grid:5", "--max-len", "4608", "--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    cands = {c["name"]: c for c in p["candidates"]}
    assert p["chosen"] == "krohn-rhodes" and p["error"] is None
    assert not cands["gridworld"]["fits"] and cands["gridworld"]["layers"] == 2
    assert cands["gridworld"]["refusal"].startswith("beyond its certified float reach: gridworld at max_len 4608")
    assert main(["plan", "grid:5", "--max-len", "4608", "--json", "--allow-inexact"]) == 0
    assert json.loads(capsys.readouterr().out)["chosen"] == "gridworld"


# --- verdicts bound to content --------------------------------------------------------------------


def test_info_says_verified_only_for_the_verified_weights(q8, tmp_path, capsys, checkpoint_tools):
    assert main(["info", str(q8)]) == 0
    assert "verification: exact (verified) on " in capsys.readouterr().out
    assert main(["info", str(q8), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verification_status"] == "verified"
    data = bytearray(q8.read_bytes())
    at = checkpoint_tools["tensor_offset"](q8, "W_U")
    (value,) = struct.unpack_from("<f", data, at)
    struct.pack_into("<f", data, at, value + 1e-3)  # one weight, a little
    edited = tmp_path / "w.safetensors"
    edited.write_bytes(bytes(data))
    assert main(["info", str(edited)]) == 0
    out = capsys.readouterr().out
    assert "verification: changed since verification: the weights differ; run `shortcut verify`" in out
    assert "(verified)" not in out
    assert main(["info", str(edited), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verification_status"].startswith("changed since verification")
    assert main(["verify", str(edited), "--samples", "2"]) in (0, 1)  # edited weights are still verifiable


def test_failed_invariant_is_named_in_the_verdict(tmp_path, capsys):
    scan = registry.get("scan")

    def broken(model, plan, tokens):
        out = invariants(model, tokens)
        return replace(out, failures=["layer 2: scan:map deviates by 0.3 from the 4-window map"])

    with registry.registered(replace(scan, name="scan-broken", invariants=broken)):
        path = tmp_path / "m.safetensors"
        # the weights are right, so the certificate holds and the cross-check after it runs no
        # invariants (the proof covers every layer): the sampled check alone reports them
        assert main(["compile", "parity", "-o", str(path), "--max-len", "8", "--method", "scan-broken"]) == 0
        capsys.readouterr()
        assert main(["compile", "parity", "-o", str(path), "--max-len", "8", "--method", "scan-broken",
                     "--no-certify"]) == 1
        assert "NOT exact (0 errors; invariant failed: layer 2: scan:map deviates" in capsys.readouterr().out
        assert main(["verify", str(path), "--samples", "2", "--no-certify"]) == 1
        verdict = capsys.readouterr().out.splitlines()[0]
    assert verdict.startswith("parity: NOT exact — 0 errors; invariant failed: layer 2: scan:map deviates by 0.3")


def test_counterexample_position_is_named_in_the_verdict(q8, tmp_path, capsys):
    model = compiler.load(q8)
    with __import__("torch").no_grad():
        model.W_U.mul_(-1)
    compiler.save(model, tmp_path / "bad.safetensors")
    assert main(["verify", str(tmp_path / "bad.safetensors"), "--samples", "2"]) == 1
    verdict = capsys.readouterr().out.splitlines()[0]
    assert re.search(r"NOT exact — \d+ errors; first at position \d+ in the exhaustive check \(expected \S+, got",
                     verdict), verdict


# --- automata-lib input -------------------------------------------------------------------------


def test_automata_lib_input_parameters_dict(tmp_path, capsys):
    params = {"states": {0, 1, 2}, "input_symbols": {"a", "b"}, "initial_state": 0, "final_states": {2},
              "transitions": {0: {"a": 1, "b": 0}, 1: {"a": 2, "b": 0}, 2: {"a": 2, "b": 2}},
              "allow_partial": False}
    a = load_spec(params)
    assert a.states == ("0", "1", "2") and a.alphabet == ("a", "b") and a.outputs == ("reject", "reject", "accept")
    model = compiler.compile_automaton(params, max_len=8)
    assert model.simulate([["a", "a", "b"]]) == [["1", "2", "2"]]


def test_integer_states_are_not_reported_partial():
    spec = {"states": [0, 1], "alphabet": ["x"], "transitions": {0: {"x": 1}, 1: {"x": 0}}}
    assert load_spec(spec).maps == ((1, 0),)
    with pytest.raises(SpecError, match="gives '0' twice"):
        load_spec({"states": [0, 1], "alphabet": ["x"], "transitions": {0: {"x": 1}, "0": {"x": 1}, 1: {"x": 0}}})


def test_partial_dfa_needs_complete(tmp_path, capsys):
    params = {"states": ["q0", "q1"], "input_symbols": ["a", "b"], "initial_state": "q0", "final_states": ["q1"],
              "transitions": {"q0": {"a": "q1"}, "q1": {"b": "q0"}}, "allow_partial": True}
    with pytest.raises(SpecError, match=r"partial.*--complete \(complete=True\)"):
        load_spec(params)
    a = load_spec(params, complete=True)
    assert a.states == ("q0", "q1", "sink") and a.outputs == ("reject", "accept", "reject")
    assert a.run(a.symbol_ids(["b", "a"])) == [2, 2]
    (tmp_path / "p.json").write_text(json.dumps(params))
    out = tmp_path / "p.safetensors"
    fails(["compile", str(tmp_path / "p.json"), "-o", str(out)], "pass --complete", capsys)
    assert main(["compile", str(tmp_path / "p.json"), "-o", str(out), "--max-len", "8", "--complete"]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--input", "a b b"]) == 0
    assert capsys.readouterr().out.split() == ["q1", "q0", "sink"]


def test_automata_lib_dfa_objects():
    dfa_mod = pytest.importorskip("automata.fa.dfa")
    dfa = dfa_mod.DFA(states={"even", "odd"}, input_symbols={"0", "1"}, initial_state="even", final_states={"odd"},
                      transitions={"even": {"0": "even", "1": "odd"}, "odd": {"0": "odd", "1": "even"}})
    model = compiler.compile_automaton(dfa, max_len=8)
    assert model.simulate([["1", "1", "1"]]) == [["odd", "even", "odd"]]
    partial = dfa_mod.DFA(states={0, 1}, input_symbols={"a"}, initial_state=0, final_states={1},
                          transitions={0: {"a": 1}, 1: {}}, allow_partial=True)
    with pytest.raises(SpecError, match="partial"):
        load_spec(partial)
    assert load_spec(partial, complete=True).states == ("0", "1", "sink")


@pytest.mark.parametrize("spec,needle", [
    ({"states": ["a"], "alphabet": [None], "transitions": {"a": {"None": "a"}}}, "NoneType None"),
    ({"states": ["a", 1.5], "alphabet": ["x"], "transitions": {}}, "float 1.5"),
    ({"states": [True], "alphabet": ["x"], "transitions": {}}, "bool True"),
    ({"states": ["a"], "alphabet": ["x"], "transitions": {"a": {"x": None}}}, "the target of 'a' --'x'-->"),
    ({"states": ["a"], "alphabet": ["x"], "transitions": {"a": {"x": "a"}}, "outputs": {"a": None}}, "output label"),
    ({"name": None, "states": ["a"], "alphabet": ["x"], "transitions": {"a": {"x": "a"}}}, "'name' must be a string"),
])
def test_non_string_names_are_rejected_not_stringified(spec, needle):
    with pytest.raises(SpecError, match=needle.replace("(", r"\(").replace("'", "'")):
        load_spec(spec)


def test_duplicate_json_keys(tmp_path, capsys):
    (tmp_path / "d.json").write_text('{"states": ["a"], "alphabet": ["x"], "transitions": {"a": {"x": "a", "x": "a"}}}')
    fails(["compile", str(tmp_path / "d.json"), "-o", str(tmp_path / "o.safetensors")],
          "key 'x' appears twice in one JSON object", capsys)


# --- the contract, help and version ------------------------------------------------------------------


def test_internal_error_is_one_line_and_exit_3(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(tools, "cmd_catalog", boom)
    fails(["catalog"], "internal error (RuntimeError: kaboom); this is a bug", capsys, code=3)
    assert main(["catalog", "--debug"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: internal error")


def test_line_breaks_in_user_text_stay_on_one_line(capsys):
    fails(["compile", "parity", "\r0", "-o", "x.safetensors"], "unrecognized arguments", capsys)
    fails(["compile", "no\u2028such\x85name", "-o", "x.safetensors"], "unknown catalog automaton", capsys)


def test_help_states_the_exit_codes_defaults_and_examples(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "exit status (every command):" in out and "3  internal error" in out
    for command, default in (("compile", "(default: 128)"), ("verify", "(default: 32768)"), ("run", "examples:")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        assert default in out and "examples:" in out and "1  the model is not exact" in out


def test_readme_states_the_exit_codes():
    text = (ROOT / "README.md").read_text()
    for line in usage.EXIT_CODES.splitlines()[1:]:
        assert line.split()[0] in text
    assert "| 3 | internal error" in text and "| 1 | the model is not exact" in text and "--debug" in text


def test_paper_suite_column_is_the_depth_at_100_percent():
    table = (ROOT / "benchmarks" / "results" / "paper_suite.md").read_text()
    assert "| trained depth (100%) |" in table and "99%" not in table


# --- issue 30: input at fault is exit 2, never 3 ------------------------------------------------

PARTIAL_STACKS = ([[1, 2, 5, 5], [5, 5, 0, 5], [3, 4, 5, 0], [5, 5, 2, 5], [5, 5, 5, 2], [5, 5, 5, 5]],
                  [[1, 4, 2, 4], [3, 0, 4, 4], [4, 4, 4, 0], [4, 1, 4, 4], [4, 4, 4, 4]])
"""Tables on which the stack detector stepped to a stack its walk never made (KeyError, exit 3)."""


@pytest.mark.parametrize("rows", PARTIAL_STACKS)
def test_partial_stacks_plan_compile_and_verify_exact(rows, tmp_path, capsys):
    spec = tmp_path / "t.json"
    spec.write_text(json.dumps(rows))
    assert main(["plan", str(spec), "--max-len", "16"]) == 0
    assert "not all 7 stacks" in capsys.readouterr().out
    assert main(["compile", str(spec), "-o", str(tmp_path / "m.st"), "--max-len", "65"]) == 0
    assert "verification: exact" in capsys.readouterr().out
    fails(["compile", str(spec), "-o", str(tmp_path / "m.st"), "--max-len", "65", "--method", "bounded-stack"],
          "is not one up to renaming", capsys)


def test_regex_whose_minimal_dfa_is_a_partial_stack_compiles_with_labels(tmp_path, capsys):
    out = tmp_path / "r.st"
    assert main(["compile", "regex:..b|ab", "--alphabet", "a,b", "--readout", "labels", "--max-len", "64",
                 "-o", str(out)]) == 0
    assert "verification: exact" in capsys.readouterr().out


# --- issue 30: the verification summary has a digest of its own ------------------------------------


def test_an_edited_verification_summary_is_not_verified(q8, tmp_path, capsys, checkpoint_tools):
    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "s.safetensors",
                                           lambda m: m["verification"].update(n_positions=10**9))
    assert main(["info", str(edited)]) == 0
    out = capsys.readouterr().out
    assert "verification: changed since verification: the summary's own entries differ" in out
    assert "(verified)" not in out and "not tampering" in out
    assert main(["info", str(edited), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["verification_status"].startswith("changed since verification") and "not tampering" in \
        info["verification_digests"]
    assert main(["verify", str(edited), "--samples", "2"]) == 0
    err = capsys.readouterr().err
    assert "warning: the verification summary stored in" in err and "it is not this run's verdict" in err


def test_a_summary_without_its_digest_is_not_sealed(q8, tmp_path, capsys, checkpoint_tools):
    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "s.safetensors",
                                           lambda m: m["verification"].pop("summary_sha256"))
    assert main(["info", str(edited), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verification_status"].startswith("not sealed")


def test_the_summary_digest_covers_entries_added_later(q8, tmp_path, capsys, checkpoint_tools):
    model = compiler.load(q8)
    model.meta["verification"] = {**model.meta["verification"], "later": {"kind": "any entry", "n": 1}}
    sealed = tmp_path / "later.safetensors"
    compiler.save(model, sealed)
    assert main(["info", str(sealed), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verification_status"] == "verified"
    edited = checkpoint_tools["edit_meta"](sealed, tmp_path / "e.safetensors",
                                           lambda m: m["verification"]["later"].update(n=2))
    assert main(["info", str(edited), "--json"]) == 0
    assert "the summary's own entries differ" in json.loads(capsys.readouterr().out)["verification_status"]


# --- issue 30: exit 3 where the input is at fault ----------------------------------------------------


def test_a_table_entry_beyond_64_bits_is_bad_input(tmp_path, capsys):
    (tmp_path / "t.json").write_text("[[0, 1180591620717411303424], [1, 0]]")  # 2^70
    fails(["plan", str(tmp_path / "t.json")], "too large for a state index", capsys)


@pytest.mark.parametrize("damage, needle", [
    (lambda d: d[: len(d) // 2], "cannot read"),  # truncated
    (lambda d: d[:60] + bytes(b ^ 0x55 for b in d[60:90]) + d[90:], "cannot read"),  # a bad CRC or header
    (lambda d: b"PK\x03\x04" + b"not a zip" * 8, "cannot read"),
])
def test_a_corrupt_npz_is_bad_input(damage, needle, tmp_path, capsys):
    good = tmp_path / "good.npz"
    np.savez_compressed(good, table=np.arange(400).reshape(200, 2) % 200)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(damage(good.read_bytes()))
    fails(["plan", str(bad)], needle, capsys)


def test_a_50000_letter_spec_is_refused_before_compiling_when_it_cannot_be_verified(tmp_path, capsys, monkeypatch):
    rows = [[(q + 1) % 2 if a == 0 else q for a in range(50_000)] for q in range(2)]
    (tmp_path / "wide.json").write_text(json.dumps(rows))
    monkeypatch.setattr(compiling, "compile_automaton", lambda *a, **k: pytest.fail("compiled before refusing"))
    start = time.monotonic()
    fails(["compile", str(tmp_path / "wide.json"), "-o", str(tmp_path / "w.st")], "recurrent reference", capsys)
    assert time.monotonic() - start < 30  # the spec loads in linear time (was quadratic: 30 s), then the bound


def test_the_recurrent_reference_bound():
    assert recurrent.weight_bytes(2, 50_000) > 37 * 2**30
    recurrent.check_size(120, 2)  # S5: kilobytes
    with pytest.raises(BudgetError, match="37.3 GiB"):
        recurrent.check_size(2, 50_000)


@pytest.mark.parametrize("change, needle", [
    (lambda m: m["layout"]["blocks"][0].update(mlp=3.5), "layout of block 0 is malformed"),
    (lambda m: m["layout"]["blocks"][1]["heads"][0].update(reads=7), "layout of block 1 is malformed"),
    (lambda m: m["layout"].update(blocks=True), "layout must list"),
    (lambda m: m["layout"]["blocks"][0]["mlp"].update(hidden=[1, 2]), "layout of block 0 is malformed"),
    (lambda m: m.update(layers=7), "construction notes"),
    (lambda m: m.update(residual_labels=m["residual_labels"][:-1]), "residual_labels"),
])
@pytest.mark.parametrize("command", ["info", "run", "verify", "export"])
def test_a_crafted_layout_is_bad_input_for_every_command(change, needle, command, q8, tmp_path, capsys,
                                                         checkpoint_tools):
    def craft(meta):
        change(meta)
        meta.pop("header_sha256")  # no digest to tell: the structure itself must

    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "c.safetensors", craft)
    argv = {"info": ["info", str(edited), "--layout"], "run": ["run", str(edited), "--input", "i"],
            "verify": ["verify", str(edited)], "export": ["export", str(edited), "-o", str(tmp_path / "x")]}[command]
    fails(argv, needle, capsys)


def test_crafted_notes_without_a_header_digest_are_bad_input_for_verify_and_its_report(q8, tmp_path, capsys,
                                                                                     checkpoint_tools):
    def craft(meta):
        meta["layers"][0]["heads"] = 3  # the construction's checks read these notes
        meta.pop("header_sha256")

    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "c.safetensors", craft)
    capsys.readouterr()
    assert main(["verify", str(edited), "--report", str(tmp_path / "r")]) == 2
    one_error_line(capsys.readouterr().err, "carries no digest")  # refused at loading (issue 42): nothing trusted
    assert not (tmp_path / "r").exists()


def test_150000_empty_blocks_are_refused_before_any_is_built(q8, tmp_path, capsys, checkpoint_tools):
    def craft(config):
        config["blocks"] += [{"n_heads": 0, "mlp_hidden": []}] * 150_000  # no parameter: the count still matches

    edited = checkpoint_tools["edit_meta"](q8, tmp_path / "b.safetensors", craft, key="config")
    start = time.monotonic()
    fails(["info", str(edited)], "over the limit of 4,096", capsys)
    assert time.monotonic() - start < 10
    heads = checkpoint_tools["edit_meta"](q8, tmp_path / "h.safetensors",
                                          lambda c: c["blocks"].append({"n_heads": 0, "mlp_hidden": []}), key="config")
    fails(["info", str(heads)], "at least one head in every block", capsys)
