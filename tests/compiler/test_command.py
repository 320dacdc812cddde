"""First contact: ``--version`` and ``--help`` answered without loading torch, a hopeless
``--max-len`` refused before compiling with one line, and ``verify ... | head`` keeping exit 1."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import compiler
from compiler.automata.errors import BudgetError
from compiler.cli import compiling, main
from compiler.usage import COMMANDS
import verify.cost
from verify.cost import matmul_rate, refuse_hopeless


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_load_no_torch(flag):
    r = _python(f"""
        import sys
        from compiler.command import main
        try:
            main([{flag!r}])
        except SystemExit as e:
            print("exit", e.code, "torch" in sys.modules, "numpy" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "exit 0 False False"
    if flag == "--help":
        assert all(name in r.stdout for name in COMMANDS)


def test_no_command_is_one_line_exit_2_without_torch():
    r = _python("""
        import sys
        from compiler.command import main
        print("status", main(["--debug"]), "torch" in sys.modules)
    """)
    assert r.stdout.strip() == "status 2 False"
    assert r.stderr.startswith("error:") and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("env, threads", [(None, 1), ("2", 2)])
def test_a_command_runs_torch_on_one_thread_unless_omp_num_threads_says(env, threads):
    r = _python(f"""
        import os
        os.environ.pop("OMP_NUM_THREADS", None)
        if {env!r} is not None:
            os.environ["OMP_NUM_THREADS"] = {env!r}
        from compiler.command import main
        main(["info", "/nonexistent.safetensors"])  # a command: torch loads (and the file is missing)
        import torch
        print("threads", torch.get_num_threads())
    """)
    assert r.stdout.splitlines()[-1] == f"threads {threads}", r.stderr


def test_the_top_level_help_lists_the_commands_the_full_parser_has(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert all(f"    {name}" in listed for name in COMMANDS)


def test_matmul_rate_is_a_positive_rate():
    assert 1e6 < matmul_rate() < 1e16


def test_refuse_hopeless_refuses_a_million_positions_and_passes_a_short_input():
    with pytest.raises(BudgetError, match="at least 20 attention layers.*--no-verify"):
        refuse_hopeless(20, 1 << 20, 60.0)
    refuse_hopeless(20, 1024, 60.0)  # 4e7 FLOP: no machine needs a minute


def test_hopeless_max_len_is_refused_before_compiling(tmp_path, capsys, monkeypatch):
    built = []
    monkeypatch.setattr(compiling, "compile_automaton", lambda *a, **k: built.append(a))
    # the refusal weighs a FLOP lower bound against the machine's measured matmul rate; pin the rate
    # (10 GFLOP/s, this 2-core machine's order) so the test does not depend on the load it runs under
    monkeypatch.setattr(verify.cost, "matmul_rate", lambda *a, **k: 1e10)
    out = tmp_path / "m.safetensors"
    assert main(["compile", "grid:5", "-o", str(out), "--max-len", "1048576"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: verifying one input of length 1048576") and len(err.strip().splitlines()) == 1
    assert not built and not out.exists()


def test_verify_piped_into_head_keeps_exit_1(tmp_path):
    model = compiler.compile_automaton("quaternion", max_len=16, method="scan")
    W = model.blocks[1].mlp.W_in
    with torch.no_grad():
        W.view(-1)[int(W.abs().argmax())] += 0.5  # one weight: no longer exact
    bad = tmp_path / "bad.safetensors"
    compiler.save(model, bad)
    verify = f"{sys.executable} -m compiler verify {bad} --no-certify --samples 2"
    for reader in ("head -c 1", "true"):
        r = subprocess.run(["bash", "-o", "pipefail", "-c", f"{verify} --json 2>/dev/null | {reader}"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 1, (reader, r.stderr)
