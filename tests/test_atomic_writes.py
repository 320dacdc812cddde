"""Atomic writes (issue 30): a writer killed with SIGKILL at any moment leaves every file it
writes old or new, never torn -- for checkpoints, reports and exports.

The default tests fork the writer from one Python process that has loaded torch and the
models once (a fork per trial costs milliseconds, a fresh interpreter seconds); each child
runs the library call the CLI makes (``save``, ``write_report``, ``save_transformer_lens``) and
is killed once it has stalled before a rename (every other trial: those kills land mid-write by
construction, not by timing) or after a short random delay.  The slow
tests run the real ``shortcut`` commands in fresh processes, 20 trials each."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import compiler
from compiler.automata.atomic import TEMP_SUFFIX, temp_name, write_atomic

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 20
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

SERVER = r"""
import os, sys
from pathlib import Path
import compiler
from compiler.export import save_transformer_lens, to_transformer_lens
from constructions.checkpoint import load, save
from verify.check import verify
from verify.report import write_report

kind, target = sys.argv[1], Path(sys.argv[2])
models = [load(p) for p in sys.argv[3:]]
if kind == "checkpoint":
    variants = [lambda m=m: save(m, target) for m in models]
elif kind == "report":
    results = [verify(models[0], samples=1, seed=s, exhaustive_budget=16, family_limit=1) for s in (0, 1)]
    variants = [lambda r=r: write_report(r, models[0], target) for r in results]
else:
    exports = [to_transformer_lens(m) for m in models]
    variants = [lambda e=e: save_transformer_lens(e, target) for e in exports]
print("ready", flush=True)
real_replace = os.replace
for line in sys.stdin:
    trial, stall = map(int, line.split())
    stalled_r, stalled_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(stalled_r)
        if stall >= 0:  # hang before the stall-th rename, once it says so: the kill lands mid-write
            calls = iter(range(1 << 30))

            def replace(*a):
                if next(calls) == stall:
                    os.write(stalled_w, b"s")
                    __import__("time").sleep(3600)
                real_replace(*a)
            os.replace = replace
        variants[trial % len(variants)]()
        os._exit(0)
    os.close(stalled_w)
    print(pid, flush=True)
    if stall >= 0:  # "stalled" when the writer hangs before its rename, "finished" if it never did
        print("stalled" if os.read(stalled_r, 1) else "finished", flush=True)
    os.close(stalled_r)
    os.waitpid(pid, 0)
    print("done", flush=True)
"""


def snapshot(paths: list[Path]) -> dict[str, bytes | None]:
    return {p.name: p.read_bytes() if p.exists() else None for p in paths}


def temp_files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.startswith(".") and p.name.endswith(TEMP_SUFFIX)]


def kill_after(pid: int, delay: float) -> None:
    """SIGKILL ``pid`` after ``delay`` seconds (0: now)."""
    time.sleep(delay)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:  # it finished first: a complete write, still a trial
        pass


def torn_files(outputs: list[Path], versions: list[dict[str, bytes | None]]) -> list[str]:
    """The outputs that are none of the complete versions (a version's file may be absent)."""
    now = snapshot(outputs)
    return [name for name, data in now.items() if data not in {v[name] for v in versions}]


def run_trials(kind: str, sources: list[Path], target: Path, outputs: list[Path], seed: int) -> tuple[int, int]:
    """Kill the forked writer ``TRIALS`` times; (torn trials, stalled trials killed mid-write: a
    temporary file was left behind).  The two complete versions are written first, un-killed.
    On even trials the writer stalls before its k-th rename (k cycling over the outputs) and
    says so, and only then is it killed, so each of those ``TRIALS // 2`` kills lands mid-write
    whatever the machine's load (the count does not depend on timing); the odd trials' kills
    after a random delay hit whatever they hit and are only checked for torn files."""
    server = subprocess.Popen([sys.executable, "-c", SERVER, kind, str(target), *map(str, sources)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        assert server.stdout.readline().strip() == "ready"

        def trial(i: int, window: float | None) -> float:
            stall = (i // 2) % len(outputs) if window is not None and i % 2 == 0 else -1
            server.stdin.write(f"{i} {stall}\n")
            server.stdin.flush()
            pid, t = int(server.stdout.readline()), time.monotonic()
            if stall >= 0:
                assert server.stdout.readline().strip() == "stalled"  # it hangs before a rename
                kill_after(pid, 0.0)
            elif window is not None:
                kill_after(pid, rng.uniform(0, window))
            assert server.stdout.readline().strip() == "done"
            return time.monotonic() - t

        rng = random.Random(seed)
        versions, window = [], 0.0
        for i in (0, 1):
            window = max(window, trial(i, None))  # the kills fall within a whole write's time
            versions.append(snapshot(outputs))
        assert versions[0] != versions[1]  # the trials can tell which version survived
        torn = landed = 0
        for i in range(TRIALS):
            trial(i, window)
            torn += bool(torn_files(outputs, versions))
            leftovers = temp_files(outputs[0].parent)
            landed += i % 2 == 0 and bool(leftovers)  # the stalled trials: each must have landed
            for p in leftovers:
                p.unlink()
        return torn, landed
    finally:
        server.stdin.close()
        server.kill()
        server.wait()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> list[Path]:
    """Two different scan checkpoints of cyclic:32 (about 6 MB each)."""
    d = tmp_path_factory.mktemp("src")
    out = []
    for n in (1024, 512):
        path = d / f"c{n}.safetensors"
        compiler.save(compiler.compile_automaton("cyclic:32", max_len=n, method="scan"), path)
        out.append(path)
    return out


def test_write_atomic_replaces_whole_files_and_cleans_up_after_an_error(tmp_path, monkeypatch):
    target = tmp_path / "f.txt"
    write_atomic(target, "old")
    write_atomic(target, "nëw")
    assert target.read_text(encoding="utf-8") == "nëw" and not temp_files(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(target)
    write_atomic(link, b"through")
    assert link.is_symlink() and target.read_bytes() == b"through"

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, "lost")
    assert target.read_bytes() == b"through" and not temp_files(tmp_path)
    assert temp_name(target).name.startswith(".f.txt.") and temp_name(target) != temp_name(target)


def test_a_killed_checkpoint_write_leaves_the_old_file_or_the_new(checkpoints, tmp_path):
    target = tmp_path / "X.safetensors"
    torn, landed = run_trials("checkpoint", checkpoints, target, [target], seed=1)
    assert torn == 0, f"{torn}/{TRIALS} torn checkpoints"
    assert landed == TRIALS // 2  # every stalled writer was killed mid-write


def test_a_killed_report_write_leaves_each_file_old_or_new(checkpoints, tmp_path):
    outputs = [tmp_path / name for name in ("report.json", "report.md", "report.html")]
    torn, landed = run_trials("report", checkpoints[1:], tmp_path, outputs, seed=2)
    assert torn == 0, f"{torn}/{TRIALS} trials left a torn report file"
    assert landed == TRIALS // 2


def test_a_killed_export_leaves_each_file_old_or_new(checkpoints, tmp_path):
    outputs = [tmp_path / name for name in ("model.safetensors", "config.json", "map.json")]
    torn, landed = run_trials("export", checkpoints, tmp_path, outputs, seed=3)
    assert torn == 0, f"{torn}/{TRIALS} trials left a torn export file"
    assert landed == TRIALS // 2


# --- the real commands, fresh processes (slow) ----------------------------------------------------


def cli_trials(argv: list[str], outputs: list[Path], rng: random.Random, window: float) -> tuple[int, int]:
    """Run ``shortcut argv`` ``TRIALS`` times, killing it when its temporary file appears or after
    a random delay up to ``window`` s past start-up; (torn trials, trials killed mid-write)."""
    subprocess.run([sys.executable, "-m", "compiler", *argv], env=ENV, cwd=ROOT, check=True, capture_output=True)
    good = snapshot(outputs)
    torn = landed = 0
    for i in range(TRIALS):
        proc = subprocess.Popen([sys.executable, "-m", "compiler", *argv], env=ENV, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + (120 if i % 2 == 0 else rng.uniform(2, window))
        while time.monotonic() < deadline and proc.poll() is None and not (i % 2 == 0 and temp_files(outputs[0].parent)):
            time.sleep(0.0005)
        proc.kill()
        proc.wait()
        torn += bool(torn_files(outputs, [good]))
        leftovers = temp_files(outputs[0].parent)
        landed += bool(leftovers)
        for p in leftovers:
            p.unlink()
    return torn, landed


@pytest.mark.slow
def test_killed_commands_never_leave_a_torn_file(tmp_path):
    rng = random.Random(30)
    x = tmp_path / "X.safetensors"
    compile_argv = ["compile", "cyclic:64", "--method", "scan", "--max-len", "1024", "--no-verify", "-o", str(x)]
    assert cli_trials(compile_argv, [x], rng, 8.0)[0] == 0
    rep = tmp_path / "rep"
    assert cli_trials(["verify", str(x), "--report", str(rep), "--samples", "1", "--exhaustive-budget", "64",
                       "--family-limit", "1"], [rep / n for n in ("report.json", "report.md", "report.html")],
                      rng, 8.0)[0] == 0
    exp = tmp_path / "exp"
    assert cli_trials(["export", str(x), "-o", str(exp)],
                      [exp / n for n in ("model.safetensors", "config.json", "map.json")], rng, 8.0)[0] == 0
