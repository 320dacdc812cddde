"""shortcut: compile finite automata into exact, hand-set Transformers.

Library entry points::

    import compiler
    a = compiler.load_spec("cyclic:5")
    model = compiler.compile_automaton(a, max_len=128)
    model.simulate([["1", "4", "2"]])
    compiler.save(model, "c5.safetensors"); compiler.load("c5.safetensors")
"""

from __future__ import annotations

__version__ = "0.1.0"

from .decompose import decompose
from .errors import ShortcutError
from .pipeline import compile_automaton
from .spec import Semiautomaton, load_spec


def save(model, path) -> None:
    """Save a compiled model as one safetensors file (JSON metadata, no pickle)."""
    from constructions.checkpoint import save as _save

    _save(model, path)


def load(path):
    """Load a checkpoint written by :func:`save` (never executes code)."""
    from constructions.checkpoint import load as _load

    return _load(path)


def with_start(model, start: str):
    """The same model read out from another start state (a copy; the weights of the
    scan are start-independent, only the unembedding changes)."""
    import copy

    from .pipeline import set_start

    other = copy.deepcopy(model)
    set_start(other, start)
    return other


__all__ = ["Semiautomaton", "ShortcutError", "compile_automaton", "decompose", "load", "load_spec", "save", "with_start", "__version__"]
