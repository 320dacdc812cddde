"""Export a compiled model to TransformerLens: state dict, config, block map, residual labels.

TransformerLens blocks have one MLP hidden layer and one head count and MLP width for every
layer, so the model is first unfolded (``constructions/unfold.py``: a k-hidden-layer MLP
becomes k blocks, exactly), then heads and MLP widths are zero-padded to the largest (zero
heads and units add exact zeros).  A standard-shape model is exported as it is, block for block:
its MLP widths were balanced when it was unfolded (``constructions.unfold.balance``), so the
padding is what no move of its units could remove.  The state dict uses the classic ``HookedTransformer``
keys (``embed.W_E``, ``pos_embed.W_pos``, ``blocks.{i}.attn.W_Q`` ..., ``unembed.W_U``);
TransformerLens 4.x loads it into a native ``TransformerBridge`` through
``convert_tl_checkpoint`` (:func:`to_transformer_bridge`), 3.x into ``HookedTransformer``
with ``load_state_dict`` (docs/interop.md shows both).

Conventions the config pins (each one matters for bit-equality):

* token ids are our symbol ids with BOS = ``n_symbols`` prepended by the caller (position 0),
  so ``d_vocab = n_symbols + 1``, ``n_ctx = max_len + 1``; the logits at position 0 (BOS) are
  not a state;
* grouped-query attention where the heads allow it (:func:`kv_heads`: every run of consecutive
  heads in every block shares its W_K and W_V, as the gridworld's find heads do): the config sets
  ``n_key_value_heads`` and the state dict holds one key and value per run under
  ``HookedTransformer``'s GQA names (``attn._W_K``, ``attn._W_V``, ``attn._b_K``, ``attn._b_V``);
  each head computes the same scores from the same numbers, and the padding heads cost W_Q and W_O
  only;
* no normalisation, ReLU, standard positional embedding, causal attention, zero biases;
* attention scores: our scores are ``q . k`` (the temperature is in ``W_Q``); TransformerLens
  divides by ``attn_scale``.  4.x's native attention ignores ``use_attn_scale=False`` (it then
  divides by sqrt(d_head)) and refuses ``attn_scale=1`` when d_head > 1, so the export sets
  ``attn_scale = 2`` and doubles ``W_Q``: multiplying and dividing by a power of two is exact
  (barring overflow and subnormal scores);
* load with weight processing off (4.x ``enable_compatibility_mode`` centres the unembedding
  and shifts logits by up to 10; 3.x ``fold_ln``/``center_*`` likewise).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from constructions.checkpoint import serialize
from constructions.labels import output_names
from constructions.model import CompiledTransformer
from constructions.unfold import unfold
from verify.text import json_text

from .automata.atomic import write_atomic
from .automata.errors import InputError
from .automata.reading import MiB, read_json

FORMAT = "transformer-lens"
FORMATS = (FORMAT,)
"""``shortcut export --format`` choices."""
MAP_SCHEMA = "shortcut-transformer-lens-map/1"
ATTN_SCALE = 2.0
"""TransformerLens divides scores by this; ``W_Q`` is multiplied by it (a power of two: exact)."""
FILES = ("model.safetensors", "config.json", "map.json", "tokenizer.json", "tokenizer_config.json")
BOS = "BOS"
"""The BOS token's name in the exported vocabulary (id ``n_symbols``, after the symbols)."""
UNK = "<unk>"
"""The tokenizer's unknown token: id ``n_symbols + 1``, past the embedding, so an unknown
symbol fails at the embedding instead of being read as another token."""


@dataclass
class TransformerLensExport:
    """A model in TransformerLens's layout.

    ``state_dict``: classic ``HookedTransformer`` keys; ``config``: the config fields (JSON:
    ``dtype`` is a string); ``blocks[i]``: exported block i's origin (our ``layer`` and its
    MLP's hidden layer ``stage`` of ``stages``); ``residual_labels``: a name for every residual
    dimension, scratch (``unfold:a[0]``, ...) included; ``subspaces``: named dims; ``tokens``
    and ``outputs``: the vocabulary (symbols, then ``BOS``) and the logits' meaning (states, or a
    label model's labels)."""

    state_dict: dict[str, torch.Tensor]
    config: dict[str, Any]
    blocks: list[dict[str, int]]
    residual_labels: list[str]
    subspaces: dict[str, list[int]]
    tokens: list[str]
    outputs: list[str]

    def map_json(self) -> dict[str, Any]:
        """Everything but the tensors and the config (``map.json``)."""
        return {"schema": MAP_SCHEMA, "bos_token": len(self.tokens) - 1, "tokens": self.tokens,
                "outputs": self.outputs, "blocks": self.blocks, "residual_labels": self.residual_labels,
                "subspaces": self.subspaces}


def tokenizer_json(tokens: list[str]) -> dict[str, Any]:
    """A Hugging Face ``tokenizers`` definition of the vocabulary ``tokens`` (symbols, then
    :data:`BOS`): whitespace-separated symbols, one id each, BOS prepended to every sequence."""
    bos = len(tokens) - 1
    special = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": True} for i, t in ((bos, BOS), (bos + 1, UNK))]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special, "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {BOS: {"id": BOS, "ids": [bos], "tokens": [BOS]}}},
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate([*tokens, UNK])}, "unk_token": UNK},
    }


def tokenizer_config(n_ctx: int) -> dict[str, Any]:
    """``tokenizer_config.json``: BOS (also end and padding token), prepended already
    (``add_bos_token``: TransformerLens then builds no tokenizer of its own)."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": BOS, "pad_token": BOS,
            "unk_token": UNK, "add_bos_token": True, "model_max_length": n_ctx, "padding_side": "right",
            "clean_up_tokenization_spaces": False}


def _config(flat: CompiledTransformer, n_heads: int, d_mlp: int, kv: int) -> dict[str, Any]:
    """The TransformerLens config fields (module docstring); ``n_key_value_heads`` where ``kv``
    key-value heads (:func:`kv_heads`) are fewer than the heads."""
    c = flat.config
    a = flat.automaton
    return {**({"n_key_value_heads": kv} if kv < n_heads else {}),
        "model_name": f"shortcut-{a.name}-{flat.meta.get('method', 'model')}",
        "n_layers": len(flat.blocks), "d_model": c.d_model, "d_head": c.d_head, "n_heads": n_heads,
        "d_mlp": d_mlp, "d_vocab": c.n_symbols + 1, "d_vocab_out": c.n_out, "n_ctx": c.max_len + 1,
        "act_fn": "relu", "normalization_type": None, "positional_embedding_type": "standard",
        "attention_dir": "causal", "attn_only": False, "use_attn_scale": True, "attn_scale": ATTN_SCALE,
        "original_architecture": None, "tokenizer_name": None, "default_prepend_bos": True,
        "dtype": c.dtype,
    }


def kv_heads(blocks: Iterable[Any], n_heads: int) -> int:
    """The fewest key-value heads TransformerLens's grouped-query attention (``n_key_value_heads``)
    can hold these attention sublayers in exactly: the least divisor g of ``n_heads`` such that in
    every block the heads of each run of n_heads / g consecutive heads share W_K and W_V (a run's
    padding heads, zero in W_Q and W_O, take its key and value: their output is 0 whatever they
    attend to).  A head then reads its run's one key and value, the same numbers (the gridworld's
    find heads all read the same codes and copy the same position)."""
    def shared(W: torch.Tensor, size: int) -> bool:
        return all(torch.equal(W[h], W[h - h % size]) for h in range(W.shape[0]))
    blocks = list(blocks)
    for g in (g for g in range(1, n_heads + 1) if n_heads % g == 0):
        if all(shared(b.attn.W_K, n_heads // g) and shared(b.attn.W_V, n_heads // g) for b in blocks):
            return g
    return n_heads


def _runs(W: torch.Tensor, g: int, n_heads: int, shape: tuple[int, ...]) -> torch.Tensor:
    """The key or value weights of :func:`kv_heads`'s g runs (the first head of each; zero for a
    run of padding heads alone), shaped ``(g, *shape)``."""
    out = torch.zeros((g, *shape), dtype=W.dtype)
    for r in range(g):
        if r * (n_heads // g) < W.shape[0]:
            out[r] = _pad(W[r * (n_heads // g)], shape)
    return out


def _pad(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """``t`` zero-padded at the end of every axis to ``shape``."""
    out = torch.zeros(shape, dtype=t.dtype)
    out[tuple(slice(0, n) for n in t.shape)] = t
    return out


@torch.no_grad()
def to_transformer_lens(model: CompiledTransformer) -> TransformerLensExport:
    """``model`` unfolded to one MLP hidden layer per block and laid out as a TransformerLens
    state dict and config (module docstring); its logits are ``model``'s at positions 1..T.
    InputError when a letter is named as a special token of the tokenizer (:data:`BOS`,
    :data:`UNK`): one name would stand for two ids."""
    clash = [s for s in model.automaton.alphabet if s in (BOS, UNK)]
    if clash:
        raise InputError(f"the letter {clash[0]!r} has the name of the exported tokenizer's special token "
                         f"{clash[0]!r} ({BOS!r} and {UNK!r} are reserved): rename the letter in the spec and recompile")
    flat = unfold(model, balanced=False)  # a standard-shape model's blocks are its own, balanced when it was unfolded
    c = flat.config
    d, e = c.d_model, c.d_head
    n_heads = c.n_heads
    d_mlp = max([h for b in c.blocks for h in b.mlp_hidden] + [1])
    kv = kv_heads(flat.blocks, n_heads)
    sd: dict[str, torch.Tensor] = {"embed.W_E": flat.W_E.detach().clone(),
                                   "pos_embed.W_pos": flat.W_pos.detach().clone()}
    dtype = flat.W_E.dtype
    for i, blk in enumerate(flat.blocks):
        p = f"blocks.{i}."
        att = blk.attn
        sd[p + "attn.W_Q"] = _pad(att.W_Q * ATTN_SCALE, (n_heads, d, e))
        sd[p + "attn.W_O"] = _pad(att.W_O, (n_heads, e, d))
        sd[p + "attn.b_Q"] = torch.zeros(n_heads, e, dtype=dtype)
        if kv < n_heads:  # grouped-query attention: HookedTransformer's names for its key-value heads
            sd[p + "attn._W_K"] = _runs(att.W_K, kv, n_heads, (d, e))
            sd[p + "attn._W_V"] = _runs(att.W_V, kv, n_heads, (d, e))
            sd[p + "attn._b_K"], sd[p + "attn._b_V"] = (torch.zeros(kv, e, dtype=dtype) for _ in range(2))
        else:
            sd[p + "attn.W_K"], sd[p + "attn.W_V"] = _pad(att.W_K, (n_heads, d, e)), _pad(att.W_V, (n_heads, d, e))
            sd[p + "attn.b_K"], sd[p + "attn.b_V"] = (torch.zeros(n_heads, e, dtype=dtype) for _ in range(2))
        sd[p + "attn.b_O"] = torch.zeros(d, dtype=dtype)
        m = blk.mlp
        if m is None:
            W_in, b_in, W_out, b_out = (torch.zeros(s, dtype=dtype) for s in ((d, d_mlp), (d_mlp,), (d_mlp, d), (d,)))
        else:
            W_in, b_in, W_out, b_out = m.weight(0), m.bias(0), m.weight(m.n_hidden), m.bias(m.n_hidden)
        sd[p + "mlp.W_in"] = _pad(W_in, (d, d_mlp))
        sd[p + "mlp.b_in"] = _pad(b_in, (d_mlp,))
        sd[p + "mlp.W_out"] = _pad(W_out, (d_mlp, d))
        sd[p + "mlp.b_out"] = b_out.detach().clone()
    sd["unembed.W_U"] = flat.W_U.detach().clone()
    sd["unembed.b_U"] = flat.b_U.detach().clone()
    a = flat.automaton
    return TransformerLensExport(
        state_dict={k: v.contiguous() for k, v in sd.items()}, config=_config(flat, n_heads, d_mlp, kv),
        blocks=list(flat.meta["unfolded"]["blocks"]), residual_labels=list(flat.meta["residual_labels"]),
        subspaces={k: list(v) for k, v in flat.meta["subspaces"].items()},
        tokens=[*a.alphabet, BOS], outputs=list(output_names(flat)))  # a label model's logits are its labels


def save_transformer_lens(export: TransformerLensExport, directory: str | Path) -> list[Path]:
    """Write :data:`FILES` into ``directory`` (created): ``model.safetensors`` (the state dict),
    ``config.json``, ``map.json`` and the tokenizer (``tokenizer.json``, ``tokenizer_config.json``:
    what ``PreTrainedTokenizerFast.from_pretrained`` reads); deterministic bytes for the same
    model; each file written atomically."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in FILES]
    write_atomic(paths[0], serialize(export.state_dict, {"format": FORMAT, "config": json_text(export.config)}))
    texts = [export.config, export.map_json(), tokenizer_json(export.tokens), tokenizer_config(export.config["n_ctx"])]
    for path, obj in zip(paths[1:], texts):
        write_atomic(path, json_text(obj, indent=1, sort_keys=path.name == "config.json") + "\n")
    return paths


def bos_tokens(tokens: torch.Tensor, n_symbols: int) -> torch.Tensor:
    """Our token ids [B, T] with BOS (``n_symbols``) prepended: the exported model's input."""
    bos = torch.full((tokens.shape[0], 1), n_symbols, dtype=torch.long, device=tokens.device)
    return torch.cat([bos, tokens.long()], dim=1)


def _transformer_lens_4() -> Any:
    """TransformerLens 4.x's pieces for a native bridge (the optional extra, imported here only)."""
    try:
        from transformer_lens.config import TransformerBridgeConfig
        from transformer_lens.model_bridge import TransformerBridge  # noqa: F401 (registers boot_native)
        from transformer_lens.model_bridge.sources.native import boot as boot_native
        from transformer_lens.utilities.tl_checkpoint_conversion import convert_tl_checkpoint
        from transformers import PreTrainedTokenizerFast
    except ImportError as err:
        raise InputError('TransformerLens 4.x is not installed: pip install -e ".[transformer-lens]"') from err
    return TransformerBridgeConfig, boot_native, convert_tl_checkpoint, PreTrainedTokenizerFast


def _bridge(config: dict[str, Any], state_dict: dict[str, torch.Tensor], tokenizer: Any = None) -> Any:
    """A native ``TransformerBridge`` booted from ``config`` (the export's), ``state_dict``
    converted with ``convert_tl_checkpoint`` and loaded strictly, no weight processing."""
    TransformerBridgeConfig, boot_native, convert_tl_checkpoint, _ = _transformer_lens_4()
    fields = {k: v for k, v in config.items() if k != "default_prepend_bos"}
    dtype = getattr(torch, fields.pop("dtype"))
    cfg = TransformerBridgeConfig(**fields, dtype=dtype, init_weights=False)
    bridge = boot_native(cfg, tokenizer=tokenizer, dtype=dtype, model_name=config["model_name"])
    result = bridge.load_state_dict(convert_tl_checkpoint(state_dict, cfg), strict=True)
    if result.missing_keys or result.unexpected_keys:
        raise RuntimeError(f"TransformerBridge did not take the state dict: {result}")
    bridge.eval()
    return bridge


def to_transformer_bridge(model: "CompiledTransformer | TransformerLensExport") -> Any:
    """A TransformerLens 4.x ``TransformerBridge`` holding ``model`` (or an export), without
    a tokenizer (:func:`load_transformer_bridge` reads one from an exported directory).
    ``bridge(bos_tokens(tokens, n_symbols))[:, 1:]`` equals ``model(tokens)`` on the explicit
    attention path.  Needs the optional extra (``pip install -e ".[transformer-lens]"``)."""
    export = model if isinstance(model, TransformerLensExport) else to_transformer_lens(model)
    return _bridge(export.config, export.state_dict)


def load_transformer_bridge(directory: str | Path) -> Any:
    """The ``TransformerBridge`` of a directory written by ``shortcut export`` (or
    :func:`save_transformer_lens`), with its tokenizer: strings of whitespace-separated symbols
    work (``to_str_tokens``, ``run_with_cache("a b")``; BOS is prepended), and
    ``bridge(bos_tokens(tokens, n_symbols))[:, 1:]`` equals the model's logits on the explicit
    attention path.  Needs the optional extra (``pip install -e ".[transformer-lens]"``)."""
    *_, PreTrainedTokenizerFast = _transformer_lens_4()
    out = Path(directory)
    missing = [name for name in FILES if not (out / name).is_file()]
    if missing:
        raise InputError(f"{str(out)!r} is not an exported model directory: no {', '.join(missing)} "
                         f"(shortcut export MODEL -o DIR writes them)")
    config = _read_json(out / FILES[1])
    try:
        state_dict = load_file(out / FILES[0])
    except (OSError, ValueError, SafetensorError) as e:
        raise InputError(f"cannot read the exported model in {str(out)!r}: {e}") from None
    return _bridge(config, state_dict, PreTrainedTokenizerFast.from_pretrained(str(out)))


def read_map(directory: str | Path) -> dict[str, Any]:
    """``map.json`` of an exported directory (blocks' origins, residual labels, subspaces, tokens)."""
    return _read_json(Path(directory) / FILES[2])


EXPORT_JSON_MAX_BYTES = 64 * MiB
"""Largest ``config.json`` or ``map.json`` read back from an exported directory."""


def _read_json(path: Path) -> Any:
    """An exported directory's JSON file, read within the bounds of :mod:`compiler.automata.reading`."""
    return read_json(path, EXPORT_JSON_MAX_BYTES, "exported file", InputError)


def read_subspace(cache: Any, block_map: dict[str, Any], name: str, layer: int, after: bool = True) -> torch.Tensor:
    """The residual subspace ``name`` (our label, e.g. ``scan:map``) from a TransformerLens
    cache, after our layer ``layer`` (``after=False``: before it, i.e. its input), as
    [batch, position, dims] with BOS at position 0.  ``block_map`` is ``map.json``
    (:func:`read_map`, or :meth:`TransformerLensExport.map_json`): it says which exported blocks
    our layer became, and which residual dimensions the name holds."""
    if name not in block_map["subspaces"]:
        raise InputError(f"no subspace {name!r}; the model's are {sorted(block_map['subspaces'])}")
    blocks = [i for i, b in enumerate(block_map["blocks"]) if b["layer"] == layer]
    if not blocks:
        raise InputError(f"no layer {layer}: the model has layers 0..{block_map['blocks'][-1]['layer']}")
    hook = f"blocks.{blocks[-1]}.hook_resid_post" if after else f"blocks.{blocks[0]}.hook_resid_pre"
    return cache[hook][..., block_map["subspaces"][name]]
