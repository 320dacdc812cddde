"""Declared budgets of the planner's analyses: each refuses before allocating, naming the real cause."""

from __future__ import annotations

import random

import numpy as np
import pytest

from compiler.automata import bitsets, definite, formats, holonomy, representation, semigroup
from compiler.automata.catalog import random_automaton
from compiler.automata.errors import BudgetError, ShortcutError, SpecError
from compiler.automata.load import load_spec
from compiler.cli import main
from constructions import gridworld, krohn_rhodes
from constructions.budget import MAX_PARAMS
from constructions.construction import Refusal


def test_a_letter_on_two_cycles_proves_not_definite_at_once():
    k, reason = definite.definite_depth(load_spec("cyclic:3"))
    assert k is None and reason.startswith("not definite: the letter") and "never merges" in reason


def test_pair_budget_gives_up_naming_the_pairs():
    k, reason = definite.definite_depth(load_spec("nth-last:4"), max_pairs=10)
    assert k is None and "walks the 120 pairs of 16 states, over the budget of 10" in reason


def test_pair_steps_budget_gives_up_after_some_letters(monkeypatch):
    monkeypatch.setattr(definite, "MAX_PAIR_STEPS", 300)
    k, reason = definite.definite_depth(load_spec("nth-last:4"))
    assert k is None and reason.startswith("gave up after") and "over the budget of 300 pair images" in reason
    assert definite.detect(load_spec("nth-last:4"))[0] is None


def test_table_budget_refuses_before_reading(monkeypatch):
    monkeypatch.setattr(definite, "MAX_TABLE_CELLS", 10)
    plan, reason = definite.detect(load_spec("nth-last:3"))
    assert plan is None and "reads the 8 x 2 transition table (16 cells), over the budget of 10" in reason


def test_walk_cache_answers_like_a_fresh_walk():
    rng = random.Random(5)
    for _ in range(60):
        a = random_automaton(rng, rng.randint(2, 7), rng.randint(1, 3))
        cache: definite.WalkCache = {}
        for m in (1, 2, 3):
            for limit in (3, 1, 5, 0):
                assert definite.generalised_depth(a, m, limit, cache) == definite.generalised_depth(a, m, limit)


def test_regex_dfa_is_bounded_during_construction(monkeypatch):
    monkeypatch.setattr(formats, "REGEX_MAX_SUBSETS", 8)
    with pytest.raises(BudgetError, match="more than 8 states before minimising"):
        load_spec("regex:(a|b)*a(a|b){3}", alphabet=("a", "b"))
    assert load_spec("regex:(a|b)*a", alphabet=("a", "b")).n_states == 2


def test_regex_over_budget_exits_2_with_one_line(monkeypatch, capsys):
    monkeypatch.setattr(formats, "REGEX_MAX_SUBSETS", 8)
    assert main(["plan", "regex:(a|b)*a(a|b){3}", "--alphabet", "a,b"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "subset construction's budget" in err


def test_table_limit_names_the_analysis_budget(monkeypatch):
    monkeypatch.setattr(formats, "TABLE_MAX_CELLS", 6)
    with pytest.raises(SpecError, match="over the limit of 6 .the size the planner's analyses are budgeted for"):
        formats.from_table([[0, 1], [1, 2], [2, 0], [0, 0]])


def test_holonomy_refuses_too_many_states_and_cells(monkeypatch):
    monkeypatch.setattr(holonomy, "HOLONOMY_MAX_STATES", 4)
    r = krohn_rhodes.applies(load_spec("grid:5"))
    assert isinstance(r, Refusal) and "at most 4 states" in r.reason and "has 5" in r.reason
    monkeypatch.setattr(holonomy, "HOLONOMY_MAX_STATES", 1 << 12)
    monkeypatch.setattr(holonomy, "HOLONOMY_CELLS", 5)
    r = krohn_rhodes.applies(load_spec("grid:5"))
    assert isinstance(r, Refusal) and "map entries, over the budget of 5" in r.reason


def test_vectorised_closure_is_the_same_list(monkeypatch):
    rng = random.Random(2)
    gens = [random_automaton(rng, 6, 3).maps for _ in range(5)]
    plain = [semigroup.closure(g) for g in gens]
    monkeypatch.setattr(semigroup, "VECTOR_STATES", 1)
    assert [semigroup.closure(g) for g in gens] == plain
    with pytest.raises(BudgetError, match="more than 3 elements"):
        semigroup.closure(load_spec("symmetric:3").maps, 3)


def test_representation_search_stops_at_its_work_budget(monkeypatch):
    a = load_spec("symmetric:4")
    assert representation.choose(a).n_points < a.n_states  # the quotient search finds a smaller action
    monkeypatch.setattr(representation, "CLOSURE_WORK", 10)
    assert representation.choose(a).n_points == a.n_states  # beyond the budget: the natural action


def test_holonomy_order_and_power():
    m = (1, 2, 0, 4, 3, 5)
    assert bitsets.order_on(m, [0, 1, 2, 3, 4]) == 6 and bitsets.order_on(m, [5]) == 1
    assert bitsets.power(m, 0) == tuple(range(6)) and bitsets.power(m, 4) == (1, 2, 0, 3, 4, 5)


@pytest.mark.parametrize("name,needle", [("nth-last:12", "nth-last:n needs n <= 11 (2^n states"),
                                         ("grid:627", "grid:n needs n <= 626 (gridworld's parameters grow as n^2")])
def test_catalog_limits_name_what_does_not_compile(name, needle):
    with pytest.raises(ShortcutError, match=needle.replace("(", r"\(").replace("^", r"\^")):
        load_spec(name)


def test_largest_grid_fits_the_parameter_budget():
    plan = gridworld.applies(load_spec("grid:626"))
    assert gridworld.estimate(plan, 16, "sinusoidal").params <= MAX_PARAMS


def test_cyclic_states_are_the_images_of_a_high_power():
    maps = np.array([[1, 2, 0, 0], [0, 0, 1, 3]])
    assert definite.cyclic_states(maps).tolist() == [[True, True, True, False], [True, False, False, True]]
