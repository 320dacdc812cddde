"""The obligations of a label model: its construction's, with the readout scoring labels.

A label model (``constructions/labels.py``) keeps its construction's program and changes what
the unembedding reads.  In the unembedding forms (one-hot sums, scalar-code runs, halfspaces,
one state per label) the readout still reads the state codes: the construction's readout table
with each state replaced by its label.  In the lookup form an MLP in the last block writes the
label's integer index j(c) -- a function of the state code c on a few of its dims -- into one
residual dim, and the unembedding reads that index (and an override dim, where the readout has
one).  Its obligations then add, in the last block:

* a :class:`~constructions.obligations.Lookup` from those code dims to the index (0 where the
  code is no key), beside the construction's MLP (a :class:`~constructions.obligations.Beside`
  part, reading and writing its own dims) or after it (one more step of a
  :class:`~constructions.obligations.Steps`);
* a readout over (index, state code) whose table gives, for every index j and every final code
  c of the construction, the label the unembedding must put first: the override state's label
  where c's override dim is 1, else the label of index j.  That every state's code leads to its
  own label -- j(c) is the index of state q's label for every code c of q -- is checked here,
  on the declared program, before the checker proves that the weights run it.

After the last MLP's composition (the scan's) or races (the gridworld's) the lookup becomes a
step after it, :class:`~constructions.obligations.Steps` with that obligation as ``first``
(checked whole: ``compose.composed_steps``, ``after_races.races_then_steps``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from constructions.labels import BESIDE_MLP, LOOKUP_MLP, label_index
from constructions.obligations import Beside, Compose, Lookup, Obligations, Races, Readout, Steps

from .state import CertificateFailure, NotCertifiable, dims_of

LOOKUP_FORM = "exact lookup of the state codes in the last MLP"


def relabelled(ob: Obligations, readout: dict[str, Any], state_label: list[int],
               layout: dict[str, Any]) -> Obligations:
    """``ob`` (the construction's obligations) for a label model whose readout is ``readout``
    (``meta["readout"]``), with ``state_label`` the label index of each state (proved against
    the labels' source) and ``layout`` the model's (``model.layout()``)."""
    notes = {**ob.notes, "labels": readout["labels"]}
    if readout.get("form") != LOOKUP_FORM or (readout.get("notes") or {}).get("lookup") is None:
        # the unembedding reads the state codes (or, with no lookup, one label everywhere)
        table = {code: state_label[q] for code, q in ob.readout.table.items()}
        return replace(ob, readout=Readout(ob.readout.reads, table), notes=notes)
    return replace(ob, **_with_lookup(ob, readout, state_label, layout), notes=notes)


def _dim_name(subspaces: dict[str, list[int]], d: int) -> str:
    """The name of residual dim ``d`` as obligations name it: ``sub`` or ``sub[i]``."""
    for name, dims in subspaces.items():
        if d in dims:
            return name if len(dims) == 1 else f"{name}[{dims.index(d)}]"
    raise CertificateFailure("readout labels", f"residual dim {d} is in no subspace of the layout")


def _with_lookup(ob: Obligations, readout: dict[str, Any], state_label: list[int],
                 layout: dict[str, Any]) -> dict[str, Any]:
    """The last layer and the readout of a lookup-form label model (module docstring)."""
    notes = readout["notes"]
    subspaces = {name: list(sub["dims"]) for name, sub in layout["subspaces"].items()}
    dim_labels = {d: lab for sub in layout["subspaces"].values() for d, lab in zip(sub["dims"], sub["labels"])}
    last_mlp = (layout["blocks"][-1].get("mlp") or {}).get("name") if layout.get("blocks") else None
    n_labels = len(readout["labels"])
    index = label_index(state_label, n_labels)
    of_index = {j: lab for lab, j in enumerate(index)}
    reads = [d for name in ob.readout.reads for d in dims_of(subspaces, name)]
    code_dims = [int(d) for d in notes["code_dim_indices"]]
    if any(d not in reads for d in code_dims):
        raise CertificateFailure("readout labels", f"the lookup reads dims {code_dims} the state readout does not")
    at = [reads.index(d) for d in code_dims]
    skip = notes.get("codes_skip_state")
    if skip is not None and notes.get("override_dim") not in reads:
        raise NotCertifiable("its label readout has an override state but names no override dim in the state "
                             "readout (a checkpoint from before certified label lookups: recompile it)")
    e = None if skip is None else reads.index(int(notes["override_dim"]))
    keys: dict[tuple[int, ...], int] = {}
    for code, q in ob.readout.table.items():
        if e is None or code[e] == 0:
            key = tuple(code[i] for i in at)
            if keys.setdefault(key, index[state_label[q]]) != index[state_label[q]]:
                raise CertificateFailure("readout labels", f"the code {key} on the lookup's dims is the code of "
                                         f"states with different labels")

    def label(j: int, code: tuple[int, ...]) -> int:
        return state_label[skip] if e is not None and code[e] == 1 else of_index[j]

    for code, q in ob.readout.table.items():
        got = label(keys.get(tuple(code[i] for i in at), 0), code)
        if got != state_label[q]:
            raise CertificateFailure("readout labels", f"the final code {code} of state {q} is read out as "
                                     f"label {got}, not {state_label[q]}")
    out = _dim_name(subspaces, _label_dim(dim_labels, notes["label_dim"]))
    part = Lookup(LOOKUP_MLP, tuple(_dim_name(subspaces, d) for d in code_dims), out,
                  {k: np.array([float(j)]) for k, j in keys.items() if j}, default=np.zeros(1))
    table = {(j, *code): label(j, code) for code in ob.readout.table for j in range(n_labels)}
    last = ob.layers[-1]
    return {"layers": (*ob.layers[:-1], replace(last, mlp=_placed(last.mlp, part, notes.get("placed"), last_mlp))),
            "readout": Readout((out, *ob.readout.reads), table)}


def _label_dim(dim_labels: dict[int, str], label: str) -> int:
    """The residual dim whose label in the layout is ``label`` (the notes name the index's dim so)."""
    for d, name in dim_labels.items():
        if name == label:
            return d
    raise CertificateFailure("readout labels", f"the label index dim {label!r} is not in the layout")


def _placed(mlp: Any, part: Lookup, placed: str | None, last_mlp: str | None) -> Any:
    """The last layer's MLP obligation with the label lookup ``part`` added where the notes
    place it (``placed``): alone, beside the construction's MLP, or fused after it."""
    if placed is None and mlp is None:
        return part
    if placed == "beside the last MLP" and mlp is not None:
        parts = mlp.parts if isinstance(mlp, Beside) else (mlp,)
        return Beside(last_mlp or BESIDE_MLP, (*parts, part))
    if placed == "after the last MLP" and isinstance(mlp, (Lookup, Steps)) and not (
            isinstance(mlp, Steps) and mlp.first is not None):
        steps = mlp.steps if isinstance(mlp, Steps) else (mlp,)
        return Steps(last_mlp or mlp.mlp, (*steps, part))
    if placed == "after the last MLP" and isinstance(mlp, (Compose, Races)):  # a lookup of its result
        return Steps(last_mlp or mlp.mlp, (part,), first=mlp)
    raise NotCertifiable(f"its label readout is a lookup fused into the last MLP ({placed}, after a "
                         f"{type(mlp).__name__} obligation: it reads that MLP's output), which declares no "
                         f"obligations yet: not certified (sampled verification only)")
