"""Certificates: which models are proved exact, how long the proof takes, and what it saves.

Seven parts, in one run:

* the paper's 19 automata as ``auto`` compiles them, at T = 100 and 1024: certified, or why not
  (the construction declares no obligations yet), and the checker's time;
* the same 19 forced to the scan (Theorem 10, certified for every automaton), at 100 and 1024;
* one model of each certified construction at T = 4096 (and the rare-suffix KMP automaton of
  the soundness tests at 1024): seconds and peak memory of ``shortcut certify`` in a process;
* ``shortcut compile`` (its default verification: the certificate first) of the 19 at T = 100,
  each a new process -- the issue's "compile + default verify" time (most of it is each process
  importing torch: the torch import alone is timed beside it);
* the same 19 in one process, ``shortcut zoo examples/zoo-paper.toml`` (compile, certify,
  cross-check and save each, with their traces);
* ``shortcut verify`` on the 19 ``auto`` models at T = 100, each a new process: with the
  certificate first (the default; a small sampled cross-check when it holds) and without it
  (``--no-certify``, the old sampling); and the same on certified models (scans and lookbacks),
  where the certificate replaces most of the sampling;
* bounded stacks (``dyck-legal:n,k`` under the promise of legal inputs, ``dyck:n,k`` with its
  error sink) at 100 .. 4096: ``shortcut certify`` in a process, seconds and peak memory;
* label readouts (``benchmarks/label_readout.py``'s 13 labelled automata) at T = 256 and 1024,
  and ``dyck:4,2``'s accept/reject at 4096: which are certified (their readout's form and where
  a lookup sits), or why not;
* one model of every construction and of every label readout form at T = 256 and 1024;
* the rare suffix through the CLI: a 20-letter word's state read out wrong (its bias lowered by
  the readout margin + 1/2), then ``shortcut certify`` and ``shortcut verify --seed 1`` .. ``8``.

    python benchmarks/certify.py --out benchmarks/results/certify.md
    python benchmarks/certify.py --parts verify-certified     # one part only
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from compiler.automata.catalog import paper_suite
from compiler.automata.load import load_spec
from compiler.pipeline import compile_automaton
from constructions.checkpoint import load, save
from verify.certify import certify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, finish, header  # noqa: E402
from label_readout import examples as label_examples  # noqa: E402

CERTIFIED = [("symmetric:5", "scan", 256), ("quaternion", "scan", 1024), ("regex:(a|b)*abbabaabab", "scan", 256),
             ("nth-last:6", "lookback", 1024), ("symmetric:4", "krohn-rhodes", 256),
             ("cyclic-product:2,2,2", "krohn-rhodes", 1024)]
PARTS = ("paper", "long", "compile-paper", "zoo-paper", "verify-paper", "verify-certified", "stack", "labels", "each",
         "rare")
LONG = [("symmetric:5", "scan", 4096), ("quaternion", "scan", 4096), ("nth-last:6", "lookback", 4096),
        ("regex:ab(a|b)*ba", "lookback", 4096), ("regex:(a|b)*abbabaabbabaabbbabab", "scan", 1024),
        ("parity", "krohn-rhodes", 4096), ("cyclic:3", "krohn-rhodes", 4096), ("symmetric:4", "krohn-rhodes", 4096),
        ("cyclic-product:2,3", "product", 4096), ("memory:3", "local", 4096), ("adder:2", "local", 1024),
        ("adder:2", "local", 2048),
        ("grid:4", "gridworld", 256), ("grid:9", "gridworld", 1024), ("grid2d:3,4", "gridworld", 1024),
        ("grid:9", "gridworld", 1400), ("grid:9", "gridworld", 4096), ("grid2d:3,4", "gridworld", 4096)]


STACK = [("dyck-legal:4,2", 100), ("dyck-legal:4,2", 1024), ("dyck-legal:4,2", 4096), ("dyck-legal:2,3", 100),
         ("dyck-legal:2,3", 1024), ("dyck-legal:3,2", 100), ("dyck-legal:3,2", 1024), ("dyck:2,2", 256),
         ("dyck:2,2", 1024), ("dyck:4,2", 100), ("dyck:4,2", 256), ("dyck:4,2", 1024), ("dyck:4,2", 4096)]
"""Bounded stacks (both variants: the paper's Dyck under the promise, and the error sink)."""


def _model(spec: str, T: int, method: str):
    alphabet = ["a", "b"] if spec.startswith("regex:") else None
    promise = "legal" if spec.startswith("dyck-legal") else None
    return compile_automaton(load_spec(spec, alphabet=alphabet, promise=promise), max_len=T, method=method)


def _timed(cmd: list[str]) -> tuple[int, float, float, str]:
    """Exit status, seconds, peak resident GB and the last stdout line of a new process."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    kb = re.findall(r"^(\d+)$", p.stderr, re.MULTILINE)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    return p.returncode, time.perf_counter() - t, int(kb[-1]) / 2**20 if kb else float("nan"), last


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--lengths", default="100,1024")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {PARTS}")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    start = time.perf_counter()
    lines = [header("Certificates: what is proved exact, and how fast"), ""]
    for method in ("auto", "scan") if "paper" in parts else ():
        for T in (int(x) for x in args.lengths.split(",")):
            emit(lines, f"\n## The paper's 19 automata, `--method {method}`, T = {T}\n")
            emit(lines, "| spec | method | layers | certified | checker s | program proof s (pairs) | readout margin / "
                        "why not |")
            emit(lines, "|---|---|---|---|---|---|---|")
            total, n_ok, in_program = 0.0, 0, 0.0
            for spec in paper_suite():
                model = _model(spec, T, method)
                cert = certify(model)
                total += cert.seconds
                n_ok += cert.certified
                program = cert.program or {}
                in_program += program.get("seconds", 0.0)
                why = (f"{cert.readout['min_margin']:.4g}" if cert.certified else cert.reason[:90])
                emit(lines, f"| `{spec}` | {model.meta['method']} | {len(model.blocks)} | {cert.certified} | "
                            f"{cert.seconds:.2f} | {program.get('seconds', 0.0):.3f} ({program.get('pairs', '-')}) "
                            f"| {why} |")
            emit(lines, f"\n{n_ok} of 19 certified end to end; checker time {total:.1f} s in all, of which the "
                        f"program proof (the program against the automaton) {in_program:.2f} s.")
    with tempfile.TemporaryDirectory() as tmp:
        if "long" in parts:
            _long(lines, tmp)
        if "compile-paper" in parts:
            _compile_rows(lines, tmp)
        if "zoo-paper" in parts:
            _zoo_row(lines, tmp)
        if "verify-paper" in parts:
            _verify_rows(lines, tmp, "the 19 `auto` models at T = 100", [(s, "auto", 100) for s in paper_suite()])
        if "verify-certified" in parts:
            _verify_rows(lines, tmp, "certified models", CERTIFIED)
        if "stack" in parts:
            _stack_rows(lines, tmp)
    if "labels" in parts:
        _label_rows(lines)
    if "each" in parts:
        _each_rows(lines)
    if "rare" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            _rare_rows(lines, tmp)
    print(finish(lines, start, args.out))


def _long(lines: list[str], tmp: str) -> None:
    emit(lines, "\n## One model per certified construction, `shortcut certify` in a new process\n")
    emit(lines, "| spec | method | T | exit | seconds | peak GB | verdict |")
    emit(lines, "|---|---|---|---|---|---|---|")
    for spec, method, T in LONG:
        path = Path(tmp) / "long.safetensors"
        save(_model(spec, T, method), path)
        rc, s, gb, last = _timed(["shortcut", "certify", str(path)])
        emit(lines, f"| `{spec}` | {method} | {T} | {rc} | {s:.1f} | {gb:.2f} | {last.split(': ', 1)[-1][:80]} |")


def _stack_rows(lines: list[str], tmp: str) -> None:
    """``shortcut certify`` of bounded stacks (verify/latest.py's heads), each a new process."""
    emit(lines, "\n## Bounded stacks, `shortcut certify` in a new process\n")
    emit(lines, "| spec | T | layers | prefix blocks | exit | process s | checker s | peak GB | verdict |")
    emit(lines, "|---|---|---|---|---|---|---|---|---|")
    for spec, T in STACK:
        path = Path(tmp) / "stack.safetensors"
        model = _model(spec, T, "bounded-stack")
        save(model, path)
        rc, s, gb, last = _timed(["shortcut", "certify", str(path)])
        checker = re.findall(r", ([0-9.]+) s\)", last)
        blocks = model.meta["bounded-stack"]["prefix_blocks"][0]
        emit(lines, f"| `{spec}` | {T} | {len(model.blocks)} | {blocks} | {rc} | {s:.1f} | "
                    f"{checker[-1] if checker else '-'} | {gb:.2f} | {last.split(': ', 1)[-1][:60]} |")


def _cpu_timed(cmd: list[str]) -> tuple[int, float, float, str]:
    """Exit status, wall seconds, CPU seconds (user + system) and the last stdout line of a new process."""
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%U %S", *cmd], capture_output=True, text=True)
    cpu = re.findall(r"^([\d.]+) ([\d.]+)$", p.stderr, re.MULTILINE)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    return p.returncode, time.perf_counter() - t, sum(map(float, cpu[-1])) if cpu else float("nan"), last


def _compile_rows(lines: list[str], tmp: str) -> None:
    """``shortcut compile`` of the 19 at T = 100 with its default verification, each a new process,
    each beside a bare ``import torch`` process timed just before it (the same load on both); wall
    and CPU seconds (CPU time: less inflated than wall time when other work shares the machine)."""
    emit(lines, "\n## `shortcut compile` (default verification) of the 19 at T = 100, each a new process\n")
    emit(lines, "| spec | exit | seconds | CPU s | bare `import torch` (s) | its CPU s | verification line |")
    emit(lines, "|---|---|---|---|---|---|---|")
    total = torch_total = cpu_total = torch_cpu = 0.0
    for spec in paper_suite():
        _, torch_s, torch_c, _ = _cpu_timed([sys.executable, "-c", "import torch"])
        rc, s, c, last = _cpu_timed(["shortcut", "compile", spec, "--max-len", "100", "-o",
                                     str(Path(tmp) / "c.safetensors")])
        total, torch_total, cpu_total, torch_cpu = total + s, torch_total + torch_s, cpu_total + c, torch_cpu + torch_c
        emit(lines, f"| `{spec}` | {rc} | {s:.1f} | {c:.1f} | {torch_s:.2f} | {torch_c:.2f} | {last.strip()[:90]} |")
    emit(lines, f"\nTotal: {total:.0f} s for the 19 processes; 19 bare `import torch` processes: {torch_total:.0f} s; "
                f"beyond them: {total - torch_total:.0f} s. CPU: {cpu_total:.0f} s against {torch_cpu:.0f} s, "
                f"beyond them {cpu_total - torch_cpu:.0f} s.")


def _zoo_row(lines: list[str], tmp: str) -> None:
    """The 19 in one ``shortcut zoo`` process: what start-up costs the per-process row above."""
    config = Path(__file__).resolve().parents[1] / "examples" / "zoo-paper.toml"
    out = Path(tmp) / "zoo-paper"
    rc, s, gb, _ = _timed(["shortcut", "zoo", str(config), "-o", str(out), "--workers", "1"])
    records = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    n = sum(bool(r["verification"] and r["verification"]["certified"]) for r in records)
    emit(lines, f"\n`shortcut zoo examples/zoo-paper.toml` (the 19 at T = 100, one process, 1 worker): exit {rc}, "
                f"{s:.1f} s, peak {gb:.2f} GB; {n} of {len(records)} certified.")


def _verify_rows(lines: list[str], tmp: str, title: str, models: list[tuple[str, str, int]]) -> None:
    """``shortcut verify`` with the certificate first (the default) and with ``--no-certify``."""
    emit(lines, f"\n## `shortcut verify` on {title}, each a new process\n")
    emit(lines, "| spec | method | T | certify + cross-check s | exit | `--no-certify` s | exit |")
    emit(lines, "|---|---|---|---|---|---|---|")
    sums = [0.0, 0.0]
    for spec, method, T in models:
        path = Path(tmp) / "m.safetensors"
        model = _model(spec, T, method)
        save(model, path)
        rc1, s1, _, _ = _timed(["shortcut", "verify", str(path)])
        rc2, s2, _, _ = _timed(["shortcut", "verify", "--no-certify", str(path)])
        sums[0] += s1
        sums[1] += s2
        emit(lines, f"| `{spec}` | {model.meta['method']} | {T} | {s1:.1f} | {rc1} | {s2:.1f} | {rc2} |")
    emit(lines, f"\nSum: {sums[0]:.0f} s with the certificate, {sums[1]:.0f} s without (ratio {sums[0] / sums[1]:.2f}).")


EACH = [("symmetric:5", "scan", None), ("quaternion", "krohn-rhodes", None), ("grid:9", "gridworld", None),
        ("nth-last:6", "lookback", None), ("adder:2", "local", None), ("dyck:4,2", "bounded-stack", None),
        ("cyclic-product:2,3", "product", None),
        ("symmetric:5", "scan", ("s[0] < s[1]: a lookup fused after the composition",
                                 lambda s: "lt" if s[0] < s[1] else "ge")),
        ("grid:6", "gridworld", ("at a wall: a lookup fused after the races", lambda s: "wall" if s in ("0", "5")
                                 else "inside")),
        ("dyck:4,2", "bounded-stack", ("accept: a lookup beside the last MLP", None)),
        ("dihedral:4", "krohn-rhodes", ("last letter: labels in the unembedding", lambda s: s[-1]))]
"""One model of every construction, then one of every label readout form: (spec, method, None or
(what the labels are, the label of each state; None: the spec's own outputs))."""


def _each_rows(lines: list[str]) -> None:
    """``certify`` of :data:`EACH` at T = 256 and 1024, in this process."""
    emit(lines, "\n## One model of every construction and label readout form, `certify` in one process\n")
    emit(lines, "| model | method | T | certified | checker s | margin / why not |")
    emit(lines, "|---|---|---|---|---|---|")
    for spec, method, labels in EACH:
        a = load_spec(spec)
        if labels is not None and labels[1] is not None:
            a = dataclasses.replace(a, outputs=tuple(labels[1](q) for q in a.states))
        name = spec if labels is None else f"{spec}, {labels[0]}"
        for T in (256, 1024):
            model = compile_automaton(a, max_len=T, method=method, readout="states" if labels is None else "labels")
            cert = certify(model)
            why = f"{cert.readout['min_margin']:.4g}" if cert.certified else cert.reason[:90]
            emit(lines, f"| {name} | {model.meta['method']} | {T} | {cert.certified} | {cert.seconds:.2f} | "
                        f"{why} |")


RARE_WORD = "abbabaabbabaabbbabab"


def _rare_rows(lines: list[str], tmp: str) -> None:
    """The rare suffix, through the CLI: compile, read the word's state out wrong, certify, verify."""
    good, bad = Path(tmp) / "rare.safetensors", Path(tmp) / "rare_bad.safetensors"
    rc, s, _, last = _timed(["shortcut", "compile", f"regex:(a|b)*{RARE_WORD}", "--alphabet", "a,b", "--max-len", "256",
                             "-o", str(good)])
    emit(lines, f"\n## The rare suffix `{RARE_WORD}` at T = 256, through the CLI\n")
    emit(lines, f"`shortcut compile`: exit {rc}, {s:.1f} s; {last.strip()[:120]}")
    model = load(good)
    q = model.automaton.run([0 if c == "a" else 1 for c in RARE_WORD])[-1]
    margin = model.meta["verification"]["certificate"]["readout"]["min_margin"]
    with torch.no_grad():
        model.b_U[q] -= margin + 0.5
    model.meta = {k: v for k, v in model.meta.items() if k != "verification"}
    save(model, bad)
    emit(lines, f"\nThe word's state {model.automaton.states[q]!r}: its bias lowered by {margin + 0.5:.4g}.\n")
    emit(lines, "| command | exit | last line |")
    emit(lines, "|---|---|---|")
    for cmd in [["certify"]] * 3 + [["verify", "--seed", str(k)] for k in range(1, 9)]:
        rc, s, _, last = _timed(["shortcut", *cmd, str(bad)])
        emit(lines, f"| `shortcut {' '.join(cmd)}` | {rc} | {last.strip()[:110].replace('|', chr(92) + '|')} |")


def _label_rows(lines: list[str]) -> None:
    """``certify`` of label readouts in this process (the checker's own seconds)."""
    emit(lines, "\n## Label readouts (`benchmarks/label_readout.py`'s automata), `certify` in one process\n")
    emit(lines, "| automaton, label | T | method | readout | lookup placed | certified | checker s | margin / why not |")
    emit(lines, "|---|---|---|---|---|---|---|---|")
    cases = [(desc, a, T) for desc, a in label_examples() for T in (256, 1024)]
    cases += [(desc, a, 4096) for desc, a in label_examples() if desc.startswith("dyck:")]
    n_ok = 0
    for desc, a, T in cases:
        model = compile_automaton(a, max_len=T, readout="labels")
        r = model.meta["readout"]
        cert = certify(model)
        n_ok += cert.certified
        why = f"{cert.readout['min_margin']:.4g}" if cert.certified else cert.reason[:90]
        emit(lines, f"| {desc} | {T} | {model.meta['method']} | {r.get('form')} | "
                    f"{(r.get('notes') or {}).get('placed') or '-'} | {cert.certified} | {cert.seconds:.2f} | "
                    f"{why} |")
    emit(lines, f"\n{n_ok} of {len(cases)} certified.")


if __name__ == "__main__":
    main()

