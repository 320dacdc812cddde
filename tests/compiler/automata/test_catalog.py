"""Tests for compiler.automata.catalog: the named automata and the name parser."""

from __future__ import annotations

import json

import pytest

from compiler.automata import catalog
from compiler.automata.errors import SpecError
from compiler.automata.semigroup import closure
from compiler.automata.spec import Semiautomaton, from_dict


def final_state(a: Semiautomaton, word: str | list[str], start: str | None = None) -> str:
    """Name of the state after reading ``word`` (space-separated symbols or a list)."""
    symbols = word.split() if isinstance(word, str) else word
    q0 = None if start is None else a.state_index[start]
    states = a.run(a.symbol_ids(symbols), start=q0)
    return a.states[states[-1]] if states else a.states[a.start if q0 is None else q0]


GROUP_ORDERS = {
    **{f"cyclic:{n}": n for n in range(2, 9)},
    "cyclic-product:2,2": 4,
    "cyclic-product:2,2,2": 8,
    "dihedral:3": 6,
    "dihedral:4": 8,
    "quaternion": 8,
    "alternating:4": 12,
    "alternating:5": 60,
    "symmetric:4": 24,
    "symmetric:5": 120,
}


# --- groups ------------------------------------------------------------------


@pytest.mark.parametrize("name,order", sorted(GROUP_ORDERS.items()))
def test_group_automaton_is_regular_action_of_group_of_right_order(name: str, order: int) -> None:
    a = catalog.build(name)
    assert a.n_states == order
    for m in a.maps:  # every letter is a permutation of the states
        assert sorted(m) == list(range(order))
    group = closure(a.maps)
    assert len(group) == order  # |G| = |Q| ...
    assert {g[a.start] for g in group} == set(range(order))  # ... and transitive: regular
    assert tuple(range(order)) in group  # a group contains the identity map


@pytest.mark.parametrize("name", ["cyclic:6", "cyclic-product:2,3", "quaternion"])
def test_letters_that_are_elements_move_the_identity_to_themselves(name: str) -> None:
    a = catalog.build(name)
    for sym in a.alphabet:
        assert final_state(a, [sym]) == sym


def test_cyclic_adds_mod_n() -> None:
    a = catalog.build("cyclic:5")
    assert a.states == a.alphabet == ("0", "1", "2", "3", "4")
    assert all(a.delta(q, s) == (q + s) % 5 for q in range(5) for s in range(5))
    assert final_state(a, "3 4 4") == "1"


def test_cyclic_product_adds_componentwise() -> None:
    a = catalog.build("cyclic-product:2,2,2")
    assert a.states[a.start] == "0.0.0"
    assert final_state(a, "1.1.0", start="0.1.1") == "1.0.1"
    assert final_state(a, "1.0.1 1.0.1") == "0.0.0"
    mixed = catalog.build("cyclic-product:2,3")
    assert final_state(mixed, "1.2 0.2") == "1.1"


@pytest.mark.parametrize(
    "word,expected",
    [("i i", "-1"), ("j j", "-1"), ("k k", "-1"), ("i j k", "-1"), ("i j", "k"), ("j i", "-k"),
     ("j k", "i"), ("k i", "j"), ("i i i i", "1"), ("1", "1")],
)
def test_quaternion_relations(word: str, expected: str) -> None:
    q8 = catalog.build("quaternion")
    assert set(q8.states) == {"1", "-1", "i", "-i", "j", "-j", "k", "-k"}
    assert q8.alphabet == ("1", "i", "j", "k")
    assert final_state(q8, word) == expected


@pytest.mark.parametrize("n", [3, 4, 5])
def test_dihedral_car_on_a_circle(n: int) -> None:
    d = catalog.build(f"dihedral:{n}")
    assert d.alphabet == ("advance", "reverse")
    assert d.states[d.start] == "r0+"
    assert final_state(d, "advance advance") == f"r{2 % n}+"
    assert final_state(d, "reverse advance") == f"r{n - 1}-"  # moves backwards once reversed
    assert final_state(d, " ".join(["advance"] * n)) == "r0+"
    assert final_state(d, "reverse reverse") == "r0+"
    # reverse advance reverse = advance^-1, and the group is not abelian
    adv, rev = d.maps
    conj = tuple(rev[adv[rev[q]]] for q in range(d.n_states))
    assert tuple(adv[conj[q]] for q in range(d.n_states)) == tuple(range(d.n_states))
    assert final_state(d, "advance reverse") != final_state(d, "reverse advance")


def test_symmetric_products_read_left_to_right() -> None:
    s3 = catalog.build("symmetric:3")
    assert s3.alphabet == ("(1,2)", "(1,2,3)", "e")
    assert s3.states[s3.start] == "123"
    # apply (1,2), then (1,2,3): 1->2->3, 2->1->2, 3->3->1
    assert final_state(s3, ["(1,2)", "(1,2,3)"]) == "321"
    assert final_state(s3, ["(1,2,3)", "(1,2)"]) == "132"
    assert final_state(s3, ["e"]) == "123"
    assert catalog.build("symmetric:5").alphabet == ("(1,2)", "(1,2,3,4,5)", "e")


def test_alternating_is_even_permutations_with_3_cycle_letters() -> None:
    a5 = catalog.build("alternating:5")
    assert a5.alphabet == ("(1,2,3)", "(1,2,4)", "(1,2,5)")
    s5 = set(catalog.build("symmetric:5").states)
    assert set(a5.states) < s5
    assert "21345" not in a5.states  # a transposition is odd
    assert final_state(a5, ["(1,2,3)"]) == "23145"
    assert final_state(a5, ["(1,2,3)"] * 3) == "12345"


# --- semigroups ----------------------------------------------------------------


def test_dyck_behaviour_on_sample_words() -> None:
    d = catalog.build("dyck:4,2")
    assert d.n_states == 1 + 2 + 4 + 8 + 16 + 1  # stacks of depth <= 4, plus error
    assert d.alphabet == ("(", ")", "[", "]")
    assert d.states[d.start] == "ε"
    assert final_state(d, "( [ ] )") == "ε"
    assert final_state(d, "( [ (") == "([("
    assert final_state(d, ")") == "error"  # pop of an empty stack
    assert final_state(d, "( ]") == "error"  # mismatched close
    assert final_state(d, "( ( ( (") == "(((("
    assert final_state(d, "( ( ( ( [") == "error"  # deeper than n
    err = d.state_index["error"]
    assert all(m[err] == err for m in d.maps)  # error absorbs
    labels = dict(zip(d.states, d.outputs))
    assert labels["ε"] == "accept"
    assert labels["(["] == labels["error"] == "reject"
    assert sum(1 for o in d.outputs if o == "accept") == 1


def test_dyck_with_many_bracket_types_uses_word_symbols() -> None:
    d = catalog.build("dyck:2,5")
    assert d.alphabet[:2] == ("open0", "close0") and len(d.alphabet) == 10
    assert d.n_states == 1 + 5 + 25 + 1
    assert final_state(d, "open4 open1") == "4.1"
    assert final_state(d, "open4 close4") == "ε"
    assert final_state(d, "open4 close1") == "error"


def test_grid_clamps_at_the_walls() -> None:
    g = catalog.build("grid:4")
    assert g.states == ("0", "1", "2", "3") and g.alphabet == ("L", "R")
    assert final_state(g, "L L") == "0"
    assert final_state(g, "R R R R R") == "3"
    assert final_state(g, "R R R R R L") == "2"
    n = catalog.build("grid:9,noop")
    assert n.name == "grid:9,noop" and n.alphabet == ("L", "R", "N")
    assert final_state(n, "R N N R") == "2"


def test_grid2d_moves_each_axis_with_walls() -> None:
    g = catalog.build("grid2d:3,4")
    assert g.n_states == 12 and g.states[g.start] == "0,0"
    assert g.alphabet == ("L", "R", "D", "U")
    assert final_state(g, "L D") == "0,0"
    assert final_state(g, "R R R R U") == "2,1"
    assert final_state(g, "U U U U U D") == "0,2"


def test_parity_flipflop_and_memory() -> None:
    p = catalog.build("parity")
    assert final_state(p, "1 0 1 1") == "odd"
    assert dict(zip(p.states, p.outputs)) == {"even": "accept", "odd": "reject"}
    f = catalog.build("flipflop")
    assert final_state(f, "w1 r r") == "1"
    assert final_state(f, "w1 r w0 r") == "0"
    m = catalog.build("memory:4")  # Definition 5: Sigma = Q ∪ {⊥}
    assert m.alphabet == ("0", "1", "2", "3", "noop")
    for q in range(4):
        for s in range(4):
            assert m.delta(q, s) == s
        assert m.delta(q, m.symbol_index["noop"]) == q


# --- the catalog itself ---------------------------------------------------------


@pytest.mark.parametrize("entry", catalog.entries(), ids=lambda e: e.pattern)
def test_every_entry_example_builds_and_round_trips(entry: catalog.CatalogEntry) -> None:
    a = catalog.build(entry.example)
    assert a.name == entry.example
    assert a.start == 0  # the start state is listed first
    assert entry.example.split(":")[0] == entry.pattern.split(":")[0]
    assert entry.description and "\n" not in entry.description
    assert from_dict(a.to_dict()) == a
    assert from_dict(json.loads(a.to_json())) == a
    assert catalog.build(entry.example).digest() == a.digest()  # deterministic


WHITESPACE_CHECK = sorted({e.example for e in catalog.entries()} | set(catalog.paper_suite()) | {
    "symmetric:6", "alternating:6", "dyck:2,5", "grid:3,noop", "grid2d:2,3", "memory:4", "cyclic-product:3,4"})


@pytest.mark.parametrize("name", WHITESPACE_CHECK)
def test_no_name_is_empty_or_contains_whitespace(name: str) -> None:
    """A word is whitespace-separated symbols (``shortcut run``), and runs print states that way."""
    a = catalog.build(name)
    for label in a.states + a.alphabet + (a.outputs or ()):
        assert label and label == "".join(label.split()), (name, label)


def test_paper_suite() -> None:
    suite = catalog.paper_suite()
    assert suite == [f"cyclic:{n}" for n in range(2, 9)] + [
        "cyclic-product:2,2", "cyclic-product:2,2,2", "dihedral:3", "dihedral:4", "quaternion",
        "alternating:4", "symmetric:4", "alternating:5", "symmetric:5", "dyck:4,2", "grid:4", "grid:9",
    ]
    assert [catalog.build(n).name for n in suite] == suite


def test_names_are_canonicalised() -> None:
    assert catalog.build(" Cyclic : 05 ").name == "cyclic:5"
    assert catalog.build("GRID:9,NOOP").name == "grid:9,noop"


@pytest.mark.parametrize(
    "name,message",
    [
        ("foo", "unknown catalog automaton 'foo'; run `shortcut catalog`"),
        ("cyclic", "takes 1 integer parameter, got 0"),
        ("cyclic:", "empty parameter list"),
        ("cyclic:1", "cyclic:n needs n >= 2, got 1"),
        ("cyclic:-3", "needs n >= 2, got -3"),
        ("cyclic:x", "needs integer parameters, got 'x'"),
        ("cyclic:5,,", "empty parameter"),
        ("cyclic:5,6", "takes 1 integer parameter, got 2"),
        ("cyclic:100000", "needs n <= 1000"),
        ("cyclic-product:2", "at least two factors"),
        ("cyclic-product:2,1", "needs n2 >= 2, got 1"),
        ("cyclic-product:10,10,20", "<= 1000, got 2000"),
        ("symmetric:7", "symmetric:n needs n <= 6"),
        ("alternating:9", "alternating:n needs n <= 6"),
        ("alternating:2", "needs n >= 3"),
        ("dyck:4", "takes 2 integer parameters, got 1"),
        ("dyck:20,2", "more than 2000 states"),
        ("dyck:10000000000,1", "more than 2000 states"),
        ("dyck:3,0", "needs k >= 1, got 0"),
        ("grid:1", "grid:n needs n >= 2, got 1"),
        ("grid:9,fast", "needs integer parameters, got 'fast'"),
        ("grid:9,noop,noop", "given twice"),
        ("grid2d:100,100", "w*h <= 2000, got 10000"),
        ("quaternion:3", "takes no parameters"),
        ("memory:1", "memory:n needs n >= 2, got 1"),
        ("dihedral:5000", "dihedral:n needs n <= 1000"),
    ],
)
def test_bad_names_raise_spec_error(name: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        catalog.build(name)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
