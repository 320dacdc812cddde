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

Margins (``VerificationResult.margins``), measured on sample inputs:

* ``heads``: per attention head, the worst (smallest) score gap between the intended
  key and the best other key, and the worst softmax mass leaked off the intended key
  (scan: t - 2^(l-1) or BOS; gridworld: the last position with the wanted value;
  krohn-rhodes: the argmax key; uniform heads report the spread of their scores);
* ``mlps``: per lookup MLP, the worst distance of its input from the nearest decision
  boundary of its step units = declared input tolerance - measured input noise;
* ``readout_min_logit_margin``: the smallest top-vs-second logit gap at a correct position.

Inputs longer than ``PLAIN_MAX_LEN`` run through :func:`verify.chunked.forward_chunked`
(query-chunked attention; one pattern per batch when the heads are purely positional),
which keeps memory at [B, chunk, T] instead of [B, H, T, T].
"""

from __future__ import annotations

import itertools
import math
import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import torch

from compiler.automata.errors import BudgetError, CheckpointError, ShortcutError
from compiler.automata.simulate import simulate
from compiler.automata.spec import Semiautomaton, from_dict
from constructions import registry
from constructions.checkpoint import check_header, header_intact
from constructions.construction import Construction
from constructions.labels import readout_of

from .chunked import forward_chunked, positional_layers
from .recurrent import RecurrentSimulator

DEFAULT_EXHAUSTIVE_BUDGET = 1 << 15
DEFAULT_SAMPLES = 64
SCORE_BUDGET = 1 << 26
"""Largest batch * heads * T^2 evaluated at once (attention scores are [B, H, T, T])."""
PLAIN_MAX_LEN = 4096
"""Longest input run through the model's own forward; longer ones use the chunked forward."""
LAYERWISE_MAX_LEN = 4096
"""Layer-wise invariants cache every layer's [H, T, T] pattern: only up to this length."""
CHUNK = 1024


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
    """Every sequence of ``length`` symbols [n^length, length], in lexicographic order."""
    idx = np.arange(n_symbols**length, dtype=np.int64)[:, None]
    return (idx // n_symbols ** np.arange(length - 1, -1, -1, dtype=np.int64)) % n_symbols


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
    (the model runs them in bounded batches, see :func:`_batches`)."""
    L = exhaustive_length(n_symbols, max_len, exhaustive_budget)
    return 3 * 8 * (n_symbols**L * L + samples * max_len)


def check_options(n_symbols: int, max_len: int, *, samples: int, seed: int, exhaustive_budget: int,
                  family_limit: int | None) -> None:
    """Every option in range, and the estimated memory within :func:`memory_limit` (BudgetError)."""
    for name, value, low in (("samples", samples, 0), ("seed", seed, 0), ("exhaustive_budget", exhaustive_budget, 1),
                             ("family_limit", 1 if family_limit is None else family_limit, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ShortcutError(f"{name} must be an integer >= {low}, got {value!r}")
    need, limit = estimate_memory(n_symbols, max_len, samples, exhaustive_budget), memory_limit()
    if need > limit:
        L = exhaustive_length(n_symbols, max_len, exhaustive_budget)
        raise BudgetError(f"this verification would hold about {need / 2**30:.1f} GiB of inputs "
                          f"({n_symbols}^{L} exhaustive sequences of length {L}, {samples} random of length {max_len}); "
                          f"the limit here is {limit / 2**30:.1f} GiB: lower the exhaustive budget or the samples")


@contextmanager
def _blame_edited_header(model) -> Iterator[None]:
    """A construction's checks failing on a model whose header was edited after compiling is
    the header's fault (bad input), not the tool's."""
    try:
        yield
    except ShortcutError:
        raise
    except Exception as e:
        if header_intact(model) is False:
            raise CheckpointError(f"the model's header was edited after compiling and no longer fits its weights "
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


ACTIVATION_BUDGET = 1 << 27
"""Largest batch * T * (widest MLP layer) evaluated at once (about 0.5 GB of float32)."""


def model_width(model) -> int:
    """The widest activation a position carries (d_model or an MLP hidden layer)."""
    return max([model.config["d_model"]] + [h for b in model.config["blocks"] for h in b["mlp_hidden"]])


def _batches(tokens: np.ndarray, T: int, heads: int = 1, width: int = 1) -> Iterator[np.ndarray]:
    size = max(1, min(SCORE_BUDGET // (max(T + 1, 1) ** 2 * max(heads, 1)),
                      ACTIVATION_BUDGET // (max(T + 1, 1) * max(width, 1))))
    for i in range(0, len(tokens), size):
        yield tokens[i : i + size]


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
        rnn = self.rnn(torch.from_numpy(tokens)).argmax(-1).numpy()
        if not np.array_equal(rnn, expected):  # the two references must agree before we judge the model
            raise RuntimeError(f"reference disagreement on {self.a.name}: recurrent module vs integer simulation")
        self.rnn_positions += tokens.size
        return expected if self.labels is None else self.labels(tokens, expected)

    def add(self, check: str, tokens: np.ndarray, logits: torch.Tensor, expected: np.ndarray | None = None) -> None:
        if expected is None:
            expected = self.reference(tokens)
        lg = logits.detach().double()
        got = lg.argmax(-1).numpy()
        top2 = lg.topk(2, dim=-1).values if lg.shape[-1] > 1 else None
        if top2 is not None:
            correct = got == expected
            if correct.any():
                self.min_margin = min(self.min_margin, float((top2[..., 0] - top2[..., 1]).numpy()[correct].min()))
        ok = got == expected
        B, T = tokens.shape
        self.n_sequences += B
        self.n_positions += B * T
        self.n_errors += int((~ok).sum())
        self.correct_at[:T] += ok.sum(0)
        self.count_at[:T] += B
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
    minimisation) is simulated and its outputs are the expected labels; the compiled quotient's
    labels of its reference states must agree (else the minimisation was wrong)."""

    def __init__(self, quotient: Semiautomaton, readout: dict[str, Any]) -> None:
        self.source = from_dict(readout["source"])
        if self.source.alphabet != quotient.alphabet:
            raise CheckpointError("its readout's source automaton has another alphabet than its spec")
        index = {x: i for i, x in enumerate(readout["labels"])}
        unknown = sorted(set(self.source.outputs or ()) - set(index))
        if self.source.outputs is None or unknown:
            raise CheckpointError(f"its readout's source automaton has outputs outside its labels: {unknown[:3]}")
        self.source_label = np.array([index[x] for x in self.source.outputs], dtype=np.int64)
        self.state_label = np.array(readout["state_label"], dtype=np.int64)

    def __call__(self, tokens: np.ndarray, quotient_states: np.ndarray) -> np.ndarray:
        expected = self.source_label[simulate(self.source, tokens)]
        if not np.array_equal(self.state_label[quotient_states], expected):
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
            tgt = key[None, :, None].expand(scores.shape[0], -1, 1)
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
            notes = self.model.meta.get("layers", [{}] * (l + 1))[l].get("heads", [{}])
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


def verify(model, *, samples: int = DEFAULT_SAMPLES, seed: int = 0,
           exhaustive_budget: int = DEFAULT_EXHAUSTIVE_BUDGET, families: bool = True,
           family_limit: int | None = None, layerwise: bool = True, forward: str = "auto",
           progress: Callable[[str, int, int], None] | None = None) -> VerificationResult:
    """Run every check on ``model`` and return a structured result.

    ``family_limit`` keeps at most that many sequences of each adversarial family (evenly
    spread); ``forward``: "plain" (the model's own forward), "chunked"
    (:func:`verify.chunked.forward_chunked`) or "auto" (plain up to ``PLAIN_MAX_LEN``);
    ``progress(check, done, total)`` is called after every batch."""
    if forward not in ("auto", "plain", "chunked"):
        raise ValueError(f"forward must be 'auto', 'plain' or 'chunked', got {forward!r}")
    check_header(model)
    construction, plan = registry.plan_of(model)
    a = model.automaton
    T = model.max_len
    check_options(a.n_symbols, T, samples=samples, seed=seed, exhaustive_budget=exhaustive_budget,
                  family_limit=family_limit)
    tally = _Tally(a, T, readout_of(model.meta))
    rng = np.random.default_rng(seed)
    L = exhaustive_length(a.n_symbols, T, exhaustive_budget)
    checks: list[tuple[str, np.ndarray]] = [("exhaustive", all_sequences(a.n_symbols, L))]
    rand = rng.integers(0, a.n_symbols, size=(samples, T)) if samples else np.zeros((0, T), dtype=np.int64)
    checks.append(("random", rand))
    fams = adversarial_families(a.n_symbols, T) if families else {}
    own: dict[str, np.ndarray] = {}
    if families and construction.families is not None:
        with _blame_edited_header(model):
            own = construction.families(model, plan, T, seed)
        fams.update(own)
    fams = {k: _subset(v, family_limit) for k, v in fams.items()}
    for name, toks in fams.items():
        checks.append((f"adversarial:{name}", toks))
    total = sum(len(t) for _, t in checks)
    done = 0
    n_heads = max(b["n_heads"] for b in model.config["blocks"])
    chunk_margins = _ChunkMargins(model, construction)
    used = "plain"
    is_plain = [forward == "plain" or (forward == "auto" and t.shape[1] <= PLAIN_MAX_LEN) for _, t in checks]
    plain = [c for c, p in zip(checks, is_plain) if p]
    chunked = [c for c, p in zip(checks, is_plain) if not p and len(c[1])]
    with torch.no_grad():
        for name, toks in plain:
            for batch in _batches(toks, toks.shape[1], n_heads, model_width(model)):
                tally.add(name, batch, model(torch.from_numpy(batch)))
                done += len(batch)
                if progress:
                    progress(name, done, total)
    if chunked:  # every long check in one stream of batches, so a shared pattern is computed once per batch

        shared = all(positional_layers(model))
        used = (f"query-chunked{f' above length {PLAIN_MAX_LEN}' if forward == 'auto' else ''} (chunks of {CHUNK} rows"
                + (", one attention pattern per batch: the heads are purely positional)" if shared else ")"))
        for length in sorted({t.shape[1] for _, t in chunked}):
            group = [(n, t) for n, t in chunked if t.shape[1] == length]
            toks = np.concatenate([t for _, t in group])
            owner = np.concatenate([np.full(len(t), i) for i, (_, t) in enumerate(group)])
            size = (max(1, (1 << 20) // (length + 1)) if shared
                    else max(1, SCORE_BUDGET // (CHUNK * (length + 1) * n_heads)))
            size = max(1, min(size, ACTIVATION_BUDGET // ((length + 1) * model_width(model))))
            for i in range(0, len(toks), size):
                batch = toks[i : i + size]
                logits = forward_chunked(model, torch.from_numpy(batch), CHUNK, observe=chunk_margins)
                expected = tally.reference(batch)
                for g in np.unique(owner[i : i + size]):
                    sel = owner[i : i + size] == g
                    tally.add(group[g][0], batch[sel], logits[torch.from_numpy(sel)], expected[sel])
                done += len(batch)
                if progress:
                    progress(group[owner[min(i + size, len(toks)) - 1]][0], done, total)
    invariants: dict[str, Any] = {}
    sample = rand if len(rand) else np.concatenate([v for v in fams.values()] or [np.zeros((0, T), np.int64)])
    if layerwise and T <= LAYERWISE_MAX_LEN and len(sample):
        extra = [fams[f][:1] for f in own if len(fams[f])]  # one of each of the construction's own families
        with _blame_edited_header(model):
            invariants = construction.invariants(model, plan, np.concatenate([sample[: 4 if T <= 1024 else 1], *extra]))
    elif layerwise and len(sample):
        invariants = {"checked": None, "skipped": f"layer-wise invariants need every layer's [H, T, T] pattern: "
                                                  f"skipped above max_len {LAYERWISE_MAX_LEN}", "failures": []}
    exact = tally.n_errors == 0 and not invariants.get("failures")
    margins: dict[str, Any] = {"readout_min_logit_margin": tally.min_margin if tally.min_margin < math.inf else None}
    if invariants.get("heads") is not None:
        margins["heads"] = invariants.pop("heads")
    elif chunk_margins.worst:
        margins["heads"] = chunk_margins.heads()
    if invariants.get("mlps") is not None:
        margins["mlps"] = invariants.pop("mlps")
    return VerificationResult(
        exact=exact, automaton=a.name, method=construction.name, max_len=T,
        dtype=model.config["dtype"], seed=seed,
        seeds={"random_sequences": seed, **(construction.family_seeds(seed) if own and construction.family_seeds
                                            else {})},
        checked={"exhaustive_length": L, "exhaustive_sequences": int(len(checks[0][1])),
                 "random_sequences": int(len(rand)), "random_length": T,
                 "adversarial_families": {k: int(len(v)) for k, v in fams.items()},
                 "adversarial_family_limit": family_limit,
                 "layerwise": invariants.get("checked"),
                 "layerwise_sequences": invariants.get("sequences"),
                 "forward": used,
                 "recurrent_reference_agreed_positions": tally.rnn_positions},
        n_sequences=tally.n_sequences, n_positions=tally.n_positions, n_errors=tally.n_errors,
        accuracy_by_position=(tally.correct_at / np.maximum(tally.count_at, 1)).tolist(),
        margins=margins, invariants=invariants, counterexample=tally.counterexample,
        notes=[invariants["skipped"]] if invariants.get("skipped") else [],
    )
