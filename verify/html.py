"""``report.html``: one self-contained page for people.

Sections: verdict and model, what was checked, accuracy by position, the attention
pattern of every head on a sample input, the margins, the first counterexample, and the
diagram the model's construction draws of the plan its checkpoint carries (Krohn-Rhodes:
the cascade), and the residual layout.  Plots are inline SVG drawn by ``verify/svg.py`` (no
plotting dependency); the cascade is rendered by Graphviz ``dot`` when it is installed, else
by ``verify/dot.py``.  No external resources are referenced.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from typing import Any

import numpy as np
import torch

from constructions import registry
from constructions.model import CompiledTransformer

from . import svg
from .certify import certificate_text, lead_verdict
from .dot import dag_svg
from .text import cut_text, exhaustive_text, fmt

SAMPLE_LEN = 32
"""Length of the sample input whose attention patterns are shown."""
MAX_HEADS_PER_LAYER = 16

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
     padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
th{background:#f3f3f3}.ok{color:#070;font-weight:bold}.bad{color:#b00;font-weight:bold}
.note{background:#fff8e0;border:1px solid #e8d48a;padding:.4em .8em}pre{background:#f6f6f6;padding:.6em;overflow:auto}
svg{max-width:100%;height:auto}.heads{display:flex;flex-wrap:wrap;gap:.4em}code{background:#f3f3f3;padding:0 .2em}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _f(x: Any) -> str:
    return _e(fmt(x))


def _number(x: Any) -> float | None:
    """``x`` as a float to plot, or None when it is not a number (margins quote construction
    notes, which a crafted header can make anything)."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when a is not a number or b is not a nonzero number."""
    return a / b if a is not None and b else None


def _table(header: list[str] | None, rows: list[list[Any]]) -> str:
    """An HTML table: a header row (none for ``None``), then ``rows``."""
    out = ["<table>" + ("" if header is None else "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in header) + "</tr>")]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{_f(c)}</td>" for c in r) + "</tr>")
    return "".join(out) + "</table>"


def sample_tokens(report: dict[str, Any], model: CompiledTransformer) -> np.ndarray:
    """The sample input: the counterexample when there is a short one, else one that exercises
    the construction -- the first input of its own first family (a legal walk for a stack), or a
    seeded random word -- of :func:`sample_length`."""
    a = model.automaton
    ce = report.get("counterexample")
    if ce and len(ce["input"]) <= 2 * SAMPLE_LEN:
        return np.array([a.symbol_ids(ce["input"])], dtype=np.int64)
    T, seed = sample_length(model), report.get("seed", 0) + 99
    construction, plan = registry.plan_of(model)
    own = construction.families(model, plan, T, seed) if construction.families is not None else {}
    first = next((v for v in own.values() if len(v)), None)
    if first is not None:
        return np.asarray(first[:1], dtype=np.int64)
    return np.random.default_rng(seed).integers(0, a.n_symbols, (1, T))


def sample_length(model: CompiledTransformer) -> int:
    """Long enough for the deepest layer's offset (a scan's layer l looks 2^(l-1) back), at least
    :data:`SAMPLE_LEN`, at most 4 x that and max_len."""
    return min(model.max_len, 4 * SAMPLE_LEN, max(SAMPLE_LEN, 2 ** max(len(model.blocks) - 1, 0) + 1))


def plan_diagram(model: CompiledTransformer) -> tuple[str, str] | None:
    """(title, DOT source) of the diagram the model's construction draws of the plan its
    checkpoint carries (Krohn-Rhodes: the cascade); None when it draws none."""
    c, plan = registry.plan_of(model)
    return None if c.diagram is None else c.diagram(plan)


def run_dot(dot: str) -> str | None:
    """What the Graphviz ``dot`` binary makes of ``dot`` with ``-Tsvg`` (None when it is not
    installed or fails)."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    try:
        res = subprocess.run([exe, "-Tsvg"], input=dot.encode(), capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.decode(errors="replace")


_ACTIVE_SVG = re.compile(r"<\s*(script|a|foreignobject|iframe|image|use|style)\b"
                         r"|<[^>]*(\s(on\w+|href|xlink:href|style)\s*=|javascript:)", re.IGNORECASE)
"""What an inline SVG must not hold: elements that run code, load or link something, or style the
page, and attributes that do (event handlers, links).  Text is inert: Graphviz escapes ``<`` in it."""


def dot_svg(dot: str) -> str | None:
    """``dot`` rendered as inline SVG (:func:`run_dot`): the ``<svg>`` element alone (no XML
    prolog, DOCTYPE or comments).  None when Graphviz is missing or the SVG holds anything
    active (:data:`_ACTIVE_SVG`: a link, a script, an event handler); the names in the DOT are
    quoted by ``compiler.automata.cascade.dot_quote``, so that should never happen."""
    out = run_dot(dot)
    start = -1 if out is None else out.find("<svg")
    if out is None or start < 0:
        return None
    svg = re.sub(r"<!--.*?-->", "", out[start:], flags=re.DOTALL)
    return None if _ACTIVE_SVG.search(svg) else svg


def _accuracy_section(report) -> str:
    acc = np.asarray(report["accuracy_by_position"], dtype=float)
    T = len(acc)
    parts = ["<h2>Accuracy by position</h2>"]
    if T and acc.min() == 1.0:
        return parts[0] + f"<p>1 at every one of the {T} positions.</p>"
    if T:
        lo = min(0.0 if acc.min() < 0.9 else 0.9, float(acc.min()))
        parts.append(svg.line_plot(acc.tolist(), "fraction of scored sequences right at position t", "position t",
                                   "accuracy", y_range=(lo - 0.01, 1.01)))
    buckets = min(16, T)
    rows = []
    for b in range(buckets):
        i, j = b * T // buckets, (b + 1) * T // buckets
        if j > i:
            rows.append([f"{i + 1}–{j}", float(acc[i:j].min()), float(acc[i:j].mean())])
    parts.append(_table(["positions", "min accuracy", "mean accuracy"], rows))
    return "".join(parts)


def head_names(meta: dict[str, Any], layer: int, n: int) -> list[str]:
    """Titles for the first ``n`` heads of ``layer`` from the construction's notes (``meta["layers"]``:
    each head's ``kind`` and ``offset``), ``head h`` where a note is missing or not of that shape."""
    layers = meta.get("layers")
    note = layers[layer] if isinstance(layers, list) and layer < len(layers) else None
    heads = note.get("heads") if isinstance(note, dict) else None
    heads = heads if isinstance(heads, list) else []

    def name(h: int) -> str:
        x = heads[h] if h < len(heads) else None
        if not isinstance(x, dict) or not isinstance(x.get("kind", ""), str):
            return f"head {h}"
        offset = x.get("offset")
        return x.get("kind", "") + (f" {offset:+d}" if type(offset) is int else "")

    return [name(h) for h in range(n)]


def _attention_section(model, tokens: np.ndarray) -> str:
    a = model.automaton
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.from_numpy(tokens))
    word = ["BOS"] + [a.alphabet[t] for t in tokens[0]]
    parts = ["<h2>Attention patterns on a sample input</h2>",
             f"<p>Input ({len(word) - 1} symbols): <code>{_e(' '.join(word[1:]))}</code>. Row t is the query at "
             f"position t (0 = BOS), column j the key; causal, so the upper triangle is 0. Hover a cell for "
             f"its weight; a head whose mass is spread (most rows' largest weight under 1/2) is drawn on a "
             f"log colour scale ({svg.LOG_DECADES} decades), as its title says.</p>",
             svg.colour_bar()]
    for l in range(len(model.blocks)):
        pat = cache[f"blocks.{l}.attn.hook_pattern"][0].double().numpy()  # [H, T+1, T+1]
        H = min(pat.shape[0], MAX_HEADS_PER_LAYER)
        names = head_names(model.meta, l, H)
        parts.append(f"<h3>Layer {l + 1}</h3>")
        if pat.shape[0] > H:
            parts.append(f"<p>First {H} of {pat.shape[0]} heads.</p>")
        parts.append('<div class="heads">' + "".join(svg.heatmap(pat[h], f"L{l + 1} {names[h]}", labels=word,
                                                                 log=svg.spread(pat[h])) for h in range(H))
                     + "</div>")
    return "".join(parts)


def _margins_section(report) -> str:
    m = report["margins"]
    heads = m.get("heads") or []
    mlps = m.get("mlps") or []
    parts = ["<h2>Numerical margins</h2>",
             f"<p>Smallest readout logit margin (top minus second logit at a correct position): "
             f"<b>{_f(m.get('readout_min_logit_margin'))}</b>.</p>"]
    plots = []
    if any(_number(h.get("worst_leaked_mass")) is not None for h in heads):
        plots.append(svg.bar_plot(
            [_number(h.get("worst_leaked_mass")) for h in heads],
            "worst leaked softmax mass per head (black: derived bound)", "head (in table order)", "leaked mass",
            log=True, marks=[_number(h.get("derived_leak_bound")) for h in heads]))
    if mlps:
        frac = [_ratio(_number(x.get("distance_to_boundary")), _number(x.get("input_tolerance"))) for x in mlps]
        plots.append(svg.bar_plot(frac, "MLP inputs: distance to a decision boundary / tolerance",
                                  "MLP (in table order)", "fraction of tolerance",
                                  colours=["#2ca02c" if f is not None and f > 0 else "#d62728" for f in frac]))
    if plots:
        parts.append('<div class="heads">' + "".join(plots) + "</div>")
    if heads:
        rows = []
        for h in heads:
            gap = h.get("worst_score_gap")
            if gap is None and "worst_score_spread" in h:
                gap = f"spread {h['worst_score_spread']:.3g}"
            rows.append([h["layer"], h["head"], h.get("target", ""), gap, h.get("worst_leaked_mass"),
                         h.get("derived_leak_bound")])
        parts.append("<h3>Attention heads</h3>" + _table(
            ["layer", "head", "intended key", "worst score gap", "worst leaked mass", "derived leak bound"], rows))
    if mlps:
        parts.append("<h3>Lookup MLPs</h3>" + _table(
            ["layer", "MLP", "inputs", "worst input noise", "tolerance", "distance to decision boundary"],
            [[x["layer"], x["mlp"], x.get("inputs"), x.get("worst_input_noise"), x.get("input_tolerance"),
              x.get("distance_to_boundary")] for x in mlps]))
    if not heads and not mlps:
        parts.append("<p>No per-head or per-MLP margins were measured for this run.</p>")
    return "".join(parts)


def _counterexample_section(report) -> str:
    ce = report.get("counterexample")
    if not ce:
        return ""
    trace = ce["trace"]
    rows = [[i, s["symbol"], s["expected"], s["got"], s.get("logit_gap")] for i, s in enumerate(trace, 1)]
    if len(rows) > 200:
        rows = rows[:20] + [["…", "", "", "", None]] + rows[-100:]
    return (f"<h2>First counterexample ({_e(ce['check'])})</h2><p>At position {ce['position']} the reference is "
            f"<code>{_e(ce['expected'])}</code>, the model gives <code>{_e(ce['got'])}</code>.</p>"
            + _table(["t", "symbol", "reference state", "model state", "logit gap (reference − best other)"], rows))


def _diagram_section(model) -> str:
    """The plan's diagram: Graphviz's drawing when ``dot`` is installed and its SVG is inert,
    else this package's own (:func:`verify.dot.dag_svg`); the DOT source below, folded."""
    diagram = plan_diagram(model)
    if diagram is None:
        return ""
    title, dot = diagram
    drawn = dot_svg(dot)
    out = [f"<h2>{_e(title)}</h2>"]
    if drawn is None:
        drawn = dag_svg(dot)
        out.append('<p class="note">Drawn by this report (Graphviz <code>dot</code> is not installed or failed, or its '
                   "drawing held a link or a script, which this page never inlines).</p>")
    if drawn is not None:
        out.append(drawn)
    else:
        out.append('<p class="note">The diagram is given as DOT source (render it with <code>dot -Tsvg</code>).</p>')
    out.append(f"<details><summary>DOT source</summary><pre>{_e(dot)}</pre></details>")
    return "".join(out)


def _layout_section(model) -> str:
    """The residual layout (``shortcut info --layout``'s data) as a picture (:func:`verify.svg.layout_map`);
    nothing for a checkpoint that stores no layout."""
    try:
        layout = model.layout()
    except KeyError:
        return ""
    try:
        picture = svg.layout_map(layout)
    except (KeyError, TypeError, ValueError, AttributeError):  # a stored layout is data: a crafted one draws nothing
        return ""
    return ("<h2>Residual layout</h2><p>A row per named subspace of the residual stream (its dims in brackets), "
            "two columns per layer: its attention heads and its MLP. Hover a cell for who reads or writes the "
            "subspace there (<code>shortcut info --layout</code> prints the same as text).</p>" + picture)


def _candidates_section(model) -> str:
    """The planner's table (``meta["candidates"]``): every construction, its estimate, whether it
    was chosen and why (not); the stored ``why`` paragraph where a model has no table."""
    cands = model.meta.get("candidates")
    if not isinstance(cands, list) or not all(isinstance(x, dict) for x in cands):
        return f"<p>{_e(model.meta.get('why'))}</p>" if model.meta.get("why") else ""
    rows = [["*" if x.get("chosen") else "", x.get("name"), x.get("theorem"), x.get("layers"), x.get("params"),
             x.get("note") or x.get("refusal") or ""] for x in cands]
    return "<h2>Constructions considered</h2>" + _table(["", "construction", "theorem", "layers", "parameters",
                                                         "why (not)"], rows)


def report_html(report: dict[str, Any], model: CompiledTransformer) -> str:
    """The HTML page for ``report`` (a :func:`verify.report.report_dict`) of ``model``."""
    c = report["checked"]
    exact = report["exact"]
    info = report.get("model") or {}
    title = f"Verification: {report['automaton']['name']} ({report['method']}, max_len {report['max_len']})"
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"]
    cert = report.get("certificate")
    exhaustive = isinstance(c.get("exhaustive_length"), int) and c["exhaustive_length"] >= report["max_len"]
    lead = lead_verdict(exact, cert, exhaustive)
    verdict = f'<span class="{"ok" if exact else "bad"}">{_e(lead)}</span>' + (
        f" ({_e(certificate_text(cert))})" if lead == "CERTIFIED EXACT" else "")
    parts.append(f"<p>{verdict}. Sampled: {report['n_errors']} wrong of {report['n_positions']} scored positions in "
                 f"{report['n_sequences']} sequences (accuracy {report['accuracy']:.6g}).</p>")
    parts.append(_table(None, [row for row in [
        ["method", report["method"]], ["dtype", report["dtype"]],
        ["layers", info.get("n_layers")], ["heads per layer", info.get("heads_by_layer")],
        ["d_model", info.get("d_model")], ["d_mlp", info.get("d_mlp")], ["parameters", info.get("n_params")],
        ["positions", info.get("positions")],
        ["automaton sha256", report["automaton"]["sha256"]],
        ["checkpoint sha256", report.get("checkpoint_sha256")],
        ["tool version", report.get("tool_version")], ["schema", report.get("schema")],
        ["seeds", json.dumps(report.get("seeds"))],
    ] if row[1] is not None]))  # a field the model has not (positions of a model without any): no row
    parts.append(_candidates_section(model))
    fam = c.get("adversarial_families") or {}
    parts.append("<h2>What was checked</h2>" + _table(["check", "what"], [
        ["exhaustive", exhaustive_text(c) + " (the model is causal)"],
        ["random", f"{c['random_sequences']} sequences of length {c['random_length']}, every position"],
        ["adversarial", ", ".join(f"{k} ({v})" for k, v in fam.items()) or "none"],
        ["layer-wise", c.get("layerwise") or "none"],
        ["forward", c.get("forward", "plain")],
        *([["time budget", f"{c['time_budget_s']:g} s{cut_text(c) or ': every check ran in full'}"]]
          if isinstance(c.get("time_budget_s"), (int, float)) else []),
        ["recurrent reference", f"agreed with the integer simulation on {c.get('recurrent_reference_agreed_positions')} "
                                f"positions"],
    ]))
    for f in (report.get("invariants") or {}).get("failures", []):
        parts.append(f'<p class="bad">invariant failed: {_e(f)}</p>')
    for n in report.get("notes") or []:
        parts.append(f'<p class="note">{_e(n)}</p>')
    parts.append(_counterexample_section(report))
    parts.append(_accuracy_section(report))
    parts.append(_margins_section(report))
    parts.append(_layout_section(model))
    parts.append(_attention_section(model, sample_tokens(report, model)))
    parts.append(_diagram_section(model))
    parts.append("</body></html>\n")
    return "".join(parts)
