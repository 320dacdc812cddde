"""Steps fused after the races: a gridworld's last MLP with a label lookup of its counts.

The lookup reads the boundary counts the races write, but inside one MLP: its hidden layers take
the races' last hidden layer through one weight matrix W_b, so there is no residual in between
to hand on.  The races' own proof (``recency.py``) still works unit by unit: every unit u of the
layer after the races' hidden layers reads each race's group through its column of W_b, and a
group's contribution to it is a_u * term + (a constant within a spread) on every cell of the
race's pair order -- the lemma ``recency._check_race`` proves, with the term scaled by a_u (any
a_u is sound: a wrong one only widens the spread; it is estimated from two points).  So for every
vector t of race terms (0 or 1 each) the layer's pre-activation lies in a box around
b_u + sum_k (a_u,k t_k + c_u,k); the rest of the MLP runs on that box with affine error forms,
and each output dim must land within half its gap of the declared counts sum_k t_k and of the
lookup's code of those counts.  Every term vector is checked (a superset of those that occur).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from constructions.obligations import Lookup, Races, Steps

from .compose import lookup_base, put_all, settled
from .affine import affine_rows
from .lookups import check_io, fixed_by_class, run_declared, mlp_weights
from .recency import check_race, unit_groups, copy_error
from .state import COMBINATION_BUDGET, CertificateFailure, NotCertifiable, State, Model, get_code, gamma


def races_then_steps(m: Model, l: int, ob: Steps, states: list[State], pos_class: np.ndarray,
                     report: dict[str, Any]) -> list[State]:
    """A :class:`Steps` MLP whose ``first`` is a :class:`Races`, its steps lookups of the counts
    (module docstring)."""
    races, where = ob.first, f"layer {l + 1} MLP {ob.mlp}"
    if not isinstance(races, Races) or not all(isinstance(st, Lookup) for st in ob.steps):
        raise NotCertifiable(f"{where}: steps after races must be lookups of their counts")
    weights, biases = mlp_weights(m, l, ob.mlp)
    inputs = list(dict.fromkeys(n for r in races.races for n in (r.first, r.second, *r.level)))
    outs = list(dict.fromkeys(r.out for r in races.races))
    if any(len(m.dims(n)) != 1 for n in inputs + outs):
        raise CertificateFailure(where, "its recencies, levels and outputs must be one dim each")
    lookups = [st for st in ob.steps if isinstance(st, Lookup)]
    if any(name not in outs for lk in lookups for name in lk.reads):
        raise NotCertifiable(f"{where}: a lookup after the races reads more than their counts")
    reads, out = [m.dims(n)[0] for n in inputs], [m.dims(n)[0] for n in outs]
    moved = out + [d for lk in lookups for d in m.dims(lk.out)]
    const, class_fixed = fixed_by_class(m, pos_class, len(states))
    const -= set(reads)
    check_io(m, l, ob.mlp, weights, biases, reads, moved, const)
    const_rows = sorted(const)
    Ws = [weights[0][reads + const_rows], *weights[1:]]
    cut, owner = _cut(races, Ws, inputs, where)
    errs = {n: e for r in races.races for n in (r.first, r.second) if (e := copy_error(report, n)) is not None}
    terms = np.array(list(itertools.product((0.0, 1.0), repeat=len(races.races))))
    if len(terms) > COMBINATION_BUDGET:
        raise NotCertifiable(f"{where}: {len(terms):,} vectors of race terms, over the budget {COMBINATION_BUDGET:,}")
    counts = np.stack([terms[:, [k for k, r in enumerate(races.races) if r.out == name]].sum(1) for name in outs], 1)
    worst, new_states = 0.0, []
    for c, st in enumerate(states):
        st = dict(st)
        old = [get_code(st, name) for name in outs]
        if any(o.size() != 1 or np.any(o.combos() != 0) for o in old):
            raise CertificateFailure(where, "the races' outputs are not 0 before the MLP writes them")
        centre, half = _boundary(m, races, inputs, st, class_fixed[c][const_rows], Ws, biases, cut, owner, terms, errs,
                                 where)
        want, olds, old_r = [counts], [np.zeros(len(outs))], [np.concatenate([o.radius for o in old])]
        for lk in lookups:  # each lookup's code of the counts, added to what its out held (one code)
            base = lookup_base(m, st, lk, class_fixed[c], where)
            olds.append(base.combos()[0])
            values = {name: counts[:, [outs.index(name)]] for name in lk.reads}
            run_declared((lk,), values, where)
            want.append(olds[-1] + values[lk.out])
            old_r.append(base.radius)
        new = np.concatenate(want, axis=1)
        cols = centre.shape[1]
        z, err = affine_rows(m, centre, half.max(0), [np.eye(cols), *Ws[cut + 2:]], [np.zeros(cols), *biases[cut + 2:]],
                             moved)
        rad = settled(m, where, z - (new - np.concatenate(olds)[None]), err, new, np.concatenate(old_r), moved,
                      lambda i: f"with the race terms {terms[i].astype(int).tolist()}")
        worst = max(worst, float(rad.max()))
        new_states.append(put_all(m, st, outs + [lk.out for lk in lookups], new, rad))
    report["mlp"] = {"name": ob.mlp, "kind": "races, then steps", "max_error": worst}
    return new_states


def _cut(races: Races, Ws: list[np.ndarray], inputs: list[str], where: str) -> tuple[int, dict[int, list[np.ndarray]]]:
    """The last hidden layer of the races' part: the deepest k whose units, layers 0..k, fall into
    one group per race (each reading that race's pair and levels); and each race's group."""
    pairs = {n: i for i, r in enumerate(races.races) for n in (r.first, r.second)}
    for k in range(len(Ws) - 3, -1, -1):  # at least one hidden layer after the races'
        owner: dict[int, list[np.ndarray]] = {}
        for g in unit_groups(Ws[: k + 2], [inputs.index(n) for n in pairs]):
            rows = set(np.nonzero(np.abs(Ws[0][:, g[0]]).sum(1))[0].tolist())
            read = {inputs[i] for i in rows if i < len(inputs)}
            mine = {pairs[n] for n in read if n in pairs}
            if len(mine) != 1:
                break
            i = mine.pop()
            race = races.races[i]
            if not read <= {race.first, race.second, *race.level} or i in owner:
                break
            owner[i] = g
        else:
            if len(owner) == len(races.races):
                return k, owner
    raise CertificateFailure(where, "no hidden layer splits into one group of units per race, with lookup layers "
                                    "after it")


def _boundary(m: Model, races: Races, inputs: list[str], st: State, const: np.ndarray, Ws: list[np.ndarray],
              bs: list[np.ndarray], cut: int, owner: dict[int, list[np.ndarray]], terms: np.ndarray,
              errs: dict[str, Any], where: str) -> tuple[np.ndarray, np.ndarray]:
    """The pre-activation of hidden layer ``cut`` + 1 for each vector of race ``terms``: its centre
    and half-width [terms, units] (each race's contribution a * term + a constant within a spread,
    ``recency._check_race``; the sum's rounding); ``inputs``: the races' recencies and levels, in
    the order of ``Ws[0]``'s rows."""
    W_b, b_b = Ws[cut + 1], bs[cut + 1]
    cols = W_b.shape[1]
    centre = np.tile(b_b, (len(terms), 1))
    half = np.zeros(cols)
    mag = np.abs(b_b).copy()
    for k, race in enumerate(races.races):
        idx = [inputs.index(n) for n in (race.first, race.second, *race.level)] + \
            list(range(len(inputs), len(inputs) + len(const)))
        sub = [Ws[0][idx], *Ws[1 : cut + 1]]
        group = owner[k]
        for u in range(cols):
            col = np.zeros(W_b.shape[0])
            col[group[-1]] = W_b[group[-1], u]
            if not col.any():
                continue
            a = _slope(race, sub, bs[: cut + 1], group, col, const, len(race.level))
            lo, hi, mg, _, _, _ = check_race(m, race, st, const, group, sub, bs[: cut + 1], col, errs,
                                              f"{where} (race {race.first} vs {race.second}, unit {u})", scale=a)
            centre[:, u] += a * terms[:, k] + (lo + hi) / 2
            half[u] += (hi - lo) / 2
            mag[u] += mg
    half = half + gamma(np.count_nonzero(W_b, axis=0) + 1, m.u) * mag
    return centre, np.tile(half, (len(terms), 1))


def _slope(race: Any, Ws: list[np.ndarray], bs: list[np.ndarray], group: list[np.ndarray], col: np.ndarray,
           const: np.ndarray, n_levels: int) -> float:
    """The change of a race's contribution through ``col`` from its term 0 to 1, at one point of
    each (first 1 vs second 2, then 2 vs 1; the levels 0): the scale its proof subtracts."""
    def out(first: float, second: float) -> float:
        x = np.concatenate([[first, second], np.zeros(n_levels), const])
        h = np.maximum(x @ Ws[0][:, group[0]] + bs[0][group[0]], 0.0)
        for j in range(1, len(group)):
            h = np.maximum(h @ Ws[j][group[j - 1]][:, group[j]] + bs[j][group[j]], 0.0)
        return float(h @ col[group[-1]])

    return out(2.0, 1.0) - out(1.0, 2.0)
