"""A construction's whole declared program: the embedding's codes, one :class:`Layer` of kinds
per block, the readout, the claims (:class:`Joint`, :class:`Promise`), with a canonical JSON
form read back losslessly (:meth:`Obligations.from_json`) and a renaming (:func:`prefixed`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .heads import HeadKind
from .kind import Kind, Sub, kind_from_json
from .mlps import Lookup, MLPKind


@dataclass(frozen=True)
class Embedding:
    """``codes[subspace]``: [n_symbols + 1, dims] -- the code symbol a writes (row a) and BOS
    writes (last row) in each *tracked* subspace; every other residual dim must be
    input-independent and never written (the position code, ``one``, ``bos``)."""

    codes: dict[str, np.ndarray]


@dataclass(frozen=True)
class Layer:
    """One block: a fetch per head, then the MLP's obligation."""

    fetches: tuple[HeadKind, ...]
    mlp: MLPKind | None

    def mlp_leaves(self) -> tuple[Kind, ...]:
        """The MLP's obligations, flattened (its steps and parts; none without an MLP)."""
        return () if self.mlp is None else self.mlp.leaves()

    def names_written(self) -> tuple[str, ...]:
        """The subspaces the layer writes: its heads', then its MLP's."""
        return (*(n for f in self.fetches for n in f.names_written()),
                *(() if self.mlp is None else self.mlp.names_written()))


@dataclass(frozen=True)
class Readout:
    """The unembedding reads ``reads`` (their dims, in order) and must put the largest logit
    on ``table[code]`` for every code the final layer can hold there."""

    reads: tuple[str, ...]
    table: dict[tuple[int, ...], int]


@dataclass(frozen=True)
class Joint:
    """The program holds, after BOS, one of ``rows`` at ``names`` together (a row per joint code,
    each name's dims in order), at every position and layer where all of them have been written
    -- e.g. a cascade's components' values are one of its reachable configurations.  A claim
    about the declared program, not the weights (which the checker still proves hold the
    program's value in each subspace): it lets the checker skip code combinations the program
    never produces, which per-subspace value sets cannot tell apart."""

    names: tuple[str, ...]
    rows: np.ndarray

    def to_json(self) -> dict[str, Any]:
        return {"names": list(self.names), "rows": np.asarray(self.rows).tolist()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Joint:
        return cls(tuple(d["names"]), np.asarray(d["rows"]))

    def renamed(self, sub: Sub) -> Joint:
        return Joint(tuple(sub(n) for n in self.names), self.rows)


@dataclass(frozen=True)
class Promise:
    """The model is vouched for on legal inputs only (a partial automaton under ``--promise
    legal``, docs/promises.md).  ``claims``: what the declared program holds, after BOS, on every
    legal input (as :class:`Joint`; e.g. a legal stack's depth stays in 0..D); the checker
    skips the code combinations outside them, so its certificate holds under the promise
    (``text`` says so) and for legal inputs only."""

    kind: str
    text: str
    claims: tuple[Joint, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "claims": [j.to_json() for j in self.claims]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Promise:
        return cls(d["kind"], d["text"], tuple(Joint.from_json(j) for j in d["claims"]))


@dataclass(frozen=True)
class Obligations:
    """Everything a construction promises about one compiled model (see the package docstring)."""

    construction: str
    embedding: Embedding
    layers: tuple[Layer, ...]
    readout: Readout
    notes: dict[str, Any] = field(default_factory=dict)
    """What the construction says about its program beyond the declaration (not in the JSON form:
    the certificate does not rest on it)."""
    joint: tuple[Joint, ...] = ()
    promise: Promise | None = None
    """Set when the model is vouched for on legal inputs only (a partial automaton): the
    certificate then holds under that promise, and its claims restrict the value sets."""

    def to_json(self) -> dict[str, Any]:
        """A canonical JSON form (arrays as lists, tables as sorted rows; each kind's its own)."""
        return {
            "construction": self.construction,
            "embedding": {k: np.asarray(v).tolist() for k, v in sorted(self.embedding.codes.items())},
            "layers": [{"fetches": [f.to_json() for f in layer.fetches],
                        "mlp": None if layer.mlp is None else layer.mlp.to_json()} for layer in self.layers],
            "readout": {"reads": list(self.readout.reads),
                        "table": [[list(k), v] for k, v in sorted(self.readout.table.items())]},
            **({"joint": [j.to_json() for j in self.joint]} if self.joint else {}),
            **({"promise": self.promise.to_json()} if self.promise is not None else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Obligations:
        """The obligations whose canonical JSON form is ``d`` (the same digest; ``notes`` empty)."""
        layers = tuple(Layer(tuple(_head(f) for f in layer["fetches"]),
                             None if layer["mlp"] is None else _mlp(layer["mlp"])) for layer in d["layers"])
        return cls(d["construction"], Embedding({k: np.asarray(v) for k, v in d["embedding"].items()}), layers,
                   Readout(tuple(d["readout"]["reads"]), {tuple(k): v for k, v in d["readout"]["table"]}),
                   joint=tuple(Joint.from_json(j) for j in d.get("joint", ())),
                   promise=None if d.get("promise") is None else Promise.from_json(d["promise"]))

    def digest(self) -> str:
        """sha256 of the canonical JSON form."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _head(d: dict[str, Any]) -> HeadKind:
    """A head's obligation from its JSON form (ValueError for an MLP's kind)."""
    o = kind_from_json(d)
    if not isinstance(o, HeadKind):
        raise ValueError(f"a {o.kind!r} obligation where a head's is declared")
    return o


def _mlp(d: dict[str, Any]) -> MLPKind:
    """An MLP's obligation from its JSON form (ValueError for a head's kind or a lone step)."""
    o = kind_from_json(d)
    if not isinstance(o, MLPKind):
        raise ValueError(f"a {o.kind!r} obligation where an MLP's is declared")
    return o


def prefixed(ob: Obligations, prefix: str) -> Obligations:
    """``ob`` with ``prefix`` before every subspace, head and MLP name (a program moved into a
    workspace that prefixes its names: a product's factor)."""
    def sub(name: str) -> str:
        return " + ".join(prefix + part for part in name.split(" + "))

    return Obligations(
        ob.construction, Embedding({sub(k): v for k, v in ob.embedding.codes.items()}),
        tuple(Layer(tuple(f.renamed(sub, prefix) for f in layer.fetches),
                    None if layer.mlp is None else layer.mlp.renamed(sub, prefix)) for layer in ob.layers),
        Readout(tuple(sub(r) for r in ob.readout.reads), dict(ob.readout.table)), dict(ob.notes),
        tuple(j.renamed(sub) for j in ob.joint),
        None if ob.promise is None else Promise(ob.promise.kind, ob.promise.text,
                                                tuple(j.renamed(sub) for j in ob.promise.claims)))


def one_hot_readout(sub: str, n: int) -> Readout:
    """The readout of a state one-hot: ``sub`` holds e_q for state q (0..n-1)."""
    eye = np.eye(n, dtype=np.int64)
    return Readout((sub,), {tuple(int(v) for v in eye[q]): q for q in range(n)})


def keys_reached(lookup: Lookup) -> Joint:
    """The claim that ``lookup``'s inputs hold one of its table's keys together (its keys being
    the ones the program reaches, e.g. from its start: a final lookup's)."""
    keys = list(lookup.table)
    return Joint(lookup.reads, np.array(keys, dtype=np.float64).reshape(len(keys), len(lookup.reads)))


class Undeclared(Exception):
    """A construction cannot state obligations for this model (yet): the reason says which part."""
