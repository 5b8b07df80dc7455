"""MLX 0.32.4's mx.fast.scaled_dot_product_attention on the CPU rounds the scale to the inputs'
format before it uses it: its CPU composite (mlx/fast.cpp) computes multiply(array(scale,
q.dtype), q), so a float16 call uses float16(scale) (0.420981467 becomes 0.4208984375, 2e-4
relative, about 2^-12) and then rounds q x scale to float16 too. The output of a call with the
scale 0.420981467 is the same, bit for bit, as with 0.4208984375, on every random case: the
scores are off by 2e-4 relative before anything else is rounded, which for scores of tens moves
the weights by more than float32 evaluation of the exact problem would (attncheck's bound).

attncheck's finding (attncheck.adapters.mlx, --dtype f16 --cases 50 --empty-rows mean
--masked-inputs finite): Property.KeyPaddingMaskConvertsByFlipping, "fails only with: f16,
explicit scale", shrunk to B 1, H 1, Tq 1, Tk 3, dk 4, dv 1, scale 0.420981467, error/bound 2.19
(5 float16 ulps); with --cases 50, B 3, H 3, Tq 16, Tk 7, error/bound 2.4.

Shown with mlx 0.32.4 and mlx-cpu 0.32.4 (PyPI, Linux x86_64), numpy 2.3.5 (ci/requirements-mlx.txt).
Run: $ATTNCHECK_MLX_PYTHON examples/mlx/repro_f16_scale_rounded.py
Exit 0 when the output with the scale equals the output with float16(scale) on every one of 200
random float16 cases, 1 otherwise.
"""
import sys

import mlx.core as mx
import numpy as np

print(f"mlx {mx.__version__}, numpy {np.__version__}")
mx.set_default_device(mx.cpu)
scale = 0.420981467
rounded = float(np.float16(scale))
print(f"scale {scale!r}, float16(scale) {rounded!r}")
rng = np.random.default_rng(1)
sdpa = mx.fast.scaled_dot_product_attention
same = 0
for _ in range(200):
    q, k, v = (mx.array(rng.normal(0, 4, shape).astype(np.float16)) for shape in ((1, 1, 4, 8), (1, 1, 6, 8), (1, 1, 6, 3)))
    a, b = np.array(sdpa(q, k, v, scale=scale)), np.array(sdpa(q, k, v, scale=rounded))
    same += np.array_equal(a, b)
print(f"equal to the float16(scale) output: {same} of 200")
if same == 200:
    print("reproduced: the scale is rounded to float16 before it is used")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
