"""``shortcut export``, ``decompose``, ``zoo`` and ``catalog``."""

from __future__ import annotations

import argparse

from constructions.checkpoint import load
from verify.text import json_text

from ..automata.atomic import write_atomic
from ..automata.cascade import summary_json, summary_text, to_dot
from ..automata.catalog import entries
from ..automata.decompose import decompose
from ..automata.load import load_spec
from ..usage import EXIT_NOT_EXACT, EXIT_OK
from ..export import FILES, FORMATS, save_transformer_lens, to_transformer_lens
from ..zoo.run import MAX_WORKERS, run_zoo, zoo_progress
from .status import still_working
from .args import POSITIVE, int_in, isymbols_option, promise_option, writable_dir, writable_file, write_output


def cmd_export(args: argparse.Namespace) -> int:
    out = writable_dir(args.output, "output directory", FILES, [args.model])
    model = load(args.model)
    export = to_transformer_lens(model)
    paths: list = []
    write_output(out, "output directory", lambda: paths.extend(save_transformer_lens(export, out)))
    c = export.config
    scratch = c["d_model"] - model.config.d_model
    print(f"exported {model.automaton.name} ({model.metadata.method}) for TransformerLens: {c['n_layers']} blocks "
          f"from {len(model.blocks)} layers, d_model {c['d_model']} ({scratch} scratch), {c['n_heads']} heads, "
          f"d_mlp {c['d_mlp']} -> {', '.join(str(p) for p in paths)}")
    return EXIT_OK


def cmd_decompose(args: argparse.Namespace) -> int:
    dot = writable_file(args.dot, "DOT file", [args.spec]) if args.dot is not None else None
    with still_working(f"decomposing {args.spec[:60]!r}"):
        cascade = decompose(load_spec(args.spec, complete=args.complete, promise=args.promise, isymbols=args.isymbols))
    if dot is not None:
        write_output(dot, "DOT file", lambda: write_atomic(dot, to_dot(cascade)))
    print(json_text(summary_json(cascade)) if args.json else summary_text(cascade))
    return EXIT_OK


def cmd_zoo(args: argparse.Namespace) -> int:
    """Make (or resume) a zoo of verified models (compiler/zoo): exit 1 when one is not exact."""
    out = writable_dir(args.output, "zoo directory")
    summary = run_zoo(args.config, out, workers=args.workers, limit=args.limit, ray=args.ray, progress=zoo_progress())
    print(summary.text())
    print(f"manifest: {out / 'manifest.jsonl'}")
    return EXIT_NOT_EXACT if summary.by_status.get("not_exact") else EXIT_OK


def cmd_catalog(args: argparse.Namespace) -> int:
    rows = entries()
    w = max(len(e.pattern) for e in rows)
    for e in rows:
        print(f"{e.pattern:<{w}}  {e.description}  (e.g. {e.example})")
    return EXIT_OK


def export_options(x: argparse.ArgumentParser) -> None:
    """``export``'s arguments."""
    x.add_argument("model", help="a checkpoint written by `shortcut compile`")
    x.add_argument("--format", default=FORMATS[0], choices=list(FORMATS), help="the target layout")
    x.add_argument("-o", "--output", required=True, metavar="DIR", help="the directory to write (created)")
    x.set_defaults(func=cmd_export)


def decompose_options(d: argparse.ArgumentParser) -> None:
    """``decompose``'s arguments."""
    d.add_argument("spec", help="a JSON spec file or a catalog name")
    d.add_argument("--complete", action="store_true",
                   help="send a partial automaton's missing transitions to an added sink state")
    promise_option(d)
    isymbols_option(d)
    d.add_argument("--json", action="store_true", help="the cascade summary as JSON")
    d.add_argument("--dot", metavar="FILE", help="also write the cascade as a Graphviz DOT graph")
    d.set_defaults(func=cmd_decompose)


def zoo_options(z: argparse.ArgumentParser) -> None:
    """``zoo``'s arguments."""
    z.add_argument("config", help="the zoo config (TOML, or JSON for *.json): families of models, see docs/zoo.md")
    z.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="the zoo directory (created; resumed if it exists)")
    z.add_argument("--workers", type=int_in(1, MAX_WORKERS), default=1, help="worker processes (or Ray CPUs)")
    z.add_argument("--limit", type=POSITIVE, default=None, help="only the config's first N models")
    z.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run on Ray (the [ray] extra): a local cluster, or the cluster at ADDRESS")
    z.set_defaults(func=cmd_zoo)


def catalog_options(k: argparse.ArgumentParser) -> None:
    """``catalog`` takes no arguments."""
    k.set_defaults(func=cmd_catalog)
