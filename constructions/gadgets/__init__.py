"""Reusable gadgets: small heads and MLPs over named subspaces, in five modules: attention
(:mod:`.heads`), exact units and composition (:mod:`.compose`), residues and rounding
(:mod:`.residues`), lookups (:mod:`.lookups`) and staircases (:mod:`.staircase`).  Import them
from here.

* :func:`offset_head` -- select the position t - offset (Theorem 10's look-back),
  BOS winning when that position does not exist.
* :func:`compose_mlp` -- function composition of integer-coded maps in one hidden
  layer of O(n^2) units (Lemma 14's role, O(n^3) parameters), exact in float arithmetic.
* :func:`carry_units` -- ``relu(x) - relu(-x)``: move exact values through hidden layers.
* :func:`prefix_mean_head` with :func:`absorb_feature` -- uniform causal attention
  with a weight-absorbing BOS (Lemma 15), shared by the counters of Theorem 11 and
  the prefix sums of Theorem 12.
* :func:`residue_mlp` with :func:`residue_range` and :func:`residue_margin` -- an exact
  table of x mod M for an integer x read off such a prefix sum, coarse steps then a
  one-hot over the M residues (width O(range / M + M), O(sqrt(range)) for M ~ sqrt(range)).
* :func:`staircase_mlp` with :class:`Ramp`, :class:`Stair` and :class:`StairLookup` -- such a
  prefix sum decoded at every threshold and gated by exact codes, the lookups after it fused in:
  two hidden layers (three with a lookup of several sums), width O(range): wide instead of deep.

Every gadget takes only the :class:`Subspace` s it reads and writes and constants
(never ``d_model`` or raw residual dims), declares them in ``reads``/``writes``
(workspace subspace names) and returns *local* float64 matrices: one row (or column)
per dim of those subspaces, in declaration order (constructions/program.py).
"""

from __future__ import annotations

from ..budget import STEP_TOLERANCE
from .compose import carry_units, compose_mlp, compose_slope, onehot_bias, step_units
from .heads import (
    ABSORB,
    PositionBlock,
    absorb_feature,
    attention_temperature,
    offset_head,
    prefix_mean_head,
    recency_margin,
    recent_flag_head,
)
from .lookups import (
    CodeInput,
    OneHotInput,
    code_function_mlp,
    flat_lookup_margin,
    flat_lookup_mlp,
    flat_lookup_tolerance,
    halfspace_lookup_mlp,
    interpolated_code_function_mlp,
    lookup_mlp,
    lookup_obligation,
    separation,
)
from .residues import Residue, residue_hidden, residue_margin, residue_mlp, residue_range, round_mlp
from .staircase import (Ramp, Stair, StairLookup, interpolation_error, interpolation_mlp, staircase_margin,
                        staircase_mlp)

__all__ = ["ABSORB", "STEP_TOLERANCE", "CodeInput", "OneHotInput", "PositionBlock", "Ramp", "Residue", "Stair",
           "StairLookup", "absorb_feature",
           "attention_temperature", "carry_units", "code_function_mlp", "compose_mlp", "compose_slope",
           "flat_lookup_margin", "flat_lookup_mlp", "flat_lookup_tolerance", "halfspace_lookup_mlp",
           "interpolated_code_function_mlp", "lookup_mlp", "lookup_obligation", "offset_head", "onehot_bias",
           "prefix_mean_head", "recency_margin", "recent_flag_head", "residue_hidden", "residue_margin", "residue_mlp",
           "residue_range",
           "interpolation_error", "interpolation_mlp", "round_mlp", "separation", "staircase_margin", "staircase_mlp",
           "step_units"]
