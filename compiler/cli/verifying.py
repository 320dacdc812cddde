"""``shortcut verify`` and ``shortcut certify``: a checkpoint checked against the reference
(sampled and exhaustive inputs, layer-wise invariants) or proved exact (verify/certify/)."""

from __future__ import annotations

import argparse
import sys

from constructions.checkpoint import load
from constructions.model import resolve_device
from verify.certify import Certificate, certificate_text, recheck
from verify.check import VerificationResult, verify
from verify.cost import CERTIFY_TIME_BUDGET, refuse_hopeless_certificate
from verify.policy import VERIFY_SAMPLING, certificate, certificate_failed, sampling_for
from verify.progress import Progress
from verify.report import (CHANGED, SAMPLED, UNSEALED, failure_text, proved_or_exhaustive, report_dict,
                           verification_status, write_report)
from verify.text import json_text

from ..automata.atomic import write_atomic
from ..automata.errors import InputError
from ..automata.reading import MiB, read_json
from ..usage import EXIT_NOT_EXACT, EXIT_OK
from ..pipeline import require_intact_header
from .args import NON_NEGATIVE, POSITIVE, seconds, writable_dir, writable_file, write_output
from .status import say, still_working


CERTIFICATE_MAX_BYTES = 64 * MiB
"""Largest certificate ``certify --check`` reads: with its obligations, as ``-o`` writes it, a
certificate is under a MiB (``grid:8`` at max_len 1024: 0.65 MiB; ``memory:100`` at 256: 0.45 MiB)."""


REPORT_FILES = ("report.json", "report.md", "report.html")
"""The files ``verify --report DIR`` writes (:func:`verify.report.write_report`)."""


def counterexample_line(ce: dict) -> str:
    return (f"counterexample ({ce['check']}): {' '.join(ce['input'])} -> at position {ce['position']} "
            f"expected {ce['expected']}, got {ce['got']}")


def progress(budget: float | None = None) -> Progress:
    """Verification progress on stderr: positions checked of planned, with an ETA (a line
    rewritten in place on a terminal, a line every 10 s otherwise; nothing for a short run)."""
    return Progress(sys.stderr, budget=budget)


def verdict_line(name: str, result: VerificationResult, checked: dict, max_len: int | None = None,
                 cert: Certificate | None = None) -> str:
    """``verify``'s one-line verdict: exact (proved by ``cert``, or every input up to ``max_len``
    checked), no error found in the samples, or what failed (counterexample position, invariant)."""
    what = (f"{result.n_positions} positions (exhaustive to length {checked['exhaustive_length']}, "
            f"{checked['random_sequences']} random at length {checked['random_length']}, "
            f"{sum(checked['adversarial_families'].values())} adversarial"
            + (f"; cut by the {checked['time_budget_s']:g} s time budget" if checked.get("cut_by_time_budget") else "")
            + ")")
    if result.exact and cert is not None and cert.certified:  # the verdict that holds leads
        return f"{name}: certified exact — the sampled cross-check found 0 errors in {what}"
    if result.exact and proved_or_exhaustive(None, checked["exhaustive_length"], max_len):
        return f"{name}: exact — 0 errors in {what}"
    if result.exact:
        return f"{name}: {SAMPLED} — 0 errors in {what}"
    ce = result.counterexample
    ce_dict = None if ce is None else {"check": ce.check, "position": ce.position, "expected": ce.expected,
                                       "got": ce.got}
    fails = result.invariant_failures
    return f"{name}: NOT exact — {failure_text(result.n_errors, ce_dict, fails)}; checked {what}"


def _warn_stale_summary(model, path: str) -> None:
    """``verify`` says so (on stderr) when the summary stored in the checkpoint no longer matches
    its digests: this run's verdict stands on its own, the stored one does not."""
    status = verification_status(model)
    if status is not None and (status.startswith(CHANGED) or status == UNSEALED):
        print(f"warning: the verification summary stored in {path!r} is {status}; it is not this run's verdict "
              f"(recompile to store a new one)", file=sys.stderr)


def cmd_verify(args: argparse.Namespace) -> int:
    report_dir = (writable_dir(args.report, "report directory", REPORT_FILES, [args.model])
                  if args.report is not None else None)
    device = resolve_device(args.device)
    model = load(args.model)
    require_intact_header(model)
    _warn_stale_summary(model, args.model)
    cert = certificate(model) if args.certify else None
    sampling = sampling_for(cert, VERIFY_SAMPLING).options()  # proved: a cross-check; options override it
    sampling.update({k: getattr(args, k) for k in ("samples", "exhaustive_budget", "family_limit")
                     if getattr(args, k) is not None})
    if report_dir is not None or args.json:
        sampling["layerwise"] = True  # the report shows the sampled margins beside the certificate's
    result = verify(model.to(device), seed=args.seed, **sampling, progress=progress(args.time_budget),
                    time_budget=args.time_budget)
    model.to("cpu")
    result.certificate = cert
    if report_dir is not None:
        rep: dict = {}
        write_output(report_dir, "report", lambda: rep.update(write_report(result, model, report_dir, args.model)))
    else:
        rep = report_dict(result, model, args.model)
    if args.json:
        say(json_text(rep))
    else:
        say(verdict_line(rep["automaton"]["name"], result, rep["checked"], model.max_len, cert))
        if result.counterexample is not None:
            say(counterexample_line(rep["counterexample"]))
        for f in rep.get("invariants", {}).get("failures", []):
            say(f"invariant failed: {f}")
        if cert is not None:
            say(f"certificate: {certificate_text(cert)}")
        if report_dir is not None:
            say(f"report written to {args.report}/report.json, report.md and report.html")
    return EXIT_OK if result.exact and not certificate_failed(cert) else EXIT_NOT_EXACT


def cmd_certify(args: argparse.Namespace) -> int:
    """Prove the model exact on every input up to max_len (verify/certify/), or say why not."""
    output = writable_file(args.output, "certificate", [args.model, args.check]) if args.output is not None else None
    stored = None if args.check is None else read_json(args.check, CERTIFICATE_MAX_BYTES, "certificate", InputError)
    if args.check is not None and not isinstance(stored, dict):
        raise InputError(f"{args.check!r} is not a certificate (not a JSON object)")
    model = load(args.model)
    require_intact_header(model)
    refuse_hopeless_certificate(model, args.time_budget)
    with still_working(f"certifying {model.automaton.name} at max_len {model.max_len:,}"):
        cert = (certificate(model, with_obligations=output is not None) if stored is None
                else recheck(model, stored, with_obligations=output is not None))
    if output is not None:
        write_output(output, "certificate", lambda: write_atomic(output, json_text(cert.to_json(), indent=1) + "\n"))
    if args.json:
        say(json_text({k: v for k, v in cert.to_json().items() if k != "obligations"}))
    else:
        say(f"{model.automaton.name}: {certificate_text(cert)}")
        if args.check is not None:
            say("certificate check: " + ("matches: the same weights and obligations, proved again" if cert.matches
                                           else f"does NOT match ({', '.join(cert.mismatch or []) or 'not proved'})"))
    ok = cert.certified and (args.check is None or cert.matches is True)
    return EXIT_OK if ok else EXIT_NOT_EXACT


def verify_options(v: argparse.ArgumentParser) -> None:
    """``verify``'s arguments."""
    v.add_argument("model", help="a checkpoint written by `shortcut compile`")
    v.add_argument("--report", metavar="DIR", help="write report.json, report.md and report.html into DIR")
    v.add_argument("--samples", type=NON_NEGATIVE, default=None,
                   help="random sequences at full max_len (default: 64), 8 when the certificate holds")
    v.add_argument("--seed", type=NON_NEGATIVE, default=0, help="seed of the random sequences")
    v.add_argument("--exhaustive-budget", type=POSITIVE, default=None,
                   help="largest number of sequences in the exhaustive check (default: 32768), 1024 when the "
                        "certificate holds; refused above the memory limit")
    v.add_argument("--family-limit", type=POSITIVE, default=None,
                   help="at most this many sequences per adversarial family (default: all of them; 2 when the "
                        "certificate holds)")
    v.add_argument("--certify", action=argparse.BooleanOptionalAction, default=True,
                   help="first prove the model exact on every input up to max_len (`shortcut certify`); when the "
                        "proof holds the samples are a small cross-check; --no-certify: sampling only")
    v.add_argument("--time-budget", type=seconds, default=None, metavar="SECONDS",
                   help="stop running further batches of a check once this many seconds are spent (the first "
                        "batch of each check always runs); the report says what was cut (default: no limit)")
    v.add_argument("--device", default="cpu", help="torch device to run the model on (cpu, cuda, cuda:N, mps)")
    v.add_argument("--json", action="store_true", help="the report as one JSON object")
    v.set_defaults(func=cmd_verify)


def certify_options(f: argparse.ArgumentParser) -> None:
    """``certify``'s arguments."""
    f.add_argument("model", help="a checkpoint written by `shortcut compile`")
    f.add_argument("-o", "--output", metavar="CERT", help="write the certificate (JSON) to this file")
    f.add_argument("--check", metavar="CERT", help="re-check a certificate written by -o against this model")
    f.add_argument("--json", action="store_true", help="the certificate as one JSON object")
    f.add_argument("--time-budget", type=seconds, default=CERTIFY_TIME_BUDGET, metavar="SECONDS",
                   help="refuse, before starting, a certificate estimated to need more than this many seconds "
                        f"(the attention scores it bounds at this machine's measured rate; default: "
                        f"{CERTIFY_TIME_BUDGET:g})")
    f.set_defaults(func=cmd_certify)
