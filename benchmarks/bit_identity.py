"""Bit identity of compiled models across a refactoring: weights and logits hashed.

Compiles the paper's 19 automata (``auto``), one model of every registered construction
(``--method NAME``, both position codes for some), label readouts of every form (one-hot sum,
scalar code, halfspaces in the unembedding, exact and halfspace lookups in the last MLP, the
quotient and the automaton as given) a model in a rotated basis and models pointed at another start state (``with_start``), and hashes, per model,
the weights (every parameter's dtype, shape and bytes, in state-dict order) and the logits on
fixed random inputs at max_len.  A third digest of the metadata (canonical JSON) is recorded
as information: metadata may gain fields, the model may not change.

    python benchmarks/bit_identity.py --write benchmarks/results/bit_identity.json   # before
    python benchmarks/bit_identity.py --check benchmarks/results/bit_identity.json   # after

``--check`` exits 1 naming every model whose weights or logits differ (or that is missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from typing import Any, Callable

import numpy as np
import torch

import compiler
from compiler.automata.catalog import paper_suite
from compiler.automata.load import load_spec

MAX_LEN = 16
BATCH = 6


def _labelled(spec: Any, f: Callable[[str], str]) -> Any:
    a = load_spec(spec)
    return dataclasses.replace(a, outputs=tuple(f(s) for s in a.states))


def _in_three(s: str) -> str:
    return "in" if s in ("12345", "21345", "23145") else "out"


_PRODUCT_3 = {"name": "random620", "states": ["0", "1", "2"], "alphabet": ["a0", "a1"], "start": "0",
              "transitions": {"0": {"a0": "1", "a1": "0"}, "1": {"a0": "1", "a1": "2"}, "2": {"a0": "1", "a1": "2"}},
              "outputs": {"0": "l0", "1": "l1", "2": "l0"}}


def _restarted(spec: str, method: str) -> Any:
    """A model compiled with ``method`` and pointed at its automaton's second state (``with_start``)."""
    model = compiler.compile_automaton(spec, max_len=MAX_LEN, method=method, dtype=torch.float64)
    return compiler.with_start(model, model.automaton.states[1])


def cases() -> dict[str, Callable[[], Any]]:
    """Name -> a thunk compiling that model (deterministic)."""
    out: dict[str, Callable[[], Any]] = {}
    for name in paper_suite():
        out[f"paper/{name}"] = lambda n=name: compiler.compile_automaton(n, max_len=MAX_LEN)
    forced = [("scan", "cyclic:3"), ("scan", "parity"), ("krohn-rhodes", "dihedral:3"), ("krohn-rhodes", "memory:3"),
              ("gridworld", "grid:4"), ("gridworld", "grid2d:3,4"), ("lookback", "nth-last:3"),
              ("lookback", "nth-last:2"), ("bounded-stack", "dyck:4,2"), ("bounded-stack", "repeat:2"),
              ("local", "blocks:4"), ("local", "adder:2"), ("product", "cyclic-product:2,2,2"),
              ("product", "grid2d:3,4"), ("product", "nth-last:3")]
    for method, spec in forced:
        for positions in ("sinusoidal", "circle"):
            out[f"{method}/{spec}/{positions}"] = (
                lambda m=method, s=spec, p=positions: compiler.compile_automaton(s, max_len=MAX_LEN, method=m,
                                                                                 positions=p))
    out["scan/cyclic:3/float64"] = lambda: compiler.compile_automaton("cyclic:3", max_len=MAX_LEN, method="scan",
                                                                      dtype=torch.float64)
    labels = {
        "parity": lambda: load_spec("parity"),
        "dyck:4,2": lambda: load_spec("dyck:4,2"),
        "blocks:4": lambda: load_spec("blocks:4"),
        "repeat:2": lambda: load_spec("repeat:2"),
        "grid:6-wall": lambda: _labelled("grid:6", lambda s: "wall" if s in ("0", "5") else "inside"),
        "symmetric:5-in3": lambda: _labelled("symmetric:5", _in_three),
        "symmetric:5-lt": lambda: _labelled("symmetric:5", lambda s: "lt" if s[0] < s[1] else "ge"),
        "grid2d:3,3-corner": lambda: _labelled("grid2d:3,3",
                                               lambda s: "c" if s in ("0,0", "0,2", "2,0", "2,2") else "n"),
        "product3": lambda: load_spec(_PRODUCT_3),
    }
    for name, spec in labels.items():
        out[f"labels/{name}"] = lambda s=spec: compiler.compile_automaton(s(), max_len=MAX_LEN, readout="labels")
    out["labels/parity/scan"] = lambda: compiler.compile_automaton("parity", max_len=MAX_LEN, readout="labels",
                                                                   method="scan")
    out["labels/product3/product"] = lambda: compiler.compile_automaton(load_spec(_PRODUCT_3), max_len=MAX_LEN,
                                                                        readout="labels", method="product")
    for method, spec in forced[::2] + [("krohn-rhodes", "memory:3"), ("local", "adder:2")]:
        out[f"start/{method}/{spec}"] = lambda m=method, s=spec: _restarted(s, m)
    out["orthogonal/dihedral:4"] = lambda: compiler.compile_automaton("dihedral:4", max_len=MAX_LEN,
                                                                      basis="orthogonal", basis_seed=3)
    return out


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()


def _tensor_bytes(t: torch.Tensor) -> list[bytes]:
    a = t.detach().cpu().contiguous()
    return [str(a.dtype).encode(), str(tuple(a.shape)).encode(), a.numpy().tobytes()]


def hashes(model: Any) -> dict[str, str]:
    """Digests of the weights, of the logits on fixed inputs, and (information) of the metadata."""
    weights = [p for name, t in model.state_dict().items() for p in [name.encode(), *_tensor_bytes(t)]]
    n_symbols = len(model.automaton.alphabet)
    rng = np.random.default_rng(0)
    ids = torch.as_tensor(rng.integers(0, n_symbols, (BATCH, model.max_len)))
    with torch.no_grad():
        logits = model(ids)
        with model.explicit_attention():
            explicit = model(ids)
    meta = json.dumps(model.meta, sort_keys=True, default=str).encode()
    return {"weights": _digest(weights), "logits": _digest(_tensor_bytes(logits) + _tensor_bytes(explicit)), "meta": _digest([meta])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="JSON")
    g.add_argument("--check", metavar="JSON")
    p.add_argument("-k", default="", help="only the cases whose name contains this")
    args = p.parse_args(argv)
    got = {name: hashes(make()) for name, make in cases().items() if args.k in name}
    if args.write:
        with open(args.write, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"wrote {len(got)} models' hashes to {args.write}")
        return 0
    with open(args.check) as f:
        want = json.load(f)
    bad = [n for n in want if args.k in n and (n not in got or any(got[n][k] != want[n][k] for k in ("weights", "logits")))]
    meta = [n for n in got if n in want and got[n]["meta"] != want[n]["meta"]]
    print(f"{len(got)} models: {len(got) - len(bad)} bit-identical (weights and logits), {len(bad)} differ"
          + (f": {bad}" if bad else "") + f"; metadata changed in {len(meta)}" + (f": {meta}" if meta else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
