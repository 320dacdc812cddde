"""Progress of a verification in units of work (positions checked), with an ETA.

:func:`verify.check.verify` calls ``progress(check, done, total)`` after every batch with
the positions (tokens) checked so far and planned in all; the last call has
``done == total``.  :class:`Progress` turns those calls into lines on a stream: on a
terminal one line rewritten in place (at most 10 times a second), elsewhere (a log, a
pipe, CI) one full line every ``interval`` seconds -- never a bar that sits at 99% -- and a
closing line when anything was shown.  A run shorter than ``quiet`` seconds shows nothing.
"""

from __future__ import annotations

import time
from typing import Callable, TextIO


def _seconds(s: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min."""
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"


class Progress:
    """``progress(check, done, total)`` callback writing to ``stream`` (see the module docstring).

    ``unit``: what ``done`` and ``total`` count; ``budget``: the verification's time budget in seconds, if any (the ETA is capped by it
    and the line says so); ``clock``: seconds, monotonic (injectable for tests)."""

    def __init__(self, stream: TextIO, *, tty: bool | None = None, interval: float = 10.0, quiet: float = 2.0,
                 budget: float | None = None, what: str = "verifying", unit: str = "positions",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)()) if tty is None else tty
        self.interval, self.quiet, self.budget, self.what, self.clock = interval, quiet, budget, what, clock
        self.unit = unit
        self.start = clock()
        self.last_shown: float | None = None
        self.shown = False

    def line(self, check: str, done: int, total: int) -> str:
        """The status line: positions done of planned, percent, elapsed, ETA, current check."""
        elapsed = self.clock() - self.start
        pct = 100.0 * done / total if total else 100.0
        text = f"{self.what}: {done:,} of {total:,} {self.unit} ({pct:.0f}%), {_seconds(elapsed)} elapsed"
        if 0 < done < total:
            eta = elapsed * (total - done) / done
            if self.budget is not None and elapsed + eta > self.budget:
                text += f", ETA {_seconds(max(self.budget - elapsed, 0.0))} (time budget {self.budget:g} s)"
            else:
                text += f", ETA {_seconds(eta)}"
        return f"{text} — {check}" if check else text

    def __call__(self, check: str, done: int, total: int) -> None:
        now = self.clock()
        finished = done >= total
        if finished:
            if self.shown:
                self._write(self.line(check, done, total), final=True)
            return
        if now - self.start < self.quiet or done <= 0:  # nothing to estimate from yet
            return
        step = 0.1 if self.tty else self.interval
        if self.last_shown is None or now - self.last_shown >= step:
            self._write(self.line(check, done, total), final=False)
            self.last_shown = now

    def _write(self, text: str, final: bool) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.shown = True
