"""jax.nn.dot_product_attention requires value to have key's shape, so a value head width dv
different from the query/key head width dk is refused ("value shape should be [B, S, K, H]"),
although attention itself (softmax(q k^T) v) and attncheck's contract allow any dv.

ABI v2 has no capability that says "dv = dk only", so attncheck sends such problems; the adapter
raises NotExpressible for them before calling the function (attncheck's finding in every run: kind
"raised", "NotExpressible: dv 2 != dk 1: the function takes a value of the key's shape ...";
ci/conformance counts it as a limit). This script shows the function's own refusal.

Shown with jax 0.7.1, jaxlib 0.7.1, numpy 1.26.4 on the CPU.
Run: VENV_PYTHON examples/jax/repro_dv_unlike_dk_refused.py
Exit 0 when it reproduces, 1 when dv != dk is computed.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
q = k = jnp.zeros((1, 1, 1, 1), jnp.float32)  # B 1, T 1, N 1, H (dk) 1
v = jnp.array([1.0, 2.0], jnp.float32).reshape(1, 1, 1, 2)  # dv 2: the output must be [1, 2]
try:
    out = jax.nn.dot_product_attention(q, k, v, implementation="xla")
    print(f"dk 1, dv 2: out {np.asarray(out).ravel().tolist()}")
except ValueError as error:
    print(f"dk 1, dv 2: raised ValueError: {error}")
    if "value shape" in str(error):
        print("reproduced: a value head width unlike the key's is refused")
        sys.exit(0)
print("not reproduced")
sys.exit(1)
