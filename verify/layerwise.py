"""The layer-wise check: a model's residual stream against its declared program, layer by layer.

Every construction declares its program as obligations (``constructions/obligations.py``), and
each obligation kind has a concrete meaning: what code each subspace holds after each layer, as
a function of the input prefix.  This module runs that program on sampled sequences -- every
position at once, layer by layer -- and compares the model's residual dims with it:

* each head kind's *key* is computed from the program's codes before its layer
  (:func:`head_keys`): :class:`~constructions.obligations.Fetch` its declared key array;
  :class:`~constructions.obligations.Recent` the last s <= t whose flag is 1 (BOS's is);
  :class:`~constructions.obligations.Latest` the last s in 1..t whose keys hold a code of
  ``match``, else BOS; :class:`~constructions.obligations.Match` the last s in 1..t whose key
  holds the code the query's code looks for, else BOS.  The head copies its source there.
  :class:`~constructions.obligations.Average` (Lemma 15) has no single key: scale / mass times
  the sum of its source over its keys; :class:`~constructions.obligations.AnyFlag` neither: its
  sum of flags is not a code (only a Threshold reads it), so only its 0/1 bit enters the program;
* each MLP kind runs on the codes after the heads, by the certificate's semantics
  (:func:`verify.certify.semantics.run_mlp`), and a composition (Theorem 10's Lemma 14) by its
  definition f(g(q)) on the concrete maps -- so after a scan's layer l its maps are the
  compositions of the letters' maps over (t - 2^l, t], the scan lemma's window maps, which the
  proof's memories leave opaque;
* the readout's table must give the automaton's state (or label) wherever the program runs.

Whole sequences rather than the proof's memories (:mod:`verify.certify.program`): those keep
ranks for recencies, residues for counters and far sums, and opaque inner scan maps, which are
not the codes the weights hold, and their budgets refuse programs (a gridworld's many residues)
whose layer-wise check is still wanted.

Tolerance (:func:`tolerances`): a value a step unit reads is compared at the step units'
tolerance in its own units: STEP_TOLERANCE (Lemma 10, ``constructions/budget.py``), divided by
|scale| for a decode X = scale x + shift; a code a content-dependent head compares
(:class:`~constructions.obligations.Match`'s query and key) at most half the smallest L-infinity
distance between two of its declared codes, where the head could take one for the other; what a
head writes at most the output error its construction derived for it and built its readers for
(its notes' ``output_error_bound``: a nearest-value or level head's, a scan fetch's).  Every
other tracked subspace at STEP_TOLERANCE.  A deviation at or above it is a failure naming
the layer, the head or MLP that writes the subspace (or "carried" when it is not written
there), the subspace, and the first sequence and position.  Under a promise (a partial
automaton) each sequence is checked up to its first illegal letter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from compiler.automata.promise import legal_mask
from constructions.budget import STEP_TOLERANCE
from constructions.construction import InvariantReport
from constructions.margins import target_margins
from constructions.model import CompiledTransformer
from constructions.obligations import AnyFlag, Average, Compose, Fetch, Latest, Match, Modular, Obligations, Recent

from .certify.certificate import obligations_of
from .certify.program import truth_of
from .certify.semantics import (Env, NotCovered, ProgramError, add, integers, put, read,
                                reads_of, run_mlp)
from .certify.state import CertificateFailure, NotCertifiable, dims_of

CACHE_ELEMENTS = 1 << 25
"""Largest number of attention-pattern entries (rows x heads x (T + 1)^2, summed over layers) one
cached forward holds; the sequences run in chunks within it (one at a time at the least)."""

PHASES = ("attention", "MLP")


# --- the declared program on one sequence --------------------------------------------------------


def _code_index(codes: Any) -> Callable[[Env, str, str], int]:
    """The index of the declared code a name holds (ProgramError for another code)."""
    index = {tuple(round(float(v), 9) for v in row): i for i, row in enumerate(np.asarray(codes))}
    seen: dict[tuple[float, ...], int] = {}  # the codes met, as the program holds them

    def at(env: Env, name: str, head: str) -> int:
        held = read(env, name)
        if held not in seen:
            code = tuple(round(float(v), 9) for v in held)
            if code not in index:
                raise ProgramError(f"head {head}: {name} holds {code}, none of its declared codes")
            seen[held] = index[code]
        return seen[held]
    return at


def head_keys(f: Any, envs: list[Env]) -> list[int] | None:
    """The key position head ``f`` must attend to from every query position (0 is BOS), from the
    program's codes before its layer ``envs`` (one per position); None for a kind with no single key."""
    if isinstance(f, Fetch):
        return [int(k) for k in np.asarray(f.key)[: len(envs)]]
    if isinstance(f, (Average, AnyFlag)):
        return None
    keys, last = [0], 0
    if isinstance(f, Match):
        at, want, seen = _code_index(f.codes), [int(x) for x in np.asarray(f.match)], {}
        for t, env in enumerate(envs[1:], 1):
            seen[at(env, f.key, f.head)] = t
            keys.append(seen.get(want[at(env, f.query, f.head)], 0))
        return keys
    match = {tuple(int(v) for v in c) for c in f.match} if isinstance(f, Latest) else {(1,)}
    for t, env in enumerate(envs[1:], 1):
        name = f.keys if isinstance(f, Latest) else f.flag
        if integers(read(env, name), f"head {f.head}'s {name}") in match:
            last = t
        keys.append(last)
    return keys


def head_values(f: Any, envs: list[Env], keys: list[int] | None) -> list[tuple[float, ...]]:
    """What head ``f`` adds into its destination at every position: its source at its key (the
    sum of its sources, for Latest), an Average's scale / mass times its source summed over its
    keys, AnyFlag's bit "some flag so far" (BOS's flags included)."""
    if keys is not None:
        srcs = f.src if isinstance(f, Latest) else (f.src,)
        return [tuple(map(sum, zip(*(read(envs[k], s) for s in srcs)))) for k in keys]
    if isinstance(f, AnyFlag):
        seen = np.cumsum([sum(read(e, f.flags)) > 0 for e in envs]) > 0
        return [(float(x),) for x in seen]
    src = np.array([read(e, f.src) for e in envs], dtype=np.float64)
    src[0] = 0.0  # keys start at 1: BOS is no key of a sum
    csum = np.cumsum(src, axis=0)
    total = np.zeros_like(src)
    t = np.arange(len(envs))
    for first, last in zip(f.first, f.last):
        hi = csum[np.minimum(t, last)]
        total += np.where((t >= first)[:, None], hi - csum[first - 1], 0.0)
    return [tuple(row) for row in total * (f.scale / f.mass)]


def _compose(o: Compose) -> Callable[[Env], None]:
    """Lemma 14 on concrete maps: f = ``maps``, g = ``fetched``, f(g(q)) into ``into`` (``fetched``
    cleared when the result goes into ``maps``)."""
    def rule(env: Env) -> None:
        f, g = read(env, o.maps), integers(read(env, o.fetched), f"the fetched map of {o.mlp}")
        value = tuple(f[q] for q in g)
        put(env, o.into, value)
        if o.into == o.maps:
            put(env, o.fetched, (0.0,) * len(g))
    return rule


@dataclass
class Run:
    """The declared program on one sequence: per layer, the codes after its heads and after its MLP
    ([layer][phase][position]), each head's keys by (layer, head), and where it could not step."""

    phases: list[tuple[list[Env], list[Env]]] = field(default_factory=list)
    keys: dict[tuple[int, str], list[int]] = field(default_factory=dict)
    error: str | None = None


@dataclass
class _MLPs:
    """Each layer's MLP as a function of the codes it reads and writes, remembered (the codes are
    few, the positions many): per layer the names it reads and writes, and what it wrote per key."""

    ob: Obligations
    special: dict[int, Callable[[Env], None]] = field(default_factory=dict)
    names: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    memo: dict[tuple[int, tuple[Any, ...]], dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.special = {id(o): _compose(o) for layer in self.ob.layers for o in layer.mlp_leaves()
                        if isinstance(o, Compose)}

    def run(self, l: int, env: Env) -> None:
        """Layer ``l``'s MLP on ``env`` (in place)."""
        mlp = self.ob.layers[l].mlp
        if mlp is None:
            return
        if l not in self.names:
            writes = tuple(sorted({_base(p, env) for n in mlp.names_written() for p in n.split(" + ")}))
            reads = {_base(p, env) for leaf in mlp.leaves() for p, _ in reads_of(leaf)}
            self.names[l] = (tuple(sorted(reads | set(writes))), writes)
        names, writes = self.names[l]
        key = (l, tuple(env.get(n) for n in names))
        if key not in self.memo:
            run_mlp(mlp, env, self.special)
            self.memo[key] = {n: env[n] for n in writes}
        env.update(self.memo[key])


def run_program(ob: Obligations, row: np.ndarray, positional: dict[str, np.ndarray],
                mlps: _MLPs | None = None) -> Run:
    """Run ``ob`` on the letters ``row`` (BOS before them): the embedding's codes and the positional
    features, then layer by layer the heads (:func:`head_keys`, :func:`head_values`) and the MLP
    (``mlps``: the remembered MLPs of earlier sequences of ``ob``)."""
    n_rows = len(next(iter(ob.embedding.codes.values())))
    rows = [{k: tuple(float(v) for v in np.asarray(c)[r]) for k, c in ob.embedding.codes.items()}
            for r in range(n_rows)]
    envs = [{**rows[-1 if t == 0 else int(row[t - 1])], **{k: tuple(map(float, v[t])) for k, v in positional.items()}}
            for t in range(len(row) + 1)]
    mlps = mlps or _MLPs(ob)
    out = Run()
    for l, layer in enumerate(ob.layers):
        after = [dict(e) for e in envs]
        try:
            for f in layer.fetches:
                keys = head_keys(f, envs)
                if keys is not None and not isinstance(f, Average):
                    out.keys[(l, f.head)] = keys
                for e, v in zip(after, head_values(f, envs, keys)):
                    add(e, f.dst, v)
            mid = [dict(e) for e in after]
            for e in after:
                mlps.run(l, e)
        except (ProgramError, NotCovered) as err:
            out.error = f"layer {l + 1}: {err}"
            return out
        out.phases.append((mid, after))
        envs = after
    return out


def positional_names(ob: Obligations) -> list[str]:
    """The input-independent subspaces the program reads (position features, ``one``, ``bos``):
    every name read that the embedding does not track."""
    names = [p for layer in ob.layers for x in (*layer.fetches, *layer.mlp_leaves()) for p, _ in reads_of(x)]
    names += [p for n in ob.readout.reads for p in n.split(" + ")]
    return sorted({n.split("[")[0] for n in names if n not in ob.embedding.codes} - set(ob.embedding.codes))


# --- tolerances ----------------------------------------------------------------------------------


def _base(name: str, tracked: dict[str, Any]) -> str:
    return name if name in tracked else name.split("[")[0]


def tolerances(ob: Obligations, notes: Callable[[int, str], dict[str, Any]] | None = None,
               ) -> dict[str, tuple[float, str]]:
    """Per tracked subspace, the deviation below which its readers still read its code, and why
    (the module docstring); ``notes(layer, head)``: a head's notes, whose ``output_error_bound``
    (the error its construction derived for what it writes, which its readers were built for)
    bounds its destination's."""
    tol = {name: (STEP_TOLERANCE, "step units") for name in ob.embedding.codes}

    def lower(part: str, value: float, why: str) -> None:
        name = _base(part, tol)
        if name in tol and value < tol[name][0]:
            tol[name] = (value, why)
    for l, layer in enumerate(ob.layers):
        for x in layer.mlp_leaves():
            if isinstance(x, Modular) and x.scale:
                lower(x.reads, STEP_TOLERANCE / abs(x.scale), f"step units of X = {x.scale:g} x + {x.shift}")
        for f in layer.fetches:
            if isinstance(f, Match):
                codes = np.asarray(f.codes, dtype=np.float64)
                gaps = [np.abs(codes[i] - codes[j]).max() for i in range(len(codes)) for j in range(i)]
                if gaps and min(gaps) > 0:
                    for part in (f.query, f.key):
                        lower(part, min(gaps) / 2, f"half the code gap of head {f.head}")
            if notes is None or isinstance(f, Average):
                continue
            bound = float(notes(l, f.head).get("output_error_bound") or math.inf)
            for part in f.dst.split(" + "):
                lower(part, bound, f"head {f.head}'s derived output error bound")
    return tol


# --- comparing the model with the program -------------------------------------------------------


@dataclass
class _Worst:
    """The worst deviation of one subspace at one (layer, phase): its size, where, and the code."""

    dev: float = 0.0
    seq: int = 0
    pos: int = 0
    code: tuple[float, ...] = ()


@dataclass
class _Tally:
    """What the comparison collects over the sequences."""

    worst: dict[tuple[int, int, str], _Worst] = field(default_factory=dict)
    heads: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    readout_errors: int = 0

    def fail(self, msg: str) -> None:
        if msg not in self.failures:
            self.failures.append(msg)


def _compare(tally: _Tally, i: int, n: int, run: Run, resid: list[tuple[np.ndarray, np.ndarray]],
             names: list[str], dims: dict[str, list[int]], b: int) -> None:
    """Row ``i`` of the cached chunk (sequence ``b``), positions 0..n: each (layer, phase, subspace)'s
    deviation from the program."""
    for l, phases in enumerate(run.phases):
        for p, envs in enumerate(phases):
            x = resid[l][p][i, : n + 1]
            for name in names:
                want = np.array([e[name] for e in envs[: n + 1]], dtype=np.float64)
                dev = np.abs(x[:, dims[name]] - want).max(-1)
                t = int(dev.argmax())
                w = tally.worst.setdefault((l, p, name), _Worst())
                if dev[t] > w.dev:
                    tally.worst[(l, p, name)] = _Worst(float(dev[t]), b, t, tuple(want[t]))


def _margins(tally: _Tally, model, b: int, n: int, ob: Obligations, run: Run,
             attn: list[tuple[torch.Tensor, torch.Tensor]], resid: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """Each head's score gap and leaked mass at its key on sequence ``b`` (positions 0..n); an
    Average's score spread over its keys and weight outside them; AnyFlag's output where no flag."""
    layout = model.layout()["blocks"]
    for l, layer in enumerate(ob.layers):
        index = {h["name"]: h["index"] for h in layout[l]["heads"]}
        notes = (model.metadata.layers or [{}] * (l + 1))[l].get("heads", [])
        scores, pattern = attn[l][0][b, :, : n + 1, : n + 1], attn[l][1][b, :, : n + 1, : n + 1]
        for f in layer.fetches:
            for head in (f.heads if isinstance(f, Average) else (f.head,)):
                h = index.get(head)
                if h is None:
                    tally.fail(f"layer {l + 1}: head {head} of the declared program is not in the model's layout")
                    continue
                note = notes[h] if h < len(notes) else {}
                row = tally.heads.setdefault((l, head), {
                    "layer": l + 1, "head": head, "target": _target_text(f, model.max_len),
                    "derived_leak_bound": note.get("leak_bound"), "score_gap": note.get("score_gap")})
                if (l, head) in run.keys:
                    keys = torch.tensor(run.keys[(l, head)][: n + 1])[None]
                    gap, leak = target_margins(scores[h][None], pattern[h][None], keys)
                    row["worst_score_gap"] = min(row.get("worst_score_gap", math.inf), gap)
                    row["worst_leaked_mass"] = max(row.get("worst_leaked_mass", 0.0), leak)
                elif isinstance(f, Average):
                    i = f.heads.index(head)
                    _average_margins(row, scores[h], pattern[h], f.first[i], f.last[i], note, model)
                else:
                    dst = run.phases[l][0]
                    quiet = [t for t, e in enumerate(dst[: n + 1]) if not read(e, f.dst)[0]]
                    got = resid[l][0][b, quiet][:, dims_of(model.metadata.subspaces, f.dst)]
                    row["worst_unflagged_output"] = max(row.get("worst_unflagged_output", 0.0),
                                                        float(np.abs(got).max()) if got.size else 0.0)


def _average_margins(row: dict[str, Any], scores: torch.Tensor, pattern: torch.Tensor, first: int, last: int,
                     note: dict[str, Any], model) -> None:
    """A prefix-sum head over keys first..min(last, t): the spread of its scores over them (equal in
    exact arithmetic), and the weight it puts on real keys outside them, against the notes' leak
    bound widened by the dtype's rounding (the out-of-block score -beta - log(mass - c) rounded twice,
    relative eps on a magnitude below beta + log(mass); the normaliser sums T + 1 terms)."""
    s = scores[1:, first : last + 1].numpy()  # the causal mask's keys hold -inf
    fin = np.isfinite(s)
    if fin.any():
        spread = np.where(fin, s, -np.inf).max(-1).astype(np.float64) - np.where(fin, s, np.inf).min(-1)
        row["worst_score_spread"] = max(row.get("worst_score_spread", 0.0), float(spread[fin.any(-1)].max()))
    row["keys"] = [first, last]
    p = pattern[1:].numpy()
    outside = p[:, 1:first].sum(-1, dtype=np.float64) + p[:, last + 1 :].sum(-1, dtype=np.float64)
    worst = float(outside.max()) if outside.size else 0.0
    row["worst_outside_weight"] = max(row.get("worst_outside_weight", 0.0), worst)
    if {"leak_bound", "beta", "mass"} <= set(note):
        eps, T = torch.finfo(model.W_E.dtype).eps, model.max_len
        slack = math.exp(2 * eps * (note["beta"] + math.log(note["mass"]))) * (1 + eps * (T + 1))
        row["allowed_outside_weight"] = note["leak_bound"] * slack


def _target_text(f: Any, T: int) -> str:
    """The intended key of a head, in words."""
    if isinstance(f, Fetch):
        key, t = np.asarray(f.key), np.arange(T + 1)
        on = key > 0
        if on.any() and np.all(t[on] - key[on] == T - key[T]):
            return f"t - {T - key[T]} or BOS"
        return f"position {key[T]} or BOS" if on.any() and np.all(key[on] == key[T]) else "declared keys"
    if isinstance(f, Recent):
        return f"last s <= t with {f.flag} = 1 (BOS's)"
    if isinstance(f, Latest):
        return f"last s <= t whose {f.keys} matches, else BOS"
    if isinstance(f, Match):
        return f"last s <= t whose {f.key} is the code {f.query} looks for, else BOS"
    if isinstance(f, Average):
        return "uniform over its keys (no single key)"
    return "every flagged position so far (no single key)"


# --- the check -----------------------------------------------------------------------------------


def _writers(ob: Obligations) -> dict[tuple[int, int, str], str]:
    """(layer, phase, subspace) -> the head or MLP that writes it there."""
    out: dict[tuple[int, int, str], str] = {}
    for l, layer in enumerate(ob.layers):
        for f in layer.fetches:
            for part in f.dst.split(" + "):
                who = ", ".join(f.heads) if isinstance(f, Average) else f.head
                out[(l, 0, _base(part, ob.embedding.codes))] = f"head {who}"
        for name in (() if layer.mlp is None else layer.mlp.names_written()):
            for part in name.split(" + "):
                out[(l, 1, _base(part, ob.embedding.codes))] = f"MLP {getattr(layer.mlp, 'mlp', '')}".rstrip()
    return out


def _short(code: tuple[float, ...]) -> str:
    text = ", ".join(f"{v:.4g}" for v in code[:6])
    return f"({text}{', ...' if len(code) > 6 else ''})"


def _mlp_rows(model, ob: Obligations, tally: _Tally, tol: dict[str, tuple[float, str]],
              skip: set[str]) -> list[dict[str, Any]]:
    """Per MLP, the worst deviation of the codes it reads after the heads (those no earlier step of it
    writes), as its step units see it (times |scale| for a decode X = scale x + shift); where its notes
    give the input noise below which it computes bit-exactly (``exact_input_noise``, the scan's
    composition), whether the reads stayed below it."""
    rows = []
    for l, layer in enumerate(ob.layers):
        if layer.mlp is None:
            continue
        written: set[str] = set()
        reads: list[str] = []
        for leaf in layer.mlp_leaves():
            bases = [_base(p, tol) for p, _ in reads_of(leaf)]
            reads += [b for b in bases if b not in written and b in tol and b not in skip]
            written |= {_base(p, tol) for n in leaf.names_written() for p in n.split(" + ")}
        reads = list(dict.fromkeys(reads))
        scale = {_base(x.reads, tol): abs(x.scale) for x in layer.mlp_leaves() if isinstance(x, Modular)}
        noise = max((tally.worst.get((l, 0, n), _Worst()).dev * scale.get(n, 1.0) for n in reads), default=0.0)
        exact = ((model.metadata.layers or [{}] * (l + 1))[l].get("mlp") or {}).get("exact_input_noise")
        rows.append({"layer": l + 1, "mlp": getattr(layer.mlp, "mlp", "mlp"),
                     "inputs": ", ".join(reads[:4]) + (f", ... ({len(reads)})" if len(reads) > 4 else ""),
                     "input_tolerance": STEP_TOLERANCE, "worst_input_noise": noise,
                     "distance_to_boundary": STEP_TOLERANCE - noise,
                     **({} if exact is None else {"exact_input_noise": exact, "bit_exact": noise < exact})})
    return rows


def _failures(ob: Obligations, tally: _Tally, tol: dict[str, tuple[float, str]]) -> list[dict[str, Any]]:
    """Every (layer, phase, subspace) at or beyond its tolerance into ``tally.failures`` (where it is
    written, or where it first deviates); per (layer, phase) the subspace closest to its tolerance,
    for the report."""
    writers = _writers(ob)
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    failed: set[str] = set()
    for (l, p, name), w in sorted(tally.worst.items()):
        t, why = tol[name]
        who = writers.get((l, p, name))
        if w.dev >= t and (who is not None or name not in failed):  # a deviation carried on is said once
            failed.add(name)
            tally.fail(f"layer {l + 1} {PHASES[p]}{f', {who}' if who else ' (carried)'}: {name} deviates by "
                       f"{w.dev:.3g} from the declared program's code {_short(w.code)} (tolerance {t:.3g}, {why}), "
                       f"worst at sequence {w.seq}, position {w.pos}")
        row = rows.get((l, p))
        if row is None or w.dev / t > row["worst_deviation"] / row["tolerance"]:
            rows[(l, p)] = {"layer": l + 1, "after": PHASES[p], "subspace": name, "worst_deviation": w.dev,
                            "tolerance": t}
    for (l, head), row in tally.heads.items():
        if row.get("worst_outside_weight", 0.0) > row.get("allowed_outside_weight", math.inf):
            tally.fail(f"layer {l + 1} head {head} (keys {row['keys'][0]}..{row['keys'][1]}): weight "
                       f"{row['worst_outside_weight']:.3g} outside its block of keys, above its bound "
                       f"{row['allowed_outside_weight']:.3g}")
    return list(rows.values())


def _readout(tally: _Tally, ob: Obligations, truth: Any, b: int, row: np.ndarray, run: Run) -> None:
    """The program's readout against the automaton (its state, or its label) at positions 1..n."""
    if not run.phases:
        return
    states = truth.automaton.run([int(x) for x in row])
    reads = " + ".join(ob.readout.reads)
    for t, (env, q) in enumerate(zip(run.phases[-1][1][1:], states), 1):
        code = integers(read(env, reads), "the readout")
        got = ob.readout.table.get(code, code)
        if got != truth.want[q]:
            tally.readout_errors += 1
            tally.fail(f"the declared program reads out {got!r} where the automaton's {truth.what} is "
                       f"{truth.names[truth.want[q]]!r} (sequence {b}, position {t})")


def _notes(model) -> Callable[[int, str], dict[str, Any]]:
    """A head's notes (``meta["layers"]``) by layer and name (the layout's index)."""
    layers, blocks = model.metadata.layers or [], model.layout()["blocks"]

    def notes(l: int, head: str) -> dict[str, Any]:
        index = {h["name"]: h["index"] for h in blocks[l]["heads"]}.get(head)
        heads = layers[l].get("heads", []) if l < len(layers) else []
        return heads[index] if index is not None and index < len(heads) else {}
    return notes


def _cached(model, tokens: np.ndarray) -> tuple[list[tuple[np.ndarray, np.ndarray]],
                                                list[tuple[torch.Tensor, torch.Tensor]], np.ndarray]:
    """The residual after each layer's heads and MLP, each layer's scores and pattern, and the
    embedding's residual of the first sequence (for the input-independent subspaces)."""
    keep = ("hook_resid_mid", "hook_resid_post", "attn.hook_attn_scores", "attn.hook_pattern")
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens),
                                        names_filter=lambda n: n.endswith(keep) or n == "blocks.0.hook_resid_pre")
    L = len(model.blocks)
    resid = [tuple(cache[f"blocks.{l}.{k}"].double().numpy() for k in keep[:2]) for l in range(L)]
    attn = [tuple(cache[f"blocks.{l}.{k}"] for k in keep[2:]) for l in range(L)]
    return resid, attn, cache["blocks.0.hook_resid_pre"][0].double().numpy()  # type: ignore[return-value]


def invariants(model: CompiledTransformer, tokens: np.ndarray) -> InvariantReport:
    """The generic layer-wise check of ``model`` on ``tokens`` [B, T] (the module docstring): every
    tracked subspace against the declared program after each layer's heads and MLP, each head's
    margins at its key, each MLP's input noise, and the program's readout against the automaton."""
    try:
        ob = obligations_of(model)
    except NotCertifiable as e:
        return InvariantReport(None, skipped=f"no declared program to check against: {e}")
    except CertificateFailure as e:
        return InvariantReport("the declared program", int(len(tokens)), [str(e)])
    tokens = np.asarray(tokens, dtype=np.int64)
    subspaces = model.metadata.subspaces
    skip = {_base(p, ob.embedding.codes) for layer in ob.layers for f in layer.fetches if isinstance(f, AnyFlag)
            for p in f.dst.split(" + ")}
    names = [n for n in ob.embedding.codes if n not in skip]
    try:
        dims = {n: dims_of(subspaces, n) for n in [*names, *positional_names(ob)]}
    except CertificateFailure as e:
        return InvariantReport("the declared program", int(len(tokens)), [str(e)])
    lengths = legal_mask(model.domain, tokens).cumprod(1).sum(1) if len(tokens) else np.zeros(0, np.int64)
    tol, truth, tally, mlps = tolerances(ob, _notes(model)), truth_of(model), _Tally(), _MLPs(ob)
    width = sum(b.attn.W_Q.shape[0] for b in model.blocks) * (tokens.shape[1] + 1) ** 2
    chunk = max(1, CACHE_ELEMENTS // max(width, 1))
    for start in range(0, len(tokens), chunk):
        resid, attn, embedded = _cached(model, tokens[start : start + chunk])
        positional = {n: embedded[:, dims[n]] for n in positional_names(ob)}
        for i, row in enumerate(tokens[start : start + chunk]):
            b, n = start + i, int(lengths[start + i])
            run = run_program(ob, row[:n], positional, mlps)
            if run.error is not None:
                tally.fail(f"the declared program cannot step on sequence {b}: {run.error}")
                continue
            _compare(tally, i, n, run, resid, names, dims, b)
            _margins(tally, model, i, n, ob, run, attn, resid)
            _readout(tally, ob, truth, b, row[:n], run)
    deviations = _failures(ob, tally, tol)
    worst: dict[str, float] = {}
    for (_, _, name), w in tally.worst.items():
        worst[name] = max(worst.get(name, 0.0), w.dev)
    not_compared = {**{n: "a sum of flags, not a code (only a Threshold reads it)" for n in sorted(skip)},
                    **{n: "input-independent (read from the model)" for n in positional_names(ob)}}
    return InvariantReport(
        "every tracked subspace against the declared program after each layer's heads and MLP (verify/layerwise.py)",
        int(len(tokens)), tally.failures, list(tally.heads.values()), _mlp_rows(model, ob, tally, tol, skip),
        {"deviations": deviations, "worst_deviation": worst, "not_compared": not_compared,
         "program_readout_errors": tally.readout_errors})


def declared_codes(model: CompiledTransformer, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """The codes the declared program holds after its last layer on ``tokens`` [B, T]: per tracked
    subspace [B, T + 1, dims] (position 0 is BOS) -- what the model's residual must hold there."""
    ob = obligations_of(model)
    tokens = np.asarray(tokens, dtype=np.int64)
    first = "blocks.0.hook_resid_pre"
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens[:1]), names_filter=lambda n: n == first)
    embedded = cache[first][0].double().numpy()
    positional = {n: embedded[:, dims_of(model.metadata.subspaces, n)] for n in positional_names(ob)}
    runs = [run_program(ob, row, positional) for row in tokens]
    bad = next((r.error for r in runs if r.error is not None), None)
    if bad is not None:
        raise ProgramError(bad)
    return {name: np.array([[e[name] for e in r.phases[-1][1]] for r in runs], dtype=np.float64)
            for name in ob.embedding.codes if all(not isinstance(e[name], str) for r in runs for e in r.phases[-1][1])}
