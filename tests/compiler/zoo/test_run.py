"""Running a zoo: files, manifest, resume, failures with reasons, identical bytes however run."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compiler.automata.errors import InputError
from compiler.cli import main
from compiler.zoo.config import jobs, parse
from compiler.zoo.job import RECORDS
from compiler.zoo.run import PARQUET, _record, run_zoo
from constructions.checkpoint import load

ROOT = Path(__file__).resolve().parents[3]
SMALL = {"seed": 4, "defaults": {"max_len": [8], "traces": 2},
         "family": [{"name": "loc", "class": "local", "count": 2, "states": [2, 3]},
                    {"name": "rot", "class": "definite", "count": 1, "states": [2, 4], "bases": ["orthogonal"]},
                    {"name": "bad", "class": "catalog", "count": 1, "names": ["parity"], "methods": ["gridworld"]}]}


def digests(out: Path) -> dict[str, str]:
    """sha256 of the manifest and of every model, circuit and trace file."""
    files = [out / "manifest.jsonl", *([out / PARQUET] if (out / PARQUET).exists() else []), *sorted(p for d in ("models", "circuits", "traces") for p in (out / d).iterdir())]
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("zoo")
    return out, run_zoo(parse(SMALL), out)


def test_rows_files_and_failures(small):
    out, summary = small
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["loc-00000", "loc-00001", "rot-00000", "bad-00000"]
    assert summary.by_status == {"ok": 3, "failed": 1} and summary.new == 4
    bad = rows[3]
    assert bad["error"] == {"kind": "ShortcutError", "message": bad["error"]["message"]}
    assert "line or box world" in bad["error"]["message"]
    assert "files" not in bad and summary.failures == {bad["error"]["kind"]: 1}
    for r in rows[:3]:
        model = load(out / r["files"]["model"])
        assert r["weights_sha256"] and r["verification"]["exact"] and model.meta["method"] == r["method"]
        assert r["sha256"]["model"] == hashlib.sha256((out / r["files"]["model"]).read_bytes()).hexdigest()
        assert json.loads((out / r["files"]["circuit"]).read_text())["layers"]
    assert rows[2]["basis"]["kind"] == "orthogonal" and rows[2]["verification"]["how"] == "sampled"
    assert rows[2]["verification"]["certificate_supported"] is False
    timings = [json.loads(line) for line in (out / "timings.jsonl").read_text().splitlines()]
    assert [t["id"] for t in timings] == [r["id"] for r in rows] and all(t["total_s"] > 0 for t in timings)


def test_a_rerun_resumes_and_a_lost_model_comes_back_identical(small):
    out, _ = small
    before = digests(out)
    again = run_zoo(parse(SMALL), out)
    assert again.new == 0 and again.resumed == 4 and digests(out) == before
    (out / RECORDS / "loc-00001.json").unlink()  # as if killed before its record was written
    (out / "models" / "loc-00001.safetensors").write_bytes(b"torn")
    (out / "models" / ".loc-00001.safetensors.1234abcd.tmp").write_bytes(b"left by a kill")
    third = run_zoo(parse(SMALL), out)
    assert third.new == 1 and digests(out) == before
    assert not list((out / "models").glob(".*.tmp"))


def test_a_resume_reuses_only_records_it_can_check(small):
    """Issue 42: a hand-edited record, a deleted model file or a record whose sha256 is wrong is
    made again (not reused, not a KeyError), and records made for another config are not reused."""
    out, _ = small
    before = digests(out)
    edits = {"loc-00000": lambda r: r["row"].pop("status"), "bad-00000": lambda r: r["row"].update(status=["ok"]),
             "rot-00000": lambda r: r["row"]["sha256"].update(model="0" * 64)}
    for job_id, edit in edits.items():
        path = out / RECORDS / f"{job_id}.json"
        record = json.loads(path.read_text())
        edit(record)
        path.write_text(json.dumps(record))
    (out / "models" / "loc-00001.safetensors").unlink()
    path, job = out / RECORDS / "rot-00000.json", jobs(parse(SMALL))[2]
    text = path.read_text()
    for edit in (lambda r: r.pop("timings"), lambda r: r["row"].update(verification=[1]),
                 lambda r: r["row"].update(error=[[[[[]]]]] * 2), lambda r: r.update(deep="[" * 5000)):
        record = json.loads(text)
        edit(record)
        path.write_text(json.dumps(record).replace('"' + "[" * 5000 + '"', "[" * 5000 + "]" * 5000))
        assert _record(out, job) is None
    path.write_text(text)
    other = parse({**SMALL, "seed": 5})
    assert all(_record(out, j) is None for j in jobs(other))  # another seed's jobs: as when zoo.json is deleted
    again = run_zoo(parse(SMALL), out)
    assert again.new == 4 and again.remade == 4 and "4 of them made again" in again.text()
    assert digests(out) == before


def test_the_parquet_copy_holds_the_manifest_rows(small):
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow (the zoo extra) is not installed")
    out, _ = small
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    table = pq.read_table(out / PARQUET).to_pylist()
    assert len(table) == len(rows)
    for row, got in zip(rows, table):
        assert {k: v for k, v in got.items() if v is not None} == {
            k: json.dumps(v, sort_keys=True, separators=(",", ":")) if isinstance(v, dict) else v
            for k, v in row.items() if v is not None}
    assert json.loads(table[3]["error"])["kind"] == "ShortcutError" and table[0]["heads_by_layer"] == rows[0]["heads_by_layer"]


def test_without_pyarrow_there_is_no_parquet_copy(small, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    out = tmp_path / "z"
    run_zoo(parse(SMALL), out, limit=1)
    (out / PARQUET).write_bytes(b"stale")  # from a run that had pyarrow
    run_zoo(parse(SMALL), out, limit=1)
    assert not (out / PARQUET).exists() and (out / "manifest.jsonl").read_text()


def test_another_config_in_the_same_directory_is_refused(small):
    out, _ = small
    with pytest.raises(InputError, match="another config"):
        run_zoo(parse({**SMALL, "seed": 5}), out)


def test_cli_zoo_with_limit_and_bad_input(tmp_path, capsys):
    cfg = tmp_path / "z.json"
    cfg.write_text(json.dumps(SMALL))
    assert main(["zoo", str(cfg), "-o", str(tmp_path / "out"), "--limit", "1"]) == 0
    assert "zoo: 1 models" in capsys.readouterr().out
    assert len((tmp_path / "out" / "manifest.jsonl").read_text().splitlines()) == 1
    assert main(["zoo", str(tmp_path / "nope.toml"), "-o", str(tmp_path / "o2")]) == 2
    assert main(["zoo", str(cfg), "-o", str(tmp_path / "o3"), "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 2 and "Traceback" not in err


@pytest.mark.slow
def test_workers_and_kill_give_the_same_bytes(tmp_path):
    """examples/zoo-tiny.toml: 1 worker, 2 workers, and 2 workers killed with SIGKILL midway
    then rerun: the same manifest and files."""
    tiny = ROOT / "examples" / "zoo-tiny.toml"
    run_zoo(tiny, tmp_path / "one", workers=1)
    run_zoo(tiny, tmp_path / "two", workers=2)
    cmd = [sys.executable, "-m", "compiler", "zoo", str(tiny), "-o", str(tmp_path / "killed"), "--workers", "2"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    records = tmp_path / "killed" / RECORDS
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(records.glob("*.json")) if records.is_dir() else []) < 5:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 5 <= len(list(records.glob("*.json"))) < 31
    assert subprocess.run(cmd, cwd=ROOT, capture_output=True).returncode == 0
    assert digests(tmp_path / "one") == digests(tmp_path / "two") == digests(tmp_path / "killed")


@pytest.mark.slow
def test_ray_gives_the_same_bytes_as_the_pool(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    tiny = ROOT / "examples" / "zoo-tiny.toml"
    run_zoo(tiny, tmp_path / "pool", workers=2, limit=12)
    run_zoo(tiny, tmp_path / "ray", workers=2, limit=12, ray="")
    assert digests(tmp_path / "pool") == digests(tmp_path / "ray")
