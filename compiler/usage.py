"""What the command line says before any work, without torch: the exit-code contract, the
one-line error, the top-level parser with each command's help and examples.

:mod:`compiler.command` answers ``--version`` and ``--help`` with these alone;
:mod:`compiler.cli` (which loads torch) adds each command's options to the same parsers.
"""

from __future__ import annotations

import argparse
import sys

from .automata.errors import ShortcutError
from .automata.version import __version__

EXIT_OK, EXIT_NOT_EXACT, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_CODES = """exit status (every command):
  0  success; for compile and verify: the model is exact
  1  the model is not exact; the message names the failing check (counterexample position,
     or the failed invariant with its layer/component/position)
  2  bad input or environment: one line 'error: ...' on stderr
  3  internal error: one line asking for a bug report (the traceback with --debug)"""


def error_line(message: str) -> None:
    """Print ``error: message`` as exactly one line on stderr."""
    text = " ".join(str(message).splitlines()).strip() or "unknown error"  # \r, \x85, U+2028 ... too
    print(f"error: {text}", file=sys.stderr)


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 like every other bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ShortcutError(f"{self.prog}: {message}")


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown after each option's help (not for flags, nor options without one); the
    epilog's examples kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


# --- the commands' help -------------------------------------------------------------------

COMMANDS = {
    "compile": "compile a spec (JSON path or catalog name) to a .safetensors checkpoint",
    "plan": "every construction's estimate (layers, parameters) or refusal, and what auto picks",
    "run": "run a compiled model on symbol sequences (whitespace-separated, or --sep)",
    "info": "describe a compiled model",
    "verify": "check a compiled model against step-by-step simulation",
    "certify": "prove a compiled model exact on every input up to its max_len (exit 1 with the "
               "failing obligation, or the construction not certified yet)",
    "export": "write a compiled model in another library's layout (TransformerLens: "
              "safetensors state dict, config.json, map.json, a Hugging Face tokenizer)",
    "decompose": "Krohn-Rhodes decomposition into a verified cascade of counters and resets",
    "zoo": "compile, verify and save the models a zoo config names, with their circuits and traces "
           "(rerun into the same directory to resume)",
    "catalog": "list the built-in automata",
}
"""Each command's one-line help (the top-level ``--help`` lists them)."""

EXAMPLES = {
    "compile": """examples:
  shortcut compile parity -o parity.safetensors --max-len 64
  shortcut compile examples/turnstile.json -o turnstile.safetensors --method scan
  shortcut compile partial.json -o p.safetensors --complete       # add a sink for missing transitions
  shortcut compile dyck-legal:4,2 -o d.safetensors --max-len 100   # the paper's Dyck: legal inputs only, 2 layers
  shortcut compile partial.json -o p.safetensors --promise legal  # missing transitions are never taken
  shortcut compile grid:5 -o g.safetensors --max-len 4096 --dtype float64""",
    "run": """examples:
  shortcut run q8.safetensors --input "i j k"
  shortcut run s5.safetensors --input "(1,2) (1,2,3,4,5) e"
  shortcut run m.safetensors --input "up,1 | down,1" --sep "|"
  printf 'i j\nk\n' | shortcut run q8.safetensors --input-file - --json""",
    "plan": """examples:
  shortcut plan dyck:4,2 --max-len 256
  shortcut plan dyck:4,2 --max-len 256 --prefer size
  shortcut plan examples/turnstile.json --max-len 1024 --json""",
    "info": """examples:
  shortcut info q8.safetensors
  shortcut info q8.safetensors --json
  shortcut info q8.safetensors --layout""",
    "verify": """examples:
  shortcut verify q8.safetensors
  shortcut verify q8.safetensors --report out/ --samples 256
  shortcut verify q8.safetensors --exhaustive-budget 100000 --json""",
    "certify": """examples:
  shortcut certify q8.safetensors
  shortcut certify q8.safetensors -o q8.cert.json
  shortcut certify q8.safetensors --check q8.cert.json""",
    "export": """examples:
  shortcut export q8.safetensors --format transformer-lens -o q8-tl/
  (then, with the transformer-lens extra: compiler.export.load_transformer_bridge("q8-tl/"), see docs/interop.md)""",
    "decompose": """examples:
  shortcut decompose quaternion
  shortcut decompose symmetric:4 --json
  shortcut decompose dihedral:4 --dot d8.dot""",
    "catalog": """examples:
  shortcut catalog""",
    "zoo": """examples:
  shortcut zoo examples/zoo-tiny.toml -o zoo-tiny/
  shortcut zoo examples/zoo.toml -o zoo/ --workers 2 --limit 200
  shortcut zoo examples/zoo.toml -o zoo/ --ray              (a local Ray cluster; or --ray ADDRESS)""",
}


def top_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``shortcut`` parser and one subparser per command of :data:`COMMANDS` (with
    ``--debug``, its examples and the exit codes; :func:`compiler.cli.build_parser` adds the
    options)."""
    p = _Parser(prog="shortcut", description="Compile finite automata into exact, hand-set Transformers.",
                epilog=f"examples:\n  shortcut compile symmetric:5 -o s5.safetensors --max-len 128\n"
                       f"  shortcut run s5.safetensors --input \"(1,2) (1,2,3,4,5) e (1,2)\"\n"
                       f"  shortcut COMMAND --help   (each command's options, defaults and examples)\n\n{EXIT_CODES}",
                formatter_class=_Formatter)
    p.add_argument("--version", action="version", version=f"shortcut {__version__}")
    p.add_argument("--debug", action="store_true", help="on an internal error, print the traceback")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    subs: dict[str, argparse.ArgumentParser] = {}
    for name, text in COMMANDS.items():
        subs[name] = sub.add_parser(name, help=text, description=text, epilog=f"{EXAMPLES[name]}\n\n{EXIT_CODES}",
                                    formatter_class=_Formatter)
        subs[name].add_argument("--debug", action="store_true", help="on an internal error, print the traceback")
    return p, subs
