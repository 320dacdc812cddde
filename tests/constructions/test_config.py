"""The typed model config (constructions/config.py): checkpoints store its JSON byte for byte as
before, so old checkpoints load and their header digests hold; the shapes and parameter count."""

from __future__ import annotations

import json
from pathlib import Path

import compiler
from constructions.checkpoint import header_sha256, load, save
from constructions.config import BlockShape, ModelConfig
from constructions.unfold import stages, unfold, unfolded_config

OLD = Path(__file__).resolve().parent / "data" / "cyclic3_scan_691005e.safetensors"


def _stored(path: Path) -> tuple[str, dict]:
    """A checkpoint's stored config text and metadata, read without loading it."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        md = f.metadata()
    return md["config"], json.loads(md["meta"])


def test_an_old_checkpoints_config_and_header_digest_hold() -> None:
    model = load(OLD)
    text, meta = _stored(OLD)
    assert json.dumps(model.config.to_json(), sort_keys=True, separators=(",", ":")) == text
    assert header_sha256(model) == meta["header_sha256"]  # stamped by 691005e, over the config's JSON
    assert model.config == ModelConfig(d_model=18, d_head=11, n_symbols=3, max_len=8, n_out=3,
                                       blocks=(BlockShape(1, (24,)),) * 3, dtype="float32")


def test_a_saved_config_reads_back_equal_and_counts_its_parameters(tmp_path) -> None:
    model = compiler.compile_automaton("dyck:2,2", max_len=16, method="krohn-rhodes")
    save(model, tmp_path / "m.safetensors")
    text, _ = _stored(tmp_path / "m.safetensors")
    again = load(tmp_path / "m.safetensors")
    assert again.config == model.config and ModelConfig.from_json(json.loads(text)) == model.config
    assert model.config.n_params() == sum(p.numel() for p in model.parameters())
    assert model.config.dtype == "float32" and model.config.n_heads == max(b.n_heads for b in model.config.blocks)
    assert any(len(b.mlp_hidden) > 1 for b in model.config.blocks)  # a deep MLP: the unfolding changes shapes
    flat = unfold(model)
    assert flat.config == unfolded_config(model.config, stages(model)) != model.config
    assert flat.config.n_params() == sum(p.numel() for p in flat.parameters())
    # from the config alone (no early exits known): never fewer parameters
    assert unfolded_config(model.config).n_params() >= flat.config.n_params()

