"""The distribution's metadata agrees with itself: one version, one licence, a marker of typed
packages in every package, a citation of the tool and of the paper."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from compiler.automata.version import __version__

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_ships_py_typed():
    packages = PROJECT["tool"]["setuptools"]["packages"]
    assert PROJECT["tool"]["setuptools"]["package-data"]["*"] == ["py.typed"]
    missing = [p for p in packages if not (ROOT / p.replace(".", "/") / "py.typed").is_file()]
    assert not missing, f"no py.typed in {missing}"


def test_every_package_directory_is_listed():
    """A wheel ships only the listed packages: a new subpackage left off the list would be missing
    from every non-editable install."""
    found = {str(init.parent.relative_to(ROOT)).replace("/", ".") for root in ("compiler", "constructions", "verify")
             for init in (ROOT / root).rglob("__init__.py")}
    assert found == set(PROJECT["tool"]["setuptools"]["packages"])


def test_licence_file_matches_the_declared_licence():
    assert PROJECT["project"]["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n")


def test_citation_names_the_tool_version_and_the_paper():
    text = (ROOT / "CITATION.cff").read_text()
    assert re.search(rf'^version: "{re.escape(__version__)}"$', text, re.M), "CITATION.cff version differs"
    assert 'title: "Transformers Learn Shortcuts to Automata"' in text
    assert re.search(r"^  year: 2023$", text, re.M)


def test_the_command_keeps_its_name_under_the_distribution_name():
    assert PROJECT["project"]["name"] == "shortcut-automata"
    assert PROJECT["project"]["scripts"] == {"shortcut": "compiler.command:main"}
