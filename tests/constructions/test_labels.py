"""The lookup shapes of constructions/labels.py: relayed and funneled lookups compute the lookup's
function, one hidden layer deeper each."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from constructions.budget import STEP_TOLERANCE
from constructions.gadgets import CodeInput, halfspace_lookup_mlp, lookup_mlp
from constructions.labels import _funneled, _relayed, _shapes
from constructions.workspace import Workspace


def _case(kind: str):
    ws = Workspace()
    subs = [ws.add(f"c{i}") for i in range(2)]
    out = ws.add("out")
    inputs = [CodeInput(s, 3) for s in subs]
    index = {(0, 0): 1, (0, 2): 2, (2, 0): 1, (2, 2): 2}
    if kind == "halfspace":
        mlp = halfspace_lookup_mlp("h", inputs, out, index, np.array(list(itertools.product(range(3), repeat=2))))
    else:
        mlp = lookup_mlp("h", inputs, out, {k: np.array([float(v)]) for k, v in index.items()})
    return ws, subs, out, index, mlp


@pytest.mark.parametrize("kind", ["halfspace", "lemma 11"])
def test_relayed_and_funneled_lookups_compute_the_same_index(kind) -> None:
    ws, subs, out, index, mlp = _case(kind)
    shapes = _shapes(mlp)
    assert [m.notes["shape"] for m in shapes] == ["as built", "funneled", "relayed", "relayed and funneled"]
    assert len(_relayed(mlp).weights) == len(_funneled(mlp).weights) == len(mlp.weights) + 1
    assert _funneled(mlp).weights[-1].shape == (1, 1)
    dense = [m.embed(ws) for m in shapes]
    for c in itertools.product(range(3), repeat=2):
        for noise in (0.0, STEP_TOLERANCE / 8):
            x = np.zeros(ws.d_model)
            x[[s[0] for s in subs]] = np.array(c) + noise
            ys = [d(x)[out[0]] for d in dense]
            if noise == 0.0:
                assert ys[0] == index.get(c, 0)
            assert max(ys) - min(ys) <= 1e-12  # the same function, bit for bit up to rounding
