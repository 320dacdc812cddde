"""Partial automata under the promise of legal inputs: every input form, the domain test, legal
words (exhaustive and sampled), dropping a sink, and definiteness on legal words."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from compiler.automata.catalog import build
from compiler.automata.definite import definite_depth, detect as lookback_detect
from compiler.automata.errors import SpecError
from compiler.automata.formats import from_regex, from_table
from compiler.automata.load import load_spec
from compiler.automata.moore import minimise
from compiler.automata.promise import (
    add_sink,
    count_legal,
    drop_state,
    exhaustive_legal_length,
    legal_mask,
    legal_reachable,
    legal_words,
    sample_legal,
)
from compiler.automata.spec import LEGAL, from_dict

PARTIAL = {"name": "p", "states": ["e", "a", "aa"], "alphabet": ["(", ")"],
           "transitions": {"e": {"(": "a"}, "a": {"(": "aa", ")": "e"}, "aa": {")": "a"}}}
"""A depth-2 counter whose underflow and overflow are undefined."""


def brute_legal(a, length: int) -> set[tuple[int, ...]]:
    """Every legal word of ``length`` letters, by brute force over all words."""
    return {w for w in itertools.product(range(a.n_symbols), repeat=length) if a.first_illegal(w) is None}


def test_a_partial_spec_needs_a_promise_or_a_sink():
    with pytest.raises(SpecError, match=r"partial; pass --promise legal.*--complete \(complete=True\)"):
        from_dict(PARTIAL)
    with pytest.raises(SpecError, match="unknown promise"):
        from_dict(PARTIAL, promise="sometimes")
    with pytest.raises(SpecError, match="not both"):
        from_dict(PARTIAL, promise=LEGAL, complete=True)
    with pytest.raises(SpecError, match="'promise' must be a string"):
        from_dict({**PARTIAL, "promise": True})


def test_the_promise_keeps_the_states_and_marks_the_undefined_pairs():
    a = from_dict(PARTIAL, promise=LEGAL)
    assert a.states == ("e", "a", "aa") and a.partial
    assert a.undefined == ((0, 2), (1, 0))  # '(' from aa, ')' from e
    assert a.maps[0][2] == 2 and a.maps[1][0] == 0  # self-loops stand in for promise-blind analyses
    assert a.first_illegal([0, 1, 0, 0]) is None and a.first_illegal([0, 1, 1]) == 2
    assert from_dict(PARTIAL, complete=True).n_states == 4


def test_the_spec_round_trips_with_its_promise():
    a = from_dict(PARTIAL, promise=LEGAL)
    d = a.to_dict()
    assert d["promise"] == LEGAL and "(" not in d["transitions"]["aa"]
    assert from_dict(d) == a  # the spec's own field carries the promise
    filled = from_dict({**d, "promise": None, "transitions": {q: {s: a.states[a.maps[j][i]]
                                                                  for j, s in enumerate(a.alphabet)}
                                                              for i, q in enumerate(a.states)}})
    assert not filled.partial and filled.digest() != a.digest()


def test_a_json_spec_file_loads_under_the_promise(tmp_path: Path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps(PARTIAL))
    with pytest.raises(SpecError, match="partial"):
        load_spec(p)
    assert load_spec(p, promise=LEGAL).undefined == ((0, 2), (1, 0))
    p.write_text(json.dumps({**PARTIAL, "promise": "legal"}))
    assert load_spec(p).partial


def test_tables_mark_a_missing_transition_with_minus_one(tmp_path: Path):
    rows = [[1, -1], [2, 0], [-1, 1]]
    with pytest.raises(SpecError, match="partial"):
        from_table(rows)
    a = from_table(rows, promise=LEGAL)
    assert a.undefined == ((0, 2), (1, 0))
    with pytest.raises(SpecError, match=r"-2 is not a state index 0..2 \(or -1: no transition\)"):
        from_table([[1, -2], [2, 0], [0, 1]])
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"table": rows, "start": 0}))
    assert load_spec(f, promise=LEGAL) == load_spec(f, promise=LEGAL) and load_spec(f, promise=LEGAL).partial
    z = tmp_path / "t.npz"
    np.savez(z, table=np.array(rows))
    assert load_spec(z, promise=LEGAL).undefined == a.undefined
    assert load_spec(z, complete=True).n_states == 4


def test_a_partial_dot_file_loads_under_the_promise(tmp_path: Path):
    pytest.importorskip("pydot")
    p = tmp_path / "partial.dot"
    p.write_text('digraph g { __start0 [label="", shape=none]; __start0 -> a; a -> b [label="x"]; '
                 'b -> b [label="y"]; b [shape=doublecircle]; }')
    a = load_spec(p, promise=LEGAL)
    assert a.states == ("a", "b") and len(a.undefined) == 2 and a.outputs == ("reject", "accept")


def test_library_objects_load_under_the_promise():
    dfa_mod = pytest.importorskip("automata.fa.dfa")
    partial = dfa_mod.DFA(states={0, 1}, input_symbols={"a"}, initial_state=0, final_states={1},
                          transitions={0: {"a": 1}, 1: {}}, allow_partial=True)
    a = load_spec(partial, promise=LEGAL)
    assert a.states == ("0", "1") and a.undefined == ((0, 1),)
    fa = pytest.importorskip("pyformlang.finite_automaton")
    dfa = fa.DeterministicFiniteAutomaton()
    dfa.add_transition(fa.State("p"), fa.Symbol("a"), fa.State("q"))
    dfa.add_start_state(fa.State("p"))
    assert load_spec(dfa, promise=LEGAL).n_states == 2


def test_a_regex_dfa_keeps_its_dead_state_out_under_the_promise():
    pytest.importorskip("automata")
    complete = from_regex("ab*", "a,b")
    a = from_regex("ab*", "a,b", promise=LEGAL)
    assert "sink" in complete.states and "sink" not in a.states and a.partial
    assert a.n_states == complete.n_states - 1
    assert a.first_illegal([0, 1, 1]) is None and a.first_illegal([1]) == 0


def test_legal_mask_is_the_legal_prefix():
    a = from_dict(PARTIAL, promise=LEGAL)
    tokens = np.array([[0, 0, 1, 1, 1], [1, 0, 0, 0, 0], [0, 0, 0, 1, 1]])
    assert legal_mask(a, tokens).tolist() == [[True] * 4 + [False], [False] * 5, [True, True, False, False, False]]
    assert legal_mask(build("parity"), tokens).all()


def test_legal_words_are_every_legal_word_and_count_legal_counts_them():
    a = build("dyck-legal:2,2")
    for L in range(1, 7):
        rows, mask = legal_words(a, L)
        assert mask.all()  # no dead ends in a stack: every legal word continues
        assert {tuple(r) for r in rows.tolist()} == brute_legal(a, L)
        assert count_legal(a, L, 10**9) == len(rows)
    assert count_legal(a, 6, 10) == 11  # capped
    L = exhaustive_legal_length(a, 100, 4096)
    assert count_legal(a, L, 4096) <= 4096 < count_legal(a, L + 1, 4096)


def test_legal_words_keep_the_dead_ends():
    pytest.importorskip("automata")
    a = from_regex("ab", "a,b", promise=LEGAL)  # the only legal word is "a b"
    rows, mask = legal_words(a, 4)
    assert rows.tolist() == [[0, 1, 0, 0]] and mask.tolist() == [[True, True, False, False]]


def test_samples_are_legal_and_uniform_among_legal_continuations():
    a = build("dyck-legal:4,2")
    rng = np.random.default_rng(0)
    tokens, mask = sample_legal(a, rng, 2000, 64)
    assert mask.all() and legal_mask(a, tokens).all()
    first = np.bincount(tokens[:, 0], minlength=a.n_symbols)  # from the empty stack: two pushes, equally likely
    pushes = [a.symbol_index["("], a.symbol_index["["]]
    assert first.sum() == first[pushes].sum() and abs(first[pushes[0]] - 1000) < 100
    # from "((" (depth 2 of 4) the legal letters are two pushes and one pop: a third each
    after = tokens[(tokens[:, 0] == pushes[0]) & (tokens[:, 1] == pushes[0])][:, 2]
    share = np.bincount(after, minlength=a.n_symbols) / len(after)
    assert len(after) > 300 and np.allclose(share[[*pushes, a.symbol_index[")"]]], 1 / 3, atol=0.08)


def test_samples_stop_where_legal_words_do():
    pytest.importorskip("automata")
    a = from_regex("ab", "a,b", promise=LEGAL)
    tokens, mask = sample_legal(a, np.random.default_rng(0), 3, 5)
    assert tokens[:, :2].tolist() == [[0, 1]] * 3 and mask.sum(axis=1).tolist() == [2, 2, 2]


def test_drop_state_and_add_sink_undo_each_other():
    d = build("dyck:2,2")
    legal = drop_state(d, d.states.index("error"))
    catalog = build("dyck-legal:2,2")
    assert (legal.states, legal.maps, legal.undefined) == (catalog.states, catalog.maps, catalog.undefined)
    back = add_sink(legal)
    assert back.maps == d.maps and back.states[-1] == "sink"
    with pytest.raises(SpecError, match="start state"):
        drop_state(d, d.start)


def test_legal_reachable():
    a = from_dict({**PARTIAL, "states": ["e", "a", "aa", "island"], "transitions": {**PARTIAL["transitions"],
                                                                                      "island": {"(": "e"}}},
                  promise=LEGAL)
    assert legal_reachable(a).tolist() == [0, 1, 2]


def partial_nth_last() -> object:
    """nth-last:3 with no "b b" (b undefined after b): 3-definite on its legal words, while its
    completions (a sink, or the self-loops) are not definite."""
    d = build("nth-last:3").to_dict()
    for q in d["transitions"]:
        if q.endswith("b"):
            del d["transitions"][q]["b"]
    return from_dict(d, promise=LEGAL)


def test_definite_on_legal_words():
    a = partial_nth_last()
    assert definite_depth(a) == (3, "3-definite on its legal words")
    assert definite_depth(from_dict({**a.to_dict(), "promise": None}, complete=True))[0] is None
    plan, _ = lookback_detect(a)
    assert plan is not None and plan.k == 3 and plan.m == 0
    for w in brute_legal(a, 5):  # the window of the last 3 letters names the state
        assert plan.window_state(w[-3:]) == a.run(w)[-1]


def test_not_definite_on_legal_words_is_refused():
    a = build("dyck-legal:2,1")
    depth, reason = definite_depth(a)
    assert depth is None and "not definite on its legal words" in reason


def test_incompletely_specified_moore_machines_merge_compatible_states():
    a = build("dyck-legal:4,2")  # accept on the empty stack: on legal words the label is a function of the depth
    m = minimise(a)
    assert m.states_after == 5 and m.quotient.partial
    for L in range(1, 9):
        for w in brute_legal(a, L):
            assert m.quotient.first_illegal(w) is None
            assert a.outputs[a.run(w)[-1]] == m.quotient.outputs[m.quotient.run(w)[-1]]


def test_incompatible_states_stay_apart():
    # x and y carry one label but "b" separates them (legal from both); z is compatible with both
    spec = {"states": ["s", "x", "y", "z", "u", "v"], "alphabet": ["a", "b"], "start": "s",
            "transitions": {"s": {"a": "x", "b": "y"}, "x": {"a": "z", "b": "u"}, "y": {"a": "z", "b": "v"},
                            "z": {"a": "s"}, "u": {"a": "u"}, "v": {"a": "v"}},
            "outputs": {"s": "0", "x": "0", "y": "0", "z": "0", "u": "1", "v": "2"}}
    a = from_dict(spec, promise=LEGAL)
    m = minimise(a)
    together = lambda p, q: any(p in c and q in c for c in m.classes)
    assert not together("x", "y") and not together("u", "v")
    for L in range(1, 8):
        for w in brute_legal(a, L):
            assert a.outputs[a.run(w)[-1]] == m.quotient.outputs[m.quotient.run(w)[-1]]
