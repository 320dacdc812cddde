"""What a verification costs, and its time budget: the FLOPs of one forward (:func:`forward_flops`),
the batch size bounded by memory and work (:func:`batch_rows`), the rate a forward runs at
(measured, :class:`Rate`, or bounded by the machine's matrix products, :func:`matmul_rate`),
and the refusals that follow: a check whose one sequence would outlast the budget, a
verification that cannot fit its budget before anything is compiled (:func:`refuse_hopeless`)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np
import torch

from compiler.automata.errors import BudgetError, ShortcutError
from constructions.model import CompiledTransformer

BATCH_ELEMENTS = 1 << 25
"""Largest batch * (T+1) * (the per-position width the forward holds: residual, attention
projections and logits) evaluated at once, about 128 MB of float32; the MLP chunks its own
hidden layers (``constructions.layers.CHUNK_ELEMENTS``)."""
BATCH_FLOPS = 1 << 33
"""Largest matmul FLOPs of one batch (:func:`forward_flops`), a fraction of a second here:
the step at which progress is reported and the time budget is looked at."""
SCORE_BUDGET = 1 << 26
"""Largest batch * heads * T^2 when the model runs its explicit attention path (``model.fused`` off)."""


def forward_flops(model: CompiledTransformer, T: int) -> float:
    """Matrix-product FLOPs (2 per multiply-add) of one forward pass over one sequence of length
    T, BOS included, as the dense weights compute it: per block the query/key/value and output
    projections, the causal scores and weighted sums (position t reads t+1 keys), the MLP; then
    the unembedding.  Softmax, ReLU and additions are not counted."""
    c = model.config
    d, e, P = c.d_model, c.d_head, T + 1
    flops = 2.0 * P * d * c.n_out
    for b in c.blocks:
        H = b.n_heads
        flops += 2.0 * P * 4 * d * H * e + 2.0 * 2 * H * e * P * (P + 1) / 2
        sizes = [d, *b.mlp_hidden, d] if b.mlp_hidden else []
        flops += sum(2.0 * P * x * y for x, y in zip(sizes, sizes[1:]))
    return flops


def batch_rows(model: CompiledTransformer, T: int) -> int:
    """Sequences of length T per batch: bounded by memory (:data:`BATCH_ELEMENTS`; on the
    explicit attention path also :data:`SCORE_BUDGET`) and by work (:data:`BATCH_FLOPS`)."""
    c = model.config
    H = c.n_heads or 1
    per_position = 4 * c.d_model + 4 * H * c.d_head + c.n_out
    rows = min(BATCH_ELEMENTS // ((T + 1) * per_position), int(BATCH_FLOPS // max(forward_flops(model, T), 1.0)))
    if not model.fused:
        rows = min(rows, SCORE_BUDGET // (H * (T + 1) ** 2))
    return max(1, rows)



class Clock:
    """The time budget: ``spent()`` once ``budget`` seconds have passed since the start (never without one)."""

    def __init__(self, budget: float | None, clock: Callable[[], float]) -> None:
        self.budget, self.clock, self.start = budget, clock, clock()

    def elapsed(self) -> float:
        return self.clock() - self.start

    def spent(self) -> bool:
        return self.budget is not None and self.elapsed() >= self.budget


class Rate:
    """The forward's measured work rate (:func:`forward_flops` per second of wall time), so that a
    time budget refuses, before it starts, a check whose single sequence would take longer than
    the whole budget (the first batch of a check always runs: at a max_len of a million, one
    forward takes hours)."""

    def __init__(self) -> None:
        self.flops, self.seconds = 0.0, 0.0

    @contextmanager
    def measure(self, model: CompiledTransformer, shape: tuple[int, int]) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.seconds += time.perf_counter() - start
        self.flops += shape[0] * forward_flops(model, shape[1])

    def refuse_beyond(self, model: CompiledTransformer, length: int, budget: float) -> None:
        """ShortcutError when one sequence of ``length`` would take over ``budget`` seconds at the
        rate measured so far (nothing is refused before a first batch has been timed)."""
        if self.flops <= 0 or self.seconds <= 0:
            return
        eta = forward_flops(model, length) * self.seconds / self.flops
        if eta > budget:
            raise ShortcutError(f"verifying one input of length {length} would take about {eta:,.0f} s at the "
                                f"{self.flops / self.seconds / 1e9:.2g} GFLOP/s measured so far, over the time "
                                f"budget of {budget:g} s: raise the budget (--verify-time / --time-budget), or "
                                f"compile with --no-verify and a smaller --max-len")


RATE_PROBE = 1024
"""Side of the float32 matrices :func:`matmul_rate` multiplies."""


def matmul_rate(device: torch.device | str = "cpu", seconds: float = 0.1) -> float:
    """FLOP/s of ``RATE_PROBE``-square float32 matrix products on ``device``, the best of the
    products run within ``seconds``: an upper bound on the rate of a forward pass, whose
    attention and small MLPs run slower than one dense product."""
    a = torch.ones(RATE_PROBE, RATE_PROBE, device=device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    a @ a  # warm-up: thread pool, kernels
    sync()
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end or best == float("inf"):
        start = time.perf_counter()
        a @ a
        sync()
        best = min(best, time.perf_counter() - start)
    return 2.0 * RATE_PROBE ** 3 / max(best, 1e-9)


def refuse_hopeless(layers: int, max_len: int, budget: float, device: torch.device | str = "cpu") -> None:
    """BudgetError, before compiling, when one input of ``max_len`` through ``layers`` attention
    layers cannot be verified within ``budget`` seconds: each layer computes at least the causal
    scores and weighted sums of one head of width 1 (:func:`forward_flops` with H = e = 1), and no
    forward runs faster than :func:`matmul_rate`.  (The first batch of every check runs whatever
    the budget, and the adversarial families are full-length.)"""
    P = max_len + 1
    flops = layers * 2.0 * 2 * P * (P + 1) / 2
    rate = matmul_rate(device)
    if flops / rate > budget:
        raise BudgetError(f"verifying one input of length {max_len} through at least {layers} attention layers needs "
                          f"at least {flops:.1e} FLOP, over {flops / rate:,.0f} s at this machine's best "
                          f"{rate / 1e9:.3g} GFLOP/s, past the verification budget of {budget:g} s: compile with "
                          f"--no-verify, a smaller --max-len, or a larger --verify-time")


CERTIFY_TIME_BUDGET = 300.0
"""Seconds ``certify`` may be estimated to need before it refuses (``certify --time-budget`` raises
it): five minutes, thirty times the slowest certificate the benchmarks make (4,096 positions, 10 s)
and past the point where a run with a line of progress every 10 s is still worth waiting for."""

SCORE_PROBE = (1 << 10, 1 << 11)
"""Queries and keys of the chunk of scores :func:`score_pass_rate` times: 2^21 scores, the chunk the
certifier bounds at once (``verify/certify/heads.py``)."""


def score_pass_rate(seconds: float = 0.05) -> float:
    """Scores per second through the elementwise passes the certifier makes at least over every
    (query, key) score of a head (``verify/certify/heads.py``): the upper end of each score's
    rounding interval, the causal mask and its assignment, the row maximum, the shift by the
    intended key's lower end, the exponential and the row sum -- the best of the probes run
    within ``seconds`` (three at least) on one chunk of :data:`SCORE_PROBE` scores.  Its score-bounding matrix
    products and exactness tests come on top, so the rate bounds the certifier's from above."""
    rows, cols = SCORE_PROBE
    centre, spread = np.zeros((rows, cols)), np.ones((rows, cols))
    query, key = np.arange(rows)[:, None], np.arange(cols)[None, :]
    best, end, runs = float("inf"), time.perf_counter() + seconds, 0
    while time.perf_counter() < end or runs < 3:
        start, runs = time.perf_counter(), runs + 1
        hi = centre + spread
        hi[key > query] = -np.inf
        low = hi.max(1)
        hi -= low[:, None]
        np.exp(hi, out=hi).sum(1)
        best = min(best, time.perf_counter() - start)
    return rows * cols / max(best, 1e-9)


def certify_scores(model: CompiledTransformer) -> float:
    """(head, query, key) scores the certifier bounds: every head of every layer at every query
    position against every key position, BOS included ((T+1)^2 per head)."""
    P = model.max_len + 1
    return float(sum(b.n_heads for b in model.config.blocks)) * P * P


def refuse_hopeless_certificate(model: CompiledTransformer, budget: float = CERTIFY_TIME_BUDGET,
                                rate: float | None = None) -> None:
    """BudgetError, before certifying, when :func:`certify_scores` at :func:`score_pass_rate` (a
    rate the certifier does not reach) already needs more than ``budget`` seconds."""
    scores = certify_scores(model)
    rate = score_pass_rate() if rate is None else rate
    if scores / rate > budget:
        raise BudgetError(f"certifying {model.automaton.name} at max_len {model.max_len:,} bounds {scores:.2g} "
                          f"attention scores, at least {scores / rate:,.0f} s at this machine's "
                          f"{rate / 1e6:,.0f} million scores per second, over the certification time budget of "
                          f"{budget:g} s: certify a model compiled with a smaller --max-len, or raise --time-budget")
