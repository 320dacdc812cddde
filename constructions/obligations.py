"""Obligations: what a construction promises about its model, as data a generic checker tests.

A certificate (``verify/certify/``) proves that a compiled model is exact on *every* input
up to its max_len.  The checker computes everything from the model's tensors; a construction
contributes only *obligations* -- the discrete program its weights are meant to run:

* :class:`Embedding`: the integer code every token (and BOS) writes into each tracked subspace;
* per layer, :class:`Fetch` for each copying head (the key position it must attend to from every
  query position, and which subspace it copies where), :class:`Recent` for a head whose key
  depends on the input (the most recent flagged position, Lemma 16), :class:`Average` for the
  heads of a prefix sum (Lemma 15), :class:`Match` for a head that finds the most recent key
  holding the code its query looks for (Theorem 12's nearest value), and one MLP obligation --
  :class:`Compose` (the composition of transition maps, Theorem 10's Lemma 14 role),
  :class:`Lookup` (a finite function of integer codes, Lemma 11), :class:`Steps` (several such
  functions, :class:`Modular` decodes and :class:`Round` clean-ups, one after another, fused into
  one MLP) or :class:`Races` (counts of comparisons between two recencies, Theorem 12's boundary
  count);
* :class:`Readout`: which output each reachable final code must win;
* content-dependent heads beyond the flag: :class:`Latest` (the most recent position whose codes
  match a set, a bounded stack's last push per level) and :class:`AnyFlag` with its
  :class:`Threshold` MLP ("some flag so far"), checked by ``verify/certify/latest.py``;
* :class:`Promise`: a partial automaton's model is vouched for on legal inputs only; its claims
  restrict the value sets to what legal inputs reach, and the certificate records the promise.

A subspace is named as in the model's layout: ``name``, ``name[i]`` for one of its dims, or
several joined by `` + `` (their dims in order), as a head that serves several sums reads them.

Obligations are computed from the plan and the automaton, never from the weights, so a wrong
weight cannot be excused by the construction: the checker finds that the tensors do not run
the declared program.  Obligations are plain data with a canonical JSON form
(:meth:`Obligations.to_json`) whose digest the certificate records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
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
class Recent:
    """Head ``head`` must attend, from every query position t, to the most recent position s <= t
    whose ``flag`` (one dim, code 0 or 1) is 1 -- BOS's is -- and copy ``src`` there into ``dst``
    (which holds 0 before the head): Lemma 16's most-recent flag.  Which key that is depends on
    the input, so the checker bounds the pattern for every position the key can be."""

    head: str
    flag: str
    src: str
    dst: str


@dataclass(frozen=True)
class Average:
    """Heads ``heads`` (head h over the keys ``first[h]`` .. min(``last[h]``, t)) together write into
    ``dst``, from every query position t, ``scale`` / ``mass`` times the sum of ``src`` over their
    keys: weight 1/mass on each, the rest on BOS, whose ``src`` holds 0 (Lemma 15's prefix mean;
    one head over 1..T, or one per position block).  ``dst`` holds 0 before the heads."""

    heads: tuple[str, ...]
    first: tuple[int, ...]
    last: tuple[int, ...]
    mass: int
    scale: float
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
    """MLP ``mlp`` maps the integer codes of ``reads`` (every dim of each, in order) to the code
    ``table[key]`` added into ``out`` (which holds one known code before: 0, or at BOS what BOS
    wrote there); a key missing from the table must never occur -- or, with a ``default``, writes
    that code (a lookup whose units match no key writes 0)."""

    mlp: str
    reads: tuple[str, ...]
    out: str
    table: dict[tuple[int, ...], np.ndarray]
    default: np.ndarray | None = None


@dataclass(frozen=True)
class Modular:
    """An MLP step ``name``: X = ``scale`` * (the code of ``reads``, one dim) + ``shift`` is an
    integer; ``out`` gets ``table[X mod p]`` (p = len(table)) and, with ``minus`` (a dim holding an
    integer D), ``minus_out`` gets ``table[(X - D) mod p]`` (a counter's value before the update
    at t; Lemma 15's decode).  Both hold 0 before."""

    name: str
    reads: str
    scale: float
    shift: int
    table: np.ndarray  # [p, dims of out]
    out: str
    minus: str | None = None
    minus_out: str | None = None


@dataclass(frozen=True)
class Round:
    """An MLP step ``name``: ``dst`` (0 before) gets the integer code nearest to ``src``'s (a copy
    an attention head left, with noise below 1/4), and ``src`` is cleared to 0 (scratch)."""

    name: str
    src: str
    dst: str


@dataclass(frozen=True)
class Steps:
    """MLP ``mlp`` runs ``steps`` one after another (stages fused into one MLP): each reads the
    residual as the earlier steps left it; every subspace a step writes holds 0 before the MLP.
    With ``first`` (a :class:`Compose` or :class:`Races`: a scan's or gridworld's last MLP with a
    label lookup fused after it) that MLP's work runs before the steps, which then read its result
    (they are :class:`Lookup` s)."""

    mlp: str
    steps: tuple[Lookup | Modular | Round, ...]
    first: Compose | Races | None = None


@dataclass(frozen=True)
class Beside:
    """MLP ``mlp`` is several MLPs side by side (a direct product, Lemma 17): each part's hidden
    units read and write only its own subspaces, and each part runs its own obligation."""

    mlp: str
    parts: tuple[Compose | Lookup | Steps | Races | Threshold, ...]


@dataclass(frozen=True)
class Layer:
    """One block: a fetch per head, then the MLP's obligation."""

    fetches: tuple[Fetch | Recent | Average | Match | Latest | AnyFlag, ...]
    mlp: Compose | Lookup | Steps | Beside | Races | Threshold | None


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


def one_hot_readout(sub: str, n: int) -> Readout:
    """The readout of a state one-hot: ``sub`` holds e_q for state q (0..n-1)."""
    eye = np.eye(n, dtype=np.int64)
    return Readout((sub,), {tuple(int(v) for v in eye[q]): q for q in range(n)})


def keys_reached(lookup: Lookup) -> Joint:
    """The claim that ``lookup``'s inputs hold one of its table's keys together (its keys being
    the ones the program reaches, e.g. from its start: a final lookup's)."""
    keys = list(lookup.table)
    return Joint(lookup.reads, np.array(keys, dtype=np.float64).reshape(len(keys), len(lookup.reads)))


@dataclass(frozen=True)
class Obligations:
    """Everything a construction promises about one compiled model (see the module docstring)."""

    construction: str
    embedding: Embedding
    layers: tuple[Layer, ...]
    readout: Readout
    notes: dict[str, Any] = field(default_factory=dict)
    joint: tuple[Joint, ...] = ()
    promise: Promise | None = None
    """Set when the model is vouched for on legal inputs only (a partial automaton): the
    certificate then holds under that promise, and its claims restrict the value sets."""

    def to_json(self) -> dict[str, Any]:
        """A canonical JSON form (arrays as lists, tables as sorted rows)."""
        def mlp(o: Compose | Lookup | Modular | Round | Steps | Beside | Races | Threshold | None) -> Any:
            if o is None:
                return None
            if isinstance(o, (Races, Threshold)):
                return o.to_json()
            if isinstance(o, Beside):
                return {"kind": "beside", "mlp": o.mlp, "parts": [mlp(x) for x in o.parts]}
            if isinstance(o, Round):
                return {"kind": "round", "name": o.name, "src": o.src, "dst": o.dst}
            if isinstance(o, Compose):
                return {"kind": "compose", "mlp": o.mlp, "maps": o.maps, "fetched": o.fetched, "into": o.into}
            if isinstance(o, Steps):
                return {"kind": "steps", "mlp": o.mlp, "steps": [mlp(x) for x in o.steps],
                        **({} if o.first is None else {"first": mlp(o.first)})}
            if isinstance(o, Modular):
                return {"kind": "modular", "name": o.name, "reads": o.reads, "scale": o.scale, "shift": o.shift,
                        "table": np.asarray(o.table).tolist(), "out": o.out, "minus": o.minus,
                        "minus_out": o.minus_out}
            return {"kind": "lookup", "mlp": o.mlp, "reads": list(o.reads), "out": o.out,
                    "table": [[list(k), np.asarray(v).tolist()] for k, v in sorted(o.table.items())],
                    **({} if o.default is None else {"default": np.asarray(o.default).tolist()})}

        def fetch(f: Fetch | Recent | Average | Match | Latest | AnyFlag) -> Any:
            if isinstance(f, (Match, Latest, AnyFlag)):
                return f.to_json()
            if isinstance(f, Recent):
                return {"kind": "recent", "head": f.head, "flag": f.flag, "src": f.src, "dst": f.dst}
            if isinstance(f, Average):
                return {"kind": "average", "heads": list(f.heads), "first": list(f.first), "last": list(f.last),
                        "mass": f.mass, "scale": f.scale, "src": f.src, "dst": f.dst}
            return {"head": f.head, "key": np.asarray(f.key).tolist(), "src": f.src, "dst": f.dst}
        return {
            "construction": self.construction,
            "embedding": {k: np.asarray(v).tolist() for k, v in sorted(self.embedding.codes.items())},
            "layers": [{"fetches": [fetch(f) for f in layer.fetches], "mlp": mlp(layer.mlp)} for layer in self.layers],
            "readout": {"reads": list(self.readout.reads),
                        "table": [[list(k), v] for k, v in sorted(self.readout.table.items())]},
            **({"joint": [{"names": list(j.names), "rows": np.asarray(j.rows).tolist()} for j in self.joint]}
               if self.joint else {}),
            **({"promise": self.promise.to_json()} if self.promise is not None else {}),
        }

    def digest(self) -> str:
        """sha256 of the canonical JSON form."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _sub(name: str, prefix: str) -> str:
    """``name`` (one subspace, or several joined by `` + ``) with ``prefix`` before each part."""
    return " + ".join(prefix + part for part in name.split(" + "))


def prefixed_mlp(o: Any, prefix: str) -> Any:
    """An MLP obligation (or one of its steps) with ``prefix`` before every subspace and MLP name."""
    def sub(name: str) -> str:
        return _sub(name, prefix)

    if isinstance(o, Steps):
        return Steps(prefix + o.mlp, tuple(prefixed_mlp(x, prefix) for x in o.steps),
                     o.first and prefixed_mlp(o.first, prefix))
    if isinstance(o, Lookup):
        return replace(o, mlp=prefix + o.mlp, reads=tuple(sub(r) for r in o.reads), out=sub(o.out))
    if isinstance(o, Modular):
        return replace(o, name=prefix + o.name, reads=sub(o.reads), out=sub(o.out),
                       minus=o.minus and sub(o.minus), minus_out=o.minus_out and sub(o.minus_out))
    if isinstance(o, Round):
        return Round(prefix + o.name, sub(o.src), sub(o.dst))
    if isinstance(o, Compose):
        return Compose(prefix + o.mlp, sub(o.maps), sub(o.fetched), sub(o.into))
    if isinstance(o, Beside):
        return Beside(prefix + o.mlp, tuple(prefixed_mlp(x, prefix) for x in o.parts))
    if isinstance(o, Races):
        return Races(prefix + o.mlp, tuple(Race(sub(r.first), sub(r.second), tuple(sub(n) for n in r.level),
                                                r.threshold, sub(r.out)) for r in o.races))
    if isinstance(o, Threshold):
        return Threshold(prefix + o.mlp, sub(o.src), sub(o.dst))
    return o


def prefixed_head(f: Any, prefix: str) -> Any:
    """A head obligation with ``prefix`` before its head name and every subspace name."""
    def sub(name: str) -> str:
        return _sub(name, prefix)

    if isinstance(f, Match):
        return replace(f, head=prefix + f.head, query=sub(f.query), key=sub(f.key), src=sub(f.src), dst=sub(f.dst))
    if isinstance(f, Latest):
        return replace(f, head=prefix + f.head, keys=sub(f.keys), src=tuple(sub(x) for x in f.src), dst=sub(f.dst))
    if isinstance(f, AnyFlag):
        return replace(f, head=prefix + f.head, flags=sub(f.flags), dst=sub(f.dst))
    if isinstance(f, Average):
        return replace(f, heads=tuple(prefix + h for h in f.heads), src=sub(f.src), dst=sub(f.dst))
    if isinstance(f, Recent):
        return Recent(prefix + f.head, sub(f.flag), sub(f.src), sub(f.dst))
    return replace(f, head=prefix + f.head, src=sub(f.src), dst=sub(f.dst))


def prefixed(ob: Obligations, prefix: str) -> Obligations:
    """``ob`` with ``prefix`` before every subspace, head and MLP name (a program moved into a
    workspace that prefixes its names: a product's factor)."""
    def joint(j: Joint) -> Joint:
        return Joint(tuple(_sub(n, prefix) for n in j.names), j.rows)

    return Obligations(
        ob.construction, Embedding({_sub(k, prefix): v for k, v in ob.embedding.codes.items()}),
        tuple(Layer(tuple(prefixed_head(f, prefix) for f in layer.fetches), prefixed_mlp(layer.mlp, prefix))
              for layer in ob.layers),
        Readout(tuple(_sub(r, prefix) for r in ob.readout.reads), dict(ob.readout.table)), dict(ob.notes),
        tuple(joint(j) for j in ob.joint),
        None if ob.promise is None else replace(ob.promise, claims=tuple(joint(j) for j in ob.promise.claims)))


class Undeclared(Exception):
    """A construction cannot state obligations for this model (yet): the reason says which part."""


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


@dataclass(frozen=True)
class Match:
    """Head ``head`` must attend, from every query position t, to the most recent position s in
    1..t whose ``key`` code is ``codes[match[i]]`` when t's ``query`` code is ``codes[i]`` -- or to
    BOS when there is none -- and copy ``src`` there (a tracked subspace, or a positional one such
    as the position index itself) into ``dst`` (which holds 0 before the head): Theorem 12's
    nearest value (the last visit to a level).  Which key that is depends on the input, so the
    checker bounds the pattern for every query code and every position the key can be."""

    head: str
    query: str
    key: str
    codes: np.ndarray  # [n, dims]: every code query and key may hold (after BOS)
    match: np.ndarray  # [n] int: the key code each query code looks for
    src: str
    dst: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "match", "head": self.head, "query": self.query, "key": self.key,
                "codes": np.asarray(self.codes).tolist(), "match": np.asarray(self.match).tolist(),
                "src": self.src, "dst": self.dst}


@dataclass(frozen=True)
class Race:
    """One term of a :class:`Races` MLP: 1 when the recency ``first`` is larger than ``second``
    (each 0 for "never", else a position); when both are 0, 1 exactly when the sum of the integer
    codes of ``level`` is at least ``threshold``; else 0.  The term adds into ``out``."""

    first: str
    second: str
    level: tuple[str, ...]
    threshold: int
    out: str


@dataclass(frozen=True)
class Races:
    """MLP ``mlp`` writes into each ``out`` (0 before) the sum of its :class:`Race` terms: which of
    two last visits is more recent, a count of comparisons (Theorem 12's boundary count,
    Algorithm 1 / Lemma 22 as a sum).  The recencies range over every position, so the checker
    proves the terms on cells of the order of each pair (which is larger, or both 0), not per
    value."""

    mlp: str
    races: tuple[Race, ...]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "races", "mlp": self.mlp,
                "races": [{"first": r.first, "second": r.second, "level": list(r.level), "threshold": r.threshold,
                           "out": r.out} for r in self.races]}


@dataclass(frozen=True)
class Latest:
    """Head ``head`` must attend, from every query position t, to the most recent position
    1 <= s <= t whose ``keys`` (the input-dependent dims its key reads besides fixed ones) hold one
    of the codes ``match`` -- BOS when there is none -- and copy the sum of the ``src`` subspaces
    there into ``dst`` (0 before).  :class:`Recent` with a flag that is a set of codes: a bounded
    stack's level head takes the last push that raised the depth to its level (match: level
    bit 1 and push bit 1).  Which key wins depends on the input, so the checker bounds the
    pattern for every position the key can be (``verify/certify/latest.py``)."""

    head: str
    keys: str
    match: tuple[tuple[int, ...], ...]
    src: tuple[str, ...]
    dst: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "latest", "head": self.head, "keys": self.keys, "match": [list(c) for c in sorted(self.match)],
                "src": list(self.src), "dst": self.dst}


@dataclass(frozen=True)
class AnyFlag:
    """Head ``head`` scores every position s <= t (BOS included) by its ``flags`` (one dim, or
    several summed: a non-negative integer code) and copies that sum into ``dst`` (0 before):
    ``dst`` is then exactly 0 at t when no s <= t has a nonzero flag, and at least a bound the
    checker computes when one has ("some error so far", the bounded stack's layer 3).  Not a
    code: only a :class:`Threshold` in the same layer may read it."""

    head: str
    flags: str
    dst: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "any-flag", "head": self.head, "flags": self.flags, "dst": self.dst}


@dataclass(frozen=True)
class Threshold:
    """MLP ``mlp`` reads what an :class:`AnyFlag` head left in ``src`` and writes into ``dst``
    (0 before) exactly the bit "some flag so far": 0 where ``src`` is 0, 1 where it is at least
    the head's bound."""

    mlp: str
    src: str
    dst: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "threshold", "mlp": self.mlp, "src": self.src, "dst": self.dst}


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
        return {"kind": self.kind, "text": self.text,
                "claims": [{"names": list(j.names), "rows": np.asarray(j.rows).tolist()} for j in self.claims]}
