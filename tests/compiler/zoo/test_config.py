"""Zoo configs: parsed and checked, models listed in a fixed order with their own seeds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compiler.automata.catalog import paper_suite
from compiler.automata.errors import InputError
from compiler.zoo.config import MAX_MODELS, jobs, load, model_seed, parse

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _family(**over):
    return {"name": "g", "class": "group", "count": 3, **over}


def test_the_examples_parse_and_the_reference_zoo_is_big_enough():
    tiny, big = load(EXAMPLES / "zoo-tiny.toml"), load(EXAMPLES / "zoo.toml")
    assert 20 <= len(jobs(tiny)) <= 40
    assert len(jobs(big)) >= 1000
    per_class = {f.kind: f.count for f in big.families}
    assert sum(n >= 150 for n in per_class.values()) >= 6
    assert {f.max_len for f in big.families} == {(64,)} and {f.traces for f in big.families} == {8}


def test_the_paper_zoo_is_the_reference_suite_once_each():
    """examples/zoo-paper.toml: the 19 automata in one process (benchmarks/certify.py times it)."""
    (family,) = load(EXAMPLES / "zoo-paper.toml").families
    assert family.kind == "catalog" and family.count == len(family.names) and family.max_len == (100,)
    assert list(family.names) == paper_suite()


def test_order_limit_and_seeds_do_not_depend_on_other_families():
    one = parse({"seed": 1, "family": [_family()]})
    two = parse({"seed": 1, "family": [_family(name="h", count=5), _family()]})
    assert [j.id for j in jobs(one)] == ["g-00000", "g-00001", "g-00002"]
    assert [j.seed for j in jobs(one)] == [j.seed for j in jobs(two) if j.family.name == "g"]
    assert [j.index for j in jobs(two)] == list(range(8))
    assert [j.id for j in jobs(two, limit=6)] == [*(f"h-{i:05d}" for i in range(5)), "g-00000"]
    assert model_seed(1, "g", 0) != model_seed(2, "g", 0) != model_seed(1, "g", 1)


def test_json_and_toml_give_the_same_config(tmp_path):
    data = {"seed": 3, "defaults": {"max_len": [8, 16], "bases": ["orthogonal"]},
            "family": [_family(), {"name": "r", "class": "regex", "count": 2, "patterns": ["a*b"]}]}
    (tmp_path / "z.json").write_text(json.dumps(data))
    (tmp_path / "z.toml").write_text('seed = 3\n[defaults]\nmax_len = [8, 16]\nbases = ["orthogonal"]\n'
                                     '[[family]]\nname = "g"\nclass = "group"\ncount = 3\n'
                                     '[[family]]\nname = "r"\nclass = "regex"\ncount = 2\npatterns = ["a*b"]\n')
    a, b = load(tmp_path / "z.json"), load(tmp_path / "z.toml")
    assert a == b and a.digest() == b.digest()
    assert a.families[0].max_len == (8, 16) and a.families[1].bases == ("orthogonal",)


@pytest.mark.parametrize("data,message", [
    ({"family": []}, "names no models"),
    ({"family": [_family(**{"class": "nope"})]}, "has class 'nope'"),
    ({"family": [_family(count=0)]}, "count must be"),
    ({"family": [_family(count=MAX_MODELS + 1)]}, "count must be"),
    ({"family": [_family(), _family()]}, "must be unique"),
    ({"family": [_family(max_len=[0])]}, "max_len must be"),
    ({"family": [_family(methods=["magic"])]}, "methods must name"),
    ({"family": [_family(states=[5, 2])]}, "states must be a range"),
    ({"family": [_family(colour="red")]}, "unknown keys"),
    ({"family": [_family(name="a b")]}, "needs a 'name'"),
    ({"family": [{"name": "r", "class": "regex", "count": 1}]}, "needs patterns"),
    ({"family": [_family(traces=1000)]}, "traces must be"),
    ({"family": [_family()], "extra": 1}, "unknown keys"),
])
def test_bad_configs_are_refused_with_one_line(data, message):
    with pytest.raises(InputError, match=message) as e:
        parse(data)
    assert "\n" not in str(e.value)


def test_unreadable_files_are_bad_input(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("seed = [")
    with pytest.raises(InputError, match="not valid TOML"):
        load(tmp_path / "bad.toml")
