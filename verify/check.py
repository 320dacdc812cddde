"""Check a compiled model against the step-by-step reference.

What is checked, each at every position:

* exhaustive: every sequence of the largest length L with |Sigma|^L within budget
  (the model is causal, so position t of a length-L input is the output for its
  length-t prefix: this covers every sequence of length <= L);
* random: ``samples`` uniform sequences of exactly max_len (seeded);
* adversarial families at max_len: constant runs, alternations, a long run then one
  different symbol (and the reverse), periodic sweeps with periods near powers of two;
* layer-wise invariants on named subspaces: every tracked subspace against the construction's
  declared program (its obligations) after each layer's heads and MLP, each head's margins at
  the key its kind names (:mod:`verify.layerwise`; scan: after layer l, position t holds the
  map of its last 2^l letters), or the construction's own ``invariants`` where it gives them;
  the construction's own input families join the adversarial ones (gridworld: wall-pinned and
  wall-free walks).  A checkpoint naming no registered construction, or carrying no plan, is
  an error.

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
  (the key its obligation names, :func:`verify.layerwise.head_keys`: scan t - 2^(l-1) or BOS,
  gridworld the last position with the wanted value; prefix-sum heads report the spread of
  their scores and their weight outside their keys);
* ``mlps``: per MLP, the worst distance of its input from the nearest decision
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
from compiler.automata.promise import exhaustive_legal_length, legal_mask, legal_words, sample_legal
from compiler.automata.simulate import simulate
from compiler.automata.spec import Semiautomaton
from constructions import registry
from constructions.basis import basis_of
from constructions.checkpoint import check_header, header_intact
from constructions.construction import Construction, InvariantReport
from constructions.labels import readout_of
from constructions.model import CompiledTransformer

from .certify.record import Certificate
from .chunked import forward_chunked, positional_layers
from . import recurrent
from .cost import Clock, Rate, batch_rows
from .layerwise import invariants as program_invariants
from .tally import ChunkMargins, Counterexample, Tally

DEFAULT_EXHAUSTIVE_BUDGET = 1 << 15
DEFAULT_SAMPLES = 64
LAYERWISE_MAX_LEN = 4096
"""Layer-wise invariants cache every layer's [H, T, T] pattern: only up to this length."""
CHUNK = 1024
ROTATED_NOTE = ("layer-wise invariants skipped: they read named residual dims, and this model's residual is in a "
                "rotated basis (meta['basis']); every position is still checked against the simulation")
UNFOLDED_NOTE = ("layer-wise invariants skipped: they read the construction's layers, which this standard-shape model "
                 "unfolds into more blocks (meta['unfolded']); every position is still checked against the simulation")


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
    invariants: InvariantReport | None  # None: the layer-wise invariants were not asked for
    counterexample: Counterexample | None = None
    notes: list[str] = field(default_factory=list)
    seeds: dict[str, int] = field(default_factory=dict)
    certificate: Certificate | None = None  # verify/certify/'s, when the caller ran it

    @property
    def accuracy(self) -> float:
        return 1.0 - self.n_errors / max(self.n_positions, 1)

    @property
    def invariant_failures(self) -> list[str]:
        """The layer-wise invariants that did not hold (none when they did not run)."""
        return [] if self.invariants is None else self.invariants.failures

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: every field, the invariants in their JSON form (``{}`` when not run)."""
        d = asdict(self)
        d["invariants"] = {} if self.invariants is None else self.invariants.to_json()
        d["certificate"] = None if self.certificate is None else self.certificate.to_json()
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


def _layerwise_skipped(model) -> str | None:
    """Why the layer-wise invariants cannot read this model (a rotated basis, an unfolded model), or None."""
    if basis_of(model.meta) is not None:
        return ROTATED_NOTE
    return UNFOLDED_NOTE if "unfolded" in model.meta else None


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


def _references(tally: Tally, checks: list[_Check]) -> list[np.ndarray]:
    """Each check's reference states, the checks of one length in one call (the recurrent
    module steps through the length once for all of them)."""
    out: list[np.ndarray] = [np.zeros(c.tokens.shape, np.int64) for c in checks]
    for length in sorted({c.tokens.shape[1] for c in checks if len(c.tokens)}):
        group = [i for i, c in enumerate(checks) if len(c.tokens) and c.tokens.shape[1] == length]
        states = tally.reference(np.concatenate([checks[i].tokens for i in group]))
        for i, part in zip(group, np.split(states, np.cumsum([len(checks[i].tokens) for i in group])[:-1])):
            out[i] = part
    return out


def verify(model: CompiledTransformer, *, samples: int = DEFAULT_SAMPLES, seed: int = 0,
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
    skipped = _layerwise_skipped(model) if layerwise else None
    layerwise = layerwise and skipped is None
    timer = Clock(time_budget, clock)
    tally = Tally(a, T, readout_of(model.meta))
    inp = _inputs(model, construction, plan, samples=samples, seed=seed, exhaustive_budget=exhaustive_budget,
                  families=families, family_limit=family_limit)
    lw_rows = 4 if T <= 1024 else 1
    lw_tokens = (_layerwise_sample(T, inp.sample, inp.own, lw_rows).size if layerwise and T <= LAYERWISE_MAX_LEN
                 and len(inp.sample) else 0)
    run = _Run(sum(c.positions for c in inp.checks) + lw_tokens, progress)
    chunk_margins = ChunkMargins(model, construction)
    use_chunked = forward == "chunked"
    _run_checks(model, inp.checks, tally, timer, run, chunk_margins if use_chunked else None, time_budget)
    cut = {c.name: f"{c.done} of {len(c.tokens)} sequences" for c in inp.checks if c.done < len(c.tokens)}
    notes: list[str] = []
    if model.domain.partial:
        notes.append(f"promise: inputs are legal ({len(model.domain.undefined)} transitions undefined); every check "
                     f"scored legal positions only")
    invariants: InvariantReport | None = None
    if layerwise and len(inp.sample):
        invariants = _layerwise(model, construction, plan, inp, 1 if cut else lw_rows, run, notes)
    if skipped is not None:
        invariants = InvariantReport(None, skipped=skipped)
        notes.append(skipped)
    if not use_chunked and (invariants is None or invariants.heads is None) and T > LAYERWISE_MAX_LEN and len(inp.sample):
        with torch.no_grad():  # head margins on one sequence, a block of query rows at a time
            forward_chunked(model, torch.from_numpy(inp.sample[:1]), CHUNK, observe=chunk_margins)
        notes.append("head margins measured on 1 sequence with the query-chunked forward")
    if progress:
        progress(f"time budget spent: {run.total - run.done:,} planned positions not run" if cut else "", run.done,
                 run.done)
    if cut:
        notes.append(f"time budget of {time_budget:g} s spent after {timer.elapsed():.1f} s: ran "
                     + ", ".join(f"{k}: {v}" for k, v in cut.items())
                     + "; the layer-wise invariants ran on 1 sequence")
    checked = _checked(model, inp, invariants, family_limit, time_budget, cut or None, tally,
                       _forward_text(model, use_chunked))
    return VerificationResult(
        exact=tally.n_errors == 0 and not (invariants and invariants.failures), automaton=a.name, method=construction.name,
        max_len=T, dtype=model.config.dtype, seed=seed,
        seeds={"random_sequences": seed, **(construction.family_seeds(seed) if inp.own and construction.family_seeds
                                            else {})},
        checked=checked,
        n_sequences=tally.n_sequences, n_positions=tally.n_positions, n_errors=tally.n_errors,
        accuracy_by_position=(tally.correct_at / np.maximum(tally.count_at, 1)).tolist(),
        margins=_margins(tally, invariants, chunk_margins), invariants=invariants,
        counterexample=tally.counterexample, notes=notes,
    )


@dataclass
class _Inputs:
    """The input sets of one verification: the checks in the order they run (exhaustive, the
    adversarial families, random), the exhaustive length ``L``, the construction's own families
    and the sample the layer-wise invariants take their sequences from."""

    checks: list[_Check]
    L: int
    own: dict[str, np.ndarray]
    sample: np.ndarray


def _inputs(model, construction: Construction, plan: Any, *, samples: int, seed: int, exhaustive_budget: int,
            families: bool, family_limit: int | None) -> _Inputs:
    """Every input :func:`verify` runs: every (legal) word of the largest length within the
    exhaustive budget, the adversarial families (the generic ones and the construction's own,
    at most ``family_limit`` each), ``samples`` random (legal) sequences of max_len."""
    a, T, domain = model.automaton, model.max_len, model.domain
    rng = np.random.default_rng(seed)
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
    return _Inputs(checks, L, own, sample)


@dataclass
class _Run:
    """Progress through a verification: positions run of ``total`` planned, reported to ``progress``."""

    total: int
    progress: Callable[[str, int, int], None] | None
    done: int = 0

    def advance(self, what: str, positions: int) -> None:
        """``positions`` more run (by the check ``what``), reported."""
        self.done += positions
        if self.progress:
            self.progress(what, self.done, self.total)


def _run_checks(model, checks: list[_Check], tally: Tally, timer: Clock, run: _Run, chunked: ChunkMargins | None,
                time_budget: float | None) -> None:
    """Every check's rows through the model in batches of :func:`batch_rows`, scored by ``tally``
    (the query-chunked forward, collecting head margins, when ``chunked`` is given); a check's
    further batches are skipped once the time budget is spent (its first always runs)."""
    references = _references(tally, checks)
    rate = Rate()
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
                    logits = (forward_chunked(model, tb, CHUNK, observe=chunked) if chunked is not None
                              else model(tb))
                tally.add(c.name, batch, logits.cpu(), expected_all[i : i + rows],
                          None if c.mask is None else c.mask[i : i + rows])
                c.done += len(batch)
                run.advance(c.name, batch.size)


def _layerwise(model, construction: Construction, plan: Any, inp: _Inputs, rows: int, run: _Run,
               notes: list[str]) -> InvariantReport:
    """The layer-wise invariants (the construction's own, else the generic check of its declared
    program, :func:`verify.layerwise.invariants`, which under a promise checks each sequence up to
    its first illegal letter) on ``rows`` sample sequences and one of each of the construction's
    own families, with the label lookup's input codes; above :data:`LAYERWISE_MAX_LEN` skipped
    (said in ``notes``)."""
    T = model.max_len
    if T > LAYERWISE_MAX_LEN:
        skipped = (f"layer-wise invariants need every layer's [H, T, T] pattern: skipped above max_len "
                   f"{LAYERWISE_MAX_LEN}")
        notes.append(skipped)
        return InvariantReport(None, skipped=skipped)
    lw = _layerwise_sample(T, inp.sample, inp.own, rows)
    if run.progress:
        run.progress("layer-wise invariants", run.done, run.total)
    with _blame_edited_header(model), _on_cpu(model), torch.no_grad():
        invariants = (program_invariants(model, lw) if construction.invariants is None
                      else construction.invariants(model, plan, lw))
        lookup = _label_codes(model, lw)
    if lookup is not None:
        invariants.mlps = [*(invariants.mlps or []), lookup]
        if lookup["distance_to_boundary"] <= 0:
            invariants.failures.append(
                f"layer {lookup['layer']} {lookup['mlp']}: the state codes it reads deviate by "
                f"{lookup['worst_input_noise']:.3g} (tolerance {lookup['input_tolerance']:.3g})")
    run.done += lw.size
    return invariants


def _forward_text(model, chunked: bool) -> str:
    """How the inputs ran, for ``checked["forward"]``."""
    if not chunked:
        return "plain"
    return (f"query-chunked (chunks of {CHUNK} rows"
            + (", one attention pattern per batch: the heads are purely positional)"
               if all(positional_layers(model)) else ")"))


def _checked(model, inp: _Inputs, invariants: InvariantReport | None, family_limit: int | None,
             time_budget: float | None, cut: dict[str, str] | None, tally: Tally, forward: str) -> dict[str, Any]:
    """``VerificationResult.checked``: how much of each check ran (the exhaustive length only as far
    as every word of it was run)."""
    checks, L, partial = inp.checks, inp.L, model.domain.partial
    ex = checks[0]
    return {"exhaustive_length": (L if ex.done == len(ex.tokens) else 0) if partial
            else exhaustive_covered(model.automaton.n_symbols, ex.done, L),
            "promise": "legal inputs only" if partial else None,
            "exhaustive_sequences": ex.done, "exhaustive_sequence_length": L,
            "random_sequences": checks[-1].done, "random_length": model.max_len,
            "adversarial_families": {c.name.removeprefix("adversarial:"): c.done for c in checks[1:-1]},
            "adversarial_family_limit": family_limit,
            "layerwise": None if invariants is None else invariants.checked,
            "layerwise_sequences": None if invariants is None else invariants.sequences,
            "forward": forward,
            "recurrent_reference_agreed_positions": tally.rnn_positions,
            "time_budget_s": time_budget,
            "cut_by_time_budget": cut}


def _margins(tally: Tally, invariants: InvariantReport | None, chunk_margins: ChunkMargins) -> dict[str, Any]:
    """``VerificationResult.margins``: the readout's smallest logit margin, the heads' (from the
    invariants, else from the query-chunked forward) and the MLPs' (moved out of ``invariants``)."""
    margins: dict[str, Any] = {"readout_min_logit_margin": tally.min_margin if tally.min_margin < math.inf else None}
    if invariants is not None and invariants.heads is not None:
        margins["heads"], invariants.heads = invariants.heads, None
    elif chunk_margins.worst:
        margins["heads"] = chunk_margins.heads()
    if invariants is not None and invariants.mlps is not None:
        margins["mlps"], invariants.mlps = invariants.mlps, None
    return margins
