"""shortcut: compile finite automata into exact, hand-set Transformers.

Library entry points::

    import compiler
    a = compiler.load_spec("cyclic:5")
    model = compiler.compile_automaton(a, max_len=128)
    model.simulate([["1", "4", "2"]])
    compiler.save(model, "c5.safetensors"); compiler.load("c5.safetensors")

This module is a lazy facade over the layers below (see ``docs/architecture.md``):
``import compiler.automata`` alone loads neither torch nor the constructions.
"""

from __future__ import annotations

import importlib
from typing import Any

from .automata.version import __version__

_EXPORTS = {
    "Semiautomaton": "compiler.automata.spec",
    "ShortcutError": "compiler.automata.errors",
    "load_spec": "compiler.automata.load",
    "decompose": "compiler.automata.decompose",
    "compile_automaton": "compiler.pipeline",
    "candidates": "compiler.pipeline",
    "with_start": "compiler.pipeline",
    "save": "constructions.checkpoint",
    "load": "constructions.checkpoint",
}


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first use (PEP 562)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'compiler' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


__all__ = [*_EXPORTS, "__version__"]
