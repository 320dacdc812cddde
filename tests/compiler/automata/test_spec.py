"""Tests for compiler.automata.spec: the Semiautomaton type and loading specs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from compiler.automata.errors import InputError, SpecError
from compiler.automata.load import load_spec
from compiler.automata.spec import Semiautomaton, from_dict

PARITY: dict[str, Any] = {
    "name": "parity",
    "states": ["even", "odd"],
    "alphabet": ["0", "1"],
    "start": "even",
    "transitions": {"even": {"0": "even", "1": "odd"}, "odd": {"0": "odd", "1": "even"}},
    "outputs": {"even": "accept", "odd": "reject"},
}


def spec_with(**changes: Any) -> dict[str, Any]:
    """A deep copy of PARITY with top-level fields replaced (None deletes one)."""
    spec = copy.deepcopy(PARITY)
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


def test_from_dict_native_fields() -> None:
    a = from_dict(PARITY)
    assert a.name == "parity"
    assert a.states == ("even", "odd") and a.alphabet == ("0", "1")
    assert a.maps == ((0, 1), (1, 0))  # maps[symbol][state]
    assert a.start == 0 and a.outputs == ("accept", "reject")
    assert a.run(a.symbol_ids(["1", "1", "1"])) == [1, 0, 1]


def test_from_dict_automata_lib_fields() -> None:
    spec = {
        "states": ["q0", "q1"],
        "input_symbols": ["a", "b"],
        "initial_state": "q1",
        "transitions": {"q0": {"a": "q1", "b": "q0"}, "q1": {"a": "q0", "b": "q1"}},
        "final_states": ["q0"],
    }
    a = from_dict(spec, default_name="lib")
    assert a.name == "lib"
    assert a.alphabet == ("a", "b") and a.start == 1
    assert a.outputs == ("accept", "reject")


def test_start_defaults_to_first_state_and_outputs_are_optional() -> None:
    a = from_dict(spec_with(start=None, outputs=None))
    assert a.start == 0 and a.outputs is None
    assert "outputs" not in a.to_dict()


def test_round_trip_and_stable_digest() -> None:
    a = from_dict(PARITY)
    assert from_dict(a.to_dict()) == a
    assert from_dict(json.loads(a.to_json())) == a
    assert a.digest() == from_dict(copy.deepcopy(PARITY)).digest()
    assert a.digest() != from_dict(spec_with(start="odd")).digest()


def test_load_spec_from_json_file(tmp_path: Path) -> None:
    path = tmp_path / "my_parity.json"
    path.write_text(json.dumps(spec_with(name=None)))
    a = load_spec(path)
    assert a.name == "my_parity"  # file stem when the spec has no name
    assert a.maps == from_dict(PARITY).maps
    assert load_spec(str(path)) == a


def test_load_spec_from_dict_automaton_and_catalog_name() -> None:
    a = load_spec(PARITY)
    assert load_spec(a) is a
    c5 = load_spec("cyclic:5")
    assert isinstance(c5, Semiautomaton) and c5.name == "cyclic:5" and c5.n_states == 5


def test_symbol_ids_rejects_unknown_symbol() -> None:
    a = from_dict(PARITY)
    with pytest.raises(InputError, match=r"unknown symbol '2' at position 2"):
        a.symbol_ids(["1", "2"])


MISSING_ROW = {"even": {"0": "even", "1": "odd"}}
MISSING_CELL = {"even": {"0": "even", "1": "odd"}, "odd": {"0": "odd"}}


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"transitions": MISSING_CELL}, r"missing transition from state 'odd' on symbol '1'.*sink state"),
        ({"transitions": MISSING_ROW}, r"no transitions for state 'odd'.*sink state"),
        ({"transitions": {**PARITY["transitions"], "odd": {"0": "odd", "1": "limbo"}}},
         r"unknown state 'limbo'"),
        ({"transitions": {**PARITY["transitions"], "ghost": {}}}, r"unknown state 'ghost'"),
        ({"transitions": {**PARITY["transitions"], "odd": {"0": "odd", "1": "even", "2": "odd"}}},
         r"unknown symbol '2'"),
        ({"states": ["even", "odd", "even"]}, r"duplicate name 'even' in 'states'"),
        ({"alphabet": ["0", "1", "1"]}, r"duplicate name '1' in 'alphabet'"),
        ({"alphabet": []}, r"'alphabet' is empty"),
        ({"states": []}, r"'states' is empty"),
        ({"states": None}, r"no 'states' field"),
        ({"alphabet": None}, r"no 'alphabet'"),
        ({"start": "neither"}, r"start state 'neither' is not among the states"),
        ({"outputs": {"even": "accept"}}, r"no label for state\(s\) \['odd'\]"),
        ({"color": "blue"}, r"unknown field\(s\) \['color'\]"),
        ({"input_symbols": ["0", "1"]}, r"both 'alphabet' and 'input_symbols'"),
        ({"transitions": None}, r"needs 'transitions'"),
        ({"alphabet": ["0", ""]}, r"'alphabet' has an empty symbol name"),
        ({"alphabet": ["0", "1 2"]}, r"symbol '1 2' in 'alphabet' contains whitespace.*'1_2'"),
        ({"alphabet": ["0", "tab\there"]}, r"contains whitespace"),
    ],
)
def test_validation_errors_name_the_problem(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message) as info:
        from_dict(spec_with(**changes))
    assert "\n" not in str(info.value)


def test_spec_must_be_an_object() -> None:
    with pytest.raises(SpecError, match="must be a JSON object"):
        from_dict(["states"])  # type: ignore[arg-type]


def test_bad_json_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"states": ["a",')
    with pytest.raises(SpecError, match=r"broken\.json.*is not valid JSON"):
        load_spec(path)


def test_missing_json_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"does not exist"):
        load_spec(tmp_path / "nowhere.json")


def test_unknown_name_goes_to_the_catalog() -> None:
    with pytest.raises(SpecError, match=r"unknown catalog automaton 'no-such-thing'"):
        load_spec("no-such-thing")
