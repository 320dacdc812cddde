"""The program proof's step caches (verify/certify/memo.py): a cached result is reused only where
every residual entry its run touched agrees."""

from __future__ import annotations

import numpy as np

from constructions.obligations import Beside, Lookup, Recent, SuffixLookup
from verify.certify.memo import WIDE, HeadCache, StepCache
from verify.certify.semantics import Head, run_mlp


def test_a_lookup_is_run_once_per_combination_of_the_codes_it_names():
    o = Lookup("m", ("a",), "out", {(0,): np.array([5.0]), (1,): np.array([7.0])})
    cache = StepCache()
    outs = []
    for a in (0, 1, 0, 1, 0):
        env = {"a": (float(a),), "out": (0.0,), "b": (3.0,)}
        cache.run(o, env, {})
        outs.append(env["out"])
    assert outs == [(5.0,), (7.0,), (5.0,), (7.0,), (5.0,)]
    assert len(cache.done[id(o)]) == 2


def test_a_step_reading_an_entry_its_obligation_does_not_name_is_keyed_on_it():
    """A step whose semantics read ``x`` (not named by its obligation): two residuals that differ
    only there must not share a cached result."""
    o = Lookup("m", ("a",), "out", {(0,): np.array([1.0])})

    def reads_x(env):
        env["out"] = (env["out"][0] + env["x"][0],)
    cache = StepCache()
    got = []
    for x in (1.0, 2.0, 1.0):
        env = {"a": (0.0,), "out": (0.0,), "x": (x,)}
        cache.run(o, env, {id(o): reads_x})
        got.append(env["out"][0])
    assert got == [1.0, 2.0, 1.0]


def test_a_head_reading_an_undeclared_entry_is_keyed_on_it():
    f = Recent("h", "flag", "src", "dst")
    h = Head("dst", 0, lambda e: 0, lambda e: (0.0,), lambda m, e, t: (m, (e["y"][0],)))
    cache = HeadCache()
    got = [cache.step(f, h, 0, {"flag": (1.0,), "src": (0.0,), "y": (y,)}, 5)[1] for y in (1.0, 2.0, 1.0)]
    assert got == [(1.0,), (2.0,), (1.0,)]


def test_the_parts_beside_each_other_are_cached_each_on_its_own_codes():
    """A Beside of a lookup on ``a`` and one on ``b``: ``b`` changes every run, so the whole MLP's
    codes never repeat, but the lookup on ``a`` runs once -- and a run's outputs are still each
    part's own."""
    on_a = Lookup("m.a", ("a",), "out_a", {(0,): np.array([5.0])})
    on_b = Lookup("m.b", ("b",), "out_b", {(b,): np.array([float(b)]) for b in range(4)})
    both = Beside("m", (on_a, on_b))
    runs = []

    def counted(env):
        runs.append(env["a"])
        env["out_a"] = (env["out_a"][0] + 5.0,)
    cache = StepCache()
    for b in range(4):
        env = {"a": (0.0,), "b": (float(b),), "out_a": (0.0,), "out_b": (0.0,)}
        cache.run(both, env, {id(on_a): counted})
        assert env["out_a"] == (5.0,) and env["out_b"] == (float(b),)
    assert len(runs) == 1


def test_a_suffix_lookup_is_cached_by_the_longest_key_its_codes_start_with():
    """Codes that share a shorter key but not the longest one must not share a result (a cache
    keyed on too short a prefix would give (1, 2, 0) the sum of (1, 3, 0)); codes that differ only
    past their longest key share one, and every result is the uncached semantics'."""
    o = SuffixLookup("m", ("a", "b", "c"), "out",
                     {(): np.array([100.0]), (1,): np.array([1.0]), (1, 2): np.array([10.0]), (2, 2, 2): np.array([7.0])})
    cache = StepCache()
    for codes in ((1, 3, 0), (1, 2, 0), (1, 2, 5), (2, 2, 0), (2, 2, 2), (1, 3, 9), (0, 0, 0)):
        env = {"a": (float(codes[0]),), "b": (float(codes[1]),), "c": (float(codes[2]),), "out": (0.5,)}
        want = dict(env)
        run_mlp(o, want, {})
        cache.run(o, env, {})
        assert env == want
    assert {k for _, k, _ in cache.sums} == {(), (1,), (1, 2), (2, 2, 2)}


def test_a_wide_code_is_keyed_on_its_value_whatever_the_object():
    """A destination wider than ``WIDE`` dims is keyed on a number per value, found by identity
    first: an equal code in another object shares the result, a code that differs in one dim
    does not (a key on the object, or on the width, would fail one of the two)."""
    w = WIDE + 8
    o = Lookup("m", ("a",), "out", {(0,): np.ones(w)})
    cache = StepCache()
    olds = [tuple([0.0] * w), tuple([0.0] * w), tuple(float(i == 3) for i in range(w))]
    for old in (olds[0], olds[1], olds[2], olds[0]):
        env, want = {"a": (0.0,), "out": old}, {"a": (0.0,), "out": old}
        run_mlp(o, want, {})
        cache.run(o, env, {})
        assert env == want
    assert len(cache.done[id(o)]) == 2
