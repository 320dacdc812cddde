"""Checkpoints: one ``.safetensors`` file, JSON metadata in its header.

Loading reads tensors and JSON only -- nothing is unpickled, so a checkpoint
cannot run code.  Any problem (missing file, corrupt bytes, wrong format or
version, shapes that disagree with the config, a spec or layout that disagrees
with the tensors) raises CheckpointError.

Content digests bind verdicts to what was verified: :func:`weights_sha256` hashes
the tensors in name order, :func:`header_sha256` the config and the metadata (spec,
method, plan, layout, construction notes; not the verification summary), and
:func:`summary_sha256` the verification summary itself (every entry but that digest, so
whatever is added to it later is covered; the summary holds the other two digests, so its
digest binds all three).  The planner stores the header digest at compile time
(``meta["header_sha256"]``); :func:`header_intact` compares it with the header now;
:func:`save` seals the summary (:func:`seal_verification`).

A checkpoint without its header digest is refused (:func:`load`): the tool writes one into
every checkpoint, so its absence means an edit, and nothing could tell which.  These are sha256
digests, not signatures: they detect accidental change (a hand edit, a
corrupted copy, a stale summary), not tampering -- anyone who edits a checkpoint can recompute them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from compiler.automata.atomic import write_atomic
from compiler.automata.errors import CheckpointError, ShortcutError

from .config import BlockShape, ModelConfig
from .labels import check_readout
from .model import CompiledTransformer

FORMAT = "shortcut-transformer"
FORMAT_VERSION = "1"


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


_DTYPE_CODES = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32", torch.int64: "I64"}


def serialize(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
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
    """Write ``model`` to ``path`` (byte-identical for identical models; atomically: a kill leaves
    the old file or the new one).  A verification summary in its metadata is sealed first
    (:func:`seal_verification`, in place)."""
    seal_verification(model)
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "config": _canonical(model.config.to_json()),
        "meta": _canonical(model.meta),
    }
    write_atomic(path, serialize(model.state_dict(), metadata))


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
        if not isinstance(config, dict) or not isinstance(meta, dict):
            raise CheckpointError("its config and meta must be JSON objects")
        model = CompiledTransformer(_check_config(config, tensors), meta)
        model.load_state_dict(tensors, strict=True)
        check_header(model)
    except Exception as e:  # RecursionError and MemoryError included: a crafted header is still bad input
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CheckpointError(f"{str(path)!r} is a corrupt shortcut checkpoint ({msg})") from None
    if not isinstance(model.meta.get("header_sha256"), str):
        raise CheckpointError(f"{str(path)!r} carries no digest of its header (header_sha256): every checkpoint "
                              f"shortcut writes has one, so this one was edited; recompile it from the spec")
    return model


_DTYPES = {"float32": torch.float32, "float64": torch.float64}
MAX_BLOCKS = 4096
"""Most blocks a checkpoint may declare: each costs a module (tens of kB) before any weight is
read into it, so a crafted config of 150,000 empty blocks would take gigabytes.  (Compiled
models have tens.)"""


def _check_config(config: dict[str, Any], tensors: dict[str, torch.Tensor]) -> ModelConfig:
    """The stored config, checked before anything is allocated: its sizes are non-negative integers, at most
    :data:`MAX_BLOCKS` blocks, each with a head (so each holds at least 4 d_model d_head of the
    file's parameters: the file's size bounds the blocks, heads and widths), its dtype is one we
    write, and its shapes account for exactly the parameters the file holds."""
    def sizes(x: Any) -> bool:
        return type(x) is int and x >= 0 if not isinstance(x, list) else all(map(sizes, x))

    keys = ("d_model", "d_head", "n_symbols", "n_out", "max_len")
    blocks = config.get("blocks")
    if (not all(sizes(config.get(k)) for k in keys) or not isinstance(blocks, list)
            or not all(isinstance(b, dict) and sizes(b.get("n_heads")) and isinstance(b.get("mlp_hidden"), list)
                       and sizes(b["mlp_hidden"]) for b in blocks)):
        raise CheckpointError(f"its config needs non-negative integer sizes {list(keys)} and blocks")
    if len(blocks) > MAX_BLOCKS:
        raise CheckpointError(f"its config declares {len(blocks):,} blocks, over the limit of {MAX_BLOCKS:,}")
    if config["d_model"] < 1 or config["d_head"] < 1 or any(b["n_heads"] < 1 for b in blocks):
        raise CheckpointError("its config needs d_model >= 1, d_head >= 1 and at least one head in every block")
    if config.get("dtype") not in _DTYPES:
        raise CheckpointError(f"its config has dtype {config.get('dtype')!r}; expected one of {list(_DTYPES)}")
    dtype = _DTYPES[config["dtype"]]
    if any(t.dtype != dtype for t in tensors.values()):
        raise CheckpointError(f"its tensors are not all {config['dtype']}, as its config says")
    typed = ModelConfig.from_json(config)
    held, implied = sum(t.numel() for t in tensors.values()), typed.n_params()
    if held != implied:
        raise CheckpointError(f"its config implies {implied} parameters but the file holds {held}")
    return typed


def check_header(model: CompiledTransformer) -> None:
    """The metadata agrees with the tensors: a valid spec whose alphabet and states match the
    embedding and unembedding, a method name, and every stored subspace inside ``d_model``.  (Whether the method is registered and its
    plan decodes is :func:`constructions.registry.plan_of`'s check.)"""
    c, meta = model.config, model.meta
    try:
        a = model.automaton
    except ShortcutError as e:
        raise CheckpointError(f"its spec is invalid: {e}") from None
    if c.n_symbols != a.n_symbols:
        raise CheckpointError(f"its spec has {a.n_symbols} symbols but the embedding is for {c.n_symbols}")
    try:
        check_readout(meta, a.n_states, c.n_out)
    except ShortcutError as e:
        raise CheckpointError(str(e)) from None
    if not isinstance(meta.get("method"), str):
        raise CheckpointError("its metadata names no construction (no 'method' string)")
    check_layout(meta, c)
    d = c.d_model
    layout = meta.get("layout", {})
    for where, subspaces in (("subspaces", meta.get("subspaces", {})),
                             ("layout", layout.get("subspaces", {}) if isinstance(layout, dict) else None)):
        if not isinstance(subspaces, dict):
            raise CheckpointError(f"its {where} must be an object")
        for name, dims in subspaces.items():
            dims = dims.get("dims") if isinstance(dims, dict) else dims
            if not isinstance(dims, list) or not all(type(i) is int and 0 <= i < d for i in dims):
                raise CheckpointError(f"its {where} entry {name!r} is not a list of residual dims in 0..{d - 1}")


def _names(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(n, str) for n in x)


def _layout_block_ok(block: Any, layer: int, config_block: BlockShape) -> bool:
    """One ``meta["layout"]["blocks"]`` entry has the shape :func:`constructions.assemble.layout_of`
    writes and agrees with the config's block (heads within its count, the MLP's hidden widths)."""
    if not isinstance(block, dict) or block.get("layer") != layer or not isinstance(block.get("heads"), list):
        return False
    if len(block["heads"]) > config_block.n_heads or "mlp" not in block:
        return False
    for h in block["heads"]:
        reads = h.get("reads") if isinstance(h, dict) else None
        if not (isinstance(reads, dict) and all(_names(reads.get(r)) for r in ("query", "key", "value"))
                and _names(h.get("writes")) and isinstance(h.get("name"), str) and type(h.get("index")) is int):
            return False
    m = block["mlp"]
    if m is None:
        return not config_block.mlp_hidden
    return (isinstance(m, dict) and isinstance(m.get("name"), str) and m.get("hidden") == list(config_block.mlp_hidden)
            and _names(m.get("reads")) and _names(m.get("writes")))


def check_layout(meta: dict[str, Any], config: ModelConfig) -> None:
    """The per-block metadata has the shape the tool writes, one entry per block of the config
    (the layout's blocks, the construction notes ``meta["layers"]``) and ``residual_labels``
    names every residual dim: a crafted header is refused here, not met as a TypeError later."""
    blocks = config.blocks
    layout = meta.get("layout")
    if layout is not None:
        lb = layout.get("blocks") if isinstance(layout, dict) else None
        if not isinstance(lb, list) or len(lb) != len(blocks):
            raise CheckpointError(f"its layout must list {len(blocks)} blocks, one per block of its config")
        for layer, (b, cb) in enumerate(zip(lb, blocks)):
            if not _layout_block_ok(b, layer, cb):
                raise CheckpointError(f"its layout of block {layer} is malformed (heads, MLP reads, writes, widths)")
    notes = meta.get("layers")
    if notes is not None and not (isinstance(notes, list) and len(notes) == len(blocks)
                                  and all(isinstance(n, dict) for n in notes)):
        raise CheckpointError(f"its construction notes ('layers') must be {len(blocks)} objects, one per block")
    labels = meta.get("residual_labels")
    if labels is not None and not (_names(labels) and len(labels) == config.d_model):
        raise CheckpointError(f"its residual_labels must be {config.d_model} strings, one per residual dim")


def _digest(parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def weights_sha256(model: CompiledTransformer) -> str:
    """sha256 over every tensor (name, dtype, shape, little-endian bytes), in name order."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        a = t.detach().contiguous().cpu().numpy()
        h.update(f"{name}:{a.dtype.str}:{list(a.shape)};".encode())
        h.update(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    return h.hexdigest()


UNHASHED = ("verification", "header_sha256")
"""Metadata outside the header digest: the verification summary (added after compiling, and
itself bound to both digests) and the digest itself."""


def header_sha256(model: CompiledTransformer) -> str:
    """sha256 over everything that defines the model besides its weights: the config and the
    metadata (spec, method, plan, layout, construction notes, ...) but :data:`UNHASHED`
    (canonical JSON)."""
    meta = {k: v for k, v in model.meta.items() if k not in UNHASHED}
    return _digest({"config": model.config.to_json(), "meta": meta})


def header_intact(model: CompiledTransformer) -> bool | None:
    """Whether the header still has the digest written at compile time (None: none stored)."""
    stored = model.meta.get("header_sha256")
    return None if stored is None else stored == header_sha256(model)


def stamp_header(model: CompiledTransformer) -> None:
    """Record the header digest (after compiling, or after a sanctioned change such as a new start)."""
    model.meta["header_sha256"] = header_sha256(model)


SUMMARY_DIGEST = "summary_sha256"
"""The key, inside ``meta["verification"]``, of the summary's own digest."""


def summary_sha256(summary: dict[str, Any]) -> str:
    """sha256 over a verification summary: every entry but :data:`SUMMARY_DIGEST` (canonical JSON),
    so any entry, whoever adds it, is covered; the summary's ``weights_sha256`` and
    ``header_sha256`` make it bound to the weights and the header too."""
    return _digest({k: v for k, v in summary.items() if k != SUMMARY_DIGEST})


def seal_verification(model: CompiledTransformer) -> None:
    """Record the digest of ``meta["verification"]`` in it (in place; nothing without a summary)."""
    summary = model.meta.get("verification")
    if isinstance(summary, dict):
        model.meta["verification"] = {**summary, SUMMARY_DIGEST: summary_sha256(summary)}


def summary_intact(summary: dict[str, Any]) -> bool | None:
    """Whether a stored summary still has the digest it was sealed with (None: it was never sealed)."""
    stored = summary.get(SUMMARY_DIGEST)
    return None if stored is None else stored == summary_sha256(summary)
