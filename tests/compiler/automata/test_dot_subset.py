"""The DOT subset reader: the same spec as pydot on what AALpy and LearnLib write, None (pydot's
turn) for anything else, and linear time on big files."""

from __future__ import annotations

import time

import pytest

from compiler.automata import dot_subset, formats
from compiler.automata.errors import SpecError

AALPY = ('digraph learnedModel {\ns0 [label="s0", shape=doublecircle];\ns1 [label="s1"];\n'
         's0 -> s1  [label="a"];\ns1 -> s0  [label="a"];\n__start0 [label="", shape=none];\n'
         '__start0 -> s0  [label=""];\n}\n')
TEXTS = [
    AALPY,
    'digraph g { __start0 -> a; a [label="a|1"]; b [label="b|0"]; a -> b [label="x"]; b -> a [label=x] }',
    'digraph { node [shape=circle]; rankdir=LR; "__start0" -> "q 1"; "q 1" -> 2 [label="a", color=red]'
    '[style=dashed]; 2 -> "q 1" [label="a"]\n}',
    'digraph g { a -> b [label="x"]; }',  # no start marker
    'digraph g { __start0 -> a; a -> b [label="x"]; a -> a [label="x"]; }',  # two edges on x
]


def _spec(text: str, fast: bool, monkeypatch) -> object:
    if not fast:
        monkeypatch.setattr(dot_subset, "parse", lambda t: None)
    try:
        return formats.dot_to_dict(text, "t", "x")
    except SpecError as e:
        return str(e)
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("text", TEXTS)
def test_the_subset_reads_what_pydot_reads(text, monkeypatch):
    assert dot_subset.parse(text) is not None
    assert _spec(text, True, monkeypatch) == _spec(text, False, monkeypatch)


@pytest.mark.parametrize("text", ["// c\n" + AALPY, "strict " + AALPY, AALPY.replace("s0 -> s1", "s0:n -> s1"),
                                  AALPY.replace("s0 -> s1", "s0 -> s1 -> s0"), "graph g { a -- b }",
                                  AALPY.replace('label="a"', 'label="a" /* c */'), AALPY + "x", "digraph g { a -> "])
def test_anything_else_is_left_to_pydot(text):
    assert dot_subset.parse(text) is None


def test_a_3000_state_file_is_read_in_linear_time():
    lines = ["digraph g {", "__start0 [shape=none];", "__start0 -> s0;"]
    lines += [f's{i} -> s{(i + 1) % 3000} [label="a"];\ns{i} -> s0 [label="b"];' for i in range(3000)]
    start = time.perf_counter()
    spec = formats.dot_to_dict("\n".join(lines + ["}"]), "t", "big")
    assert len(spec["states"]) == 3000 and spec["transitions"]["s2999"] == {"a": "s0", "b": "s0"}
    assert time.perf_counter() - start < 5  # pydot: about 30 s


def test_a_big_file_outside_the_subset_is_refused_not_given_to_pydot():
    text = "// a comment\n" + "digraph g {" + "a -> b [label=\"x\"];\n" * 5000 + "}"
    with pytest.raises(SpecError, match="outside the DOT subset read directly .* at most 65,536 characters"):
        formats.dot_to_dict(text, "t", "x")


def test_learnlib_html_labels_read_as_pydot_reads_them(monkeypatch):
    text = ('digraph g { s0 -> s1 [label=<a<br />x>]; s1 -> s0 [label=<b<br />y>]; '
            '__start0 [label="" shape="none"]; __start0 -> s0; }')
    assert dot_subset.parse(text) is not None
    spec = _spec(text, True, monkeypatch)
    assert spec == _spec(text, False, monkeypatch) and not isinstance(spec, str)
    assert dot_subset.parse(text.replace("<b<br />y>", "<b<br />y")) is None  # unclosed: pydot's turn
