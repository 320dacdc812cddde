"""Product: an automaton that decomposes in parallel, compiled as two smaller models side by side.

Theorem (Hartmanis and Stearns; Lemma 17's direct product).  Let pi_1 and pi_2 be partitions
of the states with the substitution property (states of one block go, under every letter,
to states of one block) whose meet is trivial (no two states share a block in both).  The
quotients A/pi_1 and A/pi_2 read the same letters, and after t letters A/pi_i is in the block
of q_t, so (block_1(q_t), block_2(q_t)) -- one-to-one in q_t -- gives A's state
(``compiler/automata/partitions.py`` finds such pairs).

Construction.  Each quotient is compiled by its own cheapest construction (fewest layers,
then parameters, among the registered ones other than this; the choice depends on max_len,
so the plan carries every pair found and :func:`choose` picks at build time).  The
constructions a factor may use are handed over explicitly: :func:`construction` makes this
module's registry entry from them (the registry passes every entry but this one).  The two
programs run side by side in one residual stream: the workspace holds both, names prefixed
``f1.`` and ``f2.`` (``constructions.workspace.beside``); layer l has the heads of both
factors' layer l and their MLPs beside each other (``constructions.program.Beside``, the
shallower padded with identity layers); the shallower factor's blocks come first and its
subspaces are untouched after them.  Depth: the deeper factor's; parameters: about the sum.

Readout.  Factor i scores its blocks with its own unembedding (W_i, b_i); the product scores
state q as logit_1[block_1(q)] + logit_2[block_2(q)] (W_U's column q stacks W_1's and W_2's
columns of its blocks).  The true state's pair maximises both terms, and any other state
differs in at least one block: its logit is lower by at least that factor's margin (margin
1 for a one-hot or nearest-point readout at exact values).  No lookup, no extra layer.

Declaration.  The program is declared once, by the factors' gadgets: their blocks renamed into
the product's workspace carry their obligations prefixed (``program.renamed``), MLPs side by
side declare ``Beside``; the product adds its factors' tracked subspaces and claims (prefixed),
the summed readout's table and the claim that the pair of final codes is one a reachable state
gives (:func:`_declaration`).  A factor whose construction does not declare yet leaves the
product undeclared (certify: "not certified", naming an undeclared head or MLP where there is one).

Checks.  The layer-wise invariant is each factor's state read by its own unembedding after
the last layer (the factors' internal invariants name subspaces without the prefix and are
not run); the end-to-end checks are the verifier's as for any model.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
import torch

from compiler.automata.errors import BudgetError, ShortcutError, SpecError
from compiler.automata.shares import shared_budget
from compiler.automata.partitions import (
    MAX_SEARCH_STATES,
    Partition,
    n_blocks,
    parallel_pairs,
    quotient,
)
from compiler.automata.moore import reachable_states
from compiler.automata.simulate import simulate
from compiler.automata.spec import Semiautomaton, from_dict

from .assemble import count_params
from .construction import (ONE_HIDDEN_LAYER, BuildOptions, Construction, Cost, InvariantReport, Refusal, check_start,
                           composite, rebuild)
from . import gridworld_standard
from .gridworld import NAME as GRIDWORLD
from .labels import one_hot_rows
from .model import CompiledTransformer
from .obligations import Embedding, Joint, Obligations, Readout, prefixed
from .program import Beside, Block, Declaration, Program, StateCodes, renamed
from .workspace import beside

NAME = "product"
PREFIXES = ("f1.", "f2.")
MAX_QUOTIENTS = 8
"""Most distinct quotients :func:`choose` plans (each through every construction's planner), in
the pairs' order (fewest product states first): a group of order 32 has 31 and took 7 s."""

MAX_QUOTIENT_STATES = 8 * MAX_QUOTIENTS
"""Most states of the distinct quotients :func:`choose` plans together: planning a quotient costs
about what planning an automaton of its size does (the krohn-rhodes analysis dominates, seconds for
16 states), so this bounds the work at MAX_QUOTIENTS quotients of 8 states.  Measured: a 17-state
Moore machine (a random 8-state Mealy machine's transitions) has 8 quotients of 16 states, 131 of
132 s of its product estimate in their krohn-rhodes analyses; automata of at most 9 states are
never cut (8 quotients of at most 8 states)."""

SEARCH_SHARE = 4
"""A quotient's detections that honour a share (``compiler/automata/shares.py``: the factor and since-program
searches) run within 1/SEARCH_SHARE of their budgets: the product plans up to MAX_QUOTIENTS quotients, and
searches that ran out of budget on them (a tier-based language's quotients: 4-8 s each) were the planner's
largest cost.  A quotient over it is planned by the other constructions, as over any budget."""

MAX_LEGAL_SEARCH_STATES = 8
"""Largest partial automaton whose decompositions are searched on its legal words
(partitions.legal_congruence); larger ones search their self-loop completion.  Congruences on
legal words are many more (the paper's 31-state Dyck: 255 partitions, 32,367 pairs) and each
quotient is planned through every construction (its krohn-rhodes analysis: seconds each)."""


@dataclass(frozen=True)
class Factorisation:
    """One parallel decomposition: two SP partitions with a trivial meet and their quotients."""

    partitions: tuple[Partition, Partition]
    factors: tuple[Semiautomaton, Semiautomaton]

    def to_dict(self) -> dict[str, Any]:
        return {"partitions": [list(p) for p in self.partitions], "factors": [f.to_dict() for f in self.factors]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Factorisation":
        if len(d["partitions"]) != 2 or len(d["factors"]) != 2:
            raise SpecError("a product plan needs two partitions and two factors")
        p1, p2 = (tuple(int(x) for x in p) for p in d["partitions"])
        f1, f2 = (from_dict(f) for f in d["factors"])
        return Factorisation((p1, p2), (f1, f2))


@dataclass(frozen=True)
class ProductPlan:
    """Every parallel decomposition found (fewest product states first) and the state count."""

    pairs: tuple[Factorisation, ...]
    n_states: int

    def to_dict(self) -> dict[str, Any]:
        return {"pairs": [p.to_dict() for p in self.pairs], "n_states": self.n_states}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "ProductPlan":
        return ProductPlan(tuple(Factorisation.from_dict(p) for p in d["pairs"]), int(d["n_states"]))


@dataclass(frozen=True)
class Choice:
    """The decomposition taken at a max_len and each factor's construction, plan and cost."""

    pair: Factorisation
    constructions: tuple[Construction, Construction]
    plans: tuple[Any, Any]
    costs: tuple[Cost, Cost]


def applies(automaton: Semiautomaton) -> ProductPlan | Refusal:
    """Every pair of SP partitions with a trivial meet (compiler/automata/partitions.py)."""
    if automaton.n_states > MAX_SEARCH_STATES:
        return Refusal(f"the product searches automata of at most {MAX_SEARCH_STATES} states for a parallel "
                       f"decomposition; this one has {automaton.n_states}")
    search = _searched(automaton)
    pairs = parallel_pairs(search)
    if search.partial:  # congruences on legal words are many (the paper's Dyck: 32,367 pairs)
        pairs = usable_pairs(pairs)
    if not pairs:
        return Refusal("no two partitions with the substitution property have a trivial meet (no parallel "
                       "decomposition by the SP partitions that one identification generates)")
    return ProductPlan(tuple(_factorisation(search, pair) for pair in pairs), automaton.n_states)


def _searched(automaton: Semiautomaton) -> Semiautomaton:
    """The automaton whose partitions are searched: a partial one's own (congruences on its legal
    words) up to MAX_LEGAL_SEARCH_STATES, else its self-loop completion, as before promises."""
    if automaton.partial and automaton.n_states > MAX_LEGAL_SEARCH_STATES:
        return replace(automaton, undefined=())
    return automaton


def usable_pairs(pairs: list[tuple[Partition, Partition]]) -> list[tuple[Partition, Partition]]:
    """The pairs :func:`choose` can take: in order, those whose partitions keep the distinct ones
    seen within MAX_QUOTIENTS (the rest are never planned)."""
    kept: list[tuple[Partition, Partition]] = []
    seen: set[Partition] = set()
    for p1, p2 in pairs:
        if within_budget(seen | {p1, p2}):
            seen |= {p1, p2}
            kept.append((p1, p2))
    return kept


def within_budget(quotients: set[Partition] | dict[Partition, Any]) -> bool:
    """Whether :func:`choose` may plan these distinct quotients: MAX_QUOTIENTS of them, of
    MAX_QUOTIENT_STATES states together."""
    return len(quotients) <= MAX_QUOTIENTS and sum(n_blocks(p) for p in quotients) <= MAX_QUOTIENT_STATES


def _factorisation(automaton: Semiautomaton, partitions: tuple[Partition, Partition]) -> Factorisation:
    """The two quotients of ``automaton`` (from its start state) by ``partitions``."""
    q1, q2 = (quotient(automaton, p, f"{automaton.name}/pi{i}") for i, p in enumerate(partitions, start=1))
    return Factorisation(partitions, (q1, q2))


def restarted(plan: ProductPlan, automaton: Semiautomaton) -> ProductPlan:
    """``plan`` for ``automaton`` with another start state: the same partitions (the substitution
    property does not depend on the start), the quotients started at its blocks (no new search)."""
    search = _searched(automaton)
    return ProductPlan(tuple(_factorisation(search, f.partitions) for f in plan.pairs), plan.n_states)


def _cheapest(a: Semiautomaton, max_len: int, positions: str,
              factors: tuple[Construction, ...]) -> tuple[Construction, Any, Cost] | None:
    """The construction among ``factors`` with the fewest layers, then parameters, then the earliest in
    ``factors``, for ``a``.  Those with a ``floor`` (a lower bound on their layers from the plan) are
    estimated last, and not at all when the floor is deeper than the best already found: such a one
    cannot be the cheapest, so the choice is the one estimating every construction gives."""
    best: _Best | None = None
    deferred = []
    for i, c in enumerate(factors):
        with shared_budget(SEARCH_SHARE):
            plan = c.applies(a)
        if isinstance(plan, Refusal):
            continue
        if c.floor is not None:
            deferred.append((i, c, plan))
            continue
        best = _better(best, i, c, plan, max_len, positions)
    for i, c, plan in deferred:
        if best is None or c.floor is None or c.floor(plan) <= best[0][0]:
            best = _better(best, i, c, plan, max_len, positions)
    return None if best is None else best[1]


_Best = tuple[tuple[int, int, int], tuple[Construction, Any, Cost]]
"""A quotient's cheapest construction so far: its key (layers, parameters, order) and (construction, plan, cost)."""


def _better(best: _Best | None, i: int, c: Construction, plan: Any, max_len: int, positions: str) -> _Best | None:
    """``best`` or construction ``c`` (the ``i``-th), whichever costs less (layers, parameters, order)."""
    try:
        cost = c.estimate(plan, max_len, positions)
    except ShortcutError:
        return best
    key = (cost.layers, cost.params, i)
    return (key, (c, plan, cost)) if best is None or key < best[0] else best


@functools.lru_cache(maxsize=16)
def choose(plan: ProductPlan, max_len: int, positions: str, factors: tuple[Construction, ...]) -> Choice:
    """The decomposition whose factors, each by its cheapest construction among ``factors`` (part
    of the cache key: another set of constructions is another choice), give the fewest layers
    (the deeper factor's), then the fewest parameters (their sum), among the pairs (fewest product
    states first) whose quotients are among the first planned within :func:`within_budget`; BudgetError when no
    such pair has both factors within a construction's budget."""
    best: Choice | None = None
    # a partition is in many pairs: each quotient is planned once
    cheapest: dict[Partition, tuple[Construction, Any, Cost] | None] = {}
    for pair in plan.pairs:
        if not within_budget(cheapest | dict.fromkeys(pair.partitions)):
            continue
        picks = [cheapest[p] if p in cheapest else cheapest.setdefault(p, _cheapest(f, max_len, positions, factors))
                 for p, f in zip(pair.partitions, pair.factors)]
        if picks[0] is None or picks[1] is None:
            continue
        (c1, plan1, cost1), (c2, plan2, cost2) = picks[0], picks[1]
        ch = Choice(pair, (c1, c2), (plan1, plan2), (cost1, cost2))
        if best is None or _key(ch) < _key(best):
            best = ch
    if best is None:
        raise BudgetError(f"no parallel decomposition has both factors within a construction's budget at "
                          f"max_len {max_len}")
    return best


def _key(ch: Choice) -> tuple[int, int]:
    return max(c.layers for c in ch.costs), sum(c.params for c in ch.costs)


def _beside(programs: list[Program]) -> tuple[Any, list[Block]]:
    """The factors' workspaces and blocks in one residual stream (see the module docstring)."""
    ws = beside([p.workspace for p in programs], list(PREFIXES))
    blocks = []
    for layer in range(max(len(p.blocks) for p in programs)):
        here = [(prefix, p.blocks[layer]) for prefix, p in zip(PREFIXES, programs) if layer < len(p.blocks)]
        heads = [renamed(h, prefix) for prefix, b in here for h in b.heads]
        mlps = [renamed(b.mlp, prefix) for prefix, b in here if b.mlp is not None]
        mlp = (None if not mlps else mlps[0] if len(mlps) == 1 else
               Beside(f"product.l{layer}", mlps, {"beside": [m.name for m in mlps]},
                      reads=tuple(n for m in mlps for n in m.reads), writes=tuple(n for m in mlps for n in m.writes)))
        blocks.append(Block(heads, mlp))
    return ws, blocks


def _unembedding(programs: list[Program], pair: Factorisation) -> tuple[np.ndarray, np.ndarray]:
    """W_U column q: factor 1's column of q's block over its dims, then factor 2's; b_U likewise."""
    W = np.concatenate([p.W_U[:, list(part)] for p, part in zip(programs, pair.partitions)], axis=0)
    b = np.sum([p.b_U[list(part)] for p, part in zip(programs, pair.partitions)], axis=0)
    return W, b


def _state_codes(programs: list[Program], pair: Factorisation, at: np.ndarray) -> StateCodes | None:
    """When both factors read their state out of an exact one-hot (krohn-rhodes, lookback, local),
    the product's state codes are the two one-hots side by side (``program.StateCodes``: a label
    readout can then look the label up, ``constructions/labels.py``); else None."""
    found = [one_hot_rows(p.W_U, p.b_U) for p in programs]
    rows = [r for r in found if r is not None]
    if len(rows) < len(found):
        return None
    dims = [int(at[i]) + r for i, rs in enumerate(rows) for r in rs]
    codes = np.concatenate([np.eye(len(rs), dtype=np.int64)[list(part)] for rs, part in zip(rows, pair.partitions)],
                           axis=1)
    return StateCodes(dims, codes)


def _readout(factors: list[Declaration], pair: Factorisation, automaton: Semiautomaton) -> tuple[Readout, Joint]:
    """The sum of the factors' readouts: a pair of final codes reads as the state in both codes'
    blocks; as a claim about the program, the pairs are those of the states some input reaches."""
    (p1, p2), (r1, r2) = pair.partitions, (d.readout for d in factors)
    table = {}
    for k1, s1 in r1.table.items():
        for k2, s2 in r2.table.items():
            both = [q for q in range(automaton.n_states) if p1[q] == s1 and p2[q] == s2]
            if both:
                table[k1 + k2] = both[0]
    reached = set(reachable_states(automaton))
    rows = [k1 + k2 for k1, s1 in r1.table.items() for k2, s2 in r2.table.items()
            if any(p1[q] == s1 and p2[q] == s2 for q in reached)]
    names = r1.reads + r2.reads
    return Readout(names, table), Joint(names, np.array(rows, dtype=np.float64).reshape(len(rows), -1))


def _declaration(programs: list[Program], pair: Factorisation, automaton: Semiautomaton) -> Declaration | None:
    """The product's declaration from its factors' (their names prefixed as the workspace prefixes
    them, :func:`~constructions.obligations.prefixed`): both factors' tracked subspaces, the sum of
    their readouts (:func:`_readout`), their claims and the reachable pairs; None while a factor
    declares none."""
    if any(p.declaration is None for p in programs):
        return None
    factors = []
    for prefix, p in zip(PREFIXES, programs):
        d = p.declaration
        assert d is not None
        moved = prefixed(Obligations(d.construction, Embedding({}), (), d.readout, joint=d.joint), prefix)
        factors.append(Declaration(d.construction, tuple(prefix + n for n in d.tracked), moved.readout, moved.joint))
    readout, reached = _readout(factors, pair, automaton)
    return Declaration(NAME, tuple(n for d in factors for n in d.tracked), readout,
                       joint=tuple(j for d in factors for j in d.joint) + (reached,))


def _within_proof(built: list[tuple[Program, dict[str, Any]]], ch: Choice, options: BuildOptions,
                  automaton: Semiautomaton) -> list[tuple[Program, dict[str, Any]]]:
    """``built``, with the factors built as one-hidden-layer gridworlds rebuilt by default where
    their one-hot labels, kept jointly by the product's program proof, would exceed its budget
    (:func:`gridworld_standard.refusal` over all their axes, as a box world's own build checks):
    the product would be proved in its weights but not against the automaton."""
    flat = [i for i, (_, m) in enumerate(built) if "standard" in m.get(GRIDWORLD, {})]
    axes = sum(len(built[i][1][GRIDWORLD]["axes"]) for i in flat)
    if axes < 2 or gridworld_standard.refusal(options.max_len, options.eps, axes, automaton.n_states) is None:
        return built
    default = replace(options, one_hidden_layer=False)
    return [ch.constructions[i].build(ch.pair.factors[i], ch.plans[i], default) if i in flat else b
            for i, b in enumerate(built)]


def build(automaton: Semiautomaton, plan: ProductPlan, options: BuildOptions,
          factors: tuple[Construction, ...]) -> tuple[Program, dict[str, Any]]:
    """The two factors' programs (:func:`choose` among ``factors``) side by side, with the sum of
    their readouts."""
    positions = options.positions
    ch = choose(plan, options.max_len, positions, factors)
    built = [c.build(f, p, options) for c, f, p in zip(ch.constructions, ch.pair.factors, ch.plans)]
    built = _within_proof(built, ch, options, automaton)
    programs = [b[0] for b in built]
    ws, blocks = _beside(programs)
    W_E = np.concatenate([p.W_E for p in programs], axis=1)
    W_pos = np.concatenate([p.W_pos for p in programs], axis=1)
    W_U, b_U = _unembedding(programs, ch.pair)
    at = np.cumsum([0] + [p.workspace.d_model for p in programs])
    notes = []
    for i, (c, f, (prog, meta)) in enumerate(zip(ch.constructions, ch.pair.factors, built)):
        notes.append({"method": c.name, "states": f.n_states, "layers": len(prog.blocks),
                      "prefix": PREFIXES[i], "dims": [int(at[i]), int(at[i + 1])],
                      "W_U": prog.W_U.tolist(), "b_U": prog.b_U.tolist(),
                      "why": c.describe(ch.plans[i], f)})
    meta = {
        "method": NAME,
        "positions": positions,
        "warnings": [f"factor {i + 1} ({m.get('method')}): {w}" for i, (_, m) in enumerate(built)
                     for w in m.get("warnings", [])],
        NAME: {"partitions": [list(p) for p in ch.pair.partitions], "factors": notes},
        "layers": [b.notes() for b in blocks],
        **({ONE_HIDDEN_LAYER: True} if any(m.get(ONE_HIDDEN_LAYER) for _, m in built) else {}),
    }
    return Program(ws, W_E, W_pos, blocks, W_U, b_U, notes={NAME: True},
                   state_codes=_state_codes(programs, ch.pair, at),
                   declaration=_declaration(programs, ch.pair, automaton)), meta


def estimate(plan: ProductPlan, max_len: int, positions: str, factors: tuple[Construction, ...]) -> Cost:
    """The deeper factor's layers; the exact parameter count of the programs side by side (built:
    the merged hidden widths are not the sum of the factors' where one MLP is padded)."""
    ch = choose(plan, max_len, positions, factors)
    options = BuildOptions(max_len, positions=positions)
    programs = [c.build(f, p, options)[0] for c, f, p in zip(ch.constructions, ch.pair.factors, ch.plans)]
    ws, blocks = _beside(programs)
    n_symbols = ch.pair.factors[0].n_symbols
    return Cost(len(blocks), count_params(ws, blocks, n_symbols=n_symbols, n_out=plan.n_states, max_len=max_len))


def describe(plan: ProductPlan, automaton: Semiautomaton) -> str:
    p1, p2 = plan.pairs[0].partitions
    return (f"parallel decomposition (Hartmanis-Stearns): {automaton.n_states} states embed in the product of "
            f"two quotients by partitions with the substitution property ({n_blocks(p1)} x {n_blocks(p2)} blocks "
            f"for the smallest of {len(plan.pairs)} pair{'s' * (len(plan.pairs) > 1)} found), each compiled by its "
            f"cheapest construction at this max_len (meta['{NAME}']['factors'] names them)")


def invariants(model: CompiledTransformer, plan: ProductPlan, tokens: np.ndarray) -> InvariantReport:
    """Each factor's state read by its own unembedding from its dims after the last layer, against
    the quotient's reference state: argmax and logit margin at every position."""
    info = model.metadata.sections[NAME]
    parts = [tuple(p) for p in info["partitions"]]
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    x = cache[f"blocks.{len(model.blocks) - 1}.hook_resid_post"][:, 1:].double().numpy()
    states = simulate(model.automaton, tokens)
    failures, worst = [], []
    for i, (f, part) in enumerate(zip(info["factors"], parts)):
        lo, hi = f["dims"]
        logits = x[..., lo:hi] @ np.asarray(f["W_U"]) + np.asarray(f["b_U"])
        want = np.asarray(part)[states]
        got = logits.argmax(-1)
        top = np.take_along_axis(logits, want[..., None], -1)[..., 0]
        others = np.where(np.eye(logits.shape[-1], dtype=bool)[want], -np.inf, logits).max(-1)
        margin = float((top - others).min()) if logits.shape[-1] > 1 else float("inf")
        worst.append({"factor": i + 1, "method": f["method"], "states": f["states"], "min_logit_margin": margin})
        if not np.array_equal(got, want):
            failures.append(f"factor {i + 1} ({f['method']}): its readout disagrees with the quotient's state at "
                            f"{int((got != want).sum())} positions")
    return InvariantReport("each factor's state by its own readout after the last layer", int(len(tokens)), failures,
                           measured={"factors": worst})


def set_start(model: CompiledTransformer, plan: ProductPlan, start: str, factors: tuple[Construction, ...]) -> None:
    """Rebuild for another start (the partitions do not depend on it; the quotients' starts do,
    :func:`restarted`) and copy the weights in; InputError when the rebuilt model has another shape."""
    check_start(model.automaton, start)
    new_plan = restarted(plan, from_dict({**model.metadata.automaton, "start": start}))
    rebuild(model, lambda a, p, o: build(a, p, o, factors), new_plan, start, meta={"plan": new_plan.to_dict()},
            same_shape=f"from {start!r} the product's factors compile to another shape; compile the spec again "
                       f"with that start")


def construction(factors: Callable[[], Sequence[Construction]]) -> Construction:
    """The registry entry, its factors' constructions drawn from ``factors()`` (the registry's
    entries but this one) each time it plans, builds or restarts."""
    return composite(factors, name=NAME, theorem="Hartmanis-Stearns, Lemma 17", applies=applies, estimate=estimate,
                     build=build, set_start=set_start, plan_to_json=ProductPlan.to_dict,
                     plan_from_json=ProductPlan.from_dict, describe=describe, invariants=invariants)
