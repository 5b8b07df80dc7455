"""A convention, not a bug: MLX 0.32.4's mx.fast.scaled_dot_product_attention on the CPU replaces
each score a bool mask forbids with finfo(dtype).min (where(mask, scores, finfo.min) in its CPU
composite, mlx/fast.cpp), so a row with no permitted key weighs all Tk keys alike and gives the
mean of V; "causal" with Tq > Tk does the same for its first rows. An additive mask of -inf (what
a bias that forbids is) gives NaN for such a row instead. A NaN in a forbidden value reaches the
output through the weight 0 x NaN. attncheck checks it under --empty-rows mean --masked-inputs
finite; the rows an additive -inf empties remain findings there (accepted under --empty-rows nan).

Shown with mlx 0.32.4 and mlx-cpu 0.32.4 (PyPI, Linux x86_64), numpy 2.3.5 (ci/requirements-mlx.txt).
Run: $ATTNCHECK_MLX_PYTHON examples/mlx/repro_empty_row_is_the_mean.py
Exit 0 when all three are seen (mean, NaN, NaN), 1 otherwise.
"""
import sys

import mlx.core as mx
import numpy as np

print(f"mlx {mx.__version__}, numpy {np.__version__}")
mx.set_default_device(mx.cpu)
sdpa = mx.fast.scaled_dot_product_attention
q, k = mx.zeros((1, 1, 1, 1)), mx.zeros((1, 1, 2, 1))
v = mx.array([[[[1.0], [3.0]]]])
none = sdpa(q, k, v, scale=1.0, mask=mx.zeros((1, 2), dtype=mx.bool_)).item()
additive = sdpa(q, k, v, scale=1.0, mask=mx.full((1, 2), -np.inf)).item()
poisoned = sdpa(q, k, mx.array([[[[1.0], [np.nan]]]]), scale=1.0, mask=mx.array([[True, False]])).item()
print(f"bool mask all False: {none} (mean of V 2); additive -inf everywhere: {additive}; "
      f"NaN in a forbidden value: {poisoned}")
if none == 2.0 and np.isnan(additive) and np.isnan(poisoned):
    print("reproduced: empty rows are the mean under a bool mask, NaN under -inf; forbidden values leak")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
