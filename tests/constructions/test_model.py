"""The compiled model's hook points, run_with_cache, and the layout API (read, layout)."""

import pytest
import torch

import compiler
from constructions.checkpoint import load, save
from constructions.model import HookPoint

CASES = [("quaternion", "scan"), ("cyclic:3", "krohn-rhodes"), ("quaternion", "krohn-rhodes"), ("grid:4", "gridworld")]
MAX_LEN = 12


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{m}" for n, m in CASES])
def model(request):
    name, method = request.param
    m = compiler.compile_automaton(name, max_len=MAX_LEN, method=method)
    assert m.meta["method"] == method
    return m


@pytest.fixture(scope="module")
def tokens(model):
    return torch.randint(0, model.bos_id, (3, MAX_LEN), generator=torch.Generator().manual_seed(0))


def expected_hook_names(model) -> list[str]:
    names = ["hook_embed", "hook_pos_embed"]
    for l, b in enumerate(model.config.blocks):
        names += [f"blocks.{l}.hook_resid_pre"]
        names += [f"blocks.{l}.attn.{h}" for h in ("hook_q", "hook_k", "hook_v", "hook_attn_scores",
                                                   "hook_pattern", "hook_z")]
        names += [f"blocks.{l}.hook_attn_out", f"blocks.{l}.hook_resid_mid"]
        if b.mlp_hidden:
            names += [f"blocks.{l}.mlp.hook_pre.{i}" for i in range(len(b.mlp_hidden))]
            names += [f"blocks.{l}.mlp.hook_post.{i}" for i in range(len(b.mlp_hidden))]
            names += [f"blocks.{l}.hook_mlp_out"]
        names += [f"blocks.{l}.hook_resid_post"]
    return names + ["hook_resid_final"]


def test_every_hook_point_exists_as_a_module(model):
    names = expected_hook_names(model)
    assert list(model.hook_points()) == names
    for name in names:
        hp = model.get_submodule(name)
        assert isinstance(hp, HookPoint) and hp.name == name


def test_cache_holds_every_hook_with_its_shape(model, tokens):
    logits, cache = model.run_with_cache(tokens)
    assert set(cache) == set(expected_hook_names(model))
    B, T1, d = tokens.shape[0], tokens.shape[1] + 1, model.config.d_model
    for l, b in enumerate(model.config.blocks):
        H, e = b.n_heads, model.config.d_head
        assert cache[f"blocks.{l}.attn.hook_q"].shape == (B, T1, H, e)
        assert cache[f"blocks.{l}.attn.hook_z"].shape == (B, T1, H, e)
        assert cache[f"blocks.{l}.attn.hook_pattern"].shape == (B, H, T1, T1)
        assert cache[f"blocks.{l}.hook_resid_mid"].shape == (B, T1, d)
        for i, width in enumerate(b.mlp_hidden):
            assert cache[f"blocks.{l}.mlp.hook_post.{i}"].shape == (B, T1, width)
            assert torch.equal(cache[f"blocks.{l}.mlp.hook_post.{i}"],
                               torch.relu(cache[f"blocks.{l}.mlp.hook_pre.{i}"]))
        assert torch.equal(cache[f"blocks.{l}.hook_resid_post"],
                           cache[f"blocks.{l}.hook_resid_mid"] + cache[f"blocks.{l}.hook_mlp_out"])
    assert torch.equal(cache["blocks.0.hook_resid_pre"], cache["hook_embed"] + cache["hook_pos_embed"])
    assert torch.equal(logits, model(tokens))
    assert torch.equal(logits, (cache["hook_resid_final"] @ model.W_U + model.b_U)[:, 1:])


def test_forward_hook_reads_the_same_pattern_as_the_cache(model, tokens):
    seen = {}
    l = len(model.blocks) - 1
    hp = model.get_submodule(f"blocks.{l}.attn.hook_pattern")
    handle = hp.register_forward_hook(lambda mod, inp, out: seen.setdefault("pattern", out))
    try:
        model(tokens)
    finally:
        handle.remove()
    _, cache = model.run_with_cache(tokens)
    assert torch.equal(seen["pattern"], cache[f"blocks.{l}.attn.hook_pattern"])
    assert not hp._forward_hooks  # run_with_cache removed its hooks


def test_patching_a_hook_changes_the_output(model, tokens):
    want = model(tokens)
    hp = model.get_submodule("blocks.0.attn.hook_pattern")
    handle = hp.register_forward_hook(lambda mod, inp, out: torch.zeros_like(out))
    try:
        patched, cache = model.run_with_cache(tokens)
    finally:
        handle.remove()
    assert not torch.equal(patched, want)
    assert torch.count_nonzero(cache["blocks.0.attn.hook_pattern"]) == 0  # the cache sees the patch
    assert torch.count_nonzero(cache["blocks.0.attn.hook_z"]) == 0
    assert torch.equal(model(tokens), want)  # removed: back to normal


def test_hooks_context_removes_hooks_on_exceptions(model, tokens):
    def boom(mod, inp, out):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        with model.hooks([("hook_resid_final", boom)]):
            model(tokens)
    assert not model.get_submodule("hook_resid_final")._forward_hooks
    handle = model.get_submodule("blocks.0.hook_resid_mid").register_forward_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="boom"):
            model.run_with_cache(tokens)
    finally:
        handle.remove()
    assert not any(hp._forward_hooks for hp in model.hook_points().values())  # the cache's hooks are gone
    with pytest.raises(KeyError, match="no hook point 'blocks.0.hook_nope'"):
        with model.hooks([("blocks.0.hook_nope", boom)]):
            pass


def test_names_filter_keeps_only_matching_hooks(model, tokens):
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"))
    assert sorted(cache) == [f"blocks.{l}.attn.hook_pattern" for l in range(len(model.blocks))]


def test_read_is_the_residual_sliced_by_subspace(model, tokens):
    _, cache = model.run_with_cache(tokens)
    L = len(model.blocks)
    for name in model.meta["subspaces"]:
        dims = model.subspace(name)
        assert torch.equal(model.read(cache, name, 0), cache["blocks.0.hook_resid_pre"][..., dims])
        assert torch.equal(model.read(cache, name, L), cache["hook_resid_final"][..., dims])
        for l in range(1, L):
            assert torch.equal(model.read(cache, name, l), cache[f"blocks.{l - 1}.hook_resid_post"][..., dims])
        got = model.read(cache, name, f"blocks.{L - 1}.hook_resid_mid")
        assert got.shape == (tokens.shape[0], tokens.shape[1] + 1, len(dims))
        assert torch.equal(got, cache[f"blocks.{L - 1}.hook_resid_mid"][..., dims])


def test_read_errors_name_the_problem(model, tokens):
    _, cache = model.run_with_cache(tokens)
    name = next(iter(model.meta["subspaces"]))
    with pytest.raises(KeyError, match="no subspace 'nope'"):
        model.read(cache, "nope", 0)
    with pytest.raises(KeyError, match="out of range"):
        model.read(cache, name, len(model.blocks) + 1)
    pattern = "blocks.0.attn.hook_pattern"  # [..., T+1, T+1]: told apart by width unless T+1 = d_model
    if cache[pattern].shape[-1] != model.config.d_model:
        with pytest.raises(KeyError, match="not a residual-stream hook"):
            model.read(cache, name, pattern)
    with pytest.raises(KeyError, match="cache has no 'hook_resid_final'"):
        model.read({}, name, len(model.blocks))


def test_layout_covers_every_subspace_and_block(model):
    layout = model.layout()
    assert list(layout["subspaces"]) == list(model.meta["subspaces"])
    for name, sub in layout["subspaces"].items():
        assert sub["dims"] == model.subspace(name)
        assert sub["labels"] == [model.meta["residual_labels"][d] for d in sub["dims"]]
    assert [b["layer"] for b in layout["blocks"]] == list(range(len(model.blocks)))
    known = set(layout["subspaces"])
    for b, cfg in zip(layout["blocks"], model.config.blocks):
        assert 1 <= len(b["heads"]) <= cfg.n_heads
        for h in b["heads"]:
            assert set(h["reads"]) == {"query", "key", "value"}
            assert h["writes"] and set(h["writes"]) <= known
            assert all(set(names) <= known for names in h["reads"].values())
        assert b["mlp"]["hidden"] == list(cfg.mlp_hidden)
        assert b["mlp"]["reads"] and b["mlp"]["writes"] and set(b["mlp"]["reads"] + b["mlp"]["writes"]) <= known


def test_layout_reads_and_writes_match_the_weights(model):
    """A head writes where its W_O is nonzero, and the query reads where its W_Q is."""
    dims = lambda names: sorted(d for n in names for d in model.subspace(n))  # noqa: E731
    for blk, b in zip(model.blocks, model.layout()["blocks"]):
        for h in b["heads"]:
            i = h["index"]
            written = torch.nonzero(blk.attn.W_O[i].abs().sum(0)).flatten().tolist()
            assert set(written) <= set(dims(h["writes"]))
            queried = torch.nonzero(blk.attn.W_Q[i].abs().sum(1)).flatten().tolist()
            assert set(queried) <= set(dims(h["reads"]["query"]))


def test_layout_survives_a_checkpoint(model, tmp_path):
    path = tmp_path / "m.safetensors"
    save(model, path)
    assert load(path).layout() == model.layout()
    bare = load(path)
    bare.meta = {k: v for k, v in bare.meta.items() if k != "layout"}
    with pytest.raises(KeyError, match="no layout"):
        bare.layout()
