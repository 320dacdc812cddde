"""User-facing errors.

Every problem a user can cause (malformed spec, unknown symbol, sequence too
long, automaton over budget, corrupt checkpoint) raises a subclass of
:class:`ShortcutError`.  The CLI prints its message as one line and exits with
status 2; library callers can catch it.
"""

from __future__ import annotations


class ShortcutError(Exception):
    """A problem with the user's input; the message names it in one line."""


class SpecError(ShortcutError):
    """The automaton specification is malformed or incomplete."""


class InputError(ShortcutError):
    """An input sequence cannot be run (unknown symbol, too long, ...)."""


class BudgetError(ShortcutError):
    """A computation would exceed an explicit size budget."""


class CheckpointError(ShortcutError):
    """A checkpoint file is missing, corrupt or of an unknown format."""


class PrecisionError(ShortcutError):
    """A model would be used beyond the reach its construction certifies in its dtype."""
