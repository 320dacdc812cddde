"""Every benchmark table in one command, written to benchmarks/results/ (budget: 15 minutes
on a 2-core CPU).

    python benchmarks/run_all.py            # all four tables
    python benchmarks/run_all.py --only paper_suite speed

Tables: ``paper_suite.md`` (the paper's 19 automata at T = 100), ``reach.md``
(numerical reach of scan models, T = 2^8 .. 2^16: full sequences through the model up to
2^14, a sampled positional certificate above -- a full check at 2^16 costs ~4 minutes per
model and configuration here, see ``reach_full_*.md``), ``speed.md`` (throughput),
``compile_scaling.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compile_scaling  # noqa: E402
import numerical_reach  # noqa: E402
import paper_suite  # noqa: E402
import speed  # noqa: E402

RESULTS = HERE / "results"
TABLES = {
    "paper_suite": lambda out: paper_suite.main(["--out", out]),
    "reach": lambda out: numerical_reach.main(["--quick", "--max-exp", "16", "--full-max-exp", "14",
                                               "--sample-rows", "2048", "--out", out]),
    "speed": lambda out: speed.main(["--out", out]),
    "compile_scaling": lambda out: compile_scaling.main(["--out", out]),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", choices=list(TABLES), default=list(TABLES))
    p.add_argument("--results", default=str(RESULTS))
    args = p.parse_args()
    Path(args.results).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    times = {}
    for name in args.only:
        t = time.perf_counter()
        TABLES[name](str(Path(args.results) / f"{name}.md"))
        times[name] = time.perf_counter() - t
    print("\n".join(f"{k}: {v:.0f} s" for k, v in times.items()))
    print(f"all tables: {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
