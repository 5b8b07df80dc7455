"""The onnxruntime_attention adapter (com.microsoft Attention, then MatMul w_o and Add b_o) against
the float64 NumPy layer (tests/layer_reference.py), through the protocol's own payload, and
ONNX Runtime's conventions (1.30 and later) for masked keys.

Tolerance: float32, 1e-5 relative to the largest |out| (inputs of unit scale, D <= 12).

Run: cd python && $ATTNCHECK_VENV_PYTHON -m pytest -q -p no:cacheprovider tests/adapters/test_onnxruntime_attention.py
"""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from layer_reference import random_layer, reference  # noqa: E402
from attncheck.adapters import NotExpressible, onnxruntime_attention as adapter  # noqa: E402
from hand_cases import reload_refuses  # noqa: E402

TOLERANCE = 1e-5


def close(got, want, what):
    scale = max(1.0, float(np.abs(want).max()))
    error = float(np.abs(np.asarray(got, np.float64) - want).max())
    assert error <= TOLERANCE * scale, f"{what}: max error {error:.3g} > {TOLERANCE} x {scale:.3g}"


def some_keys(rng, B, S):
    allow = rng.random((B, S, S)) < 0.6
    allow |= np.eye(S, dtype=bool)  # each query its own key: no row is empty, under causal or a window too
    return allow


def test_the_layer_agrees_with_the_float64_reference():
    rng = np.random.default_rng(21)
    cases = {
        "plain": dict(B=2, H=2, Tq=3, D=4),
        "no biases": dict(B=2, H=2, Tq=3, D=4, biases=""),
        "b_v and b_o alone": dict(B=1, H=2, Tq=3, D=4, biases="vo"),
        "dk, dv free of D": dict(B=2, H=3, Tq=4, D=5, dk=2, dv=4),
        "D below H dk": dict(B=1, H=4, Tq=2, D=3, dk=3, dv=3),
        "scale": dict(B=1, H=2, Tq=3, D=4, scale=0.3),
        "negative scale": dict(B=1, H=2, Tq=3, D=4, scale=-0.7),
        "causal": dict(B=2, H=2, Tq=5, D=4, causal="upper-left"),
        "lower-right": dict(B=1, H=2, Tq=4, D=4, causal="lower-right"),
        "kv_lens": dict(B=3, H=2, Tq=4, D=4, kv_lens=[4, 1, 2]),
        "kv_lens and causal": dict(B=2, H=2, Tq=4, D=4, kv_lens=[4, 2], causal="upper-left"),
        "allow": dict(B=2, H=2, Tq=4, D=4, allow=some_keys(rng, 2, 4)),
        "allow, kv_lens and causal": dict(B=2, H=1, Tq=4, D=4, allow=some_keys(rng, 2, 4), kv_lens=[4, 4],
                                          causal="upper-left"),
        "window": dict(B=2, H=2, Tq=6, D=4, window=(1, 2)),
        "window and causal": dict(B=1, H=2, Tq=6, D=4, window=(2, 0), causal="lower-right", dk=3, dv=1),
        "window, allow and kv_lens": dict(B=2, H=2, Tq=5, D=4, window=(3, 1), allow=some_keys(rng, 2, 5),
                                          kv_lens=[5, 4]),
    }
    for name, options in cases.items():
        m = random_layer(rng, **options)
        assert m.mask().any(axis=-1).all(), name
        close(adapter.layer(m), reference(m)[0], name)


def test_the_masks_reach_the_operator_as_its_own_inputs():
    rng = np.random.default_rng(22)
    feeds, attributes = adapter.translate(random_layer(rng, B=2, H=2, Tq=3, D=4, kv_lens=[3, 1], causal="upper-left"))
    assert feeds["mask_index"].tolist() == [3, 1] and dict(attributes)["unidirectional"] == 1
    allow = some_keys(rng, 1, 3)
    feeds, attributes = adapter.translate(random_layer(rng, B=1, H=2, Tq=3, D=4, allow=allow, kv_lens=[2]))
    assert feeds["mask_index"].dtype == np.int32 and feeds["mask_index"].shape == (1, 3, 3)
    assert feeds["mask_index"].tolist() == (allow & (np.arange(3) < 2)).astype(int).tolist()
    assert "unidirectional" not in dict(attributes) and dict(attributes)["num_heads"] == 2
    # the packed weights and bias, zeros for the missing b_q and b_k
    m = random_layer(rng, B=1, H=2, Tq=2, D=4, dk=1, dv=3, biases="v")
    feeds, attributes = adapter.translate(m)
    assert feeds["weights"].shape == (4, 2 + 2 + 6) and np.array_equal(feeds["weights"][:, 4:], m.w_v)
    assert feeds["bias"][:4].tolist() == [0, 0, 0, 0] and np.array_equal(feeds["bias"][4:], m.b_v)
    assert dict(attributes)["qkv_hidden_sizes"] == (2, 2, 6)


def test_what_the_operator_cannot_express_raises():
    rng = np.random.default_rng(23)
    with pytest.raises(NotExpressible, match="cross-attention"):
        adapter.layer(random_layer(rng, cross=True, Tq=2, Tk=3))
    with pytest.raises(NotExpressible, match="one num_heads"):
        adapter.layer(random_layer(rng, H=2, H_kv=1))
    with pytest.raises(ValueError, match="not claimed"):
        adapter.layer(random_layer(rng, dtype="f64"))
    with pytest.raises(ValueError, match="mha_weights is not claimed"):
        adapter.layer(random_layer(rng, want_weights=True))
    assert adapter.CAPABILITIES == {"f32", "allow", "causal", "kv_lens", "window", "mha"}


def test_ort_convention_a_row_with_no_permitted_key_is_the_unmasked_row():
    """mask_filter_value -10000 added to every key of the row: the softmax is the unmasked one."""
    rng = np.random.default_rng(24)
    for options in (dict(kv_lens=[0, 3]), dict(allow=np.array([np.zeros((3, 3)), np.ones((3, 3))], bool))):
        m = random_layer(rng, B=2, H=2, Tq=3, D=4, **options)
        unmasked = random_layer(np.random.default_rng(0), B=2, H=2, Tq=3, D=4)
        # the same layer without its mask: rebuild it from m's own fields
        unmasked.__dict__.update({k: v for k, v in m.__dict__.items() if k not in ("allow", "kv_lens", "payload")})
        out = adapter.layer(m)
        np.testing.assert_allclose(out[0], reference(unmasked)[0][0], atol=1e-2)  # score - 10000 in float32
        assert not np.allclose(out[0], m.b_o, atol=1e-2)  # the contract's row: b_o
        close(out[1], reference(m)[0][1], "the other batch")


def test_an_onnxruntime_older_than_the_oldest_checked_is_refused(capsys, monkeypatch):
    said = reload_refuses(adapter, adapter.ort, "1.15.1", capsys, monkeypatch)
    assert said.startswith("attncheck.adapters.onnxruntime_attention: onnxruntime 1.15.1 is older than 1.16")
