"""The standard shape (``compile_automaton(..., shape="standard")``, compiler/planner.py): every block
one attention sublayer and one MLP with exactly one hidden layer, costed in standard blocks, exactly."""

from __future__ import annotations

import functools

import pytest

import compiler
from compiler.automata.catalog import entries
from compiler.automata.errors import ShortcutError
from compiler.automata.load import load_spec
from compiler.cli import main
from compiler.pipeline import candidates, set_start, survey
from constructions import registry
from constructions.checkpoint import load, save


@functools.cache
def _example_automata() -> list:
    """The catalog families' examples (with them every registered construction applies somewhere)."""
    return [load_spec(e.example) for e in entries()]


def _one_hidden_layer(model) -> bool:
    return all(len(b.mlp_hidden) <= 1 for b in model.config.blocks)


@pytest.mark.slow
@pytest.mark.parametrize("name", registry.names())
def test_every_construction_compiles_in_standard_blocks_at_its_estimated_size(name):
    """compile_automaton checks the model against the candidate's standard cost (an internal error
    otherwise); here each construction, on the first catalog example it applies to."""
    c = registry.get(name)
    a = next((a for a in _example_automata() if not hasattr(c.applies(a), "reason")), None)
    if a is None:
        pytest.skip(f"{name} applies to no catalog example")
    cands, _, _ = survey(a, 20, shape="standard")
    cand = next(x for x in cands if x.name == name)
    if not cand.fits:
        pytest.skip(f"{name} on {a.name}: {cand.refusal}")
    model = compiler.compile_automaton(a, max_len=20, method=name, shape="standard")
    assert _one_hidden_layer(model)
    assert (len(model.blocks), sum(p.numel() for p in model.parameters())) == (cand.layers, cand.params)
    assert model.meta["shape"]["name"] == "standard" and model.info()["shape"] == "standard"


def test_auto_takes_the_fewest_standard_blocks():
    """Q8: the cascade has 2 attention layers and, its blocks' MLPs built as staircases, 3 standard blocks
    (2 for the first level: the table of its two mod-2 counters read off a ramp of their sum too; 1
    for the last, its decode interpolated into the one-hots the unembedding sums); the scan 7 and 7."""
    default = candidates("quaternion", max_len=100)
    standard = candidates("quaternion", max_len=100, shape="standard")
    by = lambda r: {c["name"]: c["layers"] for c in r["candidates"] if c["fits"]}  # noqa: E731
    assert default["chosen"] == "krohn-rhodes" and by(default)["krohn-rhodes"] == 2
    assert standard["chosen"] == "krohn-rhodes" and by(standard) == {"krohn-rhodes": 3, "scan": 7}
    assert "standard blocks" in standard["why"]


def test_a_standard_model_records_its_shape_through_a_checkpoint(tmp_path, capsys):
    model = compiler.compile_automaton("cyclic:4", max_len=100, method="krohn-rhodes", shape="standard")
    assert model.meta["shape"]["unfolded"] == [{"layer": 0, "mlp": "block1.mlp", "hidden_layers": 2}]
    assert "unfolded" in model.meta and _one_hidden_layer(model)
    save(model, tmp_path / "m.safetensors")
    again = load(tmp_path / "m.safetensors")
    assert again.meta["shape"] == model.meta["shape"]
    assert main(["info", str(tmp_path / "m.safetensors")]) == 0
    assert "shape: standard" in capsys.readouterr().out


def test_an_unfolded_model_keeps_its_start_state():
    model = compiler.compile_automaton("cyclic:4", max_len=100, method="krohn-rhodes", shape="standard")
    with pytest.raises(ShortcutError, match="keeps its start state"):
        set_start(model, "1")


def test_a_default_model_keeps_the_default_shape():
    model = compiler.compile_automaton("cyclic:3", max_len=16)
    assert "shape" not in model.meta and model.info()["shape"] == "default"


def test_bad_shapes_and_label_readouts_are_refused():
    with pytest.raises(ShortcutError, match="unknown shape"):
        compiler.compile_automaton("parity", max_len=8, shape="round")
    with pytest.raises(ShortcutError, match="standard shape"):
        compiler.compile_automaton("parity", max_len=8, shape="standard", readout="labels")


def test_the_cli_plans_and_compiles_the_standard_shape(tmp_path, capsys):
    assert main(["plan", "quaternion", "--max-len", "100", "--shape", "standard"]) == 0
    out = capsys.readouterr().out
    assert "standard shape" in out and "blocks" in out and "chosen: krohn-rhodes" in out
    path = tmp_path / "q.safetensors"
    assert main(["compile", "nth-last:3", "--max-len", "32", "--shape", "standard", "-o", str(path)]) == 0
    assert "standard shape" in capsys.readouterr().out
    assert _one_hidden_layer(load(path)) and len(load(path).blocks) == 1
