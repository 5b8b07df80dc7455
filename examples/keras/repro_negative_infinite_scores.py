"""In keras.ops.dot_product_attention on the JAX backend a row whose every score is -inf (a bias of
-inf on each key, nothing masked) is NaN, where the contract gives those keys weight 0 and the row
0 (it has no permitted key), and a permitted score below the mask value -0.7 x finfo(float32).max
loses to the forbidden keys, which then take the whole weight. keras calls
jax.nn.dot_product_attention (implementation="xla"): both are inherited from jax
(examples/jax/repro_negative_infinite_scores.py), not keras' own.

attncheck's findings under --empty-rows mean --masked-inputs finite (--api ops, f32):
Property.ANegativeInfiniteScoreWeighsNothing, kind "wrong special value" (accepted under
--empty-rows nan); Property.ExplicitScaleIsHonoured, kind "wrong value", and
Property.OutputsLieBetweenPermittedValues, kind "wrong special value", both failing only with a bias
(accepted under --empty-rows any).

Shown with keras 3.15.1, jax 0.10.2, jaxlib 0.10.2, numpy 2.3.5 on the CPU (ci/requirements-keras.txt).
Run: KERAS_PYTHON examples/keras/repro_negative_infinite_scores.py
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
q = np.ones((1, 1, 1, 1), np.float32)  # B 1, T 1, N 1, H 1
k = np.ones((1, 2, 1, 1), np.float32)  # S 2
v = np.array([3.0, 5.0], np.float32).reshape(1, 2, 1, 1)
all_minus_inf = np.full((1, 1, 1, 2), -np.inf, np.float32)
row = float(np.asarray(keras.ops.dot_product_attention(q, k, v, bias=all_minus_inf)).ravel()[0])
print(f"both keys' bias -inf: out {row} (0 by the contract: no key has a finite score)")
key0_only = np.array([True, False]).reshape(1, 1, 1, 2)
very_low = np.array([-3.0e38, 0.0], np.float32).reshape(1, 1, 1, 2)
low = float(np.asarray(keras.ops.dot_product_attention(q, k, v, bias=very_low, mask=key0_only)).ravel()[0])
print(f"key 0 alone permitted, its bias -3e38: out {low} (3 by the contract: key 0's value; 5 is forbidden key 1's)")
if np.isnan(row) and low == 5.0:
    print("reproduced: a row of -inf scores is NaN, "
          "and a permitted score below the mask value loses to a forbidden key")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
