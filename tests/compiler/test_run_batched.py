"""``shortcut run``: batched forwards, lazy reading, streaming output, bounded lines."""

from __future__ import annotations

import io
import random
import subprocess
import sys

import pytest
import torch

from compiler.cli import run as run_command
from compiler.cli import main
from constructions.checkpoint import load

DEV_ZERO_SECONDS = 60
"""Generous wall-clock bound for the /dev/zero run (interpreter start and import torch included)."""
DEV_ZERO_MAX_RSS_KB = 1 << 20
"""1 GiB: the /dev/zero run's max resident set stays far below (it reads at most one bounded line)."""


@pytest.fixture(scope="module")
def q8(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "q8.safetensors"
    assert main(["compile", "quaternion", "-o", str(path), "--max-len", "16", "--method", "scan", "--no-verify"]) == 0
    return path


def one_at_a_time(model, lines: list[str]) -> list[str]:
    """The old path: one forward per line."""
    a = model.automaton
    out = []
    for line in lines:
        ids = a.symbol_ids(line.split())
        pred = model.predict(torch.tensor([ids]))[0].tolist() if ids else []
        out.append(" ".join(a.states[q] for q in pred))
    return out


def mixed_lines(alphabet, n: int, max_len: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_len))) for _ in range(n)]


def test_batched_output_equals_one_at_a_time_on_mixed_lengths(q8, tmp_path, capsys, monkeypatch):
    model = load(q8)
    lines = mixed_lines(list(model.automaton.alphabet), 300, 16, seed=1)
    f = tmp_path / "in.txt"
    f.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(run_command, "RUN_CHUNK_LINES", 37)  # several chunks, each with several lengths
    monkeypatch.setattr(run_command, "batch_rows", lambda m, T: 5)  # several forwards per length
    assert main(["run", str(q8), "--input-file", str(f)]) == 0
    got = capsys.readouterr().out.splitlines()
    assert got == one_at_a_time(model, lines)
    assert any(not x for x in got) and len({len(x.split()) for x in got}) == 17  # empty lines and every length


def test_simulate_batches_one_forward_per_length(q8, monkeypatch):
    model = load(q8)
    words = [line.split() for line in mixed_lines(list(model.automaton.alphabet), 50, 4, seed=2)]
    calls = []
    real = model.predict
    monkeypatch.setattr(model, "predict", lambda t: calls.append(t.shape) or real(t))
    out = model.simulate(words)
    assert len(calls) == len({len(w) for w in words if w})
    assert out == [x.split() for x in one_at_a_time(model, [" ".join(w) for w in words])]


def test_too_long_line_names_its_line_number(q8, tmp_path, capsys):
    f = tmp_path / "in.txt"
    f.write_text("i j\n" + " ".join(["i"] * 17) + "\nk\n")
    assert main(["run", str(q8), "--input-file", str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # a regular file is checked whole before anything is printed
    assert "line 2 of" in err and "longer than the model's max_len 16" in err and len(err.splitlines()) == 1


def test_unknown_symbol_names_its_line(q8, tmp_path, capsys):
    f = tmp_path / "in.txt"
    f.write_text("i\nj\nq\n")
    assert main(["run", str(q8), "--input-file", str(f)]) == 2
    assert "line 3 of" in capsys.readouterr().err


def test_stdin_streams_chunks_before_a_bad_line(q8, capsys, monkeypatch):
    monkeypatch.setattr(run_command, "RUN_CHUNK_LINES", 2)
    monkeypatch.setattr(sys, "stdin", io.StringIO("i\nj\nk\nq\n"))
    assert main(["run", str(q8), "--input-file", "-"]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == ["i", "j"]  # the first chunk was printed before the bad line was read
    assert "line 4 of '-'" in err and "unknown symbol 'q'" in err


def test_endless_line_is_refused_with_bounded_memory(q8):
    """``--input-file /dev/zero`` (no line break ever): exit 2 quickly, one error line, small RSS."""
    code = ("import resource, sys\nfrom compiler.cli import main\n"
            "try:\n    status = main(sys.argv[1:])\n"
            "finally:\n    print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(status)\n")
    r = subprocess.run([sys.executable, "-c", code, "run", str(q8), "--input-file", "/dev/zero"],
                       capture_output=True, text=True, timeout=DEV_ZERO_SECONDS)
    assert r.returncode == 2 and r.stdout == ""
    errors = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and "line 1 of '/dev/zero'" in errors[0] and "without a line break" in errors[0]
    rss = int(next(x for x in r.stderr.splitlines() if x.startswith("maxrss")).split()[1])
    assert rss < DEV_ZERO_MAX_RSS_KB
