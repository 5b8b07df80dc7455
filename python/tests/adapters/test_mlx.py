"""The mlx adapter's translation, on cases small enough to compute by hand, and the conventions of
MLX's mx.fast.scaled_dot_product_attention on the CPU (mlx 0.32.4 of ci/requirements-mlx.txt).

Run: PYTHONPATH=python $ATTNCHECK_MLX_PYTHON -m pytest -q -p no:cacheprovider python/tests/adapters/test_mlx.py
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
pytest.importorskip("mlx.core")
from hand_cases import problem, refusal  # noqa: E402
from attncheck.adapters import mlx as mlx_adapter  # noqa: E402

mx = mlx_adapter.mx


@pytest.fixture(scope="module")
def sdpa():
    return mlx_adapter.Adapter()


def test_claims_and_restrictions(sdpa):
    assert sdpa.capabilities == {"f32", "f16", "bf16", "allow", "kv_lens", "window", "causal", "bias", "gqa", "sinks"}
    assert sdpa.restrictions == []
    assert "f64" in mlx_adapter.Adapter(f64=True).capabilities


def test_allow_mask_polarity_true_means_attend_and_is_broadcast_over_heads(sdpa):
    # B 1, H 2, Tq 2, Tk 2, equal scores: query 0 sees key 1 alone, query 1 both keys.
    q, k = np.zeros((1, 2, 2, 1)), np.zeros((1, 2, 2, 1))
    v = np.array([[1, 3], [10, 30]], np.float64).reshape(1, 2, 2, 1)
    allow = np.array([[False, True], [True, True]]).reshape(1, 2, 2)
    p = problem(q, k, v, allow=allow)
    args = sdpa.translate(p)
    assert args["allowed"].tolist() == allow.tolist() and not args["causal"]
    assert sdpa(p)[0, :, :, 0].tolist() == [[3, 2], [30, 20]]


def test_explicit_mask_and_default_scale_on_a_1x1x2x2_case(sdpa):
    q = np.array([[1, 0], [0, 1]]).reshape(1, 1, 2, 2)
    k = np.array([[1, 0], [0, 2]]).reshape(1, 1, 2, 2)
    v = np.array([[1, 2], [3, 4]]).reshape(1, 1, 2, 2)
    p = problem(q, k, v, allow=np.array([[True, False], [True, True]]).reshape(1, 2, 2))
    assert sdpa.translate(p)["scale"] is None  # the adapter passes q.shape[-1] ** -0.5
    w = math.exp(2 / math.sqrt(2))  # query 1: scores (0, 2) / sqrt(2)
    expected = np.array([[1, 2], [(1 + 3 * w) / (1 + w), (2 + 4 * w) / (1 + w)]]).reshape(1, 1, 2, 2)
    np.testing.assert_allclose(sdpa(p), expected, rtol=1e-6)


def test_explicit_scale_is_passed(sdpa):
    q, k = np.array([1.0]).reshape(1, 1, 1, 1), np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    v = np.array([0.0, 1.0]).reshape(1, 1, 2, 1)
    p = problem(q, k, v, scale=2.0)
    assert sdpa.translate(p)["scale"] == 2.0
    np.testing.assert_allclose(sdpa(p).item(), 1 / (1 + math.exp(-2)), rtol=1e-6)


def test_key_lengths_become_the_bool_mask_per_batch(sdpa):
    q, k = np.zeros((2, 1, 1, 1)), np.zeros((2, 1, 3, 1))
    v = np.tile(np.array([3, 6, 9], np.float64).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, kv_lens=[3, 1])
    assert sdpa.translate(p)["allowed"][:, 0].tolist() == [[True, True, True], [True, False, False]]
    assert sdpa(p).ravel().tolist() == [6, 3]


@pytest.mark.parametrize("Tq,Tk,expected", [(2, 3, [0.5, 1.0]), (3, 2, [0.5, 0.0, 0.5])])
def test_lower_right_causal_is_mlx_causal(sdpa, Tq, Tk, expected):
    # lower-right: query i sees keys j <= i + Tk - Tq; MLX's "causal" (its docstring: the last
    # query aligns with the last key). Tq 3, Tk 2: query 0 sees no key, whose row is the mean of V.
    q, k = np.zeros((1, 1, Tq, 1)), np.zeros((1, 1, Tk, 1))
    v = np.arange(Tk, dtype=np.float64).reshape(1, 1, Tk, 1)
    p = problem(q, k, v, causal="lower-right")
    args = sdpa.translate(p)
    assert args["causal"] and args["allowed"] is None
    assert sdpa(p).ravel().tolist() == expected


def test_upper_left_causal_with_tq_ne_tk_is_translated(sdpa):
    q, k = np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 3, 1))
    v = np.array([0, 1, 2], np.float64).reshape(1, 1, 3, 1)
    p = problem(q, k, v, causal="upper-left")
    args = sdpa.translate(p)
    assert not args["causal"] and args["allowed"][0].tolist() == [[True, False, False], [True, True, False]]
    assert sdpa(p).ravel().tolist() == [0, 0.5]
    square = problem(np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 2, 1)), causal="upper-left")
    assert sdpa.translate(square)["causal"]  # Tq == Tk: the same mask as MLX's


def test_window_is_translated_at_the_lower_right_diagonal(sdpa):
    # Tq 1, Tk 4, window (1, 0): the diagonal is key 3, keys 2 and 3 are seen.
    q, k = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 4, 1))
    v = np.array([0, 1, 2, 4], np.float64).reshape(1, 1, 4, 1)
    p = problem(q, k, v, window=(1, 0))
    assert sdpa.translate(p)["allowed"][0].tolist() == [[False, False, True, True]]
    assert sdpa(p).item() == 3


def test_causal_with_a_mask_goes_into_the_mask(sdpa):
    q, k = np.zeros((1, 1, 2, 1)), np.zeros((1, 1, 2, 1))
    v = np.array([2, 4], np.float64).reshape(1, 1, 2, 1)
    p = problem(q, k, v, causal="lower-right", kv_lens=[2])
    args = sdpa.translate(p)
    assert not args["causal"] and args["allowed"][0].tolist() == [[True, False], [True, True]]
    assert sdpa(p).ravel().tolist() == [2, 3]


def test_bias_is_additive_and_a_bool_part_becomes_minus_infinity(sdpa):
    q, k = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 3, 1))
    v = np.array([0, 1, 2], np.float64).reshape(1, 1, 3, 1)
    bias = np.array([0, math.log(3), 0]).reshape(1, 1, 1, 3)
    assert sdpa(problem(q, k, v, bias=bias)).item() == pytest.approx((3 + 2) / 5, rel=1e-6)
    assert sdpa(problem(q, k, v, bias=bias, kv_lens=[2])).item() == pytest.approx(3 / 4, rel=1e-6)


def test_gqa_query_head_h_reads_kv_head_h_over_group(sdpa):
    q, k = np.zeros((1, 4, 1, 1)), np.zeros((1, 2, 1, 1))
    v = np.array([1, 2], np.float64).reshape(1, 2, 1, 1)
    assert sdpa(problem(q, k, v)).ravel().tolist() == [1, 1, 2, 2]


def test_sinks_per_head_join_the_denominator_with_no_value(sdpa):
    """Head 0's sink 0 against two keys of score 0 and values 3 and 6: out (3 + 6) / 3 = 3; head 1's
    sink -inf is none: the mean 4.5; head 2's sink log 2: (3 + 6) / 4 = 2.25."""
    q, k = np.zeros((1, 3, 1, 1)), np.zeros((1, 3, 2, 1))
    v = np.tile(np.array([3.0, 6.0]).reshape(1, 1, 2, 1), (1, 3, 1, 1))
    out = sdpa(problem(q, k, v, sinks=[0.0, -np.inf, math.log(2)]))
    np.testing.assert_allclose(out.ravel(), [3.0, 4.5, 2.25], rtol=1e-6)


def test_dv_unlike_dk_runs(sdpa):
    out = sdpa(problem(np.zeros((1, 1, 1, 2)), np.zeros((1, 1, 2, 2)), np.arange(6.0).reshape(1, 1, 2, 3)))
    assert out.shape == (1, 1, 1, 3) and out.ravel().tolist() == [1.5, 2.5, 3.5]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_formats_round_trip(sdpa, dtype):
    v = np.array([0.5, 1.5]).reshape(1, 1, 2, 1)
    out = sdpa(problem(np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 1)), v, dtype=dtype))
    assert out.dtype == (np.float16 if dtype == "f16" else np.float32) and out.item() == 1.0


def test_float64_inputs_stay_float64():
    # mx.array of a float64 NumPy array without dtype= is float32: 1e300 would become inf
    adapter = mlx_adapter.Adapter(f64=True)
    out = adapter(problem(np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 1, 1)), np.full((1, 1, 1, 1), -1e300), dtype="f64"))
    assert out.dtype == np.float64 and out.item() == -1e300


def test_conventions_empty_row_mean_and_forbidden_values_leak(sdpa):
    # a bool-masked empty row is the mean of V (finfo.min for every score); a NaN in a forbidden value reaches out
    v = np.array([1.0, 3.0]).reshape(1, 1, 2, 1)
    q, k = np.zeros((1, 1, 1, 1)), np.zeros((1, 1, 2, 1))
    assert sdpa(problem(q, k, v, allow=np.zeros((1, 1, 2), bool))).item() == 2.0
    assert np.isnan(sdpa(problem(q, k, np.array([1.0, np.nan]).reshape(1, 1, 2, 1), kv_lens=[1])).item())
    assert np.isnan(sdpa(problem(q, k, v, bias=np.full((1, 1, 1, 2), -np.inf))).item())  # -inf everywhere: NaN


def test_an_mlx_without_the_fast_attention_is_refused(capsys, monkeypatch):
    import importlib
    monkeypatch.delattr(mlx_adapter.mx.fast, "scaled_dot_product_attention")
    try:
        said = refusal(mlx_adapter.mx, mlx_adapter.mx.__version__, lambda: importlib.reload(mlx_adapter), capsys,
                       monkeypatch)
    finally:
        monkeypatch.undo()
        importlib.reload(mlx_adapter)
    assert said == (f"attncheck.adapters.mlx: mlx.core {mlx_adapter.mx.__version__} has no "
                    f"mlx.core.fast.scaled_dot_product_attention; run it with a python whose mlx.core has it "
                    f"(README.md, \"Checking a shipped runtime\")\n")
