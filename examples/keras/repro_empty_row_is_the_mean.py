"""A row with no permitted key is the uniform mean of V over all keys in
keras.ops.dot_product_attention on the JAX backend, not 0, and so is the layer's: keras calls
jax.nn.dot_product_attention (implementation="xla"), whose forbidden scores are all the same finite
-0.7 x finfo(float32).max (inherited from jax: examples/jax/repro_empty_row_is_the_mean.py).
keras.layers.MultiHeadAttention without return_attention_scores calls the op, and its empty row is
the mean too; with return_attention_scores=True it takes its own path (einsum and a Softmax layer
that sets forbidden scores to -1e9 and then zeroes their weights, keras/src/layers/activations/
softmax.py: "in case the entire axis is masked"), and there the row is 0, as the contract says.
The same layer call gives two answers for an empty row depending on whether the weights are asked.

attncheck's findings under the strict contract: Property.EmptyRowsFollowThePolicy, kind "wrong
value" (--api ops; accepted under --empty-rows mean); --api mha the same when the weights are not asked.

Shown with keras 3.15.1, jax 0.10.2, jaxlib 0.10.2, numpy 2.3.5 on the CPU (ci/requirements-keras.txt).
Run: KERAS_PYTHON examples/keras/repro_empty_row_is_the_mean.py
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
nothing = np.zeros((1, 1, 1, 3), bool)  # B 1, N 1, T 1, S 3: every key forbidden
q = np.ones((1, 1, 1, 1), np.float32)
k = np.array([0.0, 5.0, -3.0], np.float32).reshape(1, 3, 1, 1)
v = np.array([3.0, 6.0, 12.0], np.float32).reshape(1, 3, 1, 1)
out = float(np.asarray(keras.ops.dot_product_attention(q, k, v, mask=nothing)).ravel()[0])
print(f"ops, no key permitted: out {out} (0 by the contract; the mean of 3, 6, 12 is 7)")
# The layer: D 1, one head of width 1, identity projections, no biases; the query's row masked out.
layer = keras.layers.MultiHeadAttention(num_heads=1, key_dim=1, use_bias=False)
x_q, x_kv = q.reshape(1, 1, 1), v.reshape(1, 3, 1)
layer.build(x_q.shape, x_kv.shape)
for dense in (layer.query_dense, layer.key_dense, layer.value_dense):
    dense.kernel.assign(np.ones((1, 1, 1), np.float32))
layer.output_dense.kernel.assign(np.ones((1, 1, 1), np.float32))
mask = np.zeros((1, 1, 3), bool)
plain = float(np.asarray(layer(x_q, x_kv, attention_mask=mask)).ravel()[0])
with_scores, scores = layer(x_q, x_kv, attention_mask=mask, return_attention_scores=True)
scores = np.asarray(scores).ravel()
print(f"MultiHeadAttention, no key permitted: out {plain}, with scores {float(np.asarray(with_scores).ravel()[0])}, "
      f"weights {scores.tolist()} (0 by the contract)")
if out == 7.0 and plain == 7.0 and float(np.asarray(with_scores).ravel()[0]) == 0.0 and not scores.any():
    print("reproduced: an empty row is the mean of V in the op and in the layer, "
          "but 0 when the layer returns its scores")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
