"""The ONNX Runtime adapter's translation (attncheck.adapters.onnxruntime: --op attention, gqa,
mha), on cases small enough to compute by hand, and the conventions of ONNX Runtime's operators (1.30
and later) that README.md states.

Run: $ATTNCHECK_VENV_PYTHON -m pytest -q -p no:cacheprovider python/tests/adapters/test_onnxruntime.py
(ci/lib.sh's ensure_venv makes that python; pytest comes from Debian's python3-pytest.)
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
from hand_cases import problem, refusal, reload_refuses  # noqa: E402
from attncheck.adapters import onnxruntime as ort_attention  # noqa: E402


GQA_ATTRIBUTES = ort_attention.contrib_schema("GroupQueryAttention")[0]


def opset(n):
    """The ONNX Attention operator of opset n: not where onnxruntime cannot load it or onnx cannot make it
    (setup() refuses it there)."""
    most = min(ort_attention.loads()[0], ort_attention.onnx.defs.onnx_opset_version())
    return pytest.mark.skipif(most < n, reason=f"onnxruntime {ort_attention.ort.__version__} and onnx "
                                               f"{ort_attention.onnx.__version__}: opset {most} at most")


def since(release, why):
    """A convention of onnxruntime `release` and later; an older release differs (why), a finding there."""
    older = ort_attention.version(ort_attention.ort.__version__) < ort_attention.version(release)
    return pytest.mark.skipif(older, reason=f"onnxruntime {ort_attention.ort.__version__}: {why}")


MHA_ATTRIBUTES = ort_attention.contrib_schema("MultiHeadAttention")[0]
gqa_kernel = pytest.mark.skipif(not ort_attention.contrib_schema("GroupQueryAttention")[2],
                                reason="no CPU kernel of GroupQueryAttention (setup() refuses --op gqa)")
mha_unidirectional = pytest.mark.skipif("unidirectional" not in MHA_ATTRIBUTES,
                                        reason="MultiHeadAttention has no unidirectional (causal is not claimed)")

# GroupQueryAttention before its `causal` attribute (1.30): always causal, so attncheck sends it causal calls alone.
gqa_bidirectional = pytest.mark.skipif("causal" not in GQA_ATTRIBUTES, reason="GroupQueryAttention has no causal attribute")


@opset(23)
def test_explicit_mask_and_scale_on_a_1x1x2x2_case():
    q = np.array([[1, 0], [0, 1]], np.float32).reshape(1, 1, 2, 2)
    k = np.array([[1, 0], [0, 2]], np.float32).reshape(1, 1, 2, 2)
    v = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    allow = np.array([[True, False], [True, True]]).reshape(1, 2, 2)  # query 0 sees key 0 alone
    p = problem(q, k, v, scale=0.5, allow=allow)
    feeds, attributes = ort_attention.translate(p)
    assert feeds["attn_mask"].shape == (1, 1, 2, 2) and feeds["attn_mask"].dtype == bool
    assert dict(attributes) == {"scale": 0.5}
    out = ort_attention.forward(p)
    # query 1: scores 0.5 * (0, 2) = (0, 1), weights (1, e) / (1 + e)
    e = math.e
    expected = np.array([[1, 2], [(1 + 3 * e) / (1 + e), (2 + 4 * e) / (1 + e)]], np.float32).reshape(1, 1, 2, 2)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


@opset(23)
def test_grouped_kv_heads_are_contiguous_groups():
    # H 4, H_kv 2, one key each: query head h gets the value of KV head h // 2, so 10 10 20 20
    # (h % 2 would give 10 20 10 20).
    q = np.zeros((1, 4, 1, 1), np.float32)
    k = np.zeros((1, 2, 1, 1), np.float32)
    v = np.array([10, 20], np.float32).reshape(1, 2, 1, 1)
    p = problem(q, k, v)
    assert dict(ort_attention.translate(p)[1]) == {"q_num_heads": 4, "kv_num_heads": 2}
    assert ort_attention.forward(p).ravel().tolist() == [10, 10, 20, 20]


@opset(23)
def test_key_lengths_and_lower_right_causal_become_the_bool_mask():
    # B 2, Tq 2, Tk 3, lower-right: query i sees keys j <= i + 1; key lengths 3 and 1.
    q = np.zeros((2, 1, 2, 1), np.float32)
    k = np.zeros((2, 1, 3, 1), np.float32)
    v = np.tile(np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, causal="lower-right", kv_lens=[3, 1])
    feeds, attributes = ort_attention.translate(p)
    assert "is_causal" not in dict(attributes) and feeds["attn_mask"].shape == (2, 1, 2, 3)
    assert feeds["attn_mask"][:, 0].tolist() == [[[True, True, False], [True, True, True]],
                                                 [[True, False, False], [True, False, False]]]
    # equal scores: the mean of the values each query sees
    assert ort_attention.forward(p)[:, 0, :, 0].tolist() == [[4.5, 6.0], [3.0, 3.0]]


def test_upper_left_causal_is_the_operators_own_and_so_is_lower_right_when_square():
    q, k, v = (np.zeros((1, 1, 2, 1), np.float32) for _ in range(3))
    for causal in ("upper-left", "lower-right"):
        feeds, attributes = ort_attention.translate(problem(q, k, v, causal=causal))
        assert dict(attributes) == {"is_causal": 1} and list(feeds) == ["Q", "K", "V"]


@opset(23)
def test_bias_with_an_allow_mask_is_one_float_mask():
    q = np.zeros((1, 1, 1, 1), np.float32)
    k = np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([1, 2, 4], np.float32).reshape(1, 1, 3, 1)
    bias = np.array([0, math.log(3), 5], np.float32).reshape(1, 1, 1, 3)
    p = problem(q, k, v, allow=np.array([True, True, False]).reshape(1, 1, 3), bias=bias)
    feeds, _ = ort_attention.translate(p)
    assert feeds["attn_mask"].dtype == np.float32 and feeds["attn_mask"].shape == (1, 1, 1, 3)
    assert feeds["attn_mask"].ravel().tolist() == [0, np.float32(math.log(3)), -np.inf]
    # weights (1, 3) / 4 over the permitted keys: (1 + 3 * 2) / 4
    assert ort_attention.forward(p).item() == pytest.approx(7 / 4, rel=1e-6)


@opset(23)
def test_float16_runs_in_float16_and_sessions_are_cached():
    q = np.array([0.5, -1], np.float16).reshape(1, 1, 1, 2)
    k = np.array([1, 1, -1, 0.5], np.float16).reshape(1, 1, 2, 2)
    v = np.array([2, -2], np.float16).reshape(1, 1, 2, 1)
    p = problem(q, k, v, dtype="f16", softcap=2.0)
    before = ort_attention.session.cache_info()
    out = ort_attention.forward(p)
    assert out.dtype == np.float16
    ort_attention.forward(p)
    after = ort_attention.session.cache_info()
    assert after.hits == before.hits + 1 and after.misses == before.misses + 1
    s = 2 * np.tanh(np.array([-0.5, -1.0]) / math.sqrt(2) / 2)
    w = np.exp(s) / np.exp(s).sum()
    assert out.item() == pytest.approx(w @ [2, -2], abs=2e-3)


def test_claims_what_the_cpu_kernels_take():
    assert ort_attention.CAPABILITIES == {
        "attention": {"f32", "f16", "allow", "causal", "kv_lens", "kv_cache", "gqa", "softcap", "bias"},
        "gqa": {"f32", "f16", "causal", "kv_lens", "kv_cache", "gqa", "window", "softcap", "bias", "sinks"},
        "mha": {"f32", "f16", "allow", "causal", "kv_lens", "bias"}}


# ONNX Runtime's conventions (1.30 and later), as README.md states them (a new version that changes one fails here).

@opset(23)
@since("1.29", "the mean of V (1.26.0), onnxruntime PR 28958")
def test_ort_convention_a_row_with_no_permitted_key_gives_zero():
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([1, 3], np.float32).reshape(1, 1, 2, 1)
    assert ort_attention.forward(problem(q, k, v, allow=np.zeros((1, 1, 2), bool))).item() == 0  # not 2, the mean


@opset(23)
@since("1.29", "lower-right for Tq < Tk (1.26.0), onnxruntime PR 29050")
def test_ort_convention_causal_is_upper_left_when_tq_lt_tk():
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([0, 1, 2], np.float32).reshape(1, 1, 3, 1)
    assert ort_attention.forward(problem(q, k, v, causal="upper-left")).item() == 0  # key 0 alone


@opset(23)
@since("1.29", "the soft-cap after the mask (1.26.0), onnxruntime PR 28379")
def test_ort_convention_the_soft_cap_comes_before_the_mask():
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([0, 1], np.float32).reshape(1, 1, 2, 1)
    bias = np.array([0, 1], np.float32).reshape(1, 1, 1, 2)
    out = ort_attention.forward(problem(q, k, v, softcap=1.0, bias=bias)).item()
    assert out == pytest.approx(math.e / (1 + math.e), rel=1e-6)  # tanh(bias) would give e^0.76 / (1 + e^0.76)


@opset(23)
def test_ort_refuses_a_negative_scale():
    q, k, v = (np.zeros((1, 1, 1, 1), np.float32) for _ in range(3))
    with pytest.raises(Exception, match="scale must be greater than 0"):
        ort_attention.forward(problem(q, k, v, scale=-0.25))


# --opset 24: key lengths through the operator's own nonpad_kv_seqlen

@opset(24)
def test_opset_24_passes_key_lengths_as_nonpad_kv_seqlen_not_a_mask():
    q = np.zeros((2, 1, 2, 1), np.float32)
    k = np.zeros((2, 1, 3, 1), np.float32)
    v = np.tile(np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, kv_lens=[3, 1])
    feeds, _ = ort_attention.translate(p, opset=24)
    assert list(feeds) == ["Q", "K", "V", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen"]
    assert feeds["attn_mask"] is None and feeds["nonpad_kv_seqlen"].tolist() == [3, 1]
    assert feeds["nonpad_kv_seqlen"].dtype == np.int64
    assert ort_attention.forward(p, opset=24)[:, 0, :, 0].tolist() == [[6.0, 6.0], [3.0, 3.0]]
    # with an allow mask the mask holds the allow mask alone, the lengths stay an input of their own
    allow = np.array([[[False, True, True], [True, True, True]]] * 2)
    feeds, _ = ort_attention.translate(problem(q, k, v, kv_lens=[3, 1], allow=allow), opset=24)
    assert feeds["attn_mask"][:, 0].tolist() == allow.tolist()


def test_opset_24_is_causal_only_where_its_offset_aware_diagonal_is_the_problems():
    # With nonpad_kv_seqlen, is_causal's query i sees key j <= i + nonpad_kv_seqlen[b] - Tq (onnx
    # 1.23's opset-24 text): an upper-left causal mask with lengths 3 and 1 and Tq 2 is not that,
    # so it goes into the bool mask; with every length Tq it is, and is_causal is used.
    q = np.zeros((2, 1, 2, 1), np.float32)
    k = np.zeros((2, 1, 3, 1), np.float32)
    v = np.tile(np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, causal="upper-left", kv_lens=[3, 1])
    feeds, attributes = ort_attention.translate(p, opset=24)
    assert "is_causal" not in dict(attributes) and feeds["nonpad_kv_seqlen"].tolist() == [3, 1]
    assert feeds["attn_mask"][:, 0].tolist() == [[[True, False, False], [True, True, False]]] * 2
    # equal scores: the mean of the values each query sees (key j <= i and j < length)
    assert ort_attention.forward(p, opset=24)[:, 0, :, 0].tolist() == [[3.0, 4.5], [3.0, 3.0]]
    p = problem(q, k, v, causal="upper-left", kv_lens=[2, 2])
    feeds, attributes = ort_attention.translate(p, opset=24)
    assert dict(attributes) == {"is_causal": 1} and feeds["attn_mask"] is None
    assert ort_attention.forward(p, opset=24)[:, 0, :, 0].tolist() == [[3.0, 4.5], [3.0, 4.5]]
    # KV-end causal (a decode step at each cache's end: j <= i + length - Tq) is is_causal itself under
    # opset 24, and a bool mask under opset 23; either way the means of the values seen, by hand.
    p = problem(q, k, v, causal="kv-end", kv_lens=[3, 2])
    feeds, attributes = ort_attention.translate(p, opset=24)
    assert dict(attributes) == {"is_causal": 1} and feeds["attn_mask"] is None
    feeds, attributes = ort_attention.translate(p, opset=23)
    assert "is_causal" not in dict(attributes)
    assert feeds["attn_mask"][:, 0].tolist() == [[[True, True, False], [True, True, True]], [[True, False, False], [True, True, False]]]
    for opset in (23, 24):
        assert ort_attention.forward(p, opset=opset)[:, 0, :, 0].tolist() == [[4.5, 6.0], [3.0, 4.5]]


# --op gqa: GroupQueryAttention

def gqa_problem(Tq, Tk, dk=1, dv=1, H=1, H_kv=1, B=1, **options):
    """q = k = 0 (equal scores), v[.., j, 0] = j + 1: each output is the mean of (j + 1) over the keys seen."""
    q = np.zeros((B, H, Tq, dk), np.float32)
    k = np.zeros((B, H_kv, Tk, dk), np.float32)
    v = np.zeros((B, H_kv, Tk, dv), np.float32)
    v[..., 0] = np.arange(1, Tk + 1)
    return problem(q, k, v, **options)


def test_gqa_splits_the_keys_into_a_past_and_the_new_ones_and_packs_the_heads():
    q = np.arange(1 * 2 * 2 * 3, dtype=np.float32).reshape(1, 2, 2, 3)  # B 1, H 2, Tq 2, dk 3
    k = np.arange(1 * 1 * 5 * 3, dtype=np.float32).reshape(1, 1, 5, 3) + 100
    v = np.arange(1 * 1 * 5 * 2, dtype=np.float32).reshape(1, 1, 5, 2) + 200
    feeds, attributes, d = ort_attention.translate_gqa(problem(q, k, v, causal="lower-right"))
    assert d == 8 and dict(attributes) == {"num_heads": 2, "kv_num_heads": 1, "scale": pytest.approx(1 / math.sqrt(3))}
    assert feeds["query"].shape == (1, 2, 16)  # [B,Tq,H*d], head h in columns 8h .. 8h + 7
    assert feeds["query"][0, 1, 8:11].tolist() == q[0, 1, 1].tolist() and feeds["query"][0, 1, 11:16].tolist() == [0] * 5
    assert feeds["past_key"].shape == (1, 1, 3, 8) and feeds["past_key"][0, 0, :, :3].tolist() == k[0, 0, :3].tolist()
    assert feeds["key"].shape == (1, 2, 8) and feeds["key"][0, :, :3].tolist() == k[0, 0, 3:].tolist()
    assert feeds["value"][0, :, :2].tolist() == v[0, 0, 3:].tolist() and feeds["past_value"][0, 0, :, 2:].max() == 0
    assert feeds["seqlens_k"].tolist() == [4] and feeds["total_sequence_length"] == 5


@gqa_bidirectional
def test_gqa_causal_is_lower_right_through_the_cache():
    # Tq 2 over Tk 5: query 0 sees keys 0..3 (mean of 1..4 = 2.5), query 1 all five (3)
    p = gqa_problem(2, 5, causal="lower-right")
    assert ort_attention.forward_gqa(p)[0, 0, :, 0].tolist() == [2.5, 3.0]
    # causal none is the operator's causal = 0: both see every key
    p = gqa_problem(2, 5)
    assert dict(ort_attention.translate_gqa(p)[1])["causal"] == 0
    assert ort_attention.forward_gqa(p)[0, 0, :, 0].tolist() == [3.0, 3.0]
    # square: upper-left is the same mask, sent as causal = 1
    assert ort_attention.forward_gqa(gqa_problem(3, 3, causal="upper-left"))[0, 0, :, 0].tolist() == [1.0, 1.5, 2.0]


@gqa_bidirectional
def test_gqa_refuses_what_it_cannot_express():
    # No restriction: every causal mode is drawn; what GroupQueryAttention cannot be given is NotExpressible, counted.
    assert ort_attention.RESTRICTIONS["gqa"] == [] and ort_attention.setup(["--op", "gqa"])["restrictions"] == []
    with pytest.raises(ort_attention.NotExpressible, match=r"Tq > Tk: .*\(Tq 3, Tk 2\)"):
        ort_attention.translate_gqa(gqa_problem(3, 2))
    with pytest.raises(ort_attention.NotExpressible, match="right side at 0"):
        ort_attention.translate_gqa(gqa_problem(3, 3, window=(1, 1)))
    # a sequence shorter than its new keys (KV-end with kv_lens[1] 1 < Tq 2; no causal mask with kv_lens 1 < Tq 2)
    with pytest.raises(ort_attention.NotExpressible, match="a sequence shorter than Tq"):
        ort_attention.translate_gqa(gqa_problem(2, 4, B=2, causal="kv-end", kv_lens=[4, 1]))
    with pytest.raises(ort_attention.NotExpressible, match="a sequence shorter than Tq"):
        ort_attention.translate_gqa(gqa_problem(2, 4, kv_lens=[1]))
    # lower-right with a key length under Tk and Tq 2: the diagonal at Tk - Tq, not at the sequence's end
    with pytest.raises(ort_attention.NotExpressible, match="causal diagonal at each sequence's end"):
        ort_attention.translate_gqa(gqa_problem(2, 5, causal="lower-right", kv_lens=[4]))
    # B 2, Tq 2 after a past: the operator takes it for one batch alone
    with pytest.raises(ort_attention.NotExpressible, match="B > 1 with Tq > 1 and a past"):
        ort_attention.translate_gqa(gqa_problem(2, 5, B=2, causal="kv-end", kv_lens=[5, 4]))


@gqa_bidirectional
def test_gqa_upper_left_is_a_sequence_of_tq_keys_the_operators_first_prompt():
    # upper-left, Tq 2 over Tk 4: keys 2, 3 are no query's, so each sequence is its 2 new keys, total length 2
    p = gqa_problem(2, 4, B=2, causal="upper-left", bias=np.zeros((2, 1, 2, 4), np.float32))
    feeds, attributes, _ = ort_attention.translate_gqa(p)
    assert feeds["seqlens_k"].tolist() == [1, 1] and feeds["total_sequence_length"] == 2 and feeds["past_key"] is None
    assert feeds["attention_bias"].shape == (2, 1, 2, 2) and "causal" not in dict(attributes)
    assert ort_attention.forward_gqa(p)[:, 0, :, 0].tolist() == [[1.0, 1.5], [1.0, 1.5]]


@since("1.26", "local_window_size w saw w + 1 keys (1.23.2), before onnxruntime PR 25927")
def test_gqa_window_left_is_local_window_size_minus_one():
    # window (1, 0), lower-right, Tq 2 over Tk 5: query 0 sees keys 2, 3 (mean of 3, 4), query 1 keys 3, 4
    p = gqa_problem(2, 5, causal="lower-right", window=(1, 0))
    assert dict(ort_attention.translate_gqa(p)[1])["local_window_size"] == 2
    assert ort_attention.forward_gqa(p)[0, 0, :, 0].tolist() == [3.5, 4.5]
    # window (0, 0) without causal: the diagonal alone, as causal = 1 with local_window_size 1
    p = gqa_problem(3, 3, window=(0, 0))
    attributes = dict(ort_attention.translate_gqa(p)[1])
    assert "causal" not in attributes and attributes["local_window_size"] == 1
    assert ort_attention.forward_gqa(p)[0, 0, :, 0].tolist() == [1.0, 2.0, 3.0]
    # window (-1, 0): lower-right causal with no left bound
    p = gqa_problem(2, 3, window=(-1, 0))
    assert "local_window_size" not in dict(ort_attention.translate_gqa(p)[1])
    assert ort_attention.forward_gqa(p)[0, 0, :, 0].tolist() == [1.5, 2.0]


@gqa_bidirectional
def test_gqa_grouped_heads_are_contiguous_and_the_output_is_unpacked():
    # H 4 over H_kv 2, one key: query head h gets KV head h // 2's value, 10 10 20 20; dv 3 columns back
    q = np.zeros((1, 4, 1, 1), np.float32)
    k = np.zeros((1, 2, 1, 1), np.float32)
    v = np.array([[10, 1, 2], [20, 3, 4]], np.float32).reshape(1, 2, 1, 3)
    out = ort_attention.forward_gqa(problem(q, k, v))
    assert out.shape == (1, 4, 1, 3)
    assert out[0, :, 0].tolist() == [[10, 1, 2], [10, 1, 2], [20, 3, 4], [20, 3, 4]]


@gqa_bidirectional
def test_gqa_scale_softcap_and_bias():
    # one query over keys 0, 1 with q.k = (0, 2), dk 1 padded to 8: scale 0.5 gives scores (0, 1)
    q = np.array([2], np.float32).reshape(1, 1, 1, 1)
    k = np.array([0, 1], np.float32).reshape(1, 1, 2, 1)
    v = np.array([0, 1], np.float32).reshape(1, 1, 2, 1)
    e = math.e
    assert ort_attention.forward_gqa(problem(q, k, v, scale=0.5)).item() == pytest.approx(e / (1 + e), rel=1e-6)
    # default scale: 1/sqrt(dk) = 1 (dk 1), not 1/sqrt(8) of the padded head: scores (0, 2)
    assert ort_attention.forward_gqa(problem(q, k, v)).item() == pytest.approx(e ** 2 / (1 + e ** 2), rel=1e-6)
    # soft-cap 1 then the bias (0, -inf): key 1 forbidden by the bias
    bias = np.array([0, -np.inf], np.float32).reshape(1, 1, 1, 2)
    assert ort_attention.forward_gqa(problem(q, k, v, bias=bias, softcap=1.0)).item() == 0
    # the soft-cap comes before the bias: cap 1 of scores (0, 0) plus a bias (0, 1) gives weights (1, e) / (1 + e)
    q0 = np.zeros((1, 1, 1, 1), np.float32)
    bias = np.array([0, 1], np.float32).reshape(1, 1, 1, 2)
    assert ort_attention.forward_gqa(problem(q0, k, v, bias=bias, softcap=1.0)).item() == pytest.approx(e / (1 + e), rel=1e-6)


def kv_end_reference(q, k, v, kv_lens, causal=True):
    """NumPy, float64: query i of batch b sees key j < kv_lens[b] with j <= i + kv_lens[b] - Tq (KV-end) when
    causal; query head h reads KV head h // (H / H_kv); the default scale 1/sqrt(dk)."""
    B, H, Tq, dk = q.shape
    group = H // k.shape[1]
    out = np.zeros((B, H, Tq, v.shape[-1]))
    for b in range(B):
        for h in range(H):
            for i in range(Tq):
                keys = np.arange(kv_lens[b] - Tq + i + 1 if causal else kv_lens[b])
                s = k[b, h // group, keys].astype(np.float64) @ q[b, h, i].astype(np.float64) / math.sqrt(dk)
                w = np.exp(s - s.max())
                out[b, h, i] = w / w.sum() @ v[b, h // group, keys].astype(np.float64)
    return out


@gqa_bidirectional
def test_gqa_kv_end_decode_with_a_key_length_per_batch():
    # B 2, H 4 over H_kv 2, one new query over a cache of Tk 6 keys: lengths 6 and 3. Batch b's sequence is keys
    # 0 .. kv_lens[b] - 1, its new key the last of them: seqlens_k = kv_lens - 1, the past buffer keys 0 .. 4.
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 4, 1, 3)).astype(np.float32)
    k = rng.standard_normal((2, 2, 6, 3)).astype(np.float32)
    v = rng.standard_normal((2, 2, 6, 5)).astype(np.float32)
    k[1, :, 3:], v[1, :, 3:] = np.nan, np.nan  # batch 1's keys past its length: no sequence's
    kv_lens = [6, 3]
    p = problem(q, k, v, causal="kv-end", kv_lens=kv_lens)
    feeds, attributes, d = ort_attention.translate_gqa(p)
    assert feeds["seqlens_k"].tolist() == [5, 2] and feeds["seqlens_k"].dtype == np.int32
    assert feeds["total_sequence_length"] == 6 and feeds["past_key"].shape == (2, 2, 5, 8)
    assert feeds["key"][1, 0, :3].tolist() == k[1, 0, 2].tolist()  # batch 1's new key is its key 2
    assert feeds["key"][0, 0, :3].tolist() == k[0, 0, 5].tolist() and "causal" not in dict(attributes)
    out = ort_attention.forward_gqa(p)
    np.testing.assert_allclose(out, kv_end_reference(q, k, v, kv_lens), rtol=1e-5, atol=1e-6)
    # the same lengths without a causal mask (causal = 0): each query sees its batch's kv_lens[b] keys
    out = ort_attention.forward_gqa(problem(q, k, v, kv_lens=kv_lens))
    np.testing.assert_allclose(out, kv_end_reference(q, k, v, kv_lens, causal=False), rtol=1e-5, atol=1e-6)
    # a decode query under lower-right with key lengths is the same mask (Tq 1: j <= Tk - 1 and j < kv_lens[b])
    out = ort_attention.forward_gqa(problem(q, k, v, causal="lower-right", kv_lens=kv_lens))
    np.testing.assert_allclose(out, kv_end_reference(q, k, v, kv_lens), rtol=1e-5, atol=1e-6)


@gqa_bidirectional
def test_gqa_kv_end_with_several_new_queries_in_one_batch():
    # B 1, Tq 3 over Tk 7, kv_lens 5: queries see keys 0..2, 0..3, 0..4 (the diagonal at the sequence's end)
    rng = np.random.default_rng(8)
    q = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    k = rng.standard_normal((1, 1, 7, 4)).astype(np.float32)
    v = rng.standard_normal((1, 1, 7, 2)).astype(np.float32)
    p = problem(q, k, v, causal="kv-end", kv_lens=[5])
    feeds, _, _ = ort_attention.translate_gqa(p)
    assert feeds["seqlens_k"].tolist() == [4] and feeds["key"].shape == (1, 3, 8)
    np.testing.assert_allclose(ort_attention.forward_gqa(p), kv_end_reference(q, k, v, [5]), rtol=1e-5, atol=1e-6)


@gqa_bidirectional
def test_gqa_float16():
    q = np.array([0.5, -1], np.float16).reshape(1, 1, 1, 2)
    k = np.array([1, 1, -1, 0.5], np.float16).reshape(1, 1, 2, 2)
    v = np.array([2, -2], np.float16).reshape(1, 1, 2, 1)
    out = ort_attention.forward_gqa(problem(q, k, v, dtype="f16"))
    assert out.dtype == np.float16
    s = np.array([-0.5, -1.0]) / math.sqrt(2)
    w = np.exp(s) / np.exp(s).sum()
    assert out.item() == pytest.approx(w @ [2, -2], abs=2e-3)


gqa_sinks = pytest.mark.skipif("head_sink" not in ort_attention.contrib_schema("GroupQueryAttention")[1],
                               reason="GroupQueryAttention has no head_sink input (sinks are not claimed)")


@gqa_sinks
def test_gqa_sinks_are_head_sink_one_per_query_head():
    # H 3 over H_kv 1, one query over two keys of score 0 with values 3 and 6 (lower-right: it sees both).
    # Sinks 0, -inf, log 2 add 1, 0, 2 to the denominator 1 + 1: 9/3 = 3, 9/2 = 4.5, 9/4 = 2.25.
    q = np.zeros((1, 3, 1, 1), np.float32)
    k = np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([3, 6], np.float32).reshape(1, 1, 2, 1)
    p = problem(q, k, v, causal="lower-right", sinks=[0, -np.inf, math.log(2)])
    feeds, attributes, _ = ort_attention.translate_gqa(p)
    assert list(feeds)[-1] == "head_sink" and list(feeds).index("head_sink") == 11  # the schema's input 11
    assert feeds["head_sink"].dtype == np.float32 and feeds["head_sink"].tolist() == [0, -np.inf, np.float32(math.log(2))]
    assert "smooth_softmax" not in dict(attributes)
    assert ort_attention.forward_gqa(p)[0, :, 0, 0].tolist() == pytest.approx([3, 4.5, 2.25], rel=1e-6)
    # without sinks no head_sink is given (the operator's own softmax)
    assert "head_sink" not in ort_attention.translate_gqa(problem(q, k, v, causal="lower-right"))[0]
    # H 4 over H_kv 2: the sink is the query head's, not the KV head's (values 3 6 for KV head 0, 6 12 for 1)
    q, k = np.zeros((1, 4, 1, 1), np.float32), np.zeros((1, 2, 2, 1), np.float32)
    v = np.array([3, 6, 6, 12], np.float32).reshape(1, 2, 2, 1)
    out = ort_attention.forward_gqa(problem(q, k, v, causal="lower-right", sinks=[-np.inf, 0, math.log(2), -np.inf]))
    assert out[0, :, 0, 0].tolist() == pytest.approx([4.5, 3, 4.5, 9], rel=1e-6)


@gqa_sinks
def test_gqa_smooth_softmax_is_a_sink_of_zero_for_every_head():
    # The adapter never sends smooth_softmax, saying it is head_sink of zeros (its docstring): the
    # operator shows it so. Two heads, one query over two keys of score 0 with values 3 and 6:
    # smooth_softmax adds exp(0 - 0) = 1 to each denominator, (3 + 6) / 3 = 3, as sinks (0, 0) do.
    q = np.zeros((1, 2, 1, 1), np.float32)
    k = np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([3, 6], np.float32).reshape(1, 1, 2, 1)
    p = problem(q, k, v, causal="lower-right")
    feeds, attributes, d = ort_attention.translate_gqa(p)
    smooth = tuple(sorted({**dict(attributes), "smooth_softmax": 1}.items()))
    out = ort_attention._run("GroupQueryAttention", "com.microsoft", ort_attention.loads()[0], p, feeds,
                             ("output", "present_key", "present_value"), (1, 1, 2 * d), smooth)
    assert out.reshape(2, d)[:, 0].tolist() == pytest.approx([3, 3], rel=1e-6)
    assert ort_attention.forward_gqa(problem(q, k, v, causal="lower-right", sinks=[0, 0]))[0, :, 0, 0].tolist() == \
        pytest.approx([3, 3], rel=1e-6)
    assert ort_attention.forward_gqa(p)[0, :, 0, 0].tolist() == pytest.approx([4.5, 4.5], rel=1e-6)  # without either


@gqa_sinks
def test_gqa_sink_is_not_scaled_soft_capped_or_masked():
    # one query over keys 0, 1 with q.k = (0, 2), values (0, 1); scale 0.5 gives scores (0, 1); sink 1
    q = np.array([2], np.float32).reshape(1, 1, 1, 1)
    k = np.array([0, 1], np.float32).reshape(1, 1, 2, 1)
    v = np.array([0, 1], np.float32).reshape(1, 1, 2, 1)
    e = math.e
    p = problem(q, k, v, causal="lower-right", scale=0.5, sinks=[1])
    assert ort_attention.forward_gqa(p).item() == pytest.approx(e / (1 + e + e), rel=1e-6)  # not e ** 0.5
    # soft-cap 1: the scores become (0, tanh 1), the sink stays 1
    t = math.exp(math.tanh(1))
    p = problem(q, k, v, causal="lower-right", scale=0.5, softcap=1.0, sinks=[1])
    assert ort_attention.forward_gqa(p).item() == pytest.approx(t / (1 + t + e), rel=1e-6)
    # a row whose every key the bias forbids: the sink alone, output 0
    bias = np.full((1, 1, 1, 2), -np.inf, np.float32)
    assert ort_attention.forward_gqa(problem(q, k, v, causal="lower-right", bias=bias, sinks=[0])).item() == 0


@gqa_sinks
def test_gqa_sinks_in_float16_are_a_float16_head_sink():
    q = np.zeros((1, 3, 1, 1), np.float16)
    k = np.zeros((1, 1, 2, 1), np.float16)
    v = np.array([3, 6], np.float16).reshape(1, 1, 2, 1)
    p = problem(q, k, v, causal="lower-right", dtype="f16", sinks=[0, -np.inf, math.log(2)])
    feeds, _, _ = ort_attention.translate_gqa(p)
    assert feeds["head_sink"].dtype == np.float16  # the operator's T: the query's type
    out = ort_attention.forward_gqa(p)
    assert out.dtype == np.float16 and out[0, :, 0, 0].tolist() == pytest.approx([3, 4.5, 2.25], abs=2e-3)


# --op mha: MultiHeadAttention

def test_mha_packs_the_heads_and_keeps_dv():
    # H 2, one key: head h's value; dv 2 differs from dk 1
    q = np.zeros((1, 2, 1, 1), np.float32)
    k = np.zeros((1, 2, 1, 1), np.float32)
    v = np.array([[10, 11], [20, 21]], np.float32).reshape(1, 2, 1, 2)
    p = problem(q, k, v)
    feeds, attributes = ort_attention.translate_mha(p)
    assert feeds["query"].shape == (1, 1, 2) and feeds["value"][0, 0].tolist() == [10, 11, 20, 21]
    assert dict(attributes) == {"num_heads": 2}
    assert ort_attention.forward_mha(p)[0, :, 0].tolist() == [[10, 11], [20, 21]]


@since("1.22", "key lengths [B] read otherwise (1.20.1: out [[6, 4.5], [6, 6]] for [[6, 6], [3, 3]])")
def test_mha_key_lengths_and_the_allow_mask_are_key_padding_masks():
    q = np.zeros((2, 1, 2, 1), np.float32)
    k = np.zeros((2, 1, 3, 1), np.float32)
    v = np.tile(np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, kv_lens=[3, 1])
    feeds, _ = ort_attention.translate_mha(p)
    assert feeds["key_padding_mask"].tolist() == [3, 1] and feeds["key_padding_mask"].dtype == np.int32
    assert ort_attention.forward_mha(p)[:, 0, :, 0].tolist() == [[6.0, 6.0], [3.0, 3.0]]
    # an allow mask (and key lengths with it) is the [B,Tq,Tk] form, 1 = attend
    allow = np.array([[[True, False, True], [False, True, True]]] * 2)
    p = problem(q, k, v, allow=allow, kv_lens=[3, 2])
    feeds, _ = ort_attention.translate_mha(p)
    assert feeds["key_padding_mask"].tolist() == [[[1, 0, 1], [0, 1, 1]], [[1, 0, 0], [0, 1, 0]]]
    assert ort_attention.forward_mha(p)[:, 0, :, 0].tolist() == [[6.0, 7.5], [3.0, 6.0]]


@mha_unidirectional
def test_mha_causal_is_unidirectional_and_lower_right_a_mask():
    q, k = np.zeros((1, 1, 3, 1), np.float32), np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1)
    p = problem(q, k, v, causal="upper-left")
    assert dict(ort_attention.translate_mha(p)[1])["unidirectional"] == 1
    assert ort_attention.forward_mha(p)[0, 0, :, 0].tolist() == [3.0, 4.5, 6.0]
    q = np.zeros((1, 1, 2, 1), np.float32)
    p = problem(q, k, v, causal="lower-right")
    feeds, attributes = ort_attention.translate_mha(p)
    assert "unidirectional" not in dict(attributes) and feeds["key_padding_mask"].tolist() == [[[1, 1, 0], [1, 1, 1]]]
    assert ort_attention.forward_mha(p)[0, 0, :, 0].tolist() == [4.5, 6.0]


def test_mha_bias_is_attention_bias_and_the_scale_an_attribute():
    q = np.array([2], np.float32).reshape(1, 1, 1, 1)
    k = np.array([0, 1], np.float32).reshape(1, 1, 2, 1)
    v = np.array([0, 1], np.float32).reshape(1, 1, 2, 1)
    bias = np.array([1, 0], np.float32).reshape(1, 1, 1, 2)
    p = problem(q, k, v, scale=0.5, bias=bias)  # scores (0, 1) + (1, 0): equal
    feeds, attributes = ort_attention.translate_mha(p)
    assert feeds["attention_bias"].shape == (1, 1, 1, 2) and dict(attributes)["scale"] == 0.5
    assert ort_attention.forward_mha(p).item() == pytest.approx(0.5, rel=1e-6)


# The contrib operators' conventions in ONNX Runtime 1.30, as the adapter's docstring states them.

@since("1.22", "an empty row is not the mean (1.20.1: 3 for 2)")
def test_mha_convention_a_masked_key_gets_minus_10000_so_an_empty_row_gives_the_mean():
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([1, 3], np.float32).reshape(1, 1, 2, 1)
    assert ort_attention.forward_mha(problem(q, k, v, allow=np.zeros((1, 1, 2), bool))).item() == 2  # the mean, not 0


@since("1.26", "local_window_size w saw w + 1 keys (1.23.2), before onnxruntime PR 25927")
def test_gqa_convention_local_window_size_counts_the_current_token():
    # local_window_size 1 (the adapter's window (0, 0)): each query sees itself alone
    assert ort_attention.forward_gqa(gqa_problem(3, 3, causal="lower-right", window=(0, 0)))[0, 0, :, 0].tolist() == [1, 2, 3]


@gqa_sinks
@since("1.32", "measured on 1.32.0 (1.23.0: the row is NaN without head_sink as well)")
def test_gqa_convention_a_sink_of_minus_inf_makes_a_row_with_no_finite_score_nan():
    # every key's bias -inf, causal = 1 with a past: 0 without head_sink, NaN with head_sink -inf (a finding:
    # examples/onnxruntime/repro_gqa_sink_minus_inf_empty_row_nan.py), 0 with head_sink 0
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([3, 6], np.float32).reshape(1, 1, 2, 1)
    bias = np.full((1, 1, 1, 2), -np.inf, np.float32)
    assert ort_attention.forward_gqa(problem(q, k, v, causal="lower-right", bias=bias)).item() == 0
    assert np.isnan(ort_attention.forward_gqa(problem(q, k, v, causal="lower-right", bias=bias, sinks=[-np.inf])).item())
    assert ort_attention.forward_gqa(problem(q, k, v, causal="lower-right", bias=bias, sinks=[0])).item() == 0

# --- releases: the stamp, the refusals, the claims each release's schema allows ---------------------

def _loads(opset, ir_version):
    """Whether the installed onnxruntime loads a one-node model stamped with this opset and IR version."""
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    options = ort_attention.ort.SessionOptions()
    options.log_severity_level = 4
    try:
        ort_attention.ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return True
    except Exception:  # noqa: BLE001 (onnxruntime raises its own classes: a refused model)
        return False


def test_the_stamp_is_the_highest_opset_and_ir_version_the_installed_release_loads():
    opset, ir_version = ort_attention.loads()
    assert _loads(opset, ir_version)
    if ort_attention.version(ort_attention.ort.__version__)[:2] in ort_attention.LOADS:  # a measured row: exact
        assert not _loads(opset + 1, ir_version) and not _loads(opset, ir_version + 1)


def test_a_release_takes_its_minor_releases_row_and_a_later_one_the_last():
    assert ort_attention.loads("1.22.1") == (22, 10)
    assert ort_attention.loads("1.24.4") == (25, 13)
    assert ort_attention.loads("1.33.0.dev20270101") == (28, 14)


def test_an_onnxruntime_older_than_its_table_is_refused(capsys, monkeypatch):
    said = reload_refuses(ort_attention, ort_attention.ort, "1.15.1", capsys, monkeypatch)
    assert "onnxruntime 1.15.1 is older than 1.16" in said


def test_the_onnx_attention_operator_is_refused_before_opset_23_loads(capsys, monkeypatch):
    said = refusal(ort_attention.ort, "1.22.1", lambda: ort_attention.setup(["--op", "attention"]), capsys, monkeypatch)
    assert "loads ONNX opset 22 at most (IR version 10)" in said and "onnxruntime 1.23 or later" in said
    monkeypatch.setattr(ort_attention.ort, "__version__", "1.22.1")
    assert ort_attention.setup(["--op", "mha"])["forward"] is ort_attention.forward_mha  # the contrib ones run


@gqa_kernel
def test_group_query_attention_before_its_causal_attribute_claims_causal_calls_alone(monkeypatch):
    attributes, inputs, kernel = ort_attention.contrib_schema("GroupQueryAttention")
    served = ort_attention.setup(["--op", "gqa"])
    assert ("causal" in served["restrictions"]) == ("causal" not in attributes)
    # a release of 1.20's schema: no causal attribute, no attention_bias input
    monkeypatch.setattr(ort_attention, "contrib_schema",
                        lambda op: (attributes - {"causal"}, [i for i in inputs if i != "attention_bias"], kernel))
    older = ort_attention.setup(["--op", "gqa"])
    assert older["restrictions"] == ["lower_right", "causal"] and "bias" not in older["capabilities"]
    assert ("softcap" in older["capabilities"]) == ("softcap" in attributes) and "window" in older["capabilities"]


@gqa_kernel
def test_group_query_attention_claims_sinks_where_its_schema_has_head_sink(monkeypatch):
    attributes, inputs, kernel = ort_attention.contrib_schema("GroupQueryAttention")
    assert ("sinks" in ort_attention.setup(["--op", "gqa"])["capabilities"]) == ("head_sink" in inputs)
    # a release of 1.22's schema (head_sink came in 1.23.0): no sinks claimed
    monkeypatch.setattr(ort_attention, "contrib_schema",
                        lambda op: (attributes, [i for i in inputs if i != "head_sink"], kernel))
    assert "sinks" not in ort_attention.setup(["--op", "gqa"])["capabilities"]
    # the other operators have no sink input
    assert "sinks" not in ort_attention.CAPABILITIES["attention"] | ort_attention.CAPABILITIES["mha"]
