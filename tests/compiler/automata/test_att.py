"""OpenFst / pynini AT&T text files: read as acceptors, and every malformed file refused (exit 2, one line)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from compiler.automata import att
from compiler.automata.errors import SpecError
from compiler.automata.load import load_spec
from compiler.automata.spec import Semiautomaton
from compiler.automata.subregular_families import random_language
from compiler.cli import main


def _write(tmp_path: Path, text: str, name: str = "lang.att") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _accepts(a: Semiautomaton, word: list[str]) -> bool:
    assert a.outputs is not None
    q = a.start
    for x in word:
        q = a.maps[a.symbol_index[x]][q]
    return a.outputs[q] == "accept"


def test_acceptor_lines_final_states_and_the_reject_sink(tmp_path: Path) -> None:
    # the start is the first line's source (2), not state 0; 'b' from 2 is missing: the sink rejects
    a = load_spec(_write(tmp_path, "2 0 a\n0 0 b\n0 2 a\n0\n"))
    assert a.name == "lang" and a.states[a.start] == "2"
    assert a.alphabet == ("a", "b") and a.n_states == 3 and "sink" in a.states
    assert not _accepts(a, []) and _accepts(a, ["a"]) and _accepts(a, ["a", "b", "b"])
    assert not _accepts(a, ["b"]) and not _accepts(a, ["b", "a"])


def test_transducer_form_weights_and_promise(tmp_path: Path) -> None:
    text = "0\t1\tx\tx\t0\n1\t0\ty\ty\t1\n1\t1\n"
    a = load_spec(_write(tmp_path, text, "lang.fst.txt"))
    assert a.name == "lang" and _accepts(a, ["x"]) and not _accepts(a, ["x", "y"]) and not _accepts(a, ["y"])
    legal = load_spec(_write(tmp_path, text, "lang.fst.txt"), promise="legal")
    assert legal.n_states == 2 and legal.partial


def test_symbol_table_names_and_ids(tmp_path: Path) -> None:
    table = _write(tmp_path, "<eps> 0\nc 3\na 1\nb 2\n", "syms.txt")
    by_id = load_spec(_write(tmp_path, "0 1 1 1\n1 1 2\n1\n"), isymbols=table)
    by_name = load_spec(_write(tmp_path, "0 1 a a\n1 1 b\n1\n", "named.att"), isymbols=table)
    assert by_id.alphabet == by_name.alphabet == ("a", "b", "c")  # id order, epsilon left out, c unused
    for a in (by_id, by_name):
        assert _accepts(a, ["a", "b"]) and not _accepts(a, ["c"]) and not _accepts(a, ["a", "c"])


def test_integer_labels_are_ordered_numerically(tmp_path: Path) -> None:
    a = load_spec(_write(tmp_path, "0 0 10\n0 0 9\n0 0 2\n0\n"))
    assert a.alphabet == ("2", "9", "10")


def test_round_trip_of_generated_languages(tmp_path: Path) -> None:
    """A generated DFA written as AT&T text (partial: the dead state's arcs left out) reads back as
    the same language on sampled words."""
    rng = random.Random(0)
    for cls in ("sl", "sp", "ltt"):
        a = random_language(cls, k=3, letters=5, seed=1)
        assert a.outputs is not None
        dead = {q for q in range(a.n_states) if a.outputs[q] == "reject"
                and all(m[q] == q for m in a.maps)}
        lines = [f"{q} {m[q]} {x}" for q in range(a.n_states) for x, m in zip(a.alphabet, a.maps)
                 if q not in dead and m[q] not in dead]
        lines += [str(q) for q in range(a.n_states) if a.outputs[q] == "accept"]
        b = load_spec(_write(tmp_path, "\n".join(lines) + "\n", f"{cls}.att"))
        for _ in range(200):
            w = [rng.choice(a.alphabet) for _ in range(rng.randint(0, 12))]
            assert _accepts(a, w) == _accepts(b, w), (cls, w)


def test_symbol_table_only_with_an_att_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="only with an AT&T file"):
        load_spec("parity", isymbols=_write(tmp_path, "a 1\n", "s.txt"))


MALFORMED = {
    "weight": ("0 1 a a 0.5\n1\n", "weight '0.5'"),
    "final weight": ("0 1 a\n1 3\n", "weight '3'"),
    "weight text": ("0 1 a a zero\n1\n", "is not a number"),
    "transducer": ("0 1 a b\n1\n", "differ"),
    "epsilon id": ("0 1 0\n1\n", "epsilon arc"),
    "epsilon name": ("0 1 <eps> <eps>\n1\n", "epsilon arc"),
    "nondeterministic": ("0 1 a\n0 0 a\n1\n", "not deterministic"),
    "fields": ("0 1 a a 0 0\n", "6 fields"),
    "state": ("0 x a\n", "not a non-negative integer"),
    "negative state": ("-1 0 a\n", "not a non-negative integer"),
    "empty": ("\n\n", "no arcs and no final states"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_files_exit_2_with_one_line(case: str, tmp_path: Path, capsys) -> None:
    text, message = MALFORMED[case]
    assert main(["plan", str(_write(tmp_path, text))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("table,message", [
    ("a 1\nb x\n", "expected 'symbol id'"),
    ("a 1\na 2\n", "appears twice"),
    ("a 1\nb 1\n", "appears twice"),
    ("", "is empty"),
])
def test_malformed_symbol_tables_exit_2(table: str, message: str, tmp_path: Path, capsys) -> None:
    spec = _write(tmp_path, "0 1 1\n1\n")
    assert main(["plan", str(spec), "--isymbols", str(_write(tmp_path, table, "s.txt"))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err


def test_unknown_symbol_and_epsilon_through_the_table(tmp_path: Path, capsys) -> None:
    table = str(_write(tmp_path, "<eps> 0\na 1\n", "s.txt"))
    assert main(["plan", str(_write(tmp_path, "0 1 7\n1\n")), "--isymbols", table]) == 2
    assert "neither a symbol nor an id" in capsys.readouterr().err
    assert main(["plan", str(_write(tmp_path, "0 1 <eps>\n1\n")), "--isymbols", table]) == 2
    assert "symbol id 0" in capsys.readouterr().err


def test_size_limit_and_encoding(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(att, "ATT_MAX_BYTES", 16)
    assert main(["plan", str(_write(tmp_path, "0 1 a\n1 1 a\n1 0 b\n1\n"))]) == 2
    assert "over the limit of 16" in capsys.readouterr().err
    monkeypatch.undo()
    bad = tmp_path / "latin.att"
    bad.write_bytes(b"0 1 \xe9\n1\n")
    assert main(["plan", str(bad)]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    assert main(["plan", str(tmp_path / "missing.att")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_compile_with_a_symbol_table_from_the_cli(tmp_path: Path, capsys) -> None:
    """The issue's end-to-end case: an AT&T file and its symbol table compile, exact and certified,
    with acceptance read out at every position."""
    table = _write(tmp_path, "<eps> 0\na 1\nb 2\n", "s.txt")
    spec = _write(tmp_path, "0 1 1 1\n1 1 2 2\n1 0 1 1\n1\n")
    out = tmp_path / "m.safetensors"
    assert main(["compile", str(spec), "--isymbols", str(table), "--readout", "labels", "--max-len", "16",
                 "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "certified exact" in said and "labels ['reject', 'accept']" in said
