"""shortcut: compile finite automata into exact, hand-set Transformers.

Library entry points::

    import compiler
    a = compiler.load_spec("cyclic:5")
    model = compiler.compile_automaton(a, max_len=128)
    model.simulate([["1", "4", "2"]])
    compiler.save(model, "c5.safetensors"); compiler.load("c5.safetensors")

Every public name is an attribute that normal lookup finds first, so nothing another library
mounts on ``object`` (nnsight adds a ``save`` method to every object) can shadow it.  The
light names are imported here; those whose modules load numpy, sympy or torch are properties of the
package's module type (:class:`_Package`), which Python consults before the module's dict and
before anything on ``object``, and they import their module on first use: ``import compiler``
loads neither numpy, sympy, torch nor the constructions (see ``docs/architecture.md``), so
``shortcut --version`` can answer at once.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from .automata.errors import ShortcutError
from .automata.spec import Semiautomaton
from .automata.version import __version__

LAZY_EXPORTS = {
    "load_spec": "compiler.automata.load",
    "from_table": "compiler.automata.formats",
    "decompose": "compiler.automata.decompose",
    "compile_automaton": "compiler.pipeline",
    "candidates": "compiler.pipeline",
    "with_start": "compiler.pipeline",
    "save": "constructions.checkpoint",
    "load": "constructions.checkpoint",
}
"""The public names whose modules load numpy, sympy or torch, and the module each comes from."""


def _imported(name: str, module: str) -> property:
    """A property giving ``module.name``, importing ``module`` on first use and keeping the value
    in the package's dict (where assignment, e.g. a test's monkeypatch, puts a replacement)."""

    def get(package: types.ModuleType) -> Any:
        found = vars(package)
        if name not in found:
            found[name] = getattr(importlib.import_module(module), name)
        return found[name]

    def put(package: types.ModuleType, value: Any) -> None:
        vars(package)[name] = value

    return property(get, put, doc=f"``{module}.{name}`` (imported on first use)")


class _Package(types.ModuleType):
    """The module type of ``compiler``: one data descriptor per name of :data:`LAZY_EXPORTS`."""


for _name, _module in LAZY_EXPORTS.items():
    setattr(_Package, _name, _imported(_name, _module))
sys.modules[__name__].__class__ = _Package

__all__ = ["Semiautomaton", "ShortcutError", *LAZY_EXPORTS, "__version__"]
