"""keras.layers.MultiHeadAttention(dtype="float16") with return_attention_scores=True rounds its
scores to float16 before the softmax: that path is keras' own (its einsum of the float16 query,
scaled by the key_dim's 1/sqrt cast to float16, and key, then a Softmax layer), not
ops.dot_product_attention, and a float16 einsum stores its result in float16 (spacing 2^-7 for
scores of 8 to 16). A weight exp(s_j - s_max) / sum then carries the score's rounding error, up to
|s| x 2^-11 relative: units of float16 where storing an exactly computed weight costs half
of one. attncheck's bound for a float16 layer assumes scores computed in float32, stored in float16.

Here: one head, key_dim 1 (scale 1), identity kernels, no biases; query 1.5009765625, keys
5.50390625 and 0 (both exact in float16): the score 8.26123428... is stored as 8.2578125, and the
small weight, 2.5827e-4 exactly, comes out 2.5916e-4 = the softmax of the rounded score (0.34 %, 3.7
float16 units, off).

attncheck's finding under --empty-rows mean --masked-inputs finite (--api mha, f16):
Property.LayerAgreesWithOracle, kind "wrong value", a weight 1.04 times its bound.

Shown with keras 3.15.1, jax 0.10.2, jaxlib 0.10.2, numpy 2.3.5 on the CPU (ci/requirements-keras.txt).
Run: KERAS_PYTHON examples/keras/repro_mha_f16_scores_rounded.py
Exit 0 when it reproduces, 1 otherwise.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} ({keras.backend.backend()}), jax {jax.__version__}, numpy {np.__version__}")
layer = keras.layers.MultiHeadAttention(num_heads=1, key_dim=1, use_bias=False, dtype="float16")
q, k0 = 1.5009765625, 5.50390625
x_q = np.array([[[q]]], np.float16)
x_kv = np.array([[[k0], [0.0]]], np.float16)
layer.build(x_q.shape, x_kv.shape)
for dense in (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense):
    dense.kernel.assign(np.ones((1, 1, 1), np.float16))
_, weights = layer(x_q, x_kv, return_attention_scores=True)
got = float(np.asarray(weights, np.float64).ravel()[1])
s = q * k0
exact = np.exp(-s) / (1 + np.exp(-s))
s16 = float(np.float16(s))
from_rounded = np.exp(-s16) / (1 + np.exp(-s16))
units = abs(got - exact) / (2.0 ** -12 * 2.0 ** -10)  # float16 spacing at 2.6e-4 (2^-12 .. 2^-11): 2^-22
print(f"score {s!r}, stored in float16 as {s16!r}; weight of key 1: {got!r}, exactly {exact!r} "
      f"({abs(got - exact) / exact:.2%} off, {units:.1f} float16 units), softmax of the rounded score {from_rounded!r}")
if abs(got - from_rounded) / from_rounded < 2.0 ** -11 and units > 2:
    print("reproduced: the float16 layer's weights are the softmax of scores rounded to float16")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
