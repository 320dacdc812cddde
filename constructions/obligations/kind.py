"""What every obligation kind shares: its JSON form, its renaming and the names it reads and
writes, computed from a few class-level declarations of which field plays which role.

A kind is a frozen dataclass (a :class:`Kind`) with a ``kind`` string, registered where it is
defined (:func:`registered`), so that :func:`kind_from_json` reads back every kind from one
table; its fields are plain JSON (names, numbers) unless ``CODECS`` says how to store one.  The
roles -- ``LABELS`` (the head, heads or MLP step a kind names: a workspace prefix goes before
them), ``READS`` and ``WRITES`` (the subspaces it reads and writes), ``NAMES`` (other subspace
names), ``INNER`` (nested parts) -- give :meth:`Part.renamed`, :meth:`Part.names_read` and
:meth:`Part.names_written` for every kind at once.  Adding a kind is one class here and one rule
per checker (``verify/certify/``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable, ClassVar, NamedTuple, TypeVar

import numpy as np

Sub = Callable[[str], str]
"""A renaming of subspace names (a workspace prefix before each part of ``a + b``)."""


class Codec(NamedTuple):
    """How one field is stored in JSON (``encode``) and read back (``decode``)."""

    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


TUPLE = Codec(list, tuple)
"""A tuple of names or numbers, as a list."""
ARRAY = Codec(lambda v: np.asarray(v).tolist(), np.asarray)
"""An array, as nested lists."""
TABLE = Codec(lambda t: [[list(k), np.asarray(v).tolist()] for k, v in sorted(t.items())],
              lambda rows: {tuple(k): np.asarray(v) for k, v in rows})
"""A table from integer keys to codes, as rows sorted by key."""
CODE_SET = Codec(lambda s: [list(c) for c in sorted(s)], lambda rows: tuple(tuple(c) for c in rows))
"""A set of integer codes, as sorted rows."""


def _flat(value: Any) -> tuple[Any, ...]:
    """A field's value as a tuple: nothing for None, one for a single value."""
    if value is None:
        return ()
    return tuple(value) if isinstance(value, tuple) else (value,)


@dataclass(frozen=True)
class Part:
    """A piece of an obligation (a kind, or a term inside one): see the module docstring for the
    roles its fields declare."""

    LABELS: ClassVar[tuple[str, ...]] = ()
    """Fields naming the head(s) or MLP (step) the part is about: renamed with the prefix."""
    READS: ClassVar[tuple[str, ...]] = ()
    """Fields naming the subspaces the part reads, in order (a name, a tuple of names or None)."""
    WRITES: ClassVar[tuple[str, ...]] = ()
    """Fields naming the subspaces the part writes (a scratch it clears included)."""
    NAMES: ClassVar[tuple[str, ...]] = ()
    """Other fields naming subspaces (renamed, neither read nor written on their own)."""
    INNER: ClassVar[tuple[str, ...]] = ()
    """Fields holding nested parts (one, a tuple of them, or None): theirs are this part's reads and writes."""
    CODECS: ClassVar[dict[str, Codec]] = {}
    """How the fields that are not plain JSON are stored."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    """Fields left out of the JSON form when None."""

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON form (arrays as lists, tables as sorted rows)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name in self.OPTIONAL:
                continue
            codec = self.CODECS.get(f.name)
            out[f.name] = value if value is None or codec is None else codec.encode(value)
        return out

    @classmethod
    def from_json(cls: type[P], d: dict[str, Any]) -> P:
        """The part whose JSON form is ``d`` (:meth:`to_json`; ValueError for a key it does not have)."""
        extra = set(d) - {f.name for f in fields(cls)} - {"kind"}
        if extra:
            raise ValueError(f"{cls.__name__} has no field {sorted(extra)[0]!r}")
        values = {}
        for f in fields(cls):
            value = d.get(f.name) if f.name in cls.OPTIONAL else d[f.name]
            codec = cls.CODECS.get(f.name)
            values[f.name] = value if value is None or codec is None else codec.decode(value)
        return cls(**values)

    def renamed(self, sub: Sub, prefix: str) -> Any:
        """This part with ``sub`` applied to every subspace name and ``prefix`` before every head
        and MLP name (a program moved into a workspace that prefixes its names)."""
        def each(value: Any, f: Callable[[Any], Any]) -> Any:
            return None if value is None else tuple(map(f, value)) if isinstance(value, tuple) else f(value)
        names = dict.fromkeys(self.READS + self.WRITES + self.NAMES)
        return replace(self, **{n: each(getattr(self, n), lambda x: prefix + x) for n in self.LABELS},
                       **{n: each(getattr(self, n), sub) for n in names},
                       **{n: each(getattr(self, n), lambda x: x.renamed(sub, prefix)) for n in self.INNER})

    def labels(self) -> tuple[str, ...]:
        """The head(s) or MLP (step) this part names."""
        return tuple(x for n in self.LABELS for x in _flat(getattr(self, n)))

    def names_read(self) -> tuple[str, ...]:
        """The subspace names this part reads, in order (nested parts' after its own)."""
        inner = (x for n in self.INNER for p in _flat(getattr(self, n)) for x in p.names_read())
        return (*(x for n in self.READS for x in _flat(getattr(self, n))), *inner)

    def names_written(self) -> tuple[str, ...]:
        """The subspace names this part writes, each once, in order (nested parts' after its own)."""
        inner = (x for n in self.INNER for p in _flat(getattr(self, n)) for x in p.names_written())
        return tuple(dict.fromkeys((*(x for n in self.WRITES for x in _flat(getattr(self, n))), *inner)))


P = TypeVar("P", bound=Part)


@dataclass(frozen=True)
class Kind(Part):
    """An obligation kind: a head's, an MLP's or an MLP step's; its JSON form carries ``kind``."""

    kind: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, **super().to_json()}

    def leaves(self) -> tuple[Kind, ...]:
        """The obligations this one runs, flattened: itself, or a container's parts."""
        return (self,)


@dataclass(frozen=True)
class Container(Kind):
    """A kind that runs other MLP obligations (its ``INNER`` fields): steps, or parts side by side."""

    def leaves(self) -> tuple[Kind, ...]:
        return tuple(x for n in self.INNER for p in _flat(getattr(self, n)) for x in p.leaves())


KINDS: dict[str, type[Kind]] = {}
"""Every obligation kind by its ``kind`` string (filled by :func:`registered`)."""

K = TypeVar("K", bound=type[Kind])


def registered(cls: K) -> K:
    """Register a kind where it is defined (its ``kind`` string must be new)."""
    if cls.kind in KINDS:
        raise ValueError(f"two obligation kinds are named {cls.kind!r}")
    KINDS[cls.kind] = cls
    return cls


def kind_from_json(d: dict[str, Any]) -> Kind:
    """The obligation whose JSON form is ``d``, of the kind it names (ValueError for an unknown one)."""
    cls = KINDS.get(d.get("kind", ""))
    if cls is None:
        raise ValueError(f"unknown obligation kind {d.get('kind')!r}")
    return cls.from_json(d)


KIND = Codec(lambda o: o.to_json(), kind_from_json)
"""One nested obligation."""
KIND_TUPLE = Codec(lambda xs: [x.to_json() for x in xs], lambda ds: tuple(kind_from_json(d) for d in ds))
"""A tuple of nested obligations."""
