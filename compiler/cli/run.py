"""``shortcut run``: a checkpoint on input sequences, read lazily in chunks of lines."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from constructions.checkpoint import load
from constructions.labels import readout_of
from constructions.model import resolve_device
from verify.cost import batch_rows
from verify.text import json_text

from ..automata.errors import InputError
from ..pipeline import set_start


RUN_CHUNK_LINES = 4096
"""Most input lines ``run`` reads before running them and printing their results (the step of its
streaming: results come out in input order, one chunk at a time)."""
RUN_CHUNK_SYMBOLS = 1 << 19
"""Most symbols ``run`` holds in one chunk of input (a chunk also ends at :data:`RUN_CHUNK_LINES`)."""
LINE_SLACK_CHARS = 1 << 16
"""Characters an input line may have beyond max_len symbols of the longest name and their
separators (runs of spaces), before ``run`` stops reading it as longer than any valid line: an
endless input without a line break (``/dev/zero``) ends there, in bounded memory."""

SEP_MAX_CHARS = 64
"""Longest ``--sep``: the line limit grows with the separator's length times max_len (a
100,000-character separator let ``run`` read 10 GB of ``/dev/zero`` as one line); a separator
between symbols needs a few characters."""


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
    :func:`verify.cost.batch_rows` of them at most), printing the results in input order one
    chunk at a time.  A regular input file is checked whole first (an error prints nothing, as
    when everything was read at once); from a pipe or device the results of the chunks before a
    bad line are already printed."""
    if args.sep is not None and not 1 <= len(args.sep) <= SEP_MAX_CHARS:
        raise InputError(f"--sep must be 1 to {SEP_MAX_CHARS} characters, got {len(args.sep):,}")
    device = resolve_device(args.device)
    model = load(args.model)
    if args.start is not None:
        set_start(model, args.start)
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


def run_options(r: argparse.ArgumentParser) -> None:
    """``run``'s arguments."""
    r.add_argument("model", help="a checkpoint written by `shortcut compile`")
    r.add_argument("--input", help="one sequence of symbols")
    r.add_argument("--input-file", help="one sequence per line ('-' for stdin)")
    r.add_argument("--sep", help="split each input line on SEP instead of whitespace (symbols are stripped)")
    r.add_argument("--json", action="store_true", help="one JSON object per sequence")
    r.add_argument("--start", help="read out from this start state instead of the spec's")
    r.add_argument("--device", default="cpu", help="torch device to run on (cpu, cuda, cuda:N, mps)")
    r.set_defaults(func=cmd_run)
