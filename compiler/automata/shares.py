"""Budget shares: a caller that plans many automata (the product's quotients, ``constructions/product.py``)
runs each detection within a share of its budget, so that together they cost about what ``parts`` of
them would.  A detection that honours the share (the factor search, ``factors.py``; the since-program
search, ``starfree.py``) divides its work budget by :func:`share` and, past it, refuses as over any
budget, naming it: never a wrong "not in the class"."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_SHARE: ContextVar[int] = ContextVar("budget_share", default=1)


def share() -> int:
    """How many detections share one detection's budget here (1: the whole budget)."""
    return _SHARE.get()


@contextmanager
def shared_budget(parts: int) -> Iterator[None]:
    """Detections inside this block search within 1/``parts`` of their budgets."""
    token = _SHARE.set(max(1, parts))
    try:
        yield
    finally:
        _SHARE.reset(token)


def share_text() -> str:
    """What a refusal over a shared budget adds (empty outside one)."""
    return f", 1/{share()} of a detection's: shared by the automata planned together" if share() > 1 else ""
