"""Locally testable (module ``factors``): strictly local, locally testable and locally threshold
testable automata in two attention layers (one when the factors are single letters).

Theorem.  Let (classes, P, R, groups, t, F) be a factor description of the automaton
(compiler/automata/factors.py): with omega_t the index of the longest window pattern of P the
padded class text ends with at t, and n_g(t) the number of positions s <= t whose last k class
codes are a factor of group g, q_t = F(omega_t, min(t, n_1(t)), ..., min(t, n_G(t))) for every
input and every t >= 1.  Then the program below computes q_t exactly at every t <= max_len.

Proof.  The description's closure (the detection) shows the identity for every input, so it
suffices that the network computes omega_t and the capped counts exactly and evaluates F:

* Codes per offset.  The token embedding writes, for each offset j = 0..k-1, the letter's
  *offset code* ``fac:code{j}``: the rank (1..m_j) of its class among the classes some pattern or
  factor holds j letters before its end, m_j + 1 for every other class; BOS writes 0 (the pad).
  A pattern's codes then match exactly the windows that hold it, and the lookups read m_j + 2
  codes per offset, not |Sigma| + 1: the sizes follow the patterns the automaton needs.
* Layer 1, heads: k - 1 offset heads (gadgets.offset_head, Theorem 10's look-back) copy
  ``fac:code{j}`` of position t - j into ``fac:back{j}`` (BOS's 0 when t - j <= 0), within
  STEP_TOLERANCE / 2 (Lemma 13, value range m_j + 1); offset 0 is the token's own code.
* Layer 1, MLP: the lookup of Lemma 11 with suffix keys (gadgets.lookup_mlp): a unit per window
  pattern, on its |p| last offsets, adding omega(p) - omega(p') (p' its longest proper suffix in
  P; P is closed under suffixes, so the patterns a window ends with form a chain and the sum
  telescopes to omega_t) into ``fac:window``; a unit per factor, on all k offsets, writing 1 into
  its group's ``fac:flag{g}`` (at most one factor ends at t).  Step units read noisy codes
  exactly, so both are exact integers.
* Layer 2, one prefix-mean head (Lemma 15, gadgets.prefix_mean_head with mass and value scale
  2T) sums every group's flags at once into ``fac:count{g}`` (one value dim each): n_g(t) up to
  rounding.
* Layer 2, MLP: per group a code function (gadgets.code_function_mlp) caps the count at t
  (steps at 1..t: saturation is free) into ``fac:capped{g}``, side by side (Lemma 17), fused
  (program.fuse) with the lookup of Lemma 11 from (``fac:window``, capped counts) to the one-hot
  of F (one unit per key the closure reached); the unembedding reads the one-hot (margin 1).

With k = 1 the factors are single letter classes: their flags are token features (W_E) and the
count head joins the final MLP in one layer.

One declaration.  The gadgets state what they run (offset heads ``Fetch``, recent heads
``Recent``, the counts ``Average``, the caps and the final lookup ``Lookup`` -- the caps read
every count up to max_len, the final lookup 0 off its keys); the first lookup states its keys
and rows (``SuffixLookup``: a combination gets the sum of the rows of the keys it starts with;
the certificate checks it unit by unit, never on the product of the offsets' codes), a tier's
match heads ``Match``; :func:`program` states the rest
where it writes W_E and W_U: the tracked subspaces, the one-hot readout and the claim that the
final lookup's inputs are a key the closure reached.  The certificate reads that declaration
(``declared_obligations``).

Tiers (compiler/automata/tiers.py; the tier lemma in docs/constructions/locally-testable.md):
layer 1 fetches the offset codes of the most recent tier letter (Lemma 16); layer 2 those of the
k - 1 tier letters before it (k = 2: an offset head on layer 1's output; k >= 3: the tier count
from layer 1, its residue mod k one-hot, and a nearest-value match per offset, Theorem 12) beside
the first lookup; layer 3 as above.  A *definite* tier (no factor: the last k - 1 tier letters
decide the state) needs no count: the first lookup writes the state's one-hot itself, its rows
telescoping over the window patterns as the window class's do (:func:`definite_rows`), so the
program is layers 1 and 2 alone (at k = 2 the most recent tier letter decides: layer 1's heads
and the lookup, one layer); it reads k - 1 tier letters (:func:`width`) and matches the tier count
modulo k - 1.

Float reach: the prefix count's margin STEP_TOLERANCE / (eps T (T + 1)) and the position code's
(as constructions/local.py); float32 is certified to about T = 1024.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from compiler.automata.errors import InputError
from compiler.automata.factors import FactorPlan, detect
from compiler.automata.load import from_dict
from compiler.automata.spec import Semiautomaton
from compiler.automata.tiers import detect_tier

from .assemble import program_params
from .budget import MAX_PARAMS, STEP_TOLERANCE, check_params
from .construction import BuildOptions, Construction, Cost, Refusal, check_start, declared_obligations, rebuild
from .gadgets import (ABSORB, CodeInput, absorb_feature, attention_temperature, code_function_mlp, lookup_mlp,
                      offset_head, prefix_mean_head, recency_margin, recent_flag_head, residue_mlp, residue_range)
from .obligations import Joint, Lookup, Match, SuffixLookup, keys_reached, one_hot_readout
from .positions import PositionCode, position_code, position_table
from .program import MLP, Block, Declaration, Fused, Head, Program, beside, fuse
from .workspace import Workspace, join
from .model import CompiledTransformer

NAME = "locally-testable"

UNTRACKED = ("one", "bos", "pos", ABSORB, "pos:recency", "pos:index")
"""The constant and position features (W_pos): every other subspace's code is tracked from W_E."""

def code(j: int) -> str:
    """The offset code of offset j (the token's, written by W_E)."""
    return f"fac:code{j}"


def back(j: int) -> str:
    """The offset code of the letter at t - j (j = 0: the token's own)."""
    return f"fac:back{j}" if j else code(0)


def width(plan: FactorPlan) -> int:
    """How many offsets (a tier's: tier letters) the lookups read: k, or k - 1 for a definite tier
    (no factor: its windows are shorter than k)."""
    return plan.k - plan.definite


def offset_codes(plan: FactorPlan) -> list[dict[int, int]]:
    """Per offset j, the code of each class some pattern holds there (1..m_j, by class); every other
    class gets m_j + 1 (:func:`n_codes`), the pad 0."""
    out = []
    for j in range(width(plan)):
        held = sorted({p[-1 - j] for p in (*plan.windows, *plan.factors) if len(p) > j and p[-1 - j] > 0})
        out.append({c: i + 1 for i, c in enumerate(held)})
    return out


def n_codes(plan: FactorPlan) -> list[int]:
    """How many codes each offset's input reads: the pad, the held classes, the rest."""
    return [len(m) + 2 for m in offset_codes(plan)]


def letter_codes(plan: FactorPlan) -> np.ndarray:
    """[n_symbols, k]: the offset codes of every letter (its class's)."""
    maps = offset_codes(plan)
    return np.array([[maps[j].get(c, len(maps[j]) + 1) for j in range(width(plan))] for c in plan.classes],
                    dtype=np.float64).reshape(plan.n_symbols, width(plan))


def windowed(plan: FactorPlan) -> bool:
    """Whether the final lookup reads a window class (a tier's always: its start class; a definite
    tier's has no final lookup, its first lookup writes the state)."""
    return bool(plan.windows or plan.tier) and not plan.definite


def radix(plan: FactorPlan) -> list[int]:
    """The first lookup's inputs' code counts: (a tier's bit,) then the offsets'."""
    return ([2] if plan.tier else []) + n_codes(plan)


def _key(plan: FactorPlan, pattern: tuple[int, ...]) -> tuple[int, ...]:
    """A pattern's key: its offset codes, the last letter first (the pad 0)."""
    maps = offset_codes(plan)
    return tuple(maps[j][pattern[-1 - j]] if pattern[-1 - j] else 0 for j in range(len(pattern)))


def first_rows(plan: FactorPlan) -> dict[tuple[int, ...], np.ndarray]:
    """The first lookup's keys (suffix keys) and rows over (``fac:window``, ``fac:flag{g}``...), or
    over the state's one-hot when a tier's window alone decides (:func:`definite_rows`)."""
    if plan.definite:
        return definite_rows(plan)
    G = plan.n_groups
    index = {p: i + 1 for i, p in enumerate(plan.windows)}
    rows: dict[tuple[int, ...], np.ndarray] = {}

    def add(key: tuple[int, ...], row: np.ndarray) -> None:  # a window and a factor may share a key: both rows
        rows[key] = rows.get(key, np.zeros(1 + G)) + row
    for p, i in index.items():
        parent = next((index[p[j:]] for j in range(1, len(p)) if p[j:] in index), 0)
        add(_key(plan, p), np.eye(1 + G)[0] * (i - parent))
    for f, g in zip(plan.factors, plan.groups):
        add(_key(plan, f), np.eye(1 + G)[1 + g])
    if plan.tier:  # the tier bit first: windows at either, factors at tier letters, the start before any
        tiered = {(1, *key): row for key, row in rows.items()}
        tiered.update({(0, *key): row * np.eye(1 + G)[0] for key, row in rows.items() if row[0]})
        rows = tiered
        rows[(0, 0)] = np.eye(1 + G)[0] * (len(plan.windows) + 1)
    if not windowed(plan):  # no window input: the rows over the flags alone
        rows = {k: v[1:] for k, v in rows.items()}
    return rows


def definite_rows(plan: FactorPlan) -> dict[tuple[int, ...], np.ndarray]:
    """A definite tier's first lookup (the tier lemma with no factor): the state's one-hot by the
    window class, its rows telescoping as the window class's do.  With v(i) the one-hot of the state
    at window class i (a class never reached: its longest proper suffix's; v(0): the state where no
    pattern ends, 0 if never), pattern p's key (either tier bit) adds v(p) - v(p'), p' its longest
    proper suffix in P: the keys a combination starts with are the chain of the patterns its window
    ends with, so the sum is v(omega).  The empty key adds v(0) everywhere; the start's key (bit 0,
    the pad) e_q0 - v(0)."""
    eye = np.eye(plan.n_states)
    reached = {key[0]: eye[q] for key, q in zip(plan.keys, plan.states)}
    value = {0: reached.get(0, np.zeros(plan.n_states))}
    parent: dict[tuple[int, ...], int] = {}
    index = {p: i + 1 for i, p in enumerate(plan.windows)}
    for p in sorted(plan.windows, key=len):  # a suffix before the patterns that end with it
        parent[p] = next((index[p[j:]] for j in range(1, len(p)) if p[j:] in index), 0)
        value[index[p]] = reached.get(index[p], value[parent[p]])
    rows = {(): value[0], (0, 0): reached[len(plan.windows) + 1] - value[0]}
    for p, i in index.items():
        for bit in (0, 1):
            rows[(bit, *_key(plan, p))] = value[i] - value[parent[p]]
    return {key: row for key, row in rows.items() if row.any()}


def _layout(plan: FactorPlan, code_: PositionCode) -> Workspace:
    ws = Workspace()
    ws.add("one"), ws.add("bos")
    if positional(plan):
        ws.add("pos", code_.labels)
    ws.add(ABSORB)
    if plan.tier:
        ws.add("pos:recency"), ws.add("fac:tier")
        for j in range(width(plan)):
            ws.add(f"fac:last{j}")
    if matched(plan):
        M = modulus(plan)
        ws.add("pos:index"), ws.add("fac:inc"), ws.add("fac:tcount"), ws.add("fac:tcode", [f"r{r}" for r in range(M)])
    for j in range(width(plan)):
        ws.add(code(j))
    for j in range(1, width(plan)):
        ws.add(back(j))
    if windowed(plan):
        ws.add("fac:window")
    for kind in ("flag", "count", "capped"):
        for g in range(plan.n_groups):
            ws.add(f"fac:{kind}{g}")
    ws.add("fac:state", plan.n_states)
    return ws


def _group(ws: Workspace, kind: str, plan: FactorPlan):
    return join(f"fac:{kind}", [ws[f"fac:{kind}{g}"] for g in range(plan.n_groups)])


def _first_mlp(plan: FactorPlan, ws: Workspace) -> MLP:
    """Layer 1's lookup (module docstring): offset codes -> window class and factor flags (a definite
    tier's: the state, :func:`definite_rows`).  Its
    obligation is the keys themselves (:class:`SuffixLookup`: a combination gets the sum of the
    rows of the keys it starts with), never the product of the offsets' codes."""
    ins = [CodeInput(ws[name], n) for name, n in zip(first_reads(plan), radix(plan))]
    out = ws["fac:state"] if plan.definite else \
        join("fac:first", ([ws["fac:window"]] if windowed(plan) else []) + [_group(ws, "flag", plan)])
    rows = first_rows(plan)
    return replace(lookup_mlp("fac.first", ins, out, rows),
                   obligation=SuffixLookup("fac.first", first_reads(plan), " + ".join(out.names), rows))


def first_reads(plan: FactorPlan) -> tuple[str, ...]:
    """What the first lookup reads: the offsets' codes, or a tier's bit, its most recent letter's
    offset-0 code and the offset-j codes of the j-th tier letter before it (j = 1..k-1)."""
    if plan.tier:
        return ("fac:tier", "fac:last0", *(back(j) for j in range(1, width(plan))))
    return tuple(back(j) for j in range(plan.k))


def final_table(plan: FactorPlan) -> dict[tuple[int, ...], np.ndarray]:
    """The final lookup: (window class, capped counts) -> the state's one-hot, on the keys reached
    (in key order)."""
    eye = np.eye(plan.n_states)
    table = {(key if windowed(plan) else key[1:]): eye[q] for key, q in zip(plan.keys, plan.states)}
    return {key: table[key] for key in sorted(table)}


def _final_mlp(plan: FactorPlan, ws: Workspace, max_len: int) -> Fused:
    """The caps side by side (each count read up to max_len), fused with the final lookup (0 off
    its keys; module docstring)."""
    t, G = plan.threshold, plan.n_groups
    caps = [code_function_mlp(f"fac.cap{g}", CodeInput(ws[f"fac:count{g}"], t + 1, reach=max_len),
                              ws[f"fac:capped{g}"], np.arange(t + 1, dtype=np.float64)[:, None]) for g in range(G)]
    ins = ([CodeInput(ws["fac:window"], len(plan.windows) + 1 + bool(plan.tier))] if windowed(plan) else []) + \
        [CodeInput(ws[f"fac:capped{g}"], t + 1) for g in range(G)]
    lookup = lookup_mlp("fac.lookup", ins, ws["fac:state"], final_table(plan), total=True)
    return fuse(beside(caps, "fac.caps", ws), lookup, "fac.final", fresh=tuple(f"fac:capped{g}" for g in range(G)),
                carry_outputs=True)


def _embeddings(plan: FactorPlan, ws: Workspace, code_: PositionCode, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    d, s, T = ws.d_model, plan.n_symbols, max_len
    W_E = np.zeros((s + 1, d))
    W_E[:, ws["one"][0]] = 1.0
    W_E[-1, ws["bos"][0]] = 1.0
    codes = letter_codes(plan)
    for j in range(width(plan)):
        W_E[:s, ws[code(j)][0]] = codes[:, j]
    if plan.k == 1:  # the factors are letter classes: their flags are token features
        for f, g in zip(plan.factors, plan.groups):
            W_E[[a for a in range(s) if plan.classes[a] == f[0]], ws[f"fac:flag{g}"][0]] = 1.0
    W_pos = np.zeros((T + 1, d))
    if positional(plan):
        W_pos[:, list(ws["pos"].dims)] = position_table(code_)
    W_pos[:, ws[ABSORB][0]] = absorb_feature(2 * T, T)
    if plan.tier:
        W_E[list(plan.tier), ws["fac:tier"][0]] = 1.0
        W_E[-1, ws["fac:tier"][0]] = 1.0  # BOS is flagged (Lemma 16): its codes are the pads
        W_pos[:, ws["pos:recency"][0]] = np.arange(T + 1) / (T + 1)
    if matched(plan):
        W_E[list(plan.tier), ws["fac:inc"][0]] = 1.0
        W_pos[1:, ws["pos:index"][0]] = np.arange(1, T + 1)
    return W_E, W_pos


def program(plan: FactorPlan, max_len: int, positions: str) -> Program:
    """The program (weights in float64; it does not depend on the start, the plan does) and its
    declaration: every subspace but the constant and position features tracked from W_E, the
    state's one-hot read out, and the claim that the window class and capped counts together are
    a key the closure reached (the final lookup's; a definite tier's first lookup writes the state:
    no final lookup, no claim)."""
    code_ = position_code(positions, max_len)
    ws = _layout(plan, code_)
    W_E, W_pos = _embeddings(plan, ws, code_, max_len)
    if plan.k == 1:
        blocks = []
    elif matched(plan):
        blocks = _tier_blocks(plan, ws, max_len)
    elif plan.tier and plan.definite:  # k = 2: the most recent tier letter alone decides
        blocks = [Block(_recent_heads(plan, ws, max_len), _first_mlp(plan, ws))]
    elif plan.tier:
        blocks = [Block(_recent_heads(plan, ws, max_len)), Block([_tier_back(plan, ws, code_)], _first_mlp(plan, ws))]
    else:
        offsets = [offset_head(f"fac.back{j}", ws["pos"], code_, ws["bos"], ws["one"], j, ws[code(j)], ws[back(j)],
                               value_range=float(n - 1)) for j, n in enumerate(n_codes(plan)) if j]
        blocks = [Block(offsets, _first_mlp(plan, ws))]
    joint: tuple[Joint, ...] = ()
    if not plan.definite:
        mass = 2 * max_len
        count = prefix_mean_head("fac.count", ws[ABSORB], ws["bos"], _group(ws, "flag", plan),
                                 _group(ws, "count", plan), mass=mass, value_scale=float(mass), max_len=max_len)
        final = _final_mlp(plan, ws, max_len)
        blocks.append(Block([count], final))
        assert isinstance(final.second.obligation, Lookup)
        joint = (keys_reached(final.second.obligation),)
    W_U = np.zeros((ws.d_model, plan.n_states))
    W_U[list(ws["fac:state"].dims), np.arange(plan.n_states)] = 1.0
    declared = Declaration(NAME, tuple(n for n in ws.subspaces if n not in UNTRACKED),
                           one_hot_readout("fac:state", plan.n_states), joint=joint)
    return Program(ws, W_E, W_pos, blocks, W_U, np.zeros(plan.n_states), declaration=declared)


def _tier_blocks(plan: FactorPlan, ws: Workspace, max_len: int) -> list[Block]:
    """A tier's layers 1 and 2 at k >= 3 (the tier lemma): the tier count (Lemma 15) beside the
    recent heads, its residue mod M decoded one-hot (Lemma 10's steps); then a match head per
    offset j = 1..k-1, then the first lookup."""
    mass = 2 * max_len
    tcount = prefix_mean_head("fac.tcount", ws[ABSORB], ws["bos"], ws["fac:inc"], ws["fac:tcount"], mass=mass,
                              value_scale=float(mass), max_len=max_len)
    return [Block([tcount, *_recent_heads(plan, ws, max_len)], _tier_code(plan, ws, max_len)),
            Block([_match_head(plan, ws, j, max_len) for j in range(1, width(plan))], _first_mlp(plan, ws))]


def _tier_code(plan: FactorPlan, ws: Workspace, max_len: int) -> MLP:
    """A tier's layer 1 MLP (k >= 3): the tier count's residue mod M one-hot (gadgets.residue_mlp),
    0 at BOS.  Obligation: a :class:`Lookup` over (count, BOS flag) -- the count c = 0..max_len
    off BOS to e_(c mod M), BOS to 0 (the gadget's Modular states no BOS)."""
    M = modulus(plan)
    decode = residue_mlp("fac.tcode", ws["fac:tcount"], residue_range(0, max_len, M), ws["fac:tcode"], np.eye(M),
                         bos=ws["bos"])
    table: dict[tuple[int, ...], np.ndarray] = {(c, 0): np.eye(M)[c % M] for c in range(max_len + 1)}
    table[(0, 1)] = np.zeros(M)
    return replace(decode, obligation=Lookup("fac.tcode", ("fac:tcount", "bos"), "fac:tcode", table))


def matched(plan: FactorPlan) -> bool:
    """Whether a tier's letters before the most recent are found by their count (k >= 3)."""
    return bool(plan.tier) and plan.k > 2


def positional(plan: FactorPlan) -> bool:
    """Whether offset heads read a position code (more than one offset read, except a tier's matched
    route: the plain route at k > 1, a tier's look-back at k = 2)."""
    return width(plan) > 1 and not matched(plan)


def modulus(plan: FactorPlan) -> int:
    """M = :func:`width` (k; k - 1 for a definite tier): the tier count is matched modulo M, its residue
    one-hot (the tier lemma, k >= 3: the counts c_t - j, j < M, have distinct residues and no later
    count shares one).  The smallest M keeps the program proof's memory small (per residue, the
    letter at its last visit)."""
    return width(plan)


def _recent_heads(plan: FactorPlan, ws: Workspace, max_len: int) -> list[Head]:
    """A tier's layer 1: the codes (offsets 0..k-1) of the most recent tier letter (Lemma 16)."""
    return [recent_flag_head(f"fac.last{j}", ws["fac:tier"], ws["pos:recency"], ws["one"], ws[code(j)],
                             ws[f"fac:last{j}"], max_len, value_range=float(n - 1))
            for j, n in enumerate(n_codes(plan))]


def _match_head(plan: FactorPlan, ws: Workspace, j: int, max_len: int) -> Head:
    """A tier's layer 2 (k >= 3): the last position whose tier count is c_t - j mod M (Theorem 12's
    nearest value, on one-hot residues), else BOS; copies its most recent tier letter's offset-j
    code into ``back(j)``.  Scores beta ([c_s = c_t - j mod M] + lambda s), BOS's beta / 2 with
    lambda = 1 / (2 (T + 1)): a match beats BOS, and BOS every mismatch, by at least beta lambda,
    the latest match every earlier one too."""
    M = modulus(plan)
    lam = 1.0 / (2.0 * (max_len + 1))
    t = attention_temperature(max_len, value_range=float(n_codes(plan)[j] - 1), score_gap=lam,
                              tolerance=STEP_TOLERANCE / 2)
    beta = t["beta"]
    W_Q, W_K = np.zeros((M + 1, M + 2)), np.zeros((M + 2, M + 2))  # rows: residue, one / residue, pos:index, bos
    W_Q[np.arange(M), (np.arange(M) - j) % M] = beta  # the residue of c_t - j
    W_K[:M, :M] = np.eye(M)
    W_Q[M, M], W_K[M, M] = beta * lam, 1.0
    W_Q[M, M + 1], W_K[M + 1, M + 1] = beta / 2, 1.0
    notes = {"kind": "nearest-value", "offset": -j, "modulus": M, "lambda": lam, **t}
    return Head(f"fac.back{j}", W_Q, W_K, np.ones((1, 1)), np.ones((1, 1)), notes,
                reads={"query": ("fac:tcode", "one"), "key": ("fac:tcode", "pos:index", "bos"),
                       "value": (f"fac:last{j}",)}, writes=(back(j),),
                obligation=Match(f"fac.back{j}", "fac:tcode", "fac:tcode", np.eye(M), (np.arange(M) - j) % M,
                                 f"fac:last{j}", back(j)))


def _tier_back(plan: FactorPlan, ws: Workspace, code_: PositionCode) -> Head:
    """A tier's layer 2 head: the offset-1 code of the most recent tier letter before t (Theorem 10's
    look-back on layer 1's output), the tier letter before the most recent one when t is a tier letter."""
    return offset_head("fac.back1", ws["pos"], code_, ws["bos"], ws["one"], 1, ws["fac:last1"], ws[back(1)],
                       value_range=float(n_codes(plan)[1] - 1))


def precision(plan: FactorPlan, code_: PositionCode, max_len: int, eps: float) -> dict[str, float]:
    """Worst-case rounding margins (> 1 safe; module docstring)."""
    out = {"position_margin": code_.precision_margin(eps)} if positional(plan) else {}
    if matched(plan) or not plan.definite:  # a prefix-mean head: the tier count's or the factors'
        out["prefix_count_margin"] = STEP_TOLERANCE / (eps * max_len * (max_len + 1))
    if plan.tier:  # half the recency gap over the rounding of scores up to 1.5 beta (constructions/local.py);
        # a match head's too: gap beta lambda = beta / (2 (T + 1)), scores up to beta (1 + lambda T) < 1.5 beta
        out["recency_margin"] = recency_margin(max_len, eps)
    out["margin"] = min(out.values())
    return out


def _check_plan(plan: FactorPlan, max_len: int, params: int, max_params: int) -> None:
    check_params(params, max_params, f"a factors model with k = {plan.k}, {len(plan.factors)} factors and "
                 f"{len(plan.keys):,} final keys at max_len {max_len}")

def build(automaton: Semiautomaton, plan: FactorPlan, options: BuildOptions) -> tuple[Program, dict[str, Any]]:
    """The program and its metadata (the plan holds the start's tables)."""
    prog = program(plan, options.max_len, options.positions)
    params = program_params(prog)
    _check_plan(plan, options.max_len, params, options.max_params)
    prec = precision(plan, position_code(options.positions, options.max_len), options.max_len, options.eps)
    warnings = []
    if prec["margin"] < 1:
        weak = [k for k, v in prec.items() if k != "margin" and v < 1]
        warnings.append(f"factors at max_len {options.max_len}: the worst-case rounding bound of this dtype for "
                        f"{', '.join(weak)} exceeds its tolerance (margin {prec['margin']:.2g}); verify before "
                        f"trusting, or use float64")
    meta = {"method": NAME, "positions": options.positions if positional(plan) else None,
            "position_precision_margin": prec.get("position_margin"), "warnings": warnings,
            NAME: {"k": plan.k, "threshold": plan.threshold, "windows": len(plan.windows),
                   "factors": len(plan.factors), "groups": plan.n_groups, "keys": len(plan.keys),
                   "tier": len(plan.tier),
                   "offset_codes": n_codes(plan), "params": params, "precision": prec},
            "layers": [b.notes() for b in prog.blocks]}
    return prog, meta


def set_start(model: CompiledTransformer, plan: FactorPlan, start: str) -> None:
    """Detect again from ``start`` and rebuild in place; InputError when the description's shape changes."""
    check_start(model.automaton, start)
    other = from_dict({**model.metadata.automaton, "start": start})
    new, why = find(other)
    same = "from {start!r} the factor description of this model's shape no longer holds; compile again with that start"
    if new is None or (new.k, new.threshold, len(new.windows), new.n_groups, n_codes(new), len(new.keys)) != \
            (plan.k, plan.threshold, len(plan.windows), plan.n_groups, n_codes(plan), len(plan.keys)):
        raise InputError(same.format(start=start) + (f" ({why})" if new is None else ""))
    rebuild(model, build, new, start, meta={"plan": new.to_dict()}, same_shape=same.format(start=start))


# ---------------------------------------------------------------------------------------
# the registry entry: the description is the plan


def find(automaton: Semiautomaton) -> tuple[FactorPlan | None, str]:
    """The factor description with the smallest k, then threshold; else its tier's (k = 2); else
    None and both reasons."""
    plan, reason = detect(automaton)
    if plan is not None:
        return plan, reason
    tiered, why = detect_tier(automaton)
    return (tiered, why) if tiered is not None else (None, f"{reason}; {why}")


def applies(automaton: Semiautomaton) -> FactorPlan | Refusal:
    """The factor description (or its tier's), or why there is none."""
    plan, reason = find(automaton)
    if plan is None:
        return Refusal(f"factors needs the state as a function of the last k - 1 letters and capped counts of "
                       f"k-factors (locally threshold testable), or of its tier's: {reason}")
    return plan


def estimate(plan: FactorPlan, max_len: int, positions: str = "sinusoidal") -> Cost:
    """The plan's layers and the exact parameter count (the float64 program laid out)."""
    params = program_params(program(plan, max_len, positions))
    _check_plan(plan, max_len, params, MAX_PARAMS)
    return Cost(plan.layers, params)


def describe(plan: FactorPlan, automaton: Semiautomaton) -> str:
    capped = f"counts capped at {plan.threshold}" if plan.threshold > 1 else "occurrence"
    on = f"tier-based ({len(plan.tier)} of {plan.n_symbols} letters), " if plan.tier else ""
    if plan.definite:
        return (f"{on}definite, k = {plan.k}: the state is a function of {len(plan.windows)} window patterns "
                f"of the last {plan.k - 1} tier letters ({len(plan.keys)} keys)")
    return (f"{on}locally {'threshold ' * (plan.threshold > 1)}testable, k = {plan.k}: the state is a function of "
            f"{len(plan.windows)} window patterns and the {capped} of {len(plan.factors)} factors in "
            f"{plan.n_groups} groups ({len(plan.keys)} keys)")


CONSTRUCTION = Construction(
    name=NAME, theorem="locally threshold testable automata", applies=applies, estimate=estimate, build=build,
    set_start=set_start, plan_to_json=FactorPlan.to_dict, plan_from_json=FactorPlan.from_dict, describe=describe,
    obligations=declared_obligations(build),
)
