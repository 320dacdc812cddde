"""Scoring a model's logits against the reference, check by check: errors, the readout's logit
margins and the first counterexample with its trace (:class:`Tally`), the labels a label model
must give (:class:`LabelReference`), and head margins collected by the query-chunked forward
(:class:`ChunkMargins`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from compiler.automata.errors import CheckpointError
from compiler.automata.mealy import output_ids
from compiler.automata.moore import reachable_states
from compiler.automata.promise import legal_mask
from compiler.automata.simulate import simulate
from compiler.automata.spec import Semiautomaton, from_dict
from constructions.construction import Construction

from .recurrent import RecurrentSimulator


@dataclass
class Counterexample:
    """The first disagreement: the input up to the failing position and a trace."""

    check: str
    input: list[str]
    position: int  # 1-based position of the first wrong state
    expected: str
    got: str
    trace: list[dict[str, str]]




class Tally:
    """Accumulates errors, margins and the first counterexample over checks."""

    def __init__(self, automaton: Semiautomaton, max_len: int, readout: dict[str, Any] | None = None) -> None:
        self.a = automaton
        self.labels = LabelReference(automaton, readout) if readout is not None else None
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


class LabelReference:
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
        mealy = readout.get("mealy")  # a Mealy machine's outputs: the source is its Moore machine over transitions
        self.mealy = from_dict(mealy["source"]) if isinstance(mealy, dict) else None
        self.index = index

    def __call__(self, tokens: np.ndarray, quotient_states: np.ndarray) -> np.ndarray:
        expected = self.source_label[simulate(self.source, tokens)]
        legal = legal_mask(self.source, tokens)  # under a promise the two agree on legal positions only
        if not np.array_equal(self.state_label[quotient_states][legal], expected[legal]):
            raise RuntimeError("reference disagreement: the minimal Moore machine's labels differ from the source's")
        if self.mealy is not None and not np.array_equal(output_ids(self.mealy, tokens, self.index)[legal],
                                                         expected[legal]):
            raise RuntimeError("reference disagreement: the Moore machine over transitions differs from the Mealy "
                               "machine's outputs")
        return expected


class ChunkMargins:
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
