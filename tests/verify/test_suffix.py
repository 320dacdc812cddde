"""The suffix-lookup rule (verify/certify/suffix.py) reads a lookup padded beside a deeper MLP
(constructions.program.Beside pads with identity layers) as the two hidden layers it is, and
only exact identity layers with zero bias are dropped: anything else keeps the network's depth,
and the rule refuses it."""

from __future__ import annotations

import numpy as np

from verify.certify.suffix import without_carries


def _net(rng):
    return [rng.normal(size=(3, 5)), rng.normal(size=(5, 4)), rng.normal(size=(4, 2))], \
        [rng.normal(size=5), rng.normal(size=4), rng.normal(size=2)]


def _run(W, b, x):
    for w, c in zip(W[:-1], b[:-1]):
        x = np.maximum(x @ w + c, 0)
    return x @ W[-1] + b[-1]


def test_identity_padding_is_dropped_exactly():
    rng = np.random.default_rng(0)
    W, b = _net(rng)
    padded = [W[0], W[1], np.eye(4), np.eye(4), W[2]], [b[0], b[1], np.zeros(4), np.zeros(4), b[2]]
    W2, b2 = without_carries(*padded)
    assert len(W2) == 3 and all(np.array_equal(x, y) for x, y in zip(W2, W)) and np.array_equal(b2[1], b[1])
    x = rng.normal(size=(50, 3)).astype(np.float32)
    assert np.array_equal(_run([w.astype(np.float32) for w in padded[0]], [c.astype(np.float32) for c in padded[1]], x),
                          _run([w.astype(np.float32) for w in W], [c.astype(np.float32) for c in b], x))


def test_a_layer_that_is_not_exactly_the_identity_is_kept():
    rng = np.random.default_rng(1)
    W, b = _net(rng)
    near = np.eye(4)
    near[2, 2] = 0.5
    for mid, bias in ((near, np.zeros(4)), (np.eye(4), np.eye(4)[0] * 1e-3)):
        W2, _ = without_carries([W[0], W[1], mid, W[2]], [b[0], b[1], bias, b[2]])
        assert len(W2) == 4
