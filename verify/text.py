"""Number formatting shared by the Markdown and HTML reports."""

from __future__ import annotations

from typing import Any


def fmt(x: Any) -> str:
    """A number for a table: 3 significant digits, "—" for missing."""
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.3g}"
    return str(x)
