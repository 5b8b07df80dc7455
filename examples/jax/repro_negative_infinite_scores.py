"""jax.nn.dot_product_attention puts the finite -0.7 x finfo(float32).max in place of a forbidden
key's score (jax/_src/nn/functions.py, _get_large_negative), and leaves a permitted key's own score
as it is. So:
  1. a row whose every score is -inf (here an -inf key, nothing masked) gives NaN: its softmax is
     exp(-inf - (-inf)), not the 0 of a row its mask empties nor the mean the function gives then;
  2. a permitted key whose score is -inf, or merely below -0.7 x 3.4e38 = -2.38e38 (finite
     inputs), loses to a forbidden key, which then gets all the weight: the output is the
     forbidden key's value.

attncheck's findings: Property.ANegativeInfiniteScoreWeighsNothing, kind "wrong special value"
(its fixed case: 2 of 2 keys scoring -inf, out NaN, not 0; accepted under --empty-rows nan only,
so it stays under --empty-rows mean); docs/contract.md ("Policies") names case 2 as a finding under
--empty-rows mean too.

Shown with jax 0.7.1, jaxlib 0.7.1, numpy 1.26.4 on the CPU (implementation="xla").
Run: VENV_PYTHON examples/jax/repro_negative_infinite_scores.py
Exit 0 when all three reproduce, 1 otherwise.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
f = jnp.float32
attention = jax.jit(lambda q, k, v, mask: jax.nn.dot_product_attention(q, k, v, mask=mask, scale=1.0))
# B 1, T 1 query, S 2 keys, N 1, H 1 (JAX's layout). Values: key 0 -> 10, key 1 -> 20.
q = jnp.ones((1, 1, 1, 1), f)
v = jnp.array([10.0, 20.0], f).reshape(1, 2, 1, 1)
everything = jnp.ones((1, 1, 1, 2), bool)
key0_only = jnp.array([True, False]).reshape(1, 1, 1, 2)

all_minus_inf = float(attention(q, jnp.full((1, 2, 1, 1), -jnp.inf, f), v, everything).ravel()[0])
print(f"1. both keys score -inf, both permitted: out {all_minus_inf} (0 by the contract, 15 as the mean)")
minus_inf_key = float(attention(q, jnp.array([-jnp.inf, 0.0], f).reshape(1, 2, 1, 1), v, key0_only).ravel()[0])
print(f"2. key 0 permitted, scoring -inf; key 1 forbidden: out {minus_inf_key} (key 1's value is 20)")
low_key = float(attention(q, jnp.array([-3e38, 0.0], f).reshape(1, 2, 1, 1), v, key0_only).ravel()[0])
print(f"3. key 0 permitted, scoring -3e38 (finite); key 1 forbidden: out {low_key} (only key 0 may be seen: 10)")
if np.isnan(all_minus_inf) and minus_inf_key == 20.0 and low_key == 20.0:
    print("reproduced: an all -inf row is NaN, and a permitted score below the mask value loses to a forbidden key")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
