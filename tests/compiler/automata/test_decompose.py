"""Tests for compiler.automata.decompose and compiler.automata.cascade: the verified Krohn–Rhodes cascade."""

from __future__ import annotations

import json
import random

import pytest

from compiler.automata import catalog
from compiler.automata.cascade import Cascade, summary_json, summary_text, to_dot
from compiler.automata.decompose import decompose, minimise
from compiler.automata.errors import BudgetError
from compiler.automata.spec import Semiautomaton


def full_transformation_monoid(n: int) -> Semiautomaton:
    """T_n from an n-cycle, a transposition and a rank-(n-1) collapse."""
    maps = (tuple(list(range(1, n)) + [0]), (1, 0) + tuple(range(2, n)), (0, 0) + tuple(range(2, n)))
    return Semiautomaton(f"T{n}", tuple(str(q) for q in range(n)), ("cycle", "swap", "collapse"), maps, 0)


def automaton(maps, start: int = 0, name: str = "test") -> Semiautomaton:
    n = len(maps[0])
    return Semiautomaton(name, tuple(f"q{i}" for i in range(n)), tuple(f"a{i}" for i in range(len(maps))),
                         tuple(tuple(m) for m in maps), start)


def random_automaton(rng: random.Random) -> Semiautomaton:
    """2-6 states, 1-4 letters, each a permutation, a reset or an arbitrary map."""
    n, k = rng.randint(2, 6), rng.randint(1, 4)
    return automaton(catalog.random_maps(rng, n, k), start=rng.randrange(n), name="random")


def check_structure(c: Cascade) -> None:
    """Invariants every cascade must satisfy, checked from the outside."""
    a = c.automaton
    names = [x.name for x in c.components]
    level_of = {x.name: x.level for x in c.components}
    view_names = {v.name for v in c.views}
    assert len(set(names)) == len(names)
    for comp in c.components:
        assert comp.kind in ("counter", "reset", "group")
        assert comp.size >= 2
        for r in comp.reads:
            assert r in level_of or r in view_names
        for d in comp.depends_on:
            assert level_of[d] < comp.level  # levels only read earlier levels
        for (vals, letter), action in comp.table.items():
            assert len(vals) == len(comp.reads)
            assert 0 <= letter < a.n_symbols
            if comp.kind == "counter":
                assert 0 <= action < comp.size
            elif comp.kind == "reset":
                assert action is None or 0 <= action < comp.size
            else:
                assert 0 <= action < comp.size
        assert 0 <= comp.initial < comp.size
    assert c.start == c.encoding[a.start]
    for q in range(a.n_states):
        assert c.decode(c.encode(q)) == q
    assert c.verification.verified


# --- golden cases ------------------------------------------------------------------


@pytest.mark.parametrize("n,size,levels", [(3, 27, 2), (4, 256, 3), (5, 3125, 4)])
def test_full_transformation_monoids(n, size, levels):
    c = decompose(full_transformation_monoid(n))
    s = summary_json(c)
    assert s["semigroup_size"] == size
    assert s["holonomy_levels"] == levels
    assert s["verified"]
    assert s["solvable"] == (n < 5)  # T5 contains S5
    check_structure(c)


def test_t3_is_checked_exhaustively():
    c = decompose(full_transformation_monoid(3))
    assert c.verification.final_tables_exhaustive
    assert c.verification.direct_complete


def test_no_singleton_image():
    # swaps inside {0,1} and {2,3}, and a collapse onto {0,1}: no singleton is an image
    c = decompose(automaton([(1, 0, 3, 2), (0, 1, 0, 1)]))
    assert c.holonomy_levels == 2
    assert c.verification.verified and c.verification.direct_complete
    check_structure(c)


def test_holonomy_group_smaller_on_tiles_than_on_points():
    c = decompose(automaton([(1, 0, 3, 2), (2, 3, 0, 1), (0, 1, 0, 1)]))
    orders = [g.order for g in c.holonomy_groups if g.holonomy_level == 1]
    assert orders == [2]  # C2 on the tiles {0,1}, {2,3}, although <s, t> is C2 x C2 on the points
    check_structure(c)


# --- the catalog ---------------------------------------------------------------------

PARTIAL = {"dyck-legal:4,2"}
"""Catalog examples under the promise of legal inputs: decompose sees their self-loop completion, whose
holonomy decomposition is over the image budget for the paper's Dyck (the legal stack compiles it)."""
CATALOG = sorted((set(catalog.paper_suite()) | {e.example for e in catalog.entries()}
                  | {"memory:5", "grid:9,noop", "dyck:3,3", "dihedral:6", "cyclic-product:4,6"}) - PARTIAL)
DERIVED_LENGTH = {"cyclic-product:2,2": 1, "cyclic-product:2,2,2": 1, "dihedral:3": 2, "dihedral:4": 2,
                  "quaternion": 2, "alternating:4": 2, "symmetric:4": 3, "parity": 1,
                  **{f"cyclic:{n}": 1 for n in range(2, 9)}}
RESETS_ONLY = ("flipflop", "memory", "grid", "dyck")


@pytest.mark.parametrize("name", CATALOG)
def test_catalog_automaton(name):
    c = decompose(catalog.build(name))
    s = summary_json(c)
    assert s["verified"]
    check_structure(c)
    if name in ("alternating:5", "symmetric:5"):
        assert not s["solvable"]
        assert s["non_solvable_groups"] == [{"alternating:5": "A5", "symmetric:5": "S5"}[name]]
        assert [x["kind"] for lvl in s["levels"] for x in lvl] == ["group"]
    else:
        assert s["solvable"] and s["non_solvable_groups"] == []
    if name.split(":")[0] in RESETS_ONLY:
        assert {x["kind"] for lvl in s["levels"] for x in lvl} == {"reset"}
        assert s["counter_free"]
    if name in DERIVED_LENGTH:
        assert s["counter_levels"] == DERIVED_LENGTH[name] == s["n_levels"]
        assert {x["kind"] for lvl in s["levels"] for x in lvl} == {"counter"}
    a = c.automaton
    rng = random.Random(0)
    word = [rng.randrange(a.n_symbols) for _ in range(200)]
    assert c.simulate(word) == a.run(word)


def test_group_automata_use_one_counter_level_per_derived_level():
    c = decompose(catalog.build("symmetric:4"))
    assert [[x.size for x in lvl] for lvl in c.levels] == [[2], [3], [2, 2]]
    assert c.levels[0][0].reads == ()  # the top counter reads only the letter


# --- random automata -------------------------------------------------------------------


def test_random_automata_decompose_and_verify():
    rng = random.Random(2024)
    for _ in range(300):
        a = random_automaton(rng)
        c = decompose(a)
        assert c.verification.verified
        word = [rng.randrange(a.n_symbols) for _ in range(50)]
        assert c.simulate(word) == a.run(word)
        for comp in c.components:
            assert all(c.components[[x.name for x in c.components].index(d)].level < comp.level
                       for d in comp.depends_on)


# --- edge cases ----------------------------------------------------------------------------


def test_one_state():
    c = decompose(automaton([(0,), (0,)]))
    assert c.components == [] and c.holonomy_levels == 0
    assert c.simulate([0, 1, 0]) == [0, 0, 0]


def test_identity_and_duplicate_letters():
    a = automaton([(1, 0, 2), (0, 1, 2), (1, 0, 2), (2, 2, 2)])
    c = decompose(a)
    s = summary_json(c)
    assert s["identity_letters"] == ["a1"]
    assert s["merged_letters"] == [["a0", "a2"]]
    check_structure(c)
    for comp in c.components:  # the identity letter changes nothing
        for (vals, letter), action in comp.table.items():
            if letter == 1:
                assert action in (0, None) if comp.kind != "group" else action == 0


def test_only_identity_letters():
    c = decompose(automaton([(0, 1, 2)]))
    assert c.simulate([0, 0]) == [c.automaton.start] * 2
    assert summary_json(c)["semigroup_size"] == 1


def test_budget_errors_are_one_line():
    with pytest.raises(BudgetError) as e:
        decompose(full_transformation_monoid(7), chain_budget=1000)
    assert "\n" not in str(e.value) and "budget" in str(e.value)
    with pytest.raises(BudgetError, match="group budget"):
        decompose(catalog.build("symmetric:5"), group_budget=100)
    with pytest.raises(BudgetError, match="table budget"):
        decompose(full_transformation_monoid(5), table_budget=100)


def test_semigroup_size_past_the_count_budget_is_unknown():
    c = decompose(full_transformation_monoid(4), count_budget=100)
    s = summary_json(c)
    assert s["semigroup_size"] is None and s["semigroup_size_exceeds"] == 100


# --- the Cascade API and reports ----------------------------------------------------------------


def test_step_encode_decode_simulate():
    a = catalog.build("dyck:4,2")
    c = decompose(a)
    coords = c.start
    word = a.symbol_ids(list("(()[]"))
    states = []
    for letter in word:
        coords = c.step(coords, letter)
        states.append(c.decode(coords))
    assert states == a.run(word) == c.simulate(word) == c.simulate(list("(()[]"))
    assert c.encode(a.states[3]) == c.encoding[3]


def test_tables_are_explicit_and_minimal_for_counters():
    c = decompose(catalog.build("cyclic:5"))
    (comp,) = c.components
    assert comp.kind == "counter" and comp.size == 5 and comp.reads == ()
    assert comp.table == {((), a): int(c.automaton.alphabet[a]) for a in range(5)}
    assert comp.initial == 0


def test_flipflop_is_one_reset_unit():
    c = decompose(catalog.build("flipflop"))
    (comp,) = c.components
    a = c.automaton
    assert comp.kind == "reset" and comp.size == 2 and comp.reads == ()
    keep = a.alphabet.index("r")
    assert comp.table[((), keep)] is None
    assert {comp.table[((), a.alphabet.index(w))] for w in ("w0", "w1")} == {0, 1}


def test_summary_text_json_and_dot():
    c = decompose(full_transformation_monoid(4))
    s = summary_json(c)
    json.dumps(s)  # JSON-able
    for key in ("semigroup_size", "is_group", "solvable", "non_solvable_groups", "holonomy_levels", "levels",
                "verified"):
        assert key in s
    assert all(x["kind"] in ("counter", "reset", "group") and x["size"] >= 2 for lvl in s["levels"] for x in lvl)
    text = summary_text(c)
    assert "holonomy level" in text and "verified" in text
    dot = to_dot(c)
    assert dot.startswith("digraph cascade {") and dot.rstrip().endswith("}")
    assert all(f'"signal {x.name}"' in dot and f'label="{x.name}\\n' in dot for x in c.components)


def test_is_group_flags():
    assert summary_json(decompose(catalog.build("quaternion")))["is_group"]
    assert not summary_json(decompose(catalog.build("flipflop")))["is_group"]
    # a group that is not a permutation group: both letters act as C2 on the image {0, 1}
    c = decompose(automaton([(1, 0, 0), (0, 1, 1)]))
    s = summary_json(c)
    assert s["is_group"] and not s["is_permutation"]


def test_minimise_drops_unused_reads():
    table = {((x, y), a): (x + a) % 2 for x in range(2) for y in range(3) for a in range(2)}
    reads, t = minimise(("x", "y"), table)
    assert reads == ("x",)
    assert t == {((x,), a): (x + a) % 2 for x in range(2) for a in range(2)}
    big = {((x, y, z), a): (x * z + a) % 3 for x in range(30) for y in range(10) for z in range(10) for a in range(3)}
    reads, t = minimise(("x", "y", "z"), big)
    assert reads == ("x", "z") and len(t) == 30 * 10 * 3


def test_cli_decompose(tmp_path, capsys):
    from compiler.cli import main

    dot = tmp_path / "c.dot"
    assert main(["decompose", "flipflop", "--json", "--dot", str(dot)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["verified"] and s["levels"] == [[{**s["levels"][0][0], "kind": "reset", "size": 2}]]
    assert dot.read_text().startswith("digraph")
    assert main(["decompose", "cyclic:3"]) == 0
    assert "counter mod 3" in capsys.readouterr().out
    assert main(["decompose", "nosuch:3"]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_the_papers_dyck_is_refused_by_its_budget_not_a_crash():
    with pytest.raises(BudgetError, match="image budget"):
        decompose(catalog.build("dyck-legal:4,2"))
    c = decompose(catalog.build("dyck-legal:2,1"))  # a small one: its self-loop completion, verified
    assert summary_json(c)["verified"]
