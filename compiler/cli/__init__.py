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
import sys
from collections.abc import Sequence

from ..usage import top_parser
from . import compiling, info, run, tools, verifying
from .info import candidates_text, layout_text
from .status import exit_status, flushed

__all__ = ["build_parser", "candidates_text", "exit_status", "layout_text", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser (:func:`compiler.usage.top_parser`) with each command's arguments,
    added by the module of its family."""
    p, subs = top_parser()
    compiling.compile_options(subs["compile"])
    info.plan_options(subs["plan"])
    run.run_options(subs["run"])
    info.info_options(subs["info"])
    verifying.verify_options(subs["verify"])
    verifying.certify_options(subs["certify"])
    tools.export_options(subs["export"])
    tools.decompose_options(subs["decompose"])
    tools.zoo_options(subs["zoo"])
    tools.catalog_options(subs["catalog"])
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every outcome is an exit status of :data:`EXIT_CODES` (see :func:`exit_status`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        return flushed(args.func(args))
    except SystemExit:  # --help and --version
        raise
    except BaseException as e:  # noqa: BLE001 - the one place every failure becomes an exit status
        return exit_status(e, debug="--debug" in argv)
