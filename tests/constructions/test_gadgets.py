"""Unit tests of the gadgets: positions, step units, composition MLP, fusion, offset head."""

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from constructions.budget import STEP_TOLERANCE
from constructions.gadgets.compose import capped_onehot_bias, capped_step_units
from constructions.gadgets import (
    ABSORB,
    CodeInput,
    compose_mlp,
    compose_slope,
    flat_lookup_mlp,
    lookup_mlp,
    offset_head,
    onehot_bias,
    prefix_mean_head,
    round_mlp,
    step_units,
)
from constructions.positions import position_code, position_table
from constructions.program import fuse
from constructions.workspace import Workspace, join


def test_rotation_shifts_code():
    code = position_code("sinusoidal", 300)
    t = np.arange(0, 301)
    for off in (1, 2, 64, 257):
        np.testing.assert_allclose(code.code(t) @ code.rotation(off), code.code(t - off), atol=1e-12)


@pytest.mark.parametrize("kind,T", [("sinusoidal", 300), ("sinusoidal", 1024), ("circle", 100)])
def test_match_beats_every_miss(kind, T):
    code = position_code(kind, T)
    table = code.code(np.arange(-T, T + 1))
    scores = table @ code.code(0)
    miss = np.delete(scores, T)
    assert scores[T] == pytest.approx(code.match_score)
    assert miss.max() <= code.miss_score + 1e-9
    if kind == "sinusoidal":
        assert code.match_score - code.miss_score == 2  # the gap does not shrink with T


def test_bos_row_is_zero():
    assert np.all(position_table(position_code("sinusoidal", 16))[0] == 0)


@pytest.mark.parametrize("n", [2, 3, 7])
def test_step_units_onehot_within_tolerance(n):
    w, b, M = step_units(n)
    for v in range(n):
        for noise in (-0.24, -0.1, 0.0, 0.1, 0.24):
            onehot = np.maximum((v + noise) * w + b, 0) @ M + onehot_bias(n)
            assert np.array_equal(onehot, np.eye(n)[v]), (v, noise, onehot)
    # beyond the tolerance the output is no longer a clean one-hot
    if n > 2:
        onehot = np.maximum((1 + 0.6) * w + b, 0) @ M + onehot_bias(n)
        assert not np.array_equal(onehot, np.eye(n)[1])
    assert STEP_TOLERANCE == 0.25


@pytest.mark.parametrize("n", [2, 3, 7])
def test_capped_step_units_read_min_of_the_code_and_are_off_past_the_cap(n):
    w, b, M = capped_step_units(n)
    for x in (0, 1, n - 1, n, 10 * n, 1000):
        for noise in (-0.24, 0.0, 0.24):
            z = (x + noise) * w + b
            onehot = np.maximum(z, 0) @ M + capped_onehot_bias(n)
            assert np.array_equal(onehot, np.eye(n)[min(x, n - 1)]), (x, noise, onehot)
            if x >= n - 1:  # every unit surely off: a large count adds nothing, rounding included
                assert np.all(z <= 0)


def _compose_workspace(n):
    ws = Workspace()
    ws.add("one")
    F, G = ws.add("F", n), ws.add("G", n)
    return ws, F, G


@pytest.mark.parametrize("into_fetched", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_compose_mlp_is_exact_on_all_pairs(n, into_fetched):
    """Exact arithmetic (float64 here): fetched codes anywhere within the input tolerance.
    ``into_fetched``: n units fewer, the composition lands in G and F stays as it was."""
    ws, F, G = _compose_workspace(n)
    mlp = compose_mlp("c", F, G, into_fetched=into_fetched)
    tol = mlp.notes["input_tolerance"]
    assert tol >= STEP_TOLERANCE and mlp.hidden_sizes == [2 * n * n + (n if into_fetched else 2 * n)]
    assert mlp.writes == (("G",) if into_fetched else ("F", "G")) and mlp.notes["into"] == mlp.writes[0]
    mlp = mlp.embed(ws)
    rng = np.random.default_rng(0)
    maps = list(itertools.product(range(n), repeat=n))
    if len(maps) > 60:
        maps = [maps[i] for i in rng.choice(len(maps), 60, replace=False)]
    for f in maps:
        for g in maps:
            x = np.zeros(ws.d_model)
            x[list(F.dims)] = f
            x[list(G.dims)] = np.array(g) + rng.choice([-1, 1], n) * rng.uniform(0.9 * tol, tol, n)
            y = x + mlp(x)
            composed, kept = [f[g[q]] for q in range(n)], (f if into_fetched else np.zeros(n))
            assert np.allclose(y[list(G.dims if into_fetched else F.dims)], composed, atol=1e-9)
            assert np.allclose(y[list(F.dims if into_fetched else G.dims)], kept, atol=1e-12)


def test_compose_mlp_fails_beyond_its_tolerance():
    ws, F, G = _compose_workspace(4)
    mlp = compose_mlp("c", F, G).embed(ws)
    x = np.zeros(ws.d_model)
    x[list(F.dims)] = [3, 0, 1, 2]
    x[list(G.dims)] = [1, 1, 1 - 0.25, 1 - 0.3]  # at the tolerance c/M = 1/4, and 0.05 past it
    y = (x + mlp(x))[list(F.dims)]
    assert np.allclose(y[:3], [0, 0, 0], atol=1e-9)
    assert y[3] == pytest.approx(0.05 * 6)  # f(1) = 0 gets the unit's clipped part, 0.05 times the slope 6


@pytest.mark.parametrize("into_fetched", [False, True])
@pytest.mark.parametrize("n", [2, 7, 32, 64])
def test_compose_mlp_is_bitwise_exact_in_float32(n, into_fetched):
    """The float claim: exact integer maps and fetched codes within ``exact_input_noise`` of an
    integer give exact integer results in float32 (torch matmuls, any summation order); into the
    fetched map, exact but where the result is 0 and the fetched code was 0: there the fetched
    noise stays (the scratch residue the clearing version leaves in G)."""
    ws, F, G = _compose_workspace(n)
    gadget = compose_mlp("c", F, G, eps=2.0**-23, into_fetched=into_fetched)
    M, _ = compose_slope(n)
    assert gadget.notes["slope"] == M == max(1, 2 * (n - 1)) and gadget.notes["float_exact"]
    noise = gadget.notes["exact_input_noise"]
    dense = gadget.embed(ws)
    W = [torch.from_numpy(w).float() for w in dense.weights]
    b = [torch.from_numpy(v).float() for v in dense.biases]
    rng = np.random.default_rng(n)
    B = 256
    f = rng.integers(0, n, (B, n))
    g = rng.integers(0, n, (B, n))
    x = np.zeros((B, ws.d_model))
    x[:, list(F.dims)] = f
    x[:, list(G.dims)] = g + rng.uniform(-noise, noise, (B, n)) * ((rng.random((B, n)) < 0.5) | (g == 0))
    xt = torch.from_numpy(x).float()
    y = xt + (torch.relu(xt @ W[0] + b[0]) @ W[1] + b[1])
    want = np.take_along_axis(f, g, axis=1)
    if not into_fetched:
        assert torch.equal(y[:, list(F.dims)], torch.from_numpy(want).float())
        return
    out, residue = y[:, list(G.dims)].double().numpy(), (g == 0) & (want == 0)
    assert np.array_equal(out[~residue], want[~residue]) and np.all(np.abs(out[residue]) <= noise)
    assert np.any(out[residue] != 0)  # the residue is really there: a claim, not a rounding accident
    assert torch.equal(y[:, list(F.dims)], xt[:, list(F.dims)])


def _assert_fused_is_sequential(ws, F, G, first, second, fused_mlps, seed):
    """Each of ``fused_mlps`` (embedded) updates like ``first`` then ``second`` on integer maps in F
    and fetched codes in G within 0.2 of an integer."""
    first, second = first.embed(ws), second.embed(ws)
    rng = np.random.default_rng(seed)
    for _ in range(50):
        x = np.zeros(ws.d_model)
        x[list(F.dims)] = rng.integers(0, len(F), len(F))
        x[list(G.dims)] = rng.integers(0, len(G), len(G)) + rng.uniform(-0.2, 0.2, len(G))
        y1 = x + first(x)
        y2 = y1 + second(y1)
        for fused in fused_mlps:
            np.testing.assert_allclose(x + fused(x), y2, atol=1e-9)


def test_fuse_equals_sequential_application():
    ws, F, G = _compose_workspace(3)
    out = ws.add("rounded", 3)
    first = compose_mlp("c", F, G)
    second = round_mlp("r", F, 3, out)
    fused = fuse(first, second).embed(ws)
    assert len(fused.hidden_sizes) == len(first.hidden_sizes) + len(second.hidden_sizes)  # 1 + 2
    _assert_fused_is_sequential(ws, F, G, first, second, [fused], seed=1)


def test_fuse_reads_the_fetched_map_from_pass_through_units():
    """A lookup fused after the scan's last composition reads G (its update included) from the
    composition's units r = G + 1/2 (exactly G + 1/2 for G >= -1/2): no carry units, and the
    update of applying one after the other, as with the carry."""
    ws, F, G = _compose_workspace(3)
    out = ws.add("rounded", 3)
    first = compose_mlp("c", F, G, into_fetched=True)
    second = round_mlp("r", G, 3, out)
    fused = fuse(first, second).embed(ws)
    assert fused.hidden_sizes[0] == first.hidden_sizes[0]  # no relu(x), relu(-x) pairs for G
    no_passes = fuse(dataclasses.replace(first, passes=()), second).embed(ws)
    assert no_passes.hidden_sizes[0] == first.hidden_sizes[0] + 6
    _assert_fused_is_sequential(ws, F, G, first, second, [fused, no_passes], seed=2)


def test_offset_head_selects_offset_or_bos():
    T = 40
    code = position_code("sinusoidal", T)
    ws = Workspace()
    one, bos = ws.add("one"), ws.add("bos")
    pos = ws.add("pos", code.labels)
    src, dst = ws.add("src"), ws.add("dst")
    head = offset_head("h", pos, code, bos, one, 8, src, dst, value_range=1)
    W_Q, W_K, _, _ = head.embed(ws)
    x = np.zeros((T + 1, ws.d_model))
    x[:, one[0]] = 1
    x[0, bos[0]] = 1
    x[:, list(pos.dims)] = position_table(code)
    scores = (x @ W_Q) @ (x @ W_K).T
    for t in range(T + 1):
        winner = int(np.argmax(scores[t, : t + 1]))
        assert winner == max(t - 8, 0)
        s = np.sort(scores[t, : t + 1])
        if t:
            assert s[-1] - s[-2] >= head.notes["score_gap"] - 1e-6


def _softmax_attend(head, ws, x):
    """Causal softmax attention of one head on residual rows x [T+1, d] (float64)."""
    W_Q, W_K, W_V, W_O = head.embed(ws)
    q, k, v = x @ W_Q, x @ W_K, x @ W_V
    s = q @ k.T
    s[np.triu_indices(len(x), 1)] = -np.inf
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return (p @ v) @ W_O


def test_prefix_mean_head_and_residue_decode_give_exact_counts():
    from constructions.gadgets import (
        ABSORB,
        absorb_feature,
        prefix_mean_head,
        residue_mlp,
        residue_range,
    )

    T, n = 50, 5
    ws = Workspace()
    bos, logmass = ws.add("bos"), ws.add(ABSORB)
    inc, mean, new, old = ws.add("inc"), ws.add("mean"), ws.add("new"), ws.add("old")
    head = prefix_mean_head("h", logmass, bos, inc, mean, mass=2 * T)
    res = residue_range(0, (n - 1) * (T + 1), 2 * n)
    mlp = residue_mlp("m", mean, res, new, (np.arange(2 * n) % n)[:, None].astype(float), weights=(2.0 * T,),
                      shift=3, minus=inc, minus_max=n - 1, minus_out=old, period=n).embed(ws)
    rng = np.random.default_rng(0)
    incs = rng.integers(0, n, T)
    x = np.zeros((T + 1, ws.d_model))
    x[0, bos[0]] = 1
    x[:, logmass[0]] = absorb_feature(2 * T, T)
    assert np.array_equal(x[:, logmass[0]], np.log(2 * T - np.arange(T + 1)))
    x[1:, inc[0]] = incs
    x = x + _softmax_attend(head, ws, x)
    x = x + np.stack([mlp(r) for r in x])
    want = (3 + np.cumsum(incs)) % n
    np.testing.assert_allclose(x[1:, new[0]], want, atol=1e-9)
    np.testing.assert_allclose(x[1:, old[0]], np.concatenate([[3], want[:-1]]), atol=1e-9)


@pytest.mark.parametrize("low,high,M", [(0, 300, 6), (-100, 100, 16), (-7, 50, 5), (0, 0, 2)])
def test_residue_mlp_reads_a_table_of_x_mod_m_under_noise(low, high, M):
    from constructions.gadgets import residue_hidden, residue_mlp, residue_range

    r = residue_range(low, high, M)
    assert r.offset % M == 0 and r.offset + low >= 0 > r.offset + low - M  # the smallest such multiple
    assert high + r.offset <= r.span < high + r.offset + M
    ws = Workspace()
    mean, inc, out = ws.add("mean"), ws.add("inc"), ws.add("out", 2)
    table = np.stack([np.arange(M) % 3, np.arange(M) ** 2], axis=1).astype(float)
    scale, shift = 40.0, 3
    mlp = residue_mlp("r", join("x", [mean, inc]), r, out, table, weights=(scale, -1.0), shift=shift)
    assert mlp.hidden_sizes == residue_hidden(r, bos=False)
    dense = mlp.embed(ws)
    x = np.arange(low, high + 1)
    for noise in (0.0, 0.24, -0.24):
        for i in (0, 2):  # X = scale * mean - inc + shift
            res = np.zeros((len(x), ws.d_model))
            res[:, mean[0]] = (x - shift + i + noise) / scale
            res[:, inc[0]] = i
            np.testing.assert_array_equal(dense(res)[:, list(out.dims)], table[np.mod(x, M)])


@pytest.mark.parametrize("bos", [False, True])
def test_residue_mlp_reads_the_value_before_an_increment(bos):
    from constructions.gadgets import residue_hidden, residue_mlp, residue_range

    T, n, dmax = 60, 3, 2
    M = 3 * n
    r = residue_range(0, (n - 1) * (T + 1), M)
    ws = Workspace()
    b, mean, inc, new, old = ws.add("bos"), ws.add("mean"), ws.add("inc"), ws.add("new"), ws.add("old")
    table = (np.arange(M) % n)[:, None].astype(float)
    mlp = residue_mlp("count", mean, r, new, table, weights=(2.0 * T,), shift=1, bos=b if bos else None,
                      minus=inc, minus_max=dmax, minus_out=old, period=n)
    assert mlp.hidden_sizes == residue_hidden(r, bos, dmax, period=n)
    dense = mlp.embed(ws)
    X = np.arange(0, (n - 1) * (T + 1) + 1)
    for d in range(dmax + 1):
        for noise in (0.0, 0.24, -0.24):
            res = np.zeros((len(X), ws.d_model))
            res[:, mean[0]] = (X - 1 + noise) / (2.0 * T)
            res[:, inc[0]] = d
            got = dense(res)
            np.testing.assert_array_equal(got[:, new[0]], X % n)
            np.testing.assert_array_equal(got[:, old[0]], (X - d) % n)  # any X: r - d is in -dmax..M-1
    if bos:
        res = np.zeros((1, ws.d_model))
        res[0, b[0]] = 1.0
        assert not dense(res).any()


def test_recent_flag_head_finds_latest_flag_or_bos():
    from constructions.gadgets import recent_flag_head

    T = 200
    ws = Workspace()
    one, flag, rec, val, out = ws.add("one"), ws.add("flag"), ws.add("rec"), ws.add("val"), ws.add("out")
    head = recent_flag_head("h", flag, rec, one, val, out, T, value_range=6)
    rng = np.random.default_rng(1)
    flags = rng.random(T + 1) < 0.05
    flags[0] = True
    vals = rng.integers(0, 7, T + 1)
    x = np.zeros((T + 1, ws.d_model))
    x[:, one[0]] = 1
    x[:, flag[0]] = flags
    x[:, rec[0]] = np.arange(T + 1) / (T + 1)
    x[:, val[0]] = vals
    got = _softmax_attend(head, ws, x)[:, out[0]]
    last = np.maximum.accumulate(np.where(flags, np.arange(T + 1), 0))
    assert np.abs(got - vals[last]).max() < STEP_TOLERANCE / 2


def test_lookup_mlp_is_exact_on_keys_and_silent_elsewhere():
    from constructions.gadgets import CodeInput, OneHotInput, lookup_mlp

    ws = Workspace()
    a, tok, out = ws.add("a"), ws.add("tok", 3), ws.add("out")
    table = {}
    for v in range(4):
        for t in range(3):
            table[(v, t)] = np.array([10.0 * v + t + 1])  # a vector over ``out``
    del table[(2, 1)]
    mlp = lookup_mlp("l", [CodeInput(a, 4), OneHotInput(tok)], out, table)
    assert mlp.reads == ("a", "tok") and mlp.writes == ("out",)
    mlp = mlp.embed(ws)
    for v in range(4):
        for t in range(3):
            x = np.zeros(ws.d_model)
            x[a[0]] = v + 0.2
            x[tok[t]] = 1
            want = 0 if (v, t) == (2, 1) else 10 * v + t + 1
            assert mlp(x)[out[0]] == pytest.approx(want, abs=1e-9)
        x = np.zeros(ws.d_model)
        x[a[0]] = v  # no token (BOS): nothing matches
        assert mlp(x)[out[0]] == 0


def test_lookup_mlp_key_units_are_one_at_their_key_and_at_most_minus_one_elsewhere():
    """No key unit sits at its ReLU kink for an input one code away (where a noisy input's rounding
    could switch it on): its pre-activation is 1 at its key and <= -1 at every other input."""
    from constructions.gadgets import CodeInput, lookup_mlp

    ws = Workspace()
    a, b, out = ws.add("a"), ws.add("b"), ws.add("out")
    table = {(i, j): np.array([1.0 + i + 3 * j]) for i in range(3) for j in range(4)}
    mlp = lookup_mlp("l", [CodeInput(a, 3), CodeInput(b, 4)], out, table).embed(ws)
    keys = sorted(table)
    for i in range(3):
        for j in range(4):
            x = np.zeros(ws.d_model)
            x[a[0]], x[b[0]] = i + 0.1, j - 0.2
            h = np.maximum(x @ mlp.weights[0] + mlp.biases[0], 0.0)
            pre = h @ mlp.weights[1] + mlp.biases[1]
            hit = keys.index((i, j))
            assert pre[hit] == pytest.approx(1.0) and np.delete(pre, hit).max() <= -1.0 + 1e-9


def test_flat_lookup_mlp_is_one_hidden_layer_exact_on_keys_within_its_tolerance_and_silent_elsewhere():
    from constructions.gadgets import CodeInput, flat_lookup_mlp, flat_lookup_tolerance, lookup_mlp

    ws = Workspace()
    a, b, out = ws.add("a"), ws.add("b"), ws.add("out", 2)
    table = {(v, w): np.array([10.0 * v + w + 1, float(v == w)]) for v in range(4) for w in range(3)}
    del table[(2, 1)]
    ins = [CodeInput(a, 4), CodeInput(b, 3)]
    mlp = flat_lookup_mlp("f", ins, out, table)
    assert len(mlp.weights) == 2 and mlp.reads == ("a", "b") and mlp.writes == ("out",)
    tol = flat_lookup_tolerance([4, 3])
    assert tol == STEP_TOLERANCE / (1 + 4) == mlp.notes["input_tolerance"]  # K = a + 4 b
    flat, deep = mlp.embed(ws), lookup_mlp("l", ins, out, table).embed(ws)
    for v in range(4):
        for w in range(3):
            for noise in (-tol, tol):
                x = np.zeros(ws.d_model)
                x[a[0]], x[b[0]] = v + noise, w - noise  # errors adding up to tol on K
                want = np.zeros(2) if (v, w) == (2, 1) else table[(v, w)]
                assert np.allclose(flat(x)[list(out.dims)], want, atol=1e-9)
                assert np.allclose(flat(x)[list(out.dims)], deep(x)[list(out.dims)], atol=1e-9)
    x = np.zeros(ws.d_model)
    x[a[0]], x[b[0]] = 1.0, 3 * tol  # K = 1 + 12 tol = 1.6: the step at K = 2 is partly on
    assert not np.allclose(flat(x)[list(out.dims)], table[(1, 0)], atol=1e-3)


def test_code_function_mlp_is_one_hidden_layer_exact_near_every_code():
    from constructions.gadgets import CodeInput, code_function_mlp

    ws = Workspace()
    x_sub, out = ws.add("x", 2), ws.add("out", 2)
    values = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 3.0], [0.0, 3.0], [1.0, 0.0]])
    mlp = code_function_mlp("f", CodeInput(x_sub, 6, index=1), out, values)
    assert len(mlp.weights) == 2 and mlp.weights[0].shape[1] == 2 * 3  # thresholds at 1, 3 and 5 only
    assert mlp.reads == ("x",) and mlp.writes == ("out",)
    mlp = mlp.embed(ws)
    for v in range(6):
        for noise in (-STEP_TOLERANCE, 0.0, STEP_TOLERANCE):
            x = np.zeros(ws.d_model)
            x[x_sub[0]], x[x_sub[1]] = 7.0, v + noise  # the other dim of the subspace is not read
            assert np.array_equal(mlp(x)[list(out.dims)], values[v])


@pytest.mark.parametrize("values, units", [
    ([[0.0], [1.0], [0.0]], 2),  # a bump: relu(x + 1/2) and one slope change, where steps take 4
    ([[0.0], [0.0], [2.0], [2.0], [1.0]], 3),  # slope changes at 1, 2 and 3
    ([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]], 0),  # constant: the bias alone
    ([[3.0], [2.0], [1.0], [0.0]], 1),  # one line: relu(x + 1/2) alone
])
def test_interpolated_code_function_is_exact_at_the_codes_and_within_its_tolerance_near_them(values, units):
    from constructions.gadgets import CodeInput, code_function_mlp, interpolated_code_function_mlp

    ws = Workspace()
    x_sub, out = ws.add("x", 2), ws.add("out", len(values[0]))
    values = np.array(values)
    mlp = interpolated_code_function_mlp("f", CodeInput(x_sub, len(values), index=1), out, values)
    steps = code_function_mlp("f", CodeInput(x_sub, len(values), index=1), out, values)
    assert len(mlp.weights) == 2 and mlp.weights[0].shape[1] == units <= steps.weights[0].shape[1]
    tol = mlp.notes["input_tolerance"]
    assert tol == STEP_TOLERANCE / max(1.0, float(np.abs(np.diff(values, axis=0)).max()))
    mlp = mlp.embed(ws)
    for v in range(len(values)):
        for noise in (-tol, 0.0, tol):
            x = np.zeros(ws.d_model)
            x[x_sub[0]], x[x_sub[1]] = 7.0, v + noise  # the other dim of the subspace is not read
            got = mlp(x)[list(out.dims)]
            if noise == 0.0:
                assert np.array_equal(got, values[v])
            assert np.abs(got - values[v]).max() <= STEP_TOLERANCE + 1e-12


def test_round_mlp_cleans_and_clears():
    from constructions.gadgets import round_mlp

    ws = Workspace()
    src, dst = ws.add("src", 2), ws.add("dst", 2)
    mlp = round_mlp("r", src, 5, dst).embed(ws)
    x = np.zeros(ws.d_model)
    x[list(src.dims)] = [3.2, 0.1]
    y = x + mlp(x)
    assert list(y[list(dst.dims)]) == [3, 0] and np.all(y[list(src.dims)] == 0)


def test_round_mlp_writes_exact_integers_from_noisy_float32_codes():
    """The clipped thresholds saturate exactly: in float32, every code in 0..6 with noise up to
    just below STEP_TOLERANCE comes out as the exact integer (no rounding error at all), and
    the scratch is exactly 0 after the residual addition."""
    from constructions.gadgets import round_mlp

    ws = Workspace()
    src, dst = ws.add("src"), ws.add("dst")
    mlp = round_mlp("r", src, 7, dst)
    rng = np.random.default_rng(3)
    x = (np.repeat(np.arange(7), 200) + rng.uniform(-0.99, 0.99, 1400) * STEP_TOLERANCE).astype(np.float32)
    h = torch.from_numpy(x[:, None])
    for i, (W, b) in enumerate(zip(mlp.weights, mlp.biases)):
        h = h @ torch.from_numpy(W).float() + torch.from_numpy(b).float()
        h = torch.relu(h) if i < len(mlp.weights) - 1 else h
    assert torch.equal(h[:, 0], torch.from_numpy(np.repeat(np.arange(7), 200)).float())
    assert torch.equal(torch.from_numpy(x) + h[:, 1], torch.zeros(1400))


def _n(ws, names):
    return sum(len(ws[n]) for n in names)


def _gadgets():
    """One of every gadget over a shared workspace (joined and multi-dim subspaces included)."""
    from constructions.gadgets import (
        ABSORB,
        CodeInput,
        OneHotInput,
        lookup_mlp,
        prefix_mean_head,
        recent_flag_head,
        residue_mlp,
        residue_range,
        round_mlp,
    )
    from constructions.workspace import join

    code = position_code("sinusoidal", 16)
    ws = Workspace()
    one, bos, absorb, rec = ws.add("one"), ws.add("bos"), ws.add(ABSORB), ws.add("rec")
    pos = ws.add("pos", code.labels)
    F, G = ws.add("F", 3), ws.add("G", 3)
    inc, mean, new, old = ws.add("inc"), ws.add("mean"), ws.add("new"), ws.add("old")
    inc2, mean2 = ws.add("inc2"), ws.add("mean2")
    flag, target, fetched = ws.add("flag"), ws.add("target"), ws.add("fetched")
    tok, out1, out2 = ws.add("tok", 3), ws.add("out1"), ws.add("out2", 2)
    incs, means = join("incs", [inc, inc2]), join("means", [mean, mean2])
    table = {(v, 0, t): np.array([v + t, 0.0, 1.0]) for v in range(3) for t in range(3)}
    parts = [
        offset_head("offset", pos, code, bos, one, 2, F, G, value_range=2),
        prefix_mean_head("mean", absorb, bos, incs, means, mass=40),
        recent_flag_head("recent", flag, rec, one, target, fetched, 16, value_range=2),
        compose_mlp("compose", F, G),
        round_mlp("round", G, 3, F),
        residue_mlp("residue", join("counts", [mean, inc]), residue_range(0, 30, 4), new,
                    (np.arange(4) % 3)[:, None].astype(float), weights=(40.0, -1.0), shift=1, bos=bos),
        residue_mlp("residue_old", mean, residue_range(0, 30, 6), new, (np.arange(6) % 3)[:, None].astype(float),
                    weights=(40.0,), minus=inc, minus_max=2, minus_out=old, period=3),
        lookup_mlp("lookup", [CodeInput(new, 3), CodeInput(old, 1), OneHotInput(tok)],
                   join("outs", [out1, out2]), table),
    ]
    return ws, parts


def test_every_gadget_is_local_to_its_declared_subspaces():
    """Local matrices: one row per dim of the declared reads, one column per dim of the writes
    (heads: query/key/value rows, W_O columns; MLPs: first weight rows, last weight and bias columns)."""
    from constructions.program import Head

    ws, parts = _gadgets()
    for part in parts:
        if isinstance(part, Head):
            assert part.W_Q.shape[0] == _n(ws, part.reads["query"]), part.name
            assert part.W_K.shape[0] == _n(ws, part.reads["key"]), part.name
            assert part.W_V.shape[0] == _n(ws, part.reads["value"]), part.name
            assert part.W_O.shape[1] == _n(ws, part.writes), part.name
            W_Q, W_K, W_V, W_O = part.embed(ws)
            assert W_Q.shape[0] == W_K.shape[0] == W_V.shape[0] == W_O.shape[1] == ws.d_model
        else:
            assert part.weights[0].shape[0] == _n(ws, part.reads), part.name
            assert part.weights[-1].shape[1] == _n(ws, part.writes), part.name
            assert part.biases[-1].shape == (_n(ws, part.writes),), part.name
            dense = part.embed(ws)
            assert dense.weights[0].shape[0] == dense.weights[-1].shape[1] == ws.d_model
            assert dense.hidden_sizes == part.hidden_sizes
    lookup = parts[-1]
    assert lookup.reads == ("new", "tok") and lookup.writes == ("out1", "out2")  # a one-value code has no units


def test_local_evaluation_matches_the_embedding():
    """``mlp(x_local)`` on the dims of its reads is ``mlp.embed(ws)(x)`` on the dims of its writes."""
    ws, parts = _gadgets()
    rng = np.random.default_rng(3)
    for part in parts:
        if not hasattr(part, "weights"):
            continue
        x = rng.uniform(-1, 3, (5, ws.d_model))
        full = part.embed(ws)(x)
        # equal up to float64 rounding (the residual-width products also sum the zero rows)
        np.testing.assert_allclose(part(x[:, ws.span(part.reads)]), full[:, ws.span(part.writes)], atol=1e-9)
        others = np.setdiff1d(np.arange(ws.d_model), ws.span(part.writes))
        assert not full[:, others].any(), part.name


def _halfspace_case(index, domain, n_values):
    from constructions.gadgets import CodeInput, halfspace_lookup_mlp

    ws = Workspace()
    subs = [ws.add(f"c{i}") for i in range(len(domain[0]))]
    out = ws.add("out")
    mlp = halfspace_lookup_mlp("h", [CodeInput(s, n_values) for s in subs], out, index, np.array(domain))
    return ws, subs, out, mlp


@pytest.mark.parametrize("name", ["corners", "below the diagonal", "two classes"])
def test_halfspace_lookup_is_one_hidden_layer_exact_within_its_tolerance(name):
    """Corners of a 3x3 grid (caps: one unit each), x < y on a 5x5 grid (one step, two units)
    and a class of caps beside a class of one step: the index at every code of the domain,
    within STEP_TOLERANCE of it for every code error within the reported input tolerance."""
    n = 3 if name == "corners" else 5
    domain = [list(c) for c in itertools.product(range(n), repeat=2)]
    if name == "corners":
        index = {(0, 0): 1, (0, 2): 1, (2, 0): 1, (2, 2): 1}
    elif name == "below the diagonal":
        index = {(x, y): 1 for x, y in itertools.product(range(n), repeat=2) if x < y}
    else:
        index = {(x, y): 2 for x, y in itertools.product(range(n), repeat=2) if x + y >= 6} | {(0, 0): 1, (4, 0): 1}
    ws, subs, out, mlp = _halfspace_case(index, domain, n)
    units = {"corners": 4, "below the diagonal": 2, "two classes": 4}[name]
    assert mlp is not None and len(mlp.weights) == 2 and mlp.notes["units"] == units
    tol = mlp.notes["input_tolerance"]
    assert 0 < tol <= STEP_TOLERANCE
    dense = mlp.embed(ws)
    rng = np.random.default_rng(0)
    for c in domain:
        for noise in [np.zeros(2), *rng.uniform(-tol, tol, (20, 2)), np.full(2, tol), np.full(2, -tol)]:
            x = np.zeros(ws.d_model)
            x[[s[0] for s in subs]] = np.array(c) + noise
            y = dense(x)[out[0]]
            want = index.get(tuple(c), 0)
            assert abs(y - want) <= STEP_TOLERANCE + 1e-12
            if not noise.any():
                assert abs(y - want) < 1e-12


def test_halfspace_lookup_refuses_a_key_inside_the_hull():
    """The centre of a 3x3 grid is no vertex and no halfspace holds it alone: None (the caller
    falls back to the two-layer lookup)."""
    domain = [list(c) for c in itertools.product(range(3), repeat=2)]
    assert _halfspace_case({(1, 1): 1}, domain, 3)[3] is None


def test_fuse_reads_a_fresh_subspace_from_the_first_output_alone():
    """``fresh``: what the second reads is 0 before the MLP (only the first writes it), so it needs
    no carry through the first's hidden layers: two units narrower per fresh dim, and the update
    of applying one after the other wherever that holds."""
    from constructions.gadgets import CodeInput, code_function_mlp

    ws = Workspace()
    x, y, z = ws.add("x"), ws.add("y"), ws.add("z")
    first = code_function_mlp("f", CodeInput(x, 4), y, np.array([[0.0], [2.0], [1.0], [2.0]]))
    second = code_function_mlp("g", CodeInput(y, 3), z, np.array([[5.0], [0.0], [7.0]]))
    plain, lean = fuse(first, second).embed(ws), fuse(first, second, fresh=("y",)).embed(ws)
    assert lean.hidden_sizes[0] == plain.hidden_sizes[0] - 2
    assert fuse(first, second, fresh=("y",)).reads == ("x",)
    f, g = first.embed(ws), second.embed(ws)
    for v in range(4):
        for noise in (-STEP_TOLERANCE, 0.0, STEP_TOLERANCE):
            r = np.zeros(ws.d_model)
            r[x[0]] = v + noise
            y1 = r + f(r)
            assert np.array_equal(r + lean(r), y1 + g(y1))


def test_a_total_lookup_declares_its_zeros_and_a_saturating_count_up_to_its_reach():
    """The obligation a lookup states is what its weights do: every code of a count up to its
    ``reach`` (read as its last value), 0 off the table (``total``), rows of 0 left to the default;
    a flat lookup refuses a saturating count; a prefix mean given max_len declares its Average."""
    T = 12
    ws = Workspace()
    count, flag, out = ws.add("count"), ws.add("flag"), ws.add("out", 2)
    ins = [CodeInput(count, 3, capped=True, reach=T), CodeInput(flag, 2)]
    table = {(2, 1): np.array([1.0, 0.0]), (1, 0): np.array([0.0, 2.0]), (0, 1): np.zeros(2)}
    mlp = lookup_mlp("m", ins, out, table, total=True)
    ob = mlp.obligation
    assert set(ob.table) == {(1, 0)} | {(c, 1) for c in range(2, T + 1)} and ob.default.tolist() == [0.0, 0.0]
    f = mlp.embed(ws)
    for c, b in itertools.product(range(T + 1), range(2)):
        x = np.zeros(ws.d_model)
        x[count[0]], x[flag[0]] = c, b
        want = ob.table.get((c, b), ob.default)
        np.testing.assert_allclose(f(x)[list(out.dims)], want, atol=1e-9)
    assert lookup_mlp("m", ins, out, table).obligation.default is None  # not total: no claim off the table
    with pytest.raises(ValueError, match="saturating"):
        flat_lookup_mlp("m", ins, out, table)
    absorb, bos = ws.add(ABSORB), ws.add("bos")
    assert prefix_mean_head("h", absorb, bos, flag, count, mass=2 * T).obligation is None
    avg = prefix_mean_head("h", absorb, bos, flag, count, mass=2 * T, value_scale=2.0 * T, max_len=T).obligation
    assert (avg.heads, avg.first, avg.last, avg.mass, avg.scale, avg.src, avg.dst) == (
        ("h",), (1,), (T,), 2 * T, 2.0 * T, "flag", "count")
