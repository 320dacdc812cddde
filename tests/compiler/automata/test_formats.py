"""AALpy DOT files, regular expressions and transition tables as specs (compiler/automata/formats.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from compiler.automata.errors import SpecError
from compiler.automata.formats import dot_to_dict, from_regex, from_table, parse_alphabet
from compiler.automata.load import load_spec

FIXTURES = Path(__file__).resolve().parents[3] / "examples" / "aalpy"


def test_aalpy_dfa_fixture_loads_with_start_and_accepting_states() -> None:
    pytest.importorskip("pydot")
    a = load_spec(FIXTURES / "div5.dot")
    assert a.n_states == 5 and a.alphabet == ("0", "1") and a.states[a.start] == "q0"
    assert a.outputs == ("accept", "reject", "reject", "reject", "reject")
    for n in range(64):  # binary numbers divisible by 5, most significant bit first
        word = a.symbol_ids(list(bin(n)[2:]))
        assert (a.outputs[a.run(word)[-1]] == "accept") == (n % 5 == 0)


def test_aalpy_moore_fixture_loads_outputs_from_labels() -> None:
    pytest.importorskip("pydot")
    a = load_spec(FIXTURES / "counter6.dot")
    assert a.states == tuple(f"c{i}" for i in range(6)) and a.alphabet == ("inc", "reset")
    assert a.outputs == ("low", "mid", "high") * 2


@pytest.mark.parametrize("text, message", [
    ('digraph g { a -> b [label="x"]; }', "no start marker"),
    ('digraph g { __start0 -> a; __start1 -> b; a -> b [label="x"]; }', "one start state"),
    ('digraph g { __start0 -> a; a -> b [label="x/1"]; b -> a [label="y"]; }', "no '/' between input and output"),
    ('digraph g { __start0 -> a; a -> b [label="x"]; a -> a [label="x"]; }', "two edges"),
    ('digraph g { __start0 -> a; a [label="a|1"]; b [label="b"]; a -> b [label="x"]; }', "not 'id|output'"),
    ('graph g { a -- b; }', "undirected"),
    ('digraph g { a -> ', "not valid DOT"),
])
def test_bad_dot_is_refused_with_a_reason(text: str, message: str) -> None:
    pytest.importorskip("pydot")
    with pytest.raises(SpecError, match=message):
        dot_to_dict(text)


def test_partial_dot_needs_complete(tmp_path: Path) -> None:
    pytest.importorskip("pydot")
    p = tmp_path / "partial.dot"
    p.write_text('digraph g { __start0 [label="", shape=none]; __start0 -> a; a -> b [label="x"]; '
                 'b -> b [label="y"]; b [shape=doublecircle]; }')
    with pytest.raises(SpecError, match="partial"):
        load_spec(p)
    a = load_spec(p, complete=True)
    assert a.n_states == 3 and a.outputs == ("reject", "accept", "reject")


def test_round_trip_through_aalpy(tmp_path: Path) -> None:
    """Random DFAs and Moore machines saved by AALpy load with the same behaviour as AALpy's own."""
    pytest.importorskip("pydot")
    aalpy_utils = pytest.importorskip("aalpy.utils")
    rng = random.Random(0)
    for kind in ("dfa", "moore"):
        for seed in range(3):
            random.seed(seed)
            if kind == "dfa":
                m = aalpy_utils.generate_random_dfa(num_states=6, alphabet=["a", "b", "c"], num_accepting_states=2)
            else:
                m = aalpy_utils.generate_random_moore_machine(num_states=6, input_alphabet=["a", "b"],
                                                              output_alphabet=["x", "y", "z"])
            path = tmp_path / f"{kind}{seed}"
            aalpy_utils.save_automaton_to_file(m, str(path), file_type="dot")
            a = load_spec(path.with_suffix(".dot"))
            back = aalpy_utils.load_automaton_from_file(str(path.with_suffix(".dot")), automaton_type=kind)
            for _ in range(50):
                word = [rng.choice(a.alphabet) for _ in range(rng.randint(1, 12))]
                ours = [a.outputs[q] for q in a.run(a.symbol_ids(word))]
                for ref in (m, back):
                    ref.reset_to_initial()
                    theirs = [ref.step(x) for x in word]
                    if kind == "dfa":
                        theirs = ["accept" if t else "reject" for t in theirs]
                    assert ours == [str(t) for t in theirs]


REGEXES = ["(ab|ba)*a", "(a|b)*a(a|b)(a|b)(a|b)(a|b)", "(a(b|c)*a|bc)*c?"]


@pytest.mark.parametrize("pattern", REGEXES)
def test_regex_matches_automata_lib_on_every_prefix(pattern: str) -> None:
    nfa_mod = pytest.importorskip("automata.fa.nfa")
    letters = sorted(set(c for c in pattern if c.isalpha()))
    a = from_regex(pattern, letters)
    nfa = nfa_mod.NFA.from_regex(pattern, input_symbols=set(letters))
    rng = np.random.default_rng(1)
    for _ in range(20):
        word = [letters[i] for i in rng.integers(0, len(letters), 40)]
        ours = [a.outputs[q] == "accept" for q in a.run(a.symbol_ids(word))]
        assert ours == nfa_prefix_acceptance(nfa, "".join(word))


def nfa_prefix_acceptance(nfa, word: str) -> list[bool]:
    """automata-lib's own verdict on every non-empty prefix of ``word`` (its stepwise reader
    raises at the end of a rejected word, after yielding every step)."""
    from automata.base.exceptions import RejectionException

    steps = []
    try:
        for states in nfa.read_input_stepwise(word):
            steps.append(bool(states & nfa.final_states))
    except RejectionException:
        pass
    return steps[1:]


def test_regex_is_minimal_and_complete() -> None:
    pytest.importorskip("automata")
    a = from_regex("(a|b)*a(a|b)(a|b)(a|b)(a|b)", "a,b")
    assert a.n_states == 32  # the 5th letter from the end: 2^5 states, no sink needed
    b = from_regex("(ab|ba)*a", ["a", "b"])
    assert b.n_states == 4 and "sink" in b.states and b.outputs[b.state_index["sink"]] == "reject"
    assert load_spec("regex:(ab|ba)*a", alphabet="a,b") == b


@pytest.mark.parametrize("pattern, alphabet, message", [
    ("(ab", "a,b", "not valid"), ("ab", "ab,c", "single characters"), ("ab", "a,,b", "separated by commas"),
])
def test_bad_regex_input_is_refused(pattern: str, alphabet: str, message: str) -> None:
    pytest.importorskip("automata")
    with pytest.raises(SpecError, match=message):
        from_regex(pattern, alphabet)


def test_alphabet_only_with_a_regex() -> None:
    with pytest.raises(SpecError, match="only with a regular expression"):
        load_spec("parity", alphabet="a,b")
    assert parse_alphabet("a, b") == ("a", "b")


def test_from_table_names_states_and_letters_by_index() -> None:
    a = from_table([[1, 0], [0, 1]], start=1, labels=["even", "odd"])
    assert a.states == ("0", "1") and a.alphabet == ("0", "1") and a.start == 1
    assert a.maps == ((1, 0), (0, 1)) and a.outputs == ("even", "odd")
    assert from_table(np.array([[0, 1, 1]]).T.reshape(3, 1) * 0).n_states == 3


@pytest.mark.parametrize("table, kw, message", [
    ([[0, 2]], {}, "not a state index"), ([[0.5]], {}, "integers"), ([], {}, "non-empty"),
    ([[0], [0, 1]], {}, "rectangular|integers|shape"), ([[0]], {"start": 1}, "start must be"),
    ([[0]], {"labels": ["a", "b"]}, "labels has 2"), ([[True]], {}, "integers"),
])
def test_bad_tables_are_refused(table, kw, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        from_table(table, **kw)


def test_table_files_npz_and_json(tmp_path: Path) -> None:
    table = np.array([[1, 0], [0, 1]])
    np.savez(tmp_path / "parity.npz", table=table, start=0, labels=np.array(["even", "odd"]))
    a = load_spec(tmp_path / "parity.npz")
    assert a.name == "parity" and a.outputs == ("even", "odd") and a.maps == ((1, 0), (0, 1))
    (tmp_path / "t.json").write_text(json.dumps({"table": table.tolist(), "labels": [0, 1]}))
    assert load_spec(tmp_path / "t.json").outputs == ("0", "1")
    (tmp_path / "bare.json").write_text(json.dumps(table.tolist()))
    assert load_spec(tmp_path / "bare.json").maps == a.maps
    np.savez(tmp_path / "bad.npz", tabel=table)
    with pytest.raises(SpecError, match="no 'table'"):
        load_spec(tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "junk.npz")
