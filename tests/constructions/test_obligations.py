"""Obligation kinds as one family: every registered construction's obligations survive their
canonical JSON (the same digest), renaming a program is what it was before the kinds named their
own fields' roles, and each kind says what it reads and writes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np
import pytest

from compiler.automata.load import load_spec
from compiler.automata.spec import from_dict
from compiler.automata.subregular_families import random_language
from compiler.pipeline import compile_automaton
from constructions import registry
from constructions.obligations import (KINDS, Average, Beside, Compose, Fetch, Layer, Lookup, Modular, Obligations,
                                       Race, Races, Round, Steps, Threshold, kind_from_json, prefixed)
from constructions.obligations.kind import registered
from verify.certify.certificate import obligations_of


def _c3_times_grid4() -> Any:
    """A 3-cycle beside a 4-cell line: a product with a gridworld factor."""
    gens, moves, S = {"c": [1, 2, 0], "i": [0, 1, 2]}, {"L": -1, "R": 1}, 3
    trans = {f"{i}.{p}": {f"{n}{x}": f"{gens[n][i]}.{min(S, max(0, p + moves[x]))}" for n in gens for x in moves}
             for i in range(3) for p in range(S + 1)}
    return load_spec({"name": "c3xgrid4", "states": list(trans), "alphabet": [f"{n}{x}" for n in gens for x in moves],
                      "start": "0.0", "transitions": trans})


def _a5_times_parity() -> Any:
    """A5 beside a parity bit: a product with a scan factor (offset fetches, compositions)."""
    g = {"c": [1, 2, 0, 3, 4], "f": [1, 2, 3, 4, 0]}
    trans = {f"{i}.{b}": {f"{n}{x}": f"{g[n][i]}.{b ^ x}" for n in g for x in (0, 1)} for i in range(5) for b in (0, 1)}
    return from_dict({"name": "a5xc2", "states": list(trans), "alphabet": [f"{n}{x}" for n in g for x in (0, 1)],
                      "start": "0.0", "transitions": trans})


def _labelled(spec: str, label: Any) -> Any:
    a = load_spec(spec)
    return dataclasses.replace(a, outputs=tuple(label(a, s) for s in a.states))


def _moore() -> Any:
    """A Moore machine whose letters merge states (the transition construction's)."""
    from compiler.automata.mealy import mealy_moore
    from compiler.automata.moore import minimise
    from tests.compiler.automata.test_mealy import random_mealy
    return minimise(mealy_moore(from_dict(random_mealy(5, 3, 3, 3))).moore).quotient


MODELS = {  # name: (spec, method, max_len, readout); together every construction and every kind
    "scan": ("parity", "scan", 8, "states"),
    "scan-labels": (lambda: _labelled("symmetric:3", lambda a, s: s[0]), "scan", 8, "labels"),  # steps after compose
    "lookback": ("regex:ab(a|b)*ba", "lookback", 16, "states"),
    "krohn-rhodes": ("symmetric:4", "krohn-rhodes", 16, "states"),  # modular decodes, rounds, averages
    "krohn-rhodes-reset": ("flipflop", "krohn-rhodes", 16, "states"),  # most recent flag
    "gridworld": ("grid:4", "gridworld", 16, "states"),  # nearest values, races
    "gridworld-labels": (lambda: _labelled("grid:4", lambda a, s: "wall" if s in (a.states[0], a.states[-1])
                                           else "inside"), "gridworld", 16, "labels"),  # steps after races
    "bounded-stack": ("dyck:2,2", "bounded-stack", 16, "states"),  # latest, any-flag, threshold
    "bounded-stack-legal": ("dyck-legal:2,2", "bounded-stack", 16, "states"),  # a promise
    "bounded-stack-labels": ("dyck:2,2", "bounded-stack", 16, "labels"),  # a threshold beside a lookup
    "local": ("adder:2", "local", 16, "states"),
    "piecewise": (lambda: random_language("sp", k=3, letters=3, seed=0), "piecewise", 16, "states"),
    "locally-testable": (lambda: random_language("sl", k=3, letters=2, seed=0), "locally-testable", 8, "states"),
    "piecewise-local": (lambda: random_language("plt", k=2, letters=16, seed=0), "piecewise-local", 8, "states"),
    "product": ("cyclic-product:2,3", "product", 16, "states"),
    "product-grid": (_c3_times_grid4, "product", 16, "states"),
    "product-scan": (_a5_times_parity, "product", 8, "states"),
    "transition": (_moore, "transition", 16, "states"),
    "starfree": (lambda: random_language("sf", k=2, letters=4, seed=0), "starfree", 16, "states"),  # recent, fetch
}


@pytest.fixture(scope="module")
def obligations() -> dict[str, Obligations]:
    """Each model's obligations, as the certificate reads them (a label model's relabelled)."""
    out = {}
    for name, (spec, method, max_len, readout) in MODELS.items():
        model = compile_automaton(spec() if callable(spec) else spec, max_len=max_len, method=method, readout=readout)
        assert model.meta["method"] == method, name
        out[name] = obligations_of(model)
    return out


def _legacy(d: Any) -> Any:
    """A JSON form as it was before a :class:`Fetch` carried its kind (the only change of form)."""
    if isinstance(d, dict):
        return {k: _legacy(v) for k, v in d.items() if not (k == "kind" and v == "fetch")}
    return [_legacy(x) for x in d] if isinstance(d, list) else d


def _sha(d: Any) -> str:
    return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _kinds(ob: Obligations) -> set[str]:
    """Every kind string in ``ob`` (nested steps and parts included)."""
    found: set[str] = set()

    def walk(d: Any) -> None:
        if isinstance(d, dict):
            found.update({d["kind"]} if isinstance(d.get("kind"), str) and d["kind"] in KINDS else set())
            for v in d.values():
                walk(v)
        elif isinstance(d, list):
            for v in d:
                walk(v)
    walk(ob.to_json()["layers"])
    return found


def test_the_models_cover_every_registered_construction_and_every_kind(obligations):
    assert {method for _, method, _, _ in MODELS.values()} == set(registry.names())
    assert set().union(*(_kinds(ob) for ob in obligations.values())) == set(KINDS)
    assert sorted(KINDS) == ["any-flag", "average", "beside", "compose", "fetch", "latest", "lookup", "match",
                             "modular", "races", "recent", "round", "steps", "suffix-lookup", "threshold"]


@pytest.mark.parametrize("name", MODELS)
def test_obligations_read_back_from_their_json_are_the_same(obligations, name):
    """to_json -> (text) -> from_json: the same canonical form, so the same digest; every kind's
    own form reads back to an equal one too."""
    ob = obligations[name]
    d = json.loads(json.dumps(ob.to_json()))
    back = Obligations.from_json(d)
    assert back.digest() == ob.digest() and back.to_json() == ob.to_json()
    for layer in ob.layers:
        for o in (*layer.fetches, *([layer.mlp] if layer.mlp is not None else [])):
            again = kind_from_json(json.loads(json.dumps(o.to_json())))
            assert type(again) is type(o) and again.to_json() == o.to_json()


PRODUCTS = {  # the legacy-form digests of the obligations and of prefixed(ob, "p."), before the kinds
    "product": ("056488866e5ac478de87973ee860f0e60ad6449a38b40b98ff166747cc529e7d",
                "afabc8d0dfec2917489216c8dce3020b10b608a45d79b3030c5e006e3892b839"),
    "product-grid": ("1640a291e4ae9d5dd439fc455eeb36c51c6646affbcf099a24e4e1e10ea24f42",  # re-recorded: the
                     "710385624588fd01dd133f6f61bbe17e6c80c0f4be156290f64682b477e525bc"),  # residue step is named
    # per axis ("gw0.residue", was "gw.residue") since gridworld's gadgets declare it (one declaration)
    "product-scan": ("e984b74a8636bed22e967adfff59d33396587c215a4786339580a0ee493fc106",
                     "bf691a7ff4dee9b44c6931b5d48f252051e539b24fcf63c5991678e9ff94b67c"),
}
"""Recorded from main ee26c72, whose ``prefixed`` renamed each kind by an isinstance ladder.  A
change to these constructions' declared programs changes them (record them again then, with the
change's reason); a change to renaming alone must not."""


@pytest.mark.parametrize("name", PRODUCTS)
def test_prefixed_renames_as_before(obligations, name):
    ob = obligations[name]
    assert _sha(_legacy(ob.to_json())) == PRODUCTS[name][0]
    assert _sha(_legacy(prefixed(ob, "p.").to_json())) == PRODUCTS[name][1]


LABEL_KEYS = {"head", "heads", "mlp", "name"}
NAME_KEYS = {"src", "dst", "flag", "query", "key", "keys", "flags", "reads", "out", "minus", "minus_out", "maps",
             "fetched", "into", "first", "second", "level", "names"}


def _renamed_json(d: Any, prefix: str, key: str | None = None) -> Any:
    """A JSON form renamed by its keys alone: the prefix before each label, and before each part
    of each name (numbers, tables and nested kinds under the same keys left to their own keys)."""
    def sub(v: str) -> str:
        return " + ".join(prefix + p for p in v.split(" + "))
    if isinstance(d, str):
        return prefix + d if key in LABEL_KEYS else sub(d) if key in NAME_KEYS else d
    if isinstance(d, list):
        return [_renamed_json(x, prefix, key) for x in d]
    if isinstance(d, dict):
        return {k: _renamed_json(v, prefix, k) for k, v in d.items()}
    return d


@pytest.mark.parametrize("name", MODELS)
def test_prefixed_renames_every_name_and_label_and_nothing_else(obligations, name):
    ob = obligations[name]
    want = _renamed_json(ob.to_json(), "p.")
    want["embedding"] = {"p." + k: v for k, v in ob.to_json()["embedding"].items()}
    assert prefixed(ob, "p.").to_json() == want


def test_each_kind_names_what_it_reads_and_writes():
    mod = Modular("dec", "sum", 0.5, 1, np.eye(3), "val", minus="in", minus_out="old")
    assert mod.names_read() == ("sum", "in") and mod.names_written() == ("val", "old")
    plain = dataclasses.replace(mod, minus=None, minus_out=None)
    assert plain.names_read() == ("sum",) and plain.names_written() == ("val",) and plain.labels() == ("dec",)
    rnd = Round("r", "scratch", "val")
    assert rnd.names_read() == ("scratch",) and rnd.names_written() == ("val", "scratch")  # it clears its src
    comp = Compose("c", "maps", "fetched", "maps")
    lk = Lookup("lab", ("maps[0]", "x"), "y", {(0, 0): np.array([1.0])})
    steps = Steps("last", (lk,), first=comp)
    assert steps.leaves() == (comp, lk) and steps.names_read() == ("maps", "fetched", "maps[0]", "x")
    assert steps.names_written() == ("maps", "fetched", "y")
    races = Races("gw", (Race("a", "b", ("lv",), 1, "n"), Race("c", "a", (), 0, "n")))
    assert races.leaves() == (races,) and races.names_read() == ("a", "b", "lv", "c", "a")
    assert races.names_written() == ("n",)
    both = Beside("m", (steps, Threshold("th", "any", "bit")))
    assert both.leaves() == (comp, lk, both.parts[1]) and both.names_written() == ("maps", "fetched", "y", "bit")
    avg = Average(("h0", "h1"), (1, 5), (4, 8), 8, 1.0, "x", "sum")
    assert avg.labels() == ("h0", "h1") and avg.names_written() == ("sum",)
    layer = Layer((Fetch("f", np.arange(3), "maps", "fetched"), avg), both)
    assert layer.names_written() == ("fetched", "sum", "maps", "fetched", "y", "bit")
    assert layer.mlp_leaves() == both.leaves() and Layer((), None).mlp_leaves() == ()


def test_kinds_are_registered_once_and_read_back_only_where_they_belong():
    with pytest.raises(ValueError, match="two obligation kinds are named 'lookup'"):
        @registered
        @dataclasses.dataclass(frozen=True)
        class Again(Lookup):
            kind = "lookup"
    with pytest.raises(ValueError, match="unknown obligation kind 'nope'"):
        kind_from_json({"kind": "nope"})
    with pytest.raises(ValueError, match="Round has no field 'table'"):
        kind_from_json({"kind": "round", "name": "r", "src": "a", "dst": "b", "table": []})
    d = Obligations.from_json(json.loads(json.dumps(_toy().to_json()))).to_json()
    d["layers"][0]["mlp"] = d["layers"][0]["fetches"][0]
    with pytest.raises(ValueError, match="a 'fetch' obligation where an MLP's is declared"):
        Obligations.from_json(d)


def _toy() -> Obligations:
    from constructions.obligations import Embedding, Readout
    return Obligations("toy", Embedding({"x": np.zeros((3, 1))}),
                       (Layer((Fetch("h", np.zeros(4, dtype=np.int64), "x", "y"),), None),), Readout(("y",), {(0,): 0}))
