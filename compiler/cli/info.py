"""``shortcut plan`` and ``shortcut info``: the planner's candidates, a checkpoint's description
and its residual layout."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from constructions.checkpoint import load, weights_sha256
from constructions.model import CompiledTransformer
from verify.certify import certificate_text
from verify.report import CHANGED, DIGESTS_NOTE, UNSEALED, VERIFIED, summary_line, verification_status
from verify.text import json_text

from ..automata.errors import ShortcutError
from ..automata.formats import parse_alphabet
from ..automata.load import load_spec
from ..automata.mealy import is_mealy, mealy_moore
from ..usage import EXIT_OK
from ..pipeline import DTYPES, candidates
from .args import dtype_of, isymbols_option, planner_options, promise_option
from .status import still_working


def _dims_text(dims: list[int]) -> str:
    """Residual indices as ranges: [0, 2, 3, 4] -> '0,2-4'."""
    runs: list[list[int]] = []
    for d in dims:
        if runs and d == runs[-1][1] + 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _table(rows: Sequence[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    return [(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths))).rstrip() for r in rows]


def layout_text(layout: dict) -> list[str]:
    """``info --layout``: the subspaces (residual dims), then per layer each head's query/key/value
    reads and writes and the MLP's reads and writes, by subspace name, in aligned columns."""
    names = lambda xs: ", ".join(xs) or "-"
    subspaces = sorted(layout["subspaces"].items(), key=lambda kv: min(kv[1]["dims"], default=-1))
    lines = ["subspaces:"]
    lines += _table([(name, _dims_text(s["dims"]), f"{len(s['dims'])} dim{'s' * (len(s['dims']) != 1)}")
                     for name, s in subspaces])
    rows: list[tuple[str, ...]] = []
    starts: dict[int, list[int]] = {}  # index into rows -> the layers starting there
    for block in layout["blocks"]:
        starts.setdefault(len(rows), []).append(block["layer"])
        for h in block["heads"]:
            r = h["reads"]
            rows += [(f"head {h['index']}", h["name"], "query", names(r["query"])),
                     ("", "", "key", names(r["key"])), ("", "", "value", names(r["value"])),
                     ("", "", "write", names(h["writes"]))]
        m = block["mlp"]
        if m is not None:
            hidden = "x".join(str(w) for w in m["hidden"])
            rows += [("mlp", m["name"], "read", names(m["reads"])),
                     ("", f"hidden {hidden}", "write", names(m["writes"]))]
    for i, line in enumerate([*_table(rows), None]):
        lines += [f"layer {layer}:" for layer in starts.get(i, [])]
        if line is not None:
            lines.append(line)
    return lines


STORED = "stored at compile time, not re-checked by info"
"""How ``info`` labels every verdict it prints: it repeats what the checkpoint holds, bound to the
weights and header by sha256 digests that anyone who edits the file can recompute
(:data:`verify.report.DIGESTS_NOTE`); ``shortcut certify`` proves the model again."""


def _verification_line(model, summary: dict | None) -> str:
    """``info``'s verdict: the stored ``summary`` (labelled :data:`STORED`; its certificate only
    as :func:`stored_certificate` allows, so an ignored one cannot make it say "exact"), whether
    it still describes these weights and header and is itself unchanged, and what such digests
    are worth."""
    status = verification_status(model)
    if status is None or not isinstance(summary, dict):
        return "verification: none stored (compiled with --no-verify; run `shortcut verify`)"
    if status == VERIFIED:
        line = f"{summary_line(summary, status, model.max_len)} ({STORED})"
    elif status.startswith(CHANGED) or status == UNSEALED:
        line = f"{status}; run `shortcut verify` (stored verdict: {summary_line(summary, max_len=model.max_len)})"
    else:  # a summary without digests: nothing to say about them
        return f"verification: {summary_line(summary, status, model.max_len)} ({STORED})"
    return f"verification: {line}\nintegrity: {DIGESTS_NOTE}"


def stored_certificate(model: CompiledTransformer) -> tuple[dict | None, str]:
    """The certificate stored in the verification summary, when it may be shown (the summary's
    digests match and the certificate names this model's max_len, dtype and weights digest), and
    one line saying what ``info`` knows of it: a certificate that disagrees with the model is not
    shown, so a forged ``max_len`` is never repeated."""
    summary = model.metadata.verification
    cert = summary.get("certificate") if isinstance(summary, dict) else None
    if not isinstance(cert, dict):
        return None, "none stored (run `shortcut certify`)"
    if verification_status(model) != VERIFIED:  # the summary's digests cover the weights, the header and itself
        return None, "stored, but the model changed since; run `shortcut certify`"
    own = {"max_len": model.max_len, "dtype": model.config.dtype, "weights_sha256": weights_sha256(model)}
    differ = [k for k, v in own.items() if type(cert.get(k)) is not type(v) or cert.get(k) != v]
    if differ:
        return None, f"the stored one disagrees with this model ({', '.join(differ)}): ignored; run `shortcut certify`"
    return cert, f"{certificate_text(cert)} ({STORED}; `shortcut certify` proves it again)"


def candidates_text(cands: list[dict], shape: str = "default") -> list[str]:
    """The planner's candidates as an aligned table: construction, theorem, whether it applies,
    attention layers (standard blocks in the standard ``shape``), parameters, whether it fits the
    budgets, and why it was (``*``) or was not taken.  Tolerates the shorter records of older checkpoints."""
    num = lambda x: "-" if x is None else (f"{x:,}" if isinstance(x, int) else str(x))
    yes = lambda x: "-" if x is None else ("yes" if x else "no")
    depth = "blocks" if shape == "standard" else "layers"
    rows = [("", "construction", "theorem", "applies", depth, "params", "fits", "why (not)")]
    for c in cands:
        rows.append(("*" if c.get("chosen") else "", str(c.get("name")), str(c.get("theorem", "")),
                     yes(c.get("applies", c.get("layers") is not None)), num(c.get("layers")), num(c.get("params")),
                     yes(c.get("fits", c.get("refusal") is None)),
                     " ".join(str(c.get("refusal") or c.get("note") or "").split())))
    return _table(rows, indent="")


def _stored_candidates(model) -> list[dict] | None:
    """``meta["candidates"]`` when it is a list of records (None for an absent or edited one)."""
    cands = model.meta.get("candidates")
    if isinstance(cands, list) and cands and all(isinstance(c, dict) for c in cands):
        return cands
    return None


def cmd_plan(args: argparse.Namespace) -> int:
    alphabet = parse_alphabet(args.alphabet) if args.alphabet is not None else None
    with still_working(f"reading {args.spec[:60]!r}"):
        automaton = load_spec(args.spec, complete=args.complete, alphabet=alphabet, promise=args.promise,
                              isymbols=args.isymbols)
    with still_working(f"planning {automaton.n_states:,} states x {automaton.n_symbols:,} letters"):
        result = candidates(automaton, max_len=args.max_len, prefer=args.prefer,
                            positions=args.positions, max_params=args.max_params, dtype=dtype_of(args.dtype),
                            allow_inexact=args.allow_inexact, shape=args.shape)
    if args.json:
        print(json_text(result))
    else:
        shape = ", standard shape" if args.shape == "standard" else ""
        print(f"plan for {result['automaton']} at max_len {args.max_len} (prefer {args.prefer}{shape}, "
              f"budget {args.max_params:,} parameters):")
        print("\n".join(candidates_text(result["candidates"], args.shape)))
        if result["chosen"] is not None:
            print(f"chosen: {result['chosen']} -- {result['why']}")
        if is_mealy(automaton):  # what compile does by default: the outputs, through another automaton
            mm = mealy_moore(automaton)
            print(f"Mealy machine: these candidates read its states; compile reads its outputs (the default readout) "
                  f"from the Moore machine over its {mm.moore.n_states - 1} transitions ({mm.states_after} states "
                  f"after minimising by outputs), planned the same way, or by transition on those states")
    if result["error"] is not None:
        raise ShortcutError(result["error"])
    return EXIT_OK


def cmd_info(args: argparse.Namespace) -> int:
    model = load(args.model)
    if args.layout:
        try:
            layout = model.layout()
            text = json_text(layout) if args.json else "\n".join(layout_text(layout))
        except KeyError as e:
            raise ShortcutError(str(e.args[0])) from None
        except (TypeError, ValueError, AttributeError, IndexError) as e:
            raise ShortcutError(f"the stored layout of {args.model!r} is malformed ({type(e).__name__})") from None
        print(text)
        return EXIT_OK
    cands = _stored_candidates(model)
    status = verification_status(model)
    cert, cert_line = stored_certificate(model)
    stored = model.metadata.verification
    if isinstance(stored, dict) and "certificate" in stored:  # shown only as stored_certificate allows
        stored = {**stored, "certificate": cert}
    info = {**model.info(), "verification": stored, "candidates": cands, "verification_status": status,
            "verification_digests": None if status is None else DIGESTS_NOTE,
            "verification_rechecked": False, "certificate_status": cert_line}
    if args.json:
        print(json_text(info))
        return EXIT_OK
    for k, v in info.items():
        if k not in ("verification", "verification_status", "verification_digests", "verification_rechecked",
                     "certificate_status", "candidates"):
            print(f"{k}: {v}")
    if cands is not None:
        print("candidates:")
        print("\n".join(candidates_text(cands, info["shape"])))
    print(_verification_line(model, stored))
    print(f"certificate: {cert_line}")
    return EXIT_OK


def plan_options(n: argparse.ArgumentParser) -> None:
    """``plan``'s arguments."""
    n.add_argument("spec",
                   help="a spec as `compile` takes it (JSON, table, .dot, .npz, regex:PATTERN or a catalog name)")
    n.add_argument("--alphabet", help="the letters of a regex:PATTERN, comma-separated (default: those it uses)")
    n.add_argument("--max-len", type=int, default=128, help="longest input the model must simulate exactly")
    planner_options(n)
    n.add_argument("--positions", default="sinusoidal", choices=["sinusoidal", "circle"],
                   help="position code of the scan construction")
    n.add_argument("--complete", action="store_true",
                   help="send a partial automaton's missing transitions to an added sink state")
    promise_option(n)
    isymbols_option(n)
    n.add_argument("--dtype", default="float32", choices=list(DTYPES), help="weights' float type")
    n.add_argument("--allow-inexact", action="store_true",
                   help="take constructions beyond their certified float reach at this max_len and dtype too")
    n.add_argument("--json", action="store_true", help="the candidates and the choice as one JSON object")
    n.set_defaults(func=cmd_plan)


def info_options(i: argparse.ArgumentParser) -> None:
    """``info``'s arguments."""
    i.add_argument("model", help="a checkpoint written by `shortcut compile`")
    i.add_argument("--json", action="store_true", help="the description as one JSON object")
    i.add_argument("--layout", action="store_true",
                   help="what each head and MLP reads and writes, by residual subspace (with --json: the layout JSON)")
    i.set_defaults(func=cmd_info)
