"""The JAX adapter's translation (python/attncheck/adapters/jax.py) on cases small enough to compute
by hand or in plain NumPy, and the conventions of jax.nn.dot_product_attention that its docstring
states. Skipped where jax does not import.

Run: VENV_PYTHON -m pytest -q -p no:cacheprovider python/tests/adapters/test_jax.py
(ci/requirements.txt's venv: jax and jaxlib 0.10.2 over numpy 2.3.5; pytest from Debian's python3-pytest).
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
jax = pytest.importorskip("jax")
from hand_cases import problem, refusal  # noqa: E402
from attncheck.adapters import NotExpressible, jax as adapter, version  # noqa: E402

adapter.load()
CLAIMS = adapter.capabilities()


def claimed(*names):
    """A test of features this jax's function may lack (jax 0.4.31: key lengths, the window, grouped KV heads)."""
    lacking = sorted(set(names) - CLAIMS)
    return pytest.mark.skipif(bool(lacking), reason=f"jax {adapter.jax.__version__} does not claim {lacking}")


def numpy_attention(p):
    """softmax(scale q k^T + bias) v over the permitted keys, in float64, heads h -> h // (H / H_kv); a row
    with no permitted key the mean of V over all keys (the function's convention)."""
    group = p.H // p.H_kv
    k = np.repeat(np.asarray(p.k, np.float64), group, axis=1)
    v = np.repeat(np.asarray(p.v, np.float64), group, axis=1)
    s = p.softmax_scale * np.einsum("bhqd,bhkd->bhqk", np.asarray(p.q, np.float64), k)
    if p.bias is not None:
        s = s + p.bias
    mask = p.mask()
    empty = ~mask.any(-1, keepdims=True)
    s = np.where(mask | empty, np.where(empty, 0.0, s), -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bhkd->bhqd", w / w.sum(-1, keepdims=True), v)


def rng_problem(seed, B=2, H=2, H_kv=2, Tq=3, Tk=3, d=4, **kwargs):
    r = np.random.default_rng(seed)
    q, k, v = (r.standard_normal(s).astype(np.float32) for s in ((B, H, Tq, d), (B, H_kv, Tk, d), (B, H_kv, Tk, d)))
    return problem(q, k, v, **kwargs)


def test_explicit_mask_and_scale_on_a_1x1x2x2_case():
    q = np.array([[1, 0], [0, 1]], np.float32).reshape(1, 1, 2, 2)
    k = np.array([[1, 0], [0, 2]], np.float32).reshape(1, 1, 2, 2)
    v = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    allow = np.array([[True, False], [True, True]]).reshape(1, 2, 2)  # query 0 sees key 0 alone
    p = problem(q, k, v, scale=0.5, allow=allow)
    args = adapter.translate(p)
    assert args["mask"].shape == (1, 1, 2, 2) and args["mask"].dtype == bool
    assert float(args["scale"]) == 0.5 and args["scale"].dtype == np.float32 and not args["is_causal"]
    out = adapter.forward(p)
    e = math.e  # query 1: scores 0.5 * (0, 2) = (0, 1), weights (1, e) / (1 + e)
    expected = np.array([[1, 2], [(1 + 3 * e) / (1 + e), (2 + 4 * e) / (1 + e)]], np.float32).reshape(1, 1, 2, 2)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_layout_is_transposed_to_btnh_and_back():
    # B 2, H 3, Tq 4, Tk 5, dk = dv 2: every batch, head and query different; a wrong transpose
    # (heads and times swapped) gives another array of the same shape.
    p = rng_problem(1, B=2, H=3, H_kv=3, Tq=4, Tk=5, d=2)
    args = adapter.translate(p)
    assert args["q"].shape == (2, 4, 3, 2) and args["k"].shape == (2, 5, 3, 2)
    np.testing.assert_array_equal(np.asarray(args["q"])[1, 3, 2], p.q[1, 2, 3])
    out = adapter.forward(p)
    assert out.shape == (2, 3, 4, 2)
    np.testing.assert_allclose(out, numpy_attention(p), rtol=2e-5, atol=2e-6)


@claimed('gqa')
def test_grouped_kv_heads_are_contiguous_groups():
    # H 4, H_kv 2, one key each: query head h gets the value of KV head h // 2, so 10 10 20 20
    # (h % 2 would give 10 20 10 20).
    q = np.zeros((1, 4, 1, 1), np.float32)
    k = np.zeros((1, 2, 1, 1), np.float32)
    v = np.array([10, 20], np.float32).reshape(1, 2, 1, 1)
    assert adapter.forward(problem(q, k, v)).ravel().tolist() == [10, 10, 20, 20]
    p = rng_problem(2, B=1, H=6, H_kv=2, Tq=3, Tk=4, d=3)
    np.testing.assert_allclose(adapter.forward(p), numpy_attention(p), rtol=2e-5, atol=2e-6)


@claimed('kv_lens')
def test_key_lengths_and_lower_right_causal():
    # B 2, Tq 2, Tk 3, lower-right: query i sees keys j <= i + 1; key lengths 3 and 1.
    q = np.zeros((2, 1, 2, 1), np.float32)
    k = np.zeros((2, 1, 3, 1), np.float32)
    v = np.tile(np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1), (2, 1, 1, 1))
    p = problem(q, k, v, causal="lower-right", kv_lens=[3, 1])
    args = adapter.translate(p)
    assert not args["is_causal"] and args["kv_lens"].tolist() == [3, 1] and args["kv_lens"].dtype == np.int32
    assert np.asarray(args["mask"])[:, 0].tolist() == [[[True, True, False], [True, True, True]]] * 2
    # equal scores: the mean of the values each query sees
    assert adapter.forward(p)[:, 0, :, 0].tolist() == [[4.5, 6.0], [3.0, 3.0]]


def test_upper_left_causal_is_the_functions_own_and_so_is_lower_right_when_square():
    q = np.zeros((1, 1, 2, 1), np.float32)
    k = np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1)
    p = problem(q, k, v, causal="upper-left")
    args = adapter.translate(p)
    assert args["is_causal"] and args["mask"] is None
    assert adapter.forward(p).ravel().tolist() == [3.0, 4.5]  # query i sees keys j <= i (jnp.tril)
    square = problem(q[:, :, :2], k[:, :, :2], v[:, :, :2], causal="lower-right")
    args = adapter.translate(square)
    assert args["is_causal"] and args["mask"] is None


@claimed('window')
@pytest.mark.parametrize("Tq,Tk", [(3, 3), (2, 5), (5, 2)])
@pytest.mark.parametrize("window", [(1, 0), (0, 1), (2, -1), (-1, 1), (0, 0)])
def test_window_follows_attncheck_rule(Tq, Tk, window):
    # With an allow mask (all true) given, so that jax before 0.8.2 applies the window (see the next test).
    allow = np.ones((1, Tq, Tk), bool)
    p = rng_problem(3, B=1, H=1, H_kv=1, Tq=Tq, Tk=Tk, d=2, window=window, allow=allow)
    args = adapter.translate(p)
    d = Tk - Tq
    left, right = window
    L, R = (Tq if left < 0 else left - d), (Tk if right < 0 else right + d)
    if L >= 0 and R >= 0:
        assert tuple(int(x) for x in args["window"]) == (L, R)
    else:
        assert args["window"] is None  # in the mask instead
    np.testing.assert_allclose(adapter.forward(p), numpy_attention(p), rtol=2e-5, atol=2e-6)


@claimed('window')
def test_the_window_without_a_mask_is_applied_from_jax_0_8_2():
    # Before 0.8.2, _apply_masks returned the scores untouched when mask, is_causal and the lengths
    # were all absent, local_window_size or not (jax issue 32300, fixed by PR 32357): a finding of
    # attncheck's, not the adapter's, whose translation is the same in both. Window (0, 0): each
    # query must see its own key only.
    p = rng_problem(4, B=1, H=1, H_kv=1, Tq=3, Tk=3, d=2, window=(0, 0))
    args = adapter.translate(p)
    assert args["mask"] is None and tuple(int(x) for x in args["window"]) == (0, 0)
    out = adapter.forward(p)
    unwindowed = problem(np.asarray(p.q), np.asarray(p.k), np.asarray(p.v))
    fixed = version(jax.__version__) >= (0, 8, 2)
    np.testing.assert_allclose(out, numpy_attention(p if fixed else unwindowed), rtol=2e-5, atol=2e-6)
    assert not np.allclose(out, numpy_attention(unwindowed if fixed else p), rtol=1e-3)


def test_bias_is_added_and_minus_infinity_forbids():
    q = np.zeros((1, 1, 1, 1), np.float32)
    k = np.zeros((1, 1, 3, 1), np.float32)
    v = np.array([1, 2, 4], np.float32).reshape(1, 1, 3, 1)
    bias = np.array([0, math.log(3), -np.inf], np.float32).reshape(1, 1, 1, 3)  # weights 1/4, 3/4, 0
    p = problem(q, k, v, bias=bias)
    assert adapter.translate(p)["bias"].shape == (1, 1, 1, 3)
    np.testing.assert_allclose(adapter.forward(p).ravel(), [0.25 * 1 + 0.75 * 2], rtol=1e-6)


def test_default_scale_is_the_functions_own():
    p = rng_problem(5, B=1, H=1, H_kv=1, Tq=2, Tk=3, d=4)
    assert adapter.translate(p)["scale"] is None
    np.testing.assert_allclose(adapter.forward(p), numpy_attention(p), rtol=2e-5, atol=2e-6)  # 1/sqrt(4)


def test_an_empty_row_is_the_mean_of_all_values():
    # The function's convention (--empty-rows mean): a finite mask value for forbidden keys.
    q = np.zeros((1, 1, 2, 1), np.float32)
    k = np.array([0, 5, 1], np.float32).reshape(1, 1, 3, 1)
    v = np.array([3, 6, 9], np.float32).reshape(1, 1, 3, 1)
    q[0, 0, 1, 0] = 1
    allow = np.array([[False, False, False], [False, True, False]]).reshape(1, 2, 3)
    assert adapter.forward(problem(q, k, v, allow=allow)).ravel().tolist() == [6.0, 6.0]


@claimed('gqa')  # its grouped KV heads
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_formats_run_op_by_op_and_round_like_the_format(dtype):
    p = rng_problem(6, B=1, H=2, H_kv=1, Tq=3, Tk=4, d=4, dtype=dtype, causal="upper-left")
    args = adapter.translate(p)
    assert str(args["q"].dtype) == {"f16": "float16", "bf16": "bfloat16"}[dtype]
    assert not adapter.jitted(dtype) and adapter.jitted("f32")
    np.testing.assert_array_equal(np.asarray(args["q"]).astype(np.float32), np.transpose(p.q, (0, 2, 1, 3)))
    out = adapter.forward(p)
    assert out.dtype == (np.float16 if dtype == "f16" else np.float32)
    tolerance = 2e-3 if dtype == "f16" else 2e-2
    np.testing.assert_allclose(out, numpy_attention(p), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_jitted_half_formats_raise_on_the_cpu(dtype):
    # Why --jit auto runs them op by op (repro_jit_half_formats_raise.py).
    p = rng_problem(7, B=1, H=1, H_kv=1, Tq=1, Tk=1, d=1, dtype=dtype)
    with pytest.raises(Exception, match="(F16|BF16)_(F16|BF16)_F32|multiple contracting dimensions"):
        adapter._calls[True, "forward"](**adapter.translate(p))


def test_dv_unlike_dk_is_not_expressible():
    # The function refuses it ("value shape should be", repro_dv_unlike_dk_refused.py); the adapter
    # says so before calling it.
    q = np.zeros((1, 1, 1, 1), np.float32)
    v = np.zeros((1, 1, 1, 2), np.float32)
    with pytest.raises(NotExpressible, match="dv != dk"):
        adapter.forward(problem(q, q, v))


@claimed('gqa')  # its grouped KV heads
def test_backward_is_jax_vjp_in_the_problems_layout():
    # One query, two keys with equal scores: weights 1/2, 1/2, so dv = dout / 2 for each key, and
    # dq = scale * sum_j w_j (dout.v_j - dout.out) k_j, with H 2 over one KV head summing both heads.
    q = np.zeros((1, 2, 1, 2), np.float32)
    k = np.array([[1, 0], [0, 1]], np.float32).reshape(1, 1, 2, 2)
    v = np.array([[1, 0], [0, 3]], np.float32).reshape(1, 1, 2, 2)
    p = problem(q, k, v)
    dout = np.array([[1, 1], [2, 0]], np.float32).reshape(1, 2, 1, 2)
    dq, dk, dv = adapter.backward(p, dout)
    assert dq.shape == (1, 2, 1, 2) and dk.shape == (1, 1, 2, 2) and dv.shape == (1, 1, 2, 2)
    np.testing.assert_allclose(dv[0, 0], [[1.5, 0.5], [1.5, 0.5]], rtol=1e-6)  # (dout_0 + dout_1) / 2
    out = np.array([0.5, 1.5])
    scale = 1 / math.sqrt(2)
    for h in range(2):
        g = dout[0, h, 0]
        ds = 0.5 * (np.array([g @ v[0, 0, 0], g @ v[0, 0, 1]]) - g @ out)
        np.testing.assert_allclose(dq[0, h, 0], scale * ds @ k[0, 0], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dk, 0 * dk, atol=1e-7)  # q is zero: dk = scale * ds q = 0


@claimed('gqa')  # its grouped KV heads
def test_pad_head_dims_emulates_dv_unlike_dk():
    # --pad-head-dims: zero columns to max(dk, dv), the default scale kept as 1/sqrt(dk), the output
    # cut to dv columns; off by default (the function refuses, test_dv_unlike_dk_is_not_expressible).
    r = np.random.default_rng(8)
    for dk, dv in ((2, 5), (5, 2)):
        q = r.standard_normal((1, 2, 3, dk)).astype(np.float32)
        k = r.standard_normal((1, 1, 4, dk)).astype(np.float32)
        v = r.standard_normal((1, 1, 4, dv)).astype(np.float32)
        p = problem(q, k, v, causal="upper-left")
        adapter.load(pad_head_dims=True)
        try:
            args = adapter.translate(p)
            assert args["q"].shape[3] == args["v"].shape[3] == 5
            assert (args["scale"] is None) == (dk == 5)
            out = adapter.forward(p)
            dq, dkk, dvv = adapter.backward(p, np.ones((1, 2, 3, dv), np.float32))
        finally:
            adapter.load()
        assert out.shape == (1, 2, 3, dv) and dq.shape == q.shape and dkk.shape == k.shape and dvv.shape == v.shape
        np.testing.assert_allclose(out, numpy_attention(p), rtol=2e-5, atol=2e-6)
        # dout all ones: dv[j, c] is key j's weight summed over the queries of both heads, for every c
        weights = numpy_attention(problem(q, k, np.eye(4, dtype=np.float32).reshape(1, 1, 4, 4), causal="upper-left"))
        np.testing.assert_allclose(dvv[0, 0], np.repeat(weights[0].sum((0, 1))[:, None], dv, 1), rtol=2e-5, atol=2e-6)


def test_a_jax_older_than_its_dot_product_attention_is_refused(capsys, monkeypatch):
    said = refusal(adapter.jax, "0.4.30", adapter.load, capsys, monkeypatch)
    assert said.startswith("attncheck.adapters.jax: jax 0.4.30 is older than 0.4.31, the first release with "
                           "jax.nn.dot_product_attention")


def test_claims_narrow_to_what_the_function_takes(monkeypatch):
    def function_of_0_4_31(query, key, value, *, bias=None, mask=None, scale=None, is_causal=False,
                           implementation=None):
        raise ValueError("query shape should be [1, -1, 1, 1]")  # its refusal of grouped heads
    monkeypatch.setattr(adapter.jax.nn, "dot_product_attention", function_of_0_4_31)
    assert not adapter.capabilities() & {"kv_lens", "window", "gqa"}
    assert {"allow", "causal", "bias", "backward"} <= adapter.capabilities()
