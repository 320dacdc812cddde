"""Unfold every multi-layer MLP into blocks with one hidden layer each, losslessly.

TransformerLens (and most interpretability tooling) assumes a block is attention then an
MLP with *one* hidden layer; our MLPs have up to four (lookups, fused readouts, the
gridworld's residue code).  :func:`unfold` rewrites a :class:`CompiledTransformer` whose
block ``l`` has an MLP with hidden widths ``h_0 .. h_{k-1}`` into ``k`` blocks:

* stage 0 keeps block ``l``'s attention and computes ``h_0 = ReLU(x W_0 + b_0)``; when
  ``k > 1`` it writes what crosses to stage 1 into scratch residual dimensions (zero before,
  so the residual holds it exactly);
* across each boundary j (from hidden layer j-1 to j) the narrower of two things is carried
  (:func:`carries_activations`): the pre-activation ``z_j = h_{j-1} W_j + b_j`` (width h_j) or
  the activations ``h_{j-1}`` themselves (width h_{j-1}, written by an identity);
* stage j (1 <= j < k) has all-zero attention (its output is exactly 0); its first h_j units
  are the original hidden layer j -- ``ReLU(z_j)`` read from the scratch, or
  ``ReLU(h_{j-1} W_j + b_j)`` computed from the carried activations -- and write what crosses
  the next boundary into the *other* scratch region (or, at the last stage,
  ``h_j W_k + b_k`` into the residual as the original MLP did); its other units clear its own
  region exactly: ``ReLU(-z_j)`` with ``-ReLU(z_j) + ReLU(-z_j) = -z_j``, or ``ReLU(h_{j-1})``
  written as ``-h_{j-1}`` (activations are >= 0), and ``v + (-v) = 0`` in floating point.
  A region's last use is not cleared (:func:`clearing_stages`): nothing reads scratch but the
  next stage, so what it keeps there is never read (every later weight on it is 0) and costs
  no clearing units; nor are the dims of a use that no later use writes again (:func:`cleared`:
  every use writes from the region's first dim).  Carried activations may be cleared by any
  stage from their reader up to the region's next writer (:func:`clearing_places`: the narrowest
  such stage, so the widest stage -- what TransformerLens pads every block to -- grows least); a
  pre-activation by its reader.

* a unit whose activation reaches the output only through identity copies (the padding a
  side-by-side MLP gives a shallower part, :class:`constructions.program.Beside`: a next-layer
  unit reading it alone with weight 1 and bias 0, its only reader) *exits* early
  (:func:`exits`): it writes the output at its own stage, with the last copy's output weights
  (and the output bias on those dims), and neither it nor its copies cross a boundary.  Exact:
  relu(h) = h for h >= 0, so the copies hold its value bit for bit, and an exit is taken only
  where every unit writing its output dims exits at the same stage (the same sum, formed in one
  MLP) and nothing reads those dims before the original MLP's end (the stages between have zero
  attention and read scratch alone).  A product's one-hidden-layer factor beside a staircase
  then costs no scratch dims and no copies.

Blocks with zero or one hidden layer stay one block.  Two scratch regions alternate
(``unfold:a`` for odd stages, ``unfold:b`` for even ones), each as wide as the widest
thing it carries, appended after the model's own residual dimensions; embeddings,
unembedding and every weight reading the residual are zero there.  Every product the new
model forms that the original did not is an exact zero added after the original terms of the
same sum (padded rows come last).  With the same attention path the logits of every compiled model we tried are bitwise
equal (``tests/constructions/test_unfold.py`` checks ``torch.equal`` for every construction).
This is a measurement, not a theorem: torch's CPU matmul picks its kernel by shape (narrow
outputs are summed without fused multiply-add, wide ones with it), so a model with arbitrary
float weights can differ in the last bit; compiled weights make almost every product and sum
exact, and a model whose arithmetic is exact is unfolded bit for bit whatever the kernels.
The cost: ``sum(max(k, 1))`` blocks instead of ``L`` and a wider residual.

Balancing (``constructions/balance.py``; a standard-shape model's unfolding, ``unfold(balanced=...)``):
TransformerLens pads every block's MLP to the widest, so hidden units then move between the
unfolded MLPs where no value changes, which narrows the widest; :func:`unfolded_config` gives the
widths before balancing.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch

from .balance import balance
from .config import BlockShape, ModelConfig
from .model import CompiledTransformer

SCRATCH = ("unfold:a", "unfold:b")
"""The two alternating scratch subspaces: hidden layer j's pre-activation (j >= 1) lives in
``SCRATCH[(j + 1) % 2]`` (``unfold:a`` for odd j, ``unfold:b`` for even j)."""


@dataclass(frozen=True)
class Origin:
    """Where an unfolded block comes from: our block ``layer``, hidden layer ``stage`` of its
    MLP (0 also carries the block's attention), of ``stages`` hidden layers in all (0: no MLP)."""

    layer: int
    stage: int
    stages: int


Widths = list[int] | tuple[int, ...]


def carries_activations(hidden: Widths, crossing: Widths | None = None) -> list[bool]:
    """For each boundary j = 1 .. k-1 of an MLP computing ``hidden[m]`` units at stage m: True when
    stage j-1's activations (``crossing[j-1]`` of them: all but its exits, :func:`exits`; by default
    all ``hidden[j-1]``) cross it, False when hidden layer j's pre-activation does (``hidden[j]``
    wide): the narrower, the pre-activation on a tie."""
    crossing = hidden[:-1] if crossing is None else crossing
    return [crossing[j - 1] < hidden[j] for j in range(1, len(hidden))]


@dataclass(frozen=True)
class Exits:
    """How one MLP of k hidden layers unfolds (:func:`exits`): per stage m, the units of hidden
    layer m it computes (``keep[m]``: all but identity copies) and those of them that exit there
    (``out[m]``: unit -> the hidden unit of layer k-1 whose output weights it writes with)."""

    keep: tuple[tuple[int, ...], ...]
    out: tuple[dict[int, int], ...]

    @property
    def hidden(self) -> tuple[int, ...]:
        """Units computed at each stage."""
        return tuple(len(k) for k in self.keep)

    @property
    def crossing(self) -> tuple[int, ...]:
        """Activations of each stage but the last that may cross to the next (its units less its exits)."""
        return tuple(len(k) - len(o) for k, o in zip(self.keep[:-1], self.out[:-1]))

    @staticmethod
    def none(hidden: tuple[int, ...]) -> Exits:
        return Exits(tuple(tuple(range(h)) for h in hidden), tuple({} for _ in hidden))


def _array(w: Any) -> np.ndarray:
    return w.detach().cpu().numpy() if isinstance(w, torch.Tensor) else np.asarray(w)


def _copies(W: np.ndarray, b: np.ndarray) -> dict[int, int]:
    """The identity copies among the units of a hidden layer with input weights W and biases b:
    unit -> the previous layer's unit it copies (its one nonzero weight, exactly 1, from a unit
    it alone reads; bias 0)."""
    nz = W != 0
    ins, outs = nz.sum(0), nz.sum(1)
    out = {}
    for r in (int(x) for x in np.flatnonzero(ins == 1)):
        u = int(np.argmax(nz[:, r]))
        if W[u, r] == 1.0 and b[r] == 0.0 and outs[u] == 1:
            out[r] = u
    return out


def exits(layers: list[tuple[Any, Any]]) -> Exits:
    """The early exits of an MLP with (weights, biases) ``layers`` (W_in first, W_out last; torch
    or numpy): chains u_m -> u_(m+1) -> .. -> u_(k-1) where each next unit is an identity copy of
    the one before (:func:`_copies`), so u_m's activation reaches the output unchanged.  u_m exits
    at stage m where every output dim its chain writes is written only by chains exiting at m;
    else no chain writing that dim exits (the dims' sums stay whole)."""
    W = [_array(w) for w, _ in layers]
    bias = [_array(b) for _, b in layers]
    k = len(layers) - 1
    hidden = tuple(w.shape[1] for w in W[:-1])
    if k < 2:
        return Exits.none(hidden)
    # layer m: copy -> its source in layer m - 1
    copy_of: list[dict[int, int]] = [{}] + [_copies(W[m], bias[m]) for m in range(1, k)]
    chains: dict[tuple[int, int], int] = {}  # (stage, start unit) -> its last copy in layer k - 1
    for r in copy_of[k - 1]:
        m, u = k - 1, r
        while u in copy_of[m]:
            m, u = m - 1, copy_of[m][u]
        chains[(m, u)] = r
    writes = {c: {int(d) for d in np.flatnonzero(W[k][r])} for c, r in chains.items()}
    ends = set(chains.values())
    late = {int(d) for r in range(hidden[-1]) if r not in ends for d in np.flatnonzero(W[k][r])}
    while True:  # drop chains whose dims another stage writes, until none is left
        stage_of: dict[int, set[int]] = {d: {k - 1} for d in late}
        for (m, _), ds in ((c, writes[c]) for c in chains):
            for d in ds:
                stage_of.setdefault(d, set()).add(m)
        bad = [c for c in chains if any(len(stage_of[d]) > 1 for d in writes[c])]
        if not bad:
            break
        for c in bad:
            late |= writes[c]
            del chains[c]
    dropped: list[set[int]] = [set() for _ in range(k)]
    for (m, _), r in chains.items():
        j = k - 1
        while j > m:
            dropped[j].add(r)
            r, j = copy_of[j][r], j - 1
    keep = tuple(tuple(u for u in range(hidden[m]) if u not in dropped[m]) for m in range(k))
    return Exits(keep, tuple({u: r for (m2, u), r in sorted(chains.items()) if m2 == m} for m in range(k)))


def _carried(hidden: Widths, j: int, crossing: Widths | None = None) -> int:
    """How many scratch dims cross boundary j (1 <= j < len(hidden))."""
    crossing = hidden[:-1] if crossing is None else crossing
    return crossing[j - 1] if carries_activations(hidden, crossing)[j - 1] else hidden[j]


def scratch_needed(hidden: Widths) -> int:
    """The most scratch dims an MLP of these hidden widths crosses a boundary with when unfolded
    (exits not counted): at each boundary the narrower of the activations and the pre-activation."""
    return max((_carried(hidden, j) for j in range(1, len(hidden))), default=0)


Stages = list[Exits]
"""Per block, how its MLP unfolds (:class:`Exits`; no stage without an MLP)."""


def stages(model: CompiledTransformer | ModelConfig, given: Stages | None = None) -> Stages:
    """Each block's :class:`Exits`: ``given``, else read off a model's weights (:func:`exits`), or,
    for a config alone, none (every unit computed, every activation may cross)."""
    if given is not None:
        return given
    if isinstance(model, ModelConfig):
        return [Exits.none(b.mlp_hidden) for b in model.blocks]
    return [exits(_hidden(b)) if b.mlp is not None else Exits.none(()) for b in model.blocks]


def _uses(ex: Stages) -> list[tuple[int, int, int]]:
    """Every (layer, boundary j, dims crossing it) in order."""
    return [(l, j, _carried(e.hidden, j, e.crossing)) for l, e in enumerate(ex) for j in range(1, len(e.hidden))]


def clearing_stages(model: CompiledTransformer | ModelConfig, given: Stages | None = None) -> set[tuple[int, int]]:
    """The (layer, stage) pairs, stage >= 1, whose scratch region (the one the stage reads) is
    cleared after it: those whose region a later stage (of this MLP or a later block's) writes
    again (by the stage :func:`clearing_places` names).  The last use of each region keeps its
    value: no weight after it reads the region.  ``model``: a model or its config."""
    return set(cleared(model, given))


def cleared(model: CompiledTransformer | ModelConfig, given: Stages | None = None) -> dict[tuple[int, int], int]:
    """For each (layer, stage) of :func:`clearing_stages`: how many of the scratch dims it read are
    cleared -- those a later use of the region writes again.  Every use writes from the region's
    first dim, so that is the first min(its carried width, the widest later use's); the dims past
    them are neither written nor read again and keep their values, as a region's last use does."""
    uses = _uses(stages(model, given))
    out = {}
    for k, (l, j, c) in enumerate(uses):
        later = [c2 for _, j2, c2 in uses[k + 1:] if _region(j2) == _region(j)]
        if later:
            out[(l, j)] = min(c, max(later))
    return out


def _writes(hidden: tuple[int, ...], stage: int) -> int | None:
    """The scratch region unfolded stage ``stage`` of an MLP with hidden widths ``hidden`` writes
    (the next boundary's), None at its last stage."""
    return _region(stage + 1) if stage + 1 < len(hidden) else None


def clearing_places(model: CompiledTransformer | ModelConfig,
                    given: Stages | None = None) -> dict[tuple[int, int], tuple[int, int]]:
    """For each (layer, stage) of :func:`clearing_stages`: the unfolded stage (layer, stage) whose
    extra units clear the region it read.  A carried pre-activation is cleared by its reader
    (fused with its units: -ReLU(z) + ReLU(-z) = -z); carried activations (>= 0) by c units
    ReLU(h) written as -h in any stage with an MLP from the reader up to the region's next writer,
    the narrowest so far (pre-activation clearings counted first; the earliest on a tie)."""
    ex = stages(model, given)
    order = [(o.layer, o.stage) for o in origins(model)]
    width = {(l, j): (ex[l].hidden[j] if ex[l].hidden else 0) for l, j in order}
    need = cleared(model, ex)
    todo = sorted(need)
    places: dict[tuple[int, int], tuple[int, int]] = {}
    for l, j in todo:
        e = ex[l]
        if not carries_activations(e.hidden, e.crossing)[j - 1]:
            places[(l, j)] = (l, j)
            width[(l, j)] += need[(l, j)]
    for l, j in todo:
        if (l, j) in places:
            continue
        options = []
        for at in order[order.index((l, j)):]:
            e = ex[at[0]]
            if at != (l, j) and e.hidden and _writes(e.hidden, at[1]) == _region(j):
                break
            if e.hidden:
                options.append(at)
        places[(l, j)] = min(options, key=lambda at: (width[at], order.index(at)))
        width[places[(l, j)]] += need[(l, j)]
    return places


def _stage_widths(model: CompiledTransformer | ModelConfig, given: Stages | None = None) -> dict[tuple[int, int], int]:
    """Units of every unfolded stage (layer, stage) with an MLP: the hidden units it computes, then
    the clearing units :func:`clearing_places` puts there (module docstring)."""
    ex = stages(model, given)
    width = {(o.layer, o.stage): ex[o.layer].hidden[o.stage] for o in origins(model) if ex[o.layer].hidden}
    need = cleared(model, ex)
    for read, at in clearing_places(model, ex).items():
        width[at] += need[read]
    return width


def _foreign(model: CompiledTransformer | ModelConfig,
             given: Stages | None = None) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Per unfolded stage, the (layer, stage) pairs whose activations it clears though it did not
    read them (:func:`clearing_places`), in order."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for read, at in sorted(clearing_places(model, given).items()):
        if at != read:
            out.setdefault(at, []).append(read)
    return out


def _region(stage: int) -> int:
    """Scratch region holding the pre-activation of hidden layer ``stage`` (stage >= 1)."""
    return (stage + 1) % 2


def _hidden(block) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weights, biases) of a block's MLP in order, W_in first and W_out last; [] without MLP."""
    if block.mlp is None:
        return []
    m = block.mlp
    return [(m.weight(i), m.bias(i)) for i in range(m.n_hidden + 1)]


def _blocks(model: CompiledTransformer | ModelConfig) -> tuple[BlockShape, ...]:
    """The block shapes of a model's config (or of a config)."""
    return (model if isinstance(model, ModelConfig) else model.config).blocks


def origins(model: CompiledTransformer | ModelConfig) -> list[Origin]:
    """The unfolded blocks' origins, in order (what :func:`unfold` builds); ``model``: a model or its config."""
    out: list[Origin] = []
    for l, b in enumerate(_blocks(model)):
        k = len(b.mlp_hidden)
        out.extend(Origin(l, j, k) for j in range(max(k, 1)))
    return out


def scratch_widths(model: CompiledTransformer | ModelConfig, given: Stages | None = None) -> tuple[int, int]:
    """Widths of the two scratch regions: the widest thing each must carry (``model``: a model or its config)."""
    widths = [0, 0]
    for _, j, c in _uses(stages(model, given)):
        widths[_region(j)] = max(widths[_region(j)], c)
    return widths[0], widths[1]


def standard_shape(meta: dict[str, Any]) -> bool:
    """Was the model of ``meta`` compiled in the standard shape (``meta["shape"]``, the planner's)?"""
    shape = meta.get("shape")
    return isinstance(shape, dict) and shape.get("name") == "standard"


def unfolded_config(config: ModelConfig, given: Stages | None = None) -> ModelConfig:
    """The config of :func:`unfold`'s model, from the original's config and its MLPs' exits
    (``given``, :func:`exits` of each MLP's weights; none by default): its blocks, sizes and
    parameter count, the standard shape's exact cost; :func:`balance` may then move units between
    its MLPs, which keeps its blocks, residual and parameter count."""
    blocks = []
    widths = _stage_widths(config, given)
    for o in origins(config):
        b = config.blocks[o.layer]
        n_heads = b.n_heads if o.stage == 0 else 1
        mlp = (widths[(o.layer, o.stage)],) if b.mlp_hidden else ()
        blocks.append(BlockShape(n_heads, mlp))
    return replace(config, d_model=config.d_model + sum(scratch_widths(config, given)), blocks=tuple(blocks))


def _meta(model: CompiledTransformer, d: int, widths: tuple[int, int], where: list[Origin],
          clears: set[tuple[int, int]], ex: Stages) -> dict[str, Any]:
    """The original meta with the scratch dims named and the block list rewritten."""
    meta = {k: copy.deepcopy(v) for k, v in model.meta.items() if k not in ("verification", "header_sha256")}
    starts = (d, d + widths[0])
    names = {SCRATCH[r]: list(range(starts[r], starts[r] + widths[r])) for r in (0, 1) if widths[r]}
    labels = {n: [f"{n}[{i}]" for i in range(len(dims))] for n, dims in names.items()}
    meta["residual_labels"] = list(meta.get("residual_labels", [])) + [s for n in names for s in labels[n]]
    meta["subspaces"] = {**meta.get("subspaces", {}), **names}
    layout = meta.get("layout")
    if layout is not None:
        stage_widths, foreign = _stage_widths(model, ex), _foreign(model, ex)
        old = layout["blocks"]
        layout["subspaces"].update({n: {"dims": names[n], "labels": labels[n]} for n in names})
        layout["blocks"] = []
        for i, o in enumerate(where):
            mlp = old[o.layer]["mlp"]
            if mlp is not None:
                src = (list(mlp["reads"]) if o.stage == 0 else [SCRATCH[_region(o.stage)]])
                last = o.stage == o.stages - 1
                dst = (list(mlp["writes"]) if last else [SCRATCH[_region(o.stage + 1)]])
                if not last and ex[o.layer].out[o.stage]:  # early exits write some of the MLP's outputs
                    dst = list(mlp["writes"]) + dst
                if (o.layer, o.stage) in clears:
                    dst = dst + [SCRATCH[_region(o.stage)]]
                cleared = [SCRATCH[_region(j)] for _, j in foreign.get((o.layer, o.stage), [])]
                src, dst = src + [r for r in cleared if r not in src], dst + [r for r in cleared if r not in dst]
                mlp = {"name": f"{mlp['name']}.stage{o.stage}", "hidden": [stage_widths[(o.layer, o.stage)]],
                       "reads": src, "writes": dst}
            layout["blocks"].append({"layer": i, "heads": old[o.layer]["heads"] if o.stage == 0 else [],
                                     "mlp": mlp})
    if "layers" in meta:
        meta["layers"] = [meta["layers"][o.layer] if o.stage == 0 else {"heads": []} for o in where]
    meta["unfolded"] = {"layers": len(model.blocks), "blocks": [asdict(o) for o in where],
                        "scratch": {n: len(v) for n, v in names.items()}}
    return meta


def _clear(m, regions: list[tuple[int, int]], at: int) -> None:
    """Units ``at``.. of the MLP ``m`` clearing carried activations (>= 0) in the scratch dims
    ``start .. start + c`` of each (start, c) of ``regions``: ReLU(h) = h written as -h."""
    for start, c in regions:
        dims = torch.arange(start, start + c)
        eye = torch.eye(c, dtype=m.W_in.dtype)
        m.W_in[dims, at:at + c] = eye
        m.W_out[at:at + c, dims] = -eye
        at += c


def _exit_dims(layers: list[tuple[torch.Tensor, torch.Tensor]], e: Exits, stage: int) -> torch.Tensor:
    """The output dims the units exiting at ``stage`` write (their sums and the output bias there)."""
    W = layers[-1][0]
    rows = list(e.out[stage].values())
    if not rows:
        return torch.zeros(W.shape[1], dtype=torch.bool)
    return (W[rows] != 0).any(0)


def _fill_stage(m, layers: list[tuple[torch.Tensor, torch.Tensor]], e: Exits, stage: int, d: int,
                starts: tuple[int, int], clears: int, foreign: list[tuple[int, int]]) -> None:
    """Set the one-hidden-layer MLP ``m`` of unfolded stage ``stage`` of an MLP whose (weights,
    biases) are ``layers`` and whose exits are ``e`` (module docstring): the units of its hidden
    layer it computes first, then the units clearing the first ``clears`` dims of the region it
    reads (:func:`cleared`), then those of the (start, c) scratch ranges ``foreign``
    (:func:`clearing_places`); the units exiting here write the output's dims they own."""
    k = len(layers) - 1
    carry = carries_activations(e.hidden, e.crossing)
    u = list(e.keep[stage])
    h = len(u)
    at = h
    if stage == 0:
        m.W_in[:d, :h] = layers[0][0][:, u]
        m.b_in[:h] = layers[0][1][u]
    else:
        c = _carried(e.hidden, stage, e.crossing)
        own = torch.arange(starts[_region(stage)], starts[_region(stage)] + c)
        gone, eye = own[:clears], torch.eye(clears, dtype=m.W_in.dtype)
        if carry[stage - 1]:  # stage - 1's activations carried: compute the layer, clear with ReLU(h) = h
            crossing = [x for x in e.keep[stage - 1] if x not in e.out[stage - 1]]
            m.W_in[own, :h] = layers[stage][0][crossing][:, u]
            m.b_in[:h] = layers[stage][1][u]
            m.W_in[gone, h:h + clears] = eye
            m.W_out[h:h + clears, gone] = -eye
        else:  # z_stage carried: ReLU(z) is the layer; -ReLU(z) + ReLU(-z) = -z clears
            m.W_in[own, :h] = torch.eye(c, dtype=m.W_in.dtype)
            m.W_in[gone, h:h + clears] = -eye
            m.W_out[:clears, gone] = -eye
            m.W_out[h:h + clears, gone] = eye
        at += clears
    _clear(m, foreign, at)
    W_k, b_k = layers[k]
    if stage + 1 == k:  # the original output into the model's own dims (less what exited earlier)
        m.W_out[:h, :d] = W_k[u]
        early = torch.stack([_exit_dims(layers, e, j) for j in range(k)]).any(0)
        m.b_out[:d] = torch.where(early, torch.zeros_like(b_k), b_k)
        return
    if e.out[stage]:  # units exiting here: their last copy's output weights, and the bias on those dims
        mine = _exit_dims(layers, e, stage)
        for p, x in enumerate(u):
            if x in e.out[stage]:
                m.W_out[p, :d] = W_k[e.out[stage][x]]
        m.b_out[:d] = torch.where(mine, b_k, torch.zeros_like(b_k))
    r = starts[_region(stage + 1)]
    if carry[stage]:  # the activations cross the next boundary as they are
        crossing = [p for p, x in enumerate(u) if x not in e.out[stage]]
        m.W_out[crossing, r:r + len(crossing)] = torch.eye(len(crossing), dtype=m.W_out.dtype)
    else:
        W, b = layers[stage + 1]
        nxt = list(e.keep[stage + 1])
        m.W_out[:h, r:r + len(nxt)] = W[u][:, nxt]
        m.b_out[r:r + len(nxt)] = b[nxt]


@torch.no_grad()
def unfold(model: CompiledTransformer, balanced: bool | None = None) -> CompiledTransformer:
    """``model`` with every MLP of k > 1 hidden layers unfolded into k one-hidden-layer blocks
    (see the module docstring); same dtype, same logits bit for bit on the same attention path.
    ``meta["unfolded"]["blocks"]`` lists each new block's :class:`Origin`.  ``balanced``: then
    :func:`balance` its MLPs' widths; by default when ``model`` was compiled in the standard shape
    (``meta["shape"]``), whose blocks are the unfolded ones."""
    d = model.config.d_model
    ex = stages(model)
    widths = scratch_widths(model, ex)
    starts = (d, d + widths[0])
    where = origins(model)
    places, need = clearing_places(model, ex), cleared(model, ex)
    clears = {read for read, at in places.items() if at == read}
    foreign = _foreign(model, ex)
    new = CompiledTransformer(unfolded_config(model.config, ex), _meta(model, d, widths, where, clears, ex))
    new.fused = model.fused
    new.W_E[:, :d] = model.W_E
    new.W_pos[:, :d] = model.W_pos
    new.W_U[:d] = model.W_U
    new.b_U.copy_(model.b_U)
    for blk, o in zip(new.blocks, where):
        old = model.blocks[o.layer]
        if o.stage == 0:
            blk.attn.W_Q[:, :d] = old.attn.W_Q
            blk.attn.W_K[:, :d] = old.attn.W_K
            blk.attn.W_V[:, :d] = old.attn.W_V
            blk.attn.W_O[:, :, :d] = old.attn.W_O
        layers = _hidden(old)
        if not layers:
            continue
        ranges = [(starts[_region(j)], need[(l, j)]) for l, j in foreign.get((o.layer, o.stage), [])]
        here = (o.layer, o.stage)
        _fill_stage(blk.mlp, layers, ex[o.layer], o.stage, d, starts, need[here] if here in clears else 0, ranges)
    if balanced is None:
        balanced = standard_shape(model.meta)
    return balance(new) if balanced else new
