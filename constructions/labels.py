"""Label readout: an unembedding that scores output labels instead of states.

A construction's unembedding (W_U, b_U) scores each state q from the final residual x.
Given the label of every state, :func:`label_unembedding` derives one that scores each label
from the same residual, exactly, in the forms the constructions use:

* **one-hot** (krohn-rhodes, lookback: the state is an exact one-hot in a subspace and
  logit_q is its q-th entry): logit_l = sum of the entries of the states labelled l.  At
  the exact one-hot the true label scores 1 and every other 0: margin 1, as for states.
* **scalar code** (scan on the states, one-axis gridworld: x is an exact integer code c_q
  in one dim and logit_q = 2 c_q x - c_q^2): when each label's codes form a run of
  consecutive codes, label l (the j-th run in code order, of m) scores the line
  (2 j - (m - 1)) x + d_j with d_(j+1) = d_j - 2 b_j, where b_j is the midpoint between run j's
  last code and run j+1's first.  Neighbouring lines cross at b_j; their upper envelope
  is convex, so label j wins exactly on (b_(j-1), b_j).  An integer code is at least 1/2
  from every midpoint and neighbouring slopes differ by 2: margin >= 1, as for states;
  a code error e lowers it by at most 2 (m - 1) e (m labels) against 2 (n - 1) e for the
  state readout.  The slopes are centred on 0 (one shift of every slope moves every logit
  alike): a bound that charges each logit |slope| e on its own is then (m - 1) e, not 2 (m - 1) e.
* **one state per label** (any form): the state logits, one column per label.

Any other case (several states per label under a multi-dimensional or element readout,
or labels that are not runs of the scalar code) raises :class:`LabelReadoutError`.  Then,
where the construction's state codes are known (below) and halfspaces of them cut off every
label but one, :func:`label_halfspaces` scores the labels linearly in those codes, with integer
weights in the unembedding (a product's two one-hots: "the first factor's state is 2"; no
parameter added).  And :func:`label_lookup` keeps the construction and reads the labels
through an exact lookup
in its last MLP (fused after it, or beside it), when the state readout is a nearest integer point
``logit_q = 2 <c_q, x> - ||c_q||^2`` (gridworld's coordinates, the scan's element maps) or the
construction declares exact features (``program.StateCodes``); only when that fails too does
the planner try another construction (``compiler/pipeline.py``).  Of the lookups that can read
the label (one code's function, by steps or linear between the codes; halfspaces cutting the
keys off; Lemma 11's two-layer table) it
keeps the one whose fused MLP has the fewest parameters; codes that only the last MLP writes
are read from its output, not carried through its hidden layers.  The pipeline keeps the
smaller model of the two (``compiler/pipeline.py``: this module sits below the assembler that
counts parameters); a lookup can make the last hidden layer narrower, so it wins after a scan
or a gridworld.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from compiler.automata.errors import ShortcutError

from .gadgets import (
    CodeInput,
    carry_units,
    code_function_mlp,
    halfspace_lookup_mlp,
    interpolated_code_function_mlp,
    lookup_mlp,
    separation,
)
from .program import MLP, Beside, Fused, Program, fuse


class LabelReadoutError(ShortcutError):
    """This construction's state readout cannot be turned into an exact label readout."""


def _one_state_per_label(W_U: np.ndarray, b_U: np.ndarray, state_label: Sequence[int], n_labels: int):
    if sorted(state_label) != list(range(n_labels)):
        return None
    cols = [state_label.index(j) for j in range(n_labels)]
    return W_U[:, cols].copy(), b_U[cols].copy(), {"form": "one state per label", "derived_margin": "as the states'"}


def one_hot_rows(W_U: np.ndarray, b_U: np.ndarray) -> list[int] | None:
    """The residual dim of each state of a one-hot readout (logit_q = x[dim_q], distinct dims,
    no bias: krohn-rhodes, lookback, local), else None."""
    rows = []
    for q in range(W_U.shape[1]):
        nz = np.flatnonzero(W_U[:, q])
        if len(nz) != 1 or W_U[nz[0], q] != 1.0:
            return None
        rows.append(int(nz[0]))
    return rows if len(set(rows)) == len(rows) and not np.any(b_U != 0) else None


def _one_hot(W_U: np.ndarray, b_U: np.ndarray, state_label: Sequence[int], n_labels: int):
    """logit_l = sum of the one-hot entries of the states labelled l (None if not one-hot)."""
    if one_hot_rows(W_U, b_U) is None:
        return None
    S = np.zeros((W_U.shape[1], n_labels))
    S[np.arange(W_U.shape[1]), state_label] = 1.0
    return W_U @ S, np.zeros(n_labels), {"form": "one-hot sum", "derived_margin": 1.0,
                                         "largest_class": int(S.sum(0).max())}


def _scalar_code(W_U: np.ndarray, b_U: np.ndarray, state_label: Sequence[int], n_labels: int):
    """Convex envelope of one line per label over the scalar code (None if not a scalar code;
    LabelReadoutError if the labels are not runs of consecutive codes)."""
    support = {int(r) for q in range(W_U.shape[1]) for r in np.flatnonzero(W_U[:, q])}
    if len(support) > 1:
        return None
    x = support.pop() if support else 0
    codes = W_U[x] / 2.0
    if not np.array_equal(b_U, -codes**2) or not np.array_equal(codes, np.round(codes)):
        return None
    order = np.argsort(codes, kind="stable")
    runs: list[tuple[int, float, float]] = []  # (label, first code, last code)
    for q in order:
        lab, c = state_label[q], float(codes[q])
        if runs and runs[-1][0] == lab:
            runs[-1] = (lab, runs[-1][1], c)
        else:
            runs.append((lab, c, c))
    if len(runs) != n_labels:
        raise LabelReadoutError("the labels are not runs of consecutive states in this construction's state code")
    W, b = np.zeros((W_U.shape[0], n_labels)), np.zeros(n_labels)
    d = 0.0
    for j, (lab, _, last) in enumerate(runs):
        W[x, lab], b[lab] = 2.0 * j - (n_labels - 1), d  # centred slopes (module docstring)
        if j + 1 < len(runs):
            d -= 2.0 * (last + runs[j + 1][1]) / 2.0
    return W, b, {"form": "scalar code: one line per run of labels", "derived_margin": 1.0,
                  "code_error_slope": 2.0 * (n_labels - 1),
                  "runs": [[int(lab), first, last] for lab, first, last in runs]}


def label_unembedding(W_U: np.ndarray, b_U: np.ndarray, state_label: Sequence[int],
                      n_labels: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(W_U', b_U', notes): an unembedding scoring ``n_labels`` labels, where state q has label
    ``state_label[q]``, derived from a state unembedding (W_U, b_U) of one of the forms in the
    module docstring; ``notes["derived_margin"]`` is the logit margin at exact codes."""
    state_label = [int(x) for x in state_label]
    if len(state_label) != W_U.shape[1]:
        raise ValueError(f"{len(state_label)} labels for {W_U.shape[1]} state logits")
    for form in (_one_state_per_label, _one_hot, _scalar_code):
        out = form(W_U, b_U, state_label, n_labels)
        if out is not None:
            return out
    raise LabelReadoutError("this construction reads the state out of several dims (a multi-axis or element "
                            "readout), where several states sharing a label cannot be scored by one linear logit")


def _point_codes(W_U: np.ndarray, b_U: np.ndarray) -> tuple[list[int], np.ndarray]:
    """(support dims S, integer codes [n_states, |S|]) of a nearest-integer-point readout
    ``logit_q = 2 <c_q, x_S> - ||c_q||^2`` with distinct codes c_q >= 0, else LabelReadoutError."""
    S = [int(r) for r in np.flatnonzero(np.any(W_U != 0, axis=1))]
    codes = W_U[S].T / 2.0  # [n_states, |S|]
    if (not S or not np.array_equal(codes, np.round(codes)) or np.any(codes < 0)
            or not np.array_equal(b_U, -np.sum(codes**2, axis=1))
            or len({tuple(c) for c in codes}) != len(codes)):
        raise LabelReadoutError("this construction's state readout is not a nearest integer point over its dims, "
                                "so its state codes cannot be looked up")
    return S, codes.astype(np.int64)


def _readout_codes(program: Program) -> tuple[list[int], np.ndarray, tuple[int, int] | None]:
    """(dims, integer codes [n_states, dims], (override dim, its state) or None) of the state
    readout: a nearest integer point (:func:`_point_codes`), else the exact features the
    construction declares (``program.state_codes``), else LabelReadoutError."""
    try:
        S, codes = _point_codes(program.W_U, program.b_U)
        return S, codes, None
    except LabelReadoutError:
        sc = program.state_codes
        if sc is None:
            raise
    override = None
    if sc.override is not None:
        if sc.override_state is None:
            raise LabelReadoutError("the readout's override dim names no state")
        override = (sc.override, sc.override_state)
    return list(sc.dims), np.asarray(sc.codes, dtype=np.int64), override


def readout_codes(program: Program) -> tuple[list[int], np.ndarray, tuple[int, int] | None]:
    """The state codes a program's readout reads (:func:`_readout_codes`), for a construction
    that reads them at another position (``constructions/transition.py``)."""
    return _readout_codes(program)


def _deciding_dims(codes: np.ndarray, state_label: Sequence[int]) -> list[int]:
    """A minimal set of code columns on which the label is still a function of the code (each
    column dropped, last first, when the rest still decide the label): the lookup then reads
    only those, with one key per distinct value they take (e.g. 2 of a permutation's 5 images)."""
    def decides(cols: list[int]) -> bool:
        seen: dict[tuple[int, ...], int] = {}
        return all(seen.setdefault(tuple(int(v) for v in c[cols]), lab) == lab for c, lab in zip(codes, state_label))

    keep = list(range(codes.shape[1]))
    for j in reversed(range(codes.shape[1])):
        trial = [i for i in keep if i != j]
        if trial and decides(trial):
            keep = trial
    return keep


def _column_choices(keep: list[int], n_dims: int) -> list[list[int]]:
    """The code columns a label readout tries, in order: those that decide the label
    (:func:`_deciding_dims`), then all of them when that is fewer."""
    return [keep] + ([list(range(n_dims))] if len(keep) < n_dims else [])


def label_index(state_label: Sequence[int], n_labels: int) -> list[int]:
    """The integer index of each label in the lookup's output dim: 0 for the label of the most
    states (the lookup needs no key for it: a code matching no key writes 0), then 1, 2, ..."""
    count = np.bincount(np.asarray(state_label), minlength=n_labels)
    order = sorted(range(n_labels), key=lambda l: (-count[l], l))
    index = [0] * n_labels
    for i, l in enumerate(order):
        index[l] = i
    return index


LABEL_SUBSPACE = "labels:index"
LOOKUP_MLP = "labels.lookup"
"""The name of the label lookup's MLP (alone, fused or one part of :data:`BESIDE_MLP`)."""
BESIDE_MLP = "labels.beside"
"""The name of the last block's MLP when the label lookup sits beside the construction's."""


def _free_dim(program: Program):
    """A one-dim subspace that is 0 at every input position when the last MLP runs, so the label
    index can be added to it there (nothing reads it later): no letter's embedding (the BOS row,
    the last, excepted) or position's (position 0, BOS, excepted) sets it and no block writes it
    (``bos``, 1 only at BOS, in every construction).  None when there is none."""
    written = {n for b in program.blocks for g in [*b.heads, b.mlp] if g is not None for n in g.writes}
    for sub in program.workspace.subspaces.values():
        if (len(sub) == 1 and sub.name not in written and not np.any(program.W_E[:-1, sub.dims[0]])
                and not np.any(program.W_pos[1:, sub.dims[0]])):
            return sub
    return None


def _halfspace_logits(codes: np.ndarray, state_label: Sequence[int], n_labels: int):
    """Integer label logits linear in the state codes, when halfspaces cut the labels off:
    logit_l = 2 <w_l, c> - lo_l - hi_l for every label but a default one d (logit_d = 0), where
    ``<w_l, c> >= lo_l`` at the codes of label l and ``<= hi_l < lo_l`` at every other code
    (:func:`constructions.gadgets.separation`).  At an exact code of label j, logit_j >= 1,
    every other non-default logit <= -1 and logit_d = 0: margin 1, integer weights, so exact in
    float.  d is the one label no halfspace cuts off (else the label of most states), and
    None when two labels cannot be cut off.  Returns (W [n_code_dims, n_labels], b, tolerance):
    a code error e moves a logit difference by at most 2 (|w_a|_1 + |w_b|_1) e, so the margin
    stays >= 1/2 for codes within ``tolerance`` of the exact ones."""
    uniq: dict[tuple[int, ...], int] = {}
    for c, lab in zip(codes, state_label):
        uniq[tuple(int(v) for v in c)] = lab
    pts = np.array(list(uniq), dtype=np.int64).reshape(len(uniq), codes.shape[1])
    labs = np.array(list(uniq.values()))
    cut = {}
    for lab in range(n_labels):
        sep = separation(pts[labs == lab], pts[labs != lab]) if np.any(labs == lab) else None
        if sep is not None:
            cut[lab] = sep
    missing = [lab for lab in range(n_labels) if lab not in cut]
    if len(missing) > 1:
        return None
    count = np.bincount(np.asarray(state_label), minlength=n_labels)
    default = missing[0] if missing else int(np.argmax(count))
    W, b = np.zeros((codes.shape[1], n_labels)), np.zeros(n_labels)
    l1 = [0.0]
    for lab, (w, lo, hi) in cut.items():
        if lab != default:
            W[:, lab], b[lab] = 2.0 * w, -float(lo + hi)
            l1.append(float(np.abs(w).sum()))
    top = sorted(l1)[-2:]
    return W, b, 1.0 / (4.0 * max(sum(top), 1.0))


def label_halfspaces(program: Program, state_label: Sequence[int], n_labels: int) -> dict[str, Any] | None:
    """Give ``program`` (its state codes read as in :func:`label_lookup`) an unembedding that
    scores the labels linearly in the state codes (:func:`_halfspace_logits`), in place, adding
    no parameter: tried first on the dims that decide the label, then on every code dim.
    Returns the notes, or None (program untouched) when the labels are not cut off by
    halfspaces there or the readout has an override state."""
    S_all, codes_all, override = _readout_codes(program)
    if override is not None:
        return None
    keep = _deciding_dims(codes_all, state_label)
    for cols in _column_choices(keep, len(S_all)):
        found = _halfspace_logits(codes_all[:, cols], state_label, n_labels)
        if found is None:
            continue
        W, b, tol = found
        S, ws = [S_all[j] for j in cols], program.workspace
        program.W_U = np.zeros((ws.d_model, n_labels))
        program.W_U[S] = W
        program.b_U = b
        return {"form": "halfspaces of the state codes in the unembedding", "derived_margin": 1.0,
                "code_dims": [ws.labels[d] for d in S], "lookup": "halfspaces", "reader": "unembedding",
                "input_tolerance": tol, "code_dim_indices": [int(d) for d in S],
                "codes": codes_all[:, cols].tolist(), "codes_skip_state": None}
    return None


def label_lookup(program: Program, state_label: Sequence[int], n_labels: int) -> dict[str, Any]:
    """Turn ``program`` (its state readout a nearest integer point, see :func:`_point_codes`)
    into one that scores ``n_labels`` labels, in place, adding no layer: an exact lookup
    (the smallest once fused of :func:`_lookups`: one code dim's function, halfspaces, or Lemma 11's
    table) from the state's integer codes in the
    dims the state unembedding reads (only those that decide the label, :func:`_deciding_dims`)
    to its label's index (:func:`label_index`; keys only for the states whose index is not 0)
    in one residual dim (a free one, :func:`_free_dim`, else a new one) is fused after the last block's MLP (:func:`constructions.program.fuse`),
    and the labels are read from that index as a nearest integer point (logit = 2 j y - j^2 for
    index j): margin 1 at the exact index.  The codes are
    exact wherever the state readout is (the construction certifies them within the step
    units' tolerance).  Returns the notes; LabelReadoutError when the readout has another form."""
    state_label = [int(x) for x in state_label]
    if len(state_label) != program.W_U.shape[1]:
        raise ValueError(f"{len(state_label)} labels for {program.W_U.shape[1]} state logits")
    S_all, codes_all, override = _readout_codes(program)
    rows = [q for q in range(len(codes_all)) if override is None or q != override[1]]
    keep = _deciding_dims(codes_all[rows], [state_label[q] for q in rows])
    ws = program.workspace
    out = _free_dim(program)
    if out is None:
        out = ws.add(LABEL_SUBSPACE, 1)
        k = ws.d_model - program.W_E.shape[1]
        program.W_E = np.pad(program.W_E, ((0, 0), (0, k)))
        program.W_pos = np.pad(program.W_pos, ((0, 0), (0, k)))
    index = label_index(state_label, n_labels)
    last = program.blocks[-1]
    fresh = _fresh(program, last)
    leaf_of = {d: (sub, i) for sub in ws.subspaces.values() for i, d in enumerate(sub.dims)}
    # (size, lookup, the last block's MLP with it, code dims, codes, keys)
    best: tuple[int, MLP | None, MLP | Fused | Beside | None, list[int], np.ndarray, int] | None = None
    for cols in _column_choices(keep, len(S_all)):
        S, codes = [S_all[j] for j in cols], codes_all[:, cols]
        inputs = [CodeInput(leaf_of[d][0], int(codes[:, j].max()) + 1, leaf_of[d][1]) for j, d in enumerate(S)]
        table = {tuple(int(v) for v in codes[q]): np.array([float(index[state_label[q]])])
                 for q in rows if index[state_label[q]]}
        if not table:  # every state has the commonest label: the index is 0 everywhere, no lookup
            best = (0, None, last.mlp, S, codes, 0)
            break
        for base in _lookups(inputs, out, table, np.unique(codes[rows], axis=0)):
            for m in _shapes(base):
                for f in _placed(last.mlp, m, fresh, ws):
                    dense = f.embed(ws)
                    size = sum(w.size + b.size for w, b in zip(dense.weights, dense.biases))
                    if best is None or size < best[0]:  # the first of the smallest: a fixed order
                        best = (size, m, f, S, codes, len(table))
    if best is None:
        raise LabelReadoutError("no lookup of the state codes fits the last block")
    _, lookup, last.mlp, S, codes, n_keys = best
    j = np.array(index, dtype=float)
    program.W_U = np.zeros((ws.d_model, n_labels))
    program.W_U[out.dims[0]] = 2.0 * j  # logit_l = 2 j y - j^2 = y^2 - (y - j)^2 (j: l's index): nearest index
    program.b_U = -(j**2)
    if override is not None:  # the override dim (exactly 0 or 1) outvotes the index's logits, which lie in
        dim, state = override  # [-(m-1)^2, (m-1)^2] for any index in [0, m-1]: by C = 2 (m-1)^2 + 1, margin 1
        C = 2.0 * (n_labels - 1) ** 2 + 1.0
        program.W_U[dim] = -C
        program.W_U[dim, state_label[state]] = C
    return {"form": "exact lookup of the state codes in the last MLP", "derived_margin": 1.0,
            "code_dims": [ws.labels[d] for d in S], "keys": n_keys, "label_dim": ws.labels[out.dims[0]],
            "lookup": None if lookup is None else lookup.notes["kind"],
            "shape": None if lookup is None else lookup.notes.get("shape", "as built"),
            "placed": ("beside the last MLP" if isinstance(last.mlp, Beside) and lookup is not None
                       else "after the last MLP" if isinstance(last.mlp, Fused) and lookup is not None else None),
            "input_tolerance": None if lookup is None else lookup.notes["input_tolerance"],
            "code_dim_indices": [int(d) for d in S], "codes": codes.tolist(),
            "codes_skip_state": None if override is None else override[1],
            "override_dim": None if override is None else int(override[0])}


def _lookups(inputs: list[CodeInput], out, table: dict[tuple[int, ...], np.ndarray], domain: np.ndarray) -> list:
    """The lookups of ``table`` (the label index of each key code; 0 elsewhere on ``domain``, the
    codes that occur) to choose from, in a fixed order: one code dim's function in one hidden
    layer (steps, :func:`constructions.gadgets.code_function_mlp`, or linear between the codes,
    :func:`constructions.gadgets.interpolated_code_function_mlp`), else halfspaces cutting the keys off
    in one hidden layer (:func:`constructions.gadgets.halfspace_lookup_mlp`, None when they cannot)
    and Lemma 11's lookup in two (:func:`constructions.gadgets.lookup_mlp`)."""
    if len(inputs) == 1:
        values = np.array([table.get((x,), [0.0]) for x in range(inputs[0].n_values)])
        return [code_function_mlp(LOOKUP_MLP, inputs[0], out, values),
                interpolated_code_function_mlp(LOOKUP_MLP, inputs[0], out, values)]
    index = {k: int(round(float(v[0]))) for k, v in table.items()}
    return [m for m in (halfspace_lookup_mlp(LOOKUP_MLP, inputs, out, index, domain),
                        lookup_mlp(LOOKUP_MLP, inputs, out, table).pruned()) if m is not None]


def _relayed(mlp: MLP) -> MLP:
    """``mlp`` with its inputs first passed through ``relu(x), relu(-x)`` pairs
    (:func:`constructions.gadgets.carry_units`): the same function, one hidden layer more.
    Fused after a wide MLP, the next layer's units then read 2 r relay units (r inputs)
    instead of that MLP's whole last hidden layer."""
    r = mlp.weights[0].shape[0]
    return dataclasses.replace(mlp, weights=[carry_units(r), np.vstack([mlp.weights[0], -mlp.weights[0]]),
                                             *mlp.weights[1:]],
                               biases=[np.zeros(2 * r), *mlp.biases], notes={**mlp.notes, "relay": True})


def _funneled(mlp: MLP) -> MLP:
    """``mlp`` (one output dim, never negative at its codes: a label index) with one more hidden
    layer of a single unit relu(output): the same function at exact codes, and the last hidden
    layer (whose every unit costs a row of the residual-wide output matrix) one unit wide."""
    return dataclasses.replace(mlp, weights=[*mlp.weights, np.ones((1, 1))], biases=[*mlp.biases, np.zeros(1)],
                               notes={**mlp.notes, "funnel": True})


def _shapes(mlp: MLP) -> list[MLP]:
    """``mlp`` as built, relayed, funneled, and both (:func:`_relayed`, :func:`_funneled`)."""
    out = []
    for m in (mlp, _relayed(mlp)):
        out += [m, _funneled(m)]
    for m, shape in zip(out, ("as built", "funneled", "relayed", "relayed and funneled")):
        m.notes["shape"] = shape
    return out


def _placed(last: MLP | Fused | Beside | None, lookup: MLP, fresh: set[str], ws) -> list[MLP | Fused | Beside]:
    """Where the lookup can go in the last block: alone (no MLP there), fused after the last MLP
    (reading what it writes: :func:`constructions.program.fuse`, the fresh subspaces from its
    output alone) and, when it reads nothing that MLP writes, beside it
    (:class:`constructions.program.Beside`: no carry either way)."""
    if last is None:
        return [lookup]
    out: list[MLP | Fused | Beside] = [fuse(last, lookup, fresh=tuple(n for n in lookup.reads if n in fresh))]
    if not set(ws.span(lookup.reads)) & set(ws.span(last.writes)):
        out.append(Beside(BESIDE_MLP, [last, lookup], {"beside": [last.name, lookup.name]},
                          reads=tuple(dict.fromkeys((*last.reads, *lookup.reads))),
                          writes=tuple(dict.fromkeys((*last.writes, *lookup.writes)))))
    return out


def _fresh(program: Program, last) -> set[str]:
    """Subspaces that are 0 in the residual at every position when the last block's MLP runs:
    no embedding or position row sets them and only that MLP writes them (so a lookup fused
    after it reads them from its output alone, :func:`constructions.program.fuse`)."""
    written = {n for b in program.blocks for g in [*b.heads, b.mlp] if g is not None and g is not last.mlp
               for n in g.writes}
    ws = program.workspace
    return {name for name, sub in ws.subspaces.items() if name not in written
            and not np.any(program.W_E[:, sub.dims]) and not np.any(program.W_pos[:, sub.dims])}


# --- the readout a compiled model carries (meta["readout"]) -------------------------------------

LABELS = "labels"
STATES = "states"
READOUTS = (STATES, LABELS)


def readout_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """A label model's ``meta["readout"]`` (labels, state_label over the model's states, which
    automaton those are, source spec, sizes, form, why), or None for a model that scores states."""
    r = meta.get("readout")
    return r if isinstance(r, dict) and r.get("kind") == LABELS else None


def check_readout(meta: dict[str, Any], n_states: int, n_out: int) -> None:
    """A label model's readout metadata is well formed and fits the unembedding (else ShortcutError;
    the checkpoint loader turns it into a CheckpointError)."""
    r = readout_of(meta)
    if r is None:
        if n_out != n_states:
            raise ShortcutError(f"its spec has {n_states} states but the unembedding scores {n_out}")
        return
    labels, state_label = r.get("labels"), r.get("state_label")
    if (not isinstance(labels, list) or not all(isinstance(x, str) for x in labels) or len(set(labels)) != len(labels)
            or len(labels) != n_out):
        raise ShortcutError(f"its readout needs {n_out} distinct label names, one per unembedding column")
    if (not isinstance(state_label, list) or len(state_label) != n_states
            or not all(type(i) is int and 0 <= i < n_out for i in state_label)):
        raise ShortcutError(f"its readout needs a label index in 0..{n_out - 1} for each of the {n_states} states")
    if not isinstance(r.get("source"), dict):
        raise ShortcutError("its readout carries no source spec (the automaton the labels come from)")


def output_names(model) -> tuple[str, ...]:
    """What the model's argmax indexes: its labels (label readout) or its states."""
    r = readout_of(model.meta)
    return tuple(r["labels"]) if r is not None else model.automaton.states


def readout_summary(meta: dict[str, Any]) -> dict[str, Any]:
    """What ``info`` shows of the readout: the kind and, for labels, the labels and the state
    counts before and after minimisation, and which automaton the model's states are (``states``:
    ``quotient``, the minimal Moore machine, or ``original``, the automaton as given)."""
    r = readout_of(meta)
    if r is None:
        return {"kind": STATES}
    keys = ("kind", "labels", "states", "states_before", "reachable", "states_after", "form")
    out: dict[str, Any] = {k: r[k] for k in keys if k in r}
    if isinstance(r.get("mealy"), dict):  # a Mealy machine's outputs: its sizes (not its spec)
        out["mealy"] = {k: v for k, v in r["mealy"].items() if k != "source"}
    return out
