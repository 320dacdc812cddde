"""The registry contract the planner relies on: every construction's ``estimate`` is the exact
depth and parameter count of the model its ``build`` makes (constructions/construction.py, Cost).

Run over every registered construction (whatever the registry holds) that applies to a varied
set of automata: the catalog families' examples, the paper's automata at small T, definite
automata, 1-state and random automata; at several max_len and both position codes.  A change
to a construction's sizes that its estimate does not follow fails here, naming the automaton."""

from __future__ import annotations

import functools
import random
from dataclasses import replace

import pytest
import torch

import compiler
from compiler.automata.catalog import build, entries, paper_suite, random_automaton
from compiler.automata.errors import ShortcutError
from compiler.automata.load import load_spec
from compiler.automata.spec import Semiautomaton
from compiler.automata.subregular_families import random_language
from compiler.cli import main
from constructions import registry
from constructions.assemble import assemble
from constructions.construction import BuildOptions, Cost, Refusal


def nth_last(n: int) -> Semiautomaton:
    """"The n-th letter from the end is a" (the catalog's nth-last:n, n-definite)."""
    return build(f"nth-last:{n}")


def one_star() -> Semiautomaton:
    """``1*`` with a sink: a 2-cell line world and a 1-level reset cascade."""
    return Semiautomaton("one-star", ("ok", "sink"), ("0", "1"), ((1, 1), (0, 1)))


GENERALISED_DEFINITE = [("regex:a(a|b)*b", "a,b"), ("regex:ab(a|b)*ba", "a,b"),
                        ("regex:a|b|c|a(a|b|c)*a|b(a|b|c)*b|c(a|b|c)*c", "a,b,c")]
"""The first m and last k letters decide the state (lookback with front heads)."""


def _automata() -> list[Semiautomaton]:
    names = list(dict.fromkeys(paper_suite() + [e.example for e in entries()] + ["grid:2", "grid2d:2,3"]))
    out = [load_spec(n) for n in names] + [nth_last(2), nth_last(3), one_star()]
    out += [load_spec(r, alphabet=alphabet.split(",")) for r, alphabet in GENERALISED_DEFINITE]
    rng = random.Random(12)
    out += [random_automaton(rng, n, k, name=f"random{n}.{k}.{i}")
            for i, (n, k) in enumerate([(1, 1), (1, 3), (2, 1), (2, 2), (3, 2), (3, 3), (4, 2), (5, 3), (6, 2),
                                        (7, 4), (8, 3), (8, 4)])]
    out += [random_language("sp", k=2, letters=3, seed=0), random_language("pt", k=2, letters=3, seed=1),
            random_language("plt", k=2, letters=4, seed=2)]
    return out


AUTOMATA = _automata()
CASES = [(i, T, "sinusoidal") for i in range(len(AUTOMATA)) for T in (3, 37)] + \
    [(i, 20, "circle") for i in range(0, len(AUTOMATA), 4)]


@functools.cache
def _plans(i: int) -> dict:
    """Each registered construction's plan (or refusal) for ``AUTOMATA[i]``, analysed once."""
    return {c.name: c.applies(AUTOMATA[i]) for c in registry.entries()}


def _built(c, a, plan, T: int, positions: str) -> tuple[int, int]:
    program, meta = c.build(a, plan, BuildOptions(T, positions=positions))
    model = assemble(program, max_len=T, dtype=torch.float32, meta=meta)
    return len(model.config.blocks), sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("i,T,positions", CASES, ids=[f"{AUTOMATA[i].name}-{T}-{p}" for i, T, p in CASES])
def test_every_estimate_is_the_built_models_depth_and_parameter_count(i, T, positions):
    a = AUTOMATA[i]
    checked = 0
    for c in registry.entries():
        plan = _plans(i)[c.name]
        if isinstance(plan, Refusal):
            continue
        try:
            cost = c.estimate(plan, T, positions)
        except ShortcutError as e:  # a refusal the build must share
            with pytest.raises(type(e)):
                c.build(a, plan, BuildOptions(T, positions=positions))
            continue
        assert isinstance(cost.params, int), f"{c.name} estimated no parameter count"
        assert (cost.layers, cost.params) == _built(c, a, plan, T, positions), f"{c.name} on {a.name} at T = {T}"
        checked += 1
    assert checked >= 1  # the scan applies to every automaton


def test_the_set_covers_every_registered_construction():
    applied = {name for i in range(len(AUTOMATA)) for name, p in _plans(i).items() if not isinstance(p, Refusal)}
    assert applied == set(registry.names())


@pytest.mark.parametrize("T", [100, 1024])
def test_estimates_at_the_benchmark_lengths(T):
    """The sizes that grow with T (counter and residue MLPs, position codes, scan depth)."""
    for name in ("quaternion", "dihedral:4", "grid:9", "grid2d:3,4", "cyclic:5"):
        a = load_spec(name)
        for c in registry.entries():
            plan = c.applies(a)
            if not isinstance(plan, Refusal):
                cost = c.estimate(plan, T, "sinusoidal")
                assert (cost.layers, cost.params) == _built(c, a, plan, T, "sinusoidal"), f"{c.name} on {name}"


def test_a_wrong_estimate_is_an_internal_error(tmp_path, capsys):
    scan = registry.get("scan")
    off = replace(scan, name="off-by-one", estimate=lambda rep, T, pos: Cost(scan.estimate(rep, T, pos).layers,
                                                                             scan.estimate(rep, T, pos).params + 1))
    with registry.registered(off):
        with pytest.raises(AssertionError, match="off-by-one's estimate .* differs from the model it built"):
            compiler.compile_automaton("parity", max_len=8, method="off-by-one")
        assert main(["compile", "parity", "-o", str(tmp_path / "m.safetensors"), "--max-len", "8",
                     "--method", "off-by-one"]) == 3
    assert "internal error" in capsys.readouterr().err
