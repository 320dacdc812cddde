"""Mealy machines compiled: the label readout of their transitions' outputs, exact and certified,
from JSON, DOT and AALpy objects; the CLI prints outputs and refuses malformed DOT (exit 2)."""

from __future__ import annotations

import random

import numpy as np
import pytest

import compiler
from compiler.automata.mealy import mealy_outputs
from compiler.automata.spec import from_dict
from compiler.cli import main
from tests.compiler.automata.test_mealy import HTML, QUOTED, TCP_LIKE, random_mealy
from verify.certify import certify
from verify.check import verify


def _exact_and_certified(model, a) -> None:
    """Certified, verified against the Mealy machine, and its run agrees with the Mealy simulation."""
    cert = certify(model)
    assert cert.certified, cert.reason
    assert verify(model, samples=16).exact
    rng = random.Random(0)
    words = [[rng.choice(a.alphabet) for _ in range(model.max_len)] for _ in range(4)]
    assert model.simulate(words) == [mealy_outputs(a, a.symbol_ids(w)) for w in words]


@pytest.mark.parametrize("max_len", [64, 256])
def test_json_dot_and_aalpy_mealy_machines_compile_exact_and_certified(max_len, tmp_path):
    pytest.importorskip("pydot")
    utils = pytest.importorskip("aalpy.utils")
    random.seed(3)
    learned = utils.generate_random_mealy_machine(3, ["a", "b"], ["x", "y", "z"])
    path = tmp_path / "html.dot"
    path.write_text(HTML if max_len == 64 else QUOTED)
    for source in (TCP_LIKE, path, learned)[: 3 if max_len == 64 else 2]:  # every form at 64 (the sweep: -m slow)
        a = compiler.load_spec(source)
        model = compiler.compile_automaton(source, max_len=max_len, allow_inexact=False)
        assert model.metadata.readout["mealy"]["states_before"] == a.n_states
        _exact_and_certified(model, a)


def test_a_readout_of_the_states_stays_available():
    a = from_dict(TCP_LIKE)
    model = compiler.compile_automaton(a, max_len=16, readout="states")
    assert model.simulate([["SYN", "ACK", "SYN"]]) == [["rcvd", "est", "est"]]


def test_a_partial_mealy_machine_holds_under_the_promise():
    spec = random_mealy(4, 2, 3, 1, partial=True)
    a = from_dict(spec)
    model = compiler.compile_automaton(spec, max_len=16, allow_inexact=False)
    assert model.metadata.readout["mealy"]["states_before"] == 4
    assert certify(model).certified and verify(model, samples=16).exact
    with pytest.raises(compiler.ShortcutError, match="missing transition|partial"):
        compiler.compile_automaton({k: v for k, v in spec.items() if k != "promise"}, max_len=8)
    assert a.partial


def test_the_cli_prints_outputs_and_refuses_a_malformed_edge(tmp_path, capsys):
    pytest.importorskip("pydot")
    dot, out = tmp_path / "m.dot", tmp_path / "m.safetensors"
    dot.write_text(QUOTED)
    assert main(["compile", str(dot), "-o", str(out), "--max-len", "16", "--certify"]) == 0
    said = capsys.readouterr().out
    assert "Mealy machine: 2 states" in said and "certified exact" in said
    assert main(["run", str(out), "--input", "b a b a"]) == 0
    assert capsys.readouterr().out.strip() == "y x z/w z"
    bad = tmp_path / "bad.dot"
    bad.write_text('digraph g { s0 -> s1 [label="a/x"]; s0 -> s1 [label="a/y"]; }')
    assert main(["compile", str(bad), "-o", str(tmp_path / "bad.safetensors")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "edge s0 -> s1" in err[0]


@pytest.mark.slow
@pytest.mark.parametrize("n, k, o", [(2, 2, 2), (8, 4, 4), (16, 8, 8), (32, 8, 4), (32, 8, 16), (64, 16, 4), (64, 16, 32)])
def test_random_mealy_machines_compile_exact_and_certified(n, k, o):
    """The sweep (the default suite runs the small machines above)."""
    for max_len in (64, 256):
        a = from_dict(random_mealy(n, k, o, n))
        model = compiler.compile_automaton(a, max_len=max_len, allow_inexact=False)
        _exact_and_certified(model, a)
        assert np.isfinite(model.metadata.readout["mealy"]["transitions"])
