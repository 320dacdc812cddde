"""Shared bits of the benchmark scripts: a header naming the machine."""

from __future__ import annotations

import os
import platform

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
