"""spec -> plan -> program -> assembled model (DESIGN.md section 1)."""

from __future__ import annotations

import torch

from .errors import ShortcutError
from .spec import Semiautomaton, load_spec

METHODS = ("auto", "scan", "gridworld")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
MAX_LEN_LIMIT = 1 << 20


def plan(automaton: Semiautomaton, method: str) -> tuple[str, str]:
    """The construction to use and why."""
    if method not in METHODS:
        raise ShortcutError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    if method == "scan":
        return "scan", "requested with --method scan"
    from .gridworld_detect import detect

    world, reason = detect(automaton)
    if method == "gridworld":
        if world is None:
            raise ShortcutError(f"--method gridworld needs a line or box world, but "
                                f"{automaton.name or 'this automaton'} is not one up to renaming: {reason}")
        return "gridworld", f"requested with --method gridworld: {world.describe(automaton)}"
    if world is not None:
        return "gridworld", (f"auto: a {world.describe(automaton)} up to renaming; Theorem 12 gives 2 attention "
                             f"layers at every max_len")
    return "scan", "auto: the scan (Theorem 10) handles every automaton; no shorter construction is available yet"


def compile_automaton(automaton, *, max_len: int, method: str = "auto", dtype: torch.dtype = torch.float32,
                      positions: str = "sinusoidal"):
    """Compile ``automaton`` (a Semiautomaton, dict, JSON path or catalog name) to a
    :class:`constructions.model.CompiledTransformer` that simulates it for inputs up to ``max_len``."""
    from constructions import scan
    from constructions.assemble import assemble
    from constructions.positions import KINDS

    automaton = load_spec(automaton)
    if not isinstance(max_len, int) or max_len < 1:
        raise ShortcutError(f"max_len must be a positive integer, got {max_len!r}")
    if max_len > MAX_LEN_LIMIT:
        raise ShortcutError(f"max_len {max_len} is above the supported limit {MAX_LEN_LIMIT}")
    if dtype not in DTYPES.values():
        raise ShortcutError(f"dtype must be one of {list(DTYPES)}, got {dtype}")
    if positions not in KINDS:
        raise ShortcutError(f"unknown positions {positions!r}; choose one of {list(KINDS)}")
    chosen, why = plan(automaton, method)
    if chosen == "gridworld":
        from constructions import gridworld

        program, meta = gridworld.build(automaton, max_len=max_len, positions=positions, eps=torch.finfo(dtype).eps)
    else:
        program, meta = scan.build(automaton, max_len=max_len, positions=positions, eps=torch.finfo(dtype).eps)
    meta = {"automaton": automaton.to_dict(), "why": why, "requested_method": method, **meta}
    return assemble(program, max_len=max_len, dtype=dtype, meta=meta)


def set_start(model, start: str) -> None:
    """Point a compiled model at another start state, in place (each construction
    keeps q0 in one place: the scan in its unembedding, gridworld in its embedding)."""
    if model.meta.get("method") == "gridworld":
        from constructions.gridworld import set_start as _set
    else:
        from constructions.scan import set_start as _set
    _set(model, start)
