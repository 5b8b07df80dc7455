"""jax.vjp of jax.nn.dot_product_attention raises for bfloat16 inputs of some shapes on the CPU even
op by op (not jitted): the forward's score einsum runs with precision=BF16_BF16_F32 when the CPU
takes it for that shape, and the transposed dots of the backward keep that precision, which the
CPU then refuses ("UNIMPLEMENTED: Dot with multiple contracting dimensions is not implemented"),
outside the function's try/except fallback.

attncheck's finding (strict contract, adapter run with --pad-head-dims): Property.
BackwardScoreRowsSumToZero, kind "raised": B 1, H 2, Tq 17, Tk 1, dk 24, dv 8 (padded to 24),
bfloat16, "the implementation's backward raised XlaRuntimeError: UNIMPLEMENTED: Dot with multiple
contracting dimensions is not implemented".

Shown with jax 0.7.1, jaxlib 0.7.1, numpy 1.26.4 on the CPU. Fixed upstream: not reproduced on jax
0.10.2, jaxlib 0.10.2, numpy 2.3.5 (the backward runs); ctest checks that it stays so.
Run: VENV_PYTHON examples/jax/repro_bf16_backward_raises.py
Exit 0 when it reproduces (the forward works, its backward raises), 1 otherwise.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
q = jnp.ones((1, 17, 2, 24), jnp.bfloat16)  # B 1, T 17, N 2, H 24
k = v = jnp.ones((1, 1, 2, 24), jnp.bfloat16)  # S 1
out, pullback = jax.vjp(jax.nn.dot_product_attention, q, k, v)
print(f"forward, op by op: out {np.asarray(out).astype(np.float32).ravel()[:3].tolist()} ...")
try:
    dq, dk, dv = pullback(jnp.ones_like(out))
    print(f"backward: dv {np.asarray(dv).astype(np.float32).ravel()[:3].tolist()} ...")
except Exception as error:
    print(f"backward raised {type(error).__name__}: {str(error).splitlines()[0]}")
    print("reproduced: the bfloat16 backward is refused by the CPU, op by op")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
