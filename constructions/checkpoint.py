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

from compiler.automata.errors import CheckpointError

from .model import CompiledTransformer

FORMAT = "shortcut-transformer"
FORMAT_VERSION = "1"


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


_DTYPE_CODES = {torch.float32: "F32", torch.float64: "F64"}


def _serialize(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    """safetensors bytes with a canonical header (sorted keys, fixed layout).

    The format is an 8-byte little-endian header length, a JSON header mapping
    names to dtype/shape/byte range (plus ``__metadata__``), then the raw data.
    The reference writer keeps metadata in a hash map whose order varies between
    runs; writing the header ourselves makes checkpoints byte-identical.
    """
    header: dict[str, object] = {"__metadata__": metadata}
    chunks, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        data = t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _DTYPE_CODES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(chunks)


def save(model: CompiledTransformer, path: "str | Path") -> None:
    """Write ``model`` to ``path`` (byte-identical for identical models)."""
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": _canonical(model.config),
        "meta": _canonical(model.meta),
    }
    Path(path).write_bytes(_serialize(model.state_dict(), metadata))


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
