"""Attention gadgets: select a position by offset (Theorem 10's look-back), the softmax
temperature for a score gap (Lemma 13), the prefix mean with a weight-absorbing BOS (Lemma 15)
and the most recent flagged position (Lemma 16)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..budget import STEP_TOLERANCE
from ..obligations import Average, Fetch, Recent, absolute_keys, offset_keys
from ..positions import PositionCode
from ..program import Head, obligation_name
from ..workspace import Subspace, names

ABSORB = "pos:absorb"
"""The position feature log(mass - t) that lets BOS absorb weight in :func:`prefix_mean_head`."""


def _copy(src: Subspace, dst: Subspace, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A head's local ``W_V``, ``W_O`` copying ``src`` (times ``scale``) into ``dst``, one value dim each."""
    assert len(src) == len(dst)
    k = np.arange(len(src))
    W_V = np.zeros((len(src), len(src)))
    W_V[k, k] = scale
    W_O = np.zeros((len(src), len(dst)))
    W_O[k, k] = 1.0
    return W_V, W_O


def attention_temperature(max_len: int, value_range: float, score_gap: float, tolerance: float) -> dict:
    """Inverse temperature beta so that a head's output is within ``tolerance`` of the hard choice.

    Lemma 13: with every other score at least ``score_gap`` below the winner,
    ||softmax - e||_1 <= 2 T exp(-beta * gap); the output then moves by at most
    that times ``value_range``.  Returns beta and the resulting bounds.
    """
    T = max_len + 1
    gamma = math.log(2 * T * max(value_range, 1.0) / tolerance)
    beta = gamma / score_gap
    return {"beta": beta, "score_gap": score_gap * beta, "leak_bound": 2 * T * math.exp(-gamma),
            "output_error_bound": tolerance}


def offset_head(name: str, pos: Subspace, code: PositionCode, bos: Subspace, one: Subspace,
                offset: int, src: Subspace, dst: Subspace, value_range: float,
                tolerance: float = STEP_TOLERANCE / 2, *, absolute: bool = False,
                skip: Subspace | None = None, skip_below: int = 0) -> Head:
    """Attend from t to t - offset and copy ``src`` there into ``dst`` (Theorem 10's look-back).

    Query = beta * rotation(offset) of t's code, plus a constant BOS slot; key = the
    position code, plus ``bos``.  The wanted position scores ``match``, BOS scores
    halfway between ``match`` and ``miss``, every other position at most ``miss``;
    so BOS wins exactly when t - offset <= 0 (BOS holds the identity map).  beta keeps
    the copied values within ``tolerance`` (default: half a step unit's tolerance).

    With ``absolute`` the target is the fixed position ``offset`` (the query is the constant
    beta * code(offset), read from ``one``): BOS wins exactly when t < offset.  With
    ``skip`` (a 0/1 flag of the key positions) a flagged position loses ``match - miss``,
    so it scores at most ``miss`` and BOS wins there too, with the same gap; ``skip_below``
    says which positions the caller's flag marks (1..skip_below), for the head's obligation.

    Obligation: :class:`~constructions.obligations.Fetch` with the key position ``offset``
    (absolute) or t - ``offset`` (BOS when that is below 1 or flagged).
    """
    if (skip is None) != (skip_below == 0):
        raise ValueError(f"{name}: a skip flag needs the number of positions it marks (skip_below)")
    match, miss = code.match_score, code.miss_score
    bos_score = (match + miss) / 2
    t = attention_temperature(code.max_len, value_range, (match - miss) / 2, tolerance)
    beta = t["beta"]
    c = code.dim
    width = c + 1 + (skip is not None)
    query = (one,) if absolute else (pos, one)
    W_Q = np.zeros((1 if absolute else c + 1, width))  # rows: [pos,] one
    if absolute:
        W_Q[0, :c] = beta * code.code(offset)
    else:
        W_Q[:c, :c] = beta * code.rotation(offset)
    W_Q[-1, c] = beta * bos_score
    W_K = np.eye(width)  # rows: pos, bos[, skip]
    key: tuple[Subspace, ...] = (pos, bos)
    if skip is not None:
        W_Q[-1, c + 1] = -beta * (match - miss)
        key = (pos, bos, skip)
    W_V, W_O = _copy(src, dst)
    kind = {"kind": "absolute", "position": offset} if absolute else {"kind": "offset", "offset": offset}
    keys = absolute_keys(code.max_len, offset) if absolute else offset_keys(code.max_len, offset, skip_below)
    return Head(name, W_Q, W_K, W_V, W_O, {**kind, **t},
                reads={"query": names(*query), "key": names(*key), "value": src.names}, writes=dst.names,
                obligation=Fetch(name, keys, obligation_name(src), obligation_name(dst)))


def absorb_feature(mass: int, max_len: int, start: int = 0, length: int | None = None) -> np.ndarray:
    """The :data:`ABSORB` position feature, log(mass - c(t)) for t = 0..max_len (Lemma 15),
    c(t) = clamp(t - start, 0, length) the number of positions start + 1 .. start + length
    up to t (``length`` None: every position, c(t) = t).

    Row 0 is BOS's own position: BOS only ever attends to itself, so a construction
    may store it or leave it 0.  ``mass`` > the count keeps every entry finite."""
    length = max_len if length is None else length
    assert mass > length
    return np.log(mass - np.clip(np.arange(max_len + 1) - start, 0, length).astype(np.float64))


@dataclass(frozen=True)
class PositionBlock:
    """Restrict :func:`prefix_mean_head` to the keys of one position block.

    ``member``: the blocks' one-hot over positions (BOS in none); ``index``: this block's
    column of it and of the (as many) :data:`ABSORB` columns; ``one``: the constant dim;
    ``beta``: the score every key outside the block loses; ``first``..``last``: the block's
    positions, of 1..``max_len``."""

    index: int
    member: Subspace
    one: Subspace
    beta: float
    first: int
    last: int
    max_len: int


def prefix_mean_head(name: str, absorb: Subspace, bos: Subspace, src: Subspace, dst: Subspace,
                     mass: int, value_scale: float = 1.0, block: PositionBlock | None = None, *,
                     max_len: int | None = None) -> Head:
    """Uniform causal attention with a BOS that absorbs weight (Lemma 15).

    Every real position scores 0 and BOS scores log(mass - t) (the :data:`ABSORB`
    feature of t's position, :func:`absorb_feature`), so the weights are exactly 1/mass
    on positions 1..t and the rest on BOS, whose value is 0: ``dst`` receives
    value_scale * sum_{tau<=t} src_tau / mass, exactly proportional to the prefix sum at
    every t (``notes["scale"]`` turns it back into the sum).  Several sums share the
    head (one value dim each).

    With a ``block`` the head sums only the keys of that block: BOS scores its block's
    absorb column, log(mass - c(t)) with c(t) the block's keys up to t, an in-block key
    0 and any other real key -beta, score = absorb * bos + beta (member + bos - one)
    (exact: the key's second coordinate is 0 or -1).  The in-block keys weigh
    1/(mass + o e^-beta) for the o <= t out-of-block keys up to t; the heads of all blocks
    write into the same ``dst``, whose sum is then the whole prefix sum up to that leak.

    Obligation: :class:`~constructions.obligations.Average` over the keys 1..``max_len`` (stated
    only with ``max_len``, the longest input the absorb feature was written for) or over the
    block's; heads of several blocks that make one sum state it together (their caller)."""
    W_V, W_O = _copy(src, dst, value_scale)
    first, last = (block.first, block.last) if block is not None else (1, max_len)
    declared = None if last is None else Average((name,), (first,), (last,), mass, value_scale,
                                                 obligation_name(src), obligation_name(dst))
    notes = {"kind": "prefix-mean", "mass": mass, "value_scale": value_scale, "scale": mass / value_scale,
             "why": f"weights exactly 1/{mass} on each real position and the rest on BOS (value 0)"}
    if block is None:
        W_Q = np.ones((1, 1))  # row: absorb
        W_K = np.ones((1, 1))  # row: bos
        return Head(name, W_Q, W_K, W_V, W_O, notes,
                    reads={"query": absorb.names, "key": bos.names, "value": src.names}, writes=dst.names,
                    obligation=declared)
    s, h = len(block.member), block.index
    assert len(absorb) == s and len(block.one) == len(bos) == 1
    W_Q = np.zeros((s + 1, 2))  # rows: absorb (s blocks), one
    W_Q[h, 0], W_Q[s, 1] = 1.0, block.beta
    W_K = np.zeros((2 + s, 2))  # rows: bos, one, member (s blocks)
    W_K[0] = 1.0, 1.0
    W_K[1, 1] = -1.0
    W_K[2 + h, 1] = 1.0
    outside = block.max_len - (block.last - block.first + 1)  # most out-of-block keys a query sees
    notes |= {"block": h, "blocks": s, "block_keys": [block.first, block.last], "beta": block.beta,
              "leak_bound": outside * math.exp(-block.beta) / mass,
              "why": f"weights 1/{mass} on each real position of block {h} (others -beta) and the rest on BOS"}
    return Head(name, W_Q, W_K, W_V, W_O, notes,
                reads={"query": names(absorb, block.one), "key": names(bos, block.one, block.member),
                       "value": src.names}, writes=dst.names, obligation=declared)


def recency_margin(max_len: int, eps: float) -> float:
    """How many times over the float rounding of a :func:`recent_flag_head`'s scores (up to
    1.5 beta, relative rounding ``eps`` each) half its recency gap beta / (2 (T + 1)) is; a
    most-recent-match head's gap and scores are the same.  Beta cancels: the margin depends on
    max_len and the dtype alone."""
    return (1.0 / (4 * (max_len + 1))) / (4 * eps * 1.5)


def recent_flag_head(name: str, flag: Subspace, recency: Subspace, one: Subspace, src: Subspace,
                     dst: Subspace, max_len: int, value_range: float,
                     tolerance: float = STEP_TOLERANCE / 2) -> Head:
    """Attend to the most recent position whose ``flag`` is 1 (Lemma 16); BOS is flagged.

    Score = beta * (flag + recency / 2) with recency = tau/(T+1) from the position code:
    any flagged position beats any unflagged one by >= beta/2, and among flagged ones the
    latest wins by beta/(2(T+1)); beta is derived from that gap (Lemma 13) so that the copy is
    within ``tolerance`` (default: half a step unit's tolerance).  Obligation:
    :class:`~constructions.obligations.Recent`."""
    gap = 1.0 / (2 * (max_len + 1))
    t = attention_temperature(max_len, value_range, gap, tolerance)
    W_Q = np.zeros((1, 2))  # row: one
    W_K = np.zeros((2, 2))  # rows: flag, recency
    W_Q[0, 0], W_Q[0, 1] = t["beta"], t["beta"] / 2
    W_K[0, 0], W_K[1, 1] = 1.0, 1.0
    W_V, W_O = _copy(src, dst)
    return Head(name, W_Q, W_K, W_V, W_O, {"kind": "most-recent-flag", **t},
                reads={"query": one.names, "key": names(flag, recency), "value": src.names}, writes=dst.names,
                obligation=Recent(name, obligation_name(flag), obligation_name(src), obligation_name(dst)))
