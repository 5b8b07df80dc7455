"""With jax_enable_x64, jax.nn.dot_product_attention takes float64 inputs but computes their softmax
in float32 ("Softmax and it is always carried out in fp32", jax/_src/nn/functions.py: the scores
are cast with .astype(np.float32)). So a float64 output is only as good as float32. On jax 0.7.1
the mask value of a float64 problem, -0.7 x finfo(float64).max, also became -inf in that cast (a
row with no permitted key NaN, not the mean it is in float32); on jax 0.10.2 that row is the mean.

attncheck's findings with `--enable-x64 --dtype f64` (strict contract): Property.AgreesWithOracleInDouble,
kind "wrong value" (5.46e6 of the float64 bound: B 1, Tq 1, Tk 2, dk 8, scores 0 and -1), and on
jax 0.7.1 kind "wrong special value" (an empty row NaN, accepted under --empty-rows nan), and
Property.BackwardAgreesWithOracleInDouble, kind "wrong special value" (dv NaN). Why the adapter
claims f64 only with --enable-x64.

Shown with jax 0.7.1, jaxlib 0.7.1, numpy 1.26.4, and jax 0.10.2, jaxlib 0.10.2, numpy 2.3.5, on the CPU.
Run: VENV_PYTHON examples/jax/repro_float64_softmax_in_float32.py
Exit 0 when it reproduces, 1 otherwise.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
f = jnp.float64
q = jnp.ones((1, 1, 1, 1), f)  # B 1, T 1, N 1, H 1
k = jnp.array([0.0, -1.0], f).reshape(1, 2, 1, 1)
v = jnp.array([0.0, -1.0], f).reshape(1, 2, 1, 1)
out = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, scale=1.0))(q, k, v)
exact = -np.exp(-1.0) / (1 + np.exp(-1.0))  # weights 1 / (1 + e^-1), e^-1 / (1 + e^-1)
error = abs(float(out.ravel()[0]) - exact)
print(f"float64 out {float(out.ravel()[0])!r}, exact {exact!r}: {out.dtype}, error {error:.3g} "
      f"({error / abs(exact) / 2**-53:.3g} units of 2^-53, relative)")
nothing = jnp.zeros((1, 1, 1, 2), bool)
empty = float(jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, mask=nothing))(q, k, v).ravel()[0])
print(f"float64, no key permitted: out {empty} (float32 gives the mean, -0.5)")
print("the empty row:", "NaN (as on jax 0.7.1)" if np.isnan(empty) else "not NaN (as on jax 0.10.2)")
if out.dtype == np.float64 and error > 1e-10:
    print("reproduced: a float64 problem's softmax is float32")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
