"""Each MLP obligation kind's weight check, in one table (:data:`CHECKS`), and one layer's
check: its heads (:func:`.heads.check_heads`), then its MLP by the table.  Every rule has one
signature, so a kind is added by one entry here (and one rule in :mod:`.semantics`); a kind the
table lacks is refused by name (NotCertifiable), never passed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from constructions.obligations import Beside, Compose, Joint, Kind, Layer, Lookup, Races, Steps, SuffixLookup, Threshold

from .after_races import races_then_steps
from .compose import beside_parts, composed_steps
from .composition import compose_mlp
from .heads import check_heads
from .latest import any_layer, is_any_layer
from .lookups import MLPWeights, lookup_mlp, mlp_weights
from .recency import races_mlp
from .state import CertificateFailure, Model, NotCertifiable, State
from .suffix import suffix_lookup_mlp


@dataclass
class Run:
    """What the rules share over a model's layers: the model, the program's claims, the subspaces
    written by the end of the layer being checked, each scan's closure of maps, and the
    composition MLPs' group tables (the same weights in every layer of a scan)."""

    m: Model
    joint: tuple[Joint, ...]
    written: set[str]
    closures: dict[str, np.ndarray | None]
    tables: dict[tuple, np.ndarray] = field(default_factory=dict)


Rule = Callable[[Run, int, Layer, Any, list[State], np.ndarray, dict[str, Any], MLPWeights | None],
                tuple[list[State], np.ndarray]]
"""(run, layer index, the layer, the MLP obligation, the classes' states, each position's class,
the report, the obligation's own sub-network when it is a part of a side-by-side MLP) -> the
states and classes after the MLP."""


def _lookup(run: Run, l: int, layer: Layer, o: Lookup | Steps, states: list[State], pos_class: np.ndarray,
            report: dict[str, Any], sub: MLPWeights | None) -> tuple[list[State], np.ndarray]:
    """Lemma 11's lookups, one step after another (:func:`.lookups.lookup_mlp`)."""
    return lookup_mlp(run.m, l, o, states, pos_class, report, run.joint, run.written, sub), pos_class


def _suffix(run: Run, l: int, layer: Layer, o: SuffixLookup, states: list[State], pos_class: np.ndarray,
            report: dict[str, Any], sub: MLPWeights | None) -> tuple[list[State], np.ndarray]:
    """Lemma 11 with suffix keys, unit by unit (:func:`.suffix.suffix_lookup_mlp`)."""
    return suffix_lookup_mlp(run.m, l, o, states, pos_class, report, run.joint, run.written, sub), pos_class


AFTER: dict[type, Callable[..., list[State]]] = {Compose: composed_steps, Races: races_then_steps}
"""The rule for steps fused after another MLP's work, by the kind of that work (``Steps.first``)."""


def _steps(run: Run, l: int, layer: Layer, o: Steps, states: list[State], pos_class: np.ndarray,
           report: dict[str, Any], sub: MLPWeights | None) -> tuple[list[State], np.ndarray]:
    """Steps alone, or lookups fused after a composition or races (whole MLPs only)."""
    if o.first is None or sub is not None:
        return _lookup(run, l, layer, o, states, pos_class, report, sub)
    rule = AFTER.get(type(o.first))
    if rule is None:
        raise NotCertifiable(f"layer {l + 1} MLP {o.mlp}: steps after a {o.first.kind!r} obligation have no weight "
                             f"check")
    return rule(run.m, l, o, states, pos_class, report), pos_class


def _compose(run: Run, l: int, layer: Layer, o: Compose, states: list[State], pos_class: np.ndarray,
             report: dict[str, Any], sub: MLPWeights | None) -> tuple[list[State], np.ndarray]:
    """Theorem 10's composition (:func:`.composition.compose_mlp`)."""
    return compose_mlp(run.m, l, o, states, pos_class, run.closures.get(o.maps), report, sub, run.tables), pos_class


def _races(run: Run, l: int, layer: Layer, o: Races, states: list[State], pos_class: np.ndarray,
           report: dict[str, Any], sub: MLPWeights | None) -> tuple[list[State], np.ndarray]:
    """Theorem 12's boundary count (:func:`.recency.races_mlp`)."""
    return races_mlp(run.m, l, o, states, pos_class, report, sub), pos_class


def _threshold(run: Run, l: int, layer: Layer, o: Threshold, states: list[State], pos_class: np.ndarray,
               report: dict[str, Any], sub: MLPWeights | None) -> tuple[list[State], np.ndarray]:
    """"Some flag so far": checked with the layer's any-flag head (:func:`.latest.any_layer`)."""
    return any_layer(run.m, l, Layer(layer.fetches, o), states, pos_class, report, sub)


def _beside(run: Run, l: int, layer: Layer, o: Beside, states: list[State], pos_class: np.ndarray,
            report: dict[str, Any], sub: MLPWeights | None) -> tuple[list[State], np.ndarray]:
    """Lemma 17's MLPs side by side: each part checked by its own rule on its own sub-network, one
    after another (they read and write disjoint subspaces, so the order does not matter).  A part
    sees the layer's heads' reports (a threshold part reports its any-flag head there)."""
    if sub is not None:
        raise NotCertifiable(f"layer {l + 1} MLP {o.mlp}: MLPs side by side inside another such MLP")
    weights, biases = mlp_weights(run.m, l, o.mlp)
    parts = []
    for part, own in zip(o.parts, beside_parts(run.m, l, o, weights, biases)):
        rep: dict[str, Any] = {"heads": report["heads"]} if "heads" in report else {}
        states, pos_class = check_mlp(run, l, layer, part, states, pos_class, rep, own)
        if rep.get("heads"):
            report["heads"] = rep["heads"]
        parts.append(rep["mlp"])
    report["mlp"] = {"name": o.mlp, "kind": "beside", "parts": parts,
                     "max_error": max((p_["max_error"] for p_ in parts), default=0.0)}
    return states, pos_class


CHECKS: dict[type, Rule] = {Lookup: _lookup, SuffixLookup: _suffix, Steps: _steps, Compose: _compose, Races: _races,
                            Threshold: _threshold, Beside: _beside}
"""Each MLP obligation kind's weight check (a kind is added here, with its rule)."""


def check_mlp(run: Run, l: int, layer: Layer, o: Kind, states: list[State], pos_class: np.ndarray,
              report: dict[str, Any], sub: MLPWeights | None = None) -> tuple[list[State], np.ndarray]:
    """Check one MLP obligation by its kind's rule (NotCertifiable for a kind with none)."""
    rule = CHECKS.get(type(o))
    if rule is None:
        raise NotCertifiable(f"layer {l + 1} MLP {', '.join(o.labels())}: the obligation kind {o.kind!r} has no "
                             f"weight check")
    return rule(run, l, layer, o, states, pos_class, report, sub)


def check_layer(run: Run, l: int, layer: Layer, states: list[State], pos_class: np.ndarray,
                report: dict[str, Any]) -> tuple[list[State], np.ndarray]:
    """Layer l: its heads, then its MLP (an any-flag head is checked with the threshold that reads
    it, by the MLP's rule); ``run.written`` gains what the layer writes."""
    if not (is_any_layer(layer) and any(isinstance(o, Threshold) for o in layer.mlp_leaves())):
        states, pos_class = check_heads(run.m, l, layer.fetches, states, pos_class, report)
    run.written |= set(layer.names_written())
    if layer.mlp is None:
        if run.m.blocks[l]["mlp"] is not None:
            raise CertificateFailure(f"layer {l + 1}", "has an MLP no obligation describes")
        return states, pos_class
    return check_mlp(run, l, layer, layer.mlp, states, pos_class, report)
