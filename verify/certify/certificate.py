"""The readout's margins, the certificate a model gets (``certify``), and stored certificates
(``recheck``, ``certificate_summary``, ``certificate_text``)."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from compiler.automata.mealy import moore_disagreement
from compiler.automata.spec import Semiautomaton, from_dict
from constructions import registry
from constructions.checkpoint import weights_sha256
from constructions.labels import readout_of
from constructions.model import CompiledTransformer
from constructions.obligations import Compose, Obligations, Undeclared

from .state import (ASSUMPTIONS, COMBINATION_BUDGET, CertificateFailure, NotCertifiable, PATHS, SCHEMA, State, Model,
                    arrays, embedding_states, get_code, merge, product_rows, gamma, row_radii)
from .lookups import fixed_by_class, jointly, phases
from .compose import closure_of
from .checkers import Run, check_layer
from .labels import relabelled
from .program import prove as prove_program
from .record import Certificate
from .unfolded import UNFOLDED, folded


NOT_END_TO_END = ("weights proved against the declared program; program not proved against the automaton ({} not "
                  "covered)")
"""The verdict when the weights run the declared program but no rule proves that program is the automaton."""


READOUT_SPREAD_BUDGET = 1 << 26
"""Most multiply-adds the readout spends on per-row radii (rows x read dims x outputs); past it
each dim's largest radius stands for every row (sound, looser)."""


def _spreads(W: np.ndarray, R: np.ndarray, want: np.ndarray) -> np.ndarray:
    """[rows, outputs]: the most logit_want - logit_o can move while each read dim stays within
    its radius ``R`` [rows, dims] of the row's code: R . |W[:, want] - W[:, o]| (the difference is
    linear in the residual, so the box's worst corner bounds it).  Charging each logit R . |W[:, j]|
    alone -- the triangle inequality's looser bound -- fails scalar codes read by many lines of
    large slope (a label per run over one code dim) whose neighbouring slopes differ little."""
    if R.size * W.shape[1] > READOUT_SPREAD_BUDGET or np.all(R == R[:1]):
        R = np.broadcast_to(R.max(0) if len(R) else np.zeros(W.shape[0]), R.shape)
        uniform = True
    else:
        uniform = False
    out = np.empty((len(R), W.shape[1]))
    for w in np.unique(want):
        rows = np.nonzero(want == w)[0]
        diff = np.abs(W[:, w : w + 1] - W)
        out[rows] = R[0] @ diff if uniform else R[rows] @ diff
    return out


def _readout(m: Model, ob: Obligations, states: list[State], pos_class: np.ndarray,
             report: dict[str, Any], written: set[str] | frozenset[str] = frozenset()) -> None:
    W_U = m.model.W_U.detach().double().cpu().numpy()
    b_U = m.model.b_U.detach().double().cpu().numpy()
    reads = [d for name in ob.readout.reads for d in m.dims(name)]
    const, class_fixed = fixed_by_class(m, pos_class, len(states))
    if m.blocks and m.blocks[-1]["mlp"] is not None:  # a fixed dim the last MLP writes is read from the state
        last_w, last_b = m.blocks[-1]["mlp"][0][-1], m.blocks[-1]["mlp"][1][-1]
        const -= set(np.nonzero(np.abs(last_w).sum(0) + np.abs(last_b))[0].tolist())
    const -= set(reads)
    used = set(np.nonzero(np.abs(W_U).sum(1))[0].tolist())
    if used - set(reads) - const:
        raise CertificateFailure("readout", f"the unembedding reads dims {sorted(used - set(reads) - const)[:6]} "
                                 f"the obligation does not declare")
    const_l = sorted(const)
    worst = math.inf
    for c in sorted(set(pos_class[1:].tolist())):
        codes = [get_code(states[c], name) for name in ob.readout.reads]
        parts = [code.combos() for code in codes]
        X = product_rows(parts)
        if len(X) > COMBINATION_BUDGET:
            raise NotCertifiable(f"readout: {len(X):,} final codes, over the budget {COMBINATION_BUDGET:,}")
        at = np.cumsum([0] + [p_.shape[1] for p_ in parts])
        keep = jointly(m, ob.joint, {n: X[:, at[i] : at[i + 1]] for i, n in enumerate(ob.readout.reads)}, written,
                       len(X))
        R = row_radii(codes)
        R = np.broadcast_to(np.concatenate([code.radius for code in codes]), X.shape) if R is None else R
        X, R = X[keep], R[keep]
        if len(X) == 0:
            continue
        keys = [tuple(int(round(v)) for v in row) for row in X]
        missing = next((key for key in keys if key not in ob.readout.table), None)
        if missing is not None:
            raise CertificateFailure("readout", f"the final code {missing} is not in the readout's table")
        want = np.array([ob.readout.table[key] for key in keys], dtype=np.int64)
        fixed = class_fixed[c][const_l]
        logits = X @ W_U[reads] + fixed @ W_U[const_l] + b_U
        mag = (np.abs(X) + R) @ np.abs(W_U[reads]) + np.abs(fixed) @ np.abs(W_U[const_l]) + np.abs(b_U)
        rounding = gamma(np.count_nonzero(W_U, axis=0) + 1, m.u) * mag
        err = _spreads(W_U[reads], R, want) + rounding + rounding[np.arange(len(X)), want][:, None]
        gap = logits[np.arange(len(X)), want][:, None] - logits - err
        gap[np.arange(len(X)), want] = math.inf
        i, o = np.unravel_index(int(gap.argmin()), gap.shape)
        if gap[i, o] <= 0:
            raise CertificateFailure("readout", f"on the final code {keys[i]} output {o} may beat output {want[i]} "
                                     f"by {-gap[i, o]:.3g} after the error bound (logits {logits[i, want[i]]:.6g} "
                                     f"and {logits[i, o]:.6g}, error {err[i, o]:.3g})")
        worst = min(worst, float(gap[i, o]))
    report["readout"] = {"min_margin": float(worst)}


# --- the certificate ---------------------------------------------------------------------------


def obligations_of(model: CompiledTransformer) -> Obligations:
    """The obligations of a compiled model's construction (NotCertifiable when it declares none);
    for a label model, its readout must put the largest logit on each state's label."""
    construction, plan = registry.plan_of(model)
    if construction.obligations is None:
        raise NotCertifiable(f"the {construction.name} construction declares no obligations yet: "
                             f"not certified (sampled verification only)")
    try:
        ob = construction.obligations(model, plan)
    except Undeclared as e:
        raise NotCertifiable(f"the {construction.name} construction declares no obligations for this model yet: "
                             f"{e}; not certified (sampled verification only)") from None
    labels = readout_of(model.meta)
    if labels is None:
        return ob
    return relabelled(ob, labels, _state_labels(model.automaton, labels), model.layout())


def _state_labels(compiled: Semiautomaton, readout: dict[str, Any]) -> list[int]:
    """The label index of each compiled state, proved against the labels' source automaton: on
    every pair of states a common input reaches from the two starts (the product's reachable
    pairs, so every input), the source's output must be the label the readout gives the compiled
    state (CertificateFailure otherwise).  States no input reaches keep the readout's label."""
    source = from_dict(readout["source"])
    if source.alphabet != compiled.alphabet or source.outputs is None:
        raise CertificateFailure("readout labels", "the labels' source automaton has another alphabet or no outputs")
    index = {x: i for i, x in enumerate(readout["labels"])}
    state_label = [int(x) for x in readout["state_label"]]
    seen = {(source.start, compiled.start)}
    frontier = list(seen)
    while frontier:
        nxt = []
        for p, q in frontier:
            want = index.get(source.outputs[p])
            if want != state_label[q]:
                raise CertificateFailure("readout labels", f"state {compiled.states[q]!r} is read out as "
                                         f"{readout['labels'][state_label[q]]!r}, but an input that reaches it reaches "
                                         f"the source's {source.states[p]!r}, labelled {source.outputs[p]!r}")
            for a in range(compiled.n_symbols):
                pair = (source.maps[a][p], compiled.maps[a][q])
                if pair not in seen:
                    seen.add(pair)
                    nxt.append(pair)
        frontier = nxt
    mealy = readout.get("mealy")  # the source is a Mealy machine's Moore machine over transitions: re-derived
    wrong = moore_disagreement(mealy["source"], source) if isinstance(mealy, dict) else None
    if wrong is not None:
        raise CertificateFailure("readout labels", f"the labels' source is not the Mealy machine's outputs: {wrong}")
    return state_label


def certify(model: CompiledTransformer, with_obligations: bool = False) -> Certificate:
    """Prove ``model`` exact on every input up to its max_len, or say precisely why not.

    Returns the certificate (``certified`` True) or a refusal (``certified`` False with
    ``failure``: the obligation, and ``reason``); see the module docstring for the method.
    ``with_obligations``: include the obligations themselves (their canonical JSON), as the
    certificate file ``shortcut certify -o`` writes does."""
    start = time.perf_counter()
    out = Certificate(schema=SCHEMA, method=model.meta.get("method"), max_len=model.max_len, dtype=model.config.dtype,
                      paths=PATHS, assumptions=ASSUMPTIONS, weights_sha256=weights_sha256(model))
    try:
        if model.W_E.dtype == torch.float64:
            raise NotCertifiable("float64 models are not certified yet (the checker's own arithmetic is float64, "
                                 "so it cannot bound their rounding); compile with --dtype float32")
        if UNFOLDED in model.meta:  # a standard-shape model: certified through the model it unfolds
            model = folded(model)
            out.unfolded = {"layers": len(model.blocks), "note": "the unfolding of this model, tensor for tensor "
                            "(verify/certify/unfolded.py); the certificate below is the folded model's"}
        ob = obligations_of(model)
        out.obligations_sha256 = ob.digest()
        if ob.promise is not None:
            out.promise = ob.promise.text
        if with_obligations:
            out.obligations = ob.to_json()
        program = out.program = prove_program(model, ob)  # the program against the automaton (a failure names an input)
        if program.get("inputs") == "legal" and out.promise is None:  # the automaton says nothing elsewhere
            out.promise = "legal inputs only (the automaton is partial: no other input has a state)"
        layers = out.layers = _run(model, ob)  # the weights against the program
        out.readout = layers.pop()["readout"]
        out.certified = bool(program["proved"])
        if not out.certified:
            out.supported, out.weights_proved = False, True
            out.reason = NOT_END_TO_END.format(program["not_covered"])
    except NotCertifiable as e:
        out.certified, out.supported, out.reason = False, False, str(e)
    except CertificateFailure as e:
        out.certified, out.supported = False, True
        out.failure, out.reason = {"where": e.where, "detail": e.detail}, str(e)
    out.seconds = round(time.perf_counter() - start, 3)
    return out


def _run(model: CompiledTransformer, ob: Obligations) -> list[dict[str, Any]]:
    """The weights against the declared program: layer by layer, each kind by its rule
    (:mod:`.checkers`), then the readout; one report per layer and the readout's last."""
    if ob.promise is not None:  # on legal inputs only: the promise's claims restrict the value sets
        ob = replace(ob, joint=ob.joint + ob.promise.claims)
    m = arrays(model)
    if len(ob.layers) != len(m.blocks):
        raise CertificateFailure("obligations", f"{len(ob.layers)} layers declared, the model has {len(m.blocks)}")
    states, pos_class = phases(m, *embedding_states(m, ob))
    composes = [o for layer in ob.layers for o in layer.mlp_leaves() if isinstance(o, Compose)]
    closures = {name: closure_of(ob.embedding.codes[name]) for name in dict.fromkeys(o.maps for o in composes)
                if name in ob.embedding.codes}
    later = {n for layer in ob.layers for n in layer.names_written()}
    written = (set(ob.embedding.codes) - later) | {  # the token's own codes, and the position's
        n for n, dims in m.subspaces.items() if set(dims) <= m.fixed_dims}
    run = Run(m, ob.joint, written, closures)
    layers = []
    for l, layer in enumerate(ob.layers):
        report: dict[str, Any] = {"layer": l + 1}
        states, pos_class = check_layer(run, l, layer, states, pos_class, report)
        states, pos_class = merge(states, pos_class, m.phase)
        report["classes"] = len(states)
        report["radius"] = {name: float(max(st[name].radius.max() for st in states))
                            for name in states[0] if " + " not in name}
        layers.append(report)
    final: dict[str, Any] = {}
    _readout(m, ob, states, pos_class, final, run.written)
    layers.append(final)
    return layers


# --- stored certificates ---------------------------------------------------------------------


def certificate_summary(certificate: Certificate) -> dict[str, Any]:
    """The part of a certificate a checkpoint stores (``meta["verification"]["certificate"]``):
    the verdict, what it is bound to (weights, obligations, max_len, dtype), the margins."""
    keep = ("schema", "certified", "supported", "reason", "failure", "method", "max_len", "dtype", "paths",
            "weights_sha256", "obligations_sha256", "promise", "readout", "weights_proved")  # no timing: checkpoints stay deterministic
    cert = certificate.to_json()
    out = {k: cert[k] for k in keep if k in cert}
    if certificate.program is not None:  # the program proof's verdict and size, without its time
        out["program"] = {k: v for k, v in certificate.program.items() if k != "seconds"}
    if certificate.layers is not None:
        layers = certificate.layers
        out["max_radius"] = max((max(layer["radius"].values(), default=0.0) for layer in layers), default=0.0)
        heads = [h for layer in layers for h in layer.get("heads", [])]
        out["max_leaked_mass"] = max((h["max_leaked_mass"] for h in heads), default=None)
        out["min_score_gap"] = min((h["min_score_gap"] for h in heads if h["min_score_gap"] is not None), default=None)
    return out


def certificate_text(certificate: Certificate | dict[str, Any] | None) -> str:
    """One line: certified (with the smallest readout margin and the time), or why not; of a
    certificate or the JSON of one or of its stored summary (a report's, a checkpoint's)."""
    cert = certificate.to_json() if isinstance(certificate, Certificate) else certificate
    if not isinstance(cert, dict):
        return "not certified (no certificate)"
    if cert.get("certified") is True and not isinstance(cert.get("program"), dict):
        return ("weights proved against the declared program; the program not proved against the automaton (a "
                "certificate from before end-to-end proofs: run `shortcut certify`)")
    if cert.get("certified") is True:
        margin = (cert.get("readout") or {}).get("min_margin")
        took = f", {cert['seconds']} s" if isinstance(cert.get("seconds"), (int, float)) else ""
        inputs = "every legal input (under the promise of legal inputs)" if cert.get("promise") else "every input"
        return (f"certified exact on {inputs} up to max_len {cert.get('max_len')} ({cert.get('dtype')}, "
                f"both attention paths; readout margin after error bounds {margin:.4g}{took})"
                if isinstance(margin, (int, float)) else f"certified exact on {inputs} up to max_len "
                f"{cert.get('max_len')}")
    if cert.get("weights_proved") is True:
        return str(cert.get("reason"))
    return f"not certified: {cert.get('reason')}"


def lead_verdict(exact: bool, cert: dict[str, Any] | None, exhaustive: bool) -> str:
    """A report's leading verdict, the strongest that holds: CERTIFIED EXACT (an end-to-end
    certificate), EXACT (every input up to max_len checked), NO ERROR FOUND (sampled, not proved
    exact), or NOT EXACT."""
    if not exact:
        return "NOT EXACT"
    if isinstance(cert, dict) and cert.get("certified") is True:
        return "CERTIFIED EXACT"
    return "EXACT" if exhaustive else "NO ERROR FOUND (sampled, not proved exact)"


def recheck(model: CompiledTransformer, stored: dict[str, Any], with_obligations: bool = False) -> Certificate:
    """Re-run the checker on ``model`` and compare with a stored certificate: the same weights,
    obligations, max_len and dtype (equal values of equal JSON types: ``1`` is not ``true``, ``16.0``
    not ``16``), and a passing proof.  Returns the new certificate with
    ``matches`` (bool) and ``mismatch`` (what differs, if anything)."""
    new = certify(model, with_obligations)
    fresh = new.to_json()
    differ = [k for k in ("weights_sha256", "obligations_sha256", "max_len", "dtype", "certified")
              if type(stored.get(k)) is not type(fresh.get(k)) or stored.get(k) != fresh.get(k)]  # typed: 1 is not true
    new.matches = not differ and new.certified is True
    new.mismatch = differ
    return new
