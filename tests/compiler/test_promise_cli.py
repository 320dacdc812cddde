"""``--promise legal`` on the command line: compile, plan, info, and ``run`` on an illegal input."""

from __future__ import annotations

import json

import pytest

from compiler.cli import main

PARTIAL = {"name": "p", "states": ["e", "a", "aa"], "alphabet": ["(", ")"],
           "transitions": {"e": {"(": "a"}, "a": {"(": "aa", ")": "e"}, "aa": {")": "a"}}}


def one_error_line(err: str, needle: str) -> None:
    lines = [x for x in err.splitlines() if not x.startswith("verifying")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("promise")
    spec = d / "p.json"
    spec.write_text(json.dumps(PARTIAL))
    out = d / "p.safetensors"
    assert main(["compile", str(spec), "-o", str(out), "--max-len", "16", "--promise", "legal",
                 "--verify-budget", "512", "--verify-samples", "8"]) == 0
    return spec, out


def test_a_partial_spec_without_a_promise_is_refused(compiled, capsys):
    spec, out = compiled
    capsys.readouterr()
    assert main(["compile", str(spec), "-o", str(out.with_name("x.st"))]) == 2
    one_error_line(capsys.readouterr().err, "pass --promise legal")
    assert main(["compile", str(spec), "-o", str(out.with_name("x.st")), "--promise", "legal", "--complete"]) == 2
    one_error_line(capsys.readouterr().err, "not both")


def test_compile_and_info_state_the_promise(compiled, capsys):
    _, out = compiled
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "promise: exact on legal inputs only: 2 transitions are undefined" in text
    assert "legal positions" in text and "n_layers: 2" in text
    assert main(["info", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["promise"].startswith("exact on legal inputs only")


def test_run_names_the_position_that_leaves_the_domain(compiled, capsys, tmp_path):
    _, out = compiled
    capsys.readouterr()
    assert main(["run", str(out), "--input", "( ( ) )"]) == 0
    assert capsys.readouterr().out.split() == ["a", "aa", "a", "e"]
    assert main(["run", str(out), "--input", "( ) )"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    one_error_line(cap.err, "leaves the domain at position 3: ')' from state 'e' is undefined")
    lines = tmp_path / "in.txt"
    lines.write_text("( )\n( ( ( )\n")
    assert main(["run", str(out), "--input-file", str(lines)]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""  # nothing printed that the model cannot vouch for, not even the legal first line
    one_error_line(cap.err, "leaves the domain at position 3: '(' from state 'aa'")
    assert "line 2 of" in cap.err


def test_plan_and_tables_with_a_missing_marker(tmp_path, capsys):
    table = tmp_path / "t.json"
    table.write_text(json.dumps({"table": [[1, -1], [2, 0], [-1, 1]]}))
    capsys.readouterr()
    assert main(["plan", str(table), "--max-len", "64", "--promise", "legal"]) == 0
    assert "chosen: bounded-stack" in capsys.readouterr().out
    assert main(["plan", str(table), "--max-len", "64"]) == 2
    one_error_line(capsys.readouterr().err, "partial")


def test_the_catalog_lists_the_papers_dyck(capsys):
    assert main(["catalog"]) == 0
    assert "dyck-legal:n,k" in capsys.readouterr().out
