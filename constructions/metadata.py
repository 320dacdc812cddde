"""A compiled model's metadata, typed: the JSON object a checkpoint carries, read through attributes.

``model.meta`` stays the JSON object the checkpoint stores (``constructions/checkpoint.py``
writes and digests it); :class:`ModelMeta` is its typed view (``model.metadata``), with a
lossless round trip: ``ModelMeta.from_json(d).to_json() == d``, keys in their order, a key
that is absent stays absent (a checkpoint written before a key existed still loads, the
attribute reads None) and every key this class does not name -- each construction's own
section, keyed by its name (``meta["scan"]``, ``meta["krohn_rhodes"]``), and anything a later
version adds -- is kept in :attr:`ModelMeta.sections`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class ModelMeta:
    """The metadata of a compiled model (a field its checkpoint has no key for reads as its
    default: empty for what every compiled model has, None for the rest).

    automaton: the spec (``Semiautomaton.to_dict``); method: the construction's name;
    requested_method: ``--method`` as asked (``auto`` or a name); plan: the construction's plan
    (``plan_to_json``); why: the planner's reasons; candidates: every construction's estimate or
    refusal (``pipeline.Candidate`` as dicts); positions: the position code; position_precision_margin:
    its rounding margin at the model's dtype; warnings: precision warnings; layers: per block,
    its heads' and MLP's notes; residual_labels / subspaces / layout: the residual stream's named
    dims (``assemble``); readout: a label readout (``constructions/labels.py``); basis: a rotated
    basis (``constructions/basis.py``); unfolded: the unfolded layout (``constructions/unfold.py``);
    header_sha256: the header digest stamped at compile time; verification: the sealed
    verification summary; sections: every other key, in order (construction sections)."""

    automaton: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    requested_method: str | None = None
    plan: dict[str, Any] | None = None
    why: str | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    positions: str | None = None
    position_precision_margin: float | None = None
    warnings: list[str] = field(default_factory=list)
    layers: list[dict[str, Any]] = field(default_factory=list)
    residual_labels: list[str] = field(default_factory=list)
    subspaces: dict[str, list[int]] = field(default_factory=dict)
    layout: dict[str, Any] | None = None
    readout: dict[str, Any] | None = None
    basis: dict[str, Any] | None = None
    unfolded: dict[str, Any] | None = None
    header_sha256: str | None = None
    verification: dict[str, Any] | None = None
    sections: dict[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = ()
    """The JSON object's keys in their order (which named fields were present)."""

    @staticmethod
    def from_json(meta: dict[str, Any]) -> ModelMeta:
        """The typed view of ``meta`` (nothing copied deeply: the values are the object's own)."""
        named = {f.name for f in fields(ModelMeta)} - {"sections", "keys"}
        return ModelMeta(**{k: v for k, v in meta.items() if k in named},
                         sections={k: v for k, v in meta.items() if k not in named}, keys=tuple(meta))

    def to_json(self) -> dict[str, Any]:
        """The JSON object again: the same keys in the same order, the same values."""
        return {k: self.sections[k] if k in self.sections else getattr(self, k) for k in self.keys}

    def section(self, name: str) -> dict[str, Any] | None:
        """A construction's own section (``meta[name]``), or None."""
        return self.sections.get(name)

    @property
    def start(self) -> str | None:
        """The start state's name, as the spec records it."""
        return self.automaton.get("start")
