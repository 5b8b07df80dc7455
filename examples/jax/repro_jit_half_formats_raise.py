"""Under jax.jit on the CPU, jax.nn.dot_product_attention raises for float16 inputs of every shape
and for bfloat16 inputs of some shapes (head dim 1, or a single query: "UNIMPLEMENTED: Dot with
multiple contracting dimensions is not implemented", "Algorithm not supported by the
ElementalIrEmitter: ALG_DOT_BF16_BF16_F32"; B 1, T 2, N 1, H 4 works), while the same calls op
by op (not jitted) work. Its score einsum asks for
precision=DotAlgorithmPreset.F16_F16_F32 (BF16_BF16_F32 for bfloat16) and falls back to the
default precision in a try/except; op by op the CPU's refusal is raised inside the try, but under
jit the einsum is only traced there and the refusal comes when the whole function is lowered or
compiled, outside it (jax/_src/nn/functions.py, _dot_product_attention_core; keras-hub PR 2354
met the float16 one: "JAX's nn.dot_product_attention does not support float16 on the CPU").

attncheck's adapter therefore runs f16 and bf16 op by op by default (--jit auto); with --jit
always, attncheck reports every f16 and bf16 problem as raised (Property.AgreesWithOracleInFloat,
"fails only with: f16" / "bf16").

Shown with jax 0.7.1, jaxlib 0.7.1, numpy 1.26.4, and jax 0.10.2, jaxlib 0.10.2, numpy 2.3.5, on the CPU.
Run: VENV_PYTHON examples/jax/repro_jit_half_formats_raise.py
Exit 0 when it reproduces (both jitted calls raise, both op-by-op ones work), 1 otherwise.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
raised = worked = 0
for dtype, shape in ((jnp.float16, (1, 2, 1, 4)), (jnp.bfloat16, (1, 1, 1, 1))):  # B, T, N, H
    x = jnp.ones(shape, dtype)
    eager = np.asarray(jax.nn.dot_product_attention(x, x, x)).astype(np.float32)
    worked += bool(np.all(eager == 1))
    print(f"{dtype.__name__} {shape}, op by op: out {eager.ravel().tolist()}")
    try:
        out = jax.jit(jax.nn.dot_product_attention)(x, x, x)
        print(f"{dtype.__name__} {shape}, jitted: out {np.asarray(out).astype(np.float32).ravel().tolist()}")
    except Exception as error:
        raised += 1
        print(f"{dtype.__name__} {shape}, jitted: raised {type(error).__name__}: {str(error).splitlines()[0]}")
if raised == 2 and worked == 2:
    print("reproduced: the jitted call raises for float16 and bfloat16 on the CPU, op by op it works")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
