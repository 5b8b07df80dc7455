"""MLX 0.32.4's mx.fast.scaled_dot_product_attention takes float64 on the CPU and returns float64,
but its softmax is computed in float32 ("The softmax operation is performed in float32 regardless
of the input precision", its docstring): for scores 0 and -1 and values 0 and 1 the output is
0.2689414262600511, 4.9e-9 from the exact 1/(1 + e) = 0.2689414213699951, float32's precision
(about 2^-26 relative), where float64 would be within a few 1e-17. mx.softmax(precise=True) on the
same float64 scores gives the same error. Documented, so the adapter claims f64 only with --f64.

attncheck's finding (attncheck.adapters.mlx --f64, --dtype f64 --cases 200): Property.AgreesWithOracleInDouble,
shrunk to B 1, H 1, Tq 1, Tk 2, dk 1, dv 1 (q 1, k 0 -1, v 0 1), error/bound 5.81e6.

Shown with mlx 0.32.4 and mlx-cpu 0.32.4 (PyPI, Linux x86_64), numpy 2.3.5 (ci/requirements-mlx.txt).
Run: $ATTNCHECK_MLX_PYTHON examples/mlx/repro_float64_softmax_in_float32.py
Exit 0 when the float64 output is off by more than 1e-12, 1 otherwise.
"""
import math
import sys

import mlx.core as mx
import numpy as np

print(f"mlx {mx.__version__}, numpy {np.__version__}")
mx.set_default_device(mx.cpu)
f64 = lambda values, shape: mx.array(np.array(values, np.float64).reshape(shape), dtype=mx.float64)
out = mx.fast.scaled_dot_product_attention(f64([1], (1, 1, 1, 1)), f64([0, -1], (1, 1, 2, 1)),
                                           f64([0, 1], (1, 1, 2, 1)), scale=1.0)
exact = 1 / (1 + math.e)
print(f"out {out.dtype} {out.item()!r}, exact {exact!r}, error {out.item() - exact:.3g}")
if out.dtype == mx.float64 and abs(out.item() - exact) > 1e-12:
    print("reproduced: a float64 call computed at float32's precision")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
