"""Programs: what a construction emits before assembly.

A :class:`Program` is a list of :class:`Block` s over a :class:`Workspace`.  A
block has attention heads and at most one residual MLP.  Weights are float64 numpy
arrays; the assembler casts them once, which keeps builds deterministic.

Heads and MLPs are *local* (as in Tracr's ``craft``): they never see ``d_model``.
Each declares, by workspace subspace name, what it reads and writes (``reads``,
``writes``), and its matrices have one row (or column) per dim of those subspaces,
in declaration order:

* a :class:`Head`'s ``W_Q``/``W_K``/``W_V`` have one row per dim of its query/key/value
  reads, its ``W_O`` one column per dim of its writes;
* an :class:`MLP`'s first weight has one row per dim of its reads, its last weight
  and bias one column (entry) per dim of its writes; hidden layers are its own.

``embed(ws)`` places them into the residual width.  The assembler calls it once per
head and MLP; :func:`beside` and :func:`fuse` (combining MLPs) and the layout use it
too.  ``notes`` record the derived constants (temperatures, slopes, gaps, tolerances)
so they can be reported as margins.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, overload

import numpy as np

from . import obligations as ob
from .workspace import Subspace, Workspace


def _rows(ws: Workspace, names: tuple[str, ...], local: np.ndarray, what: str) -> list[int]:
    """Residual dims of ``names`` (declaration order), checked against ``local``'s row count."""
    dims = ws.span(names)
    if len(dims) != local.shape[0]:
        raise ValueError(f"{what}: {local.shape[0]} local rows, but {names} have {len(dims)} dims")
    return dims


def _place_rows(d_model: int, dims: list[int], local: np.ndarray) -> np.ndarray:
    """``local`` [len(dims), k] as a [d_model, k] matrix (its rows at ``dims``, zeros elsewhere)."""
    out = np.zeros((d_model, local.shape[1]))
    out[dims] = local
    return out


@dataclass
class Head:
    """One causal softmax attention head; scores are ``(x W_Q)(x W_K)^T`` (no 1/sqrt(d) scale:
    the temperature lives in ``W_Q``).  Matrices are local (see the module docstring)."""

    name: str
    W_Q: np.ndarray  # [dims of reads["query"], d_qk]
    W_K: np.ndarray  # [dims of reads["key"], d_qk]
    W_V: np.ndarray  # [dims of reads["value"], d_v]
    W_O: np.ndarray  # [d_v, dims of writes]
    notes: dict[str, Any] = field(default_factory=dict)
    reads: dict[str, tuple[str, ...]] = field(default_factory=dict)  # {"query": .., "key": .., "value": ..}
    writes: tuple[str, ...] = ()
    obligation: Any = None
    """What the head must do, as an obligation kind (``Fetch``, ``Recent``, ``Average``, ``Match``,
    ``Latest``, ``AnyFlag``): the gadget that makes the weights states it, once."""

    def embed(self, ws: Workspace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``W_Q, W_K, W_V`` [d_model, .] and ``W_O`` [d_v, d_model] over the residual width."""
        d = ws.d_model
        q, k, v = (_place_rows(d, _rows(ws, tuple(self.reads.get(role, ())), W, f"{self.name} {role}"), W)
                   for role, W in (("query", self.W_Q), ("key", self.W_K), ("value", self.W_V)))
        o = _place_rows(d, _rows(ws, self.writes, self.W_O.T, f"{self.name} writes"), self.W_O.T).T
        return q, k, v, o


def _relu_net(weights: list[np.ndarray], biases: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    h = x
    for w, b in zip(weights[:-1], biases[:-1]):
        h = np.maximum(h @ w + b, 0.0)
    return h @ weights[-1] + biases[-1]


@dataclass
class Dense:
    """An MLP placed in the residual width (what ``embed`` returns):
    ``weights[0]`` is ``W_in`` [d_model, h_1], ``weights[-1]`` is ``W_out`` [h_k, d_model]."""

    weights: list[np.ndarray]
    biases: list[np.ndarray]

    @property
    def hidden_sizes(self) -> list[int]:
        return [w.shape[1] for w in self.weights[:-1]]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The residual update of residual vectors ``x`` [..., d_model] (float64 reference)."""
        return _relu_net(self.weights, self.biases, x)


@dataclass
class MLP:
    """A residual ReLU MLP: ``out = W_k relu(... relu(x W_0 + b_0) ...) + b_k``, local:
    ``weights[0]`` [dims of reads, h_1], ``weights[-1]`` [h_k, dims of writes], ``biases[-1]``
    [dims of writes].  Calling it evaluates on local inputs (the dims of ``reads``, in
    order) and returns the update of the dims of ``writes``; ``embed(ws)(x)`` does the
    same on residual vectors."""

    name: str
    weights: list[np.ndarray]
    biases: list[np.ndarray]
    notes: dict[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    # (subspace, index in it, hidden unit, offset b): the unit of the (one) hidden layer is
    # relu(x + b) = x + b wherever the MLP is used (x + b >= 0 there), so :func:`fuse` reads x from it
    passes: tuple[tuple[str, int, int, float], ...] = ()
    obligation: Any = None
    """What the MLP must compute, as an obligation kind (``Compose``, ``Lookup``, ``Modular``,
    ``Round``, ``Steps``, ``Races``, ``Threshold``): the gadget that makes the weights states it."""

    @property
    def hidden_sizes(self) -> list[int]:
        return [w.shape[1] for w in self.weights[:-1]]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on local inputs ``x`` [..., dims of reads] (float64 reference)."""
        return _relu_net(self.weights, self.biases, x)

    def through(self, ws: Workspace) -> dict[int, tuple[int, float]]:
        """Residual dim -> (hidden unit, offset) of its pass-through units (``passes``); none
        unless the MLP has exactly one hidden layer."""
        if len(self.weights) != 2:
            return {}
        return {ws[name].dims[i]: (unit, offset) for name, i, unit, offset in self.passes}

    def pruned(self) -> MLP:
        """The same function without the hidden units nothing reads (zero outgoing weights: the
        step units of code values no key of a lookup has, the thresholds where a staircase's
        table does not change), layer by layer from the last; every layer keeps one unit.  Only
        for MLPs without pass-through units (their unit indices would move)."""
        if self.passes:
            raise ValueError(f"{self.name}: pruning would move its pass-through units")
        W, b = [w.copy() for w in self.weights], [x.copy() for x in self.biases]
        for i in range(len(W) - 2, -1, -1):
            keep = np.any(W[i + 1] != 0, axis=1)
            keep[0] |= not keep.any()
            W[i], b[i], W[i + 1] = W[i][:, keep], b[i][keep], W[i + 1][keep]
        return replace(self, weights=W, biases=b)

    def embed(self, ws: Workspace) -> Dense:
        """The same MLP over the residual width."""
        d = ws.d_model
        if len(self.weights) < 2:
            raise ValueError(f"{self.name}: an MLP needs a hidden layer")
        rows = _rows(ws, self.reads, self.weights[0], f"{self.name} reads")
        cols = _rows(ws, self.writes, self.weights[-1].T, f"{self.name} writes")
        W_in = _place_rows(d, rows, self.weights[0])
        W_out = _place_rows(d, cols, self.weights[-1].T).T
        b_out = np.zeros(d)
        b_out[cols] = self.biases[-1]
        return Dense([W_in, *self.weights[1:-1], W_out], [*self.biases[:-1], b_out])


@dataclass
class Fused:
    """``first`` then ``second`` as one MLP (see :func:`fuse`); evaluate it as ``embed(ws)(x)``.

    Unlike a gadget it keeps its parts and is formed in the residual width by ``embed``:
    its carry units ``relu(-x_d)`` weigh -1 on residual dim d and -0.0 (a negated one-hot)
    on every other dim, and the checkpoints hold exactly those bits, which a local
    fused matrix (zero-filled when embedded) would lose."""

    name: str
    first: MLP | Fused | Beside
    second: MLP
    notes: dict[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    fresh: tuple[str, ...] = ()  # what ``second`` reads that is 0 before the MLP: no carry (see fuse)
    carry_outputs: bool = False  # carry first's result as its output's +/- pairs even when not narrower (see fuse)

    @property
    def obligation(self) -> Any:
        """``first``'s obligation, then ``second``'s, as one ``Steps`` (None unless both declare one)."""
        return fused_obligation(self.name, self.first.obligation, self.second.obligation)

    def embed(self, ws: Workspace) -> Dense:
        fresh = set(ws.span(self.fresh))
        through = self.first.through(ws) if isinstance(self.first, MLP) else {}
        return _fuse_dense(self.first.embed(ws), self.second.embed(ws),
                           [d for d in ws.span(self.second.reads) if d not in fresh], ws.span(self.first.writes),
                           through, self.carry_outputs)


@dataclass
class Beside:
    """MLPs over disjoint residual dims as one (a direct product, Lemma 17), in the residual
    width: each part embedded (:meth:`embed`), the shallower padded to the deepest with
    identity layers (a hidden layer is already >= 0, so relu(h) = h carries it exactly),
    hidden layers side by side, outputs summed.  Unlike :func:`beside` the parts may be
    :class:`Fused` and differ in depth; ``constructions/product.py`` runs factors this way."""

    name: str
    parts: list[MLP | Fused | Beside]
    notes: dict[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    @property
    def obligation(self) -> Any:
        """The parts' obligations side by side (None unless every part declares one)."""
        return beside_obligation(self.name, [p.obligation for p in self.parts])

    def embed(self, ws: Workspace) -> Dense:
        dense = [p.embed(ws) for p in self.parts]
        depth = max(len(d.weights) for d in dense)
        padded = []
        for d in dense:
            h = d.weights[-1].shape[0]
            extra = depth - len(d.weights)
            padded.append(([*d.weights[:-1], *[np.eye(h)] * extra, d.weights[-1]],
                           [*d.biases[:-1], *[np.zeros(h)] * extra, d.biases[-1]]))
        weights = [np.concatenate([w[0] for w, _ in padded], axis=1)]
        biases = [np.concatenate([b[0] for _, b in padded])]
        for i in range(1, depth - 1):
            weights.append(_block_diagonal([w[i] for w, _ in padded]))
            biases.append(np.concatenate([b[i] for _, b in padded]))
        weights.append(np.concatenate([w[-1] for w, _ in padded], axis=0))
        biases.append(np.sum([b[-1] for _, b in padded], axis=0))
        return Dense(weights, biases)


def _block_diagonal(mats: list[np.ndarray]) -> np.ndarray:
    out = np.zeros((sum(m.shape[0] for m in mats), sum(m.shape[1] for m in mats)))
    r = c = 0
    for m in mats:
        out[r : r + m.shape[0], c : c + m.shape[1]] = m
        r, c = r + m.shape[0], c + m.shape[1]
    return out


@overload
def renamed(part: Head, prefix: str) -> Head: ...


@overload
def renamed(part: MLP, prefix: str) -> MLP: ...


@overload
def renamed(part: Fused, prefix: str) -> Fused: ...


@overload
def renamed(part: Beside, prefix: str) -> Beside: ...


def renamed(part: Head | MLP | Fused | Beside, prefix: str) -> Head | MLP | Fused | Beside:
    """``part`` with ``prefix`` before its name and every subspace name it reads and writes
    (a program's parts moved into a workspace that prefixes its names, see
    :func:`constructions.workspace.beside`); the matrices are shared, not copied.  The part
    keeps its kind (a head stays a head, a fused MLP a fused MLP)."""
    def names(xs: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(prefix + x for x in xs)

    def sub(name: str) -> str:  # an obligation's subspace name (several joined by " + ")
        return " + ".join(prefix + x for x in name.split(" + "))

    if isinstance(part, Head):
        return replace(part, name=prefix + part.name, writes=names(part.writes),
                       reads={role: names(tuple(xs)) for role, xs in part.reads.items()},
                       obligation=part.obligation and part.obligation.renamed(sub, prefix))
    part = replace(part, name=prefix + part.name, reads=names(part.reads), writes=names(part.writes))
    if isinstance(part, MLP):
        part = replace(part, obligation=part.obligation and part.obligation.renamed(sub, prefix))
    if isinstance(part, Fused):
        return replace(part, first=renamed(part.first, prefix), second=renamed(part.second, prefix),
                       fresh=names(part.fresh))
    if isinstance(part, Beside):
        return replace(part, parts=[renamed(p, prefix) for p in part.parts])
    return replace(part, passes=tuple((prefix + n, i, u, b) for n, i, u, b in part.passes))


@dataclass
class Block:
    """Attention (heads side by side, outputs summed into the residual), then an MLP."""

    heads: list[Head]
    mlp: MLP | Fused | Beside | None = None

    def notes(self) -> dict[str, Any]:
        """The block's entry of ``meta["layers"]``: its heads' notes and its MLP's (None without one)."""
        return {"heads": [h.notes for h in self.heads], "mlp": None if self.mlp is None else self.mlp.notes}

    def layer(self) -> ob.Layer:
        """The block's obligations, as its gadgets declared them: one per head (several heads that
        declare one obligation together, a blocked prefix mean, give it once) and the MLP's
        (``Undeclared`` naming a head or MLP that declares none, with the reason its notes give as
        ``undeclared``); the MLP's obligation carries the block MLP's name (one part of
        :func:`beside` keeps its own otherwise)."""
        parts = [*self.heads, *([] if self.mlp is None else [self.mlp])]
        missing = [p for p in parts if p.obligation is None]
        if missing:
            why = "; ".join(f"{p.name}: {p.notes['undeclared']}" for p in missing if "undeclared" in p.notes)
            said = f"{', '.join(p.name for p in missing)} declare no obligation"
            raise ob.Undeclared(f"{said} ({why})" if why else said)
        fetches = {_head_key(h.obligation): h.obligation for h in self.heads}
        mlp = None if self.mlp is None else replace(as_layer_mlp(self.mlp.obligation), mlp=self.mlp.name)
        return ob.Layer(tuple(fetches.values()), mlp)


def _head_key(o: Any) -> tuple[str, tuple[str, ...]]:
    """Which heads a head obligation speaks for (an ``Average`` for several at once)."""
    return type(o).__name__, tuple(o.heads) if isinstance(o, ob.Average) else (o.head,)


def as_layer_mlp(o: Any) -> Any:
    """An MLP obligation as a layer holds it: a lone decode or clean-up step as ``Steps`` of one."""
    return ob.Steps(o.name, (o,)) if isinstance(o, (ob.Modular, ob.Round)) else o


def _steps(o: Any) -> tuple[Any, ...]:
    if isinstance(o, ob.Steps) and o.first is None:
        return o.steps
    if isinstance(o, (ob.Lookup, ob.Modular, ob.Round)):
        return (o,)
    if isinstance(o, ob.Beside):  # parts over disjoint subspaces (Lemma 17): one after another is the same
        return tuple(s for part in o.parts for s in _steps(part))
    raise ob.Undeclared(f"a fused MLP's later part runs {type(o).__name__}, not steps")


def fused_obligation(name: str, first: Any, second: Any) -> Any:
    """What :func:`fuse` (``first`` then ``second`` in one MLP) computes: ``first``'s steps then
    ``second``'s; a composition or races first stays ``Steps.first`` (None unless both declare)."""
    if first is None or second is None:
        return None
    if isinstance(first, (ob.Compose, ob.Races)):
        return ob.Steps(name, _steps(second), first)
    if isinstance(first, ob.Steps):
        return ob.Steps(name, first.steps + _steps(second), first.first)
    return ob.Steps(name, _steps(first) + _steps(second))


def beside_obligation(name: str, parts: list[Any]) -> Any:
    """What MLPs side by side compute (Lemma 17): each part's obligation, as ``Beside`` (one part:
    its own; a part itself side by side gives its parts; None unless every part declares one)."""
    if any(o is None for o in parts):
        return None
    if len(parts) == 1:
        return as_layer_mlp(parts[0])
    flat = [p for o in parts for p in (o.parts if isinstance(o, ob.Beside) else (as_layer_mlp(o),))]
    return ob.Beside(name, tuple(flat))


def obligation_name(sub: Subspace) -> str:
    """How an obligation names ``sub``: its allocated subspaces joined by `` + ``."""
    return " + ".join(sub.names)


@dataclass(frozen=True)
class Declaration:
    """What a program declares beside its blocks' obligations (which its gadgets state): the
    subspaces whose embedded codes the program tracks (their codes are the rows of ``W_E``, so
    they are stated once, where the embedding writes them), the readout, and claims."""

    construction: str
    tracked: tuple[str, ...]
    readout: ob.Readout
    joint: tuple[ob.Joint, ...] = ()
    promise: ob.Promise | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class StateCodes:
    """A state readout over exact 0/1 features, for readouts that are not a nearest integer point:
    at every position, unless the ``override`` dim is 1 (then the state is ``override_state``),
    the residual's ``dims`` hold exactly ``codes[q]`` for the current state q (distinct rows)."""

    dims: list[int]
    codes: np.ndarray  # [n_states, len(dims)], integers
    override: int | None = None
    override_state: int | None = None


@dataclass
class Program:
    """Everything the assembler needs to build a :class:`CompiledTransformer`."""

    workspace: Workspace
    W_E: np.ndarray  # [n_symbols + 1, d_model]; the last row is BOS
    W_pos: np.ndarray  # [max_len + 1, d_model]; row 0 is BOS's position
    blocks: list[Block]
    W_U: np.ndarray  # [d_model, n_out]
    b_U: np.ndarray  # [n_out]
    notes: dict[str, Any] = field(default_factory=dict)
    state_codes: StateCodes | None = None  # the readout's exact features, where it has them (labels.label_lookup)
    declaration: Declaration | None = None  # with the gadgets' obligations: the declared program

    def obligations(self) -> ob.Obligations:
        """The declared program (constructions/obligations.py), read off the program itself: the
        tracked subspaces' codes from ``W_E``, each block's obligations from its gadgets, the
        readout and claims from :attr:`declaration` (``Undeclared`` where something declares none)."""
        layers = tuple(b.layer() for b in self.blocks)  # first: an undeclared gadget is named
        d = self.declaration
        if d is None:
            raise ob.Undeclared("the program declares no embedding and readout")
        ws = self.workspace
        codes = {name: self.W_E[:, tracked_dims(ws, name)] for name in d.tracked}
        return ob.Obligations(d.construction, ob.Embedding(codes), layers, d.readout, dict(d.notes), d.joint,
                              d.promise)


def tracked_dims(ws: Workspace, name: str) -> list[int]:
    """The residual dims of a tracked name: a subspace, or its i-th dim (``name[i]``, as an
    obligation names one dim of a subspace, e.g. the one a head writes)."""
    base, _, index = name.partition("[")
    if name in ws.subspaces or not index.endswith("]"):
        return list(ws[name].dims)
    return [ws[base].dims[int(index[:-1])]]


def union(*groups: tuple[str, ...]) -> tuple[str, ...]:
    """Subspace names of several declarations, each once, in first-seen order."""
    return tuple(dict.fromkeys(n for g in groups for n in g))


def fuse(first: MLP | Fused | Beside, second: MLP, name: str | None = None, fresh: tuple[str, ...] = (),
         carry_outputs: bool = False) -> Fused:
    """One MLP computing ``x + first(x) + second(x + first(x))``'s update.

    The residual dims that ``second`` reads are carried through ``first``'s hidden
    layers as ``relu(x) - relu(-x)`` pairs (or read from ``first``'s pass-through units,
    ``MLP.passes``, where it declares them: no carry), and ``first``'s result is carried through
    ``second``'s hidden layers (its last hidden layer, or its output on the dims it
    writes as +/- pairs when that is narrower), so the fused MLP has
    ``len(first.hidden) + len(second.hidden)`` hidden layers.  Used to place a readout
    inside the last block's MLP without an extra layer.  ``fresh``: subspaces ``second``
    reads that the caller knows are 0 in the residual wherever the MLP runs (only ``first``
    writes them), so ``second`` reads them from ``first``'s output alone, with no carry.
    ``carry_outputs``: carry ``first``'s result as its output's pairs even when its last hidden
    layer is as narrow (a saturating function's ramps grow with the input, its output stays
    bounded, which a certificate's interval bounds need).
    """
    notes = {**first.notes, "fused": [first.name, second.name], second.name: second.notes}
    return Fused(name or f"{first.name}+{second.name}", first, second, notes,
                 reads=union(first.reads, tuple(n for n in second.reads if n not in fresh)),
                 writes=union(first.writes, second.writes), fresh=tuple(fresh), carry_outputs=carry_outputs)


def _fuse_dense(first: Dense, second: Dense, second_reads: list[int], first_writes: list[int],
                through: dict[int, tuple[int, float]] | None = None, carry_outputs: bool = False) -> Dense:
    """:func:`fuse` over the residual width; ``second_reads``/``first_writes``: the declared dims;
    ``through``: dim -> (unit, offset) of ``first``'s pass-through units (:meth:`MLP.through`)."""
    through = {d: v for d, v in (through or {}).items() if d in set(second_reads)}
    d_model = first.weights[0].shape[0]
    read = np.array(sorted(d for d in second_reads if d not in through), dtype=np.int64)
    P = np.zeros((d_model, len(read)))
    P[read, np.arange(len(read))] = 1.0
    weights: list[np.ndarray] = []
    biases: list[np.ndarray] = []
    # first's hidden layers, with [+x_S, -x_S] carried alongside
    for i, (w, b) in enumerate(zip(first.weights[:-1], first.biases[:-1])):
        n_prev = w.shape[0] if i == 0 else weights[-1].shape[1] - 2 * len(read)
        h = w.shape[1]
        if i == 0:
            W = np.concatenate([w, P, -P], axis=1)
        else:
            W = np.zeros((n_prev + 2 * len(read), h + 2 * len(read)))
            W[:n_prev, :h] = w
            W[n_prev:, h:] = np.eye(2 * len(read))
        weights.append(W)
        biases.append(np.concatenate([b, np.zeros(2 * len(read))]))
    h_last = first.weights[-1].shape[0]
    O1, c1 = first.weights[-1], first.biases[-1]
    # carry first's result through second's hidden layers: either its last hidden layer
    # (non-negative, identity) or, when narrower, its output on the dims it writes as +/- pairs
    written = np.array(sorted(first_writes), dtype=np.int64)
    if 2 * len(written) < h_last or carry_outputs:
        E = np.zeros((d_model, len(written)))
        E[written, np.arange(len(written))] = 1.0
        C_in, C_b = np.concatenate([O1 @ E, -O1 @ E], axis=1), np.concatenate([c1 @ E, -c1 @ E])
        C_out, out_bias = np.concatenate([E.T, -E.T], axis=0), np.zeros(d_model)
    else:
        C_in, C_b, C_out, out_bias = np.eye(h_last), np.zeros(h_last), O1, c1
    k = C_in.shape[1]
    for j, (w, b) in enumerate(zip(second.weights[:-1], second.biases[:-1])):
        h = w.shape[1]
        if j == 0:
            W = np.zeros((h_last + 2 * len(read), h + k))
            W[:h_last, :h] = O1 @ w  # second reads first's output ...
            W[h_last:h_last + len(read), :h] = w[read]  # ... and x_S = p - m
            W[h_last + len(read):, :h] = -w[read]
            for dim, (unit, offset) in through.items():  # x_dim = unit - offset
                W[unit, :h] += w[dim]
            W[:h_last, h:] = C_in
            B = np.concatenate([b + c1 @ w - sum(offset * w[dim] for dim, (_, offset) in through.items()), C_b])
        else:
            n_prev = weights[-1].shape[1] - k
            W = np.zeros((n_prev + k, h + k))
            W[:n_prev, :h] = w
            W[n_prev:, h:] = np.eye(k)
            B = np.concatenate([b, np.zeros(k)])
        weights.append(W)
        biases.append(B)
    n_prev = weights[-1].shape[1] - k
    weights.append(np.concatenate([second.weights[-1][:n_prev], C_out], axis=0))
    biases.append(second.biases[-1] + out_bias)
    return Dense(weights, biases)


def beside(mlps: list[MLP], name: str, ws: Workspace) -> MLP:
    """One MLP running ``mlps`` side by side (a direct product, Lemma 17).

    All must have the same number of hidden layers; hidden layers are concatenated,
    hidden-to-hidden weights are block diagonal, and the outputs add up (so the
    parts should write disjoint residual dims).  The result is local over the union
    of the parts' reads and writes (``ws`` says where each part's dims go in it).
    """
    if len(mlps) == 1:
        m = mlps[0]
        return MLP(name, m.weights, m.biases, m.notes, reads=m.reads, writes=m.writes, obligation=m.obligation)
    depth = {len(m.weights) for m in mlps}
    if len(depth) != 1:
        raise ValueError("MLPs beside each other need the same number of hidden layers")
    reads, writes = union(*(m.reads for m in mlps)), union(*(m.writes for m in mlps))
    at_read = {d: i for i, d in enumerate(ws.span(reads))}
    at_write = {d: i for i, d in enumerate(ws.span(writes))}
    W_in = np.zeros((len(at_read), sum(m.weights[0].shape[1] for m in mlps)))
    c = 0
    for m in mlps:
        W_in[[at_read[d] for d in ws.span(m.reads)], c : c + m.weights[0].shape[1]] = m.weights[0]
        c += m.weights[0].shape[1]
    weights = [W_in]
    biases = [np.concatenate([m.biases[0] for m in mlps])]
    for i in range(1, len(mlps[0].weights) - 1):
        rows = sum(m.weights[i].shape[0] for m in mlps)
        cols = sum(m.weights[i].shape[1] for m in mlps)
        W = np.zeros((rows, cols))
        r = c = 0
        for m in mlps:
            h, w = m.weights[i].shape
            W[r : r + h, c : c + w] = m.weights[i]
            r, c = r + h, c + w
        weights.append(W)
        biases.append(np.concatenate([m.biases[i] for m in mlps]))
    W_out = np.zeros((sum(m.weights[-1].shape[0] for m in mlps), len(at_write)))
    b_out = np.zeros((len(mlps), len(at_write)))
    r = 0
    for j, m in enumerate(mlps):
        cols = [at_write[d] for d in ws.span(m.writes)]
        W_out[r : r + m.weights[-1].shape[0], cols] = m.weights[-1]
        b_out[j, cols] = m.biases[-1]
        r += m.weights[-1].shape[0]
    weights.append(W_out)
    biases.append(np.sum(b_out, axis=0))
    return MLP(name, weights, biases, {"parallel": [m.notes for m in mlps]}, reads=reads, writes=writes,
               obligation=beside_obligation(name, [m.obligation for m in mlps]))
