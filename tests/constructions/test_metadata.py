"""The typed checkpoint metadata (constructions/metadata.py): a lossless JSON round trip, keys in
their order, absent keys absent, construction sections kept; old checkpoints read through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import compiler
from constructions.checkpoint import load, save
from constructions.metadata import ModelMeta

OLD = Path(__file__).resolve().parent / "data" / "cyclic3_scan_691005e.safetensors"


def _round_trips(meta: dict) -> None:
    back = ModelMeta.from_json(meta).to_json()
    assert back == meta and list(back) == list(meta)
    assert json.dumps(back) == json.dumps(meta)


@pytest.mark.parametrize("spec, options", [("dihedral:3", {}), ("grid:4", {"method": "gridworld"}),
                                           ("parity", {"readout": "labels"}),
                                           ("cyclic:3", {"basis": "orthogonal", "basis_seed": 1})])
def test_every_models_metadata_round_trips_and_reads_as_attributes(spec, options, tmp_path) -> None:
    model = compiler.compile_automaton(spec, max_len=8, **options)
    _round_trips(model.meta)
    m = model.metadata
    assert m.method == model.meta["method"] and m.layers == model.meta["layers"]
    assert m.subspaces == model.meta["subspaces"] and m.automaton["start"] == m.start
    assert (m.readout is None) == ("readout" not in model.meta) and (m.basis is None) == ("basis" not in model.meta)
    assert m.section(m.method.replace("-", "_")) is not None or m.section(m.method) is not None
    save(model, tmp_path / "m.safetensors")
    _round_trips(load(tmp_path / "m.safetensors").meta)


def test_a_checkpoint_from_before_a_key_existed_reads_its_default() -> None:
    model = load(OLD)
    _round_trips(model.meta)
    m = model.metadata
    assert m.method == "scan" and m.readout is None and m.basis is None and m.verification is None
    assert m.section("scan") is not None


def test_absent_keys_stay_absent_and_unknown_ones_are_kept() -> None:
    meta = {"method": "x", "future_key": [1, 2], "positions": None}
    m = ModelMeta.from_json(meta)
    assert m.layers == [] and m.sections == {"future_key": [1, 2]} and m.positions is None
    assert m.to_json() == meta and list(m.to_json()) == ["method", "future_key", "positions"]
