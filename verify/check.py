"""Check a compiled model against the step-by-step reference.

What is checked, each at every position:

* exhaustive: every sequence of the largest length L with |Sigma|^L within budget
  (the model is causal, so position t of a length-L input is the output for its
  length-t prefix: this covers every sequence of length <= L);
* random: ``samples`` uniform sequences of exactly max_len (seeded);
* adversarial families at max_len: constant runs, alternations, a long run then one
  different symbol (and the reverse), periodic sweeps with periods near powers of two;
* layer-wise invariants on named subspaces, from the model's construction in the
  registry and the plan its checkpoint carries (scan: after layer l, position t holds
  the map of its last 2^l letters, and the scratch is cleared; gridworld: prefix
  sums, residue codes, nearest-value heads and coordinates, and wall-pinned and
  wall-free walks added to the adversarial families; krohn-rhodes: every cascade
  component's value per block).  A checkpoint naming no registered construction, or
  carrying no plan, is an error.

A model is exact only if every scored position agrees and every invariant holds.

A partial automaton holds under the promise of legal inputs (docs/promises.md), and every check
then speaks for legal inputs only: the exhaustive check runs every legal word of the largest
length L whose legal words fit the budget (and every shorter one that cannot be continued),
the random sequences draw each letter uniformly among the legal continuations that can still
reach max_len, and the adversarial families are scored up to their first illegal letter (rows
with none dropped).  Positions outside the domain are never scored.

Margins (``VerificationResult.margins``), measured on sample inputs:

* ``heads``: per attention head, the worst (smallest) score gap between the intended
  key and the best other key, and the worst softmax mass leaked off the intended key
  (scan: t - 2^(l-1) or BOS; gridworld: the last position with the wanted value;
  krohn-rhodes: the argmax key; uniform heads report the spread of their scores);
* ``mlps``: per lookup MLP, the worst distance of its input from the nearest decision
  boundary of its step units = declared input tolerance - measured input noise;
* ``readout_min_logit_margin``: the smallest top-vs-second logit gap at a correct position.

How much is run: every input through the model's own forward (fused attention, the
MLP over bounded chunks of positions: memory does not grow with the batch or the length),
in batches bounded by memory and by work (:func:`batch_rows`); optionally within a time
budget, which cuts the checks honestly (``checked["cut_by_time_budget"]``); the layer-wise
invariants, which need the explicit attention path and every layer's cache, on a bounded
subset (4 sequences up to length 1024, 1 above, one of each of the construction's own
families), and above ``LAYERWISE_MAX_LEN`` head margins on one sequence through the
query-chunked forward of :mod:`verify.chunked`.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import torch

from compiler.automata.errors import BudgetError, CheckpointError, ShortcutError
from compiler.automata.moore import reachable_states
from compiler.automata.promise import exhaustive_legal_length, legal_mask, legal_words, sample_legal
from compiler.automata.simulate import simulate
from compiler.automata.spec import Semiautomaton, from_dict
from constructions import registry
from constructions.basis import basis_of
from constructions.checkpoint import check_header, header_intact
from constructions.construction import Construction
from constructions.labels import readout_of

from .chunked import forward_chunked, positional_layers
from . import recurrent
from .recurrent import RecurrentSimulator

DEFAULT_EXHAUSTIVE_BUDGET = 1 << 15
DEFAULT_SAMPLES = 64
SCORE_BUDGET = 1 << 26
"""Largest batch * heads * T^2 evaluated at once (attention scores are [B, H, T, T])."""
LAYERWISE_MAX_LEN = 4096
"""Layer-wise invariants cache every layer's [H, T, T] pattern: only up to this length."""
CHUNK = 1024
ROTATED_NOTE = ("layer-wise invariants skipped: they read named residual dims, and this model's residual is in a "
                "rotated basis (meta['basis']); every position is still checked against the simulation")


@dataclass
class Counterexample:
    """The first disagreement: the input up to the failing position and a trace."""

    check: str
    input: list[str]
    position: int  # 1-based position of the first wrong state
    expected: str
    got: str
    trace: list[dict[str, str]]


@dataclass
class VerificationResult:
    exact: bool
    automaton: str
    method: str
    max_len: int
    dtype: str
    seed: int
    checked: dict[str, Any]
    n_sequences: int
    n_positions: int
    n_errors: int
    accuracy_by_position: list[float]
    margins: dict[str, Any]
    invariants: dict[str, Any]
    counterexample: Counterexample | None = None
    notes: list[str] = field(default_factory=list)
    seeds: dict[str, int] = field(default_factory=dict)
    certificate: dict[str, Any] | None = None  # verify/certify.py's, when the caller ran it

    @property
    def accuracy(self) -> float:
        return 1.0 - self.n_errors / max(self.n_positions, 1)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["accuracy"] = self.accuracy
        return d


def exhaustive_length(n_symbols: int, max_len: int, budget: int) -> int:
    """Largest L <= max_len with n_symbols^L <= budget (at least 1)."""
    L = 1
    while L < max_len and n_symbols ** (L + 1) <= budget:
        L += 1
    return L


def all_sequences(n_symbols: int, length: int) -> np.ndarray:
    """Every sequence of ``length`` symbols [n^length, length], the first symbol varying fastest:
    the first n^j rows hold every sequence of length j as their prefixes (so a run cut after
    k rows has covered every input of length log_n k, see :func:`exhaustive_covered`)."""
    idx = np.arange(n_symbols**length, dtype=np.int64)[:, None]
    return (idx // n_symbols ** np.arange(length, dtype=np.int64)) % n_symbols


def exhaustive_covered(n_symbols: int, rows: int, length: int) -> int:
    """The longest j <= ``length`` whose every sequence is a prefix of the first ``rows`` rows of
    :func:`all_sequences` (the model is causal: those inputs were all checked)."""
    if n_symbols < 2:
        return length if rows else 0
    j = 0
    while j < length and n_symbols ** (j + 1) <= rows:
        j += 1
    return j


MEMORY_FRACTION = 0.5
"""verify refuses a run whose estimated memory exceeds this fraction of the machine's RAM."""


def memory_limit() -> int:
    """Bytes verify may plan to hold: half the physical memory (4 GiB when it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * MEMORY_FRACTION)
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 4 << 30


def estimate_memory(n_symbols: int, max_len: int, samples: int, exhaustive_budget: int) -> int:
    """Bytes the input sets of :func:`verify` hold at once: the exhaustive and random token arrays
    (int64) with as much again for their reference states and the generator's temporaries
    (the model runs them in bounded batches, see :func:`batch_rows`)."""
    L = exhaustive_length(n_symbols, max_len, exhaustive_budget)
    return 3 * 8 * (n_symbols**L * L + samples * max_len)


def check_options(n_symbols: int, max_len: int, *, samples: int, seed: int, exhaustive_budget: int,
                  family_limit: int | None, n_states: int = 1) -> None:
    """Every option in range, the estimated memory within :func:`memory_limit`, and the recurrent
    reference for ``n_states`` states within its bound (:func:`verify.recurrent.check_size`):
    BudgetError before anything is allocated."""
    for name, value, low in (("samples", samples, 0), ("seed", seed, 0), ("exhaustive_budget", exhaustive_budget, 1),
                             ("family_limit", 1 if family_limit is None else family_limit, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ShortcutError(f"{name} must be an integer >= {low}, got {value!r}")
    recurrent.check_size(n_states, n_symbols, min(recurrent.MAX_BYTES, memory_limit()))
    need, limit = estimate_memory(n_symbols, max_len, samples, exhaustive_budget), memory_limit()
    if need > limit:
        L = exhaustive_length(n_symbols, max_len, exhaustive_budget)
        raise BudgetError(f"this verification would hold about {need / 2**30:.1f} GiB of inputs "
                          f"({n_symbols}^{L} exhaustive sequences of length {L}, {samples} random of length {max_len}); "
                          f"the limit here is {limit / 2**30:.1f} GiB: lower the exhaustive budget or the samples")


@contextmanager
def _blame_edited_header(model) -> Iterator[None]:
    """A construction's checks failing on a model whose header was edited after compiling, or
    carries no header digest, is the header's fault (bad input), not the tool's."""
    try:
        yield
    except ShortcutError:
        raise
    except Exception as e:
        intact = header_intact(model)
        if intact is not True:  # edited, or without the digest that would tell (so it may have been)
            how = "was edited after compiling" if intact is False else "carries no digest (header_sha256)"
            raise CheckpointError(f"the model's header {how} and does not fit its weights "
                                  f"({type(e).__name__}: {str(e)[:120]}); recompile it from the spec") from None
        raise


def adversarial_families(n_symbols: int, T: int) -> dict[str, np.ndarray]:
    """Named families of hard-looking inputs of length T."""
    fams: dict[str, list[list[int]]] = {"constant": [], "alternate": [], "run-then-switch": [],
                                        "switch-then-run": [], "periodic": []}
    syms = range(min(n_symbols, 8))
    for a in syms:
        fams["constant"].append([a] * T)
    for a, b in itertools.permutations(syms, 2):
        fams["alternate"].append([a if i % 2 == 0 else b for i in range(T)])
        fams["run-then-switch"].append([a] * (T - 1) + [b])
        fams["switch-then-run"].append([b] + [a] * (T - 1))
    for k in range(1, max(2, math.ceil(math.log2(T))) + 1):
        for p in {2**k - 1, 2**k + 1}:
            if p >= 2:
                fams["periodic"].append([(i % p) % n_symbols for i in range(T)])
    return {k: np.array(v, dtype=np.int64).reshape(-1, T) for k, v in fams.items() if v}


BATCH_ELEMENTS = 1 << 25
"""Largest batch * (T+1) * (the per-position width the forward holds: residual, attention
projections and logits) evaluated at once, about 128 MB of float32; the MLP chunks its own
hidden layers (``constructions.model.CHUNK_ELEMENTS``)."""
BATCH_FLOPS = 1 << 33
"""Largest matmul FLOPs of one batch (:func:`forward_flops`), a fraction of a second here:
the step at which progress is reported and the time budget is looked at."""
SCORE_BUDGET = 1 << 26
"""Largest batch * heads * T^2 when the model runs its explicit attention path (``model.fused`` off)."""


def forward_flops(model, T: int) -> float:
    """Matrix-product FLOPs (2 per multiply-add) of one forward pass over one sequence of length
    T, BOS included, as the dense weights compute it: per block the query/key/value and output
    projections, the causal scores and weighted sums (position t reads t+1 keys), the MLP; then
    the unembedding.  Softmax, ReLU and additions are not counted."""
    c = model.config
    d, e, P = c["d_model"], c["d_head"], T + 1
    flops = 2.0 * P * d * c["n_out"]
    for b in c["blocks"]:
        H = b["n_heads"]
        flops += 2.0 * P * 4 * d * H * e + 2.0 * 2 * H * e * P * (P + 1) / 2
        sizes = [d, *b["mlp_hidden"], d] if b["mlp_hidden"] else []
        flops += sum(2.0 * P * x * y for x, y in zip(sizes, sizes[1:]))
    return flops


def batch_rows(model, T: int) -> int:
    """Sequences of length T per batch: bounded by memory (:data:`BATCH_ELEMENTS`; on the
    explicit attention path also :data:`SCORE_BUDGET`) and by work (:data:`BATCH_FLOPS`)."""
    c = model.config
    H = max(b["n_heads"] for b in c["blocks"]) if c["blocks"] else 1
    per_position = 4 * c["d_model"] + 4 * H * c["d_head"] + c["n_out"]
    rows = min(BATCH_ELEMENTS // ((T + 1) * per_position), int(BATCH_FLOPS // max(forward_flops(model, T), 1.0)))
    if not model.fused:
        rows = min(rows, SCORE_BUDGET // (H * (T + 1) ** 2))
    return max(1, rows)


class _Tally:
    """Accumulates errors, margins and the first counterexample over checks."""

    def __init__(self, automaton: Semiautomaton, max_len: int, readout: dict[str, Any] | None = None) -> None:
        self.a = automaton
        self.labels = _LabelReference(automaton, readout) if readout is not None else None
        self.names = tuple(readout["labels"]) if readout is not None else automaton.states
        self.n_sequences = 0
        self.n_positions = 0
        self.n_errors = 0
        self.correct_at = np.zeros(max_len)
        self.count_at = np.zeros(max_len)
        self.min_margin = math.inf
        self.counterexample: Counterexample | None = None
        self.rnn = RecurrentSimulator(automaton, torch.float64)
        self.rnn_positions = 0

    def reference(self, tokens: np.ndarray) -> np.ndarray:
        """Reference states [B, T]; the integer simulation and the recurrent module must agree."""
        expected = simulate(self.a, tokens)
        rnn = self.rnn.states(torch.from_numpy(tokens)).numpy()
        if not np.array_equal(rnn, expected):  # the two references must agree before we judge the model
            raise RuntimeError(f"reference disagreement on {self.a.name}: recurrent module vs integer simulation")
        self.rnn_positions += tokens.size
        return expected if self.labels is None else self.labels(tokens, expected)

    def add(self, check: str, tokens: np.ndarray, logits: torch.Tensor, expected: np.ndarray | None = None,
            mask: np.ndarray | None = None) -> None:
        """Score ``logits`` against the reference at every position (where ``mask`` is True)."""
        if expected is None:
            expected = self.reference(tokens)
        scored = np.ones(tokens.shape, dtype=bool) if mask is None else mask
        lg = logits.detach().double()
        got = lg.argmax(-1).numpy()
        top2 = lg.topk(2, dim=-1).values if lg.shape[-1] > 1 else None
        if top2 is not None:
            correct = (got == expected) & scored
            if correct.any():
                self.min_margin = min(self.min_margin, float((top2[..., 0] - top2[..., 1]).numpy()[correct].min()))
        ok = (got == expected) | ~scored
        B, T = tokens.shape
        self.n_sequences += B
        self.n_positions += int(scored.sum())
        self.n_errors += int((~ok).sum())
        self.correct_at[:T] += (ok & scored).sum(0)
        self.count_at[:T] += scored.sum(0)
        if self.counterexample is None and not ok.all():
            b, t = map(int, np.argwhere(~ok)[0])
            self.counterexample = self._counterexample(check, tokens[b], expected[b], got[b], t, lg[b].numpy())

    def _counterexample(self, check: str, toks, exp, got, t: int, logits: np.ndarray) -> Counterexample:
        """The failing sequence up to position t; per step the reference and model states and
        ``logit_gap`` = logit of the reference state minus the best other logit (< 0: wrong)."""
        a = self.a
        trace = []
        for i in range(t + 1):
            row = logits[i]
            others = np.delete(row, exp[i])
            gap = float(row[exp[i]] - others.max()) if len(others) else math.inf
            trace.append({"symbol": a.alphabet[toks[i]], "expected": self.names[exp[i]], "got": self.names[got[i]],
                          "logit_gap": gap})
        return Counterexample(check, [a.alphabet[x] for x in toks[: t + 1]], t + 1,
                              self.names[exp[t]], self.names[got[t]], trace)


class _LabelReference:
    """Reference labels for a label model: the source automaton (the one the user gave, before
    minimisation) is simulated and its outputs are the expected labels; the labels the readout's
    state -> label map gives the compiled automaton's reference states (the minimal Moore machine
    or the source itself, ``readout["states"]``) must agree (else the map was wrong)."""

    def __init__(self, quotient: Semiautomaton, readout: dict[str, Any]) -> None:
        self.source = from_dict(readout["source"])
        if self.source.alphabet != quotient.alphabet:
            raise CheckpointError("its readout's source automaton has another alphabet than its spec")
        if self.source.outputs is None:
            raise CheckpointError("its readout's source automaton has no outputs")
        index = {x: i for i, x in enumerate(readout["labels"])}
        seen = set(reachable_states(self.source))
        unknown = sorted({x for q, x in enumerate(self.source.outputs) if q in seen} - set(index))
        if unknown:
            raise CheckpointError(f"its readout's source automaton has outputs outside its labels: {unknown[:3]}")
        # a label only unreachable states carry is not among a quotient's labels: -1, never expected
        self.source_label = np.array([index.get(x, -1) for x in self.source.outputs], dtype=np.int64)
        self.state_label = np.array(readout["state_label"], dtype=np.int64)

    def __call__(self, tokens: np.ndarray, quotient_states: np.ndarray) -> np.ndarray:
        expected = self.source_label[simulate(self.source, tokens)]
        legal = legal_mask(self.source, tokens)  # under a promise the two agree on legal positions only
        if not np.array_equal(self.state_label[quotient_states][legal], expected[legal]):
            raise RuntimeError("reference disagreement: the minimal Moore machine's labels differ from the source's")
        return expected


class _ChunkMargins:
    """Head margins collected while :func:`verify.chunked.forward_chunked` runs (long inputs)."""

    def __init__(self, model, construction: Construction) -> None:
        self.model = model
        self.target = construction.head_target  # None: the argmax key
        self.worst: dict[tuple[int, int], list[float]] = {}
        self.what: dict[int, str] = {}

    def __call__(self, l: int, h: int, i: int, j: int, scores: torch.Tensor, pattern: torch.Tensor) -> None:
        """Worst gap and leak over rows i..j-1 (row 0, BOS, has no other key); overwrites ``scores``."""
        rows = torch.arange(i, j)
        if self.target is not None:
            key, self.what[l] = self.target(l, rows)
            tgt = key[None, :, None].expand(scores.shape[0], -1, 1).to(scores.device)
        else:
            tgt = pattern.argmax(-1, keepdim=True)
        keep = slice(1 if i == 0 else 0, None)
        want = scores.gather(-1, tgt)[:, keep, 0].double()
        leak = float((1.0 - pattern.gather(-1, tgt)[:, keep, 0].double()).max()) if want.numel() else 0.0
        other = scores.scatter_(-1, tgt, float("-inf")).max(-1).values[:, keep].double()
        gap = want - other
        fin = torch.isfinite(gap)
        w = self.worst.setdefault((l, h), [math.inf, 0.0])
        if fin.any():
            w[0] = min(w[0], float(gap[fin].min()))
        w[1] = max(w[1], leak)

    def heads(self) -> list[dict[str, Any]]:
        out = []
        for (l, h), (gap, leak) in sorted(self.worst.items()):
            notes = (self.model.metadata.layers or [{}] * (l + 1))[l].get("heads", [{}])
            n = notes[h] if h < len(notes) else {}
            out.append({"layer": l + 1, "head": n.get("kind", f"head{h}"),
                        "target": self.what.get(l, "argmax key"),
                        "worst_score_gap": gap, "worst_leaked_mass": leak,
                        "derived_leak_bound": n.get("leak_bound"), "score_gap": n.get("score_gap")})
        return out


def _subset(rows: np.ndarray, limit: int | None) -> np.ndarray:
    """At most ``limit`` rows, evenly spread (all of them when limit is None)."""
    if limit is None or len(rows) <= limit:
        return rows
    idx = np.unique(np.linspace(0, len(rows) - 1, max(limit, 1)).round().astype(int))
    return rows[idx]


@dataclass
class _Check:
    """One named input set and how much of it was run (rows are run in order)."""

    name: str
    tokens: np.ndarray
    done: int = 0
    mask: np.ndarray | None = None  # scored positions (the legal ones under a promise); None: all

    @property
    def positions(self) -> int:
        return int(self.tokens.size)


class _Clock:
    """The time budget: ``spent()`` once ``budget`` seconds have passed since the start (never without one)."""

    def __init__(self, budget: float | None, clock: Callable[[], float]) -> None:
        self.budget, self.clock, self.start = budget, clock, clock()

    def elapsed(self) -> float:
        return self.clock() - self.start

    def spent(self) -> bool:
        return self.budget is not None and self.elapsed() >= self.budget


class _Rate:
    """The forward's measured work rate (:func:`forward_flops` per second of wall time), so that a
    time budget refuses, before it starts, a check whose single sequence would take longer than
    the whole budget (the first batch of a check always runs: at a max_len of a million, one
    forward takes hours)."""

    def __init__(self) -> None:
        self.flops, self.seconds = 0.0, 0.0

    @contextmanager
    def measure(self, model, shape: tuple[int, int]) -> Iterator[None]:
        start = time.perf_counter()
        yield
        self.seconds += time.perf_counter() - start
        self.flops += shape[0] * forward_flops(model, shape[1])

    def refuse_beyond(self, model, length: int, budget: float) -> None:
        """ShortcutError when one sequence of ``length`` would take over ``budget`` seconds at the
        rate measured so far (nothing is refused before a first batch has been timed)."""
        if self.flops <= 0 or self.seconds <= 0:
            return
        eta = forward_flops(model, length) * self.seconds / self.flops
        if eta > budget:
            raise ShortcutError(f"verifying one input of length {length} would take about {eta:,.0f} s at the "
                                f"{self.flops / self.seconds / 1e9:.2g} GFLOP/s measured so far, over the time "
                                f"budget of {budget:g} s: raise the budget (--verify-time / --time-budget), or "
                                f"compile with --no-verify and a smaller --max-len")


RATE_PROBE = 1024
"""Side of the float32 matrices :func:`matmul_rate` multiplies."""


def matmul_rate(device: torch.device | str = "cpu", seconds: float = 0.1) -> float:
    """FLOP/s of ``RATE_PROBE``-square float32 matrix products on ``device``, the best of the
    products run within ``seconds``: an upper bound on the rate of a forward pass, whose
    attention and small MLPs run slower than one dense product."""
    a = torch.ones(RATE_PROBE, RATE_PROBE, device=device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    a @ a  # warm-up: thread pool, kernels
    sync()
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end or best == float("inf"):
        start = time.perf_counter()
        a @ a
        sync()
        best = min(best, time.perf_counter() - start)
    return 2.0 * RATE_PROBE ** 3 / max(best, 1e-9)


def refuse_hopeless(layers: int, max_len: int, budget: float, device: torch.device | str = "cpu") -> None:
    """BudgetError, before compiling, when one input of ``max_len`` through ``layers`` attention
    layers cannot be verified within ``budget`` seconds: each layer computes at least the causal
    scores and weighted sums of one head of width 1 (:func:`forward_flops` with H = e = 1), and no
    forward runs faster than :func:`matmul_rate`.  (The first batch of every check runs whatever
    the budget, and the adversarial families are full-length.)"""
    P = max_len + 1
    flops = layers * 2.0 * 2 * P * (P + 1) / 2
    rate = matmul_rate(device)
    if flops / rate > budget:
        raise BudgetError(f"verifying one input of length {max_len} through at least {layers} attention layers needs at least "
                          f"{flops:.1e} FLOP, over {flops / rate:,.0f} s at this machine's best {rate / 1e9:.3g} "
                          f"GFLOP/s, past the verification budget of {budget:g} s: compile with --no-verify, a smaller "
                          f"--max-len, or a larger --verify-time")


@contextmanager
def _on_cpu(model) -> Iterator[None]:
    """The model on the CPU for the ``with`` body (the constructions' checks read their caches
    with numpy), back on its device afterwards."""
    device = model.device
    if device.type == "cpu":
        yield
        return
    model.to("cpu")
    try:
        yield
    finally:
        model.to(device)


def _label_codes(model, tokens: np.ndarray) -> dict[str, Any] | None:
    """The label lookup's input (``constructions.labels.label_lookup``): the state codes after the
    last block (what the lookup fused into its MLP reads, up to the rounding of its composed
    weights) against the recorded codes of the reference state (none checked where the
    construction's override state holds), within the lookup's input tolerance.  None for a
    model without such a lookup."""
    r = readout_of(model.meta)
    notes = (r or {}).get("notes") or {}
    if not notes.get("input_tolerance") or "code_dim_indices" not in notes:
        return None
    codes, tol = np.asarray(notes["codes"], dtype=np.float64), float(notes["input_tolerance"])
    dims = [int(d) for d in notes["code_dim_indices"]]
    states = simulate(model.automaton, tokens)
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    got = cache[f"blocks.{len(model.blocks) - 1}.hook_resid_post"][:, 1:, dims].double().numpy()
    dev = np.abs(got - codes[states]).max(-1)
    if notes.get("codes_skip_state") is not None:
        dev = np.where(states == notes["codes_skip_state"], 0.0, dev)
    worst = float(dev.max()) if dev.size else 0.0
    return {"layer": len(model.blocks), "mlp": f"{notes.get('reader', 'labels.lookup')} ({notes.get('lookup')})",
            "inputs": ", ".join(notes["code_dims"]), "input_tolerance": tol, "worst_input_noise": worst,
            "distance_to_boundary": tol - worst}


def _layerwise_sample(T: int, sample: np.ndarray, own: dict[str, np.ndarray], rows: int) -> np.ndarray:
    """The bounded input set of the layer-wise invariants: ``rows`` of ``sample`` and one of each of
    the construction's own families."""
    extra = [v[:1] for v in own.values() if len(v)]
    return np.concatenate([sample[:rows], *extra])


def _legal_check(domain: Semiautomaton, name: str, tokens: np.ndarray) -> _Check:
    """A family's check: under a promise, scored up to each row's first illegal letter, rows with
    no legal position dropped; every position of every row otherwise."""
    if not domain.partial:
        return _Check(name, tokens)
    mask = legal_mask(domain, tokens)
    keep = mask[:, 0] if tokens.shape[1] else np.zeros(len(tokens), dtype=bool)
    return _Check(name, tokens[keep], mask=mask[keep])


def _references(tally: _Tally, checks: list[_Check]) -> list[np.ndarray]:
    """Each check's reference states, the checks of one length in one call (the recurrent
    module steps through the length once for all of them)."""
    out: list[np.ndarray] = [np.zeros(c.tokens.shape, np.int64) for c in checks]
    for length in sorted({c.tokens.shape[1] for c in checks if len(c.tokens)}):
        group = [i for i, c in enumerate(checks) if len(c.tokens) and c.tokens.shape[1] == length]
        states = tally.reference(np.concatenate([checks[i].tokens for i in group]))
        for i, part in zip(group, np.split(states, np.cumsum([len(checks[i].tokens) for i in group])[:-1])):
            out[i] = part
    return out


def verify(model, *, samples: int = DEFAULT_SAMPLES, seed: int = 0,
           exhaustive_budget: int = DEFAULT_EXHAUSTIVE_BUDGET, families: bool = True,
           family_limit: int | None = None, layerwise: bool = True, forward: str = "auto",
           progress: Callable[[str, int, int], None] | None = None, time_budget: float | None = None,
           clock: Callable[[], float] = time.monotonic) -> VerificationResult:
    """Run every check on ``model`` and return a structured result.

    ``family_limit`` keeps at most that many sequences of each adversarial family (evenly
    spread); ``forward``: "plain" or "auto" (the model's own forward: fused attention, the
    MLP over bounded chunks of positions, so memory stays bounded at any length), or "chunked"
    (:func:`verify.chunked.forward_chunked`, which also measures every head's margins on every
    batch).  ``progress(check, done, total)`` is called after every batch with positions
    (tokens) checked and planned; the last call has ``done == total`` (a run cut by the time
    budget shrinks ``total`` to what was done).

    The checks run in order (exhaustive, adversarial families, random) in batches of
    :func:`batch_rows` sequences.  With ``time_budget`` (seconds), a check's further batches
    are skipped once the budget is spent -- its first batch always runs, so every kind of
    check is represented -- and ``checked`` says how much of each ran (``cut``); the
    layer-wise invariants then run on one sequence.  The verdict only ever speaks for what
    was run: the exhaustive length is the longest one whose every sequence was a prefix of a
    checked input (see :func:`all_sequences`)."""
    if forward not in ("auto", "plain", "chunked"):
        raise ValueError(f"forward must be 'auto', 'plain' or 'chunked', got {forward!r}")
    if time_budget is not None and not (isinstance(time_budget, (int, float)) and time_budget > 0):
        raise ShortcutError(f"time_budget must be a positive number of seconds, got {time_budget!r}")
    check_header(model)
    construction, plan = registry.plan_of(model)
    a = model.automaton
    T = model.max_len
    check_options(a.n_symbols, T, samples=samples, seed=seed, exhaustive_budget=exhaustive_budget,
                  family_limit=family_limit, n_states=a.n_states)
    rotated = layerwise and basis_of(model.meta) is not None
    layerwise = layerwise and not rotated
    timer = _Clock(time_budget, clock)
    tally = _Tally(a, T, readout_of(model.meta))
    rng = np.random.default_rng(seed)
    domain = model.domain
    if domain.partial:
        L = exhaustive_legal_length(domain, T, exhaustive_budget)
        rand, rand_mask = sample_legal(domain, rng, samples, T)
        words, words_mask = legal_words(domain, L)
        exhaustive = _Check("exhaustive", words, mask=words_mask)
    else:
        L = exhaustive_length(a.n_symbols, T, exhaustive_budget)
        rand = rng.integers(0, a.n_symbols, size=(samples, T)) if samples else np.zeros((0, T), dtype=np.int64)
        rand_mask = None
        exhaustive = _Check("exhaustive", all_sequences(a.n_symbols, L))
    fams = adversarial_families(a.n_symbols, T) if families else {}
    own: dict[str, np.ndarray] = {}
    if families and construction.families is not None:
        with _blame_edited_header(model), _on_cpu(model):
            own = construction.families(model, plan, T, seed)
        fams.update(own)
    fams = {k: _subset(v, family_limit) for k, v in fams.items()}
    checks = [exhaustive, *(_legal_check(domain, f"adversarial:{name}", toks) for name, toks in fams.items()),
              _Check("random", rand, mask=rand_mask)]
    sample = rand if len(rand) else np.concatenate([v for v in fams.values()] or [np.zeros((0, T), np.int64)])
    lw_rows = 4 if T <= 1024 else 1
    lw_tokens = (_layerwise_sample(T, sample, own, lw_rows).size if layerwise and T <= LAYERWISE_MAX_LEN
                 and len(sample) else 0)
    total = sum(c.positions for c in checks) + lw_tokens
    done = 0
    chunk_margins = _ChunkMargins(model, construction)
    use_chunked = forward == "chunked"
    references = _references(tally, checks)
    rate = _Rate()
    with torch.no_grad():
        for c, expected_all in zip(checks, references):
            if not len(c.tokens):
                continue
            if time_budget is not None:
                rate.refuse_beyond(model, c.tokens.shape[1], time_budget)
            rows = batch_rows(model, c.tokens.shape[1])
            for i in range(0, len(c.tokens), rows):
                if i and timer.spent():
                    break
                batch = c.tokens[i : i + rows]
                tb = torch.from_numpy(batch)
                with rate.measure(model, batch.shape):
                    logits = (forward_chunked(model, tb, CHUNK, observe=chunk_margins) if use_chunked
                              else model(tb))
                tally.add(c.name, batch, logits.cpu(), expected_all[i : i + rows],
                          None if c.mask is None else c.mask[i : i + rows])
                c.done += len(batch)
                done += batch.size
                if progress:
                    progress(c.name, done, total)
    cut = {c.name: f"{c.done} of {len(c.tokens)} sequences" for c in checks if c.done < len(c.tokens)}
    if cut:
        lw_rows = 1
    used = "plain"
    if use_chunked:
        used = (f"query-chunked (chunks of {CHUNK} rows"
                + (", one attention pattern per batch: the heads are purely positional)"
                   if all(positional_layers(model)) else ")"))
    invariants: dict[str, Any] = {}
    notes: list[str] = []
    if domain.partial:
        notes.append(f"promise: inputs are legal ({len(domain.undefined)} transitions undefined); every check scored "
                     f"legal positions only")
    if layerwise and T <= LAYERWISE_MAX_LEN and len(sample):
        lw = _layerwise_sample(T, sample, own, lw_rows)
        if progress:
            progress("layer-wise invariants", done, total)
        with _blame_edited_header(model), _on_cpu(model), torch.no_grad():
            invariants = construction.invariants(model, plan, lw)
            lookup = _label_codes(model, lw)
        if lookup is not None:
            invariants["mlps"] = [*(invariants.get("mlps") or []), lookup]
            if lookup["distance_to_boundary"] <= 0:
                invariants.setdefault("failures", []).append(
                    f"layer {lookup['layer']} {lookup['mlp']}: the state codes it reads deviate by "
                    f"{lookup['worst_input_noise']:.3g} (tolerance {lookup['input_tolerance']:.3g})")
        done += lw.size
    elif layerwise and len(sample):
        invariants = {"checked": None, "skipped": f"layer-wise invariants need every layer's [H, T, T] pattern: "
                                                  f"skipped above max_len {LAYERWISE_MAX_LEN}", "failures": []}
        notes.append(invariants["skipped"])
    if rotated:
        invariants = {"checked": None, "skipped": ROTATED_NOTE, "failures": []}
        notes.append(ROTATED_NOTE)
    if not use_chunked and invariants.get("heads") is None and T > LAYERWISE_MAX_LEN and len(sample):
        with torch.no_grad():  # head margins on one sequence, a block of query rows at a time
            forward_chunked(model, torch.from_numpy(sample[:1]), CHUNK, observe=chunk_margins)
        notes.append("head margins measured on 1 sequence with the query-chunked forward")
    if progress:
        progress(f"time budget spent: {total - done:,} planned positions not run" if cut else "", done, done)
    if cut:
        notes.append(f"time budget of {time_budget:g} s spent after {timer.elapsed():.1f} s: ran "
                     + ", ".join(f"{k}: {v}" for k, v in cut.items())
                     + "; the layer-wise invariants ran on 1 sequence")
    exact = tally.n_errors == 0 and not invariants.get("failures")
    margins: dict[str, Any] = {"readout_min_logit_margin": tally.min_margin if tally.min_margin < math.inf else None}
    if invariants.get("heads") is not None:
        margins["heads"] = invariants.pop("heads")
    elif chunk_margins.worst:
        margins["heads"] = chunk_margins.heads()
    if invariants.get("mlps") is not None:
        margins["mlps"] = invariants.pop("mlps")
    ex = checks[0]
    return VerificationResult(
        exact=exact, automaton=a.name, method=construction.name, max_len=T,
        dtype=model.config["dtype"], seed=seed,
        seeds={"random_sequences": seed, **(construction.family_seeds(seed) if own and construction.family_seeds
                                            else {})},
        checked={"exhaustive_length": (L if ex.done == len(ex.tokens) else 0) if domain.partial
                 else exhaustive_covered(a.n_symbols, ex.done, L),
                 "promise": "legal inputs only" if domain.partial else None,
                 "exhaustive_sequences": ex.done, "exhaustive_sequence_length": L,
                 "random_sequences": checks[-1].done, "random_length": T,
                 "adversarial_families": {c.name.removeprefix("adversarial:"): c.done for c in checks[1:-1]},
                 "adversarial_family_limit": family_limit,
                 "layerwise": invariants.get("checked"),
                 "layerwise_sequences": invariants.get("sequences"),
                 "forward": used,
                 "recurrent_reference_agreed_positions": tally.rnn_positions,
                 "time_budget_s": time_budget,
                 "cut_by_time_budget": cut or None},
        n_sequences=tally.n_sequences, n_positions=tally.n_positions, n_errors=tally.n_errors,
        accuracy_by_position=(tally.correct_at / np.maximum(tally.count_at, 1)).tolist(),
        margins=margins, invariants=invariants, counterexample=tally.counterexample,
        notes=notes,
    )
