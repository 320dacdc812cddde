"""``shortcut compile``: plan, build, optionally verify and certify, write the checkpoint."""

from __future__ import annotations

import argparse
import sys

from constructions.checkpoint import save
from constructions.labels import LABELS, READOUTS, STATES
from constructions.model import resolve_device
from constructions.basis import BASES, MAX_SEED
from verify.certify import certificate_text
from verify.check import LAYERWISE_MAX_LEN, check_options, verify
from verify.cost import refuse_hopeless
from verify.policy import COMPILE_SAMPLING, Sampling, certificate, certificate_failed, sampling_for
from verify.report import summary_line, verification_summary

from ..automata.errors import BudgetError
from ..automata.formats import parse_alphabet
from ..automata.load import load_spec
from ..usage import EXIT_NOT_EXACT, EXIT_OK
from ..label_planner import default_readout
from ..pipeline import DTYPES, compile_automaton, methods, survey
from .args import (NON_NEGATIVE, POSITIVE, dtype_of, int_in, isymbols_option, planner_options, promise_option, seconds,
                   writable_file, write_output)
from .status import say, still_working
from .verifying import counterexample_line, progress


COMPILE_FAMILY_LIMIT = COMPILE_SAMPLING.family_limit
"""compile --verify keeps at most this many sequences of each adversarial family."""
COMPILE_VERIFY_SECONDS = 60.0
"""compile --verify's default time budget (--verify-time)."""


def _refuse_hopeless_verify(args: argparse.Namespace, automaton, device) -> None:
    """Above ``LAYERWISE_MAX_LEN``, refuse (one line, exit 2) before compiling a verification
    that one full-length input would take past ``--verify-time``
    (:func:`verify.cost.refuse_hopeless`) through the fewest layers the model can have: the
    requested construction's estimate, or for auto the shallowest that fits (the estimates
    only, no program is built).  Label readouts compile another automaton: left to verify."""
    if args.max_len <= LAYERWISE_MAX_LEN or args.readout != STATES:
        return
    cands, _, _ = survey(automaton, args.max_len, args.positions, args.max_params)
    layers = [c.layers for c in cands if c.layers and (c.fits if args.method == "auto" else c.name == args.method)]
    if layers:
        refuse_hopeless(min(layers), args.max_len, args.verify_time, device)


def cmd_compile(args: argparse.Namespace) -> int:
    output = writable_file(args.output, "output", [args.spec])
    device = resolve_device(args.device)
    alphabet = parse_alphabet(args.alphabet) if args.alphabet is not None else None
    with still_working(f"reading {args.spec[:60]!r}"):
        automaton = load_spec(args.spec, complete=args.complete, alphabet=alphabet, promise=args.promise,
                              isymbols=args.isymbols)
    args.readout = default_readout(automaton) if args.readout is None else args.readout
    if args.verify:  # refused before compiling, not after: inputs and the reference within their bounds
        try:
            check_options(automaton.n_symbols, max(args.max_len, 1), n_states=automaton.n_states,
                          samples=args.verify_samples, seed=0, exhaustive_budget=args.verify_budget,
                          family_limit=COMPILE_FAMILY_LIMIT)
        except BudgetError as e:
            raise BudgetError(f"{e} (compile with --no-verify to skip verification)") from None
        _refuse_hopeless_verify(args, automaton, device)
    with still_working(f"planning and building {automaton.n_states:,} states x {automaton.n_symbols:,} letters"):
        model = compile_automaton(automaton, max_len=args.max_len, method=args.method, dtype=dtype_of(args.dtype),
                                  positions=args.positions, allow_inexact=args.allow_inexact, readout=args.readout,
                                  prefer=args.prefer, max_params=args.max_params, basis=args.basis,
                                  basis_seed=args.seed, one_hidden_layer=args.one_hidden_layer, shape=args.shape)
    exact, summary = True, None
    if args.verify:  # a modest check, recorded in the checkpoint (bound to its content) so that `info` shows it
        with still_working(f"certifying at max_len {args.max_len:,}"):
            cert = certificate(model) if args.certify else None
        asked = Sampling(args.verify_samples, args.verify_budget, COMPILE_FAMILY_LIMIT)
        sampling = sampling_for(cert, asked)  # proved: only a cross-check
        result = verify(model.to(device), seed=0, **sampling.options(), progress=progress(args.verify_time),
                        time_budget=args.verify_time)
        model.to("cpu")
        result.certificate = cert
        summary = verification_summary(result, model)
        model.meta = {**model.meta, "verification": summary}
        exact = result.exact and not certificate_failed(cert)
    write_output(output, "output", lambda: save(model, output))
    for w in model.metadata.warnings:
        print(f"warning: {w}", file=sys.stderr)
    i = model.info()
    say(f"compiled {i['automaton']} ({i['n_states']} states, {i['n_symbols']} symbols) with {i['method']}: "
        f"{i['n_layers']} layers, d_model {i['d_model']}, d_mlp {i['d_mlp']} "
        f"(up to {i['mlp_hidden_layers']} hidden layers), {i['n_params']} params, "
        f"max_len {i['max_len']}, {i['dtype']}, {i['shape']} shape -> {args.output}")
    r = i["readout"]
    if r["kind"] == LABELS:
        on = "the automaton as given" if r.get("states") == "original" else "the minimal Moore machine"
        say(f"readout: {len(r['labels'])} labels {r['labels']} by {r['form']} on {on}; minimal Moore machine "
            f"{r['states_before']} -> {r['states_after']} states ({r['reachable']} reachable)")
        if "mealy" in r:
            m = r["mealy"]
            say(f"Mealy machine: {m['states_before']} states ({m['reachable']} reachable) -> {m['states_after']} "
                f"minimised by its {m['outputs']} outputs; the labels are the outputs of its {m['transitions']} "
                f"transitions")
    if summary is not None:
        say(f"verification: {summary_line(summary, max_len=i['max_len'])}")
        ce = summary["counterexample"]
        if ce is not None:
            say(counterexample_line(ce))
        if args.certify:
            say(f"certificate: {certificate_text(result.certificate)}")
    return EXIT_OK if exact else EXIT_NOT_EXACT


def compile_options(c: argparse.ArgumentParser) -> None:
    """``compile``'s arguments."""
    c.add_argument("spec", help="a JSON spec or transition-table file, an AALpy .dot file, a .npz table, "
                                "regex:PATTERN or a catalog name (see `shortcut catalog`)")
    c.add_argument("--alphabet", help="the letters of a regex:PATTERN, comma-separated (default: those it uses)")
    c.add_argument("--readout", choices=list(READOUTS),
                   help="what the argmax is: the state, or the spec's output label (labels: the minimal Moore "
                        "machine is compiled; the default for a Mealy machine, whose labels are its outputs)")
    c.add_argument("-o", "--output", required=True, help="the .safetensors file to write")
    c.add_argument("--max-len", type=int, default=128, help="longest input the model must simulate exactly")
    c.add_argument("--method", default="auto", choices=methods(), help="the construction (auto: the planner picks)")
    planner_options(c)
    c.add_argument("--dtype", default="float32", choices=list(DTYPES), help="weights' float type")
    c.add_argument("--positions", default="sinusoidal", choices=["sinusoidal", "circle"],
                   help="position code of the scan construction")
    c.add_argument("--complete", action="store_true",
                   help="send a partial automaton's missing transitions to an added sink state")
    promise_option(c)
    isymbols_option(c)
    c.add_argument("--allow-inexact", action="store_true",
                   help="compile even where the construction's worst-case float bound is not certified at this "
                        "max_len and dtype (otherwise exit 2)")
    c.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="verify after compiling (on by default; a modest check; store the summary in the "
                        "checkpoint, exit 1 if not exact); --no-verify skips it")
    c.add_argument("--certify", action=argparse.BooleanOptionalAction, default=True,
                   help="with --verify, first prove the model exact on every input up to max_len and store the "
                        "certificate in the checkpoint (--no-certify: sampling only)")
    c.add_argument("--verify-samples", type=NON_NEGATIVE, default=COMPILE_SAMPLING.samples,
                   help="random full-length sequences for --verify")
    c.add_argument("--verify-budget", type=POSITIVE, default=COMPILE_SAMPLING.exhaustive_budget,
                   help="exhaustive-check budget for --verify")
    c.add_argument("--verify-time", type=seconds, default=COMPILE_VERIFY_SECONDS, metavar="SECONDS",
                   help="time budget of --verify: further batches of a check are skipped once it is spent (the "
                        "first batch of each check always runs); the stored summary says what was cut")
    c.add_argument("--device", default="cpu", help="torch device for --verify (cpu, cuda, cuda:N, mps)")
    c.add_argument("--basis", default=BASES[0], choices=list(BASES),
                   help="the residual stream's basis: standard (named, axis-aligned dims) or orthogonal (a random "
                        "rotation of it, and random orthogonal maps inside each head; the same function)")
    c.add_argument("--seed", type=int_in(0, MAX_SEED), default=0, help="seed of --basis orthogonal")
    c.add_argument("--one-hidden-layer", action="store_true",
                   help="MLPs with one hidden layer where the construction can (lookback, local): the "
                        "TransformerLens export then needs no unfolding (docs/interop.md)")
    c.set_defaults(func=cmd_compile)
