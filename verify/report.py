"""Verification reports: ``report.json`` (versioned schema), ``report.md`` and ``report.html``,
and the short summary stored in a checkpoint's metadata at compile time."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

from compiler.automata.atomic import write_atomic
from compiler.automata.version import __version__
from constructions.checkpoint import header_sha256, summary_intact, weights_sha256
from constructions.model import CompiledTransformer

from .certify import certificate_summary, certificate_text, lead_verdict
from .check import VerificationResult
from .html import report_html
from .text import cut_text, exhaustive_text, fmt, json_text, md

REPORT_SCHEMA = "shortcut-verification/1"
SUMMARY_SCHEMA = "shortcut-verification-summary/1"


def file_sha256(path: "str | Path") -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _finite(x: Any) -> Any:
    """JSON has no infinities: inf/nan become None (recursively)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def margin_summary(margins: dict[str, Any]) -> dict[str, Any]:
    """The worst value of each margin kind over heads and MLPs."""
    heads = margins.get("heads") or []
    mlps = margins.get("mlps") or []

    def worst(rows, key, fn):
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
        return fn(vals) if vals else None

    return {
        "readout_min_logit_margin": margins.get("readout_min_logit_margin"),
        "heads_min_score_gap": worst(heads, "worst_score_gap", min),
        "heads_max_leaked_mass": worst(heads, "worst_leaked_mass", max),
        "mlps_min_distance_to_boundary": worst(mlps, "distance_to_boundary", min),
        "n_heads_measured": len(heads),
        "n_mlps_measured": len(mlps),
    }


def report_dict(result: VerificationResult, model: CompiledTransformer, checkpoint: "str | Path | None" = None) -> dict[str, Any]:
    """The JSON report: tool version, automaton hash, checkpoint hash, what was checked, results."""
    d = result.to_dict()
    return _finite({
        **d,
        "schema": REPORT_SCHEMA,
        "tool_version": __version__,
        "automaton": {"name": model.automaton.name, "sha256": model.automaton.digest(),
                      "n_states": model.automaton.n_states, "n_symbols": model.automaton.n_symbols},
        "checkpoint_sha256": file_sha256(checkpoint) if checkpoint else None,
        "margin_summary": margin_summary(result.margins),
        "model": {k: v for k, v in model.info().items() if k != "verification"},
    })


def _sig(x: Any, digits: int = 6) -> Any:
    """Round floats to ``digits`` significant digits (stable metadata across tiny float noise)."""
    if isinstance(x, float):
        return float(f"{x:.{digits}g}") if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _sig(v, digits) for k, v in x.items()}
    if isinstance(x, list):
        return [_sig(v, digits) for v in x]
    return x


def verification_summary(result: VerificationResult, model: CompiledTransformer | None = None) -> dict[str, Any]:
    """What ``compile --verify`` stores in ``meta["verification"]``: deterministic given the
    seed (no timestamps, floats rounded to 6 significant digits).  Given the ``model`` that
    was verified, the summary is bound to it: ``weights_sha256`` and ``header_sha256``
    (:mod:`constructions.checkpoint`), which :func:`verification_status` compares later;
    ``checkpoint.save`` seals it with its own digest (``summary_sha256``, over every entry)."""
    c = result.checked
    ce = result.counterexample
    bound = {} if model is None else {"weights_sha256": weights_sha256(model), "header_sha256": header_sha256(model)}
    return _sig({
        **bound,
        "schema": SUMMARY_SCHEMA,
        "tool_version": __version__,
        "exact": result.exact,
        "n_sequences": result.n_sequences,
        "n_positions": result.n_positions,
        "n_errors": result.n_errors,
        "seed": result.seed,
        "checked": {
            "exhaustive_length": c["exhaustive_length"],
            "exhaustive_sequences": c["exhaustive_sequences"],
            "random_sequences": c["random_sequences"],
            "random_length": c["random_length"],
            "adversarial_sequences": sum(c["adversarial_families"].values()),
            "adversarial_families": sorted(c["adversarial_families"]),
            "adversarial_family_limit": c.get("adversarial_family_limit"),
            "layerwise": c.get("layerwise"),
            "time_budget_s": c.get("time_budget_s"),
            "cut_by_time_budget": c.get("cut_by_time_budget"),
            **({"promise": c["promise"]} if c.get("promise") else {}),
        },
        "margins": margin_summary(result.margins),
        "invariant_failures": list(result.invariant_failures),
        "counterexample": None if ce is None else {"check": ce.check, "input": ce.input, "position": ce.position,
                                                   "expected": ce.expected, "got": ce.got},
        **({} if result.certificate is None else {"certificate": certificate_summary(result.certificate)}),
    })


VERIFIED = "verified"
CHANGED = "changed since verification"
UNBOUND = "not bound to the weights"
UNSEALED = "not sealed: the summary has no digest of its own (an older shortcut wrote it, or it was removed)"
DIGESTS_NOTE = ("these sha256 digests detect accidental change, not tampering: anyone who edits a checkpoint "
                "can recompute them")
"""What the digests are worth, said wherever a verdict rests on them (``info``, docs/cli.md)."""


def verification_status(model: CompiledTransformer) -> str | None:
    """Whether the stored verification still describes ``model``: :data:`VERIFIED` when the
    summary's own digest and the weights and header digests it was bound to all match,
    :data:`CHANGED` (naming what changed: the summary, the weights, the header) when one does
    not, :data:`UNSEALED` for a bound summary without its own digest, :data:`UNBOUND` for a
    summary without digests, None when there is none.  (Accidental change only: :data:`DIGESTS_NOTE`.)"""
    summary = model.meta.get("verification")
    if not isinstance(summary, dict):
        return None
    if "weights_sha256" not in summary:
        return UNBOUND
    changed = [what for what, key, digest in (("the weights", "weights_sha256", weights_sha256),
                                              ("the header (spec, method, plan, config, notes)", "header_sha256",
                                               header_sha256))
               if summary.get(key) != digest(model)]
    sealed = summary_intact(summary)
    if sealed is False:
        changed.insert(0, "the summary's own entries")
    if changed:
        return f"{CHANGED}: {' and '.join(changed)} differ"
    return UNSEALED if sealed is None else VERIFIED


def failure_text(n_errors: Any, counterexample: dict[str, Any] | None, invariant_failures: list[str]) -> str:
    """What made a model not exact, for the verdict line: the first counterexample (check and
    position) and the first failed invariant (which names its layer, component or position)."""
    parts = [f"{n_errors} errors"]
    if counterexample:
        parts.append(f"first at position {counterexample['position']} in the {counterexample['check']} check "
                     f"(expected {counterexample['expected']}, got {counterexample['got']})")
    if invariant_failures:
        more = len(invariant_failures) - 1
        parts.append(f"invariant failed: {invariant_failures[0]}" + (f" (+{more} more)" if more else ""))
    return "; ".join(parts)


SAMPLED = "no error found (sampled, not proved exact)"
"""The verdict of a check that found no error but neither proved the model exact (a certificate)
nor checked every input up to max_len."""


def proved_or_exhaustive(certificate: Any, exhaustive_length: Any, max_len: Any) -> bool:
    """Whether "exact" may be said: a certificate holds, or every input up to max_len was checked."""
    certified = isinstance(certificate, dict) and certificate.get("certified") is True
    return certified or (isinstance(exhaustive_length, int) and isinstance(max_len, int)
                         and exhaustive_length >= max_len)


def summary_line(summary: dict[str, Any], status: str | None = None, max_len: int | None = None) -> str:
    """One line for ``shortcut info`` / ``compile``: verdict (followed by ``status`` in
    parentheses, when given), what failed, and what was checked.  No error in a sampled check
    that no certificate backs is not called exact (:data:`SAMPLED`)."""
    def part(key: str, kind: type, default: Any) -> Any:  # a stored summary is data: tolerate odd shapes
        value = summary.get(key)
        return value if isinstance(value, kind) else default

    c, m = part("checked", dict, {}), part("margins", dict, {})
    ce = part("counterexample", dict, None)
    ce = ce if ce and {"position", "check", "expected", "got"} <= set(ce) else None
    fails = [str(f) for f in part("invariant_failures", list, [])]
    exhaustive = c.get("exhaustive_length")
    if summary.get("exact") is not True:
        verdict = f"NOT exact ({failure_text(summary.get('n_errors'), ce, fails)})"
    elif proved_or_exhaustive(summary.get("certificate"), exhaustive, max_len or c.get("random_length")):
        verdict = "exact"
    else:
        verdict = SAMPLED
    if status is not None:
        verdict += f" ({status})"
    legal = " legal" if c.get("promise") else ""
    return (f"{verdict} on {summary.get('n_positions')}{legal} positions: exhaustive to length {c.get('exhaustive_length')}, "
            f"{c.get('random_sequences')} random at length {c.get('random_length')}, "
            f"{c.get('adversarial_sequences')} adversarial, layer-wise: {c.get('layerwise') or 'none'} "
            f"(seed {summary.get('seed')}){cut_text(c)}; readout margin {m.get('readout_min_logit_margin')}, "
            f"max leaked mass {m.get('heads_max_leaked_mass')}, "
            f"min MLP distance to boundary {m.get('mlps_min_distance_to_boundary')}")


def _cell(x: Any) -> str:
    """A value for ``report.md``: text (names, notes) escaped by :func:`verify.text.md`, numbers formatted."""
    return md(x) if isinstance(x, str) else fmt(x)


def report_markdown(report: dict[str, Any]) -> str:
    """A short human-readable version of :func:`report_dict`; every name and note in it is
    escaped (:func:`verify.text.md`), so a state called ``<img src=x onerror=...>`` stays text."""
    c = report["checked"]
    cert = report.get("certificate")
    verdict = lead_verdict(report["exact"], cert, proved_or_exhaustive(None, c.get("exhaustive_length"),
                                                                       report.get("max_len")))
    acc = report["accuracy_by_position"]
    worst_pos = min(range(len(acc)), key=lambda i: acc[i]) if acc else None
    lines = [
        f"# Verification: {md(report['automaton']['name'])} ({md(report['method'])}, max_len {report['max_len']}, "
        f"{md(report['dtype'])})",
        "",
        f"**{verdict}**" + (f" — {certificate_text(cert)}." if verdict == "CERTIFIED EXACT" else "")
        + f" Sampled: {report['n_errors']} wrong of {report['n_positions']} scored positions "
        f"in {report['n_sequences']} sequences (seed {report['seed']}); accuracy {report['accuracy']:.6g}"
        + (f", worst position {worst_pos + 1} ({acc[worst_pos]:.4g})" if worst_pos is not None and acc[worst_pos] < 1 else "")
        + ".",
        "",
        f"Automaton sha256 `{report['automaton']['sha256'][:16]}…`, checkpoint sha256 "
        + (f"`{report['checkpoint_sha256'][:16]}…`" if report.get("checkpoint_sha256") else "n/a")
        + f", tool {report['tool_version']}.",
        "",
        "| check | what |",
        "|---|---|",
        f"| exhaustive | {exhaustive_text(c)} |",
        f"| random | {c['random_sequences']} sequences of length {c['random_length']}, every position |",
        f"| adversarial | {', '.join(f'{md(k)} ({v})' for k, v in c['adversarial_families'].items()) or 'none'} |",
        f"| layer-wise | {md(c.get('layerwise') or 'none')} |",
        *([f"| promise | {md(c['promise'])}: positions outside the domain are not scored |"] if c.get("promise") else []),
        f"| forward | {md(c.get('forward', 'plain'))} |",
        *([f"| time budget | {c['time_budget_s']:g} s{cut_text(c) or ': every check ran in full'} |"]
          if isinstance(c.get("time_budget_s"), (int, float)) else []),
        "",
        f"Certificate: {certificate_text(report.get('certificate'))}." if report.get("certificate") else
        "Certificate: not run (`shortcut certify` proves exactness on every input up to max_len).",
        "",
        f"Smallest readout logit margin: {fmt(report['margins'].get('readout_min_logit_margin'))}",
    ]
    heads = report["margins"].get("heads") or []
    if heads:
        lines += ["", "| layer | head | intended key | worst score gap | worst leaked mass | derived leak bound |",
                  "|---|---|---|---|---|---|"]
        for h in heads:
            gap = h.get("worst_score_gap")
            if gap is None and "worst_score_spread" in h:
                gap = f"spread {fmt(h['worst_score_spread'])}"
            lines.append(f"| {h['layer']} | {h['head']} | {_cell(h.get('target', ''))} | {_cell(gap)} | "
                         f"{fmt(h.get('worst_leaked_mass'))} | {fmt(h.get('derived_leak_bound'))} |")
    mlps = report["margins"].get("mlps") or []
    if mlps:
        lines += ["", "| layer | MLP | inputs | worst input noise | tolerance | distance to decision boundary |",
                  "|---|---|---|---|---|---|"]
        for m in mlps:
            lines.append(f"| {m['layer']} | {_cell(m['mlp'])} | {_cell(m.get('inputs') or '—')} | "
                         f"{fmt(m.get('worst_input_noise'))} | "
                         f"{fmt(m.get('input_tolerance'))} | {fmt(m.get('distance_to_boundary'))} |")
    inv = report.get("invariants") or {}
    for f in inv.get("failures", []):
        lines.append(f"- invariant failed: {_cell(f)}")
    for n in report.get("notes") or []:
        lines.append(f"- note: {_cell(n)}")
    ce = report.get("counterexample")
    if ce:
        lines += ["", f"## First counterexample ({md(ce['check'])})", "",
                  f"Input: {md(' '.join(ce['input']))} — at position {ce['position']} expected "
                  f"{md(ce['expected'])}, model gave {md(ce['got'])}.", "",
                  "| t | symbol | reference | model | logit gap |", "|---|---|---|---|---|"]
        trace = ce["trace"]
        shown: list[tuple[int | None, Any]] = list(enumerate(trace, 1))
        if len(shown) > 40:  # long traces: the start and the end
            shown = shown[:10] + [(None, None)] + shown[-30:]
        for i, s in shown:
            if i is None:
                lines.append("| … | | | | |")
                continue
            lines.append(f"| {i} | {_cell(s['symbol'])} | {_cell(s['expected'])} | {_cell(s['got'])} | "
                         f"{fmt(s.get('logit_gap'))} |")
    return "\n".join(lines) + "\n"


def write_report(result: VerificationResult, model: CompiledTransformer, out_dir: "str | Path",
                 checkpoint: "str | Path | None" = None, html: bool = True) -> dict[str, Any]:
    """Write report.json, report.md and (``html``) report.html into ``out_dir``, each atomically (a
    kill leaves each file old or new, never torn); return the JSON dict."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = report_dict(result, model, checkpoint)
    write_atomic(out / "report.json", json_text(rep, indent=2, sort_keys=True) + "\n")
    write_atomic(out / "report.md", report_markdown(rep))
    if html:
        write_atomic(out / "report.html", report_html(rep, model))
    return rep
