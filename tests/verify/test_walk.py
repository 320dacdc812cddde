"""The walk's lemmas (verify/certify/walk.py) against the recency heads' own semantics.

Where the order of last visits is small enough to keep (M <= 8 residues), the program runs with
both memories side by side on every input up to a length, and every race must come out the same
at every position: for the construction's residues, and for corrupted ones where aliases decide
(residues mod S + 1: one residue twice in a race; mod 8 < S + 2 for grid:9: a head of residue 0
and pairs other than the construction's)."""

from __future__ import annotations

import pytest

from compiler.pipeline import compile_automaton
from constructions import gridworld
from verify.certify import program as program_module
from verify.certify.certificate import obligations_of
from verify.certify.program import _fixed_values, build, step


def _both(model):
    """The program under the walk's lemmas, and under the order of last visits."""
    ob = obligations_of(model)
    walk = build(ob, model.max_len, _fixed_values(model))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(program_module, "walk_heads", lambda ob, ctx: {})
        order = build(ob, model.max_len, _fixed_values(model))
    return ob, walk, order


def _agree(model, length: int) -> int:
    """Every input up to ``length``: the races' outputs under both memories, position by position
    (depth first, each prefix once); returns how many positions were compared."""
    ob, walk, order = _both(model)
    outs = [r.out for layer in ob.layers for o in layer.mlp_leaves() if hasattr(o, "races") for r in o.races]
    assert walk.start != order.start  # the lemma's memory, not the order's
    stack, n = [(walk.start, order.start, 0)], 0
    while stack:
        mw, mo, t = stack.pop()
        if t == length:
            continue
        for x in range(model.automaton.n_symbols):
            nw, ew = step(walk, mw, x, t + 1)
            no, eo = step(order, mo, x, t + 1)
            assert [ew[o] for o in outs] == [eo[o] for o in outs], (t + 1, x)
            n += 1
            stack.append((nw, no, t + 1))
    return n


@pytest.mark.parametrize("spec, max_len, modulus", [("grid:4", 16, None), ("grid:4", 16, 4), ("grid:9", 16, 8),
                                                     ("grid:3", 16, None)])
def test_the_walks_memory_races_as_the_order_of_last_visits(monkeypatch, spec, max_len, modulus):
    if modulus is not None:
        monkeypatch.setattr(gridworld, "residue_modulus", lambda S, T: modulus)
    model = compile_automaton(spec, max_len=max_len, method="gridworld")
    assert _agree(model, 10) >= 2046  # every input over two letters
