"""Limits and tolerances shared by every construction (one definition each).

* :data:`MAX_PARAMS` -- the default parameter budget of a compiled model.
* :func:`check_params` -- the one refusal of a model over its parameter budget.
* :data:`STEP_TOLERANCE` -- the input noise every robust step unit (Lemma 10 with
  Delta = 1) absorbs around an integer code; MLP ramps, rounding, lookups and the
  verifier's deviation checks all use this one value.
"""

from __future__ import annotations

from compiler.automata.errors import BudgetError

MAX_PARAMS = 150_000_000
"""Default parameter budget: about 600 MB of float32 weights."""

STEP_TOLERANCE = 0.25
"""Input noise a step unit absorbs: a quarter of the unit gap between integer codes (Lemma 10)."""


def check_params(params: int, max_params: int, what: str) -> None:
    """BudgetError when ``what`` (a model described, "a local model with k = 3 ... at max_len 50")
    would have more than ``max_params`` parameters."""
    if params > max_params:
        raise BudgetError(f"{what} would have {params:,} parameters, over the budget of {max_params:,}")
