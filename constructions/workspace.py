"""The residual stream as named subspaces.

Every residual dimension has a label such as ``bos``, ``one``, ``pos:cos3`` or
``scan:map[2]``.  Constructions ask the workspace for subspaces by name and never
index raw integers; the labels travel into the checkpoint so that the verifier
can decode any named subspace at any layer.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Subspace:
    """A named group of residual dimensions (``labels[i]`` lives at ``dims[i]``).

    ``parts`` is empty for a subspace the workspace allocated, and lists the allocated
    subspaces of a :func:`join` (so gadgets can declare what they read and write)."""

    name: str
    labels: tuple[str, ...]
    dims: tuple[int, ...]
    parts: tuple[Subspace, ...] = ()

    @property
    def leaves(self) -> tuple[Subspace, ...]:
        """The allocated subspaces this one is made of (itself when allocated)."""
        return self.parts or (self,)

    @property
    def names(self) -> tuple[str, ...]:
        """Workspace names of :attr:`leaves`, e.g. for a gadget's ``reads``/``writes``."""
        return tuple(p.name for p in self.leaves)

    def __len__(self) -> int:
        return len(self.dims)

    def __getitem__(self, i: int) -> int:
        return self.dims[i]


def join(name: str, parts: list[Subspace]) -> Subspace:
    """Several subspaces viewed as one (e.g. the values of counters that share a head)."""
    leaves = tuple(leaf for p in parts for leaf in p.leaves)
    return Subspace(name, tuple(l for p in parts for l in p.labels), tuple(d for p in parts for d in p.dims), leaves)


def names(*subspaces: Subspace | None) -> tuple[str, ...]:
    """Workspace names of the allocated subspaces behind ``subspaces`` (None skipped), each once."""
    return tuple(dict.fromkeys(n for s in subspaces if s is not None for n in s.names))


class Workspace:
    """Allocates labelled residual dimensions; ``d_model`` is the number allocated."""

    def __init__(self) -> None:
        self.labels: list[str] = []
        self._index: dict[str, int] = {}
        self.subspaces: dict[str, Subspace] = {}

    @property
    def d_model(self) -> int:
        return len(self.labels)

    def add(self, name: str, parts: "int | list[str] | None" = None) -> Subspace:
        """Allocate subspace ``name``: one dim (``parts=None``), ``parts`` dims
        labelled ``name[i]``, or one dim per given part labelled ``name:part``."""
        if name in self.subspaces:
            raise ValueError(f"subspace {name!r} allocated twice")
        if parts is None:
            labels = [name]
        elif isinstance(parts, int):
            labels = [f"{name}[{i}]" for i in range(parts)]
        else:
            labels = [f"{name}:{p}" for p in parts]
        dims = []
        for lab in labels:
            if lab in self._index:
                raise ValueError(f"residual label {lab!r} allocated twice")
            self._index[lab] = len(self.labels)
            dims.append(len(self.labels))
            self.labels.append(lab)
        sub = Subspace(name, tuple(labels), tuple(dims))
        self.subspaces[name] = sub
        return sub

    def __getitem__(self, name: str) -> Subspace:
        return self.subspaces[name]

    def dim(self, label: str) -> int:
        return self._index[label]

    def span(self, names: tuple[str, ...] | list[str]) -> list[int]:
        """Residual dims of the named subspaces, concatenated in the given order (where a
        local head's or MLP's rows or columns go, see constructions/program.py)."""
        return [d for n in names for d in self.subspaces[n].dims]


def workspace_from_meta(labels: list[str], subspaces: dict[str, list[int]]) -> Workspace:
    """Rebuild a checkpoint's workspace from its stored labels and subspace dims."""
    ws = Workspace()
    ws.labels = list(labels)
    ws._index = {lab: i for i, lab in enumerate(labels)}
    ws.subspaces = {name: Subspace(name, tuple(labels[d] for d in dims), tuple(dims))
                    for name, dims in subspaces.items()}
    return ws


def beside(workspaces: list[Workspace], prefixes: list[str]) -> Workspace:
    """One workspace holding each of ``workspaces`` in turn, every subspace name and residual
    label prefixed with its workspace's prefix (``f1.scan:map[0]``): the residual of programs
    run side by side (``constructions/product.py``), dims of workspace i after those before it."""
    ws = Workspace()
    for w, prefix in zip(workspaces, prefixes):
        at = ws.d_model
        ws.labels.extend(prefix + lab for lab in w.labels)
        for name, sub in w.subspaces.items():
            ws.subspaces[prefix + name] = Subspace(prefix + name, tuple(prefix + lab for lab in sub.labels),
                                                   tuple(at + d for d in sub.dims))
    ws._index = {lab: i for i, lab in enumerate(ws.labels)}
    if len(ws._index) != len(ws.labels):
        raise ValueError("beside: prefixes must make the labels distinct")
    return ws
