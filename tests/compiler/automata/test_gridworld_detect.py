"""Recognising line and box worlds up to renaming, and the plan that follows."""

import itertools
import random

import pytest

import compiler
from compiler.automata.gridworld_detect import BoxWorld, detect
from compiler.pipeline import plan
from compiler.automata.load import load_spec
from compiler.automata.spec import Semiautomaton, from_dict


def box_world(sizes, letters, start=None, name="box"):
    """A box world spec from sizes and {symbol: (axis, step) or None}."""
    cells = list(itertools.product(*(range(n) for n in sizes)))
    names = [",".join(map(str, c)) for c in cells]

    def move(c, mv):
        if mv is None:
            return c
        a, s = mv
        c = list(c)
        c[a] = min(max(c[a] + s, 0), sizes[a] - 1)
        return tuple(c)

    return {"name": name, "states": names, "alphabet": list(letters),
            "start": names[0] if start is None else start,
            "transitions": {names[i]: {sym: names[cells.index(move(c, mv))] for sym, mv in letters.items()}
                            for i, c in enumerate(cells)}}


def shuffled(spec, seed=0):
    """The same automaton with states and symbols renamed and reordered."""
    rng = random.Random(seed)
    states, alphabet = list(spec["states"]), list(spec["alphabet"])
    snew = {s: f"s{i}" for i, s in enumerate(rng.sample(states, len(states)))}
    anew = {a: f"x{i}" for i, a in enumerate(rng.sample(alphabet, len(alphabet)))}
    order = rng.sample(states, len(states))
    return {"name": spec["name"] + "-shuffled", "states": [snew[s] for s in order],
            "alphabet": [anew[a] for a in rng.sample(alphabet, len(alphabet))], "start": snew[spec["start"]],
            "transitions": {snew[q]: {anew[a]: snew[t] for a, t in row.items()}
                            for q, row in spec["transitions"].items()}}


def check_world(a: Semiautomaton, world: BoxWorld):
    """Every transition of ``a`` is the clamped move the world says it is."""
    index = {c: q for q, c in enumerate(world.coords)}
    for s, mv in enumerate(world.moves):
        for q in range(a.n_states):
            c = list(world.coords[q])
            if mv is not None:
                c[mv[0]] = min(max(c[mv[0]] + mv[1], 0), world.sizes[mv[0]] - 1)
            assert index[tuple(c)] == a.maps[s][q]


@pytest.mark.parametrize("name,sizes", [("grid:2", (2,)), ("grid:4", (4,)), ("grid:9", (9,)), ("grid:16", (16,)),
                                        ("grid:9,noop", (9,)), ("grid2d:3,4", (3, 4)), ("grid2d:5,5", (5, 5)),
                                        ("grid2d:2,7", (2, 7))])
def test_catalog_worlds_are_recognised(name, sizes):
    a = load_spec(name)
    world, reason = detect(a)
    assert world is not None, reason
    assert sorted(world.sizes) == sorted(sizes)
    check_world(a, world)
    if "noop" in name:
        assert world.moves[a.alphabet.index("N")] is None


@pytest.mark.parametrize("seed", range(5))
def test_renamed_and_reordered_worlds_are_recognised(seed):
    for sizes, letters in [((7,), {"L": (0, -1), "R": (0, 1), "N": None}),
                           ((3, 4), {"L": (0, -1), "R": (0, 1), "D": (1, -1), "U": (1, 1)}),
                           ((2, 3, 2), {"a": (0, 1), "b": (1, -1), "c": (1, 1), "d": (2, 1), "e": (2, -1),
                                        "f": (0, -1)})]:
        a = from_dict(shuffled(box_world(sizes, letters), seed))
        world, reason = detect(a)
        assert world is not None, reason
        assert sorted(world.sizes) == sorted(sizes)
        check_world(a, world)


def test_one_way_moves_and_repeated_symbols():
    # only R, or two symbols doing the same move: still a line world
    a = from_dict(box_world((5,), {"R": (0, 1)}))
    assert detect(a)[0].sizes == (5,)
    a = from_dict(box_world((5,), {"R": (0, 1), "R2": (0, 1), "L": (0, -1)}))
    world = detect(a)[0]
    assert world.moves[0] == world.moves[1] != world.moves[2]


def test_the_flip_flop_is_a_two_cell_line_world():
    # w0 = "left, clamped", w1 = "right, clamped", r = no-op: Grid_2 with a no-op, up to renaming
    a = load_spec("flipflop")
    world = detect(a)[0]
    assert world is not None and world.sizes == (2,)
    assert world.moves[a.alphabet.index("r")] is None
    check_world(a, world)


@pytest.mark.parametrize("name", ["parity", "cyclic:5", "memory:3", "dihedral:4", "quaternion",
                                  "dyck:2,2", "symmetric:3"])
def test_other_automata_are_not_worlds(name):
    world, reason = detect(load_spec(name))
    assert world is None and reason


def test_near_misses_are_rejected():
    spec = box_world((5,), {"L": (0, -1), "R": (0, 1)})
    spec["transitions"]["4"]["R"] = "3"  # bounce off the wall instead of staying
    assert detect(from_dict(spec))[0] is None
    spec = box_world((3, 3), {"L": (0, -1), "R": (0, 1), "D": (1, -1), "U": (1, 1)})
    spec["transitions"]["1,1"]["U"] = "0,2"  # a diagonal step
    world, reason = detect(from_dict(spec))
    assert world is None and reason
    # a torus (wrap-around) has no walls
    spec = box_world((4,), {"R": (0, 1)})
    spec["transitions"]["3"]["R"] = "0"
    assert detect(from_dict(spec))[0] is None
    # only no-ops
    assert detect(from_dict(box_world((3,), {"N": None})))[0] is None


def test_auto_plans_gridworld_and_says_why():
    chosen, why = plan(load_spec("grid:9"), "auto")
    assert chosen == "gridworld" and "line world" in why and "Theorem 12" in why
    assert plan(load_spec("grid2d:3,4"), "auto")[0] == "gridworld"
    assert plan(load_spec("parity"), "auto")[0] == "krohn-rhodes"
    assert plan(load_spec("symmetric:5"), "auto")[0] == "scan"
    assert plan(load_spec("grid:9"), "scan")[0] == "scan"
    with pytest.raises(compiler.ShortcutError, match="not one up to renaming"):
        plan(load_spec("parity"), "gridworld")


def test_auto_compiles_a_shuffled_line_world_with_gridworld():
    spec = shuffled(box_world((6,), {"L": (0, -1), "R": (0, 1), "N": None}, start="3"), seed=3)
    model = compiler.compile_automaton(spec, max_len=48)
    assert model.meta["method"] == "gridworld" and model.info()["n_layers"] == 2
    a = model.automaton
    rng = random.Random(0)
    words = [[rng.choice(a.alphabet) for _ in range(48)] for _ in range(8)]
    want = [[a.states[q] for q in a.run(a.symbol_ids(w))] for w in words]
    assert model.simulate(words) == want
