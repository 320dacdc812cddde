"""The command line: each subcommand, and one-line errors with exit status 2."""

import json
import subprocess
import sys

import pytest

import compiler
from compiler.automata.version import __version__
from compiler.cli import main
from constructions.checkpoint import save


@pytest.fixture(scope="module")
def q8(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "q8.safetensors"
    assert main(["compile", "quaternion", "-o", str(path), "--max-len", "16", "--method", "scan"]) == 0
    return path


def test_run_prints_states(q8, capsys):
    assert main(["run", str(q8), "--input", "i j k"]) == 0
    assert capsys.readouterr().out.split() == ["i", "k", "-1"]
    assert main(["run", str(q8), "--input", "i i", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"states": ["i", "-1"]}


def test_run_reads_input_file(q8, tmp_path, capsys):
    f = tmp_path / "in.txt"
    f.write_text("i\nj j\n")
    assert main(["run", str(q8), "--input-file", str(f)]) == 0
    assert capsys.readouterr().out.splitlines() == ["i", "j -1"]


def test_info_json_keys(q8, capsys):
    assert main(["info", str(q8), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["method"] == "scan" and info["n_layers"] == 4 and info["n_states"] == 8


@pytest.mark.parametrize("spec,method", [("quaternion", "scan"), ("cyclic:3", "krohn-rhodes"),
                                         ("grid:4", "gridworld")])
def test_info_layout_lists_every_block_and_subspace(spec, method, tmp_path, capsys):
    path = tmp_path / "m.safetensors"
    assert main(["compile", spec, "-o", str(path), "--max-len", "8", "--method", method, "--no-verify"]) == 0
    capsys.readouterr()
    assert main(["info", str(path), "--layout", "--json"]) == 0
    layout = json.loads(capsys.readouterr().out)
    assert main(["info", str(path), "--json"]) == 0
    n_layers = json.loads(capsys.readouterr().out)["n_layers"]
    assert [b["layer"] for b in layout["blocks"]] == list(range(n_layers))
    assert main(["info", str(path), "--layout"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("layer ")] == [f"layer {l}:" for l in range(n_layers)]
    listed = {line.split()[0] for line in lines[1:lines.index("layer 0:")]}
    assert listed == set(layout["subspaces"])
    for b in layout["blocks"]:
        for h in b["heads"]:
            assert any(line.split()[:3] == ["head", str(h["index"]), h["name"]] for line in lines)
        assert any(line.split()[:2] == ["mlp", b["mlp"]["name"]] for line in lines)
    writes = [line.split("write", 1)[1].strip() for line in lines if " write " in line]
    assert len(writes) == sum(len(b["heads"]) + 1 for b in layout["blocks"])
    assert writes[0] == ", ".join(layout["blocks"][0]["heads"][0]["writes"])


def test_auto_and_krohn_rhodes_from_the_cli(tmp_path, capsys):
    path = tmp_path / "q8.safetensors"
    assert main(["compile", "quaternion", "-o", str(path), "--max-len", "64"]) == 0
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert info["method"] == "krohn-rhodes" and info["n_layers"] == 2 and "solvable" in info["why"]
    assert main(["compile", "alternating:5", "-o", str(tmp_path / "a5.safetensors"), "--method", "krohn-rhodes"]) == 2
    assert "A5" in capsys.readouterr().err


def test_verify_writes_reports(q8, tmp_path, capsys):
    assert main(["verify", str(q8), "--report", str(tmp_path / "r"), "--samples", "4"]) == 0
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["exact"] is True and rep["schema"].startswith("shortcut-verification/")
    assert len(rep["checkpoint_sha256"]) == 64
    assert "EXACT" in (tmp_path / "r" / "report.md").read_text()


def test_catalog_lists_entries(capsys):
    assert main(["catalog"]) == 0
    out = capsys.readouterr().out
    assert "cyclic:n" in out and "dyck:n,k" in out


def test_compile_spec_file(tmp_path, capsys):
    spec = {"name": "toggle", "states": ["a", "b"], "alphabet": ["t", "s"],
            "transitions": {"a": {"t": "b", "s": "a"}, "b": {"t": "a", "s": "b"}}}
    path = tmp_path / "toggle.json"
    path.write_text(json.dumps(spec))
    out = tmp_path / "t.safetensors"
    assert main(["compile", str(path), "-o", str(out), "--max-len", "8"]) == 0
    assert "toggle" in capsys.readouterr().out
    assert main(["run", str(out), "--input", "t s t t"]) == 0
    assert capsys.readouterr().out.split() == ["b", "b", "a", "b"]


BAD = [
    (["compile", "nosuch", "-o", "x.safetensors"], "unknown catalog automaton"),
    (["compile", "cyclic:1", "-o", "x.safetensors"], "cyclic"),
    (["compile", "parity", "-o", "x.safetensors", "--max-len", "0"], "max_len"),
    (["info", "missing.safetensors"], "does not exist"),
    (["frobnicate"], "invalid choice"),
]


@pytest.mark.parametrize("argv,needle", BAD)
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_run_errors(q8, tmp_path, capsys):
    assert main(["run", str(q8), "--input", "i q"]) == 2
    assert "unknown symbol 'q'" in capsys.readouterr().err
    assert main(["run", str(q8), "--input", " ".join(["i"] * 17)]) == 2
    assert "longer than the model's max_len 16" in capsys.readouterr().err
    corrupt = tmp_path / "c.safetensors"
    corrupt.write_bytes(q8.read_bytes()[:300])
    assert main(["run", str(corrupt), "--input", "i"]) == 2
    assert "checkpoint" in capsys.readouterr().err


def test_partial_spec_suggests_sink(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"states": ["a", "b"], "alphabet": ["x"], "transitions": {"a": {"x": "b"}}}))
    assert main(["compile", str(path), "-o", str(tmp_path / "o.safetensors")]) == 2
    assert "sink" in capsys.readouterr().err


def test_module_entry_point_and_exit_status(tmp_path):
    r = subprocess.run([sys.executable, "-m", "compiler", "compile", "nosuch", "-o", str(tmp_path / "x")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr


def test_run_from_another_start_state(q8, capsys):
    assert main(["run", str(q8), "--input", "i", "--start", "j"]) == 0
    assert capsys.readouterr().out.split() == ["-k"]
    assert main(["run", str(q8), "--input", "i", "--start", "z"]) == 2
    assert "unknown start state" in capsys.readouterr().err


def test_over_budget_automaton_exits_2(tmp_path, capsys):
    assert main(["compile", "grid:300", "--method", "scan", "-o", str(tmp_path / "g.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "budget" in err and len(err.strip().splitlines()) == 1


def test_info_layout_without_a_stored_layout_is_a_one_line_error(tmp_path, capsys):
    model = compiler.compile_automaton("parity", max_len=4)
    model.meta = {k: v for k, v in model.meta.items() if k != "layout"}
    save(model, tmp_path / "old.safetensors")
    assert main(["info", str(tmp_path / "old.safetensors"), "--layout"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "no layout" in err and len(err.strip().splitlines()) == 1
def test_run_sep_splits_on_another_separator(q8, tmp_path, capsys):
    assert main(["run", str(q8), "--input", "i, j,k", "--sep", ","]) == 0
    assert capsys.readouterr().out.split() == ["i", "k", "-1"]
    f = tmp_path / "in.txt"
    f.write_text("i;i\n\nj\n")
    assert main(["run", str(q8), "--input-file", str(f), "--sep", ";"]) == 0
    assert capsys.readouterr().out.splitlines() == ["i -1", "", "j"]
    assert main(["run", str(q8), "--input", "i j", "--sep", ","]) == 2  # one field 'i j': not a symbol
    assert "unknown symbol 'i j'" in capsys.readouterr().err


def test_run_sep_lets_symbols_with_commas_through(tmp_path, capsys):
    spec = {"states": ["lo", "hi"], "alphabet": ["up,1", "down,1"],
            "transitions": {"lo": {"up,1": "hi", "down,1": "lo"}, "hi": {"up,1": "hi", "down,1": "lo"}}}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    out = tmp_path / "s.safetensors"
    assert main(["compile", str(tmp_path / "s.json"), "-o", str(out), "--max-len", "8"]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--input", "up,1 | down,1 | up,1", "--sep", "|"]) == 0
    assert capsys.readouterr().out.split() == ["hi", "lo", "hi"]


def test_spec_with_a_spaced_symbol_is_one_line_exit_2(tmp_path, capsys):
    spec = {"states": ["a"], "alphabet": ["x y"], "transitions": {"a": {"x y": "a"}}}
    (tmp_path / "bad.json").write_text(json.dumps(spec))
    assert main(["compile", str(tmp_path / "bad.json"), "-o", str(tmp_path / "o.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: symbol 'x y'") and "whitespace" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.safetensors").exists()


def test_permutation_letters_run_from_the_cli(tmp_path, capsys):
    path = tmp_path / "s3.safetensors"
    assert main(["compile", "symmetric:3", "-o", str(path), "--max-len", "8"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--input", "(1,2) (1,2,3) e"]) == 0
    assert capsys.readouterr().out.split() == ["213", "321", "321"]


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"shortcut {__version__}"
