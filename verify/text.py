"""Text shared by the Markdown and HTML reports: number formatting, what a check covered, and
escaping: names (states, symbols, the automaton's) are data, and reach Markdown and JSON only
through :func:`md` and :func:`json_text`."""

from __future__ import annotations

import json
import re
from typing import Any

from compiler.automata.spec import unsafe_char

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
"""What Markdown reads inside a line: escapes, code, emphasis, strikethrough, links and images
(``[``, ``]``; a ``(`` is a link only after ``]``) and table pipes.  Names never start a line
in a report, so heading and list markers need no escape."""


def md(x: Any) -> str:
    """``x`` as inert Markdown text (also inside a table cell): ``&``, ``<`` and ``>`` become
    entities (so no name is raw HTML), the punctuation :data:`_MD_SPECIAL` lists is
    backslash-escaped, and characters
    :func:`compiler.automata.spec.unsafe_char` names (line breaks, bidi overrides) become U+FFFD."""
    text = "".join("\ufffd" if unsafe_char(c) else c for c in str(x))
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def json_text(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, **kwargs)`` with ``<``, ``>`` and ``&`` written as ``\\u003c`` ... (the same
    JSON value): a name such as ``<script>`` is never raw markup in a file or page that
    embeds the JSON.  (Outside strings JSON has none of these characters.)"""
    text = json.dumps(obj, **kwargs)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


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
