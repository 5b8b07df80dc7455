"""MLX 0.32.4's mx.fast.scaled_dot_product_attention adds an additive mask to the scores: a key an
additive mask forbids (-inf) whose score overflows to +inf gives inf + -inf = NaN, and the row is
NaN, with finite inputs. Float32: q 3.02e23 and k 6.34e29 score 1.9e53, past float32's 3.4e38. A
bool mask does not have it (where(mask, scores, finfo.min) replaces the score), but a bias that
forbids a key, or any mask an MLX user combines with a bias, is additive.

attncheck's finding (attncheck.adapters.mlx, --dtype f32 --cases 200 --empty-rows nan
--masked-inputs finite): Property.PermutingKeysOrQueries, changed by a poisoned forbidden input,
"fails only with: bias", shrunk to B 1, H 1, Tq 1, Tk 2, dk 1, dv 1, q 3.02231455e+23,
k 0 6.338253e+29, v 0 0, bias 0 -inf: out NaN for 0.

Shown with mlx 0.32.4 and mlx-cpu 0.32.4 (PyPI, Linux x86_64), numpy 2.3.5 (ci/requirements-mlx.txt).
Run: $ATTNCHECK_MLX_PYTHON examples/mlx/repro_forbidden_key_score_overflow.py
Exit 0 when the additive mask gives NaN and the bool mask 0, 1 otherwise.
"""
import sys

import mlx.core as mx
import numpy as np

print(f"mlx {mx.__version__}, numpy {np.__version__}")
mx.set_default_device(mx.cpu)
f32 = lambda values, shape: mx.array(np.array(values, np.float32).reshape(shape))
q, k, v = f32([3.02231455e23], (1, 1, 1, 1)), f32([0, 6.338253e29], (1, 1, 2, 1)), f32([0, 0], (1, 1, 2, 1))
sdpa = mx.fast.scaled_dot_product_attention
additive = sdpa(q, k, v, scale=1.0, mask=f32([0, -np.inf], (1, 2))).item()
boolean = sdpa(q, k, v, scale=1.0, mask=mx.array([[True, False]])).item()
print(f"key 1 forbidden, its score 1.9e53: additive mask out {additive}, bool mask out {boolean} (exact 0)")
if np.isnan(additive) and boolean == 0:
    print("reproduced: an overflowing forbidden score defeats the additive mask")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
