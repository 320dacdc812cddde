"""Shared helpers for the CLI tests: a checkpoint's safetensors header, read and rewritten.

The format is an 8-byte little-endian header length, the JSON header (tensor entries with
byte ranges relative to the data section, and ``__metadata__`` with the ``config`` and
``meta`` JSON strings), then the data; rewriting the header leaves the data untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

# As the CLI does (compiler/command.py): torch on one thread unless the environment says
# otherwise.  Set before any test module loads torch; the models' matrices are small, and a
# second BLAS thread on CI's two cores stalls (benchmarks/results/threads.md).
os.environ.setdefault("OMP_NUM_THREADS", "1")


def read_header(data: bytes) -> tuple[dict[str, Any], bytes]:
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def write_header(header: dict[str, Any], body: bytes) -> bytes:
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + body


def edit_meta(src: Path, dst: Path, change: Callable[[dict[str, Any]], None], key: str = "meta") -> Path:
    """Copy checkpoint ``src`` to ``dst`` with ``change`` applied to its ``meta`` (or ``config``) JSON."""
    header, body = read_header(src.read_bytes())
    obj = json.loads(header["__metadata__"][key])
    change(obj)
    header["__metadata__"][key] = json.dumps(obj)
    dst.write_bytes(write_header(header, body))
    return dst


def tensor_offset(src: Path, name: str) -> int:
    """File offset of tensor ``name``'s first byte."""
    data = src.read_bytes()
    header, _ = read_header(data)
    return 8 + int.from_bytes(data[:8], "little") + header[name]["data_offsets"][0]


@pytest.fixture(scope="session")
def checkpoint_tools():
    """The helpers above, for tests in any module."""
    return {"read_header": read_header, "write_header": write_header, "edit_meta": edit_meta,
            "tensor_offset": tensor_offset}


def _perturbation_sweep(model, errors: Callable[[Any], int], seed: int = 0, rounds: int = 60,
                        skip: tuple[str, ...] = ()) -> dict[str, int]:
    """The certificate's random-perturbation sweep: ``rounds`` times, add noise of relative size
    1e-7 .. 1e-1 to 1-3 random entries of one random tensor (not those in ``skip``); whenever the
    certificate passes, ``errors(model)`` (an exhaustive check) must find none.  Restores the
    weights and returns how often it certified and refused."""
    import numpy as np  # here, not at the top: torch must load after OMP_NUM_THREADS is set (above)
    import torch

    from verify.certify import certify

    state = {k: v.clone() for k, v in model.state_dict().items()}
    names = [k for k, v in state.items() if v.numel() and k not in skip]
    rng = np.random.default_rng(seed)
    outcomes = {"certified": 0, "refused": 0}
    for _ in range(rounds):
        model.load_state_dict(state)
        name = names[rng.integers(len(names))]
        flat = model.state_dict()[name].view(-1)
        idx = torch.from_numpy(rng.integers(flat.numel(), size=int(rng.integers(1, 4))))
        scale = 10.0 ** rng.uniform(-7, -1)
        with torch.no_grad():
            noise = torch.from_numpy(rng.standard_normal(len(idx))).to(flat.dtype)
            flat[idx] += float(scale) * (flat.abs().max() + 1) * noise
        cert = certify(model)
        if cert.certified or cert.weights_proved:  # the weights proved (a gridworld's program is not yet)
            outcomes["certified"] += 1
            assert errors(model) == 0, f"certified but wrong: {name}[{idx.tolist()}] scale {scale:.2g}"
        else:
            outcomes["refused"] += 1
    model.load_state_dict(state)
    return outcomes


@pytest.fixture
def gridworld_blocks(monkeypatch):
    """``split(count)``: gridworld models built while it is in force split layer 1's prefix sum into
    ``count`` position blocks at any max_len (what max_len > 1294 does), small enough to check on
    every input; the obligations a certificate reads see the same split."""
    import math

    from constructions import gridworld
    from constructions import krohn_rhodes_layout as layout

    def split(count: int) -> None:
        def blocks(max_len: int) -> Any:
            L = -(-max_len // count)
            return layout.CounterBlocks(-(-max_len // L), L, math.log(3 / layout.CERTIFIED_EPS))
        monkeypatch.setattr(gridworld, "prefix_blocks", blocks)
    return split


@pytest.fixture(scope="session")
def perturbation_sweep():
    """:func:`_perturbation_sweep`, for the certificate's soundness sweeps (tests/verify)."""
    return _perturbation_sweep


REQUIRE_EXTRAS = "SHORTCUT_REQUIRE_EXTRAS"
"""Set to 1 by the README's integration commands: there a skipped test (an extra that did not
import) fails the run, so those tests execute or CI says why not."""
_skipped: list[str] = []


def _note_skip(report: pytest.CollectReport | pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(f"{report.nodeid}: {report.longrepr}")


pytest_collectreport = _note_skip
pytest_runtest_logreport = _note_skip


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With :data:`REQUIRE_EXTRAS` set, any skip fails the session (exit status 1)."""
    if os.environ.get(REQUIRE_EXTRAS) == "1" and _skipped:
        print(f"\n{REQUIRE_EXTRAS}=1 but {len(_skipped)} skipped:", *_skipped, sep="\n  ")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _factor_language(n_letters: int, k: int, threshold: int, factors: list[tuple[int, ...]],
                     accept: Callable[[tuple[int, ...]], bool], name: str = "factors") -> Any:
    """The minimal accept/reject automaton of {w : accept(capped counts)}: the counts of ``factors``
    (k codes each, letters 1..n_letters, 0 the pad before the start) in the text 0^(k-1) w, capped
    at ``threshold`` -- a locally threshold testable language built from its definition, tracked by
    the longest suffix that begins a factor (so 64 letters and k = 6 stay small)."""
    from compiler.automata.load import from_dict
    from compiler.automata.moore import minimise

    prefixes = {f[:i] for f in factors for i in range(k + 1)}

    def push(node: tuple[int, ...], c: int) -> tuple[int, ...]:
        x = node + (c,)
        while x not in prefixes:
            x = x[1:]
        return x
    node0: tuple[int, ...] = ()
    for _ in range(k - 1):
        node0 = push(node0, 0)
    start = (node0, (0,) * len(factors))
    index, todo, trans = {start: 0}, [start], {}
    while todo:
        node, counts = todo.pop()
        for a in range(1, n_letters + 1):
            nxt = push(node, a)
            c = tuple(min(threshold, v + (f == nxt[-k:] and len(nxt) >= k)) for f, v in zip(factors, counts))
            new = (nxt, c)
            if new not in index:
                index[new] = len(index)
                todo.append(new)
            trans.setdefault(str(index[(node, counts)]), {})[f"x{a}"] = str(index[new])
    outputs = {str(i): "accept" if accept(s[1]) else "reject" for s, i in index.items()}
    spec = {"name": name, "states": [str(i) for i in range(len(index))],
            "alphabet": [f"x{a}" for a in range(1, n_letters + 1)], "start": "0", "transitions": trans,
            "outputs": outputs}
    return minimise(from_dict(spec)).quotient


@pytest.fixture(scope="session")
def factor_language():
    """:func:`_factor_language`: locally threshold testable automata from their definitions."""
    return _factor_language


def _declared_then_refused(model, build: Callable, corrupt: Callable[[], Any]) -> str:
    """One declaration: ``model`` is certified end to end against the obligations its program
    declares (``build`` again on the checkpoint's spec and plan); then ``corrupt()`` compiles it
    with one entry of its plan changed (weights and declaration alike), which the program proof
    refuses, naming an input the corrupted model gets wrong (returned)."""
    from constructions import registry  # here, not at the top (as above)
    from constructions.construction import BuildOptions
    from verify.certify import certify

    cert = certify(model)
    assert cert.certified is True and cert.program["proved"] is True, cert.reason
    program, _ = build(model.automaton, registry.plan_of(model)[1], BuildOptions.of_model(model))
    assert cert.obligations_sha256 == program.obligations().digest()
    wrong = corrupt()
    cert = certify(wrong)
    assert cert.certified is False and cert.failure["where"] == "program", cert.failure
    word = cert.failure["detail"].split("'")[1].split()
    a = wrong.automaton
    assert wrong.simulate([word])[0] != [a.states[q] for q in a.run([a.alphabet.index(x) for x in word])]
    return " ".join(word)


@pytest.fixture(scope="session")
def declared_then_refused():
    """:func:`_declared_then_refused`, for each construction's one-declaration test."""
    return _declared_then_refused
