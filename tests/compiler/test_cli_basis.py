"""``shortcut compile --basis orthogonal --seed S``: exact, deterministic, honest about certificates."""

from __future__ import annotations

import json

from compiler.cli import main
from constructions.checkpoint import load


def test_compile_verify_certify_and_info_on_a_rotated_model(tmp_path, capsys):
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    for path in (a, b):
        assert main(["compile", "nth-last:3", "-o", str(path), "--max-len", "32", "--basis", "orthogonal",
                     "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert a.read_bytes() == b.read_bytes()
    assert "certificate: not certified: the certificate covers standard-basis models only" in out
    model = load(a)
    assert model.meta["basis"] == {"kind": "orthogonal", "seed": 3, "heads": True}
    assert model.meta["verification"]["exact"] is True
    assert main(["verify", str(a), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exact"] is True
    assert main(["certify", str(a)]) == 1
    assert "rotated basis" in capsys.readouterr().out
    assert main(["run", str(a), "--input", "a b a b"]) == 0
    assert main(["run", str(a), "--input", "a", "--start", model.automaton.states[1]]) == 2


def test_standard_is_the_default_and_bad_seeds_are_bad_input(tmp_path, capsys):
    plain, named = tmp_path / "p.safetensors", tmp_path / "s.safetensors"
    assert main(["compile", "parity", "-o", str(plain), "--max-len", "8", "--no-verify"]) == 0
    assert main(["compile", "parity", "-o", str(named), "--max-len", "8", "--no-verify", "--basis", "standard"]) == 0
    assert plain.read_bytes() == named.read_bytes() and "basis" not in load(plain).meta
    capsys.readouterr()
    assert main(["compile", "parity", "-o", str(plain), "--basis", "orthogonal", "--seed", "-1"]) == 2
    assert main(["compile", "parity", "-o", str(plain), "--basis", "skewed"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 2 and "Traceback" not in err
