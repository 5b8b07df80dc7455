"""keras.ops.dot_product_attention with a bias and is_causal=True raises on the torch backend: its
docstring takes both (`bias`: "Optional bias array to be added to logits"; `is_causal`: "Whether to
apply causal mask"), the JAX backend computes them, but keras/src/backend/torch/nn.py passes the bias
to torch's scaled_dot_product_attention as attn_mask with is_causal still True, which torch refuses.
keras folds the causal mask into a bool `mask` (the lines above it in the same function: "a
caller-provided mask would otherwise silently drop the causal constraint"), not into a bias.
Upstream: keras PR 22097 ("Disable PyTorch dot_product_attention when either the mask or bias are
set") built the causal mask into the bias and was closed unmerged (2026-03-13).

attncheck's finding under the strict contract: any property with a bias and a causal mask, kind
"raised" (`attncheck check --impl-cmd "TORCH_PYTHON -m attncheck.adapters.keras --backend torch"`).

Shown with keras 3.15.1 on torch 2.15.0, numpy 2.3.5 on the CPU (ci/requirements-torch.txt).
Run: TORCH_PYTHON examples/keras/repro_torch_bias_with_causal_raises.py
Exit 0 when it reproduces, 1 otherwise.
"""
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"
import keras  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

print(f"keras {keras.__version__} ({keras.backend.backend()}), torch {torch.__version__}, numpy {np.__version__}")
q = np.ones((1, 2, 1, 1), np.float32)  # B 1, T 2, N 1, H 1
bias = np.zeros((1, 1, 2, 2), np.float32)  # a bias of zeros: the causal answer is the plain one
v = np.array([1.0, 3.0], np.float32).reshape(1, 2, 1, 1)
without_bias = np.asarray(keras.ops.dot_product_attention(q, q, v, is_causal=True)).ravel().tolist()
print(f"is_causal=True without a bias: {without_bias} (query 0 sees value 1; query 1 the mean of 1 and 3)")
try:
    out = keras.ops.dot_product_attention(q, q, v, bias=bias, is_causal=True)
    print(f"with a bias of zeros: {np.asarray(out).ravel().tolist()}")
except RuntimeError as error:
    if "attn_mask should not be set when is_causal=True" in str(error):
        print(f"with a bias of zeros: raised RuntimeError: {error}")
        print("reproduced: a bias with is_causal=True raises on keras' torch backend")
        sys.exit(0)
    raise
print("not reproduced")
sys.exit(1)
