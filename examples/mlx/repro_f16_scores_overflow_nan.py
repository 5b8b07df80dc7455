"""MLX 0.32.4's mx.fast.scaled_dot_product_attention on the CPU keeps the scores q K^T in float16
for float16 inputs (the CPU composite in mlx/fast.cpp; only the softmax is in float32), so a score
beyond float16's range (65504) becomes inf before the softmax: one key whose score is
-2048 x 1024 = -2097152 (finite, exact in float32) gives a row of -inf, whose softmax is NaN; the
exact output is that key's value, 0. A forbidden key whose score overflows to +inf does the same
through an additive mask (inf + -inf = NaN), which attncheck reported as a poisoned forbidden input.

attncheck's findings (attncheck.adapters.mlx, --dtype f16 --cases 200 --empty-rows mean
--masked-inputs finite): Property.OutputsLieBetweenPermittedValues, shrunk to B 1, H 1, Tq 1,
Tk 1, dk 1, dv 1, q -2048, k 1024, v 0: out NaN; Property.ForbiddenKeysAndValuesCannotChangeValidOutputs
with key lengths and a bias, a forbidden key 32752 against q 3: out NaN where 0 is exact.

Shown with mlx 0.32.4 and mlx-cpu 0.32.4 (PyPI, Linux x86_64), numpy 2.3.5 (ci/requirements-mlx.txt).
Run: $ATTNCHECK_MLX_PYTHON examples/mlx/repro_f16_scores_overflow_nan.py
Exit 0 when both outputs are NaN, 1 otherwise.
"""
import sys

import mlx.core as mx
import numpy as np

print(f"mlx {mx.__version__}, numpy {np.__version__}")
mx.set_default_device(mx.cpu)
f16 = lambda values, shape: mx.array(np.array(values, np.float32).reshape(shape), dtype=mx.float16)
sdpa = mx.fast.scaled_dot_product_attention
one = sdpa(f16([-2048], (1, 1, 1, 1)), f16([1024], (1, 1, 1, 1)), f16([0], (1, 1, 1, 1)), scale=1.0).item()
print(f"one key, score -2097152: out {one} (exact 0)")
# key 1 forbidden by an additive mask (0 / -inf, as a bias with key lengths is given): its score 3 x 32752 overflows
mask = f16([0, -np.inf], (1, 2))
two = sdpa(f16([3], (1, 1, 1, 1)), f16([0, 32752], (1, 1, 2, 1)), f16([0, 0], (1, 1, 2, 1)), scale=1.0, mask=mask).item()
print(f"key 1 forbidden, its score 98256: out {two} (exact 0)")
if np.isnan(one) and np.isnan(two):
    print("reproduced: float16 scores overflow before the softmax and the row becomes NaN")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
