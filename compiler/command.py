"""The ``shortcut`` command's entry point: ``--version`` and ``--help`` answered before torch loads.

The commands are :mod:`compiler.cli`, which loads torch, numpy and the constructions (seconds);
:func:`main` imports it only when the arguments name a command, so ``shortcut --version`` and
``shortcut --help`` take a fraction of a second (:mod:`compiler.usage` is all they need).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .automata.errors import ShortcutError
from .usage import COMMANDS, EXIT_BAD_INPUT, EXIT_OK, error_line, top_parser


def main(argv: Sequence[str] | None = None) -> int:
    """``shortcut``: a command goes to :func:`compiler.cli.main`; anything else (``--version``,
    ``--help``, no command) is answered by :func:`top_parser` alone, a usage error as one line
    and exit 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in COMMANDS for a in argv):
        from . import cli  # torch and the constructions load here, for a command only

        return cli.main(argv)
    try:
        top_parser()[0].parse_args(argv)
    except ShortcutError as e:
        error_line(str(e))
        return EXIT_BAD_INPUT
    return EXIT_OK  # pragma: no cover - parse_args exits (help, version) or raises (no command)
