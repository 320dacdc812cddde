"""The program a krohn-rhodes model runs, as data for the certificate checker (Theorem 11's
gadgets as :mod:`constructions.obligations` steps): per block, the counters' prefix means, the
resets' most-recent-flag heads and offset-1 fetches, and one MLP of steps."""

from __future__ import annotations

import numpy as np

from compiler.automata.cascade import Cascade, Component

from .krohn_rhodes_layout import (Layout, Schedule, TablePlan, allocate, block_average, embedding, input_update,
                                  schedule)
from .obligations import (Average, Embedding, Fetch, Joint, Layer, Lookup, Modular, Obligations, Readout, Recent, Round,
                          Steps, offset_keys)
from .workspace import Subspace


# ---------------------------------------------------------------------------------------
# obligations: the program a certificate checks the weights against


def _joined(sub: Subspace) -> str:
    """An obligation's name for a (possibly joined) subspace: its leaves' names joined by `` + ``."""
    return " + ".join(sub.names)


def _counter_average(b: int, counters: list[Component], lay: Layout, max_len: int) -> Average:
    """Block b's prefix-mean heads (:func:`counter_heads`): each counter's increments summed into
    its ``mean``, weight 1/mass per key of each position block."""
    B = lay.blocks
    src = " + ".join(lay.subs[c.name]["inc"].name for c in counters)
    dst = " + ".join(lay.subs[c.name]["mean"].name for c in counters)
    if lay.member is None:
        return Average((f"block{b}.counters",), (1,), (max_len,), B.mass, 1.0, src, dst)
    return block_average(f"block{b}.counters", B, max_len, 1.0, src, dst)


def _decode_step(c: Component, lay: Layout, init: dict[str, int]) -> Modular:
    """A counter's decode (:func:`counter_mlp`): new = (mass * mean + initial) mod n, and old =
    that minus the increment at t, where some table reads it."""
    d = lay.subs[c.name]
    old = "old" in d
    return Modular(f"{c.name}.count", d["mean"].name, float(lay.blocks.mass), init[c.name],
                   np.arange(c.size, dtype=np.float64)[:, None], d["new"].name,
                   d["inc"].name if old else None, d["old"].name if old else None)


def _view_step(view, when: str, lay: Layout) -> Lookup:
    """A view evaluated in the network (:func:`_view_mlp`); keys outside its table write 0."""
    reads = tuple((lay.subs[r][when] if when in lay.subs[r] else lay.subs[r]["new"]).name for r in view.reads)
    table = {tuple(int(v) for v in key): np.array([float(value)]) for key, value in view.table.items()}
    return Lookup(f"{view.name}.{when}", reads, lay.subs[view.name][when].name, table, np.zeros(1))


def _input_step(c: Component, plan: TablePlan, lay: Layout, n_letters: int) -> Lookup:
    """A component's input table (:func:`_lookups`), keyed by its keys' codes and the token one-hot."""
    eye = np.eye(n_letters, dtype=np.int64)
    table = {(*(int(v) for v in vals), *eye[letter].tolist()): input_update(c, act)
             for (vals, letter), act in plan.rows.items()}
    out = lay.input_out(c)
    return Lookup(f"{c.name}.input", (*(lay.value(n).name for n in plan.keys), "tok"), _joined(out), table,
                  np.zeros(len(out)))


def _readout_step(plan: TablePlan, lay: Layout) -> Lookup:
    """New values -> the state's one-hot (:func:`_readout_mlp`)."""
    eye = np.eye(len(lay.state))
    table = {tuple(int(v) for v in vals): eye[q] for (vals, _), q in plan.rows.items()}
    return Lookup("readout", tuple(lay.subs[n]["new"].name for n in plan.keys), lay.state.name, table,
                  np.zeros(len(lay.state)))


def _reset_fetches(b: int, cascade: Cascade, sched: Schedule, lay: Layout,
                   max_len: int) -> tuple[list[Fetch | Recent], list[Round]]:
    """Block b's reset heads (:func:`_attention`): each reset's most recent flag, rounded into its
    new value, and the offset-1 fetch of a reset's value before the update, rounded into ``old``."""
    heads: list[Fetch | Recent] = []
    rounds: list[Round] = []
    for c in cascade.components:
        d = lay.subs[c.name]
        if sched.block_of[c.name] == b and c.kind == "reset":
            heads.append(Recent(f"{c.name}.recent", d["flag"].name, d["target"].name, d["fetched"].name))
            rounds.append(Round(f"{c.name}.round", d["fetched"].name, d["new"].name))
        if sched.needs_old.get(c.name) and sched.block_of[c.name] + 1 == b:
            heads.append(Fetch(f"{c.name}.previous", offset_keys(max_len, 1), d["new"].name, d["prev"].name))
            rounds.append(Round(f"{c.name}.old", d["prev"].name, d["old"].name))
    return heads, rounds


def reachable_configurations(cascade: Cascade, start: tuple[int, ...], n_letters: int) -> np.ndarray:
    """Every configuration (component values, in cascade order) some input reaches from
    ``start``: the cascade run as an automaton on configurations."""
    seen = {tuple(start)}
    frontier = list(seen)
    while frontier:
        nxt = []
        for config in frontier:
            for letter in range(n_letters):
                after = tuple(cascade.step(config, letter))
                if after not in seen:
                    seen.add(after)
                    nxt.append(after)
        frontier = nxt
    return np.array(sorted(seen), dtype=np.float64).reshape(len(seen), len(cascade.components))


def _configurations(cascade: Cascade, lay: Layout, start: tuple[int, ...], n_letters: int) -> tuple[Joint, ...]:
    """The components' values -- updated (``new``), and before the update (``old``, where kept) --
    are one of the cascade's reachable configurations together (the one at t, and at t - 1)."""
    configs = reachable_configurations(cascade, start, n_letters)
    out = []
    for role in ("new", "old"):
        idx = [i for i, c in enumerate(cascade.components) if role in lay.subs[c.name]]
        if idx:
            names = tuple(lay.subs[cascade.components[i].name][role].name for i in idx)
            out.append(Joint(names, np.unique(configs[:, idx], axis=0)))
    return tuple(out)


def obligations(model, cascade: Cascade, name: str) -> Obligations:
    """What a krohn-rhodes model must run, from the cascade alone (:func:`embed`'s gadgets as
    data): the token rows of W_E; per block, its counters' prefix means (:class:`Average`), its
    resets' most-recent-flag heads (:class:`Recent`) and offset-1 fetches of old values, and one
    MLP of steps -- decodes and roundings, views, the next block's input tables, the readout.
    ``name`` is the construction's (the obligations' method)."""
    a, T = model.automaton, model.max_len
    init = dict(zip((c.name for c in cascade.components), cascade.encode(a.start)))
    sched = schedule(cascade)
    lay = allocate(a, cascade, sched, T, model.meta.get("positions") or "sinusoidal")
    W_E, _ = embedding(a, cascade, sched, lay, init, T)
    fixed = {lay.one.name, lay.bos.name, lay.absorb.name, lay.recency.name, "pos:block", "pos"}
    codes = {n: W_E[:, list(sub.dims)] for n, sub in lay.ws.subspaces.items() if n not in fixed}
    views = {v.name: v for v in cascade.views}
    layers = []
    for b in range(1, sched.n_blocks + 1):
        counters = [c for c in cascade.components if sched.block_of[c.name] == b and c.kind == "counter"]
        heads, rounds = _reset_fetches(b, cascade, sched, lay, T)
        fetches = ((_counter_average(b, counters, lay, T),) if counters else ()) + tuple(heads)
        stages: list[list[Lookup | Modular | Round]] = [[*(_decode_step(c, lay, init) for c in counters), *rounds]]
        old_here = [v for v in sched.old_views if sched.view_block[v] == b]
        new_here = sched.new_views if b == sched.n_blocks else []
        depth = max([sched.old_stage[v] for v in old_here] + [sched.new_stage[v] for v in new_here], default=0)
        for k in range(1, depth + 1):
            stage: list[Lookup | Modular | Round] = [_view_step(views[v], "old", lay) for v in old_here
                                                     if sched.old_stage[v] == k]
            stages.append(stage + [_view_step(views[v], "new", lay) for v in new_here if sched.new_stage[v] == k])
        last: list[Lookup | Modular | Round] = [
            _input_step(c, sched.inputs[c.name], lay, a.n_symbols) for c in cascade.components
            if sched.inputs[c.name].keys and sched.block_of[c.name] == b + 1
            and any(np.any(input_update(c, act)) for act in sched.inputs[c.name].rows.values())]
        if b == sched.n_blocks:
            last.append(_readout_step(sched.readout, lay))
        stages.append(last)
        used = [st for st in stages if st]
        name = f"block{b}.mlp" if len(used) > 1 else f"block{b}.mlp.0"
        layers.append(Layer(fetches, Steps(name, tuple(x for st in used for x in st)) if used else None))
    eye = np.eye(len(lay.state), dtype=np.int64)
    readout = Readout((lay.state.name,), {tuple(eye[q].tolist()): q for q in range(len(lay.state))})
    return Obligations(name, Embedding(codes), tuple(layers), readout,
                       joint=_configurations(cascade, lay, tuple(init[c.name] for c in cascade.components),
                                             a.n_symbols))
