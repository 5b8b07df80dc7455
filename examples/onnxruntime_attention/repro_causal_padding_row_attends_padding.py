"""onnxruntime issue 14363 ("Attention and QAttention don't work properly in some cases", open),
checked on ONNX Runtime 1.30's CPU com.microsoft.Attention with the issue's own case: num_heads 13,
head_size 37, sequence_length 7, input_hidden_size 147, unidirectional = 1, the raw mask
[0, 1, 1, 0, 0, 1, 0], inputs, weights and bias standard normal.

What the issue reported, 10-50% of the output off because masked tokens took weight, no longer
reproduces: the causal mask has been the lowest float since onnxruntime PR 16369 (which cites the
issue), not a second -10000, and every row with a permitted key agrees with a float64 NumPy
computation (to float32 rounding). What remains is the row with none: query 0 may see key 0
alone (causal), which is padding; ONNX Runtime puts its whole weight on that padded key (its
-10000 is finite, the future keys' lowest float is not), so row 0 is token 0's value, where
attncheck's contract gives head 0 (out b_o) and a fully masked row without causal would give the
unmasked row (repro_soft_mask_minus_10000.py): two conventions for an empty row in one operator.

attncheck's finding: python -m attncheck.adapters.onnxruntime_attention on a causal layer call
whose first key is forbidden (allow, or an allow row emptied by causal and the mask together).

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.26.4) and 1.32.0 (ci/requirements.txt), CPU execution provider.
Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime_attention/repro_causal_padding_row_attends_padding.py
Exit 0 while it reproduces (rows 1-6 agree, row 0 is token 0's padded value), 1 otherwise,
2 without onnxruntime.
"""
import sys

import numpy as np

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
except ImportError as error:
    print(f"needs onnx and onnxruntime: {error}")
    sys.exit(2)

H, head, S, D = 13, 37, 7, 147
mask = np.array([[0, 1, 1, 0, 0, 1, 0]], np.int32)
rng = np.random.default_rng(14363)
x = rng.standard_normal((1, S, D)).astype(np.float32)
w = rng.standard_normal((D, 3 * H * head)).astype(np.float32)
b = rng.standard_normal(3 * H * head).astype(np.float32)

feeds = {"input": x, "weights": w, "bias": b, "mask_index": mask}
inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if v.dtype == np.int32 else TensorProto.FLOAT,
                                        list(v.shape)) for n, v in feeds.items()]
node = helper.make_node("Attention", list(feeds), ["output"], domain="com.microsoft", num_heads=H, unidirectional=1)
model = helper.make_model(helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)]),
                          ir_version=8, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
out = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0][0]

# float64 NumPy, attncheck's contract: key j permitted when j <= i and mask[j] is 1; an empty row's head is 0
q, k, v = (a.reshape(S, H, head).transpose(1, 0, 2) for a in np.split(x[0].astype(np.float64) @ w + b, 3, -1))
allow = np.tril(np.ones((S, S), bool)) & mask[0].astype(bool)
s = np.where(allow, q @ k.transpose(0, 2, 1) / np.sqrt(head), -np.inf)
top = s.max(-1, keepdims=True)
e = np.where(allow, np.exp(s - np.where(np.isfinite(top), top, 0)), 0)
total = e.sum(-1, keepdims=True)
want = (np.where(total > 0, e / np.where(total > 0, total, 1), 0) @ v).transpose(1, 0, 2).reshape(S, H * head)

scale = np.abs(want).max()
errors = np.abs(out - want).max(axis=1) / scale
print(f"permitted keys per row: {allow.sum(axis=1).tolist()}")
for i in range(S):
    print(f"row {i}: max |error| / max |out| {errors[i]:.2g}")
value_0 = v[:, 0, :].reshape(H * head)  # token 0's value, every head
print(f"row 0 is token 0's value within {np.abs(out[0] - value_0).max() / scale:.2g} (expected 0: no permitted key)")
if errors[1:].max() < 1e-5 and np.abs(out[0] - value_0).max() / scale < 1e-5 and errors[0] > 0.1:
    print("reproduced: the issue's rows with a permitted key agree now; the row with none takes its padded key")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
