"""Checkpoints: one ``.safetensors`` file, JSON metadata in its header.

Loading reads tensors and JSON only -- nothing is unpickled, so a checkpoint
cannot run code.  Any problem (missing file, corrupt bytes, wrong format or
version, shapes that disagree with the config) raises CheckpointError.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from compiler.errors import CheckpointError

from .model import CompiledTransformer

FORMAT = "shortcut-transformer"
FORMAT_VERSION = "1"


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def save(model: CompiledTransformer, path: "str | Path") -> None:
    """Write ``model`` to ``path`` (byte-identical for identical models)."""
    tensors = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": _canonical(model.config),
        "meta": _canonical(model.meta),
    }
    save_file(tensors, str(path), metadata=metadata)


def load(path: "str | Path") -> CompiledTransformer:
    """Read a checkpoint written by :func:`save`."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # safetensors raises several types for corrupt files
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CheckpointError(f"{str(path)!r} is not a readable safetensors checkpoint ({msg})") from None
    if metadata.get("format") != FORMAT:
        raise CheckpointError(f"{str(path)!r} is not a shortcut checkpoint (no '{FORMAT}' metadata)")
    if metadata.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{str(path)!r} has checkpoint format version {metadata.get('format_version')!r}; "
            f"this shortcut reads version {FORMAT_VERSION}"
        )
    try:
        config = json.loads(metadata["config"])
        meta = json.loads(metadata["meta"])
        model = CompiledTransformer(config, meta)
        model.load_state_dict(tensors, strict=True)
        model.automaton  # validates the stored spec
    except CheckpointError:
        raise
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CheckpointError(f"{str(path)!r} is a corrupt shortcut checkpoint ({msg})") from None
    return model
