"""The keras adapter's translation (python/attncheck/adapters/keras.py) on cases small enough to
compute by hand or in plain NumPy: keras.ops.dot_product_attention (--api ops) against a float64
NumPy attention, keras.layers.MultiHeadAttention (--api mha) against the float64 NumPy layer
(tests/layer_reference.py), and the conventions its docstring states. Skipped where keras does not
import. Tolerances: f32 1e-5 relative to the largest |out|. On the backend KERAS_BACKEND names
(jax unless set: the adapter's --backend).

Run: KERAS_PYTHON -m pytest -q -p no:cacheprovider python/tests/adapters/test_keras.py
(ci/requirements-keras.txt's venv: keras 3.15.1 on jax 0.10.2; pytest from Debian's python3-pytest), and
KERAS_BACKEND=torch TORCH_PYTHON -m pytest ... (ci/requirements-torch.txt's: keras 3.15.1 on torch 2.15.0).
"""
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the client, from the source tree
BACKEND = os.environ.setdefault("KERAS_BACKEND", "jax")
pytest.importorskip(BACKEND)
pytest.importorskip("keras")
from hand_cases import problem, refusal  # noqa: E402
from layer_reference import random_layer, reference  # noqa: E402
from attncheck.adapters import NotExpressible, keras as adapter  # noqa: E402

adapter.load(BACKEND)
on_jax = pytest.mark.skipif(BACKEND != "jax", reason="jax's restriction, not torch's")
on_torch = pytest.mark.skipif(BACKEND != "torch", reason="keras' torch backend alone")


def numpy_attention(p):
    """softmax(scale q k^T + bias) v over the permitted keys in float64, heads h -> h // (H / H_kv); a
    row with no permitted key the mean of V over all keys (keras' convention on both backends: a finite
    large negative for a forbidden key)."""
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


def close(got, want, rtol=1e-5):
    scale = max(1.0, float(np.abs(want).max()))
    error = float(np.abs(np.asarray(got, np.float64) - want).max())
    assert error <= rtol * scale, f"max error {error:.3g} > {rtol} x {scale:.3g}"


def test_explicit_mask_and_scale_on_a_1x1x2x2_case():
    q = np.array([[1, 0], [0, 1]], np.float32).reshape(1, 1, 2, 2)
    k = np.array([[1, 0], [0, 2]], np.float32).reshape(1, 1, 2, 2)
    v = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    allow = np.array([[True, False], [True, True]]).reshape(1, 2, 2)  # query 0 sees key 0 alone
    p = problem(q, k, v, scale=0.5, allow=allow)
    args = adapter.translate(p)
    assert tuple(args["mask"].shape) == (1, 1, 2, 2) and adapter.keras.backend.standardize_dtype(args["mask"].dtype) == "bool"
    assert args["scale"] == 0.5 and not args["is_causal"] and tuple(args["query"].shape) == (1, 2, 1, 2)  # B,T,N,H
    e = math.e  # query 1: scores 0.5 * (0, 2) = (0, 1), weights (1, e) / (1 + e)
    expected = np.array([[1, 2], [(1 + 3 * e) / (1 + e), (2 + 4 * e) / (1 + e)]]).reshape(1, 1, 2, 2)
    np.testing.assert_allclose(adapter.forward(p), expected, rtol=1e-6)


def test_grouped_kv_heads_key_lengths_and_lower_right_causal_go_into_the_mask():
    p = rng_problem(1, H=4, H_kv=2, Tq=2, Tk=5, kv_lens=[5, 3], causal="lower-right")
    args = adapter.translate(p)
    assert not args["is_causal"] and args["key"].shape == (2, 5, 2, 4)
    i, j = np.arange(2)[:, None], np.arange(5)[None, :]
    want = (j <= i + 3)[None] & (np.arange(5) < np.array([5, 3])[:, None])[:, None, :]
    np.testing.assert_array_equal(np.asarray(args["mask"])[:, 0], want)
    close(adapter.forward(p), numpy_attention(p))


def test_upper_left_and_square_lower_right_are_is_causal():
    for causal, Tq, Tk in (("upper-left", 4, 2), ("lower-right", 3, 3)):
        p = rng_problem(2, Tq=Tq, Tk=Tk, causal=causal)
        args = adapter.translate(p)
        assert args["is_causal"] and args["mask"] is None
        if Tq <= Tk:  # upper-left with Tq > Tk empties rows: not the case here
            close(adapter.forward(p), numpy_attention(p))


@pytest.mark.parametrize("Tq, Tk, window", [(4, 4, (1, 0)), (2, 6, (2, 1)), (4, 6, (-1, 1))])
def test_window_is_translated_on_attncheck_diagonal(Tq, Tk, window):
    p = rng_problem(3, Tq=Tq, Tk=Tk, window=window)
    assert p.mask().any(-1).all()
    close(adapter.forward(p), numpy_attention(p))


def test_bias_and_default_scale():
    r = np.random.default_rng(4)
    p = rng_problem(4, bias=r.standard_normal((2, 2, 3, 3)).astype(np.float32))
    args = adapter.translate(p)
    assert args["scale"] is None and args["bias"].shape == (2, 2, 3, 3)
    close(adapter.forward(p), numpy_attention(p))


def test_empty_row_is_the_mean_of_all_values():
    allow = np.ones((1, 2, 3), bool)
    allow[0, 0] = False
    p = rng_problem(5, B=1, H=1, H_kv=1, Tq=2, Tk=3, allow=allow)
    out = adapter.forward(p)
    np.testing.assert_allclose(out[0, 0, 0], np.asarray(p.v, np.float64)[0, 0].mean(0), rtol=1e-6)


def test_f64_is_not_claimed():
    x = np.ones((1, 1, 2, 3))
    with pytest.raises(ValueError):
        adapter.translate(problem(x, x, x, dtype="f64"))
    assert adapter.ops_formats() == {"f32", "f16", "bf16"}


def dv_unlike_dk(seed=6):
    r = np.random.default_rng(seed)
    return problem(r.standard_normal((1, 1, 2, 3)), r.standard_normal((1, 1, 2, 3)), r.standard_normal((1, 1, 2, 2)))


@on_jax
def test_dv_unlike_dk_is_not_expressible_on_jax():
    with pytest.raises(NotExpressible):
        adapter.translate(dv_unlike_dk())
    assert adapter.setup(["--backend", "jax"])["restrictions"] == ["equal_head_dims"]


@on_torch
def test_dv_unlike_dk_runs_on_torch():
    p = dv_unlike_dk()
    close(adapter.forward(p), numpy_attention(p))
    assert adapter.setup(["--backend", "torch"])["restrictions"] == []


@on_torch
def test_a_bias_with_a_mask_is_not_expressible_on_torch_and_with_is_causal_raises():
    """keras' torch backend refuses a bias and a mask together (it passes either as SDPA's attn_mask),
    and passes a bias with is_causal=True on to torch, which raises
    (examples/keras/repro_torch_bias_with_causal_raises.py): passed on as raised."""
    bias = np.zeros((2, 2, 3, 3), np.float32)
    allow = np.ones((2, 3, 3), bool)
    with pytest.raises(NotExpressible, match="Only one of"):
        adapter.translate(rng_problem(11, bias=bias, allow=allow))
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal=True"):
        adapter.forward(rng_problem(11, bias=bias, causal="upper-left"))


LAYER_CASES = [  # shapes shared where they can be: each new shape compiles anew (eager JAX)
    ("plain, dk = dv not D/H", dict(B=2, H=2, Tq=4, D=4, dk=3, dv=3)),
    ("dk != dv, weights asked", dict(B=2, H=2, Tq=4, D=4, dk=3, dv=5, want_weights=True)),
    ("cross, key lengths, weights", dict(cross=True, B=2, H=2, Tq=4, Tk=5, D=4, dk=3, dv=3, kv_lens=[5, 2],
                                        want_weights=True)),
    ("q and o biases alone", dict(biases="qo", B=2, H=2, Tq=4, D=4, dk=3, dv=3)),
    ("no biases, upper-left cross", dict(biases="", cross=True, B=2, H=2, Tq=4, Tk=5, D=4, dk=3, dv=3,
                                        causal="upper-left")),
    ("lower-right cross", dict(cross=True, B=2, H=2, Tq=4, Tk=5, D=4, dk=3, dv=3, causal="lower-right",
                               want_weights=True)),
    ("symmetric window: sliding_window", dict(B=2, H=2, Tq=4, D=4, dk=3, dv=3, window=(1, 1))),
    ("one-sided window, causal", dict(B=2, H=2, Tq=4, D=4, dk=3, dv=3, window=(2, -1), causal="lower-right")),
]


@pytest.mark.parametrize("name, options", LAYER_CASES, ids=[c[0] for c in LAYER_CASES])
def test_the_layer_agrees_with_the_float64_reference(name, options):
    m = random_layer(np.random.default_rng(7), **options)
    result = adapter.layer(m)
    want_out, want_weights = reference(m)
    if m.want_weights:
        close(result[0], want_out)
        close(result[1], want_weights)
    else:
        close(result, want_out)


def test_layer_weights_and_native_forms():
    m = random_layer(np.random.default_rng(8), B=1, H=3, Tq=4, D=6, dk=2, dv=4, window=(1, 1))
    module, window = adapter.layer_module(m)
    assert window == 2  # |i - j| < 2: the window (1, 1)
    np.testing.assert_array_equal(np.asarray(module.query_dense.kernel), np.asarray(m.w_q, np.float32).reshape(6, 3, 2))
    np.testing.assert_array_equal(np.asarray(module.output_dense.kernel),
                                  np.asarray(m.w_o, np.float32).reshape(3, 4, 6))
    assert adapter.allowed_mask(m, native_causal=True, native_window=True, native_kv_lens=True) is None


def test_layer_limits_are_not_expressible():
    with pytest.raises(NotExpressible):
        adapter.layer(random_layer(np.random.default_rng(9), H=2, H_kv=1, D=4))
    with pytest.raises(NotExpressible):
        adapter.layer(random_layer(np.random.default_rng(9), H=2, D=4, scale=0.3))


@on_jax
def test_layer_with_dv_unlike_dk_raises_without_weights_on_jax():
    """keras' own: the op path on jax cannot take value_dim != key_dim
    (examples/keras/repro_mha_value_dim_unlike_key_dim_raises.py); the adapter passes it on as
    raised, it is not NotExpressible. On torch the same layer runs (the dk != dv cases above)."""
    m = random_layer(np.random.default_rng(10), B=1, H=2, Tq=3, D=4, dk=2, dv=3)
    with pytest.raises(TypeError, match="cannot reshape"):
        adapter.layer(m)


def test_a_keras_older_than_its_dot_product_attention_is_refused(capsys, monkeypatch):
    keras = adapter.keras

    def load_again():
        adapter.keras = None
        adapter.load(BACKEND)

    try:
        said = refusal(keras, "3.5.0", load_again, capsys, monkeypatch)
    finally:
        adapter.keras = keras
    assert said.startswith("attncheck.adapters.keras: keras 3.5.0 is older than 3.6, the first release with "
                           "keras.ops.dot_product_attention")


def test_keras_on_another_backend_is_refused(capsys):
    other = next(b for b in adapter.BACKENDS if b != BACKEND)
    with pytest.raises(SystemExit) as stopped:
        adapter.load(other)
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and said == f"attncheck.adapters.keras: keras runs on its {BACKEND} backend here, " \
                                               f"not {other} (KERAS_BACKEND)\n"
