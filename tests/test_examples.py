"""Every ``examples/*.py`` runs as a script (in a temporary working directory) and says what it should;
every ``examples/*.json`` is a spec that loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.automata.load import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

EXPECTED_OUTPUT = {
    "compile_and_inspect.py": [
        "auto picked krohn-rhodes: 2 layers",
        "states: ['r1+', 'r2+', 'r2-', 'r1-']",
        "kr:h1.b0.count0.0.new: [0, 1, 0, 0, 1]",
        "scan: 6 layers; scan:map after layer 2",
        "exact: True",
        "saved d8.safetensors",
    ],
    "zoo_dataset.py": [
        "zoo: 3 models in zoo-example",
        "model definite-0000",
        "intended key matches the pattern at every position: True",
    ],
}
"""Lines (substrings) each example must print; a new example needs an entry here."""

EXPECTED_FILES = {"compile_and_inspect.py": ["d8.safetensors"], "zoo_dataset.py": ["zoo-example/manifest.jsonl"]}


def _env() -> dict[str, str]:
    """The test's environment, with the repository importable (as after ``pip install -e .``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def test_every_example_script_has_expectations() -> None:
    scripts = sorted(p.name for p in EXAMPLES.glob("*.py"))
    assert scripts and scripts == sorted(EXPECTED_OUTPUT)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_script_runs(name: str, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    for needle in EXPECTED_OUTPUT.get(name, []):
        assert needle in r.stdout, f"{name} did not print {needle!r}:\n{r.stdout}"
    for f in EXPECTED_FILES.get(name, []):
        assert (tmp_path / f).is_file()


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.json")))
def test_example_spec_loads(name: str) -> None:
    a = load_spec(EXAMPLES / name)
    assert a.n_states >= 2 and a.n_symbols >= 1
    assert load_spec(a.to_dict()) == a
