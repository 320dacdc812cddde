"""The latch lemma of the program proof (:mod:`.program`): a bounded stack's error sink.

Past the first error the sink keeps an exact depth, so the program's memory would grow with
max_len; but once its "some error so far" bit is set (an :class:`~constructions.obligations.AnyFlag`
never clears) the readout is fixed for good -- when every combination of the values the
readout's other subspaces can hold reads as one output and meets every claim.  Then the search
collapses the memory to one settled value.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from constructions.obligations import AnyFlag, Lookup, Obligations, Threshold

from .semantics import Env, NotCovered, ProgramError, integers, read, run_mlp

Claims = list[list[tuple[list[int], set[tuple[float, ...]], str]]]
"""Per layer, each claim as (its columns written by then, the rows projected on them, its names)."""


def latch(ob: Obligations, heads: list[list[Any]], claims: Claims, bos: Env) -> tuple[int, int] | None:
    """The latch lemma: when the readout reads a dim that only a Threshold writes (0 in every
    token row), from an AnyFlag's bit, then once the bit is set (it never clears) that dim is 1
    at every later position.  If moreover every combination of the values the readout's other
    names can hold (:func:`_ranges`: what their one writer's table can write) reads, with that dim
    1, as one output o and meets every claim, the readout is o at every later position and the
    claims hold there.  Returns (the bit's memory index, o), or None when the lemma does not apply."""
    flags, k = {}, 0
    for layer, hs in zip(ob.layers, heads):
        for f, h in zip(layer.fetches, hs):
            if h is not None:
                flags.update({f.dst: k} if isinstance(f, AnyFlag) else {})
                k += 1
    leaves = [o for layer in ob.layers for o in layer.mlp_leaves()]
    writers = [part for layer in ob.layers for n in layer.names_written() for part in n.split(" + ")]
    for th in (o for o in leaves if isinstance(o, Threshold)):
        rows = ob.embedding.codes.get(th.dst)
        if (th.src not in flags or th.dst not in ob.readout.reads or writers.count(th.dst) != 1
                or writers.count(th.src) != 1 or rows is None
                or np.any(np.asarray(rows) != 0)):
            continue
        o = _settled_output(ob, claims, bos, leaves, writers, th.dst)
        if o is not None:
            return flags[th.src], o
    return None


def _settled_output(ob: Obligations, claims: Claims, bos: Env, leaves: list[Any], writers: list[str],
                    latch: str) -> int | None:
    """The one output the readout gives, with ``latch`` 1, on every combination of what the other
    names it and the claims read can hold: a name one Lookup writes from names known here is
    computed by it (a label index from the state's code), any other one ranges over what its one
    writer's table can write (:func:`_ranges`).  None when that is not one output, or a claim fails."""
    joints = ob.joint + (ob.promise.claims if ob.promise is not None else ())
    needed = list(dict.fromkeys([*ob.readout.reads, *(n for j in joints for n in j.names)]))
    ranges = _ranges(ob, leaves, writers, bos)
    derived, known = [], {latch}
    for o in leaves:
        outs = o.out.split(" + ") if isinstance(o, Lookup) else []
        if (outs and any(n in needed for n in outs) and all(writers.count(n) == 1 for n in outs)
                and all(r in known or r.split("[")[0] in known | set(ranges) for r in o.reads)):
            derived.append(o)
            known |= set(outs)
    free = list(dict.fromkeys([n for n in needed if n not in known] + [
        r.split("[")[0] for o in derived for r in o.reads if r not in known and r.split("[")[0] not in known]))
    if any(n not in ranges for n in free):
        return None
    outs_seen: set[Any] = set()
    for combo in itertools.product(*(ranges[n] for n in free)):
        env: Env = {**dict(zip(free, combo)), latch: (1.0,)}
        try:
            for o in derived:
                env.update({n: (0.0,) * len(read(bos, n)) for n in o.out.split(" + ")})
                run_mlp(o, env, {})
            outs_seen.add(ob.readout.table.get(integers(read(env, " + ".join(ob.readout.reads)), "the readout")))
            values = {n: read(env, n) for n in needed}
        except (ProgramError, NotCovered):
            return None
        if len(outs_seen) > 1 or None in outs_seen or not claims_hold(claims, values):
            return None
    return outs_seen.pop() if len(outs_seen) == 1 else None


def claims_hold(claims: Claims, values: dict[str, tuple[float, ...]]) -> bool:
    """Whether codes ``values`` (name -> code) meet every claim, at every layer."""
    for per in claims:
        for cols, allowed, joined in per:
            flat = tuple(v for n in joined.split(" + ") for v in values[n])
            if tuple(flat[c] for c in cols) not in allowed:
                return False
    return True


def _ranges(ob: Obligations, leaves: list[Any], writers: list[str], bos: Env) -> dict[str, list[tuple[float, ...]]]:
    """The values a name can hold after BOS when one Lookup writes it (into 0 in every token row):
    its table's values and its default, cut to the name's dims."""
    out = {}
    for o in leaves:
        if not isinstance(o, Lookup):
            continue
        parts = o.out.split(" + ")
        values = [np.asarray(v, dtype=np.float64).ravel() for v in o.table.values()]
        values += [] if o.default is None else [np.asarray(o.default, dtype=np.float64).ravel()]
        at = 0
        for n in parts:
            width = len(read(bos, n))
            rows = ob.embedding.codes.get(n)
            if writers.count(n) == 1 and rows is not None and not np.any(np.asarray(rows)[:-1] != 0):
                out[n] = sorted({tuple(float(x) for x in v[at : at + width]) for v in values})
            at += width
    return out
