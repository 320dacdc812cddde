"""Adversarial input families of a bounded-stack model (constructions/bounded_stack.py).

At max_len, from the model's start state: uniform random letters hit the sink within a few
steps and test little, so these stay inside the depth bound:

* ``in-bounds``: a random walk of legal letters (pushes below D, matching pops, no-ops),
  with one random letter now and then (an error somewhere late, or none);
* ``deep-cycles``: balanced excursions to depth D and back, as many as fit, with
  random symbols (and, with one symbol, every cycle the same);
* ``error-at-end``: a legal walk with each error kind -- overflow, underflow, mismatch
  (k >= 2) -- as the very last letter.

A legal stack (``plan.legal``, two layers) gets legal families only (``in-bounds`` without
random letters, ``deep-cycles``).  The verifier adds them to its adversarial families and runs
the layer-wise check (``verify/layerwise.py``) on one of each, up to each one's first illegal
letter under the promise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from compiler.automata.stack_detect import POP, PUSH, BoundedStack

if TYPE_CHECKING:  # annotations only: this module does not import torch
    from .model import CompiledTransformer

FAMILY_SEED_OFFSET = 13
"""The stack families draw from ``seed + FAMILY_SEED_OFFSET``."""


def _letters(plan: BoundedStack) -> tuple[dict[int, int], dict[int, int], list[int]]:
    """{symbol: a push letter}, {symbol: a pop letter}, the no-op letters."""
    push: dict[int, int] = {}
    pop: dict[int, int] = {}
    noop: list[int] = []
    for s, (kind, b) in enumerate(plan.letters):
        if kind == PUSH:
            push.setdefault(b, s)
        elif kind == POP:
            pop.setdefault(b, s)
        else:
            noop.append(s)
    return push, pop, noop


def legal_walk(plan: BoundedStack, stack: tuple[int, ...] | None, T: int, rng: np.random.Generator,
               p_error: float = 0.0) -> list[int]:
    """T letters that keep the stack legal (each with probability 1 - p_error; otherwise a
    uniformly random letter): push a random symbol below D, pop the top, or a no-op."""
    push, pop, noop = _letters(plan)
    out = []
    for _ in range(T):
        if stack is None or rng.random() < p_error:
            s = int(rng.integers(len(plan.letters)))
        else:
            options = [push[b] for b in push if len(stack) < plan.depth]
            if stack and stack[-1] in pop:
                options += [pop[stack[-1]]] * max(1, len(options))  # pops as likely as pushes
            options += noop[:1] if noop and rng.random() < 0.1 else []
            s = int(rng.choice(options)) if options else int(rng.integers(len(plan.letters)))
        out.append(s)
        stack = plan.step(stack, s)
    return out


def deep_cycles(plan: BoundedStack, stack: tuple[int, ...] | None, T: int, rng: np.random.Generator) -> list[int]:
    """From ``stack``: pop to empty, then excursions to depth D and back (random symbols)."""
    push, pop, _ = _letters(plan)
    out: list[int] = []
    cur = list(stack or ())
    while cur and len(out) < T:
        out.append(pop[cur.pop()])
    while len(out) < T:
        syms = [int(rng.choice(list(push))) for _ in range(plan.depth)]
        out += [push[b] for b in syms] + [pop[b] for b in reversed(syms)]
    return out[:T]


def error_at_end(plan: BoundedStack, stack: tuple[int, ...] | None, T: int,
                 rng: np.random.Generator) -> dict[str, list[int]]:
    """Legal walks whose last letter overflows, underflows or mismatches (k >= 2): the walk
    is steered to depth D, to 0, or to a top the pop does not match.  Without no-op letters
    the depth's parity is fixed by the length, so the error comes at position T or, when
    parity forbids T, at T - 1 (then one more letter follows in the sink)."""
    push, pop, noop = _letters(plan)
    out: dict[str, list[int]] = {}
    if stack is None or not push:
        return out
    kinds = ["overflow"] + (["underflow"] if pop else []) + (["mismatch"] if len(push) >= 2 and pop else [])
    for kind in kinds:
        mid = max(1, plan.depth // 2)
        wants = {"overflow": [plan.depth], "underflow": [0], "mismatch": sorted({mid, min(plan.depth, mid + 1)})}[kind]
        for end, want in ((e, w) for e in (T, T - 1) for w in wants):
            if end < 1 or kind in out:
                continue
            seq = legal_walk(plan, stack, max(0, end - 1 - 2 * plan.depth - 2), rng)
            cur: tuple[int, ...] | None = stack
            for s in seq:
                cur = plan.step(cur, s)
            assert cur is not None, "a legal walk never reaches the sink"
            while len(cur) > want:
                seq.append(pop[cur[-1]])
                cur = cur[:-1]
            while len(cur) < want:
                b = int(rng.choice(list(push)))
                seq.append(push[b])
                cur = cur + (b,)
            while len(seq) + 2 <= end - 1:  # push-pop (or pop-push at depth D) keeps the depth
                b = next(iter(push))
                seq += [push[b], pop[b]] if len(cur) < plan.depth else [pop[cur[-1]], push[cur[-1]]]
            if len(seq) < end - 1 and noop:
                seq.append(noop[0])
            if len(seq) != end - 1:
                continue
            if kind == "overflow":
                last = push[next(iter(push))]
            elif kind == "underflow":
                last = pop[next(iter(pop))]
            else:
                last = pop[next(b for b in pop if b != cur[-1])]
            seq = seq + [last] + [int(rng.integers(len(plan.letters)))] * (T - end)
            out[kind] = seq
    return out


def families(model: CompiledTransformer, plan: BoundedStack, T: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``in-bounds``, ``deep-cycles`` and ``error-at-end`` inputs of length T."""
    a = model.automaton
    stack = plan.stacks[a.start]
    rng = np.random.default_rng(seed + FAMILY_SEED_OFFSET)
    errors = (0.0, 0.0) if plan.legal else (1.0 / max(T, 1), 2.0 / max(T, 1))
    inb = [legal_walk(plan, stack, T, rng, p_error=p) for p in (0.0, 0.0, *errors)]
    deep = [deep_cycles(plan, stack, T, rng) for _ in range(2)]
    ends = [] if plan.legal else list(error_at_end(plan, stack, T, rng).values())
    out = {"in-bounds": np.array(inb, dtype=np.int64).reshape(-1, T),
           "deep-cycles": np.array(deep, dtype=np.int64).reshape(-1, T)}
    if ends:
        out["error-at-end"] = np.array(ends, dtype=np.int64).reshape(-1, T)
    return out
