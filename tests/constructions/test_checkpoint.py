"""Checkpoints: safetensors + JSON metadata, deterministic, never unpickled."""

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import compiler
from compiler.automata.errors import CheckpointError


def test_round_trip_gives_same_outputs(tmp_path):
    model = compiler.compile_automaton("dihedral:4", max_len=32)
    path = tmp_path / "m.safetensors"
    compiler.save(model, path)
    loaded = compiler.load(path)
    x = torch.randint(0, 2, (4, 32))
    assert torch.equal(model(x), loaded(x))
    assert loaded.info() == model.info()


def test_metadata_holds_spec_method_labels_and_version(tmp_path):
    path = tmp_path / "m.safetensors"
    compiler.save(compiler.compile_automaton("parity", max_len=8, method="scan"), path)
    with safe_open(str(path), framework="pt") as f:
        md = f.metadata()
    assert md["format_version"] == "1"
    meta = json.loads(md["meta"])
    assert meta["method"] == "scan" and meta["automaton"]["name"] == "parity"
    assert "scan:map[0]" in meta["residual_labels"]
    assert json.loads(md["config"])["max_len"] == 8


def test_same_spec_gives_byte_identical_checkpoints(tmp_path):
    for name in ("symmetric:4", "dyck:2,2", "grid:5", "quaternion"):  # krohn-rhodes, scan, gridworld, kr
        a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
        compiler.save(compiler.compile_automaton(name, max_len=64), a)
        compiler.save(compiler.compile_automaton(name, max_len=64), b)
        assert a.read_bytes() == b.read_bytes()


def test_corrupt_and_foreign_files_raise_checkpoint_error(tmp_path):
    good = tmp_path / "good.safetensors"
    compiler.save(compiler.compile_automaton("parity", max_len=8), good)
    truncated = tmp_path / "t.safetensors"
    truncated.write_bytes(good.read_bytes()[:200])
    foreign = tmp_path / "f.safetensors"
    save_file({"x": torch.zeros(2)}, str(foreign))
    for path in (truncated, foreign, tmp_path / "missing.safetensors"):
        with pytest.raises(CheckpointError):
            compiler.load(path)
    # a shortcut header whose tensors do not match the config
    bad = tmp_path / "bad.safetensors"
    with safe_open(str(good), framework="pt") as f:
        md = f.metadata()
    save_file({"W_E": torch.zeros(1)}, str(bad), metadata=md)
    with pytest.raises(CheckpointError, match="corrupt"):
        compiler.load(bad)
