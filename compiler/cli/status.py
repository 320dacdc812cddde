"""The exit-code contract of every command (:data:`compiler.usage.EXIT_CODES`): one mapping
from an outcome to an exit status (:func:`exit_status`), and printing that survives a reader
that went away (``| head``)."""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from ..automata.errors import ShortcutError
from ..automata.version import __version__
from ..usage import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK, error_line


# --- the exit-code contract ---------------------------------------------------------------


def _silence_stdout() -> None:
    """The reader of stdout went away (``| head``): point stdout at /dev/null so that the
    interpreter's final flush does not complain either."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (e.g. under pytest)
        pass


def say(text: str) -> None:
    """``print(text)``; when the reader went away (``| head``) the rest is silenced instead of the
    command ending, so its exit status (1: not exact) still stands."""
    try:
        print(text)
    except BrokenPipeError:
        _silence_stdout()


def flushed(status: int) -> int:
    """``status`` once stdout is flushed; a reader that went away leaves it as it is."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    return status


STILL_WORKING_S = 10.0
"""Seconds between the lines :func:`still_working` prints while a step runs."""


@contextmanager
def still_working(what: str, every: float = STILL_WORKING_S) -> Iterator[None]:
    """While the block runs, a line on stderr every ``every`` seconds (``planning ...: still
    working, 20 s``), so that a step whose time cannot be estimated beforehand -- the planner's
    analyses of a large automaton, reading a large DOT file, a certificate at a long max_len --
    is never silent for long; nothing for a step that ends sooner."""
    done, start = threading.Event(), time.monotonic()

    def beat() -> None:
        while not done.wait(every):
            try:
                print(f"{what}: still working, {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)
            except (OSError, ValueError):  # stderr went away: the step's own result still counts
                return

    thread = threading.Thread(target=beat, name="still-working", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


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
