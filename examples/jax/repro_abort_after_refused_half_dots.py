"""After the CPU refuses a jitted float16 or bfloat16 dot_product_attention (the refusals of
repro_jit_half_formats_raise.py), the process often dies: SIGSEGV in a later call, or SIGABRT from
glibc's heap checks ("double free or corruption (out)", "malloc(): unaligned tcache chunk
detected", "malloc(): unsorted double linked list corrupted"), at a later allocation or at exit.
A refused compile seems to corrupt the heap in jaxlib 0.7.1.

attncheck's finding (--empty-rows mean --masked-inputs finite, seed 1, default --jit auto):
Property.KeyPaddingMaskConvertsByFlipping, kind "crashed" (SIGABRT, stderr "malloc(): unaligned
tcache chunk detected") on a float32 case, after a campaign in which every new f16 and bf16 shape
first has its F16_F16_F32 / BF16_BF16_F32 einsum refused (op by op: the function's own fallback
catches it); its replay alone passes.

This script runs CHILDREN children that each make one refused jitted float16 call and one refused
bfloat16 call (then the same op by op, which works: "refused"), CHILDREN that make the op-by-op
calls alone (the adapter's default for f16 and bf16, where the function's own try/except meets
the refusal: "op-by-op"), and CHILDREN control children that make the same calls in float32
(nothing refused), and counts the children that die of a signal. Shown with jax 0.7.1, jaxlib
0.7.1, numpy 1.26.4 on the CPU: 5 of 6 refused children died (SIGABRT 4, SIGSEGV 1), op by op 6 of
8 in a similar loop (SIGSEGV 3, SIGABRT 3), no control child; nor 8 of 8 children that ran the
function's own float16 and bfloat16 einsums and softmax with the default precision (jitted and op
by op), so the refused precision is what matters, not the formats.
Run: VENV_PYTHON examples/jax/repro_abort_after_refused_half_dots.py [CHILDREN]   (default 6)
Exit 0 when some refused child dies and no control child does, 1 otherwise.
"""
import os
import subprocess
import sys

CHILD = r"""
import os, sys
os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax, jax.numpy as jnp
attention = jax.jit(jax.nn.dot_product_attention)
formats = (jnp.float32,) if sys.argv[1] == "control" else (jnp.float16, jnp.bfloat16)
for dtype, shape in zip(formats * 2, ((1, 2, 1, 4), (1, 1, 1, 1))):
    x = jnp.ones(shape, dtype)
    if sys.argv[1] != "op-by-op":
        try:
            attention(x, x, x).block_until_ready()
        except Exception:
            pass
    jax.nn.dot_product_attention(x, x, x).block_until_ready()
print("done", flush=True)
"""

children = int(sys.argv[1]) if len(sys.argv) > 1 else 6
import jax  # noqa: E402  (versions only; the children do the work)
import numpy as np  # noqa: E402
print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
died = {"refused": [], "op-by-op": [], "control": []}
for kind in died:
    for _ in range(children):
        run = subprocess.run([sys.executable, "-c", CHILD, kind], capture_output=True, text=True)
        if run.returncode < 0:
            last = [line for line in run.stderr.splitlines() if line.strip() and not line.startswith(" ")][-1:]
            died[kind].append(f"signal {-run.returncode} {' '.join(last)[:100]}".strip())
    print(f"{kind}: {len(died[kind])} of {children} children died: {'; '.join(died[kind])}")
if (died["refused"] or died["op-by-op"]) and not died["control"]:
    print("reproduced: a process whose half-precision attention the CPU refused dies of a signal")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
