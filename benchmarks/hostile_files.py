"""Hostile files (issue 42): each case of the issue run as ``python -m compiler ...`` under the
limits the issue sets (2 GiB of address space, 30 s), with its exit status, wall time, peak
CPU time, resident memory (``/usr/bin/time``) and the last line it printed on stderr.

A case killed by the limits shows exit ``killed`` (time) or a MemoryError's exit; the issue's
unbounded numbers were measured without limits.  The checkpoints, specs, configs and records
are made in a temporary directory first (compiling two small models, a few seconds).

    python benchmarks/hostile_files.py --out benchmarks/results/hostile_files.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LIMIT_AS, LIMIT_S = 2 << 30, 30


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_AS, LIMIT_AS))


def measure(argv: list[str]) -> tuple[str, float, float, float, str]:
    """(exit, seconds, CPU seconds, peak GB, last stderr line) of ``python -m compiler argv`` under
    the limits (the CPU seconds, user and system, say what a loaded machine's wall time hides)."""
    with tempfile.NamedTemporaryFile() as stats:
        cmd = ["/usr/bin/time", "-f", "%e %U %S %M", "-o", stats.name, sys.executable, "-m", "compiler", *argv]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_limits, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=LIMIT_S)
            code = str(proc.returncode)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            code = "killed"
        took = time.perf_counter() - t
        fields = Path(stats.name).read_text().split()
        peak = int(fields[-1]) / 2**20 if fields and fields[-1].isdigit() else float("nan")
        cpu = float(fields[-3]) + float(fields[-2]) if len(fields) >= 4 and fields[-1].isdigit() else float("nan")
    lines = [x for x in err.splitlines() if x.strip()]
    first = (lines[-1] if code != "killed" and lines else "") [:110]
    return code, took, cpu, peak, f"{first} ({len(lines)} lines)" if len(lines) > 1 else first


def _edit(src: Path, dst: Path, change, key: str = "meta") -> Path:
    data = src.read_bytes()
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8:8 + n])
    obj = json.loads(head["__metadata__"][key])
    change(obj)
    head["__metadata__"][key] = json.dumps(obj)
    text = json.dumps(head).encode()
    text += b" " * (-len(text) % 8)
    dst.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n:])
    return dst


def cases(d: Path) -> list[tuple[str, list[str]]]:
    """The issue's cases (name, argv), their files made in ``d``."""
    sh = lambda *a: subprocess.run([sys.executable, "-m", "compiler", *a], check=False, capture_output=True,  # noqa: E731
                                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    q = d / "q.safetensors"
    sh("compile", "quaternion", "--method", "krohn-rhodes", "--max-len", "16", "-o", str(q))
    p = d / "p.safetensors"
    sh("compile", "parity", "--max-len", "16", "-o", str(p))
    nodigest = _edit(q, d / "nodigest.safetensors", lambda m: m.pop("header_sha256"))
    cert = d / "cert.json"
    sh("certify", str(p), "-o", str(cert))
    good = json.loads(cert.read_text())
    for name, change in (("one", {"certified": 1}), ("float", {"max_len": 16.0})):
        (d / f"cert_{name}.json").write_text(json.dumps({**good, **change}))
    (d / "cert_dup.json").write_text(json.dumps(good)[:-1] + ', "certified": true}')
    (d / "nest.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    (d / "deep.json").write_text("[" * 10_000_000)
    (d / "bigint.json").write_text('{"max_len": ' + "9" * 5000 + "}")
    os.mkfifo(d / "fifo")
    n = 4090
    (d / "cycle_reset.json").write_text(json.dumps([[(q_ + 1) % n, 0] for q_ in range(n)]))
    dot = ["digraph g {", "__start0 [shape=none];", "__start0 -> s0;"]
    dot += [f's{i} -> s{(i + 1) % 3000} [label="a"];\ns{i} -> s0 [label="b"];' for i in range(3000)]
    (d / "big.dot").write_text("\n".join(dot + ["}"]))
    np.savez_compressed(d / "bomb.npz", table=np.zeros((17000, 17000), dtype=np.int64))
    np.savez(d / "u64.npz", table=np.array([[1, 2**64 - 1], [0, 1]], dtype=np.uint64))
    (d / "zoo_deep.json").write_text('{"seed": ' + "[" * 5000 + "]" * 5000 + "}")
    (d / "zoo_seed.toml").write_text("seed = " + "9" * 5000 + "\n")
    (d / "t.json").write_text("[[1, 0], [0, 1]]")
    spec = {"name": "bos", "states": ["0", "1"], "alphabet": ["BOS", "<unk>"], "start": "0",
            "transitions": {"0": {"BOS": "1", "<unk>": "0"}, "1": {"BOS": "0", "<unk>": "1"}}}
    (d / "bos.json").write_text(json.dumps(spec))
    bos = d / "bos.safetensors"
    sh("compile", str(d / "bos.json"), "--max-len", "8", "-o", str(bos), "--no-verify")
    regex_alts = "regex:" + "|".join(["ab"] * 20_000)
    return [
        ("certify, no header digest", ["certify", str(nodigest)]),
        ("info, no header digest", ["info", str(nodigest)]),
        ("certify --check certified: 1", ["certify", str(p), "--check", str(d / "cert_one.json")]),
        ("certify --check max_len: 16.0", ["certify", str(p), "--check", str(d / "cert_float.json")]),
        ("certify --check duplicate key", ["certify", str(p), "--check", str(d / "cert_dup.json")]),
        ("certify --check /dev/zero", ["certify", str(p), "--check", "/dev/zero"]),
        ("certify --check FIFO", ["certify", str(p), "--check", str(d / "fifo")]),
        ("certify --check 100,000 {", ["certify", str(p), "--check", str(d / "nest.json")]),
        ("certify --check 10^7 [", ["certify", str(p), "--check", str(d / "deep.json")]),
        ("certify --check 5,000-digit max_len", ["certify", str(p), "--check", str(d / "bigint.json")]),
        ("plan regex (a|b){999999999}", ["plan", "regex:(a|b){999999999}"]),
        ("plan regex 20,000 alternatives", ["plan", regex_alts]),
        ("plan regex a + 5,000 *", ["plan", "regex:a" + "*" * 5000]),
        ("plan regex (a|b){1000}", ["plan", "regex:(a|b){1000}"]),
        ("plan 17000x17000 .npz", ["plan", str(d / "bomb.npz")]),
        ("plan uint64 cell 2^64-1 --complete", ["plan", str(d / "u64.npz"), "--complete"]),
        ("plan 4,090-state cycle-and-reset", ["plan", str(d / "cycle_reset.json")]),
        ("plan 3,000-state DOT", ["plan", str(d / "big.dot")]),
        ("run --sep 100,000 chars /dev/zero", ["run", str(p), "--sep", "x" * 100_000, "--input-file", "/dev/zero"]),
        ("compile parity max_len 100,000", ["compile", "parity", "--max-len", "100000", "-o", str(d / "long.st"),
                                            "--no-verify"]),
        ("certify parity max_len 100,000", ["certify", str(d / "long.st")]),
        ("zoo config nested 5,000", ["zoo", str(d / "zoo_deep.json"), "-o", str(d / "z1")]),
        ("zoo config 5,000-digit seed", ["zoo", str(d / "zoo_seed.toml"), "-o", str(d / "z2")]),
        ("export letters BOS, <unk>", ["export", str(bos), "-o", str(d / "exp")]),
        ("certify M -o M", ["certify", str(p), "-o", str(p)]),
        ("compile t.json -o t.json", ["compile", str(d / "t.json"), "-o", str(d / "t.json"), "--no-verify"]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the table (Markdown) here")
    ap.add_argument("--only", help="run the cases whose name contains this")
    args = ap.parse_args()
    t0 = time.perf_counter()
    lines = [header("Hostile files (issue 42), each under 2 GiB of address space and 30 s"), "",
             "| case | exit | wall s | cpu s | peak GB | last stderr line |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in cases(Path(tmp)):
            if args.only and args.only not in name:
                continue
            code, took, cpu, peak, line = measure(argv)
            emit(lines, f"| {name} | {code} | {took:.1f} | {cpu:.1f} | {peak:.2f} | {line.replace('|', '/')} |")
    print(finish(lines, t0, args.out))


if __name__ == "__main__":
    main()
