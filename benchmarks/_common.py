"""Shared bits of the benchmark scripts: a header naming the machine, a footer writing the table."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import torch


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
