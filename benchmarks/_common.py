"""Shared bits of the benchmark scripts: a header naming the machine, a footer writing the table, and
the standard-shape measurements (compile or refusal, size, certificate) both paper tables take."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import torch

import compiler
from compiler.automata.catalog import build
from compiler.automata.subregular_families import CLASSES, random_language
from verify.certify.certificate import certify


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = "load %.1f" % os.getloadavg()[0]
    except OSError:
        load = "load ?"
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"{cpu}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads, {load}, {gpu}; "
            f"torch {torch.__version__}, Python {platform.python_version()}")


def header(title: str) -> str:
    return f"# {title}\n\nMachine: {machine()}."


def emit(lines: list[str], row: str) -> None:
    """Print a table row as soon as it is measured and keep it for :func:`finish`."""
    print(row, flush=True)
    lines.append(row)


def finish(lines: list[str], t_start: float, out: str | None, note: str = "") -> str:
    """Append the total time (and ``note``), write the table to ``out`` when given, return its text."""
    lines.append(f"\nTotal {time.perf_counter() - t_start:.0f} s.{note}")
    text = "\n".join(lines) + "\n"
    if out:
        Path(out).write_text(text)
    return text


def automaton(name: str):
    """The catalog automaton ``name``, or for ``CLASS:k=K,letters=L,seed=S`` (CLASS one of the
    subregular classes, e.g. ``plt``) that generated language (``random_language``)."""
    cls, _, rest = name.partition(":")
    if cls in CLASSES and "=" in rest:
        return random_language(cls, **{k: int(v) for k, v in (a.split("=", 1) for a in rest.split(","))})
    return build(name)


def compile_or_refusal(name: str, method: str, T: int, shape: str):
    """The model of ``name`` at max_len ``T`` in ``shape``, or the refusal's text."""
    try:
        return compiler.compile_automaton(automaton(name), max_len=T, method=method, shape=shape)
    except compiler.ShortcutError as e:
        return f"refused: {e}"


def size(model) -> tuple[int, int]:
    """(blocks, parameters) of a compiled model."""
    return len(model.blocks), sum(p.numel() for p in model.parameters())


def certified(model) -> tuple[str, float]:
    """("yes" or "no: reason", seconds) of ``verify.certify`` on ``model``."""
    t0 = time.perf_counter()
    cert = certify(model)
    return ("yes" if cert.certified else f"no: {(cert.reason or '')[:90]}"), time.perf_counter() - t0
