"""A NaN in a value no query may look at reaches the output of keras.ops.dot_product_attention on
the JAX backend: keras calls jax.nn.dot_product_attention (implementation="xla"), which multiplies
every weight, 0 for a forbidden key, by its value, and 0 x NaN is NaN (inherited from jax:
examples/jax/repro_nan_in_forbidden_inputs.py). The contract says a forbidden key's inputs change
nothing.

attncheck's findings under the strict contract: Property.AgreesWithOracleInFloat, kind "changed by
a poisoned forbidden input" (accepted under --masked-inputs finite), and the NaN of
ForbiddenKeysAndValuesCannotChangeValidOutputs and OutputsLieBetweenPermittedValues (--api ops, f32).

Shown with keras 3.15.1, jax 0.10.2, jaxlib 0.10.2, numpy 2.3.5 on the CPU (ci/requirements-keras.txt).
Run: KERAS_PYTHON examples/keras/repro_nan_in_forbidden_inputs.py
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
q = np.ones((1, 1, 1, 1), np.float32)   # B 1, T 1, N 1, H 1
k = np.ones((1, 2, 1, 1), np.float32)   # S 2
v = np.array([5.0, np.nan], np.float32).reshape(1, 2, 1, 1)
key0_only = np.array([True, False]).reshape(1, 1, 1, 2)
out = float(np.asarray(keras.ops.dot_product_attention(q, k, v, mask=key0_only)).ravel()[0])
print(f"key 1 forbidden, its value NaN: out {out} (5 by the contract: key 0 alone, value 5)")
if np.isnan(out):
    print("reproduced: a forbidden value's NaN reaches the output")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
