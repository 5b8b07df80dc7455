"""keras.ops.dot_product_attention on the JAX backend computes a float64 call in float32 and
returns float32, even with jax_enable_x64 set (under which jax.nn.dot_product_attention itself
returns float64): keras' type promotion makes every 64-bit float 32-bit on any backend but
TensorFlow (keras/src/backend/common/dtypes.py, BIT64_TO_BIT32_DTYPE, "to be aligned with JAX's
default behavior"), and the op casts its inputs to that result type first. keras' own, by design;
the adapter does not claim f64 (--api ops and mha).

Shown with keras 3.15.1, jax 0.10.2, jaxlib 0.10.2, numpy 2.3.5 on the CPU (ci/requirements-keras.txt).
Run: KERAS_PYTHON examples/keras/repro_float64_becomes_float32.py
Exit 0 when it reproduces, 1 otherwise.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} ({keras.backend.backend()}), jax {jax.__version__}, numpy {np.__version__}")
x = jnp.asarray(np.full((1, 1, 1, 1), 1 / 3), jnp.float64)  # B 1, T 1, N 1, H 1: out = v
ours = keras.ops.dot_product_attention(x, x, x)
theirs = jax.nn.dot_product_attention(x, x, x)
print(f"input {x.dtype} {float(x.ravel()[0])!r}; keras returns {ours.dtype} {float(np.asarray(ours).ravel()[0])!r}; "
      f"jax.nn.dot_product_attention {theirs.dtype} {float(np.asarray(theirs).ravel()[0])!r}")
if ours.dtype == jnp.float32 and theirs.dtype == jnp.float64 and float(np.asarray(ours).ravel()[0]) != 1 / 3:
    print("reproduced: keras computes and returns a float64 call in float32")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
