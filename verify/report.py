"""Verification reports: ``report.json`` (versioned schema) and ``report.md``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .check import VerificationResult

REPORT_SCHEMA = "shortcut-verification/1"


def file_sha256(path: "str | Path") -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def report_dict(result: VerificationResult, model, checkpoint: "str | Path | None" = None) -> dict[str, Any]:
    """The JSON report: tool version, automaton hash, checkpoint hash, what was checked, results."""
    import compiler

    d = result.to_dict()
    return {
        **d,
        "schema": REPORT_SCHEMA,
        "tool_version": compiler.__version__,
        "automaton": {"name": model.automaton.name, "sha256": model.automaton.digest(),
                      "n_states": model.automaton.n_states, "n_symbols": model.automaton.n_symbols},
        "checkpoint_sha256": file_sha256(checkpoint) if checkpoint else None,
        "model": {k: v for k, v in model.info().items() if k != "verification"},
    }


def report_markdown(report: dict[str, Any]) -> str:
    """A short human-readable version of :func:`report_dict`."""
    c = report["checked"]
    verdict = "EXACT" if report["exact"] else "NOT EXACT"
    lines = [
        f"# Verification: {report['automaton']['name']} ({report['method']}, max_len {report['max_len']}, {report['dtype']})",
        "",
        f"**{verdict}** — {report['n_errors']} wrong of {report['n_positions']} scored positions "
        f"in {report['n_sequences']} sequences (seed {report['seed']}).",
        "",
        "| check | what |",
        "|---|---|",
        f"| exhaustive | all {c['exhaustive_sequences']} sequences of length {c['exhaustive_length']} (so every shorter one) |",
        f"| random | {c['random_sequences']} sequences of length {c['random_length']}, every position |",
        f"| adversarial | {', '.join(f'{k} ({v})' for k, v in c['adversarial_families'].items()) or 'none'} |",
        f"| layer-wise | {c.get('layerwise') or 'none'} |",
        "",
        f"Smallest readout logit margin: {report['margins'].get('readout_min_logit_margin')}",
    ]
    heads = report["margins"].get("heads") or []
    if heads:
        lines += ["", "| layer | score gap (logits) | worst leaked mass | derived bound | worst MLP input noise | tolerance |",
                  "|---|---|---|---|---|---|"]
        for h in heads:
            lines.append(f"| {h['layer']} | {h['score_gap']:.3g} | {h['worst_leaked_mass']:.3g} | "
                         f"{h['derived_leak_bound']:.3g} | {h['worst_mlp_input_noise']:.3g} | {h['mlp_input_tolerance']} |")
    inv = report.get("invariants") or {}
    for f in inv.get("failures", []):
        lines.append(f"- invariant failed: {f}")
    ce = report.get("counterexample")
    if ce:
        lines += ["", f"## First counterexample ({ce['check']})", "",
                  f"Input: `{' '.join(ce['input'])}` — at position {ce['position']} expected "
                  f"`{ce['expected']}`, model gave `{ce['got']}`.", "",
                  "| t | symbol | reference | model |", "|---|---|---|---|"]
        for i, s in enumerate(ce["trace"], 1):
            lines.append(f"| {i} | {s['symbol']} | {s['expected']} | {s['got']} |")
    return "\n".join(lines) + "\n"


def write_report(result: VerificationResult, model, out_dir: "str | Path",
                 checkpoint: "str | Path | None" = None) -> dict[str, Any]:
    """Write report.json and report.md into ``out_dir``; return the JSON dict."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = report_dict(result, model, checkpoint)
    (out / "report.json").write_text(json.dumps(rep, indent=2, sort_keys=True) + "\n")
    (out / "report.md").write_text(report_markdown(rep))
    return rep
