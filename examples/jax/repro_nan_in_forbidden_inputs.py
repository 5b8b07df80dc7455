"""A NaN in the value or key of a key that the mask forbids reaches jax.nn.dot_product_attention's
results: in the forward, its weight is exactly 0 but the weights are multiplied with all of V
(0 x NaN is NaN); in the backward (jax.vjp), the forbidden key's score gradient is 0 and is
multiplied with all of K for dq (0 x NaN again), and dP = dO V^T is NaN in the forbidden column.

attncheck's findings under the strict contract: Property.BackwardIgnoresForbiddenKeys and
Property.BackwardScoreRowsSumToZero, kind "wrong special value" (dq NaN where it is 0 or finite,
with a NaN among the forbidden keys' drawn bits in bf16 and f16), and in the forward
Property.ForbiddenKeysAndValuesCannotChangeValidOutputs when a campaign reaches it. --masked-inputs
finite draws no NaN or inf where no query looks.

Shown with jax 0.7.1, jaxlib 0.7.1, numpy 1.26.4 on the CPU (implementation="xla").
Run: VENV_PYTHON examples/jax/repro_nan_in_forbidden_inputs.py
Exit 0 when it reproduces, 1 when the forbidden NaN stays out.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
f = jnp.float32
key0_only = jnp.array([True, False]).reshape(1, 1, 1, 2)  # B 1, N 1, T 1, S 2: key 1 forbidden
attention = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=key0_only)
q = jnp.ones((1, 1, 1, 1), f)
k_clean = jnp.zeros((1, 2, 1, 1), f)
k_nan = jnp.array([0.0, jnp.nan], f).reshape(1, 2, 1, 1)
v_clean = jnp.array([10.0, 20.0], f).reshape(1, 2, 1, 1)
v_nan = jnp.array([10.0, jnp.nan], f).reshape(1, 2, 1, 1)
out = float(jax.jit(attention)(q, k_clean, v_nan).ravel()[0])
print(f"forward, forbidden key 1's value NaN: out {out} (10 by the contract)")
dout = jnp.ones((1, 1, 1, 1), f)
backward = jax.jit(lambda q, k, v: jax.vjp(attention, q, k, v)[1](dout))
dq_v = float(backward(q, k_clean, v_nan)[0].ravel()[0])
dq_k = float(backward(q, k_nan, v_clean)[0].ravel()[0])
print(f"backward, forbidden value NaN: dq {dq_v}; forbidden key NaN: dq {dq_k} (0 by the contract: one permitted key)")
if np.isnan(out) and np.isnan(dq_v) and np.isnan(dq_k):
    print("reproduced: a NaN where no query may look reaches out and dq (0 x NaN)")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
