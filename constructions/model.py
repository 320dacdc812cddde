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

import functools
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch
from torch import nn

from compiler.automata.errors import InputError
from compiler.automata.spec import from_dict

from .basis import basis_of, standard_residual
from .labels import output_names, readout_summary
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


class HookPoint(nn.Module):
    """An identity module marking one named activation (TransformerLens style).

    ``forward`` returns its input unchanged; a torch forward hook registered on it
    sees the activation and may return a replacement, which is what flows on.
    ``name`` is the module's dotted path in the model (e.g. ``blocks.0.hook_resid_mid``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.name = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def observed(points: "list[HookPoint]") -> bool:
    """Does anything watch one of ``points``: a torch forward hook or pre-hook (on it or global),
    or a ``forward`` replaced on the instance (nnsight 0.8 wraps every module so, registering no
    hook)?  Then the caller runs the path that passes through them."""
    if nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks:
        return True
    return any(hp._forward_hooks or hp._forward_pre_hooks or "forward" in vars(hp) for hp in points)


def _heads_last(x: torch.Tensor) -> torch.Tensor:
    """[b, h, t, e] <-> [b, t, h, e] (a view: the hooks see TransformerLens's shape)."""
    return x.transpose(1, 2)


@functools.lru_cache(maxsize=4)
def _above_diagonal(T: int, device: torch.device) -> torch.Tensor:
    """The [T, T] boolean mask of key positions after the query (built once per length and device)."""
    with torch.inference_mode(False):  # a plain tensor, usable outside inference mode too
        return torch.ones(T, T, dtype=torch.bool, device=device).triu(1)


class Attention(nn.Module):
    """Causal multi-head softmax attention without biases.

    Two paths compute the same thing (scores ``q . k``, the causal mask, a softmax over
    keys, the weighted sum of values):

    * fused (``fused`` True, the default): ``scaled_dot_product_attention`` with
      ``is_causal`` and scale 1 -- no [T, T] tensor is kept;
    * explicit: scores, mask and softmax as tensors, through ``hook_attn_scores`` and
      ``hook_pattern``.  Used when ``fused`` is False or when any forward (pre-)hook is
      registered on one of this module's hook points, or a global module hook (so torch
      hooks see and patch patterns), or when a hook point's ``forward`` is wrapped (nnsight;
      :func:`observed`); :meth:`CompiledTransformer.run_with_cache` turns ``fused`` off while
      it runs.

    In a layer whose queries and keys read only input-independent dims (``shared``: every scan
    layer, for instance) the fused path computes the pattern once for the batch, with the
    sequences' values side by side (:meth:`shared_attention`): the same logits as sequence by
    sequence, at a fraction of the cost.

    The two paths may differ in the last bits of the logits (summation order); see
    ``benchmarks/results/fused_attention.md`` for the measured differences.

    Hooks: ``hook_q``, ``hook_k``, ``hook_v``, ``hook_z`` [batch, pos, head, d_head];
    ``hook_attn_scores`` (after the causal mask, -inf above the diagonal) and
    ``hook_pattern`` [batch, head, query_pos, key_pos].
    """

    fused: bool = True
    shared: bool = False
    """Set by :meth:`CompiledTransformer.forward` when every head's query and key read only
    input-independent dims (:func:`positional_layers`): the pattern is the same for every
    sequence of the batch, so the fused path computes it once (:meth:`shared_attention`)."""

    def __init__(self, d_model: int, n_heads: int, d_head: int, dtype: torch.dtype) -> None:
        super().__init__()
        shape_in, shape_out = (n_heads, d_model, d_head), (n_heads, d_head, d_model)
        self.W_Q = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_K = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_V = nn.Parameter(torch.zeros(shape_in, dtype=dtype))
        self.W_O = nn.Parameter(torch.zeros(shape_out, dtype=dtype))
        self.hook_q = HookPoint()
        self.hook_k = HookPoint()
        self.hook_v = HookPoint()
        self.hook_attn_scores = HookPoint()
        self.hook_pattern = HookPoint()
        self.hook_z = HookPoint()

    def hooked(self) -> bool:
        """Is any of this module's hook points observed (:func:`observed`)?"""
        return observed([self.hook_q, self.hook_k, self.hook_v, self.hook_attn_scores, self.hook_pattern, self.hook_z])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = _heads_last(self.hook_q(_heads_last(torch.einsum("btd,hde->bhte", x, self.W_Q))))
        k = _heads_last(self.hook_k(_heads_last(torch.einsum("btd,hde->bhte", x, self.W_K))))
        v = _heads_last(self.hook_v(_heads_last(torch.einsum("btd,hde->bhte", x, self.W_V))))
        explicit = not self.fused or self.hooked()
        z = self.explicit_attention(q, k, v) if explicit else self.fused_attention(q, k, v)
        z = _heads_last(self.hook_z(_heads_last(z)))  # [b, h, t, e]
        return torch.einsum("bhte,hed->btd", z, self.W_O)

    def fused_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(q k^T + causal mask) v by ``scaled_dot_product_attention`` (scale 1: the
        temperature is in W_Q), [b, h, t, e]; once for the whole batch when ``shared``."""
        if self.shared and q.shape[0] > 1:
            return self.shared_attention(q, k, v)
        return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)

    def shared_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The fused path when the pattern is the same for the whole batch (``shared``): one
        ``scaled_dot_product_attention`` over the first sequence's queries and keys, with the
        batch's values side by side as one wide value per head, [b, h, t, e]."""
        b, h, t, e = v.shape
        wide = v.permute(1, 2, 0, 3).reshape(1, h, t, b * e)
        pad = (0, b * e - q.shape[-1])  # queries and keys as wide as the values (zeros add nothing to a
        q1, k1 = nn.functional.pad(q[:1], pad), nn.functional.pad(k[:1], pad)  # score): torch's fast kernel
        z = nn.functional.scaled_dot_product_attention(q1, k1, wide, is_causal=True, scale=1.0)
        return z.reshape(h, t, b, e).permute(2, 0, 1, 3)

    def explicit_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The same with the [b, h, T, T] scores and pattern as tensors (through their hook points)."""
        scores = q @ k.transpose(-1, -2)
        scores = self.hook_attn_scores(scores.masked_fill(_above_diagonal(q.shape[2], q.device), float("-inf")))
        pattern = self.hook_pattern(torch.softmax(scores, dim=-1))
        return pattern @ v


CHUNK_ELEMENTS = 1 << 24
"""Largest positions x hidden width an unhooked MLP evaluates at once (64 MB in float32):
long or large batches run through the MLP in chunks of positions (:meth:`MLP.forward_rows`)."""


class MLP(nn.Module):
    """ReLU MLP with any number of hidden layers (``hidden`` = their widths).

    Hooks: ``hook_pre[i]`` / ``hook_post[i]`` (names ``hook_pre.{i}``, ``hook_post.{i}``)
    before and after hidden layer i's ReLU.  Without a hook on them the MLP runs over
    chunks of positions (:meth:`forward_rows`), so its memory does not grow with the input.
    """

    def __init__(self, d_model: int, hidden: list[int], dtype: torch.dtype) -> None:
        super().__init__()
        sizes = [d_model, *hidden, d_model]
        self.n_hidden = len(hidden)
        for i in range(len(sizes) - 1):
            setattr(self, self.weight_name(i), nn.Parameter(torch.zeros(sizes[i], sizes[i + 1], dtype=dtype)))
            setattr(self, self.bias_name(i), nn.Parameter(torch.zeros(sizes[i + 1], dtype=dtype)))
        self.hook_pre = nn.ModuleList(HookPoint() for _ in hidden)
        self.hook_post = nn.ModuleList(HookPoint() for _ in hidden)

    def weight_name(self, i: int) -> str:
        return "W_in" if i == 0 else ("W_out" if i == self.n_hidden else f"W_hid{i}")

    def bias_name(self, i: int) -> str:
        return "b_in" if i == 0 else ("b_out" if i == self.n_hidden else f"b_hid{i}")

    def hooked(self) -> bool:
        """Is a hidden layer's hook point observed (:func:`observed`)?"""
        return observed([*self.hook_pre, *self.hook_post])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP at every position: :meth:`forward_rows` when no gradient is recorded and no
        hidden hook point is hooked, else whole [batch, pos, width] activations through the hook
        points (as hooks and autograd expect)."""
        if self.n_hidden and not (torch.is_grad_enabled() and self.W_in.requires_grad) and not self.hooked():
            return self.forward_rows(x)
        h = x
        for i in range(self.n_hidden):
            pre = self.hook_pre[i](h @ getattr(self, self.weight_name(i)) + getattr(self, self.bias_name(i)))
            h = self.hook_post[i](torch.relu(pre))
        return h @ getattr(self, self.weight_name(self.n_hidden)) + getattr(self, self.bias_name(self.n_hidden))

    def forward_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The same, over at most :data:`CHUNK_ELEMENTS` // (widest hidden layer) positions at a
        time (the MLP acts on each position alone, so memory is bounded for any batch and
        length), each hidden layer written in place into one buffer reused across chunks.  The
        operations per position are those of the hooked path (matrix product, then bias, then
        ReLU), so the values are the same up to the blocking of the matrix products."""
        d = x.shape[-1]
        rows = x.reshape(-1, d)
        n = rows.shape[0]
        step = max(1, min(n, CHUNK_ELEMENTS // max(self.hidden_widths())))
        weights = [getattr(self, self.weight_name(i)) for i in range(self.n_hidden + 1)]
        biases = [getattr(self, self.bias_name(i)) for i in range(self.n_hidden + 1)]
        bufs = [rows.new_empty(step, w.shape[1]) for w in weights[:-1]]
        out = rows.new_empty(n, weights[-1].shape[1])
        for i in range(0, n, step):
            h = rows[i : i + step]
            m = h.shape[0]
            for W, b, buf in zip(weights, biases, bufs):
                h = torch.mm(h, W, out=buf[:m]).add_(b).relu_()
            torch.mm(h, weights[-1], out=out[i : i + m]).add_(biases[-1])
        return out.reshape(*x.shape[:-1], out.shape[-1])

    def hidden_widths(self) -> list[int]:
        """The width of each hidden layer."""
        return [getattr(self, self.weight_name(i)).shape[1] for i in range(self.n_hidden)]


class Block(nn.Module):
    """Residual attention then residual MLP.

    Hooks: ``hook_resid_pre``, ``hook_attn_out``, ``hook_resid_mid``, ``hook_mlp_out``
    (only when the block has an MLP) and ``hook_resid_post``, all [batch, pos, d_model].
    """

    def __init__(self, d_model: int, n_heads: int, d_head: int, mlp_hidden: list[int], dtype: torch.dtype) -> None:
        super().__init__()
        self.hook_resid_pre = HookPoint()  # registered in forward order (hook_points() lists them so)
        self.attn = Attention(d_model, n_heads, d_head, dtype)
        self.hook_attn_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        self.mlp = MLP(d_model, mlp_hidden, dtype) if mlp_hidden else None
        self.hook_mlp_out = HookPoint() if self.mlp is not None else None
        self.hook_resid_post = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.hook_attn_out(self.attn(x)))
        if self.mlp is not None:
            x = x + self.hook_mlp_out(self.mlp(x))
        return self.hook_resid_post(x)


def _name_hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Set each HookPoint's ``name`` to its path and return them in forward order."""
    points = {name: m for name, m in model.named_modules() if isinstance(m, HookPoint)}
    for name, m in points.items():
        m.name = name
    return points


def input_independent_dims(model: "CompiledTransformer") -> set[int]:
    """Residual dims whose value at every position is the same for every input: every symbol
    embeds the same value there and no block writes them."""
    d = model.config["d_model"]
    W_E = model.W_E.detach()
    same = (W_E[:-1] == W_E[:1]).all(0) if W_E.shape[0] > 1 else torch.ones(d, dtype=torch.bool, device=W_E.device)
    written = torch.zeros(d, dtype=torch.bool, device=W_E.device)
    for block in model.blocks:
        written |= block.attn.W_O.detach().abs().sum((0, 1)) > 0
        if block.mlp is not None:
            written |= getattr(block.mlp, block.mlp.weight_name(block.mlp.n_hidden)).detach().abs().sum(0) > 0
            written |= getattr(block.mlp, block.mlp.bias_name(block.mlp.n_hidden)).detach().abs() > 0
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

    def __init__(self, config: dict[str, Any], meta: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.meta = meta
        dtype = getattr(torch, config["dtype"])
        d = config["d_model"]
        self.W_E = nn.Parameter(torch.zeros(config["n_symbols"] + 1, d, dtype=dtype))
        self.W_pos = nn.Parameter(torch.zeros(config["max_len"] + 1, d, dtype=dtype))
        self.hook_embed = HookPoint()
        self.hook_pos_embed = HookPoint()
        self.blocks = nn.ModuleList(
            Block(d, b["n_heads"], config["d_head"], b["mlp_hidden"], dtype) for b in config["blocks"]
        )
        self.W_U = nn.Parameter(torch.zeros(d, config["n_out"], dtype=dtype))
        self.b_U = nn.Parameter(torch.zeros(config["n_out"], dtype=dtype))
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
        return self.config["max_len"]

    @property
    def bos_id(self) -> int:
        return self.config["n_symbols"]

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
        if x.shape[-1] != self.config["d_model"]:
            raise KeyError(f"{key!r} is not a residual-stream hook (last dim {x.shape[-1]}, "
                           f"d_model {self.config['d_model']})")
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
            "max_len": c["max_len"],
            "dtype": c["dtype"],
            "n_layers": len(c["blocks"]),
            "d_model": c["d_model"],
            "n_heads": max((b["n_heads"] for b in c["blocks"]), default=0),
            "d_head": c["d_head"],
            "d_mlp": max((max(b["mlp_hidden"], default=0) for b in c["blocks"]), default=0),
            "mlp_hidden_layers": max((len(b["mlp_hidden"]) for b in c["blocks"]), default=0),
            "mlp_hidden_by_layer": [list(b["mlp_hidden"]) for b in c["blocks"]],
            "heads_by_layer": [b["n_heads"] for b in c["blocks"]],
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
