"""Balance the MLP widths of a model whose MLPs have one hidden layer each (a standard-shape model's
unfolding, ``constructions/unfold.py``), moving hidden units between blocks where no value changes.

TransformerLens has one MLP width for every block, so the unfolded blocks are zero-padded to the
widest; a staircase's first stage (ramps) and second (gated units) and a one-hidden-layer readout
differ by up to 4x.  The units of one MLP that write a common residual dim form a *part* (one sum
per dim, with the MLP's output bias on those dims), and a part may sit in any block's MLP where
every dim it reads has the same writes before it, and every dim it writes the same reads and
writes before and after its write, as where it was (:func:`_reach`, over every access of every
dim: embeddings, heads, MLP units, the unembedding).  Then each unit computes the same dot product
of the same weights with the same residual entries, and each written dim receives the same sum,
added to the same residual value, before the same readers: the values every later operation reads
are unchanged, so the logits are, and the certificate of the model unfolded from
(``verify/certify/unfolded.py``, which rebuilds this module's output tensor for tensor) covers the
balanced model as it covers the zero-padded one.

A part's sum may also be *split* (:func:`_split`): when nothing writes its dims before it (the
residual holds exact zeros there) and its units read none of them, each unit is a *piece* that moves
on its own, so the sum is formed in several MLPs, each adding the sum of its pieces' terms (the
output bias with the earliest) to the residual.  The window rule keeps every piece's write after
every other access that came before the part's write and before every one that came after (the
pieces of one sum are one owner in :data:`Accesses`), so nothing reads a dim between its first
and last piece: a dim's first piece adds its sum to an exact zero, each later one adds its own, and
what the readers see is the part's sum formed in blocks -- the same terms, each computed from the
same operands, summed in another order and blocking, which the certificate's rounding bounds cover
(``verify.certify.state.ASSUMPTIONS``: any summation order or blocking).  A sum of exact terms (0/1
activations times small integer weights: a staircase's gated units) is formed bit for bit.

Parts move from wider to narrower MLPs (:func:`_spread`), whole parts first and then the pieces of
split sums (:func:`_pieces`); a move leaves the receiving MLP narrower than the giving one was, so
the widest never grows and splitting never ends wider than moving whole parts alone (D8's
305/305/305 at T = 100 stays).  Each MLP keeps its own units first, the moved ones after (their zero
products come after its sums' terms).  The blocks, the residual and the parameter count do not
change (units only move), only the widths: ``unfold.unfolded_config`` gives the widths before
balancing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from compiler.automata.partitions import DisjointSets

from .config import BlockShape
from .model import CompiledTransformer

FIXED = -1
"""The owner of an access that never moves (:func:`balance`): the embeddings, a head, an MLP's bias
on a dim no unit of that MLP writes, the unembedding."""


@dataclass
class _Part:
    """Hidden units of one block's MLP joined by the residual dims they write (each such dim one sum
    of theirs: they move together), or one unit of such a sum split into pieces (:func:`_split`);
    the dims they read and write, the block holding them now, and the owner of their accesses in
    :data:`Accesses` (the index of the sum's first part: the pieces of one sum are one owner)."""

    home: int
    units: list[int]
    reads: list[int]
    writes: list[int]
    block: int
    owner: int
    pieces: list[tuple[int, list[int], list[int]]] = field(default_factory=list)
    """When its sum may be split (:func:`_split`): each unit with the dims it reads and writes."""


Accesses = list[dict[int, dict[int, int]]]
"""Per residual dim: access time -> owner (a part's :attr:`_Part.owner` or :data:`FIXED`) -> count.  Block b's
attention reads at 4b and writes at 4b + 1, its MLP reads at 4b + 2 and writes at 4b + 3; the
embeddings write at -1, the unembedding reads at 4L (odd times write, even times read)."""


def _groups(writes: np.ndarray) -> list[list[int]]:
    """The units of one MLP (rows of the [units, dims] mask ``writes``) joined by a written dim in
    common, each group in unit order, the groups by their first unit; a unit writing nothing alone."""
    sets = DisjointSets(writes.shape[0])
    cols, units = np.nonzero(writes.T)
    for k in range(1, len(cols)):
        if cols[k] == cols[k - 1]:
            sets.union(int(units[k]), int(units[k - 1]))
    groups: dict[int, list[int]] = {}
    for u in range(writes.shape[0]):
        groups.setdefault(sets.find(u), []).append(u)
    return sorted(groups.values())


def _one_layer(mlp: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """W_in, b_in, W_out, b_out of a one-hidden-layer MLP."""
    assert mlp is not None and mlp.n_hidden == 1, "balancing takes MLPs of one hidden layer"
    return mlp.weight(0), mlp.bias(0), mlp.weight(1), mlp.bias(1)


def _dims(mask: Any) -> list[int]:
    return np.flatnonzero(np.asarray(mask)).tolist()


def _note(acc: Accesses, dims: list[int], t: int, owner: int, n: int = 1) -> None:
    for x in dims:
        at = acc[x].setdefault(t, {})
        at[owner] = at.get(owner, 0) + n
        if not at[owner]:
            del at[owner]
            if not at:
                del acc[x][t]


@torch.no_grad()
def _accesses(flat: CompiledTransformer) -> tuple[list[_Part], Accesses]:
    """Every MLP's parts and every read and write of every residual dim (:data:`Accesses`)."""
    acc: Accesses = [{} for _ in range(flat.config.d_model)]
    _note(acc, _dims((flat.W_E != 0).any(0) | (flat.W_pos != 0).any(0)), -1, FIXED)
    parts: list[_Part] = []
    for b, blk in enumerate(flat.blocks):
        a = blk.attn
        _note(acc, _dims(((a.W_Q != 0) | (a.W_K != 0) | (a.W_V != 0)).any(2).any(0)), 4 * b, FIXED)
        _note(acc, _dims((a.W_O != 0).any(1).any(0)), 4 * b + 1, FIXED)
        if blk.mlp is None:
            continue
        W_in, _, W_out, b_out = _one_layer(blk.mlp)
        w_in, w_out = (W_in != 0).cpu().numpy(), (W_out != 0).cpu().numpy()
        _note(acc, _dims((b_out != 0).cpu().numpy() & ~w_out.any(0)), 4 * b + 3, FIXED)
        for units in _groups(w_out):
            part = _Part(b, units, _dims(w_in[:, units].any(1)), _dims(w_out[units].any(0)), b, len(parts))
            if _split(units, part.reads, part.writes, acc, 4 * b + 3):
                part.pieces = [(u, _dims(w_in[:, u]), _dims(w_out[u])) for u in units]
            _note(acc, part.reads, 4 * b + 2, part.owner)
            _note(acc, part.writes, 4 * b + 3, part.owner)
            parts.append(part)
    _note(acc, _dims((flat.W_U != 0).any(1)), 4 * len(flat.blocks), FIXED)
    return parts, acc


def _split(units: list[int], reads: list[int], writes: list[int], acc: Accesses, t: int) -> bool:
    """May the part of ``units`` (reading ``reads``, writing ``writes`` at time ``t``) be split into
    one piece per unit (module docstring)?  When it has several units, reads none of the dims it
    writes, and nothing (no embedding, head, MLP or bias) writes those dims before ``t``: the residual
    holds exact zeros there, so its first piece's sum is added to zero exactly."""
    return len(units) > 1 and not set(reads) & set(writes) and not any(
        s % 2 and s < t for x in writes for s in acc[x])


def _pieces(parts: list[_Part], acc: Accesses) -> list[_Part]:
    """``parts`` with every part whose sum may be split replaced by its pieces, one per unit, where
    the part is now (:func:`_split`), their accesses noted for its."""
    out: list[_Part] = []
    for pt in parts:
        out.extend([pt] if not pt.pieces else [_Part(pt.home, [u], r, w, pt.block, pt.owner) for u, r, w in pt.pieces])
        if pt.pieces:
            _note(acc, pt.reads, 4 * pt.block + 2, pt.owner, -1)
            _note(acc, pt.writes, 4 * pt.block + 3, pt.owner, -1)
            for _, r, w in pt.pieces:
                _note(acc, r, 4 * pt.block + 2, pt.owner)
                _note(acc, w, 4 * pt.block + 3, pt.owner)
    return out


def _reach(part: _Part, acc: Accesses, n_blocks: int) -> tuple[int, int]:
    """The blocks whose MLP may hold ``part`` instead of its own, everything else where it is:
    every dim it reads has the same writes before it there, and every dim it writes the same
    accesses before and after its write (so the same values are read and summed in the same order;
    a piece's own sum's other pieces are no other access: :func:`_split`)."""
    i = part.owner
    lo, hi = 0, n_blocks - 1
    read, write = 4 * part.block + 2, 4 * part.block + 3
    for x in part.reads:
        for t, owners in acc[x].items():
            if t % 2 and (len(owners) > 1 or i not in owners):  # another's write
                lo, hi = (max(lo, (t - 2) // 4 + 1), hi) if t < read else (lo, min(hi, (t - 3) // 4))
    for x in part.writes:
        for t, owners in acc[x].items():
            if t != write and (len(owners) > 1 or i not in owners):  # another's read or write
                lo, hi = (max(lo, (t - 3) // 4 + 1), hi) if t < write else (lo, min(hi, (t - 4) // 4))
    return lo, hi


def _move(part: _Part, q: int, acc: Accesses) -> None:
    """``part`` into block ``q``'s MLP, its accesses with it."""
    for dims, t in ((part.reads, 2), (part.writes, 3)):
        _note(acc, dims, 4 * part.block + t, part.owner, -1)
        _note(acc, dims, 4 * q + t, part.owner)
    part.block = q


def _spread(parts: list[_Part], acc: Accesses, widths: list[int]) -> None:
    """Move parts out of wide MLPs into narrower ones within their reach until no move narrows a
    pair: a part of c units from an MLP of w_p units to one of w_q moves when w_q + c < w_p (the
    sum of squared widths falls, so this ends), the widest MLPs emptied first, largest parts first."""
    has_mlp = [w > 0 for w in widths]
    while True:
        for p in sorted(range(len(widths)), key=lambda b: (-widths[b], b)):
            moved = False
            here = [i for i, pt in enumerate(parts) if pt.block == p]
            for i in sorted(here, key=lambda i: (-len(parts[i].units), i)):
                size = len(parts[i].units)
                lo, hi = _reach(parts[i], acc, len(widths))
                options = [q for q in range(lo, hi + 1) if has_mlp[q] and q != p and widths[q] + size < widths[p]]
                if options:
                    q = min(options, key=lambda q: (widths[q], q))
                    _move(parts[i], q, acc)
                    widths[p], widths[q], moved = widths[p] - size, widths[q] + size, True
            if moved:
                break
        else:
            return


def _runs(units: list[tuple[int, int]]) -> list[list[int]]:
    """(home block, unit) pairs as runs [home, first unit, last unit + 1]."""
    runs: list[list[int]] = []
    for home, u in units:
        if runs and runs[-1][0] == home and runs[-1][2] == u:
            runs[-1][2] += 1
        else:
            runs.append([home, u, u + 1])
    return runs


def _layout_mlp(mlp: dict[str, Any], units: list[tuple[int, int]], old: list[dict[str, Any]], parts: list[_Part],
                b: int, subspaces: dict[str, Any]) -> dict[str, Any]:
    """Block ``b``'s layout MLP entry once it holds ``units``: named after the MLPs they come from,
    reading and writing the subspaces its units touch (in the order of those MLPs' entries)."""
    homes = list(dict.fromkeys(h for h, _ in units))
    names = [old[h]["mlp"]["name"] + ("" if h == b else f"[{sum(x == h for x, _ in units)} units]") for h in homes]
    here = [pt for pt in parts if pt.block == b]
    out = {"name": " + ".join(names), "hidden": [len(units)]}
    for key in ("reads", "writes"):
        dims = {x for pt in here for x in getattr(pt, key)}
        listed = dict.fromkeys(n for h in homes for n in old[h]["mlp"][key])
        out[key] = [n for n in listed if n not in subspaces or dims & set(subspaces[n]["dims"])]
    return {**mlp, **out}


@torch.no_grad()
def _rebuilt(flat: CompiledTransformer, parts: list[_Part]) -> CompiledTransformer:
    """``flat`` with its MLPs' units where ``parts`` now are: each MLP its own units first (in
    order), then those moved in (by home block and unit); a moved part's output biases with it (a
    split sum's with its earliest piece: :func:`_sums`)."""
    L = len(flat.blocks)
    order: list[list[tuple[int, int]]] = []
    for b in range(L):
        own = sorted(u for pt in parts if pt.block == b == pt.home for u in pt.units)
        moved_in = sorted((pt for pt in parts if pt.block == b != pt.home), key=lambda pt: (pt.home, pt.units[0]))
        order.append([(b, u) for u in own] + [(pt.home, u) for pt in moved_in for u in pt.units])
    config = replace(flat.config, blocks=tuple(BlockShape(s.n_heads, (len(units),) if s.mlp_hidden else ())
                                               for s, units in zip(flat.config.blocks, order)))
    meta = copy.deepcopy(flat.meta)
    meta.setdefault("unfolded", {})["units"] = [_runs(units) for units in order]
    layout = meta.get("layout")
    if layout is not None:
        old = flat.meta["layout"]["blocks"]
        for b, units in enumerate(order):
            if layout["blocks"][b]["mlp"] is not None:
                layout["blocks"][b]["mlp"] = _layout_mlp(old[b]["mlp"], units, old, parts, b, layout["subspaces"])
    new = CompiledTransformer(config, meta)
    new.fused = flat.fused
    mlp_keys = {k for k in new.state_dict() if ".mlp." in k}
    new.load_state_dict({k: v for k, v in flat.state_dict().items() if k not in mlp_keys}, strict=False)
    for b, (blk, units) in enumerate(zip(new.blocks, order)):
        if blk.mlp is None:
            continue
        W_in, b_in, W_out, b_out = _one_layer(blk.mlp)
        k = 0
        for home, first, stop in _runs(units):
            src = _one_layer(flat.blocks[home].mlp)
            W_in[:, k:k + stop - first] = src[0][:, first:stop]
            b_in[k:k + stop - first] = src[1][first:stop]
            W_out[k:k + stop - first] = src[2][first:stop]
            k += stop - first
        _, _, src_out, src_b = _one_layer(flat.blocks[b].mlp)
        b_out.copy_(torch.where((src_out != 0).any(0), 0.0, src_b))  # the biases no unit's sum holds
    for first, home, dims in _sums(parts).values():
        _one_layer(new.blocks[first].mlp)[3][dims] = _one_layer(flat.blocks[home].mlp)[3][dims]
    return new


def _sums(parts: list[_Part]) -> dict[int, tuple[int, int, list[int]]]:
    """Per sum (owner): the earliest block holding a part of it (the one that adds its output bias),
    its home block and the dims it writes."""
    out: dict[int, tuple[int, int, list[int]]] = {}
    for pt in parts:
        first, _, dims = out.get(pt.owner, (pt.block, pt.home, []))
        out[pt.owner] = (min(first, pt.block), pt.home, sorted(set(dims) | set(pt.writes)))
    return out


def balance(flat: CompiledTransformer) -> CompiledTransformer:
    """``flat`` (every MLP one hidden layer) with hidden units moved between blocks so the widest
    MLP -- what TransformerLens pads every block to -- narrows (module docstring); ``flat`` itself
    when it cannot.  ``meta["unfolded"]["units"]`` then lists each MLP's units as runs [home block,
    first unit, last unit + 1] of the MLPs before the move."""
    parts, acc = _accesses(flat)
    widths = [0 if b.mlp is None else len(b.mlp.bias(0)) for b in flat.blocks]
    before = max(widths, default=0)
    _spread(parts, acc, widths)  # whole parts first, then the pieces of split sums: no move widens the widest
    parts = _pieces(parts, acc)
    _spread(parts, acc, widths)
    if max(widths, default=0) >= before:
        return flat
    return _rebuilt(flat, parts)
