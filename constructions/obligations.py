"""Obligations: what a construction promises about its model, as data a generic checker tests.

A certificate (``verify/certify.py``) proves that a compiled model is exact on *every* input
up to its max_len.  The checker computes everything from the model's tensors; a construction
contributes only *obligations* -- the discrete program its weights are meant to run:

* :class:`Embedding`: the integer code every token (and BOS) writes into each tracked subspace;
* per layer, :class:`Fetch` for each head (the key position it must attend to from every query
  position, and which subspace it copies where) and one MLP obligation --
  :class:`Compose` (the composition of transition maps, Theorem 10's Lemma 14 role) or
  :class:`Lookup` (a finite function of integer codes, Lemma 11);
* :class:`Readout`: which output each reachable final code must win.

Obligations are computed from the plan and the automaton, never from the weights, so a wrong
weight cannot be excused by the construction: the checker finds that the tensors do not run
the declared program.  Obligations are plain data with a canonical JSON form
(:meth:`Obligations.to_json`) whose digest the certificate records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Embedding:
    """``codes[subspace]``: [n_symbols + 1, dims] -- the code symbol a writes (row a) and BOS
    writes (last row) in each *tracked* subspace; every other residual dim must be
    input-independent and never written (the position code, ``one``, ``bos``)."""

    codes: dict[str, np.ndarray]


@dataclass(frozen=True)
class Fetch:
    """Head ``head`` must attend, from every query position t, to ``key[t]`` (0 is BOS) and
    copy subspace ``src`` there into ``dst`` (which holds 0 before the head)."""

    head: str
    key: np.ndarray  # [max_len + 1] int
    src: str
    dst: str


@dataclass(frozen=True)
class Compose:
    """MLP ``mlp`` composes transition maps held as integer codes (one dim per point):
    ``maps[q]`` holds f(q), ``fetched[q]`` holds g(q); the result is f(g(q)) ("g, then f").
    ``into`` names where the result goes: ``maps`` (and ``fetched`` is cleared to 0) or
    ``fetched`` (and ``maps`` is left as it is)."""

    mlp: str
    maps: str
    fetched: str
    into: str


@dataclass(frozen=True)
class Lookup:
    """MLP ``mlp`` maps the integer codes of ``reads`` (one dim each, in order) to the code
    ``table[key]`` written into ``out`` (which holds 0 before); a key missing from the table
    must never occur."""

    mlp: str
    reads: tuple[str, ...]
    out: str
    table: dict[tuple[int, ...], np.ndarray]


@dataclass(frozen=True)
class Layer:
    """One block: a fetch per head, then the MLP's obligation."""

    fetches: tuple[Fetch, ...]
    mlp: Compose | Lookup | None


@dataclass(frozen=True)
class Readout:
    """The unembedding reads ``reads`` (their dims, in order) and must put the largest logit
    on ``table[code]`` for every code the final layer can hold there."""

    reads: tuple[str, ...]
    table: dict[tuple[int, ...], int]


@dataclass(frozen=True)
class Obligations:
    """Everything a construction promises about one compiled model (see the module docstring)."""

    construction: str
    embedding: Embedding
    layers: tuple[Layer, ...]
    readout: Readout
    notes: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A canonical JSON form (arrays as lists, tables as sorted rows)."""
        def mlp(o: Compose | Lookup | None) -> Any:
            if o is None:
                return None
            if isinstance(o, Compose):
                return {"kind": "compose", "mlp": o.mlp, "maps": o.maps, "fetched": o.fetched, "into": o.into}
            return {"kind": "lookup", "mlp": o.mlp, "reads": list(o.reads), "out": o.out,
                    "table": [[list(k), np.asarray(v).tolist()] for k, v in sorted(o.table.items())]}
        return {
            "construction": self.construction,
            "embedding": {k: np.asarray(v).tolist() for k, v in sorted(self.embedding.codes.items())},
            "layers": [{"fetches": [{"head": f.head, "key": np.asarray(f.key).tolist(), "src": f.src, "dst": f.dst}
                                    for f in layer.fetches], "mlp": mlp(layer.mlp)} for layer in self.layers],
            "readout": {"reads": list(self.readout.reads),
                        "table": [[list(k), v] for k, v in sorted(self.readout.table.items())]},
        }

    def digest(self) -> str:
        """sha256 of the canonical JSON form."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def offset_keys(max_len: int, offset: int, skip_below: int = 0) -> np.ndarray:
    """The key of an offset head (Theorem 10's look-back) at every query position t = 0..max_len:
    t - offset when that position exists and lies beyond the first ``skip_below`` positions,
    else BOS (0)."""
    t = np.arange(max_len + 1)
    s = t - offset
    return np.where((s >= 1) & (s > skip_below), s, 0)


def absolute_keys(max_len: int, position: int) -> np.ndarray:
    """The key of an absolute head: ``position`` once it exists (t >= position), else BOS."""
    t = np.arange(max_len + 1)
    return np.where(t >= position, position, 0)
