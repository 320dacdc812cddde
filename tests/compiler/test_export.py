"""The TransformerLens export without TransformerLens: key layout, config, map, CLI contract,
and the state dict run by a plain-torch HookedTransformer forward, bitwise against our model."""

import json

import pytest
import torch
from safetensors.torch import load_file

import compiler
from compiler.cli import main
from compiler.export import ATTN_SCALE, FILES, bos_tokens, to_transformer_lens
from constructions.unfold import origins

T = 24
CASES = [("quaternion", "scan"), ("quaternion", "krohn-rhodes"), ("grid:5", "gridworld")]


def _qkv(sd: dict, cfg: dict, p: str, c: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Block ``p``'s W_c and b_c per head: under grouped-query attention (``n_key_value_heads``)
    each key-value head's weights repeated for its run of consecutive heads, as HookedTransformer
    does."""
    if p + f"attn.W_{c}" in sd:
        return sd[p + f"attn.W_{c}"], sd[p + f"attn.b_{c}"]
    runs = cfg["n_heads"] // cfg["n_key_value_heads"]
    return (sd[p + f"attn._W_{c}"].repeat_interleave(runs, 0), sd[p + f"attn._b_{c}"].repeat_interleave(runs, 0))


def hooked_transformer_forward(sd: dict, cfg: dict, tokens: torch.Tensor) -> torch.Tensor:
    """HookedTransformer's forward for this config (no LayerNorm, ReLU, standard positions,
    scores divided by ``attn_scale``), written out from the state dict: a check of the layout's
    meaning that needs no TransformerLens."""
    n = tokens.shape[1]
    x = sd["embed.W_E"][tokens] + sd["pos_embed.W_pos"][:n]
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    for i in range(cfg["n_layers"]):
        p = f"blocks.{i}."
        q, k, v = (torch.einsum("btd,hde->bhte", x, W) + b[:, None] for W, b in (_qkv(sd, cfg, p, c) for c in "QKV"))
        scores = (q @ k.transpose(-1, -2) / cfg["attn_scale"]).masked_fill(mask, float("-inf"))
        z = torch.softmax(scores, -1) @ v
        x = x + torch.einsum("bhte,hed->btd", z, sd[p + "attn.W_O"]) + sd[p + "attn.b_O"]
        h = torch.relu(x @ sd[p + "mlp.W_in"] + sd[p + "mlp.b_in"])
        x = x + (h @ sd[p + "mlp.W_out"] + sd[p + "mlp.b_out"])
    return x @ sd["unembed.W_U"] + sd["unembed.b_U"]


@pytest.mark.parametrize("name,method", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_state_dict_layout_and_a_plain_forward_give_the_same_logits(name, method):
    model = compiler.compile_automaton(name, max_len=T, method=method)
    ex = to_transformer_lens(model)
    c = ex.config
    L, d, H, e, m = c["n_layers"], c["d_model"], c["n_heads"], c["d_head"], c["d_mlp"]
    assert L == len(origins(model)) and ex.blocks == [vars(o) for o in origins(model)]
    assert (c["d_vocab"], c["d_vocab_out"], c["n_ctx"]) == (model.bos_id + 1, model.config.n_out, T + 1)
    assert c["normalization_type"] is None and c["act_fn"] == "relu" and c["attn_scale"] == ATTN_SCALE
    shapes = {"embed.W_E": (c["d_vocab"], d), "pos_embed.W_pos": (T + 1, d), "unembed.W_U": (d, c["d_vocab_out"]),
              "unembed.b_U": (c["d_vocab_out"],)}
    kv = c.get("n_key_value_heads", H)  # the gridworld's find heads share their key and value: one per block
    assert kv == (1 if method == "gridworld" else H)
    g = "_" if kv < H else ""
    for i in range(L):
        p = f"blocks.{i}."
        shapes.update({p + "attn.W_Q": (H, d, e), p + f"attn.{g}W_K": (kv, d, e), p + f"attn.{g}W_V": (kv, d, e),
                       p + "attn.W_O": (H, e, d), p + "attn.b_Q": (H, e), p + f"attn.{g}b_K": (kv, e),
                       p + f"attn.{g}b_V": (kv, e), p + "attn.b_O": (d,), p + "mlp.W_in": (d, m),
                       p + "mlp.b_in": (m,), p + "mlp.W_out": (m, d), p + "mlp.b_out": (d,)})
    assert {k: tuple(v.shape) for k, v in ex.state_dict.items()} == shapes
    assert len(ex.residual_labels) == d and len(set(ex.residual_labels)) == d
    assert ex.tokens == [*model.automaton.alphabet, "BOS"] and ex.outputs == list(model.automaton.states)
    tokens = torch.randint(0, model.bos_id, (64, T), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), model.explicit_attention():
        ours = model(tokens)
        theirs = hooked_transformer_forward(ex.state_dict, c, bos_tokens(tokens, model.bos_id))[:, 1:]
    assert torch.equal(ours, theirs)


@pytest.fixture(scope="module")
def q8(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "q8.safetensors"
    assert main(["compile", "quaternion", "-o", str(path), "--max-len", "16", "--no-verify"]) == 0
    return path


def test_cli_export_writes_deterministic_files(q8, tmp_path, capsys):
    for out in ("a", "b"):
        assert main(["export", str(q8), "--format", "transformer-lens", "-o", str(tmp_path / out)]) == 0
    assert "for TransformerLens" in capsys.readouterr().out
    for f in FILES:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    sd = load_file(str(tmp_path / "a" / "model.safetensors"))
    cfg = json.loads((tmp_path / "a" / "config.json").read_text())
    mp = json.loads((tmp_path / "a" / "map.json").read_text())
    assert len(mp["residual_labels"]) == cfg["d_model"] == sd["embed.W_E"].shape[1]
    assert any(label.startswith("unfold:") for label in mp["residual_labels"])  # scratch dims are named
    assert len(mp["blocks"]) == cfg["n_layers"] and mp["bos_token"] == cfg["d_vocab"] - 1
    tok = json.loads((tmp_path / "a" / "tokenizer.json").read_text())
    assert tok["model"]["vocab"] == {t: i for i, t in enumerate([*mp["tokens"], "<unk>"])}  # ids = our token ids
    assert tok["post_processor"]["special_tokens"]["BOS"]["ids"] == [mp["bos_token"]]
    model = compiler.load(str(q8))
    tokens = torch.randint(0, model.bos_id, (8, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), model.explicit_attention():
        assert torch.equal(model(tokens), hooked_transformer_forward(sd, cfg, bos_tokens(tokens, model.bos_id))[:, 1:])


def test_cli_export_bad_input_is_exit_2_and_checks_the_output_first(q8, tmp_path, capsys):
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    assert main(["export", str(tmp_path / "missing.safetensors"), "-o", str(afile)]) == 2
    assert "output directory" in capsys.readouterr().err  # the output path is checked before loading
    assert main(["export", str(tmp_path / "missing.safetensors"), "-o", str(tmp_path / "new")]) == 2
    assert not (tmp_path / "new").exists()
    assert main(["export", str(afile), "-o", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and all(line.startswith("error: ") for line in err.splitlines())
    assert main(["export", str(q8), "--format", "onnx", "-o", str(tmp_path / "new")]) == 2


@pytest.mark.parametrize("name,method", [("nth-last:3", "lookback"), ("memory:3", "local")])
def test_one_hidden_layer_models_export_block_for_block_within_twice_our_parameters(name, method, tmp_path):
    """``compile --one-hidden-layer``, then ``export``: one exported block per layer (no scratch),
    at most 2x our parameters, and the same logits through a plain forward of the state dict."""
    path = tmp_path / "m.safetensors"
    assert main(["compile", name, "--method", method, "--one-hidden-layer", "-o", str(path), "--max-len", str(T),
                 "--no-verify"]) == 0
    model = compiler.load(path)
    ex = to_transformer_lens(model)
    assert ex.config["n_layers"] == len(model.blocks) and ex.config["d_model"] == model.config.d_model
    assert sum(v.numel() for v in ex.state_dict.values()) <= 2 * sum(p.numel() for p in model.parameters())
    tokens = torch.randint(0, model.bos_id, (64, T), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), model.explicit_attention():
        theirs = hooked_transformer_forward(ex.state_dict, ex.config, bos_tokens(tokens, model.bos_id))[:, 1:]
        assert torch.equal(model(tokens), theirs)


@pytest.mark.parametrize("name", ["dihedral:3", "dyck-legal:4,2", "cyclic:6"])
def test_a_standard_shape_model_exports_block_for_block_padded_only_to_its_widest_block(name):
    """``shape="standard"``: no unfolding at export (one exported block per block, the same
    d_model); every block zero-padded to the most heads and the widest MLP, nothing more (the
    exported parameters are ours plus exactly that padding and the zero attention biases); and
    the same logits through a plain forward of the state dict."""
    model = compiler.compile_automaton(name, max_len=16, shape="standard")
    ex = to_transformer_lens(model)
    c, blocks = ex.config, model.config.blocks
    assert c["n_layers"] == len(blocks) and c["d_model"] == model.config.d_model
    assert c["n_heads"] == max(b.n_heads for b in blocks) and c["d_mlp"] == max(b.mlp_hidden[0] for b in blocks)
    assert all(len(b.mlp_hidden) == 1 for b in blocks)
    d, e, H, m = c["d_model"], c["d_head"], c["n_heads"], c["d_mlp"]
    padding = sum(4 * (H - b.n_heads) * e * d + (m - b.mlp_hidden[0]) * (2 * d + 1) for b in blocks)
    biases = len(blocks) * (3 * H * e + d)
    ours = sum(p.numel() for p in model.parameters())
    assert sum(v.numel() for v in ex.state_dict.values()) == ours + padding + biases
    tokens = torch.randint(0, model.bos_id, (64, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), model.explicit_attention():
        theirs = hooked_transformer_forward(ex.state_dict, c, bos_tokens(tokens, model.bos_id))[:, 1:]
        assert torch.equal(model(tokens), theirs)


def test_heads_that_share_their_key_and_value_export_as_grouped_query_attention():
    """The gridworld's find heads all read the same codes and copy the same position: the export
    keeps one key-value head per block (``n_key_value_heads`` 1), so padding block 1's prefix head
    to the find heads costs W_Q and W_O only -- exactly that many parameters -- and the plain
    forward (each head reading its run's key and value) gives our logits bit for bit.  One find
    head's key changed (its BOS weight halved) no longer shares: every head keeps its own."""
    model = compiler.compile_automaton("grid:4", max_len=12, shape="standard")
    ex = to_transformer_lens(model)
    c, blocks = ex.config, model.config.blocks
    d, e, H, m = c["d_model"], c["d_head"], c["n_heads"], c["d_mlp"]
    assert [b.n_heads for b in blocks] == [1, 6] and c["n_key_value_heads"] == 1
    ours = sum(p.numel() for p in model.parameters())
    ours_attn = sum(4 * b.n_heads * e * d for b in blocks)
    attn = len(blocks) * ((2 * H + 2) * e * d + (H + 2) * e + d)  # W_Q, W_O per head; one W_K, W_V; biases
    mlp_pad = sum((m - b.mlp_hidden[0]) * (2 * d + 1) for b in blocks)
    assert sum(v.numel() for v in ex.state_dict.values()) == ours - ours_attn + attn + mlp_pad
    tokens = torch.randint(0, model.bos_id, (64, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad(), model.explicit_attention():
        assert torch.equal(model(tokens), hooked_transformer_forward(ex.state_dict, c, bos_tokens(tokens, 2))[:, 1:])
        k = model.blocks[1].attn.W_K
        k[3] = torch.where(k[3] < 0, k[3] / 2, k[3])
        ex = to_transformer_lens(model)
        assert "n_key_value_heads" not in ex.config and ex.state_dict["blocks.1.attn.W_K"].shape == (H, d, e)
        assert torch.equal(model(tokens), hooked_transformer_forward(ex.state_dict, ex.config,
                                                                     bos_tokens(tokens, 2))[:, 1:])
