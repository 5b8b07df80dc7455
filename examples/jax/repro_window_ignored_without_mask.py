"""jax.nn.dot_product_attention ignores local_window_size when no mask, is_causal or sequence
lengths are given: its _apply_masks returns the scores untouched when `mask is None and not
is_causal and q_seqlen is None and kv_seqlen is None`, whatever the window (jax issue 32300, fixed
by PR 32357, first released in jax 0.8.2: measured 2026-12-03 with numpy 2.3.5, this script
reproduces on jax 0.8.0 and 0.8.1 and not on 0.8.2 or 0.10.2; 0.7.1 is the newest jax that installs
with numpy 1.26.4).

attncheck's finding (strict contract and --empty-rows mean --masked-inputs finite alike): the
window's problems with no allow mask, key lengths or causal mask come back unwindowed, e.g.
Property.AgreesWithOracleInFloat, kind "wrong value": every key weighed, not only the window's.

Shown with jax 0.7.1, jaxlib 0.7.1, numpy 1.26.4 on the CPU (implementation="xla"). Fixed upstream:
not reproduced on jax 0.10.2 (numpy 2.3.5); ctest checks that it stays so.
Run: VENV_PYTHON examples/jax/repro_window_ignored_without_mask.py
Exit 0 when it reproduces, 1 when the window is applied.
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

print(f"jax {jax.__version__}, jaxlib {jax.lib.__version__}, numpy {np.__version__}")
# B 1, T 3, N 1, H 1 (JAX's layout): equal scores, values 1 2 4; window (0, 0): query i sees key i alone.
q = jnp.zeros((1, 3, 1, 1), jnp.float32)
v = jnp.array([1.0, 2.0, 4.0], jnp.float32).reshape(1, 3, 1, 1)
alone = np.asarray(jax.nn.dot_product_attention(q, q, v, local_window_size=(0, 0), implementation="xla")).ravel()
everywhere = jnp.ones((1, 1, 3, 3), bool)  # a mask that forbids nothing
masked = np.asarray(jax.nn.dot_product_attention(q, q, v, mask=everywhere, local_window_size=(0, 0),
                                                 implementation="xla")).ravel()
print(f"window (0, 0), no mask:              out {alone.tolist()} (expected [1.0, 2.0, 4.0])")
print(f"window (0, 0), an all-true bool mask: out {masked.tolist()}")
if np.allclose(alone, 7 / 3) and masked.tolist() == [1.0, 2.0, 4.0]:
    print("reproduced: without a mask the window is ignored (every query averages all three values)")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
