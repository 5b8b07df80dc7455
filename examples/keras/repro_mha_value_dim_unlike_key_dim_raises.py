"""keras.layers.MultiHeadAttention with value_dim != key_dim (both documented arguments) raises on
the JAX backend when it is called without return_attention_scores: that call goes to
keras.ops.dot_product_attention, whose JAX backend passes the heads to jax.nn.dot_product_attention
(which takes a value of the key's shape alone and raises "value shape should be ..."), catches that,
logs it and falls back to its own XLA reference, which reshapes the output to the query's shape
(keras/src/backend/jax/nn.py, `jnp.reshape(encoded, output_shape)`, output_shape = query.shape)
and raises a TypeError ("cannot reshape array of shape (B, T, K, G, dv) into shape (B, T, N, dk)").
The same layer with return_attention_scores=True takes its own einsum path and returns the right
output. keras' own (the op's fallback assumes dv = dk; the layer does not check it), reached
through jax's restriction.

attncheck's finding: Property.LayerAgreesWithOracle (and the other layer properties), kind
"raised" (TypeError), --api mha, any format, when dk != dv and no weights are asked.

Shown with keras 3.15.1, jax 0.10.2, jaxlib 0.10.2, numpy 2.3.5 on the CPU (ci/requirements-keras.txt).
Run: KERAS_PYTHON examples/keras/repro_mha_value_dim_unlike_key_dim_raises.py
Exit 0 when it reproduces, 1 otherwise.
"""
import logging
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

logging.disable(logging.CRITICAL)  # keras logs the jax exception it falls back from
print(f"keras {keras.__version__} ({keras.backend.backend()}), jax {jax.__version__}, numpy {np.__version__}")
x = np.random.default_rng(0).standard_normal((1, 3, 4)).astype(np.float32)  # B 1, T 3, D 4
layer = keras.layers.MultiHeadAttention(num_heads=2, key_dim=2, value_dim=3)
with_scores, _ = layer(x, x, return_attention_scores=True)
print(f"return_attention_scores=True: output of shape {tuple(with_scores.shape)}")
try:
    out = layer(x, x)
    print(f"without scores: output of shape {tuple(out.shape)}, "
          f"max difference {float(np.abs(np.asarray(out) - np.asarray(with_scores)).max())}")
except TypeError as error:
    print(f"without scores: raised TypeError: {str(error).splitlines()[0]} {str(error).splitlines()[2][:120]}")
    print("reproduced: MultiHeadAttention(key_dim=2, value_dim=3) raises unless it returns its scores")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
