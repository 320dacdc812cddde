"""The standard-shape cascade's readout (:mod:`.krohn_rhodes_flat`'s blocks): each readout key's
one-hot, which the unembedding sums (the state's logit the number of keys at its values), and the
one-hots the last block interpolates off their prefix sums in ONE hidden layer
(:func:`gadgets.interpolation_mlp`) -- its own counters' (:func:`interpolated_readout`) and earlier
blocks' keys (:func:`late_one_hots`) -- while their worst-case float32 errors add up to at most
:data:`INTERPOLATION_BUDGET` (the readout's margin 1, less twice the budget)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from compiler.automata.cascade import Cascade

from .budget import STEP_TOLERANCE
from .gadgets import Ramp, interpolation_error, interpolation_mlp
from .krohn_rhodes_layout import CERTIFIED_EPS, Layout, Schedule, counter_high, prefix_sum_bounds
from .obligations import Lookup, Modular, Readout, Steps
from .program import MLP, Beside, Fused, obligation_name
from .workspace import Subspace


def one_hot_readout_keys(cascade: Cascade, sched: Schedule, single: bool = False) -> list[str]:
    """The readout's keys when the last block's staircase writes each as a one-hot for the
    unembedding to sum (``kr:<c>.hot``; empty: the readout is a lookup in the MLP).  Taken where
    the lookup reads a counter decoded in the last block and another key -- a second such counter
    (a joint lookup: a third hidden layer, one more standard block) or an earlier block's (a stair
    per code of it: n (T + 1) units, where a fresh key's one-hot shares its ``new`` code's units and
    a stale key's is n) -- and every state is read out from one configuration: the state q's logit,
    the number of keys at q's values, is then the number of keys k, every other state's at most
    k - 1 (margin 1, the one-hot's).  ``single``: one key too (where the last block's decode is
    interpolated, :func:`interpolated_readout`, which writes one-hots)."""
    plan, L = sched.readout, sched.n_blocks
    states = list(plan.rows.values())
    fresh = sum(sched.block_of.get(k) == L for k in plan.keys)
    if not fresh or len(plan.keys) < (1 if single else 2) or len(set(states)) < len(states):
        return []
    return list(plan.keys)


def add_one_hots(lay: Layout, keys: list[str], sizes: dict[str, int]) -> None:
    """Allocate ``kr:<c>.hot`` (a one-hot of c's updated value) for each readout key."""
    for k in keys:
        lay.subs[k]["hot"] = lay.ws.add(f"kr:{k}.hot", sizes[k])


def one_hot_unembedding(lay: Layout, sched: Schedule, n_states: int) -> tuple[np.ndarray, Readout]:
    """W_U summing the keys' one-hots at each state's values, and its readout obligation: the
    one-hots of a reached configuration read as its state."""
    W_U = np.zeros((lay.ws.d_model, n_states))
    table = {}
    for (vals, _), q in sched.readout.rows.items():
        hots = [lay.subs[k]["hot"] for k in sched.readout.keys]
        for sub, v in zip(hots, vals):
            W_U[sub.dims[v], q] = 1.0
        table[tuple(int(x) for sub, v in zip(hots, vals) for x in np.eye(len(sub), dtype=np.int64)[v])] = int(q)
    return W_U, Readout(tuple(obligation_name(lay.subs[k]["hot"]) for k in sched.readout.keys), table)


def one_hot_lookup(d: dict[str, Subspace], n: int) -> Lookup:
    """The obligation of :func:`_one_hot_stair`: ``hot`` = the one-hot of the ``new`` code."""
    eye = np.eye(n)
    return Lookup(d["hot"].name, (obligation_name(d["new"]),), obligation_name(d["hot"]),
                  {(v,): eye[v] for v in range(n)})


def one_hot_steps(obligation, state: str, lookups: list[Lookup]):
    """``obligation`` (the last block's steps) with its readout lookup into ``state`` replaced by
    the keys' one-hot lookups (the unembedding sums them: :func:`one_hot_unembedding`)."""
    assert isinstance(obligation, Steps), "the last block's default MLP is decodes then lookups"
    steps = [st for st in obligation.steps if not (isinstance(st, Lookup) and st.out == state)]
    assert len(steps) == len(obligation.steps) - 1, "one readout lookup"
    return replace(obligation, steps=(*steps, *lookups))


def _decode_values(n: int, high: int) -> tuple[np.ndarray, np.ndarray]:
    """A mod-n counter's code X mod n ([high + 1, 1]) and its one-hot ([high + 1, n]) at X = 0..high."""
    X = np.arange(high + 1)
    return (X % n)[:, None].astype(np.float64), np.eye(n)[X % n]


def interpolated_readout(cascade: Cascade, sched: Schedule, lay: Layout, max_len: int) -> list[str]:
    """The last block's counters when its MLP decodes them in ONE hidden layer
    (:func:`gadgets.interpolation_mlp`: the code and the one-hot the unembedding sums), else [].
    Taken where the readout sums one-hots (:func:`one_hot_readout_keys`), the last block decodes
    only readout keys and keeps no value before the update, and each one-hot's worst-case
    float32 error -- the interpolation's rounding (:func:`gadgets.interpolation_error`, ~T^3 eps)
    plus the prefix sum's (times slope 1) -- summed over the counters is at most
    :data:`INTERPOLATION_BUDGET`: the errors move each logit (a sum of one-hot entries, one per key)
    by at most 1/4, so the state's stays above every other's (margin 1, less 1/2).  An earlier
    block's readout keys write their one-hots in its staircase (:func:`_early_one_hots`), or are
    interpolated beside (:func:`late_one_hots`, within what is left of the budget)."""
    if not sched.readout.keys or not all("hot" in lay.subs[k] for k in sched.readout.keys):
        return []
    return interpolable(cascade, sched, lay, max_len)


def interpolable(cascade: Cascade, sched: Schedule, lay: Layout, max_len: int) -> list[str]:
    """:func:`interpolated_readout`'s counters, before the one-hots are allocated."""
    L, keys = sched.n_blocks, sched.readout.keys
    last = [c for c in cascade.components if sched.block_of[c.name] == L]
    if not last or any(c.name not in keys or "old" in lay.subs[c.name] for c in last):
        return []
    costs = [interpolation_cost(c.size, max_len, lay) for c in last]
    if None in costs or sum(e or 0.0 for e in costs) > INTERPOLATION_BUDGET:
        return []
    return [c.name for c in last]


INTERPOLATION_BUDGET = 0.25
"""What the interpolated one-hots' errors may add up to, over every key the readout sums: each
logit is a sum of one one-hot entry per key, so the state's (the number of keys, k) less the errors
beats every other's (at most k - 1, plus the errors) by at least 1 - 2 * 1/4 = 1/2."""


def interpolation_cost(n: int, max_len: int, lay: Layout) -> float | None:
    """A mod-n counter's interpolated one-hot's share of :data:`INTERPOLATION_BUDGET`
    (:func:`gadgets.interpolation_mlp`): its worst-case float32 error with its prefix sum's (slope 1);
    None where its code's, with the prefix sum's times the code's slope n - 1, is past STEP_TOLERANCE."""
    code, hot = _decode_values(n, counter_high(n, max_len))
    noise = sum(prefix_sum_bounds(n, max_len, lay.blocks, CERTIFIED_EPS))
    if interpolation_error(code, CERTIFIED_EPS) + (n - 1) * noise > STEP_TOLERANCE:
        return None
    return interpolation_error(hot, CERTIFIED_EPS) + noise


def _interpolated_part(name: str, cascade: Cascade, lay: Layout, init: dict[str, int], max_len: int,
                       mass: int) -> tuple[Ramp, list[tuple[Subspace, np.ndarray]]]:
    """A counter's code and one-hot off its prefix sum, as a part of :func:`gadgets.interpolation_mlp`."""
    n, d = cascade.component(name).size, lay.subs[name]
    high = counter_high(n, max_len)
    code, hot = _decode_values(n, high)
    return Ramp(d["mean"], float(mass), init[name], high), [(d["new"], code), (d["hot"], hot)]


def interpolated_mlp(b: int, cascade: Cascade, lay: Layout, init: dict[str, int], max_len: int, mass: int,
                      obligation, counters: list[str], name: str) -> MLP:
    """The last block's MLP in one hidden layer (:func:`interpolated_readout`): each counter's code
    and one-hot interpolated off its prefix sum, stating the default block's decodes with the
    readout's lookup replaced by the one-hots' (the unembedding sums them)."""
    parts = [_interpolated_part(name, cascade, lay, init, max_len, mass) for name in counters]
    lookups = [one_hot_lookup(lay.subs[name], cascade.component(name).size) for name in counters]
    declared = one_hot_steps(obligation, obligation_name(lay.state), lookups)
    return interpolation_mlp(name, parts, replace(declared, mlp=name), {"counters": counters})


def late_one_hots(cascade: Cascade, sched: Schedule, lay: Layout, max_len: int, obligations: list[Any]) -> list[str]:
    """The readout keys decoded before the last block whose one-hot the last block interpolates off
    their prefix sums (:func:`_late_mlp`, one hidden layer beside its staircase or its interpolated
    readout) instead of looking it up from their ``new`` code: where the readout sums one-hots, the
    key's ``new`` code is read by no block but its own and the readout, and the one-hots' worst-case
    float32 errors with their prefix sums' (:func:`interpolation_cost`), with the interpolated
    readout's, add up to at most :data:`INTERPOLATION_BUDGET` (the widest moduli, which err most,
    left out first).  Their own block then computes ``new`` for its lookups without writing it (``Steps.unwritten``),
    so its units leave that block: unfolded, the interpolation exits at its first stage
    (``unfold.exits``) and balancing may place it in any block after the key's attention."""
    L, keys = sched.n_blocks, sched.readout.keys
    if not keys or not all("hot" in lay.subs[k] for k in keys):
        return []
    state = obligation_name(lay.state)
    last = obligations[L - 1]
    last_reads = {n for st in (last.leaves() if last is not None else ()) if not (isinstance(st, Lookup)
                  and st.out == state) for n in st.names_read()}
    out: list[str] = []
    for k in keys:
        b, new = sched.block_of.get(k), obligation_name(lay.subs[k]["new"])
        if b is None or b == L or cascade.component(k).kind != "counter" or new in last_reads:
            continue
        if any(o is not None and new in o.names_read() for i, o in enumerate(obligations, 1) if i not in (b, L)):
            continue
        if _read_jointly(k, b, cascade, sched, lay, obligations[b - 1]):
            continue
        out.append(k)
    sizes = {k: cascade.component(k).size for k in out}
    costs = {k: e for k in out if (e := interpolation_cost(sizes[k], max_len, lay)) is not None}
    out = [k for k in out if k in costs]
    spent = sum(interpolation_cost(cascade.component(k).size, max_len, lay) or 0.0
                for k in interpolated_readout(cascade, sched, lay, max_len))
    while out and spent + sum(costs[k] for k in out) > INTERPOLATION_BUDGET:
        out.remove(max(out, key=lambda k: (sizes[k], k)))  # the widest modulus errs most
    return out


def _read_jointly(k: str, b: int, cascade: Cascade, sched: Schedule, lay: Layout, obligation: Any) -> bool:
    """Whether block b reads counter k (its code before or after the update) in a table with another
    counter it decodes: a joint lookup or Walsh's ramps of sums, which the certificate checks with
    the codes written."""
    def codes(c: str) -> set[str]:
        return {obligation_name(d) for role, d in lay.subs[c].items() if role in ("new", "old")}
    own = {n for c in cascade.components if sched.block_of[c.name] == b and c.name != k for n in codes(c.name)}
    mine = codes(k)
    return any(isinstance(st, Lookup) and mine & set(st.reads) and own & set(st.reads)
               for st in (obligation.leaves() if obligation is not None else ()))


def _late_mlp(b: int, k: str, cascade: Cascade, lay: Layout, init: dict[str, int], max_len: int, mass: int,
              decode: Modular) -> MLP:
    """Readout key k's code and one-hot interpolated off its prefix sum in one hidden layer
    (:func:`late_one_hots`), stating its decode (``decode``, the default build's, less the value
    before the update) and the one-hot's lookup."""
    declared = Steps(f"block{b}.mlp.{k}", (replace(decode, minus=None, minus_out=None),
                                           one_hot_lookup(lay.subs[k], cascade.component(k).size)))
    return interpolation_mlp(f"block{b}.mlp.{k}", [_interpolated_part(k, cascade, lay, init, max_len, mass)],
                             declared, {"counters": [k]})


def with_late(b: int, mlp: MLP, late: tuple[str, ...], cascade: Cascade, lay: Layout, init: dict[str, int],
               max_len: int, mass: int, decodes: dict[str, Modular] | None) -> MLP | Beside:
    """The last block's MLP ``mlp`` with the late keys' interpolations (:func:`late_one_hots`) beside it."""
    if not late:
        return mlp
    return _beside_late(f"block{b}.mlp", mlp, [_late_mlp(b, k, cascade, lay, init, max_len, mass, (decodes or {})[
        obligation_name(lay.subs[k]["new"])]) for k in late])


def _beside_late(name: str, stairs: MLP, late: list[MLP]) -> Beside:
    """The last block's staircase with the late keys' interpolations (:func:`late_one_hots`) beside it."""
    parts: list[MLP | Fused | Beside] = [stairs, *late]
    return Beside(name, parts, {"beside": [m.name for m in parts]}, reads=tuple(n for m in parts for n in m.reads),
                  writes=tuple(n for m in parts for n in m.writes))
