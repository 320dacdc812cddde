"""The ``shortcut`` command line (also ``python -m compiler``).

Every user error prints one line ``error: ...`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from constructions.checkpoint import load, save
from verify.check import verify
from verify.report import report_dict, summary_line, verification_summary, write_report

from .automata.cascade import summary_json, summary_text, to_dot
from .automata.catalog import entries
from .automata.decompose import decompose
from .automata.errors import InputError, ShortcutError
from .automata.load import load_spec
from .automata.version import __version__
from .pipeline import DTYPES, compile_automaton, methods, set_start


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ShortcutError(f"{self.prog}: {message}")


def _dtype(name: str):
    if name not in DTYPES:
        raise ShortcutError(f"unknown dtype {name!r}; choose one of {list(DTYPES)}")
    return DTYPES[name]


COMPILE_FAMILY_LIMIT = 4
"""compile --verify keeps at most this many sequences of each adversarial family."""


def cmd_compile(args: argparse.Namespace) -> int:
    automaton = load_spec(args.spec)
    model = compile_automaton(automaton, max_len=args.max_len, method=args.method, dtype=_dtype(args.dtype),
                              positions=args.positions)
    exact = True
    if args.verify:  # a modest check, recorded in the checkpoint so that `info` shows it

        if args.verify_samples < 0:
            raise ShortcutError("--verify-samples must be >= 0")
        result = verify(model, samples=args.verify_samples, seed=0, exhaustive_budget=args.verify_budget,
                        family_limit=COMPILE_FAMILY_LIMIT, progress=_progress())
        model.meta = {**model.meta, "verification": verification_summary(result)}
        exact = result.exact
    save(model, args.output)
    for w in model.meta.get("warnings", []):
        print(f"warning: {w}", file=sys.stderr)
    i = model.info()
    print(f"compiled {i['automaton']} ({i['n_states']} states, {i['n_symbols']} symbols) with {i['method']}: "
          f"{i['n_layers']} layers, d_model {i['d_model']}, d_mlp {i['d_mlp']} "
          f"(up to {i['mlp_hidden_layers']} hidden layers), {i['n_params']} params, "
          f"max_len {i['max_len']}, {i['dtype']} -> {args.output}")
    if args.verify:
        print(f"verification: {summary_line(model.meta['verification'])}")
        ce = model.meta["verification"]["counterexample"]
        if ce is not None:
            print(f"counterexample ({ce['check']}): {' '.join(ce['input'])} -> at position {ce['position']} "
                  f"expected {ce['expected']}, got {ce['got']}")
    return 0 if exact else 1


def _read_inputs(args: argparse.Namespace) -> list[list[str]]:
    lines: list[str] = []
    if args.input is not None:
        lines.append(args.input)
    if args.input_file is not None:
        try:
            text = sys.stdin.read() if args.input_file == "-" else Path(args.input_file).read_text()
        except OSError as e:
            raise InputError(f"cannot read input file {args.input_file!r}: {e.strerror}") from None
        lines.extend(text.splitlines())
    if not lines:
        raise InputError("no input: give --input \"a b a\" or --input-file FILE (one sequence per line)")
    return [_split(line, args.sep) for line in lines]


def _split(line: str, sep: str | None) -> list[str]:
    """The symbols of one input line: split on whitespace, or on ``sep`` (each symbol stripped;
    a blank line is the empty sequence, an empty field an empty symbol, which no alphabet has)."""
    if sep is None:
        return line.split()
    if sep == "":
        raise InputError("--sep must not be empty")
    return [sym.strip() for sym in line.split(sep)] if line.strip() else []


def cmd_run(args: argparse.Namespace) -> int:
    model = load(args.model)
    if args.start is not None:
        set_start(model, args.start)
    words = _read_inputs(args)
    a = model.automaton
    for i, w in enumerate(words):  # validate everything before printing anything
        a.symbol_ids(w)
        if len(w) > model.max_len:
            raise InputError(f"input {i + 1} has length {len(w)}, longer than the model's max_len {model.max_len}")
    for states in model.simulate(words):
        if args.json:
            rec = {"states": states}
            if a.outputs is not None:
                out = dict(zip(a.states, a.outputs))
                rec["outputs"] = [out[s] for s in states]
            print(json.dumps(rec))
        else:
            print(" ".join(states))
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
    names = lambda xs: ", ".join(xs) or "-"  # noqa: E731
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


def cmd_info(args: argparse.Namespace) -> int:
    model = load(args.model)
    if args.layout:
        try:
            layout = model.layout()
        except KeyError as e:
            raise ShortcutError(str(e.args[0])) from None
        print(json.dumps(layout) if args.json else "\n".join(layout_text(layout)))
        return 0
    info = model.info()
    if args.json:
        print(json.dumps(info))
    else:
        for k, v in info.items():
            if k != "verification":
                print(f"{k}: {v}")
        if info.get("verification"):
            print(f"verification: {summary_line(info['verification'])}")
        else:
            print("verification: none stored (compiled with --no-verify; run `shortcut verify`)")
    return 0


def _progress() -> Callable[[str, int, int], None] | None:
    if not sys.stderr.isatty():
        return None

    def show(name: str, done: int, total: int) -> None:
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(f"\rverifying [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name:<28}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def cmd_verify(args: argparse.Namespace) -> int:
    model = load(args.model)
    if args.samples < 0:
        raise ShortcutError("--samples must be >= 0")
    if args.family_limit is not None and args.family_limit < 1:
        raise ShortcutError("--family-limit must be >= 1")
    result = verify(model, samples=args.samples, seed=args.seed, exhaustive_budget=args.exhaustive_budget,
                    family_limit=args.family_limit, progress=_progress())
    rep = write_report(result, model, args.report, args.model) if args.report else report_dict(result, model, args.model)
    if args.json:
        print(json.dumps(rep))
    else:
        c = rep["checked"]
        verdict = "exact" if result.exact else "NOT exact"
        print(f"{rep['automaton']['name']}: {verdict} — {result.n_errors} errors in {result.n_positions} positions "
              f"(exhaustive to length {c['exhaustive_length']}, {c['random_sequences']} random at length "
              f"{c['random_length']}, {sum(c['adversarial_families'].values())} adversarial)")
        ce = result.counterexample
        if ce is not None:
            print(f"counterexample ({ce.check}): {' '.join(ce.input)} -> at position {ce.position} expected "
                  f"{ce.expected}, got {ce.got}")
        for f in rep.get("invariants", {}).get("failures", []):
            print(f"invariant failed: {f}")
        if args.report:
            print(f"report written to {args.report}/report.json, report.md and report.html")
    return 0 if result.exact else 1


def cmd_decompose(args: argparse.Namespace) -> int:
    cascade = decompose(args.spec)
    if args.dot:
        try:
            Path(args.dot).write_text(to_dot(cascade))
        except OSError as e:
            raise ShortcutError(f"cannot write DOT file {args.dot!r}: {e.strerror}") from None
    print(json.dumps(summary_json(cascade)) if args.json else summary_text(cascade))
    return 0


def cmd_catalog(args: argparse.Namespace) -> int:
    rows = entries()
    w = max(len(e.pattern) for e in rows)
    for e in rows:
        print(f"{e.pattern:<{w}}  {e.description}  (e.g. {e.example})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="shortcut", description="Compile finite automata into exact, hand-set Transformers.")
    p.add_argument("--version", action="version", version=f"shortcut {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("compile", help="compile a spec (JSON path or catalog name) to a .safetensors checkpoint")
    c.add_argument("spec")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--max-len", type=int, default=128)
    c.add_argument("--method", default="auto", choices=methods())
    c.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    c.add_argument("--positions", default="sinusoidal", choices=["sinusoidal", "circle"])
    c.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="verify after compiling (a modest check; store the summary in the checkpoint, exit 1 if "
                        "not exact); --no-verify skips it")
    c.add_argument("--verify-samples", type=int, default=16, help="random full-length sequences for --verify")
    c.add_argument("--verify-budget", type=int, default=4096, help="exhaustive-check budget for --verify")
    c.set_defaults(func=cmd_compile)

    r = sub.add_parser("run", help="run a compiled model on symbol sequences (whitespace-separated, or --sep)")
    r.add_argument("model")
    r.add_argument("--input")
    r.add_argument("--input-file", help="one sequence per line ('-' for stdin)")
    r.add_argument("--sep", help="split each input line on SEP instead of whitespace (symbols are stripped)")
    r.add_argument("--json", action="store_true")
    r.add_argument("--start", help="read out from this start state instead of the spec's")
    r.set_defaults(func=cmd_run)

    i = sub.add_parser("info", help="describe a compiled model")
    i.add_argument("model")
    i.add_argument("--json", action="store_true")
    i.add_argument("--layout", action="store_true",
                   help="what each head and MLP reads and writes, by residual subspace (with --json: the layout JSON)")
    i.set_defaults(func=cmd_info)

    v = sub.add_parser("verify", help="check a compiled model against step-by-step simulation")
    v.add_argument("model")
    v.add_argument("--report", metavar="DIR")
    v.add_argument("--samples", type=int, default=64, help="random sequences at full max_len")
    v.add_argument("--seed", type=int, default=0)
    v.add_argument("--exhaustive-budget", type=int, default=1 << 15,
                   help="largest number of sequences in the exhaustive check")
    v.add_argument("--family-limit", type=int, default=None,
                   help="at most this many sequences per adversarial family (default: all)")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_verify)

    d = sub.add_parser("decompose", help="Krohn-Rhodes decomposition into a verified cascade of counters and resets")
    d.add_argument("spec")
    d.add_argument("--json", action="store_true")
    d.add_argument("--dot", metavar="FILE", help="also write the cascade as a Graphviz DOT graph")
    d.set_defaults(func=cmd_decompose)

    k = sub.add_parser("catalog", help="list the built-in automata")
    k.set_defaults(func=cmd_catalog)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except ShortcutError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
