"""The zoo's Mealy classes: random Mealy machines and the TCP-like server (compiler/automata/mealy_families.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from compiler.automata.families import CLASSES, Sizes, random_of_class, relabel
from compiler.automata.load import load_spec
from compiler.automata.mealy import mealy_outputs
from compiler.automata.mealy_families import MAX_OUTPUTS, random_mealy, tcp_server

ROOT = Path(__file__).resolve().parents[3]


def test_the_protocol_is_the_example_file():
    pytest.importorskip("pydot")
    a, b = tcp_server(), load_spec(ROOT / "examples" / "tcp_server.dot")
    assert (a.states, a.alphabet, a.start, a.maps, a.transition_outputs) == \
        (b.states, b.alphabet, b.start, b.maps, b.transition_outputs)
    assert mealy_outputs(a, a.symbol_ids(["SYN", "ACK", "DATA", "FIN", "CLOSE", "ACK"])) == \
        ["SYN+ACK", "NIL", "ACK", "ACK", "FIN", "NIL"]


def test_random_machines_are_seeded_complete_and_relabelled_with_their_outputs():
    a = random_of_class("mealy", random.Random(5), Sizes((6, 6), (3, 3)), "m-0")
    assert a == random_of_class("mealy", random.Random(5), Sizes((6, 6), (3, 3)), "m-0")
    assert (a.n_states, a.n_symbols, a.name, a.partial) == (6, 3, "m-0", False)
    assert 2 <= len({o for row in a.transition_outputs for o in row}) <= min(MAX_OUTPUTS, 6)
    raw = random_mealy(random.Random(5), 6, 3)
    moved = relabel(raw, random.Random(1), "m")
    assert moved.transition_outputs is not None and moved.maps != raw.maps
    # relabelling renames states only: from the state the new start came from, the same outputs
    rng = random.Random(0)
    words = [[rng.randrange(3) for _ in range(12)] for _ in range(20)]
    assert any(all(mealy_outputs(raw, w, q) == mealy_outputs(moved, w) for w in words) for q in range(6))
    assert not all(mealy_outputs(raw, w, 0) == mealy_outputs(raw, w, q) for w in words for q in range(6))


def test_the_protocol_class_keeps_its_names():
    a = CLASSES["mealy-tcp"](random.Random(0), Sizes())
    b = random_of_class("mealy-tcp", random.Random(1), Sizes(), "tcp-00000")
    assert b.states == a.states and b.start == a.start and b.name == "tcp-00000"
