"""The ``shortcut`` command's entry point: ``--version`` and ``--help`` answered before torch loads.

The commands are :mod:`compiler.cli`, which loads torch, numpy and the constructions (seconds);
:func:`main` imports it only when the arguments name a command, so ``shortcut --version`` and
``shortcut --help`` take a fraction of a second (:mod:`compiler.usage` is all they need).

A command runs torch on one thread unless ``OMP_NUM_THREADS`` says otherwise: a compiled model's
matrices are small (tens to hundreds of dims), and on them a second BLAS thread costs more in
synchronisation than it gains -- ``benchmarks/threads.py`` measures verification 1.3-4x faster on
one thread on the 2-core reference machine.  The zoo's workers run on one thread anyway.
"""

from __future__ import annotations

import os
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
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # read once, when torch loads (below)
        from . import cli  # torch and the constructions load here, for a command only

        return cli.main(argv)
    try:
        top_parser()[0].parse_args(argv)
    except ShortcutError as e:
        error_line(str(e))
        return EXIT_BAD_INPUT
    return EXIT_OK  # pragma: no cover - parse_args exits (help, version) or raises (no command)
