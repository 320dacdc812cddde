"""PLT detection (compiler/automata/piecewise_local.py): the generator's subsequences are found and
the plan's table is the automaton's; languages of the neighbouring classes are refused by name."""

from __future__ import annotations

import random

import numpy as np
import pytest

from compiler.automata.factor_witnesses import refuting_pairs
from compiler.automata.factors import class_maps
from compiler.automata.load import load_spec
from compiler.automata.piecewise import embeds
from compiler.automata.catalog import build
from compiler.automata.piecewise_local import PiecewiseLocalPlan, beside_tracker, detect, identity_witness
from compiler.automata.subregular_families import draw, random_language


def _words(plan: PiecewiseLocalPlan) -> set[tuple[int, ...]]:
    return {tuple(a for a, m in c for _ in range(m)) for c in plan.chains}


@pytest.mark.parametrize("k,letters,layers", [(2, 16, 2), pytest.param(6, 16, 6, id="plt6-16"),
                                              pytest.param(6, 64, 6, marks=pytest.mark.slow, id="plt6-64")])
def test_the_generators_subsequences_are_found(k, letters, layers):
    """The least ambiguous distinguishers and the ordered pairs after each tracked word find the
    drawn subsequences (PLT_6 on 16 letters: (1 14) and (10 14 14 10 13 1), its last letter's
    window pattern left to the factor part; PLT_6 on 64 letters: both, 668 states)."""
    lang, a = draw("plt", k=k, letters=letters, seed=0)
    plan, why = detect(a)
    assert plan is not None, why
    drawn = set(lang.piecewise.patterns)  # type: ignore[union-attr]
    assert all(any(w == d[:len(w)] for d in drawn) for w in _words(plan)) and len(_words(plan)) == len(drawn)
    assert plan.layers <= layers and plan.k == k


def test_the_table_is_the_automatons_on_random_words():
    """Each key the walk reaches holds the state: recompute the chains' progress of random words
    and check that words with the same window-free features (progress, flags) agree with the plan
    wherever the plan's key is determined by them."""
    a = random_language("plt", k=3, letters=3, seed=4)
    plan, why = detect(a)
    assert plan is not None, why
    chains = [tuple(x for x, m in c for _ in range(m)) for c in plan.chains]
    n_local = 1 + plan.local.n_groups
    rng = random.Random(0)
    for _ in range(200):
        w = [rng.randrange(3) for _ in range(rng.randint(1, 12))]
        progress = tuple(max(i for i in range(len(c) + 1) if embeds(c[:i], w)) for c in chains)
        states = {q for key, q in zip(plan.keys, plan.states) if key[n_local:] == progress}
        assert a.run(w)[-1] in states


def test_the_plan_round_trips():
    plan, _ = detect(random_language("plt", k=2, letters=4, seed=2))
    assert plan is not None
    assert PiecewiseLocalPlan.from_dict(plan.to_dict()) == plan


@pytest.mark.parametrize("spec,message", [
    (load_spec("parity"), "a letter has a cycle"),
    (random_language("lt", k=3, letters=4, seed=0), "factors alone"),
    (random_language("pt", k=3, letters=4, seed=0), "partially ordered and locally confluent"),
])
def test_neighbouring_classes_are_refused_by_name(spec, message):
    plan, why = detect(spec)
    assert plan is None and message in why


def test_refuting_pairs_reach_different_labels_with_the_same_free_feature():
    """The sampled conflicts (same k-factors) on the automaton beside its subsequence tracker: each
    pair's words end in states of different labels and equal tracker sets; with the generator's
    subsequences tracked there are none."""
    lang, a = draw("plt", k=2, letters=16, seed=0)
    for words, some in (([], True), (list(lang.piecewise.patterns) + [(1,), (13,)], False)):  # type: ignore[union-attr]
        prod, label, free = beside_tracker(a, words)
        maps, _ = class_maps(prod)
        _, dense = np.unique(free, return_inverse=True)
        pairs = refuting_pairs(maps, 0, 6, (label, dense))
        assert bool(pairs) is some
        for x, y in pairs[:20]:
            ends = []
            for word in (x, y):
                q = 0
                for c in word:
                    q = int(maps[c - 1, q])
                ends.append(q)
            assert label[ends[0]] != label[ends[1]] and dense[ends[0]] == dense[ends[1]]


@pytest.mark.parametrize("cls,k,letters,seed", [("plt", 2, 16, 0), ("plt", 4, 4, 1), ("plt", 4, 64, 0),
                                                ("plt", 6, 16, 0), ("lt", 4, 16, 0), ("pt", 4, 16, 0), ("sl", 6, 4, 0)])
def test_the_identities_hold_on_the_classes_they_are_drawn_from(cls, k, letters, seed):
    """e y e = e y e y e and e y e z e = e z e y e hold on every PLT, LT and PT language drawn (the
    lemma of identity_witness), and so does the alternation identity (any x, y, z: _alternation_witness
    checks it on letters): the refutation never refuses a member of the class."""
    assert identity_witness(random_language(cls, k=k, letters=letters, seed=seed)) is None


@pytest.mark.parametrize("spec,needle", [("grid:9", "e y e != e y e y e"), ("dyck:4,2", "e y e != e y e y e"),
                                         ("grid2d:3,4", "e y e z e != e z e y e")])
def test_a_failing_identity_refutes_in_a_few_compositions(spec, needle):
    """The gridworld (x = L R, y = L: from cell 3, e L e reaches 2 and e L e L e 1), the bounded
    stack and the box world fail an identity, and detect refuses them with it."""
    a = build(spec)
    assert needle in identity_witness(a)
    plan, reason = detect(a)
    assert plan is None and needle in reason


def test_a_prefix_pattern_is_searched_past():
    """PLT_5 on 16 letters (45 states) needs the prefix pattern 10 13 0 11 before its subsequence
    matters: no sample reaches past it (each starts with a block), the ordered pairs after the
    states' access words do; it was refused by the factor search's budget."""
    plan, why = detect(random_language("plt", k=5, letters=16, seed=0))
    assert plan is not None, why
    assert plan.layers <= 5 and plan.k == 5


@pytest.mark.parametrize("spec,letters", [("flipflop", "'w0', z = 'w1'"), ("memory:3", "'0', z = '1'"),
                                          ("adder:2", "'00', z = '11'")])
def test_the_alternation_identity_refutes_what_the_others_miss(spec, letters):
    """The flip-flop, a register and a carry satisfy e y e = e y e y e and e y e z e = e z e y e
    (they spent the whole search budget before) and fail f = f y e for f = (e y e z)^omega e: the
    flip-flop's (set reset)^omega and (set reset)^omega set end in different states."""
    a = build(spec)
    plan, reason = detect(a)
    assert plan is None and "f != f y e" in reason and letters in reason
