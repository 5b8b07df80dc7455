"""The torch_mha adapter against the float64 NumPy layer (tests/layer_reference.py), on both paths,
through the protocol's own payload; that --path fast runs torch's fused kernel (seen by torch's own
profiler, apart from the adapter's counter) and --path slow does not; and torch 1.13's conventions.

Tolerances, relative to the largest |out| (or 1 for the weights): f64 1e-12, f32 1e-5, bf16 0.05
(inputs of unit scale, D <= 8: bf16 keeps 8 bits, and torch rounds each of its steps to bf16).

Run: cd python && /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/adapters/test_torch_mha.py
"""
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
torch = pytest.importorskip("torch")
from layer_reference import random_layer, reference  # noqa: E402
from attncheck.adapters import NotExpressible, torch_mha  # noqa: E402
from hand_cases import reload_refuses  # noqa: E402

TOLERANCE = {"f64": 1e-12, "f32": 1e-5, "bf16": 5e-2}


@pytest.fixture(scope="module", params=torch_mha.PATHS)
def adapter(request):
    torch.set_num_threads(1)
    return torch_mha.Adapter(request.param)


def close(got, want, dtype, what):
    scale = max(1.0, float(np.abs(want).max()))
    error = float(np.abs(np.asarray(got, np.float64) - want).max())
    assert error <= TOLERANCE[dtype] * scale, f"{what}: max error {error:.3g} > {TOLERANCE[dtype]} x {scale:.3g}"


def some_keys(rng, B, Tq, Tk):
    """A random allow mask [B,Tq,Tk] with at least one permitted key per row."""
    allow = rng.random((B, Tq, Tk)) < 0.6
    allow[np.arange(B)[:, None], np.arange(Tq)[None, :], rng.integers(0, Tk, (B, Tq))] = True
    return allow


def cases(path):
    """(name, layer options) for what each path claims, rows never empty."""
    rng = np.random.default_rng(11)
    out = []
    for dtype in ("f32", "f64", "bf16"):
        for biases in ("qkvo", ""):
            if path == "fast" and not biases:
                continue  # the fused kernel raises without biases (pytorch issue 97128): tested below
            out.append((f"{dtype} plain {biases or 'no'} biases", dict(dtype=dtype, biases=biases, B=2, H=2, Tq=3, D=4)))
            out.append((f"{dtype} kv_lens", dict(dtype=dtype, biases=biases, B=2, H=4, Tq=4, D=8, kv_lens=[4, 1],
                                                want_weights=True)))
            if path == "slow":
                out.append((f"{dtype} cross", dict(dtype=dtype, biases=biases, cross=True, B=2, H=2, Tq=2, Tk=5, D=4,
                                                  kv_lens=[5, 3], want_weights=True)))
                out.append((f"{dtype} allow", dict(dtype=dtype, biases=biases, B=2, H=1, Tq=3, D=4,
                                                  allow=some_keys(rng, 2, 3, 3), want_weights=True)))
                out.append((f"{dtype} upper-left cross", dict(dtype=dtype, biases=biases, cross=True, B=1, H=2, Tq=4,
                                                             Tk=3, D=4, causal="upper-left", want_weights=True)))
                out.append((f"{dtype} lower-right", dict(dtype=dtype, biases=biases, cross=True, B=1, H=2, Tq=2, Tk=5,
                                                        D=4, causal="lower-right", kv_lens=[5])))
                out.append((f"{dtype} window", dict(dtype=dtype, biases=biases, B=2, H=2, Tq=5, D=4, window=(1, 1),
                                                   allow=some_keys(rng, 2, 5, 5) | np.eye(5, dtype=bool),
                                                   want_weights=True)))
    return out


@pytest.mark.parametrize("path", torch_mha.PATHS)
def test_the_layer_agrees_with_the_float64_reference(path):
    adapter = torch_mha.Adapter(path)
    rng = np.random.default_rng(3)
    for name, options in cases(path):
        m = random_layer(rng, **options)
        if options.get("allow") is not None:
            assert m.mask().any(axis=-1).all()
        result = adapter(m)
        want_out, want_weights = reference(m)
        out = result[0] if m.want_weights else result
        close(out, want_out, m.dtype, f"{path} {name} out")
        if m.want_weights:
            close(result[1], want_weights, m.dtype, f"{path} {name} weights")
            assert result[1].dtype == (np.float64 if m.dtype == "f64" else np.float32)


LEGACY = not hasattr(torch.nn.functional, "scaled_dot_product_attention")  # torch 1.13
only_113 = pytest.mark.skipif(not LEGACY, reason="a torch 1.13 convention")
needs_2x = pytest.mark.skipif(LEGACY, reason="torch 2.x's fast path")


def test_the_claims_are_what_each_path_runs():
    slow = {"f32", "f64", "bf16", "allow", "causal", "kv_lens", "window", "mha", "mha_weights"}
    if LEGACY:  # 1.13: no float16 addmm on the CPU; the fast path takes no attn_mask
        assert torch_mha.Adapter("slow").capabilities == slow
        assert torch_mha.Adapter("fast").capabilities == {"f32", "f64", "bf16", "kv_lens", "mha", "mha_weights"}
    else:  # measured on 2.15: float16 too, and the fast path merges a bool attn_mask into its mask
        assert torch_mha.Adapter("slow").capabilities == slow | {"f16"}
        assert torch_mha.Adapter("fast").capabilities == slow | {"f16"}


def profiled_ops(adapter, m):
    with torch.autograd.profiler.profile() as profile:
        adapter(m)
    return {event.name for event in profile.function_events}


def test_the_fast_path_runs_the_fused_kernel_and_the_slow_path_does_not():
    rng = np.random.default_rng(4)
    m = random_layer(rng, B=2, H=2, Tq=3, D=4, kv_lens=[3, 2], want_weights=True)
    fast, slow = torch_mha.Adapter("fast"), torch_mha.Adapter("slow")
    fast_ops, slow_ops = profiled_ops(fast, m), profiled_ops(slow, m)
    assert "aten::_native_multi_head_attention" in fast_ops, sorted(fast_ops)
    assert "aten::_native_multi_head_attention" not in slow_ops and "aten::softmax" in slow_ops
    # and the counter the adapter checks agrees
    before = torch_mha.fast_path_counter().calls
    fast(m)
    assert torch_mha.fast_path_counter().calls == before + 1
    slow(m)
    assert torch_mha.fast_path_counter().calls == before + 1
    # the slow path runs with autograd on: its out has a grad_fn
    module = slow.module(m)
    module.train()
    x = torch.from_numpy(np.array(m.x_q))
    assert module(x, x, x)[0].grad_fn is not None


def test_the_fast_path_refuses_what_would_fall_back():
    rng = np.random.default_rng(5)
    fast = torch_mha.Adapter("fast")
    with pytest.raises(NotExpressible, match="cross-attention"):
        fast(random_layer(rng, cross=True, Tq=2, Tk=3))
    with pytest.raises(NotExpressible, match=r"an odd H: .*\(H 1\)"):
        fast(random_layer(rng, H=1))


def test_what_neither_path_can_express_raises_not_expressible(adapter):
    rng = np.random.default_rng(6)
    for options, words in ((dict(H=2, H_kv=1), "one num_heads"), (dict(H=2, D=4, dk=1), "D / H wide"),
                           (dict(H=2, D=4, dv=3), "D / H wide"), (dict(biases="qkv"), "biases b_q, b_k, b_v alone"),
                           (dict(scale=0.3), "always scales")):
        with pytest.raises(NotExpressible, match=words):
            adapter(random_layer(rng, **options))
    # the scale 1/sqrt(dk) itself is torch's own
    m = random_layer(rng, H=2, D=4, scale=1 / math.sqrt(2))
    close(adapter(m), reference(m)[0], "f32", "explicit default scale")


@only_113
def test_torch_1_13_fast_path_raises_without_biases():
    """pytorch issue 97128: bias=False reaches the fused kernel, which takes no None bias."""
    rng = np.random.default_rng(7)
    with pytest.raises(TypeError, match="qkv_bias"):
        torch_mha.Adapter("fast")(random_layer(rng, B=1, H=2, Tq=2, D=4, biases=""))


@needs_2x
def test_torch_2x_fast_path_without_biases_is_not_expressible():
    """2.x's forward takes the fused kernel only with in_proj_bias: without, it falls back to the slow
    path, so the fast path cannot be given such a layer."""
    rng = np.random.default_rng(7)
    assert not torch_mha.fused_kernel_takes_no_biases()
    with pytest.raises(NotExpressible, match="no biases"):
        torch_mha.Adapter("fast")(random_layer(rng, B=1, H=2, Tq=2, D=4, biases=""))


def test_torch_convention_a_row_with_no_permitted_key_is_nan_across_the_row(adapter):
    """pytorch issue 160064: the NaN head goes through out_proj into every column of out."""
    rng = np.random.default_rng(8)
    m = random_layer(rng, B=2, H=2, Tq=2, D=4, kv_lens=[0, 2], want_weights=True)
    out, weights = adapter(m)
    assert np.isnan(out[0]).all() and np.isnan(weights[0]).all()
    close(out[1], reference(m)[0][1], "f32", "the other batch")
    # the contract's row is b_o (head 0); NaN under --empty-rows nan
    assert np.allclose(reference(m)[0][0], m.b_o)


def test_a_torch_older_than_1_13_is_refused(capsys, monkeypatch):
    said = reload_refuses(torch_mha, torch, "1.12.1", capsys, monkeypatch)
    assert said.startswith("attncheck.adapters.torch_mha: torch 1.12.1 is older than 1.13")
