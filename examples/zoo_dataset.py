"""Load a zoo as a dataset, then one model and its ground-truth circuit, and check a head.

Makes a three-model zoo in ./zoo-example (skipped when it is there already), loads its
manifest with Hugging Face ``datasets`` (``pip install -e ".[zoo]"``; without it, with the json
module), picks a model, and checks that one of its offset heads attends where its circuit's
intended key says: for query position t, the key t - offset (BOS, position 0, before the start).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from compiler.zoo import parse, run_zoo
from constructions.checkpoint import load

CONFIG = {"seed": 0, "defaults": {"max_len": [16], "traces": 2},
          "family": [{"name": "definite", "class": "definite", "count": 3, "states": [4, 8], "letters": [2, 2]}]}


def manifest_rows(path: Path) -> list[dict]:
    """The manifest's rows, through ``datasets`` when it is installed."""
    try:
        import datasets
    except ImportError:
        print("datasets is not installed (pip install -e '.[zoo]'): reading the manifest with json")
        return [json.loads(line) for line in path.read_text().splitlines()]
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    print(f"datasets: {ds.num_rows} rows, columns include {sorted(c for c in ds.column_names if c in ('id', 'method', 'spec'))}")
    return list(ds)


def offset_head(circuit: dict) -> tuple[int, dict] | None:
    """The first head whose role is an offset, with its layer."""
    for layer in circuit["layers"]:
        for head in layer["heads"]:
            if head["role"] == "offset":
                return layer["layer"], head
    return None


def main() -> None:
    out = Path("zoo-example")
    if not (out / "manifest.jsonl").is_file():
        print(run_zoo(parse(CONFIG), out).text())
    rows = [r for r in manifest_rows(out / "manifest.jsonl") if r["status"] == "ok"]
    for row in rows:
        circuit = json.loads((out / row["files"]["circuit"]).read_text())
        found = offset_head(circuit)
        if found is not None:
            break
    else:
        raise SystemExit("no model with an offset head")
    layer, head = found
    model = load(out / row["files"]["model"])
    spec = json.loads(row["spec"])
    print(f"model {row['id']}: {row['method']}, {row['layers']} layers, {len(spec['states'])} states, "
          f"verified by {row['verification']['how']}")
    k = head["intended_key"]["offset"]
    tokens = torch.randint(0, model.config.n_symbols, (4, model.max_len), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens)
    pattern = cache[f"blocks.{layer}.attn.hook_pattern"][:, head["index"]]  # [batch, query, key]
    intended = torch.tensor([max(t - k, 0) for t in range(model.max_len + 1)])
    ok = bool((pattern.argmax(-1) == intended).all())
    print(f"head {head['name']} (layer {layer}): offset {k}, reads {head['reads']['value']}, writes {head['writes']}")
    print(f"intended key matches the pattern at every position: {ok}")


if __name__ == "__main__":
    main()
