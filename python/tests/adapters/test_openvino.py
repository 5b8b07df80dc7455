"""The OpenVINO adapter's translation (python/attncheck/adapters/openvino.py), on cases small enough
to compute by hand or in plain NumPy, and the conventions of OpenVINO 2026.4's CPU
ScaledDotProductAttention that its docstring states.

Run: PYTHONPATH=python VENV_PYTHON -m pytest -q -p no:cacheprovider python/tests/adapters/test_openvino.py
(skipped where openvino does not import).
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
ov = pytest.importorskip("openvino")
from hand_cases import problem, refusal  # noqa: E402
from attncheck.adapters import openvino as adapter  # noqa: E402


def reference(q, k, v, scale, permitted):
    """Plain NumPy in float64: softmax(scale q k^T) v over the permitted keys (rows with some key)."""
    s = scale * np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64))
    s = np.where(permitted, s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v.astype(np.float64)


def test_explicit_mask_and_scale_on_a_1x1x2x2_case():
    q = np.array([[1, 0], [0, 1]], np.float32).reshape(1, 1, 2, 2)
    k = np.array([[1, 0], [0, 2]], np.float32).reshape(1, 1, 2, 2)
    v = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    allow = np.array([[True, False], [True, True]]).reshape(1, 2, 2)  # query 0 sees key 0 alone
    p = problem(q, k, v, scale=0.5, allow=allow)
    feeds, mask, scale, causal = adapter.translate(p)
    assert mask == ("bool", (1, 1, 2, 2)) and feeds["attention_mask"].dtype == bool
    assert feeds["attention_mask"].ravel().tolist() == [True, False, True, True]  # True = attend, as given
    assert scale == 0.5 and causal is False
    out = adapter.forward(p)
    e = math.e  # query 1: scores 0.5 * (0, 2) = (0, 1), weights (1, e) / (1 + e)
    expected = np.array([[1, 2], [(1 + 3 * e) / (1 + e), (2 + 4 * e) / (1 + e)]], np.float32).reshape(1, 1, 2, 2)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_batch_and_head_order_and_unequal_widths():
    # B 2, H 3, Tq 2, Tk 3, dk 4, dv 5 (layout [B,H,T,d]) against plain NumPy, default scale 1/sqrt(4)
    rng = np.random.default_rng(3)
    q, k = rng.standard_normal((2, 3, 2, 4)).astype(np.float32), rng.standard_normal((2, 3, 3, 4)).astype(np.float32)
    v = rng.standard_normal((2, 3, 3, 5)).astype(np.float32)
    p = problem(q, k, v)
    assert adapter.translate(p)[1:] == (None, None, False)
    out = adapter.forward(p, precision="f32")
    assert out.shape == (2, 3, 2, 5) and out.dtype == np.float32
    np.testing.assert_allclose(out, reference(q, k, v, 0.5, np.ones((2, 3, 2, 3), bool)), rtol=2e-6, atol=2e-7)


def test_upper_left_causal_alone_is_the_operators_own():
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([0, 1, 2], np.float32).reshape(1, 1, 3, 1)
    p = problem(q, k, v, causal="upper-left")
    feeds, mask, _, causal = adapter.translate(p)
    assert causal is True and mask is None and "attention_mask" not in feeds
    assert adapter.forward(p).item() == 0  # key 0 alone (lower-right would give the mean, 1)
    square = problem(*(np.zeros((1, 1, 2, 1), np.float32),) * 3, causal="lower-right")
    assert adapter.translate(square)[1:] == (None, None, True)


def test_key_lengths_and_lower_right_causal_become_the_bool_mask():
    # B 2, Tq 2, Tk 3, lower-right: query i sees keys j <= i + 1; key lengths 3 and 1.
    q = np.zeros((2, 1, 2, 1), np.float32)
    k = np.zeros((2, 1, 3, 1), np.float32)
    v = np.tile(np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, causal="lower-right", kv_lens=[3, 1])
    feeds, mask, _, causal = adapter.translate(p)
    assert causal is False and mask == ("bool", (2, 1, 2, 3))
    assert feeds["attention_mask"][:, 0].tolist() == [[[True, True, False], [True, True, True]],
                                                      [[True, False, False], [True, False, False]]]
    assert adapter.forward(p)[:, 0, :, 0].tolist() == [[4.5, 6.0], [3.0, 3.0]]  # the mean of the keys seen


def test_causal_with_an_allow_mask_is_one_mask_since_causal_true_ignores_it():
    # Tq 2, Tk 2, upper-left and an allow mask forbidding key 0 for query 1: query 0 sees key 0,
    # query 1 sees key 1 alone.
    q, k = np.zeros((1, 1, 2, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([3, 7], np.float32).reshape(1, 1, 2, 1)
    p = problem(q, k, v, causal="upper-left", allow=np.array([[True, True], [False, True]]).reshape(1, 2, 2))
    feeds, mask, _, causal = adapter.translate(p)
    assert causal is False and feeds["attention_mask"].ravel().tolist() == [True, False, False, True]
    assert adapter.forward(p).ravel().tolist() == [3, 7]


def test_bias_with_an_allow_mask_is_one_float_mask():
    q = np.zeros((1, 1, 1, 1), np.float32)
    k = np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([1, 2, 4], np.float32).reshape(1, 1, 3, 1)
    bias = np.array([0, math.log(3), 5], np.float32).reshape(1, 1, 1, 3)
    p = problem(q, k, v, allow=np.array([True, True, False]).reshape(1, 1, 3), bias=bias)
    feeds, mask, _, _ = adapter.translate(p)
    assert mask == ("f32", (1, 1, 1, 3))
    assert feeds["attention_mask"].ravel().tolist() == [0, np.float32(math.log(3)), -np.inf]
    assert adapter.forward(p).item() == pytest.approx(7 / 4, rel=1e-6)  # weights (1, 3) / 4


def test_bias_alone_is_added_per_head():
    q, k = np.zeros((1, 2, 1, 1), np.float32), np.zeros((1, 2, 2, 1), np.float32)
    v = np.array([0, 1, 0, 1], np.float32).reshape(1, 2, 2, 1)
    bias = np.array([0, 0, 0, math.log(3)], np.float32).reshape(1, 2, 1, 2)  # head 1 weighs key 1 three times
    out = adapter.forward(problem(q, k, v, bias=bias))
    assert out.ravel().tolist() == pytest.approx([0.5, 0.75], rel=1e-6)


def test_float16_runs_with_an_f16_scale_and_models_are_cached():
    q = np.array([0.5, -1], np.float16).reshape(1, 1, 1, 2)
    k = np.array([1, 1, -1, 0.5], np.float16).reshape(1, 1, 2, 2)
    v = np.array([2, -2], np.float16).reshape(1, 1, 2, 1)
    p = problem(q, k, v, dtype="f16", scale=0.3)
    assert adapter.translate(p)[2] == float(np.float16(0.3)) != 0.3  # the spec's scale has the type T
    before = adapter.compiled.cache_info()
    out = adapter.forward(p)
    adapter.forward(p)
    after = adapter.compiled.cache_info()
    assert out.dtype == np.float16
    assert after.hits == before.hits + 1 and after.misses == before.misses + 1
    s = float(np.float16(0.3)) * np.array([-0.5, -1.0])
    w = np.exp(s) / np.exp(s).sum()
    assert out.item() == pytest.approx(w @ [2, -2], abs=2e-3)


def test_bfloat16_goes_in_and_out_as_bf16_bits():
    q = np.array([1.0, 0.0], np.float32).reshape(1, 1, 1, 2)
    k = np.array([2.0, 0.0, 0.0, 0.0], np.float32).reshape(1, 1, 2, 2)
    v = np.array([1.0, 3.0], np.float32).reshape(1, 1, 2, 1)
    p = problem(q, k, v, dtype="bf16", scale=0.5)
    feeds, _, scale, _ = adapter.translate(p)
    assert feeds["query"].element_type == ov.Type.bf16 and scale == 0.5
    assert adapter.translate(problem(q, k, v, dtype="bf16", scale=0.3))[2] == 0.30078125  # bf16 0x3E9A
    out = adapter.forward(p)  # scores (1, 0): weights (e, 1) / (e + 1)
    e = math.e
    assert out.dtype == np.float32 and out.item() == pytest.approx((e + 3) / (e + 1), rel=2 ** -7)


def test_claims_what_the_operator_takes_and_not_grouped_heads():
    assert adapter.CAPABILITIES == {"f32", "f16", "bf16", "allow", "causal", "kv_lens", "bias"}
    # The operator refuses H_kv = 2 for H = 4 (its key must match or broadcast): no GQA to claim.
    opset = adapter.opset
    params = [opset.parameter(s, ov.Type.f32) for s in ([1, 4, 1, 1], [1, 2, 1, 1], [1, 2, 1, 1])]
    with pytest.raises(Exception, match="key_input_correctness"):
        opset.scaled_dot_product_attention(*params, causal=False)


def test_precision_f32_is_float32_and_default_may_be_bf16():
    assert adapter.runtime_precision("f32", "f32") == ("f32", "f32")
    hint, node = adapter.runtime_precision("f32", "default")
    assert hint in ("f32", "bf16", "f16") and node in ("f32", "bf16", "f16")
    # A case where bf16 scores would be off by far more than float32's rounding.
    q = np.array([1.0], np.float32).reshape(1, 1, 1, 1)
    k = np.array([0.0, 3.0078125 + 2 ** -12], np.float32).reshape(1, 1, 2, 1)
    v = np.array([0.0, 1.0], np.float32).reshape(1, 1, 2, 1)
    expected = reference(q, k, v, 1.0, np.ones((1, 1, 1, 2), bool)).item()
    assert adapter.forward(problem(q, k, v), precision="f32").item() == pytest.approx(expected, rel=1e-6)
    if node == "bf16":  # this machine's default: the f32 model silently runs in bf16
        assert adapter.forward(problem(q, k, v), precision="default").item() != pytest.approx(expected, rel=1e-5)


# OpenVINO 2026.4's conventions, as the adapter's docstring states them (a version that changes one fails here).

def test_ov_convention_a_row_with_no_permitted_key_is_nan():
    # The spec's Select(!mask, -inf, 0) and Softmax: a row of -inf is NaN (issue 35959, open).
    q, k = np.zeros((1, 1, 1, 1), np.float32), np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([1, 3], np.float32).reshape(1, 1, 2, 1)
    assert np.isnan(adapter.forward(problem(q, k, v, allow=np.zeros((1, 1, 2), bool))).item())
    assert np.isnan(adapter.forward(problem(q, k, v, kv_lens=[0])).item())


def test_ov_convention_causal_true_ignores_the_attention_mask():
    opset = adapter.opset
    params = [opset.parameter([1, 1, 2, 1], ov.Type.f32) for _ in range(3)]
    mask = opset.parameter([1, 1, 2, 2], ov.Type.boolean)
    node = opset.scaled_dot_product_attention(*params, attention_mask=mask, causal=True)
    model = adapter._CORE.compile_model(ov.Model([node], params + [mask]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    z = np.zeros((1, 1, 2, 1), np.float32)
    v = np.array([3, 7], np.float32).reshape(1, 1, 2, 1)
    out = model([z, z, v, np.array([[True, True], [False, True]]).reshape(1, 1, 2, 2)])[model.output(0)]
    assert out.ravel().tolist() == [3, 5]  # query 1 sees both keys: the mask's False was ignored


def test_an_openvino_without_the_operator_is_refused(capsys, monkeypatch):
    import importlib
    monkeypatch.delattr(adapter.opset, "scaled_dot_product_attention")
    try:
        said = refusal(ov, ov.__version__, lambda: importlib.reload(adapter), capsys, monkeypatch)
    finally:
        monkeypatch.undo()
        importlib.reload(adapter)
    assert said == f"attncheck.adapters.openvino: openvino {ov.__version__}'s opset13 has no scaled_dot_product_attention\n"
