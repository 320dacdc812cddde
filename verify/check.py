"""Check a compiled model against the step-by-step reference (DESIGN.md section 5).

What is checked, each at every position:

* exhaustive: every sequence of the largest length L with |Sigma|^L within budget
  (the model is causal, so position t of a length-L input is the output for its
  length-t prefix: this covers every sequence of length <= L);
* random: ``samples`` uniform sequences of exactly max_len (seeded);
* adversarial families at max_len: constant runs, alternations, a long run then one
  different symbol (and the reverse), periodic sweeps with periods near powers of two;
* layer-wise invariants on named subspaces (scan: after layer l, position t holds
  the map of its last 2^l letters, and the scratch is cleared; gridworld: prefix
  sums, residue codes, nearest-value heads and coordinates, see verify/gridworld.py,
  which also adds wall-pinned and wall-free walks to the adversarial families).

A model is exact only if every scored position agrees and every invariant holds.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import torch

from compiler.spec import Semiautomaton

from .recurrent import RecurrentSimulator
from .simulate import simulate, window_maps

DEFAULT_EXHAUSTIVE_BUDGET = 1 << 15
DEFAULT_SAMPLES = 64
SCORE_BUDGET = 1 << 26
"""Largest batch * heads * T^2 evaluated at once (attention scores are [B, H, T, T])."""


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
    return np.array(list(itertools.product(range(n_symbols), repeat=length)), dtype=np.int64).reshape(-1, length)


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


def _batches(tokens: np.ndarray, T: int, heads: int = 1) -> Iterator[np.ndarray]:
    size = max(1, SCORE_BUDGET // (max(T + 1, 1) ** 2 * max(heads, 1)))
    for i in range(0, len(tokens), size):
        yield tokens[i : i + size]


class _Tally:
    """Accumulates errors, margins and the first counterexample over checks."""

    def __init__(self, automaton: Semiautomaton, max_len: int) -> None:
        self.a = automaton
        self.n_sequences = 0
        self.n_positions = 0
        self.n_errors = 0
        self.correct_at = np.zeros(max_len)
        self.count_at = np.zeros(max_len)
        self.min_margin = math.inf
        self.counterexample: Counterexample | None = None
        self.rnn = RecurrentSimulator(automaton, torch.float64)
        self.rnn_positions = 0

    def add(self, check: str, tokens: np.ndarray, logits: torch.Tensor) -> None:
        expected = simulate(self.a, tokens)
        rnn = self.rnn(torch.from_numpy(tokens)).argmax(-1).numpy()
        if not np.array_equal(rnn, expected):  # the two references must agree before we judge the model
            raise RuntimeError(f"reference disagreement on {self.a.name}: recurrent module vs integer simulation")
        self.rnn_positions += tokens.size
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
            self.counterexample = self._counterexample(check, tokens[b], expected[b], got[b], t)

    def _counterexample(self, check: str, toks, exp, got, t: int) -> Counterexample:
        a = self.a
        trace = [{"symbol": a.alphabet[toks[i]], "expected": a.states[exp[i]], "got": a.states[got[i]]}
                 for i in range(t + 1)]
        return Counterexample(check, [a.alphabet[x] for x in toks[: t + 1]], t + 1,
                              a.states[exp[t]], a.states[got[t]], trace)


def _scan_invariants(model, tokens: np.ndarray) -> dict[str, Any]:
    """Decode ``scan:map`` / ``scan:prev`` after every layer and compare with the exact windows."""
    labels = model.meta["residual_labels"]
    F = [i for i, lab in enumerate(labels) if lab.startswith("scan:map[")]
    G = [i for i, lab in enumerate(labels) if lab.startswith("scan:prev[")]
    letter_maps = np.asarray(model.meta["scan"]["letter_maps"])
    L = len(model.blocks)
    want = window_maps(letter_maps, tokens, L)
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    worst_map, worst_scratch, failures = 0.0, 0.0, []
    heads = []
    T = tokens.shape[1]
    for l in range(L):
        post = cache[f"resid_post.{l}"].double().numpy()
        dev = np.abs(post[..., F] - want[l + 1]).max()
        worst_map = max(worst_map, float(dev))
        worst_scratch = max(worst_scratch, float(np.abs(post[..., G]).max()))
        if dev >= 0.25:
            failures.append(f"layer {l + 1}: scan:map deviates by {dev:.3g} from the 2^{l + 1}-window map")
        # attention: weight on the intended position (t - 2^l, or BOS)
        pattern = cache[f"blocks.{l}.attn.pattern"][:, 0].double().numpy()  # [B, T+1, T+1]
        t = np.arange(T + 1)
        target = np.maximum(t - 2**l, 0)
        leaked = 1.0 - pattern[:, t, target]
        heads.append({"layer": l + 1, "head": model.meta["layers"][l]["heads"][0].get("kind", "offset"),
                      "worst_leaked_mass": float(leaked.max()),
                      "derived_leak_bound": model.meta["layers"][l]["heads"][0].get("leak_bound"),
                      "score_gap": model.meta["layers"][l]["heads"][0].get("score_gap")})
        mid = cache[f"blocks.{l}.resid_mid"].double().numpy()[..., G]
        heads[-1]["worst_mlp_input_noise"] = float(np.abs(mid - np.rint(mid)).max())
        heads[-1]["mlp_input_tolerance"] = model.meta["layers"][l]["mlp"].get("input_tolerance")
    if worst_scratch >= 0.25:
        failures.append(f"scan:prev not cleared (max |value| {worst_scratch:.3g})")
    return {"checked": "scan windows per layer", "sequences": int(tokens.shape[0]),
            "worst_map_deviation": worst_map, "worst_scratch_residue": worst_scratch,
            "heads": heads, "failures": failures}


def verify(model, *, samples: int = DEFAULT_SAMPLES, seed: int = 0,
           exhaustive_budget: int = DEFAULT_EXHAUSTIVE_BUDGET, families: bool = True,
           layerwise: bool = True, progress: Callable[[str, int, int], None] | None = None) -> VerificationResult:
    """Run every check on ``model`` and return a structured result."""
    a = model.automaton
    T = model.max_len
    tally = _Tally(a, T)
    rng = np.random.default_rng(seed)
    L = exhaustive_length(a.n_symbols, T, exhaustive_budget)
    checks: list[tuple[str, np.ndarray]] = [("exhaustive", all_sequences(a.n_symbols, L))]
    rand = rng.integers(0, a.n_symbols, size=(samples, T)) if samples else np.zeros((0, T), dtype=np.int64)
    checks.append(("random", rand))
    fams = adversarial_families(a.n_symbols, T) if families else {}
    if families and model.meta.get("method") == "gridworld":
        from .gridworld import families as gridworld_families

        fams.update(gridworld_families(model, T, seed))
    for name, toks in fams.items():
        checks.append((f"adversarial:{name}", toks))
    total = sum(len(t) for _, t in checks)
    done = 0
    with torch.no_grad():
        for name, toks in checks:
            for batch in _batches(toks, toks.shape[1], max(b["n_heads"] for b in model.config["blocks"])):
                tally.add(name, batch, model(torch.from_numpy(batch)))
                done += len(batch)
                if progress:
                    progress(name, done, total)
    invariants: dict[str, Any] = {}
    if layerwise and model.meta.get("method") == "scan" and len(rand):
        k = 4 if T <= 1024 else 1
        invariants = _scan_invariants(model, rand[:k])
    if layerwise and model.meta.get("method") == "gridworld" and len(rand):
        from .gridworld import invariants as gridworld_invariants

        extra = [fams[f][:1] for f in ("wall-pinned", "wall-free") if len(fams.get(f, ()))]
        invariants = gridworld_invariants(model, np.concatenate([rand[:2], *extra]))
    exact = tally.n_errors == 0 and not invariants.get("failures")
    margins = {"readout_min_logit_margin": tally.min_margin if tally.min_margin < math.inf else None}
    if invariants:
        margins["heads"] = invariants.pop("heads")
    return VerificationResult(
        exact=exact, automaton=a.name, method=model.meta.get("method", "?"), max_len=T,
        dtype=model.config["dtype"], seed=seed,
        checked={"exhaustive_length": L, "exhaustive_sequences": int(len(checks[0][1])),
                 "random_sequences": int(len(rand)), "random_length": T,
                 "adversarial_families": {k: int(len(v)) for k, v in fams.items()},
                 "layerwise": invariants.get("checked"),
                 "recurrent_reference_agreed_positions": tally.rnn_positions},
        n_sequences=tally.n_sequences, n_positions=tally.n_positions, n_errors=tally.n_errors,
        accuracy_by_position=(tally.correct_at / np.maximum(tally.count_at, 1)).tolist(),
        margins=margins, invariants=invariants, counterexample=tally.counterexample,
    )
