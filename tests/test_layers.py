"""The package layers import only downward, with no cycle anywhere (imports inside
functions counted), and the automaton IR loads without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("compiler", "constructions", "verify")


def test_import_linter_contracts_hold():
    pytest.importorskip("importlinter")
    run = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                          "sys.exit(lint_imports())"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "broken" in run.stdout and " 0 broken" in run.stdout


def _cycle(graph) -> list[str] | None:
    """A module-level import cycle in ``graph`` (grimp counts imports inside functions), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.find_modules_directly_imported_by(m)):
            if n.split(".")[0] not in PACKAGES:
                continue
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph.modules):
        if m.split(".")[0] in PACKAGES and m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_cycle_among_project_modules():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph(*PACKAGES)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_cycle_finder_finds_a_cycle():
    class Toy:
        modules = {"compiler.a", "compiler.b", "compiler.c"}
        edges = {"compiler.a": {"compiler.b"}, "compiler.b": {"compiler.c"}, "compiler.c": {"compiler.a"}}

        def find_modules_directly_imported_by(self, m):
            return self.edges[m]

    assert _cycle(Toy()) == ["compiler.a", "compiler.b", "compiler.c", "compiler.a"]


@pytest.mark.parametrize("module", ["compiler", "compiler.automata.load", "compiler.automata.decompose",
                                    "compiler.automata.catalog"])
def test_ir_loads_without_torch(module):
    code = f"import sys, {module}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
