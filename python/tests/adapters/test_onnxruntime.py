"""The ONNX Runtime child's translation, on cases small enough to compute by hand, and the
conventions of ONNX Runtime 1.30's Attention that README.md states.

Run: $ATTNCHECK_VENV_PYTHON -m pytest -q -p no:cacheprovider examples/onnxruntime/test_ort_attention.py
(ci/lib.sh's ensure_venv makes that python; pytest comes from Debian's python3-pytest.)
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "python"))
import ort_attention  # noqa: E402
from attncheck import _protocol as wire  # noqa: E402
from attncheck._problem import Problem  # noqa: E402


def problem(q, k, v, dtype="f32", causal="none", scale=0.0, softcap=0.0, allow=None, kv_lens=None, bias=None):
    """A Problem as the checker sends it (through the protocol's own payload)."""
    storage = np.dtype(wire.STORAGE[dtype])
    B, H, Tq, dk = q.shape
    _, H_kv, Tk, dv = v.shape
    payload = wire.problem_payload(
        dtype, (B, H, H_kv, Tq, Tk, dk, dv), causal, None, scale, softcap,
        q=q.astype(storage).tobytes(), k=k.astype(storage).tobytes(), v=v.astype(storage).tobytes(),
        allow=None if allow is None else np.asarray(allow, np.uint8).tobytes(),
        kv_lens=None if kv_lens is None else np.asarray(kv_lens, "<i4").tobytes(),
        bias=None if bias is None else bias.astype(storage).tobytes())
    return Problem(payload)


def test_explicit_mask_and_scale_on_a_1x1x2x2_case():
    q = np.array([[1, 0], [0, 1]], np.float32).reshape(1, 1, 2, 2)
    k = np.array([[1, 0], [0, 2]], np.float32).reshape(1, 1, 2, 2)
    v = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    allow = np.array([[True, False], [True, True]]).reshape(1, 2, 2)  # query 0 sees key 0 alone
    p = problem(q, k, v, scale=0.5, allow=allow)
    feeds, mask, attributes = ort_attention.translate(p)
    assert mask == ("bool", (1, 1, 2, 2)) and feeds["attn_mask"].dtype == bool
    assert dict(attributes) == {"scale": 0.5}
    out = ort_attention.forward(p)
    # query 1: scores 0.5 * (0, 2) = (0, 1), weights (1, e) / (1 + e)
    e = math.e
    expected = np.array([[1, 2], [(1 + 3 * e) / (1 + e), (2 + 4 * e) / (1 + e)]], np.float32).reshape(1, 1, 2, 2)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_grouped_kv_heads_are_contiguous_groups():
    # H 4, H_kv 2, one key each: query head h gets the value of KV head h // 2, so 10 10 20 20
    # (h % 2 would give 10 20 10 20).
    q = np.zeros((1, 4, 1, 1), np.float32)
    k = np.zeros((1, 2, 1, 1), np.float32)
    v = np.array([10, 20], np.float32).reshape(1, 2, 1, 1)
    p = problem(q, k, v)
    assert dict(ort_attention.translate(p)[2]) == {"q_num_heads": 4, "kv_num_heads": 2}
    assert ort_attention.forward(p).ravel().tolist() == [10, 10, 20, 20]


def test_key_lengths_and_lower_right_causal_become_the_bool_mask():
    # B 2, Tq 2, Tk 3, lower-right: query i sees keys j <= i + 1; key lengths 3 and 1.
    q = np.zeros((2, 1, 2, 1), np.float32)
    k = np.zeros((2, 1, 3, 1), np.float32)
    v = np.tile(np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, causal="lower-right", kv_lens=[3, 1])
    feeds, mask, attributes = ort_attention.translate(p)
    assert "is_causal" not in dict(attributes) and mask == ("bool", (2, 1, 2, 3))
    assert feeds["attn_mask"][:, 0].tolist() == [[[True, True, False], [True, True, True]],
                                                 [[True, False, False], [True, False, False]]]
    # equal scores: the mean of the values each query sees
    assert ort_attention.forward(p)[:, 0, :, 0].tolist() == [[4.5, 6.0], [3.0, 3.0]]


def test_upper_left_causal_is_the_operators_own_and_so_is_lower_right_when_square():
    q, k, v = (np.zeros((1, 1, 2, 1), np.float32) for _ in range(3))
    for causal in ("upper-left", "lower-right"):
        feeds, mask, attributes = ort_attention.translate(problem(q, k, v, causal=causal))
        assert dict(attributes) == {"is_causal": 1} and mask is None and "attn_mask" not in feeds


def test_bias_with_an_allow_mask_is_one_float_mask():
    q = np.zeros((1, 1, 1, 1), np.float32)
    k = np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([1, 2, 4], np.float32).reshape(1, 1, 3, 1)
    bias = np.array([0, math.log(3), 5], np.float32).reshape(1, 1, 1, 3)
    p = problem(q, k, v, allow=np.array([True, True, False]).reshape(1, 1, 3), bias=bias)
    feeds, mask, _ = ort_attention.translate(p)
    assert mask == ("f32", (1, 1, 1, 3))
    assert feeds["attn_mask"].ravel().tolist() == [0, np.float32(math.log(3)), -np.inf]
    # weights (1, 3) / 4 over the permitted keys: (1 + 3 * 2) / 4
    assert ort_attention.forward(p).item() == pytest.approx(7 / 4, rel=1e-6)


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


def test_claims_what_the_cpu_kernel_takes():
    assert ort_attention.CAPABILITIES == {"f32", "f16", "allow", "causal", "kv_lens", "gqa", "softcap", "bias"}


# ONNX Runtime 1.30's conventions, as README.md states them (a new version that changes one fails here).

def test_ort_convention_a_row_with_no_permitted_key_gives_zero():
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([1, 3], np.float32).reshape(1, 1, 2, 1)
    assert ort_attention.forward(problem(q, k, v, allow=np.zeros((1, 1, 2), bool))).item() == 0  # not 2, the mean


def test_ort_convention_causal_is_upper_left_when_tq_lt_tk():
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([0, 1, 2], np.float32).reshape(1, 1, 3, 1)
    assert ort_attention.forward(problem(q, k, v, causal="upper-left")).item() == 0  # key 0 alone


def test_ort_convention_the_soft_cap_comes_before_the_mask():
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([0, 1], np.float32).reshape(1, 1, 2, 1)
    bias = np.array([0, 1], np.float32).reshape(1, 1, 1, 2)
    out = ort_attention.forward(problem(q, k, v, softcap=1.0, bias=bias)).item()
    assert out == pytest.approx(math.e / (1 + math.e), rel=1e-6)  # tanh(bias) would give e^0.76 / (1 + e^0.76)


def test_ort_refuses_a_negative_scale():
    q, k, v = (np.zeros((1, 1, 1, 1), np.float32) for _ in range(3))
    with pytest.raises(Exception, match="scale must be greater than 0"):
        ort_attention.forward(problem(q, k, v, scale=-0.25))
