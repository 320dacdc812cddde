"""Time a zoo run and its peak memory: ``shortcut zoo CONFIG -o DIR`` at several --limit values.

Each run starts in a fresh directory, as a subprocess (its CPU time, workers included, is
reported beside the wall time: on a shared machine the wall time depends on the load);
every 0.2 s the script sums the resident memory (``/proc/PID/status`` VmRSS) of the process
and all its descendants (the pool's workers) and keeps the peak of that sum and of the
largest single process, and the peak of the sum while the first 100 models were made.  Wall time is the
subprocess's.  Also checks that the manifest has one row per model.

    python benchmarks/zoo.py --config examples/zoo.toml --limits 100 200 0 --workers 2 \
        --out benchmarks/results/zoo.md          # 0: the whole config
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _common import emit, finish, header

POLL_S = 0.2
FIRST = 100
"""The run's peak memory is also reported while its first this-many models were being made."""


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc."""
    out: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return out


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss(root: int) -> tuple[int, int, list[int]]:
    """(sum, largest) resident KiB of ``root`` and its descendants, and each process's (largest
    first; a pool worker being replaced and its successor both count)."""
    kids, todo, seen = _children(), [root], []
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += kids.get(pid, [])
    sizes = [s for s in (_rss_kib(p) for p in seen) if s]
    return sum(sizes), max(sizes, default=0), sorted(sizes, reverse=True)


def run(config: str, limit: int, workers: int) -> dict:
    """One zoo run in a fresh directory: wall time, peak tree and single-process RSS, counts."""
    out = Path(tempfile.mkdtemp(prefix="zoo-bench-"))
    cmd = [sys.executable, "-m", "compiler", "zoo", config, "-o", str(out), "--workers", str(workers)]
    cmd += ["--limit", str(limit)] if limit else []
    cpu0 = sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f) for f in ("ru_utime", "ru_stime"))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak_sum = peak_one = peak_first = 0
    procs: list[int] = []
    records = out / "records"
    while proc.poll() is None:
        total, one, n = tree_rss(proc.pid)
        if total > peak_sum:
            peak_sum, procs = total, n
        peak_one = max(peak_one, one)
        if len(list(records.glob("*.json")) if records.is_dir() else []) < FIRST:
            peak_first = max(peak_first, total)
        time.sleep(POLL_S)
    wall = time.perf_counter() - start
    cpu = sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f) for f in ("ru_utime", "ru_stime")) - cpu0
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    shutil.rmtree(out)
    return {"rc": proc.returncode, "models": len(rows), "wall": wall, "cpu": cpu, "peak_sum": peak_sum,
            "peak_one": peak_one,
            "peak_first": peak_first, "procs": procs,
            "status": Counter(r["status"] for r in rows), "how": Counter(r["verification"]["how"] for r in rows
                                                                         if "verification" in r),
            "bytes": size}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="examples/zoo.toml")
    p.add_argument("--limits", type=int, nargs="+", default=[100, 200, 0], help="0: every model of the config")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", help="write the table (markdown) here")
    args = p.parse_args()
    t0 = time.perf_counter()
    lines = [header(f"shortcut zoo {args.config} --workers {args.workers}"), "",
             "| --limit | models | exit | wall | CPU s (all processes) | s / model | peak RSS, all processes (each then, MiB) "
             f"| of it, during the first {FIRST} models | peak RSS, largest process "
             "| status | verification | disk |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for limit in args.limits:
        r = run(args.config, limit, args.workers)
        fmt = lambda c: ", ".join(f"{k} {v}" for k, v in sorted(c.items()))  # noqa: E731
        emit(lines, f"| {limit or 'all'} | {r['models']} | {r['rc']} | {r['wall']:.0f} s | {r['cpu']:.0f} s | "
                    f"{r['wall'] / max(r['models'], 1):.2f} | {r['peak_sum'] / 1024:.0f} MiB "
                    f"({' + '.join(str(p // 1024) for p in r['procs'])}) | "
                    f"{r['peak_first'] / 1024:.0f} MiB | "
                    f"{r['peak_one'] / 1024:.0f} MiB | {fmt(r['status'])} | {fmt(r['how'])} | "
                    f"{r['bytes'] / 2**20:.0f} MiB |")
    print(finish(lines, t0, args.out))


if __name__ == "__main__":
    main()
