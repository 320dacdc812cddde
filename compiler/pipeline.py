"""spec -> plan -> program -> assembled model."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from constructions import gridworld, krohn_rhodes, scan
from constructions.assemble import assemble
from constructions.positions import KINDS
from constructions.scan import n_scan_layers

from .automata.decompose import decompose
from .automata.errors import ShortcutError
from .automata.gridworld_detect import detect
from .automata.load import load_spec
from .automata.spec import Semiautomaton

METHODS = ("auto", "scan", "krohn-rhodes", "gridworld")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
MAX_LEN_LIMIT = 1 << 20


@dataclass
class Decision:
    """The construction chosen, why, and (for krohn-rhodes) the program already built."""

    method: str
    why: str
    built: tuple | None = None


def _krohn_rhodes(automaton: Semiautomaton, max_len: int, eps: float, positions: str) -> tuple:
    """Decompose and build the Theorem 11 program (errors name the reason)."""
    return krohn_rhodes.build(automaton, max_len=max_len, eps=eps, cascade=decompose(automaton), positions=positions)


def decide(automaton: Semiautomaton, method: str, max_len: int = 128, eps: float = 2.0**-23,
           positions: str = "sinusoidal") -> Decision:
    """Which construction compiles ``automaton``.

    auto: gridworld for line/box worlds; else krohn-rhodes when the automaton is
    solvable, within the decomposer's budgets and no deeper than the scan at this
    max_len; else scan.
    """
    if method not in METHODS:
        raise ShortcutError(f"unknown method {method!r}; choose one of {list(METHODS)}")
    if method == "scan":
        return Decision("scan", "requested with --method scan")
    if method == "krohn-rhodes":
        return Decision("krohn-rhodes", "requested with --method krohn-rhodes", _krohn_rhodes(automaton, max_len, eps, positions))

    world, reason = detect(automaton)
    if method == "gridworld":
        if world is None:
            raise ShortcutError(f"--method gridworld needs a line or box world, but "
                                f"{automaton.name or 'this automaton'} is not one up to renaming: {reason}")
        return Decision("gridworld", f"requested with --method gridworld: {world.describe(automaton)}")
    if world is not None:
        return Decision("gridworld", f"auto: a {world.describe(automaton)} up to renaming; Theorem 12 gives 2 "
                                     f"attention layers at every max_len")
    scan_depth = n_scan_layers(max_len)
    try:
        built = _krohn_rhodes(automaton, max_len, eps, positions)
    except ShortcutError as e:
        return Decision("scan", f"auto: krohn-rhodes not possible ({e}); the scan (Theorem 10) handles every automaton")
    kr_depth = len(built[0].blocks)
    if kr_depth <= scan_depth:
        return Decision("krohn-rhodes", f"auto: solvable; the Krohn-Rhodes cascade needs {kr_depth} attention layers "
                                        f"at every max_len (scan would need {scan_depth} at {max_len})", built)
    return Decision("scan", f"auto: solvable, but the Krohn-Rhodes cascade needs {kr_depth} attention layers and the "
                            f"scan only {scan_depth} at max_len {max_len}")


def plan(automaton: Semiautomaton, method: str, max_len: int = 128) -> tuple[str, str]:
    """The construction to use and why (see :func:`decide`)."""
    d = decide(automaton, method, max_len)
    return d.method, d.why


def compile_automaton(automaton, *, max_len: int, method: str = "auto", dtype: torch.dtype = torch.float32,
                      positions: str = "sinusoidal"):
    """Compile ``automaton`` (a Semiautomaton, dict, JSON path or catalog name) to a
    :class:`constructions.model.CompiledTransformer` that simulates it for inputs up to ``max_len``."""
    automaton = load_spec(automaton)
    if not isinstance(max_len, int) or max_len < 1:
        raise ShortcutError(f"max_len must be a positive integer, got {max_len!r}")
    if max_len > MAX_LEN_LIMIT:
        raise ShortcutError(f"max_len {max_len} is above the supported limit {MAX_LEN_LIMIT}")
    if dtype not in DTYPES.values():
        raise ShortcutError(f"dtype must be one of {list(DTYPES)}, got {dtype}")
    if positions not in KINDS:
        raise ShortcutError(f"unknown positions {positions!r}; choose one of {list(KINDS)}")
    decision = decide(automaton, method, max_len, torch.finfo(dtype).eps, positions)
    chosen, why = decision.method, decision.why
    if chosen == "krohn-rhodes":
        program, meta = decision.built
    elif chosen == "gridworld":
        program, meta = gridworld.build(automaton, max_len=max_len, positions=positions, eps=torch.finfo(dtype).eps)
    else:
        program, meta = scan.build(automaton, max_len=max_len, positions=positions, eps=torch.finfo(dtype).eps)
    meta = {"automaton": automaton.to_dict(), "why": why, "requested_method": method, **meta}
    return assemble(program, max_len=max_len, dtype=dtype, meta=meta)


def set_start(model, start: str) -> None:
    """Point a compiled model at another start state, in place (each construction
    keeps q0 in one place: the scan in its unembedding, gridworld in its embedding)."""
    if model.meta.get("method") == "gridworld":
        gridworld.set_start(model, start)
    elif model.meta.get("method") == "krohn-rhodes":
        krohn_rhodes.set_start(model, start)
    else:
        scan.set_start(model, start)


def with_start(model, start: str):
    """The same model read out from another start state (a copy; the weights of the
    scan are start-independent, only the unembedding changes)."""
    other = copy.deepcopy(model)
    set_start(other, start)
    return other
