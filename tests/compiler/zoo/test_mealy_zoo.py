"""The zoo's Mealy classes (compiler/automata/mealy_families.py): models of the outputs, certified."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from compiler.automata.mealy import mealy_outputs
from compiler.automata.spec import from_dict
from compiler.zoo.config import jobs, load as load_config, parse
from compiler.zoo.run import run_zoo
from constructions.checkpoint import load

SMALL = {"seed": 1, "defaults": {"max_len": [8], "traces": 1},
         "family": [{"name": "m", "class": "mealy", "count": 2, "states": [2, 3], "letters": [2, 2]},
                    {"name": "s", "class": "mealy", "count": 1, "states": [2, 2], "readouts": ["states"]}]}


def _rows(config: dict, out) -> list[dict]:
    """The zoo's rows, each model checked: certified, and its run is the Mealy machine's outputs
    (or states, for a states readout)."""
    summary = run_zoo(parse(config), out)
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert summary.by_status == {"ok": len(rows)}
    rng = random.Random(0)
    for r in rows:
        assert r["verification"]["certified"], r["verification"]["certificate_reason"]
        a, model = from_dict(json.loads(r["spec"])), load(out / r["files"]["model"])
        assert a.transition_outputs is not None
        words = [[rng.choice(a.alphabet) for _ in range(8)] for _ in range(3)]
        want = [mealy_outputs(a, a.symbol_ids(w)) if r["readout"] == "labels" else
                [a.states[q] for q in a.run(a.symbol_ids(w))] for w in words]
        assert model.simulate(words) == want
    return rows


def test_the_example_config_reads_outputs():
    config = load_config(Path(__file__).resolve().parents[3] / "examples" / "zoo-mealy.toml")
    assert len(jobs(config)) == 10 and {f.kind for f in config.families} == {"mealy", "mealy-tcp"}
    assert {f.readouts for f in config.families} == {("labels",)}


def test_mealy_families_compile_their_outputs_certified(tmp_path):
    rows = _rows(SMALL, tmp_path)
    assert [r["readout"] for r in rows] == ["labels", "labels", "states"] and rows[0]["n_symbols"] == 2


@pytest.mark.slow
def test_the_protocol_family(tmp_path):
    config = {"seed": 0, "defaults": {"max_len": [16], "traces": 1},
              "family": [{"name": "tcp", "class": "mealy-tcp", "count": 1}]}
    (row,) = _rows(config, tmp_path)
    assert row["automaton"] == "tcp-00000" and (row["n_states"], row["n_symbols"], row["readout"]) == (7, 6, "labels")
