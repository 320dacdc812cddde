"""Numerical reach of the scan construction: at which max_len does it stop being exact?

For each automaton, positions code and dtype, compiles a scan model (``--method scan``)
at T = 2^k and verifies it with random sequences of exactly T plus the adversarial
families (constant runs, alternations, run-then-switch, periodic), every position
scored.  Exhaustive checks are short-length and do not depend on T, so they are
skipped, as are the layer-wise invariants.  Inputs up to 4096 run through the model's
own forward; longer ones through ``verify.chunked.forward_chunked`` (query-chunked
attention, one attention pattern shared by the batch since scan heads select by
position only; the test suite checks it against the plain forward).

``--find-max`` doubles T from 2^min-exp and stops each row at its first failure, so a
row costs about twice its largest exact T.  ``--quick`` is the setting of
``benchmarks/run_all.py`` (2 random sequences, 1 sequence per adversarial family,
T = 2^8 .. 2^12, chunked forward at every T).  Examples:

    python benchmarks/numerical_reach.py --find-max --max-exp 16 --out benchmarks/results/reach_full.md
    python benchmarks/numerical_reach.py --quick
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

import compiler
from verify.check import verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import finish, header  # noqa: E402

DEFAULT_AUTOMATA = ["parity", "quaternion", "alternating:5", "symmetric:5"]


def check(name: str, positions: str, dtype: str, T: int, samples: int, family_limit: int | None,
          forward: str = "auto") -> dict:
    t0 = time.perf_counter()
    model = compiler.compile_automaton(name, max_len=T, method="scan", dtype=getattr(torch, dtype),
                                       positions=positions)
    r = verify(model, samples=samples, exhaustive_budget=1, layerwise=False, family_limit=family_limit,
               forward=forward)
    heads = r.margins.get("heads") or []
    return {"T": T, "exact": r.exact, "errors": r.n_errors, "positions": r.n_positions, "sequences": r.n_sequences,
            "margin": r.margins.get("readout_min_logit_margin"),
            "leak": max((h["worst_leaked_mass"] for h in heads), default=None),
            "predicted": model.meta.get("position_precision_margin"),
            "forward": "chunked" if "chunked" in r.checked["forward"] else "plain",
            "seconds": time.perf_counter() - t0}


@torch.no_grad()
def certify_rows(name: str, positions: str, dtype: str, T: int, n_rows: int, seed: int = 0) -> dict:
    """Sampled positional certificate of a scan model at length T (no full forward pass).

    A scan head's queries and keys read only dims that are the same for every input
    (checked by ``verify.chunked.positional_layers``), so its attention row at query t is
    input-independent.  For ``n_rows`` query rows per layer (the last n/2 positions and
    n/2 uniform others) this computes the scores against every key with the model's own
    weights and dtype, the softmax, and the mass leaked off t - 2^(l-1) (or BOS); a head
    whose leak stays under its derived ``leak_bound`` moves values within the composition
    MLP's tolerance, for every input.  Rows not sampled are not checked."""
    from verify.chunked import positional_layers

    t0 = time.perf_counter()
    model = compiler.compile_automaton(name, max_len=T, method="scan", dtype=getattr(torch, dtype),
                                       positions=positions)
    assert all(positional_layers(model)), "scan heads should select by position only"
    x = model.residual(torch.zeros((1, T), dtype=torch.long))[0]  # positional dims: the same for every input
    rng = np.random.default_rng(seed)
    half = min(n_rows // 2, T)
    rows = np.unique(np.concatenate([np.arange(T + 1 - half, T + 1), rng.integers(1, T + 1, n_rows - half)]))
    rows_t = torch.from_numpy(rows)
    worst_leak, worst_ratio = 0.0, 0.0
    for l, block in enumerate(model.blocks):
        a = block.attn
        bound = model.meta["layers"][l]["heads"][0]["leak_bound"]
        q = torch.einsum("td,de->te", x, a.W_Q[0])
        k = torch.einsum("td,de->te", x, a.W_K[0])
        for i in range(0, len(rows), 256):
            r = rows_t[i : i + 256]
            scores = q[r] @ k.T  # [rows, T+1]
            scores = scores.masked_fill(torch.arange(T + 1)[None, :] > r[:, None], float("-inf"))
            pattern = torch.softmax(scores, dim=-1)
            target = torch.clamp(r - 2**l, min=0)
            leak = float((1.0 - pattern[torch.arange(len(r)), target].double()).max())
            worst_leak = max(worst_leak, leak)
            worst_ratio = max(worst_ratio, leak / bound)
    return {"T": T, "exact": worst_ratio < 1.0, "rows": len(rows), "leak": worst_leak, "ratio": worst_ratio,
            "predicted": model.meta.get("position_precision_margin"), "seconds": time.perf_counter() - t0}


def _f(x, fmt: str = ".3g") -> str:
    return "—" if x is None else format(x, fmt)


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--automata", nargs="+", default=DEFAULT_AUTOMATA)
    p.add_argument("--positions", nargs="+", default=["sinusoidal", "circle"])
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    p.add_argument("--min-exp", type=int, default=None, help="smallest T = 2^min-exp (default 6)")
    p.add_argument("--max-exp", type=int, default=None, help="largest T = 2^max-exp (default 16; --quick: 12)")
    p.add_argument("--samples", type=int, default=None, help="random full-length sequences (default 4; --quick: 2)")
    p.add_argument("--family-limit", type=int, default=None,
                   help="sequences per adversarial family (default 2; --quick: 1)")
    p.add_argument("--find-max", "--stop-at-failure", action="store_true", dest="find_max",
                   help="stop each row at its first failure")
    p.add_argument("--forward", choices=["auto", "plain", "chunked"], default=None,
                   help="auto: the model's own forward up to T = 4096, chunked above (default); --quick: chunked")
    p.add_argument("--full-max-exp", type=int, default=None,
                   help="above T = 2^this, check a sampled positional certificate instead of full sequences")
    p.add_argument("--sample-rows", type=int, default=4096, help="query rows per layer for the certificate")
    p.add_argument("--quick", action="store_true", help="few samples, T = 2^8 .. 2^12, chunked forward, --find-max")
    p.add_argument("--out", help="also write the tables to this file")
    args = p.parse_args(argv)
    quick = args.quick
    min_exp = args.min_exp if args.min_exp is not None else (8 if quick else 6)
    max_exp = args.max_exp if args.max_exp is not None else (12 if quick else 16)
    forward = args.forward or ("chunked" if quick else "auto")
    samples = args.samples if args.samples is not None else (2 if quick else 4)
    family_limit = args.family_limit if args.family_limit is not None else (1 if quick else 2)
    find_max = args.find_max or quick

    lines = [header(f"Numerical reach of scan models, T = 2^{min_exp} .. 2^{max_exp}"), "",
             f"Per T: {samples} random sequences of length T and at most {family_limit} sequence(s) of each "
             f"adversarial family (constant, alternate, run-then-switch, switch-then-run, periodic), every position "
             f"scored against the integer simulation; {'each row stops at its first failure' if find_max else 'all T'}. "
             f"`predicted` is the compile-time position precision margin (half the score gap over a rounding "
             f"bound; below 1 the compiler warns). "
             + (f"Above T = 2^{args.full_max_exp}: a sampled positional certificate instead of full sequences (scan "
                f"heads attend by position only, so each query row's attention is input-independent: for "
                f"{args.sample_rows} query rows per layer, the last half and random others, the mass leaked off the "
                f"intended key is computed with the model's weights and dtype and compared with the head's derived "
                f"leak bound; under it, the head's output error is within the composition MLP's tolerance for every "
                f"input; rows not sampled are not checked). " if args.full_max_exp is not None else "")
             + "Forward: "
             + {"auto": "the model's own up to T = 4096, query-chunked above.",
                "plain": "the model's own.",
                "chunked": "query-chunked at every T (verify.chunked; equal to the model's own forward in the tests)."}[
                 forward],
             "", "| automaton | positions | dtype | T | exact | errors / positions scored | readout margin | "
             "max leaked mass | predicted | forward | seconds |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    summary = []
    t_all = time.perf_counter()
    for name in args.automata:
        for positions in args.positions:
            for dt in args.dtypes:
                best, best_full, fail, secs = None, None, None, 0.0
                for k in range(min_exp, max_exp + 1):
                    if args.full_max_exp is not None and k > args.full_max_exp:
                        r = certify_rows(name, positions, dt, 2**k, args.sample_rows)
                        r.update(margin=None, forward=f"sampled certificate: leak ≤ {r['ratio']:.2g} × bound")
                    else:
                        r = check(name, positions, dt, 2**k, samples, family_limit, forward)
                    secs += r["seconds"]
                    scored = (f"{r['errors']}/{r['positions']}" if "rows" not in r
                              else f"{r['rows']} query rows per layer")
                    line = (f"| {name} | {positions} | {dt} | {r['T']} | {r['exact']} | {scored} | "
                            f"{_f(r['margin'])} | {_f(r['leak'])} | {_f(r['predicted'])} | {r['forward']} | "
                            f"{r['seconds']:.1f} |")
                    print(line, flush=True)
                    lines.append(line)
                    if r["exact"]:
                        best = r["T"] if fail is None else best
                        if "rows" not in r and fail is None:
                            best_full = r["T"]
                    elif fail is None:
                        fail = r
                        if find_max:
                            break
                summary.append((name, positions, dt, best, best_full, fail, secs))
    lines += ["", "## Largest exact power of two", "",
              f"| automaton | positions | dtype | largest exact T (checked ≤ 2^{max_exp}) | of which by full sequences "
              f"| first failure | seconds |",
              "|---|---|---|---|---|---|---|"]
    for name, positions, dt, best, best_full, fail, secs in summary:
        f = ("none" if fail is None else f"T = {fail['T']}: {fail['errors']}/{fail['positions']} wrong"
             if fail.get("rows") is None else f"T = {fail['T']}: certificate fails (leak {fail['leak']:.3g} "
                                              f"= {fail['ratio']:.3g} × bound)")
        full = (str(best_full) if best_full == best else
                f"{best_full if best_full is not None else '—'} (above: sampled certificate)")
        lines.append(f"| {name} | {positions} | {dt} | {best if best is not None else '< ' + str(2**min_exp)} | "
                     f"{full} | {f} | {secs:.0f} |")
    text = finish(lines, t_all, args.out)
    print("\n".join(lines[-len(summary) - 6:]), flush=True)
    return text


if __name__ == "__main__":
    main()
