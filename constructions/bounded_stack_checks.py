"""Stack-specific checks: input families and layer-wise invariants (constructions/bounded_stack.py).

Families (at max_len, from the model's start state): uniform random letters hit the sink
within a few steps and test little, so these stay inside the depth bound:

* ``in-bounds``: a random walk of legal letters (pushes below D, matching pops, no-ops),
  with one random letter now and then (an error somewhere late, or none);
* ``deep-cycles``: balanced excursions to depth D and back, as many as fit, with
  random symbols (and, with one symbol, every cycle the same);
* ``error-at-end``: a legal walk with each error kind -- overflow, underflow, mismatch
  (k >= 2) -- as the very last letter.

Invariants, decoded from the named subspaces and compared with exact integer
recomputation up to and including the first error t* (after it only the sink matters):

* layer 1 attention (``st.prefix``): ``st:depth`` = x_t;
* layer 1 MLP (``st.depth``): ``st:level`` = one-hot of x_t, ``st:out`` = [x_t not in 0..D], 0 at BOS;
* layer 2 heads (``st.open{j}``): ``st:open{j}`` = the symbol pushed at o_j(t) (BOS: s0[j]),
  and the attention mass left off that position;
* layer 2 MLP (``st.stack``): ``st:stack`` and ``st:mismatch`` exact;
* layer 3 (``st.any``, ``st.error``): ``st:error`` = [q_t = sink] at every position.

A legal stack (``plan.legal``, two layers) gets legal families only (``in-bounds`` without
random letters, ``deep-cycles``) and the invariants of layers 1 and 2 before its first illegal
letter (no mismatch flag, no layer 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from compiler.automata.stack_detect import POP, PUSH, BoundedStack

from .budget import STEP_TOLERANCE
from .construction import InvariantReport
from .margins import target_margins

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


def families(model, plan: BoundedStack, T: int, seed: int = 0) -> dict[str, np.ndarray]:
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


@dataclass(frozen=True)
class Expected:
    """The exact values of every stack subspace over one sequence, per position [T+1, ...] (BOS at 0).

    x: the prefix sum x_t (pushes minus pops, from the start stack's depth); level / out: its
    one-hot over 0..D and the out-of-range bit; opened [T+1, D, k]: the symbol of the last push to
    each level (else the start stack's); target [T+1, D]: the key position each layer-2 head reads
    (0: BOS); stack: ``opened`` below the depth; mismatch: a pop of the wrong symbol; error: the
    state is the sink; first: t*, the first position in the sink (T when none)."""

    x: np.ndarray
    level: np.ndarray
    out: np.ndarray
    opened: np.ndarray
    target: np.ndarray
    stack: np.ndarray
    mismatch: np.ndarray
    error: np.ndarray
    first: int


def expected(plan: BoundedStack, start: int, row: list[int]) -> Expected:
    """Exact values of every subspace for one sequence ([T+1, ...], BOS at 0), and t*."""
    D, k = plan.depth, plan.symbols
    T = len(row)
    s0 = plan.stacks[start]
    x = np.zeros(T + 1, dtype=np.int64)
    x[0] = len(s0) if s0 is not None else 0
    for t, s in enumerate(row, start=1):
        kind = plan.letters[s][0]
        x[t] = x[t - 1] + (1 if kind == PUSH else -1 if kind == POP else 0)
    level = np.zeros((T + 1, D + 1))
    out = np.zeros(T + 1)
    for t in range(1, T + 1):
        if 0 <= x[t] <= D:
            level[t, x[t]] = 1.0
        else:
            out[t] = 1.0
    opened = np.zeros((T + 1, D, k))
    target = np.zeros((T + 1, D), dtype=np.int64)  # key position of head j (0: BOS)
    last = [0] * (D + 1)
    for t in range(T + 1):
        if t >= 1 and plan.letters[row[t - 1]][0] == PUSH and 1 <= x[t] <= D:
            last[x[t]] = t
        for j in range(1, D + 1):
            target[t, j - 1] = last[j]
            if last[j]:
                opened[t, j - 1, plan.letters[row[last[j] - 1]][1]] = 1.0
            elif s0 is not None and len(s0) >= j:
                opened[t, j - 1, s0[j - 1]] = 1.0
    below = (np.arange(1, D + 1)[None, :] <= x[:, None]) & (x[:, None] <= D)  # [j <= x_t], 0 when x_t > D
    stack = opened * below[:, :, None]
    stack[0] = 0.0
    mismatch = np.zeros(T + 1)
    states = [s0]
    for t, s in enumerate(row, start=1):
        kind, b = plan.letters[s]
        j = x[t] + 1
        if kind == POP and 1 <= j <= D and opened[t, j - 1].any() and opened[t, j - 1, b] == 0:
            mismatch[t] = 1.0
        states.append(plan.step(states[-1], s))
    error = np.array([st is None for st in states], dtype=np.float64)
    first = int(np.argmax(error)) if error.any() else T
    return Expected(x, level, out, opened, target, stack.reshape(T + 1, -1), mismatch, error, first)


def invariants(model, plan: BoundedStack, details: dict[str, Any], tokens: np.ndarray) -> InvariantReport:
    """Decode every stack subspace after each layer (one sequence at a time) and compare with
    :func:`expected` up to the first error; the error bit at every position."""
    dims = model.subspace
    D = plan.depth
    notes2 = model.metadata.layers[1]["heads"]
    worst = {"depth": 0.0, "level": 0.0, "open": 0.0, "stack": 0.0, "error": 0.0}
    failures: list[str] = []
    heads: dict[str, dict[str, Any]] = {}
    start = model.automaton.start

    def fail(msg: str) -> None:
        if msg not in failures:
            failures.append(msg)

    for row in tokens:
        want = expected(plan, start, [int(s) for s in row])
        legal_rows = want.first if want.error.any() else len(row) + 1  # a legal stack: rows before t*
        n = legal_rows if plan.legal else want.first + 1  # rows 0..t*
        with torch.no_grad():
            _, cache = model.run_with_cache(torch.from_numpy(np.asarray(row)[None, :]))
        layers = 2 if plan.legal else 3
        mid = [cache[f"blocks.{l}.hook_resid_mid"][0].double().numpy() for l in range(layers)]
        post = [cache[f"blocks.{l}.hook_resid_post"][0].double().numpy() for l in range(layers)]
        dx = float(np.abs(mid[0][:n, dims("st:depth")][:, 0] - want.x[:n]).max())
        worst["depth"] = max(worst["depth"], dx)
        if dx >= STEP_TOLERANCE:
            fail(f"layer 1 attention (st.prefix): st:depth deviates from x_t by {dx:.3g} (tolerance {STEP_TOLERANCE})")
        dl = max(float(np.abs(post[0][:n, dims("st:level")] - want.level[:n]).max()),
                 float(np.abs(post[0][:n, dims("st:out")][:, 0] - want.out[:n]).max()))
        worst["level"] = max(worst["level"], dl)
        if dl >= 1e-5:
            fail(f"layer 1 MLP (st.depth): st:level / st:out deviate from the depth one-hot by {dl:.3g}")
        pattern = cache["blocks.1.attn.hook_pattern"][0]
        scores = cache["blocks.1.attn.hook_attn_scores"][0]
        for j in range(1, D + 1):
            name = f"st.open{j}"
            dev = float(np.abs(mid[1][:n, dims(f"st:open{j}")] - want.opened[:n, j - 1]).max())
            worst["open"] = max(worst["open"], dev)
            tgt = torch.from_numpy(want.target[:n, j - 1])
            gap, leaked = target_margins(scores[j - 1][None, :n, :n], pattern[j - 1][None, :n, :n], tgt[None])
            h = heads.setdefault(name, {"layer": 2, "head": name, "target": f"last push to level {j}, else BOS",
                                        "score_gap": notes2[j - 1]["score_gap"], "worst_score_gap": math.inf,
                                        "worst_leaked_mass": 0.0, "derived_leak_bound": notes2[j - 1]["leak_bound"],
                                        "worst_mlp_input_noise": 0.0, "mlp_input_tolerance": STEP_TOLERANCE / 2})
            h["worst_score_gap"] = min(h["worst_score_gap"], gap)
            h["worst_leaked_mass"] = max(h["worst_leaked_mass"], leaked)
            h["worst_mlp_input_noise"] = max(h["worst_mlp_input_noise"], dev)
            if dev >= STEP_TOLERANCE / 2:
                fail(f"layer 2 head {name}: st:open{j} is off the symbol of the last push to level {j} by {dev:.3g}")
        ds = float(np.abs(post[1][:n, dims("st:stack")] - want.stack[:n]).max())
        if not plan.legal:
            ds = max(ds, float(np.abs(post[1][:n, dims("st:mismatch")][:, 0] - want.mismatch[:n]).max()))
        worst["stack"] = max(worst["stack"], ds)
        if ds >= 1e-5:
            fail(f"layer 2 MLP (st.stack): st:stack / st:mismatch deviate by {ds:.3g}")
        if plan.legal:
            continue
        de = float(np.abs(post[2][1:, dims("st:error")][:, 0] - want.error[1:]).max())
        worst["error"] = max(worst["error"], de)
        if de >= 1e-5:
            fail(f"layer 3 (st.any, st.error): st:error deviates from [state = sink] by {de:.3g}")
    mlps = [{"layer": 1, "mlp": "st.depth", "inputs": "st:depth", "input_tolerance": STEP_TOLERANCE,
             "worst_input_noise": worst["depth"], "distance_to_boundary": STEP_TOLERANCE - worst["depth"]},
            {"layer": 2, "mlp": "st.stack", "inputs": "st:open*", "input_tolerance": STEP_TOLERANCE / 2,
             "worst_input_noise": worst["open"], "distance_to_boundary": STEP_TOLERANCE / 2 - worst["open"]}]
    return InvariantReport("stack depth prefix sums, depth one-hots, last-push heads, stack levels"
                           + ("" if plan.legal else ", error bit"), len(tokens), failures, list(heads.values()), mlps,
                           {"worst_deviation": worst})
