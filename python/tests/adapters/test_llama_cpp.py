"""The llama_cpp adapter's translation, on cases small enough to compute by hand, and the conventions
of llama.cpp's ggml attention on the CPU (llama-cpp-python 0.3.36 of ci/requirements-llama.txt). Each
expected value is NumPy's or written out, never the adapter's.

Run: PYTHONPATH=python $ATTNCHECK_LLAMA_PYTHON -m pytest -q -p no:cacheprovider python/tests/adapters/test_llama_cpp.py
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
pytest.importorskip("llama_cpp")
from hand_cases import problem  # noqa: E402
from attncheck.adapters import llama_cpp as adapter  # noqa: E402

PATHS = ["flash", "softmax"]


def reference(q, k, v, scores_added=None, scale=None):
    """softmax(scale q k^T + scores_added) v in float64, H_kv dividing H (query head h reads h // (H / H_kv))."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = (1 / math.sqrt(q.shape[-1]) if scale is None else scale) * q @ k.swapaxes(-1, -2)
    if scores_added is not None:
        s = s + scores_added
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v


def test_claims_and_restrictions():
    for path in PATHS:
        a = adapter.Adapter(path)
        bias = {"bias"} if path == "softmax" else set()  # llama.cpp runs no flash attention with a bias (kq_b)
        sinks = {"sinks"}  # 0.3.36's ggml exports ggml_flash_attn_ext_add_sinks and ggml_soft_max_add_sinks
        assert a.capabilities == {"f32", "f16", "allow", "kv_lens", "window", "causal", "kv_cache", "gqa",
                                  "softcap"} | bias | sinks
        assert a.restrictions == []


@pytest.mark.parametrize("path", PATHS)
def test_allow_mask_polarity_true_means_attend_and_is_broadcast_over_heads(path):
    # B 1, H 2, Tq 2, Tk 2, equal scores: query 0 sees key 1 alone, query 1 both keys.
    q, k = np.zeros((1, 2, 2, 1)), np.zeros((1, 2, 2, 1))
    v = np.array([[1, 3], [10, 30]], np.float64).reshape(1, 2, 2, 1)
    allow = np.array([[False, True], [True, True]]).reshape(1, 2, 2)
    p = problem(q, k, v, allow=allow)
    assert adapter.kq_mask(p)[0, 0].tolist() == [[-np.inf, 0], [0, 0]]
    assert adapter.Adapter(path)(p)[0, :, :, 0].tolist() == [[3, 2], [30, 20]]


@pytest.mark.parametrize("path", PATHS)
def test_default_and_explicit_scale_and_unequal_head_widths(path):
    rng = np.random.default_rng(1)
    q, k, v = (rng.integers(-4, 5, shape) / 4 for shape in [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)])
    for scale in (0.0, 0.3):
        out = adapter.Adapter(path)(problem(q, k, v, scale=scale))
        expected = reference(q, k, v, scale=scale or None)
        np.testing.assert_allclose(out, expected, rtol=2e-3, atol=2e-3)  # the softmax path's weights go to f16


@pytest.mark.parametrize("path", PATHS)
def test_causal_alignments_key_lengths_and_window(path):
    # Tq 2, Tk 4, equal scores, v = key index: the output is the mean of the permitted keys' indices.
    q, k = np.zeros((2, 1, 2, 1)), np.zeros((2, 1, 4, 1))
    v = np.tile(np.arange(4.0).reshape(1, 1, 4, 1), (2, 1, 1, 1))
    def expect(expected, **features):  # the softmax path's weights (1/3) are rounded to f16
        out = adapter.Adapter(path)(problem(q, k, v, **features))[:, 0, :, 0]
        np.testing.assert_allclose(out, expected, atol=1e-3)
    expect([[1, 1.5]] * 2, causal="lower-right")  # keys 0..2, 0..3
    expect([[0, 0.5]] * 2, causal="upper-left")  # keys 0, 0..1
    expect([[0, 0], [1, 1]], kv_lens=[1, 3])
    expect([[0.5, 1], [0, 0.5]], kv_lens=[3, 2], causal="kv-end")  # the diagonal at each cache's end: j <= i + len - 2
    expect([[1.5, 2.5]] * 2, window=(1, 0))  # keys 1..2, 2..3
    expect([[2.5, 3]] * 2, window=(0, 1))  # keys 2..3, 3


@pytest.mark.parametrize("path", PATHS)
def test_keys_are_read_through_views_of_a_cache_whose_other_cells_are_stale(path):
    # llama.cpp's get_k and get_v: views of a kv_size-cell cache's used cells; here the cells after
    # them hold NaN, which an output may never see (the transposed V cache without flash attention).
    k_cache, v_cache = adapter.kv_cache(np.ones((2, 1, 3, 2)), np.ones((2, 1, 3, 1)), path)
    assert k_cache.shape == (2, 256, 1, 2) and (k_cache[:, :3] == 1).all() and np.isnan(k_cache[:, 3:]).all()
    assert v_cache.shape == ((2, 256, 1, 1) if path == "flash" else (2, 1, 1, 256))
    q, k = np.zeros((2, 1, 1, 2)), np.zeros((2, 1, 3, 2))
    v = np.arange(6.0).reshape(2, 1, 3, 1)  # equal scores: each output the mean of its batch's 3 values
    np.testing.assert_allclose(adapter.Adapter(path)(problem(q, k, v))[:, 0, 0, 0], [1, 4], atol=2e-3)


@pytest.mark.parametrize("path", PATHS)
def test_grouped_heads_read_kv_head_h_over_the_group(path):
    # H 4, H_kv 2: query heads 0 and 1 read KV head 0 (v 5), heads 2 and 3 KV head 1 (v 7).
    q, k = np.zeros((1, 4, 1, 1)), np.zeros((1, 2, 1, 1))
    v = np.array([5.0, 7.0]).reshape(1, 2, 1, 1)
    assert adapter.Adapter(path)(problem(q, k, v))[0, :, 0, 0].tolist() == [5, 5, 7, 7]


def test_bias_is_the_softmax_paths_float32_mask_and_not_given_to_flash_attention():
    # Two keys, scores 0, v (0, 1), bias (2048, 2049): the float32 mask holds both, weights 1:e.
    q, k, v = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 1)), np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    p = problem(q, k, v, bias=np.array([2048.0, 2049.0]).reshape(1, 1, 1, 2))
    sigmoid_1 = 1 / (1 + math.exp(-1))
    assert abs(adapter.Adapter("softmax")(p).item() - sigmoid_1) < 1e-3  # weights to f16 before @ V
    with pytest.raises(ValueError, match="bias is not claimed"):
        adapter.Adapter("flash")(p)
    # A bias with a mask: -inf where forbidden, the bias elsewhere.
    p = problem(q, k, v, bias=np.array([0.0, 1.0]).reshape(1, 1, 1, 2), kv_lens=[1])
    assert adapter.kq_mask(p).tolist() == [[[[0.0, -np.inf]]]]


def test_softcap_flash_caps_the_scaled_score_softmax_scales_the_capped_one():
    # One query 1, keys (0, 1), v (0, 1), scale 2, soft-cap 1.
    q, k, v = np.ones((1, 1, 1, 1)), np.array([0.0, 1.0]).reshape(1, 1, 2, 1), np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    p = problem(q, k, v, scale=2.0, softcap=1.0)
    sigmoid = lambda x: 1 / (1 + math.exp(-x))
    assert abs(adapter.Adapter("flash")(p).item() - sigmoid(math.tanh(2.0))) < 1e-3  # attncheck's order
    assert abs(adapter.Adapter("softmax")(p).item() - sigmoid(2 * math.tanh(1.0))) < 1e-3  # kq_scale after the cap


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("heads", [4, 3])
def test_alibi_slopes_follow_the_paper(path, heads):
    # ALiBi (Press et al.): head h of n (a power of 2) has slope 2^(-8 (h+1) / n) for max_bias 8; other n
    # take the closest power of 2's slopes, then every other slope of twice that many heads.
    def slopes(n):
        power = 2 ** math.floor(math.log2(n))
        first = [2 ** (-8 * (h + 1) / power) for h in range(power)]
        return first + [2 ** (-8 * (h + 1) / (2 * power)) for h in range(0, 2 * power, 2)][:n - power]

    Tk = 3
    q, k = np.zeros((1, heads, 1, 1)), np.zeros((1, 1, Tk, 1))
    v = np.arange(Tk, dtype=np.float64).reshape(1, 1, Tk, 1)
    distances = -np.arange(Tk - 1, -1, -1.0)  # llama.cpp's mask for ALiBi: -|i - j|, the query at the last key
    mask = np.broadcast_to(distances, (1, 1, 1, Tk))
    out = adapter.attention(q, k, v, mask, 1.0, path=path, max_bias=8.0)
    expected = [reference(q[:, :1], k, v, s * distances).item() for s in slopes(heads)]
    np.testing.assert_allclose(out[0, :, 0, 0], expected, rtol=2e-3)


def test_empty_row_is_zero_with_flash_attention_and_nan_without():
    q, k, v = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 1)), np.ones((1, 1, 2, 1))
    p = problem(q, k, v, allow=np.zeros((1, 1, 2), bool))
    assert adapter.Adapter("flash")(p).item() == 0
    assert np.isnan(adapter.Adapter("softmax")(p).item())


def test_nan_in_a_forbidden_key_or_value_reaches_the_output_without_flash_attention_or_from_64_rows():
    v = np.array([2.0, 3.0])
    for k, v in [(np.array([0.0, np.nan]), v), (np.zeros(2), np.array([2.0, np.nan]))]:
        run = lambda path, Tq: adapter.Adapter(path)(
            problem(np.ones((1, 1, Tq, 1)), k.reshape(1, 1, 2, 1), v.reshape(1, 1, 2, 1), kv_lens=[1]))[0, 0, :, 0]
        assert run("flash", 1).tolist() == [2]  # the one-chunk path skips a -inf key
        assert np.isnan(run("softmax", 1)).all()
        assert not np.any(run("flash", 64) == 2)  # the tiled path: NaN for a NaN value, 0 for a NaN key


@pytest.mark.parametrize("path", PATHS)
def test_the_cache_type_rounds_k_and_v_of_a_float32_problem(path):
    # One key: out = v. 1 + 2^-12 is float32's, float16 rounds it to 1.
    q, k, v = np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)), np.full((1, 1, 1, 1), 1 + 2 ** -12)
    p = problem(q, k, v)
    assert adapter.Adapter(path)(p).item() == 1
    assert adapter.Adapter(path, "f32")(p).item() == (1 if path == "flash" else 1 + 2 ** -12)  # flash casts to f16


@pytest.mark.parametrize("path,Tq", [("flash", 1), ("flash", 64), ("softmax", 1)])
def test_sinks_join_each_heads_denominator_with_no_value(path, Tq):
    # H 3, sinks (0, -inf, log 2), two keys of score 0 with values 3 and 6 (exact in f16): head 0 weighs
    # 1:1:1 (sink, keys), head 1 has no sink, head 2 weighs 2:1:1. Tq 64 is flash attention's tiled path.
    q, k = np.zeros((1, 3, Tq, 1)), np.zeros((1, 1, 2, 1))
    v = np.array([3.0, 6.0]).reshape(1, 1, 2, 1)
    out = adapter.Adapter(path)(problem(q, k, v, sinks=[0.0, -np.inf, math.log(2)]))[0, :, :, 0]
    np.testing.assert_allclose(out, np.tile([[3.0], [4.5], [2.25]], (1, Tq)), atol=1e-3)  # softmax: weights to f16


@pytest.mark.parametrize("path", PATHS)
def test_sinks_are_read_per_query_head_under_grouped_heads(path):
    # H 4, H_kv 2, one key of score 0: heads 0, 1 read value 2, heads 2, 3 value 4; sinks (0, -inf, 0, -inf)
    # halve heads 0 and 2.
    q, k = np.zeros((1, 4, 1, 1)), np.zeros((1, 2, 1, 1))
    v = np.array([2.0, 4.0]).reshape(1, 2, 1, 1)
    out = adapter.Adapter(path)(problem(q, k, v, sinks=[0.0, -np.inf, 0.0, -np.inf]))[0, :, 0, 0]
    assert out.tolist() == [1, 2, 2, 4]


@pytest.mark.parametrize("path", PATHS)
def test_the_sink_is_neither_scaled_nor_soft_capped(path):
    # One key, q.k = 1, value 1, scale 2, soft-cap 1: the key's score is tanh(2) with flash attention
    # (attncheck's order) and 2 tanh(1) without; a sink of that same score takes half the weight.
    q, k, v = np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1)), np.ones((1, 1, 1, 1))
    for softcap, score in [(0.0, 2.0), (1.0, math.tanh(2.0) if path == "flash" else 2 * math.tanh(1.0))]:
        p = problem(q, k, v, scale=2.0, softcap=softcap, sinks=[score])
        assert abs(adapter.Adapter(path)(p).item() - 0.5) < 1e-3


@pytest.mark.parametrize("path", PATHS)
def test_a_row_with_no_permitted_key_and_a_finite_sink_is_zero_and_with_a_sink_of_minus_inf_nan(path):
    # llama.cpp's convention (repro_sink_of_minus_inf_on_an_empty_row.py): with a finite sink the row's
    # max is the sink and the output 0; with -inf, exp(-inf - -inf) makes it NaN, on both paths (flash
    # attention gives 0 for an empty row without a sink).
    q, k, v = np.zeros((1, 2, 1, 1)), np.zeros((1, 1, 2, 1)), np.ones((1, 1, 2, 1))
    p = problem(q, k, v, allow=np.zeros((1, 1, 2), bool), sinks=[0.0, -np.inf])
    out = adapter.Adapter(path)(p)[0, :, 0, 0]
    assert out[0] == 0 and np.isnan(out[1])
