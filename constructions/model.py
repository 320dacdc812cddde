"""The compiled model: a plain decoder-only Transformer.

token embedding + fixed positional table (position 0 is BOS)
-> L blocks of (causal multi-head softmax attention, ReLU MLP), residual, no LayerNorm
-> linear unembedding to one logit per state; prediction is argmax.

Weight names follow TransformerLens: ``W_E``, ``W_pos``, per block ``W_Q, W_K,
W_V, W_O`` of shape [n_heads, d_model, d_head] / [n_heads, d_head, d_model], the
MLP's ``W_in, W_hid*, W_out`` and biases, and ``W_U, b_U``.  Attention scores are
``q . k`` with no 1/sqrt(d_head) factor: each head's temperature is folded into
its ``W_Q``.

Every intermediate passes through a :class:`HookPoint` (an identity module) named
as in TransformerLens: ``hook_embed``, ``hook_pos_embed``, per block
``blocks.{l}.hook_resid_pre``, ``blocks.{l}.attn.hook_q/hook_k/hook_v`` and
``hook_z`` [batch, pos, head, d_head], ``blocks.{l}.attn.hook_attn_scores`` and
``hook_pattern`` [batch, head, query, key], ``blocks.{l}.hook_attn_out``,
``blocks.{l}.hook_resid_mid``, ``blocks.{l}.mlp.hook_pre.{i}`` /
``hook_post.{i}`` around hidden layer i's ReLU, ``blocks.{l}.hook_mlp_out``,
``blocks.{l}.hook_resid_post``, and ``hook_resid_final``.  Residual-stream hooks
include BOS at position 0.  Plain torch forward hooks read them, and patch them
by returning a replacement (a hook on an attention layer's hook points puts that layer
on the explicit path, which materialises the scores and pattern; without one the
forward uses fused attention, ``model.fused``)::

    hp = model.get_submodule("blocks.0.attn.hook_pattern")
    handle = hp.register_forward_hook(lambda mod, inp, out: torch.zeros_like(out))
    logits = model(tokens); handle.remove()

:meth:`CompiledTransformer.run_with_cache` records every hook point by name.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch
from torch import nn

from compiler.automata.errors import InputError
from compiler.automata.spec import from_dict

from .basis import basis_of, standard_residual
from .config import ModelConfig
from .labels import output_names, readout_summary
from .layers import Block, Blocks, HookPoint
from .metadata import ModelMeta


def check_legal(domain, ids: list[int], where: str) -> None:
    """InputError naming the position where ``ids`` leaves the domain of a partial automaton
    (an undefined transition: the promise of legal inputs is broken), else nothing."""
    t = domain.first_illegal(ids)
    if t is None:
        return
    q = domain.run(ids[:t])[-1] if t else domain.start
    raise InputError(f"{where} leaves the domain at position {t + 1}: {domain.alphabet[ids[t]]!r} from state "
                     f"{domain.states[q]!r} is undefined, and the model was compiled under the promise of legal "
                     f"inputs only")


def resolve_device(name: str) -> torch.device:
    """The torch device called ``name`` ("cpu", "cuda", "cuda:1", "mps", ...), provided tensors
    can be put there; InputError (one line, bad input) otherwise."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError, ValueError):
        raise InputError(f"unknown device {name!r}; use cpu, cuda, cuda:N or mps") from None
    if device.type == "meta":
        raise InputError("device 'meta' holds no values; use cpu, cuda, cuda:N or mps")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {name!r} is not available: torch {torch.__version__} sees no CUDA GPU here")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise InputError(f"device {name!r} is not available: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    try:
        torch.zeros(1, device=device)
    except (RuntimeError, AssertionError, NotImplementedError) as e:
        raise InputError(f"device {name!r} is not available here ({' '.join(str(e).split())[:160]})") from None
    return device



def _name_hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Set each HookPoint's ``name`` to its path and return them in forward order."""
    points = {name: m for name, m in model.named_modules() if isinstance(m, HookPoint)}
    for name, m in points.items():
        m.name = name
    return points


def input_independent_dims(model: "CompiledTransformer", before_last_mlp: bool = False) -> set[int]:
    """Residual dims whose value at every position is the same for every input: every symbol
    embeds the same value there and no block writes them.  ``before_last_mlp``: writes of the
    last block's MLP do not count (the dims are input-independent wherever a head or an MLP reads
    them; only the unembedding reads after that MLP)."""
    d = model.config.d_model
    W_E = model.W_E.detach()
    same = (W_E[:-1] == W_E[:1]).all(0) if W_E.shape[0] > 1 else torch.ones(d, dtype=torch.bool, device=W_E.device)
    written = torch.zeros(d, dtype=torch.bool, device=W_E.device)
    for i, block in enumerate(model.blocks):
        written |= block.attn.W_O.detach().abs().sum((0, 1)) > 0
        if block.mlp is not None and not (before_last_mlp and i == len(model.blocks) - 1):
            written |= block.mlp.weight(block.mlp.n_hidden).detach().abs().sum(0) > 0
            written |= block.mlp.bias(block.mlp.n_hidden).detach().abs() > 0
    return {i for i in range(d) if bool(same[i]) and not bool(written[i])}


def positional_layers(model: "CompiledTransformer") -> list[bool]:
    """For each layer: do all its heads' queries and keys read only input-independent dims (so
    its attention pattern is the same for every input of a length)?"""
    fixed = input_independent_dims(model)
    out = []
    for block in model.blocks:
        used = (block.attn.W_Q.detach().abs().sum((0, 2)) > 0) | (block.attn.W_K.detach().abs().sum((0, 2)) > 0)
        out.append(all(i in fixed for i in torch.nonzero(used).flatten().tolist()))
    return out


class CompiledTransformer(nn.Module):
    """A compiled automaton simulator.

    ``forward(tokens)`` takes token ids [B, T] in alphabet order (BOS is added
    internally) and returns logits [B, T, n_states]: position t's argmax is the
    state after reading tokens[:, :t+1].

    ``config`` fixes the shapes; ``meta`` carries the automaton spec, method,
    residual labels, readout description and margins (all JSON-able).
    """

    def __init__(self, config: ModelConfig, meta: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.meta = meta
        dtype = getattr(torch, config.dtype)
        d = config.d_model
        self.W_E = nn.Parameter(torch.zeros(config.n_symbols + 1, d, dtype=dtype))
        self.W_pos = nn.Parameter(torch.zeros(config.max_len + 1, d, dtype=dtype))
        self.hook_embed = HookPoint()
        self.hook_pos_embed = HookPoint()
        self.blocks = Blocks(
            Block(d, b.n_heads, config.d_head, list(b.mlp_hidden), dtype) for b in config.blocks
        )
        self.W_U = nn.Parameter(torch.zeros(d, config.n_out, dtype=dtype))
        self.b_U = nn.Parameter(torch.zeros(config.n_out, dtype=dtype))
        self.hook_resid_final = HookPoint()
        self._automaton = None
        self._domain = None
        self._hook_points = _name_hook_points(self)

    def set_meta(self, meta: dict) -> None:
        """Replace the metadata (e.g. after ``set_start`` moved the start state), dropping the
        automaton decoded from the old one."""
        self.meta = meta
        self._automaton = None
        self._domain = None

    @property
    def metadata(self) -> ModelMeta:
        """The metadata, typed (:class:`constructions.metadata.ModelMeta`; ``meta`` is its JSON)."""
        return ModelMeta.from_json(self.meta)

    def record_start(self, start: str) -> None:
        """Write a new start state into ``meta["automaton"]`` (the weights are the caller's)."""
        self.set_meta({**self.meta, "automaton": {**self.metadata.automaton, "start": start}})

    @property
    def fused(self) -> bool:
        """Do the attention layers take the fused path (``scaled_dot_product_attention``)?
        Default True; False keeps the explicit scores and patterns (see :class:`Attention`)."""
        return all(block.attn.fused for block in self.blocks)

    @fused.setter
    def fused(self, on: bool) -> None:
        for block in self.blocks:
            block.attn.fused = bool(on)

    @contextmanager
    def explicit_attention(self) -> Iterator["CompiledTransformer"]:
        """Every attention layer on the explicit path for the ``with`` body (restored on exit)."""
        before = [block.attn.fused for block in self.blocks]
        try:
            self.fused = False
            yield self
        finally:
            for block, on in zip(self.blocks, before):
                block.attn.fused = on

    @property
    def max_len(self) -> int:
        return self.config.max_len

    @property
    def bos_id(self) -> int:
        return self.config.n_symbols

    @property
    def device(self) -> torch.device:
        """Where the weights are (``model.to(device)`` moves them; inputs follow them)."""
        return self.W_E.device

    def residual(self, tokens: torch.Tensor) -> torch.Tensor:
        """The embedded input [B, T+1, d_model], BOS prepended (through ``hook_embed``
        and ``hook_pos_embed``); ``tokens`` are moved to the model's device."""
        if tokens.dim() != 2:
            raise ValueError("tokens must be a [batch, length] tensor of symbol ids")
        B, T = tokens.shape
        if T > self.max_len:
            raise InputError(f"sequence of length {T} is longer than the model's max_len {self.max_len}")
        if T and (int(tokens.min()) < 0 or int(tokens.max()) >= self.bos_id):
            raise InputError(f"token ids must lie in 0..{self.bos_id - 1}")
        tokens = tokens.to(self.W_E.device)
        bos = torch.full((B, 1), self.bos_id, dtype=torch.long, device=tokens.device)
        ids = torch.cat([bos, tokens.long()], dim=1)
        return self.hook_embed(self.W_E[ids]) + self.hook_pos_embed(self.W_pos[: T + 1].expand(B, -1, -1))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.residual(tokens)
        for block, shared in zip(self.blocks, positional_layers(self)):
            block.attn.shared = shared
            x = block(x)
        x = self.hook_resid_final(x)
        return (x @ self.W_U + self.b_U)[:, 1:]

    # --- hook points ------------------------------------------------------------------

    def hook_points(self) -> dict[str, HookPoint]:
        """Every hook point by name, in forward order (an MLP's ``hook_pre.*`` before its ``hook_post.*``)."""
        return dict(self._hook_points)

    @contextmanager
    def hooks(self, fwd_hooks: list[tuple[str, Callable]]) -> Iterator["CompiledTransformer"]:
        """Register ``(hook name, forward hook)`` pairs for the ``with`` body; removed on exit,
        also when the body raises."""
        points = self._hook_points
        unknown = [name for name, _ in fwd_hooks if name not in points]
        if unknown:
            raise KeyError(f"no hook point {unknown[0]!r}; see model.hook_points()")
        handles = []
        try:
            for name, fn in fwd_hooks:
                handles.append(points[name].register_forward_hook(fn))
            yield self
        finally:
            for h in handles:
                h.remove()

    def run_with_cache(self, tokens: torch.Tensor, names_filter: "Callable[[str], bool] | None" = None,
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Logits and every hook point's activation (or those whose name passes ``names_filter``),
        keyed by hook name (see the module docstring), from the explicit attention path.  Hooks
        registered before this call run first, so their patches show in the cache; the cache's
        hooks are removed afterwards."""
        cache: dict[str, torch.Tensor] = {}

        def keep(name: str) -> Callable:
            def hook(module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
                cache[name] = output
            return hook

        names = [n for n in self._hook_points if names_filter is None or names_filter(n)]
        with self.hooks([(name, keep(name)) for name in names]), self.explicit_attention():
            logits = self(tokens)
        return logits, cache

    # --- the residual layout ----------------------------------------------------------

    def subspace(self, name: str) -> list[int]:
        """Residual indices of the named subspace (as allocated by the construction's
        workspace and stored in the checkpoint); raises KeyError naming the known ones."""
        subspaces = self.metadata.subspaces
        if name not in subspaces:
            raise KeyError(f"no subspace {name!r}; this model has {sorted(subspaces)}")
        return list(subspaces[name])

    def residual_hook(self, layer: "int | str") -> str:
        """The hook name of the residual stream after ``layer`` blocks (0 = the embedding,
        ``n_layers`` = ``hook_resid_final``); a residual-stream hook name is returned as is."""
        L = len(self.blocks)
        if isinstance(layer, str):
            if layer not in self._hook_points:
                raise KeyError(f"no hook point {layer!r}; see model.hook_points()")
            return layer
        if not 0 <= layer <= L:
            raise KeyError(f"layer {layer} is out of range: this model has layers 0 (embedding) to {L} (final)")
        return "hook_resid_final" if layer == L else f"blocks.{layer}.hook_resid_pre"

    def read(self, cache: dict[str, torch.Tensor], name: str, layer: "int | str") -> torch.Tensor:
        """Subspace ``name``'s values [B, T+1, k] in ``cache`` (from :meth:`run_with_cache`)
        after ``layer`` blocks, or at a d_model-wide hook such as ``blocks.2.hook_resid_mid``
        (in a rotated basis, ``meta["basis"]``, decoded back to the named dims first)."""
        dims = self.subspace(name)
        key = self.residual_hook(layer)
        if key not in cache:
            raise KeyError(f"the cache has no {key!r}; fill it with model.run_with_cache(tokens)")
        x = cache[key]
        if x.shape[-1] != self.config.d_model:
            raise KeyError(f"{key!r} is not a residual-stream hook (last dim {x.shape[-1]}, "
                           f"d_model {self.config.d_model})")
        if basis_of(self.meta) is not None:
            return standard_residual(self, x)[..., dims].to(x.dtype)
        return x[..., dims]

    def layout(self) -> dict[str, Any]:
        """The stored layout: subspaces (dims, labels) and, per block, what each head's
        query/key/value read and what it and the MLP write, by subspace name."""
        layout = self.metadata.layout
        if layout is None:
            raise KeyError("this checkpoint stores no layout; recompile it with this version of shortcut")
        return layout

    # --- automaton-level conveniences -------------------------------------------------

    @property
    def automaton(self):
        """The :class:`compiler.automata.spec.Semiautomaton` this model was compiled from."""
        if self._automaton is None:
            self._automaton = from_dict(self.metadata.automaton)
        return self._automaton

    @property
    def domain(self):
        """The automaton whose legal words are the inputs this model is vouched for: the source of a
        label readout (its quotient may be complete where the source is partial), else
        :attr:`automaton`.  Complete automata: every word (docs/promises.md)."""
        if self._domain is None:
            r = self.meta.get("readout")
            source = r.get("source") if isinstance(r, dict) else None
            self._domain = from_dict(source) if isinstance(source, dict) and source.get("promise") else self.automaton
        return self._domain

    @torch.no_grad()
    def predict(self, tokens: torch.Tensor) -> torch.Tensor:
        """State ids [B, T] (argmax of the logits)."""
        return self.forward(tokens).argmax(-1)

    def simulate(self, words: list[list[str]], rows: Callable[[int], int] | None = None) -> list[list[str]]:
        """State names (labels, for a label readout) after each symbol, for each word, computed by
        the Transformer: the words of one length run together (:meth:`simulate_ids`).  InputError
        naming the word for an unknown symbol or a word longer than max_len, before any forward."""
        ids = [self.word_ids(word, f"word {i + 1}") for i, word in enumerate(words)]
        return self.simulate_ids(ids, rows)

    def word_ids(self, word: list[str], where: str) -> list[int]:
        """The token ids of ``word``; InputError saying ``where`` it is for an unknown symbol, a
        word longer than the model's max_len, or a word that leaves the domain of a partial
        automaton (:attr:`domain`: the model was compiled for legal inputs only)."""
        try:
            ids = self.automaton.symbol_ids(word)
        except InputError as e:
            raise InputError(f"{where}: {e}") from None
        if len(ids) > self.max_len:
            raise InputError(f"{where} has length {len(ids)}, longer than the model's max_len {self.max_len}")
        check_legal(self.domain, ids, where)
        return ids

    def simulate_ids(self, ids: list[list[int]], rows: Callable[[int], int] | None = None) -> list[list[str]]:
        """:meth:`simulate` on token ids (each at most max_len long): one forward per length
        (causal attention: a sequence's states never depend on the other rows), at most
        ``rows(T)`` sequences of length T in one forward when ``rows`` is given (a memory bound;
        None: all of them), results in the order of ``ids``."""
        names = output_names(self)
        out: list[list[str]] = [[] for _ in ids]
        by_length: dict[int, list[int]] = {}
        for i, w in enumerate(ids):
            if w:
                by_length.setdefault(len(w), []).append(i)
        for T, which in by_length.items():
            step = max(1, rows(T)) if rows is not None else len(which)
            for lo in range(0, len(which), step):
                part = which[lo:lo + step]
                pred = self.predict(torch.tensor([ids[i] for i in part], dtype=torch.long)).tolist()
                for i, states in zip(part, pred):
                    out[i] = [names[q] for q in states]
        return out

    def info(self) -> dict[str, Any]:
        """Summary: method, sizes, automaton (the keys of ``shortcut info --json``)."""
        c, m = self.config, self.metadata
        a = self.automaton
        return {
            "method": m.method,
            "max_len": c.max_len,
            "dtype": c.dtype,
            "n_layers": len(c.blocks),
            "shape": shape.get("name", "default") if isinstance(shape := self.meta.get("shape"), dict) else "default",
            "d_model": c.d_model,
            "n_heads": c.n_heads,
            "d_head": c.d_head,
            "d_mlp": max((max(b.mlp_hidden, default=0) for b in c.blocks), default=0),
            "mlp_hidden_layers": max((len(b.mlp_hidden) for b in c.blocks), default=0),
            "mlp_hidden_by_layer": [list(b.mlp_hidden) for b in c.blocks],
            "heads_by_layer": [b.n_heads for b in c.blocks],
            "n_params": sum(p.numel() for p in self.parameters()),
            "automaton": a.name,
            "n_states": a.n_states,
            "n_symbols": a.n_symbols,
            "positions": m.positions,
            "start": a.states[a.start],
            "readout": readout_summary(self.meta),
            **({"promise": self.meta["promise"]["text"]} if isinstance(self.meta.get("promise"), dict) else {}),
            "why": m.why,
            "warnings": m.warnings,
            "verification": m.verification,
        }
