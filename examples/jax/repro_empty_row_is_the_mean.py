"""A row with no permitted key is the uniform mean of V over all keys in
jax.nn.dot_product_attention (implementation="xla"), not 0: its forbidden scores are all the same
finite -0.7 x finfo(float32).max, and the softmax of equal scores is uniform. Its backward
(jax.vjp) then gives the row's dout to every key's dv (each 1/Tk of it), where the contract's
empty row gives nothing.

attncheck's findings under the strict contract: Property.BatchAndHeadIndependence, kind "wrong
value" (accepted under --empty-rows mean), and Property.BackwardScoreRowsSumToZero, kind "wrong
value" (dv nonzero where it is 0; the backward properties do not apply under --empty-rows mean).

A row emptied partly by the mask and partly by a bias of -inf is the mean over the keys the mask
forbids only (they hold the finite mask value; the -inf keys get weight 0), not over all keys:
attncheck's finding under --empty-rows mean --masked-inputs finite, Property.
BatchAndHeadIndependence, kind "wrong value", f16 with a bias (B 1, Tq 1, Tk 7, upper-left causal:
the query's one key has a bias of -inf; accepted under --empty-rows any).

Shown with jax 0.7.1, jaxlib 0.7.1, numpy 1.26.4 on the CPU.
Run: VENV_PYTHON examples/jax/repro_empty_row_is_the_mean.py
Exit 0 when it reproduces, 1 otherwise.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
f = jnp.float32
nothing = jnp.zeros((1, 1, 1, 3), bool)  # B 1, N 1, T 1, S 3: every key forbidden
attention = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=nothing)
q = jnp.ones((1, 1, 1, 1), f)
k = jnp.array([0.0, 5.0, -3.0], f).reshape(1, 3, 1, 1)
v = jnp.array([3.0, 6.0, 12.0], f).reshape(1, 3, 1, 1)
out = float(jax.jit(attention)(q, k, v).ravel()[0])
dv = np.asarray(jax.jit(lambda q, k, v: jax.vjp(attention, q, k, v)[1](jnp.ones((1, 1, 1, 1), f)))(q, k, v)[2]).ravel()
print(f"no key permitted: out {out} (0 by the contract; the mean of 3, 6, 12 is 7), dv {dv.tolist()} (0 by the contract)")
# The query may see key 0 alone (mask), and key 0's bias is -inf: no permitted key again.
key0_only = jnp.array([True, False, False]).reshape(1, 1, 1, 3)
bias = jnp.array([-jnp.inf, 0.0, 0.0], f).reshape(1, 1, 1, 3)
mixed = float(jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, bias=bias, mask=key0_only))(q, k, v).ravel()[0])
print(f"key 0 alone permitted by the mask, its bias -inf: out {mixed} (the mean of 6 and 12 is 9; of all three, 7)")
if out == 7.0 and np.allclose(dv, 1 / 3) and mixed == 9.0:
    print("reproduced: an empty row is the mean of V, and its dout reaches every key's dv; with a -inf bias, of the masked keys only")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
