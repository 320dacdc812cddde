"""Plans survive JSON losslessly: the cascade, the scan's representation, the box world."""

from __future__ import annotations

import json

import pytest

from compiler.automata.cascade import Cascade
from compiler.automata.decompose import decompose
from compiler.automata.gridworld_detect import BoxWorld, detect
from compiler.automata.load import load_spec
from compiler.automata.representation import Representation, choose


def _through_json(d: dict) -> dict:
    return json.loads(json.dumps(d))


def _reachable(cascade: Cascade) -> list[tuple[int, ...]]:
    """Every configuration reachable from any state's encoding."""
    seen = dict.fromkeys(cascade.encoding)
    queue = list(seen)
    for c in queue:
        for letter in range(cascade.automaton.n_symbols):
            n = cascade.step(c, letter)
            if n not in seen:
                seen[n] = None
                queue.append(n)
    return queue


@pytest.mark.parametrize("name", ["parity", "flipflop", "dyck:2,2", "dihedral:4", "symmetric:4", "quaternion",
                                  "grid:5", "alternating:5"])
def test_cascade_round_trip_behaves_identically(name):
    c = decompose(name)
    back = Cascade.from_dict(_through_json(c.to_dict()))
    assert back == c and back.to_dict() == c.to_dict()
    configs = _reachable(c)
    assert len(configs) >= c.automaton.n_states
    for conf in configs:
        assert back.decode(conf) == c.decode(conf) and back.signals(conf) == c.signals(conf)
        for letter in range(c.automaton.n_symbols):
            assert back.step(conf, letter) == c.step(conf, letter)
    assert back.start == c.start and back.solvable == c.solvable and back.levels == c.levels


def test_cascade_with_start_moves_only_the_initial_values():
    c = decompose("dihedral:4")
    a = c.automaton
    other = load_spec({**a.to_dict(), "start": a.states[3]})
    moved = c.with_start(other)
    assert moved.start == c.encoding[3] and [x.initial for x in moved.components] == list(c.encoding[3])
    assert moved.encoding == c.encoding and moved.readout == c.readout
    assert [x.table for x in moved.components] == [x.table for x in c.components]


@pytest.mark.parametrize("name", ["symmetric:5", "quaternion", "parity", "dyck:2,2"])
def test_representation_round_trip(name):
    rep = choose(load_spec(name))
    assert Representation.from_dict(_through_json(rep.to_dict())) == rep


def test_representation_round_trip_keeps_the_quotient():
    rep = choose(load_spec("symmetric:5"))
    assert not rep.natural and rep.block_of is not None  # the interesting case is covered
    assert Representation.from_dict(_through_json(rep.to_dict())).block_of == rep.block_of


@pytest.mark.parametrize("name", ["grid:4", "grid2d:3,4", "grid:5,noop"])
def test_box_world_round_trip(name):
    world = detect(load_spec(name))[0]
    assert BoxWorld.from_dict(_through_json(world.to_dict())) == world
