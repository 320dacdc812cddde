"""One zoo model, start to finish: draw it, compile, verify (certify where covered), write.

:func:`run_job` is the only function the executors schedule (a process pool or Ray).  It
writes the model, its circuit and its traces atomically, then its record -- last, so a record
on disk means a finished model (a kill before it leaves at most files that the rerun rewrites
with the same bytes).  A failure (a construction that does not apply, a budget, a model that
is not exact, a bug) is recorded with its reason, never dropped.  Wall-clock timings go
into the record's ``timings``, kept out of the manifest so that the manifest is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from constructions.basis import ORTHOGONAL, basis_of
from constructions.checkpoint import save, serialize, weights_sha256
from constructions.circuit import TRACE_SCHEMA, circuit, sample_inputs, traces
from verify.policy import SAMPLINGS, check
from verify.report import verification_summary

from ..automata.atomic import write_atomic
from ..automata.catalog import build
from ..automata.errors import ShortcutError
from ..automata.families import random_of_class
from ..automata.formats import from_regex, parse_alphabet
from ..automata.spec import Semiautomaton
from ..pipeline import compile_automaton
from .config import CATALOG, REGEX, Job, job_sha256

MODELS, CIRCUITS, TRACES, RECORDS = "models", "circuits", "traces", "records"
"""The zoo directory's subdirectories."""
VERIFY_SEED = 0
"""Seed of every model's sampled check (the checkpoint's summary records it)."""


@dataclass(frozen=True)
class Draw:
    """What a job drew: the automaton and the options it is compiled with."""

    automaton: Semiautomaton
    max_len: int
    method: str
    readout: str
    basis: str


def _labelled(a: Semiautomaton, rng: random.Random) -> Semiautomaton:
    """``a`` with random output labels (2 to 4 of them) when it has none (a Mealy machine's are its
    transitions' outputs)."""
    if a.outputs is not None or a.transition_outputs is not None:
        return a
    n = rng.randint(2, max(2, min(4, a.n_states)))
    return Semiautomaton(a.name, a.states, a.alphabet, a.maps, a.start,
                         tuple(f"l{rng.randrange(n)}" for _ in a.states))


def draw(job: Job) -> Draw:
    """The job's automaton and options, from its seed alone."""
    f = job.family
    rng = random.Random(job.seed)
    max_len, method = rng.choice(f.max_len), rng.choice(f.methods)
    readout, basis = rng.choice(f.readouts), rng.choice(f.bases)
    if f.kind == REGEX:
        alphabet = parse_alphabet(f.alphabet) if f.alphabet is not None else None
        a = from_regex(f.patterns[job.number % len(f.patterns)], alphabet)
    elif f.kind == CATALOG:
        a = build(f.names[job.number % len(f.names)])
    else:
        a = random_of_class(f.kind, rng, f.sizes, job.id)
    if readout == "labels":
        a = _labelled(a, rng)
    return Draw(a, max_len, method, readout, basis)


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n")


def _verification(summary: dict[str, Any]) -> dict[str, Any]:
    """The manifest's view of a checkpoint's verification summary."""
    cert = summary.get("certificate") or {}
    checked = summary["checked"]
    return {"exact": summary["exact"], "how": "certified" if cert.get("certified") else "sampled",
            "certified": bool(cert.get("certified")), "certificate_supported": cert.get("supported", True),
            "certificate_reason": cert.get("reason"), "n_positions": summary["n_positions"],
            "n_errors": summary["n_errors"], "exhaustive_length": checked["exhaustive_length"],
            "random_sequences": checked["random_sequences"],
            "min_logit_margin": (summary.get("margins") or {}).get("readout_min_logit_margin")}


def _not_exact(result) -> dict[str, str] | None:
    """Why a model is not exact (None when it is): the failed certificate, the counterexample
    or the failed invariant."""
    if result.exact:
        return None
    cert = result.certificate
    if cert is not None and cert.failed:
        return {"kind": "certificate_failed", "message": " ".join(str(cert.reason).split())}
    ce = result.counterexample
    if ce is not None:
        return {"kind": "counterexample", "message": f"{ce.check}: {' '.join(ce.input)} at position {ce.position}: "
                                                     f"expected {ce.expected}, got {ce.got}"}
    return {"kind": "invariant", "message": "; ".join(result.invariant_failures)[:500]}


def _build(job: Job, d: Draw, out: Path, clock: dict[str, float]) -> dict[str, Any]:
    """Compile, verify and write one model; the manifest fields it adds."""
    t = time.perf_counter()
    model = compile_automaton(d.automaton, max_len=d.max_len, method=d.method, readout=d.readout, basis=d.basis,
                              basis_seed=job.seed if d.basis == ORTHOGONAL else 0)
    clock["compile_s"] = time.perf_counter() - t
    t = time.perf_counter()
    result = check(model, seed=VERIFY_SEED, sampling=SAMPLINGS[job.family.sampling])
    model.meta = {**model.meta, "verification": verification_summary(result, model)}
    clock["verify_s"] = time.perf_counter() - t
    t = time.perf_counter()
    paths = {"model": f"{MODELS}/{job.id}.safetensors", "circuit": f"{CIRCUITS}/{job.id}.json",
             "trace": f"{TRACES}/{job.id}.safetensors"}
    save(model, out / paths["model"])
    _write_json(out / paths["circuit"], circuit(model))
    tensors = traces(model, sample_inputs(model, job.family.traces, job.seed)) if job.family.traces else {}
    write_atomic(out / paths["trace"], serialize(tensors, {"schema": TRACE_SCHEMA, "model": paths["model"]}))
    clock["write_s"] = time.perf_counter() - t
    c = model.config
    return {"status": "ok" if result.exact else "not_exact", "error": _not_exact(result),
            "method": model.meta["method"],
            "basis": basis_of(model.meta) or {"kind": "standard"},
            "layers": len(c.blocks), "d_model": c.d_model, "d_head": c.d_head,
            "heads_by_layer": [b.n_heads for b in c.blocks],
            "mlp_hidden_by_layer": [list(b.mlp_hidden) for b in c.blocks],
            "params": sum(p.numel() for p in model.parameters()), "weights_sha256": weights_sha256(model),
            "files": paths, "sha256": {k: sha256_file(out / p) for k, p in paths.items()},
            "verification": _verification(model.meta["verification"])}


def run_job(job: Job, out: "str | Path") -> dict[str, Any]:
    """Make model ``job`` under ``out`` and write its record; returns the record
    (``row``: its manifest row; ``timings``: seconds spent; ``job_sha256``: what it was made for,
    :func:`compiler.zoo.config.job_sha256`)."""
    out = Path(out)
    torch.set_num_threads(1)  # the same arithmetic in every worker, whatever the machine's cores
    start = time.perf_counter()
    clock: dict[str, float] = {}
    f = job.family
    row: dict[str, Any] = {"id": job.id, "index": job.index, "family": f.name, "class": f.kind, "seed": job.seed}
    try:
        d = draw(job)
        row.update(automaton=d.automaton.name, spec=d.automaton.to_json(), automaton_sha256=d.automaton.digest(),
                   n_states=d.automaton.n_states, n_symbols=d.automaton.n_symbols, max_len=d.max_len,
                   requested_method=d.method, readout=d.readout, requested_basis=d.basis, traces=f.traces)
        row.update(_build(job, d, out, clock))
    except ShortcutError as e:
        row.update(status="failed", error={"kind": type(e).__name__, "message": " ".join(str(e).split())})
    except Exception as e:  # noqa: BLE001 - a bug is recorded with its reason, never dropped
        row.update(status="failed", error={"kind": f"internal:{type(e).__name__}",
                                           "message": " ".join(str(e).split())[:500]})
    clock["total_s"] = time.perf_counter() - start
    record = {"row": row, "timings": {k: round(v, 4) for k, v in clock.items()}, "job_sha256": job_sha256(job)}
    _write_json(out / RECORDS / f"{job.id}.json", record)
    return record
