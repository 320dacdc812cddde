"""The ``shortcut`` command line (also ``python -m compiler``).

One exit-code contract for every command (:data:`compiler.usage.EXIT_CODES`, printed by
``--help``), applied in one place (:func:`exit_status`): 0 success (and exact), 1 not exact (the
message names the failing check), 2 bad input or environment (one line ``error: ...``), 3
internal error (one line asking for a bug report; the traceback only with ``--debug``).  The
entry point is :func:`compiler.command.main`, which answers ``--version`` and ``--help``
before this module (and torch) loads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from constructions.budget import MAX_PARAMS
from constructions.checkpoint import load, save
from constructions.labels import LABELS, READOUTS, STATES, readout_of
from constructions.model import resolve_device
from constructions.basis import BASES, MAX_SEED
from verify.certify import certificate_text, recheck
from verify.check import LAYERWISE_MAX_LEN, batch_rows, check_options, refuse_hopeless, verify
from verify.policy import (COMPILE_SAMPLING, CROSS_CHECK, VERIFY_SAMPLING, certificate, certificate_failed,
                           sampling_for)
from verify.progress import Progress
from verify.report import (CHANGED, DIGESTS_NOTE, UNSEALED, VERIFIED, failure_text, report_dict, summary_line,
                           verification_status, verification_summary, write_report)
from verify.text import json_text

from .automata.atomic import write_atomic
from .automata.cascade import summary_json, summary_text, to_dot
from .automata.catalog import entries
from .automata.decompose import decompose
from .automata.errors import BudgetError, InputError, ShortcutError
from .automata.formats import parse_alphabet
from .automata.load import load_spec
from .automata.spec import PROMISES
from .automata.version import __version__
from .usage import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_NOT_EXACT, EXIT_OK, error_line, top_parser
from .export import FORMATS, save_transformer_lens, to_transformer_lens
from .zoo.run import MAX_WORKERS, run_zoo, zoo_progress
from .pipeline import (
    DTYPES,
    PREFERENCES,
    candidates,
    compile_automaton,
    methods,
    require_intact_header,
    set_start,
    survey,
)



# --- the exit-code contract ---------------------------------------------------------------


def _silence_stdout() -> None:
    """The reader of stdout went away (``| head``): point stdout at /dev/null so that the
    interpreter's final flush does not complain either."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (e.g. under pytest)
        pass


def _say(text: str) -> None:
    """``print(text)``; when the reader went away (``| head``) the rest is silenced instead of the
    command ending, so its exit status (1: not exact) still stands."""
    try:
        print(text)
    except BrokenPipeError:
        _silence_stdout()


def _flushed(status: int) -> int:
    """``status`` once stdout is flushed; a reader that went away leaves it as it is."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    return status


OUT_OF_MEMORY = ("out of memory: the automaton, its model or the inputs need more memory than this machine has free "
                 "(`shortcut plan` shows the model's size; for verify, fewer samples or a smaller exhaustive budget)")
"""The one line for a MemoryError: the planner's analyses refuse by their budgets before allocating, so
what is left is a model or an input too large for this machine (max_len is rarely the cause)."""


def exit_status(e: BaseException, debug: bool = False) -> int:
    """The one mapping from an exception to an exit status (and its one line on stderr)."""
    if isinstance(e, BrokenPipeError):
        _silence_stdout()
        return EXIT_OK
    if isinstance(e, ShortcutError):
        error_line(str(e))
    elif isinstance(e, KeyboardInterrupt):
        error_line("interrupted")
    elif isinstance(e, MemoryError):
        error_line(OUT_OF_MEMORY)
    elif isinstance(e, OSError):
        error_line(f"{e.strerror or e}" + (f": {e.filename!r}" if e.filename else ""))
    else:
        if debug:
            traceback.print_exc()
        error_line(f"internal error ({type(e).__name__}: {str(e)[:200]}); this is a bug in shortcut {__version__}: "
                    f"please report it with the command that caused it" + ("" if debug else
                                                                            " (rerun with --debug for the traceback)"))
        return EXIT_INTERNAL
    return EXIT_BAD_INPUT


# --- option values ------------------------------------------------------------------------


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    parse.__name__ = "positive integer" if low == 1 else "non-negative integer"
    return parse


POSITIVE, NON_NEGATIVE = _int_at_least(1), _int_at_least(0)


def _int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer from ``low`` to ``high``."""
    at_least = _int_at_least(low)

    def parse(text: str) -> int:
        value = at_least(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {value}")
        return value

    parse.__name__ = f"integer from {low} to {high}"
    return parse


def _seconds(text: str) -> float:
    """A positive number of seconds (a time budget)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


_seconds.__name__ = "seconds"


def _dtype(name: str):
    if name not in DTYPES:
        raise ShortcutError(f"unknown dtype {name!r}; choose one of {list(DTYPES)}")
    return DTYPES[name]


# --- output paths, checked before any work --------------------------------------------------


def writable_file(path: str, what: str) -> Path:
    """``path`` can be written as a file: not empty, not a directory, in an existing writable directory."""
    if not path.strip():
        raise InputError(f"the {what} path is empty")
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{what} {path!r} is a directory; name a file")
    parent = p.parent
    if not parent.is_dir():
        raise InputError(f"cannot write {what} {path!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"cannot write {what} {path!r}: permission denied")
    return p


def writable_dir(path: str, what: str) -> Path:
    """``path`` is, or can be created as, a writable directory."""
    if not path.strip():
        raise InputError(f"the {what} path is empty")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{what} {path!r} exists and is not a directory")
    existing = next(q for q in [p, *p.absolute().parents] if q.exists())
    if not existing.is_dir():
        raise InputError(f"cannot create {what} {path!r}: {str(existing)!r} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"cannot write {what} {path!r}: permission denied in {str(existing)!r}")
    return p


def _write(path: str | Path, what: str, write: Callable[[], object]) -> None:
    """Run ``write``; an OSError (disk full, a race) is bad environment, one line."""
    try:
        write()
    except OSError as e:
        raise InputError(f"cannot write {what} {str(path)!r}: {e.strerror or e}") from None


# --- commands -----------------------------------------------------------------------------


COMPILE_FAMILY_LIMIT = COMPILE_SAMPLING["family_limit"]
"""compile --verify keeps at most this many sequences of each adversarial family."""
COMPILE_VERIFY_SECONDS = 60.0
"""compile --verify's default time budget (--verify-time)."""


def _counterexample_line(ce: dict) -> str:
    return (f"counterexample ({ce['check']}): {' '.join(ce['input'])} -> at position {ce['position']} "
            f"expected {ce['expected']}, got {ce['got']}")


def _refuse_hopeless_verify(args: argparse.Namespace, automaton, device) -> None:
    """Above ``LAYERWISE_MAX_LEN``, refuse (one line, exit 2) before compiling a verification
    that one full-length input would take past ``--verify-time``
    (:func:`verify.check.refuse_hopeless`) through the fewest layers the model can have: the
    requested construction's estimate, or for auto the shallowest that fits (the estimates
    only, no program is built).  Label readouts compile another automaton: left to verify."""
    if args.max_len <= LAYERWISE_MAX_LEN or args.readout != STATES:
        return
    cands, _, _ = survey(automaton, args.max_len, args.positions, args.max_params)
    layers = [c.layers for c in cands if c.layers and (c.fits if args.method == "auto" else c.name == args.method)]
    if layers:
        refuse_hopeless(min(layers), args.max_len, args.verify_time, device)


def cmd_compile(args: argparse.Namespace) -> int:
    output = writable_file(args.output, "output")
    device = resolve_device(args.device)
    alphabet = parse_alphabet(args.alphabet) if args.alphabet is not None else None
    automaton = load_spec(args.spec, complete=args.complete, alphabet=alphabet, promise=args.promise)
    if args.verify:  # refused before compiling, not after: inputs and the reference within their bounds
        try:
            check_options(automaton.n_symbols, max(args.max_len, 1), n_states=automaton.n_states,
                          samples=args.verify_samples, seed=0, exhaustive_budget=args.verify_budget,
                          family_limit=COMPILE_FAMILY_LIMIT)
        except BudgetError as e:
            raise BudgetError(f"{e} (compile with --no-verify to skip verification)") from None
        _refuse_hopeless_verify(args, automaton, device)
    model = compile_automaton(automaton, max_len=args.max_len, method=args.method, dtype=_dtype(args.dtype),
                              positions=args.positions, allow_inexact=args.allow_inexact, readout=args.readout,
                              prefer=args.prefer, max_params=args.max_params, basis=args.basis,
                              basis_seed=args.seed, one_hidden_layer=args.one_hidden_layer)
    exact = True
    if args.verify:  # a modest check, recorded in the checkpoint (bound to its content) so that `info` shows it
        cert = certificate(model) if args.certify else None
        sampling = sampling_for(cert, {"samples": args.verify_samples, "exhaustive_budget": args.verify_budget,
                                       "family_limit": COMPILE_FAMILY_LIMIT})  # proved: only a cross-check
        result = verify(model.to(device), seed=0, **sampling, progress=_progress(args.verify_time),
                        time_budget=args.verify_time)
        model.to("cpu")
        result.certificate = cert
        model.meta = {**model.meta, "verification": verification_summary(result, model)}
        exact = result.exact and not certificate_failed(cert)
    _write(output, "output", lambda: save(model, output))
    for w in model.metadata.warnings:
        print(f"warning: {w}", file=sys.stderr)
    i = model.info()
    _say(f"compiled {i['automaton']} ({i['n_states']} states, {i['n_symbols']} symbols) with {i['method']}: "
          f"{i['n_layers']} layers, d_model {i['d_model']}, d_mlp {i['d_mlp']} "
          f"(up to {i['mlp_hidden_layers']} hidden layers), {i['n_params']} params, "
          f"max_len {i['max_len']}, {i['dtype']} -> {args.output}")
    r = i["readout"]
    if r["kind"] == LABELS:
        on = "the automaton as given" if r.get("states") == "original" else "the minimal Moore machine"
        _say(f"readout: {len(r['labels'])} labels {r['labels']} by {r['form']} on {on}; minimal Moore machine "
              f"{r['states_before']} -> {r['states_after']} states ({r['reachable']} reachable)")
    if args.verify:
        _say(f"verification: {summary_line(model.metadata.verification)}")
        ce = model.metadata.verification["counterexample"]
        if ce is not None:
            _say(_counterexample_line(ce))
        if args.certify:
            _say(f"certificate: {certificate_text(result.certificate)}")
    return EXIT_OK if exact else EXIT_NOT_EXACT


RUN_CHUNK_LINES = 4096
"""Most input lines ``run`` reads before running them and printing their results (the step of its
streaming: results come out in input order, one chunk at a time)."""
RUN_CHUNK_SYMBOLS = 1 << 19
"""Most symbols ``run`` holds in one chunk of input (a chunk also ends at :data:`RUN_CHUNK_LINES`)."""
LINE_SLACK_CHARS = 1 << 16
"""Characters an input line may have beyond max_len symbols of the longest name and their
separators (runs of spaces), before ``run`` stops reading it as longer than any valid line: an
endless input without a line break (``/dev/zero``) ends there, in bounded memory."""


@dataclass
class _Line:
    """One input sequence: where it comes from (for messages) and its text."""

    where: str
    text: str


def _line_limit(model, sep: str | None) -> int:
    """Characters past which one physical input line cannot hold at most max_len symbols
    (see :data:`LINE_SLACK_CHARS`)."""
    longest = max(len(s) for s in model.automaton.alphabet)
    return (model.max_len + 1) * (longest + max(len(sep or " "), 1)) + LINE_SLACK_CHARS


def _file_lines(stream, name: str, limit: int) -> Iterator[_Line]:
    """The lines of an open text stream, read lazily; a line is what ``str.splitlines`` splits
    (as when the whole text was split at once).  InputError for text that is not UTF-8 and for
    a physical line over ``limit`` characters (naming its line number)."""
    number = 0
    while True:
        try:
            physical = stream.readline(limit + 1)
        except UnicodeDecodeError:
            raise InputError(f"input file {name!r} is not UTF-8 text (line {number + 1}); give one sequence of "
                             f"symbols per line") from None
        if not physical:
            return
        if len(physical) > limit and not physical.endswith(("\n", "\r")):
            raise InputError(f"line {number + 1} of {name!r} has more than {limit:,} characters without a line "
                             f"break: longer than any sequence of at most max_len symbols")
        for text in physical.splitlines() or [""]:
            number += 1
            yield _Line(f"line {number} of {name!r}", text)


def _input_lines(args: argparse.Namespace, limit: int) -> Iterator[_Line]:
    """``--input`` then the lines of ``--input-file`` ('-': stdin), lazily."""
    if args.input is not None:
        yield _Line("--input", args.input)
    if args.input_file is None:
        return
    if args.input_file == "-":
        yield from _file_lines(sys.stdin, "-", limit)
        return
    try:
        stream = open(args.input_file, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read input file {args.input_file!r}: {e.strerror}") from None
    with stream:
        try:
            yield from _file_lines(stream, args.input_file, limit)
        except OSError as e:
            raise InputError(f"cannot read input file {args.input_file!r}: {e.strerror}") from None


def _split(line: str, sep: str | None) -> list[str]:
    """The symbols of one input line: split on whitespace, or on ``sep`` (each symbol stripped;
    a blank line is the empty sequence, an empty field an empty symbol, which no alphabet has)."""
    if sep is None:
        return line.split()
    if sep == "":
        raise InputError("--sep must not be empty")
    return [sym.strip() for sym in line.split(sep)] if line.strip() else []


def _token_chunks(model, lines: Iterator[_Line], sep: str | None) -> Iterator[list[list[int]]]:
    """The token ids of ``lines``, checked (InputError naming the line: an unknown symbol, more
    than max_len symbols) and grouped in chunks of at most :data:`RUN_CHUNK_LINES` lines and
    about :data:`RUN_CHUNK_SYMBOLS` symbols; no input at all is an InputError."""
    chunk: list[list[int]] = []
    symbols, seen = 0, False
    for line in lines:
        seen = True
        ids = model.word_ids(_split(line.text, sep), line.where)
        chunk.append(ids)
        symbols += len(ids)
        if len(chunk) >= RUN_CHUNK_LINES or symbols >= RUN_CHUNK_SYMBOLS:
            yield chunk
            chunk, symbols = [], 0
    if not seen:
        raise InputError("no input: give --input \"a b a\" or --input-file FILE (one sequence per line)")
    if chunk:
        yield chunk


def _run_line(states: list[str], as_json: bool, labels: bool, outputs: dict[str, Any] | None) -> str:
    """One result line of ``run``: the states (labels) separated by spaces, or a JSON record."""
    if not as_json:
        return " ".join(states)
    rec: dict[str, Any] = {"labels" if labels else "states": states}
    if outputs is not None and not labels:
        rec["outputs"] = [outputs[s] for s in states]
    return json_text(rec)


def cmd_run(args: argparse.Namespace) -> int:
    """Run the model on every input line, in batches (sequences of one length in one forward,
    :func:`verify.check.batch_rows` of them at most), printing the results in input order one
    chunk at a time.  A regular input file is checked whole first (an error prints nothing, as
    when everything was read at once); from a pipe or device the results of the chunks before a
    bad line are already printed."""
    device = resolve_device(args.device)
    model = load(args.model)
    if args.start is not None:
        set_start(model, args.start)
    if args.sep == "":
        raise InputError("--sep must not be empty")
    limit = _line_limit(model, args.sep)
    if args.input_file not in (None, "-") and Path(args.input_file).is_file():
        for _ in _token_chunks(model, _input_lines(args, limit), args.sep):
            pass
    a = model.automaton
    labels = readout_of(model.meta) is not None
    outputs = dict(zip(a.states, a.outputs)) if a.outputs is not None else None
    model = model.to(device)
    for chunk in _token_chunks(model, _input_lines(args, limit), args.sep):
        results = model.simulate_ids(chunk, lambda T: batch_rows(model, T))
        print("\n".join(_run_line(states, args.json, labels, outputs) for states in results), flush=True)
    return 0


def _dims_text(dims: list[int]) -> str:
    """Residual indices as ranges: [0, 2, 3, 4] -> '0,2-4'."""
    runs: list[list[int]] = []
    for d in dims:
        if runs and d == runs[-1][1] + 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    return [(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in rows]


def layout_text(layout: dict) -> list[str]:
    """``info --layout``: the subspaces (residual dims), then per layer each head's query/key/value
    reads and writes and the MLP's reads and writes, by subspace name, in aligned columns."""
    names = lambda xs: ", ".join(xs) or "-"
    subspaces = sorted(layout["subspaces"].items(), key=lambda kv: min(kv[1]["dims"], default=-1))
    lines = ["subspaces:"]
    lines += _table([(name, _dims_text(s["dims"]), f"{len(s['dims'])} dim{'s' * (len(s['dims']) != 1)}")
                     for name, s in subspaces])
    rows: list[tuple[str, ...]] = []
    starts: dict[int, list[int]] = {}  # index into rows -> the layers starting there
    for block in layout["blocks"]:
        starts.setdefault(len(rows), []).append(block["layer"])
        for h in block["heads"]:
            r = h["reads"]
            rows += [(f"head {h['index']}", h["name"], "query", names(r["query"])),
                     ("", "", "key", names(r["key"])), ("", "", "value", names(r["value"])),
                     ("", "", "write", names(h["writes"]))]
        m = block["mlp"]
        if m is not None:
            hidden = "x".join(str(w) for w in m["hidden"])
            rows += [("mlp", m["name"], "read", names(m["reads"])),
                     ("", f"hidden {hidden}", "write", names(m["writes"]))]
    for i, line in enumerate([*_table(rows), None]):
        lines += [f"layer {layer}:" for layer in starts.get(i, [])]
        if line is not None:
            lines.append(line)
    return lines


def _verification_line(model) -> str:
    """``info``'s verdict: the stored summary, whether it still describes these weights and header
    and is itself unchanged, and what such digests are worth (:data:`DIGESTS_NOTE`)."""
    summary, status = model.metadata.verification, verification_status(model)
    if status is None:
        return "verification: none stored (compiled with --no-verify; run `shortcut verify`)"
    if status == VERIFIED:
        line = summary_line(summary, status)
    elif status.startswith(CHANGED) or status == UNSEALED:
        line = f"{status}; run `shortcut verify` (stored verdict: {summary_line(summary)})"
    else:  # a summary without digests: nothing to say about them
        return f"verification: {summary_line(summary, status)}"
    return f"verification: {line}\nintegrity: {DIGESTS_NOTE}"


def _certificate_line(model) -> str:
    """``info``'s certificate line: "certified exact ..." only for a stored certificate that held and
    is bound to these weights and this header (the verification summary's digests match)."""
    summary = model.metadata.verification
    cert = summary.get("certificate") if isinstance(summary, dict) else None
    if not isinstance(cert, dict):
        return "certificate: none stored (run `shortcut certify`)"
    if verification_status(model) != VERIFIED:  # the summary's digests cover the weights, the header and itself
        return "certificate: stored, but the model changed since; run `shortcut certify`"
    return f"certificate: {certificate_text(cert)}"


def candidates_text(cands: list[dict]) -> list[str]:
    """The planner's candidates as an aligned table: construction, theorem, whether it applies,
    attention layers, parameters, whether it fits the budgets, and why it was (``*``) or was
    not taken.  Tolerates the shorter records of older checkpoints."""
    num = lambda x: "-" if x is None else (f"{x:,}" if isinstance(x, int) else str(x))
    yes = lambda x: "-" if x is None else ("yes" if x else "no")
    rows = [("", "construction", "theorem", "applies", "layers", "params", "fits", "why (not)")]
    for c in cands:
        rows.append(("*" if c.get("chosen") else "", str(c.get("name")), str(c.get("theorem", "")),
                     yes(c.get("applies", c.get("layers") is not None)), num(c.get("layers")), num(c.get("params")),
                     yes(c.get("fits", c.get("refusal") is None)),
                     " ".join(str(c.get("refusal") or c.get("note") or "").split())))
    return _table(rows, indent="")


def _stored_candidates(model) -> list[dict] | None:
    """``meta["candidates"]`` when it is a list of records (None for an absent or edited one)."""
    cands = model.meta.get("candidates")
    if isinstance(cands, list) and cands and all(isinstance(c, dict) for c in cands):
        return cands
    return None


def cmd_plan(args: argparse.Namespace) -> int:
    alphabet = parse_alphabet(args.alphabet) if args.alphabet is not None else None
    automaton = load_spec(args.spec, complete=args.complete, alphabet=alphabet, promise=args.promise)
    result = candidates(automaton, max_len=args.max_len, prefer=args.prefer,
                        positions=args.positions, max_params=args.max_params, dtype=_dtype(args.dtype),
                        allow_inexact=args.allow_inexact)
    if args.json:
        print(json_text(result))
    else:
        print(f"plan for {result['automaton']} at max_len {args.max_len} (prefer {args.prefer}, "
              f"budget {args.max_params:,} parameters):")
        print("\n".join(candidates_text(result["candidates"])))
        if result["chosen"] is not None:
            print(f"chosen: {result['chosen']} -- {result['why']}")
    if result["error"] is not None:
        raise ShortcutError(result["error"])
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    model = load(args.model)
    if args.layout:
        try:
            layout = model.layout()
            text = json_text(layout) if args.json else "\n".join(layout_text(layout))
        except KeyError as e:
            raise ShortcutError(str(e.args[0])) from None
        except (TypeError, ValueError, AttributeError, IndexError) as e:
            raise ShortcutError(f"the stored layout of {args.model!r} is malformed ({type(e).__name__})") from None
        print(text)
        return EXIT_OK
    cands = _stored_candidates(model)
    status = verification_status(model)
    info = {**model.info(), "candidates": cands, "verification_status": status,
            "verification_digests": None if status is None else DIGESTS_NOTE}
    if args.json:
        print(json_text(info))
        return EXIT_OK
    for k, v in info.items():
        if k not in ("verification", "verification_status", "verification_digests", "candidates"):
            print(f"{k}: {v}")
    if cands is not None:
        print("candidates:")
        print("\n".join(candidates_text(cands)))
    print(_verification_line(model))
    print(_certificate_line(model))
    return EXIT_OK


def _progress(budget: float | None = None) -> Progress:
    """Verification progress on stderr: positions checked of planned, with an ETA (a line
    rewritten in place on a terminal, a line every 10 s otherwise; nothing for a short run)."""
    return Progress(sys.stderr, budget=budget)


def verdict_line(name: str, result, checked: dict) -> str:
    """``verify``'s one-line verdict: exact, or what failed (counterexample position, invariant)."""
    what = (f"{result.n_positions} positions (exhaustive to length {checked['exhaustive_length']}, "
            f"{checked['random_sequences']} random at length {checked['random_length']}, "
            f"{sum(checked['adversarial_families'].values())} adversarial"
            + (f"; cut by the {checked['time_budget_s']:g} s time budget" if checked.get("cut_by_time_budget") else "")
            + ")")
    if result.exact:
        return f"{name}: exact — 0 errors in {what}"
    ce = result.counterexample
    ce_dict = None if ce is None else {"check": ce.check, "position": ce.position, "expected": ce.expected,
                                       "got": ce.got}
    fails = result.invariants.get("failures", [])
    return f"{name}: NOT exact — {failure_text(result.n_errors, ce_dict, fails)}; checked {what}"


def _warn_stale_summary(model, path: str) -> None:
    """``verify`` says so (on stderr) when the summary stored in the checkpoint no longer matches
    its digests: this run's verdict stands on its own, the stored one does not."""
    status = verification_status(model)
    if status is not None and (status.startswith(CHANGED) or status == UNSEALED):
        print(f"warning: the verification summary stored in {path!r} is {status}; it is not this run's verdict "
              f"(recompile to store a new one)", file=sys.stderr)


def cmd_verify(args: argparse.Namespace) -> int:
    report_dir = writable_dir(args.report, "report directory") if args.report is not None else None
    device = resolve_device(args.device)
    model = load(args.model)
    require_intact_header(model)
    _warn_stale_summary(model, args.model)
    cert = certificate(model) if args.certify else None
    defaults = CROSS_CHECK if cert is not None and cert["certified"] else VERIFY_SAMPLING  # proved: a cross-check
    sampling = {k: v if getattr(args, k) is None else getattr(args, k) for k, v in defaults.items()}
    result = verify(model.to(device), seed=args.seed, **sampling, progress=_progress(args.time_budget),
                    time_budget=args.time_budget)
    model.to("cpu")
    result.certificate = cert
    if report_dir is not None:
        rep: dict = {}
        _write(report_dir, "report", lambda: rep.update(write_report(result, model, report_dir, args.model)))
    else:
        rep = report_dict(result, model, args.model)
    if args.json:
        _say(json_text(rep))
    else:
        _say(verdict_line(rep["automaton"]["name"], result, rep["checked"]))
        if result.counterexample is not None:
            _say(_counterexample_line(rep["counterexample"]))
        for f in rep.get("invariants", {}).get("failures", []):
            _say(f"invariant failed: {f}")
        if cert is not None:
            _say(f"certificate: {certificate_text(cert)}")
        if report_dir is not None:
            _say(f"report written to {args.report}/report.json, report.md and report.html")
    return EXIT_OK if result.exact and not certificate_failed(cert) else EXIT_NOT_EXACT


def cmd_certify(args: argparse.Namespace) -> int:
    """Prove the model exact on every input up to max_len (verify/certify.py), or say why not."""
    output = writable_file(args.output, "certificate") if args.output is not None else None
    model = load(args.model)
    require_intact_header(model)
    if args.check is not None:
        try:
            stored = json.loads(Path(args.check).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"cannot read the certificate {args.check!r}: {e}") from None
        if not isinstance(stored, dict):
            raise InputError(f"{args.check!r} is not a certificate (not a JSON object)")
        cert = recheck(model, stored, with_obligations=output is not None)
    else:
        cert = certificate(model, with_obligations=output is not None)
    if output is not None:
        _write(output, "certificate", lambda: write_atomic(output, json_text(cert, indent=1) + "\n"))
    if args.json:
        _say(json_text({k: v for k, v in cert.items() if k != "obligations"}))
    else:
        _say(f"{model.automaton.name}: {certificate_text(cert)}")
        if args.check is not None:
            _say("certificate check: " + ("matches: the same weights and obligations, proved again" if cert["matches"]
                                            else f"does NOT match ({', '.join(cert['mismatch']) or 'not proved'})"))
    ok = cert["certified"] and (args.check is None or cert["matches"])
    return EXIT_OK if ok else EXIT_NOT_EXACT


def cmd_export(args: argparse.Namespace) -> int:
    out = writable_dir(args.output, "output directory")
    model = load(args.model)
    export = to_transformer_lens(model)
    paths: list = []
    _write(out, "output directory", lambda: paths.extend(save_transformer_lens(export, out)))
    c = export.config
    scratch = c["d_model"] - model.config["d_model"]
    print(f"exported {model.automaton.name} ({model.metadata.method}) for TransformerLens: {c['n_layers']} blocks "
          f"from {len(model.blocks)} layers, d_model {c['d_model']} ({scratch} scratch), {c['n_heads']} heads, "
          f"d_mlp {c['d_mlp']} -> {', '.join(str(p) for p in paths)}")
    return EXIT_OK


def _promise_option(parser: argparse.ArgumentParser) -> None:
    """``--promise legal``: a partial automaton's missing transitions are never taken (docs/promises.md)."""
    parser.add_argument("--promise", choices=list(PROMISES), default=None,
                        help="legal: a partial automaton's missing transitions are promised never taken; the model "
                             "is exact on legal inputs only and run refuses others (the alternative to --complete)")


def cmd_decompose(args: argparse.Namespace) -> int:
    dot = writable_file(args.dot, "DOT file") if args.dot is not None else None
    cascade = decompose(load_spec(args.spec, complete=args.complete, promise=args.promise))
    if dot is not None:
        _write(dot, "DOT file", lambda: write_atomic(dot, to_dot(cascade)))
    print(json_text(summary_json(cascade)) if args.json else summary_text(cascade))
    return EXIT_OK


def cmd_zoo(args: argparse.Namespace) -> int:
    """Make (or resume) a zoo of verified models (compiler/zoo): exit 1 when one is not exact."""
    out = writable_dir(args.output, "zoo directory")
    summary = run_zoo(args.config, out, workers=args.workers, limit=args.limit, ray=args.ray, progress=zoo_progress())
    print(summary.text())
    print(f"manifest: {out / 'manifest.jsonl'}")
    return EXIT_NOT_EXACT if summary.by_status.get("not_exact") else EXIT_OK


def cmd_catalog(args: argparse.Namespace) -> int:
    rows = entries()
    w = max(len(e.pattern) for e in rows)
    for e in rows:
        print(f"{e.pattern:<{w}}  {e.description}  (e.g. {e.example})")
    return EXIT_OK


# --- the parser -----------------------------------------------------------------------------


def _planner_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prefer", default="depth", choices=list(PREFERENCES),
                   help="what auto minimises: depth (fewest attention layers, then parameters) or size (fewest "
                        "parameters within one layer of the shallowest)")
    p.add_argument("--max-params", type=POSITIVE, default=MAX_PARAMS,
                   help="parameter budget (at most the default): auto passes over constructions above it")


def build_parser() -> argparse.ArgumentParser:
    p, subs = top_parser()

    c = subs["compile"]
    c.add_argument("spec", help="a JSON spec or transition-table file, an AALpy .dot file, a .npz table, "
                                "regex:PATTERN or a catalog name (see `shortcut catalog`)")
    c.add_argument("--alphabet", help="the letters of a regex:PATTERN, comma-separated (default: those it uses)")
    c.add_argument("--readout", default=STATES, choices=list(READOUTS),
                   help="what the argmax is: the state, or the spec's output label (labels: the minimal Moore "
                        "machine is compiled)")
    c.add_argument("-o", "--output", required=True, help="the .safetensors file to write")
    c.add_argument("--max-len", type=int, default=128, help="longest input the model must simulate exactly")
    c.add_argument("--method", default="auto", choices=methods(), help="the construction (auto: the planner picks)")
    _planner_options(c)
    c.add_argument("--dtype", default="float32", choices=list(DTYPES), help="weights' float type")
    c.add_argument("--positions", default="sinusoidal", choices=["sinusoidal", "circle"],
                   help="position code of the scan construction")
    c.add_argument("--complete", action="store_true",
                   help="send a partial automaton's missing transitions to an added sink state")
    _promise_option(c)
    c.add_argument("--allow-inexact", action="store_true",
                   help="compile even where the construction's worst-case float bound is not certified at this "
                        "max_len and dtype (otherwise exit 2)")
    c.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="verify after compiling (on by default; a modest check; store the summary in the "
                        "checkpoint, exit 1 if not exact); --no-verify skips it")
    c.add_argument("--certify", action=argparse.BooleanOptionalAction, default=True,
                   help="with --verify, first prove the model exact on every input up to max_len and store the "
                        "certificate in the checkpoint (--no-certify: sampling only)")
    c.add_argument("--verify-samples", type=NON_NEGATIVE, default=COMPILE_SAMPLING["samples"],
                   help="random full-length sequences for --verify")
    c.add_argument("--verify-budget", type=POSITIVE, default=COMPILE_SAMPLING["exhaustive_budget"],
                   help="exhaustive-check budget for --verify")
    c.add_argument("--verify-time", type=_seconds, default=COMPILE_VERIFY_SECONDS, metavar="SECONDS",
                   help="time budget of --verify: further batches of a check are skipped once it is spent (the "
                        "first batch of each check always runs); the stored summary says what was cut")
    c.add_argument("--device", default="cpu", help="torch device for --verify (cpu, cuda, cuda:N, mps)")
    c.add_argument("--basis", default=BASES[0], choices=list(BASES),
                   help="the residual stream's basis: standard (named, axis-aligned dims) or orthogonal (a random "
                        "rotation of it, and random orthogonal maps inside each head; the same function)")
    c.add_argument("--seed", type=_int_in(0, MAX_SEED), default=0, help="seed of --basis orthogonal")
    c.add_argument("--one-hidden-layer", action="store_true",
                   help="MLPs with one hidden layer where the construction can (lookback, local): the "
                        "TransformerLens export then needs no unfolding (docs/interop.md)")
    c.set_defaults(func=cmd_compile)

    n = subs["plan"]
    n.add_argument("spec", help="a spec as `compile` takes it (JSON, table, .dot, .npz, regex:PATTERN or a catalog name)")
    n.add_argument("--alphabet", help="the letters of a regex:PATTERN, comma-separated (default: those it uses)")
    n.add_argument("--max-len", type=int, default=128, help="longest input the model must simulate exactly")
    _planner_options(n)
    n.add_argument("--positions", default="sinusoidal", choices=["sinusoidal", "circle"],
                   help="position code of the scan construction")
    n.add_argument("--complete", action="store_true",
                   help="send a partial automaton's missing transitions to an added sink state")
    _promise_option(n)
    n.add_argument("--dtype", default="float32", choices=list(DTYPES), help="weights' float type")
    n.add_argument("--allow-inexact", action="store_true",
                   help="take constructions beyond their certified float reach at this max_len and dtype too")
    n.add_argument("--json", action="store_true", help="the candidates and the choice as one JSON object")
    n.set_defaults(func=cmd_plan)

    r = subs["run"]
    r.add_argument("model", help="a checkpoint written by `shortcut compile`")
    r.add_argument("--input", help="one sequence of symbols")
    r.add_argument("--input-file", help="one sequence per line ('-' for stdin)")
    r.add_argument("--sep", help="split each input line on SEP instead of whitespace (symbols are stripped)")
    r.add_argument("--json", action="store_true", help="one JSON object per sequence")
    r.add_argument("--start", help="read out from this start state instead of the spec's")
    r.add_argument("--device", default="cpu", help="torch device to run on (cpu, cuda, cuda:N, mps)")
    r.set_defaults(func=cmd_run)

    i = subs["info"]
    i.add_argument("model", help="a checkpoint written by `shortcut compile`")
    i.add_argument("--json", action="store_true", help="the description as one JSON object")
    i.add_argument("--layout", action="store_true",
                   help="what each head and MLP reads and writes, by residual subspace (with --json: the layout JSON)")
    i.set_defaults(func=cmd_info)

    v = subs["verify"]
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
    v.add_argument("--time-budget", type=_seconds, default=None, metavar="SECONDS",
                   help="stop running further batches of a check once this many seconds are spent (the first "
                        "batch of each check always runs); the report says what was cut (default: no limit)")
    v.add_argument("--device", default="cpu", help="torch device to run the model on (cpu, cuda, cuda:N, mps)")
    v.add_argument("--json", action="store_true", help="the report as one JSON object")
    v.set_defaults(func=cmd_verify)

    f = subs["certify"]
    f.add_argument("model", help="a checkpoint written by `shortcut compile`")
    f.add_argument("-o", "--output", metavar="CERT", help="write the certificate (JSON) to this file")
    f.add_argument("--check", metavar="CERT", help="re-check a certificate written by -o against this model")
    f.add_argument("--json", action="store_true", help="the certificate as one JSON object")
    f.set_defaults(func=cmd_certify)

    x = subs["export"]
    x.add_argument("model", help="a checkpoint written by `shortcut compile`")
    x.add_argument("--format", default=FORMATS[0], choices=list(FORMATS), help="the target layout")
    x.add_argument("-o", "--output", required=True, metavar="DIR", help="the directory to write (created)")
    x.set_defaults(func=cmd_export)

    d = subs["decompose"]
    d.add_argument("spec", help="a JSON spec file or a catalog name")
    d.add_argument("--complete", action="store_true",
                   help="send a partial automaton's missing transitions to an added sink state")
    _promise_option(d)
    d.add_argument("--json", action="store_true", help="the cascade summary as JSON")
    d.add_argument("--dot", metavar="FILE", help="also write the cascade as a Graphviz DOT graph")
    d.set_defaults(func=cmd_decompose)

    z = subs["zoo"]
    z.add_argument("config", help="the zoo config (TOML, or JSON for *.json): families of models, see docs/zoo.md")
    z.add_argument("-o", "--output", required=True, metavar="DIR", help="the zoo directory (created; resumed if it exists)")
    z.add_argument("--workers", type=_int_in(1, MAX_WORKERS), default=1, help="worker processes (or Ray CPUs)")
    z.add_argument("--limit", type=POSITIVE, default=None, help="only the config's first N models")
    z.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run on Ray (the [ray] extra): a local cluster, or the cluster at ADDRESS")
    z.set_defaults(func=cmd_zoo)

    k = subs["catalog"]
    k.set_defaults(func=cmd_catalog)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every outcome is an exit status of :data:`EXIT_CODES` (see :func:`exit_status`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        return _flushed(args.func(args))
    except SystemExit:  # --help and --version
        raise
    except BaseException as e:  # noqa: BLE001 - the one place every failure becomes an exit status
        return exit_status(e, debug="--debug" in argv)


if __name__ == "__main__":
    sys.exit(main())
