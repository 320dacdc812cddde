"""Text shared by the Markdown and HTML reports: number formatting, what a check covered."""

from __future__ import annotations

from typing import Any


def fmt(x: Any) -> str:
    """A number for a table: 3 significant digits, "—" for missing."""
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)


def cut_text(checked: dict[str, Any]) -> str:
    """``; cut by the 60 s time budget (random: 3 of 16 sequences, ...)`` when the time budget cut
    the checks (see ``verify(time_budget=...)``), else empty."""
    cut = checked.get("cut_by_time_budget")
    if not isinstance(cut, dict) or not cut:
        return ""
    budget = checked.get("time_budget_s")
    budget = f"{budget:g} s " if isinstance(budget, (int, float)) else ""
    return f"; cut by the {budget}time budget ({', '.join(f'{k}: {v}' for k, v in cut.items())})"


def exhaustive_text(c: dict[str, Any]) -> str:
    """What the exhaustive check covered: every sequence of its length (so every shorter one),
    or, when the time budget cut it, how many ran and the longest length covered in full."""
    L, run = c.get("exhaustive_sequence_length", c["exhaustive_length"]), c["exhaustive_sequences"]
    if L == c["exhaustive_length"]:
        return f"all {run} sequences of length {L} (so every shorter one)"
    return (f"{run} sequences of length {L} (cut by the time budget): every sequence of length "
            f"{c['exhaustive_length']} and shorter")
