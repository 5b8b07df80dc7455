"""MLX 0.32.4's mx.fast.scaled_dot_product_attention on the CPU rounds the scores to bfloat16
before its softmax: q times the scale and q K^T are bfloat16 arrays (the CPU composite in
mlx/fast.cpp), and only then is the softmax taken in float32 (its docstring: "The softmax
operation is performed in float32 regardless of the input precision"). Two scores 1023 and
1027.125 (exact from bfloat16 inputs) both round to 1024 and are weighed alike, 0.5 each, where
the exact weights are 0.016 and 0.984: the output is 0.5 for an exact 0.984.

attncheck's finding (attncheck.adapters.mlx, --dtype bf16 --cases 200 --empty-rows mean
--masked-inputs finite): Property.ForbiddenKeysAndValuesCannotChangeValidOutputs, "row breaks the
contract before anything is poisoned", error/bound 2.36 (B 2, H 1, Tq 5, Tk 4, dk 2, dv 1),
cause "scores rounded to bfloat16 before the softmax: scores 1023 and 1027.125 came out weighed
alike"; Property.AllTrueMaskEqualsNoMask met the same. This script is that cause, made plain.

Shown with mlx 0.32.4 and mlx-cpu 0.32.4 (PyPI, Linux x86_64), numpy 2.3.5 (ci/requirements-mlx.txt).
Run: $ATTNCHECK_MLX_PYTHON examples/mlx/repro_bf16_scores_rounded.py
Exit 0 when the output is the rounded scores' 0.5, 1 otherwise.
"""
import math
import sys

import mlx.core as mx
import numpy as np

print(f"mlx {mx.__version__}, numpy {np.__version__}, {mx.default_device()}")
mx.set_default_device(mx.cpu)
bf16 = lambda values, shape: mx.array(np.array(values, np.float32).reshape(shape), dtype=mx.bfloat16)
q = bf16([1, 1], (1, 1, 1, 2))
k = bf16([1024, -1, 1024, 3.125], (1, 1, 2, 2))  # scores 1023 and 1027.125, exact
v = bf16([0, 1], (1, 1, 2, 1))
out = mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0).astype(mx.float32).item()
exact = 1 / (1 + math.exp(-4.125))
print(f"out {out}, exact {exact:.6f} (weights of the scores 1023 and 1027.125: {1 - exact:.6f}, {exact:.6f})")
if out == 0.5:
    print("reproduced: the scores were rounded to bfloat16 (both 1024) before the softmax")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
