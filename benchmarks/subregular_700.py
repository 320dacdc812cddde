"""Compile (auto, T = 50) and certify one generated language in this process: one JSON row with the
pick, CPU seconds (``time.process_time``) and the peak RSS (``ru_maxrss``).

    OPENBLAS_NUM_THREADS=1 python benchmarks/subregular_700.py ltt 4 64 0 5   # class k letters seed [factors]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402,F401  (imported before timing, as the CLI would)

from compiler.automata.subregular_families import CLASSES, random_language  # noqa: E402
from compiler.pipeline import compile_automaton  # noqa: E402
from verify.certify.certificate import certify  # noqa: E402


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="Compile (auto, T = 50) and certify one generated subregular "
                                "language: one JSON row (pick, CPU seconds, peak RSS).")
    p.add_argument("cls", choices=CLASSES, help="the language class")
    for name in ("k", "letters", "seed"):
        p.add_argument(name, type=int)
    p.add_argument("factors", type=int, nargs="?", help="how many factors or subsequences (the generator's default)")
    a_ = p.parse_args(argv)
    cls, k, letters, seed, n_factors = a_.cls, a_.k, a_.letters, a_.seed, a_.factors
    a = random_language(cls, k=k, letters=letters, seed=seed, factors=n_factors)
    row: dict = {"language": f"{cls}:{k}:{letters}:{seed}:factors={n_factors}", "states": a.n_states,
                 "letters": a.n_symbols}
    t0 = time.process_time()
    m = compile_automaton(a, max_len=50)
    t1 = time.process_time()
    row.update(method=m.meta.get("method"), layers=len(m.blocks), params=sum(p.numel() for p in m.parameters()),
               compile_cpu_s=round(t1 - t0, 2))
    c = certify(m)
    t2 = time.process_time()
    row.update(certified=bool(c.certified), certify_cpu_s=round(t2 - t1, 2), total_cpu_s=round(t2 - t0, 2),
               peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2))
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
