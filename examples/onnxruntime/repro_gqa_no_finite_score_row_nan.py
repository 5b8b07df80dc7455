"""ONNX Runtime's CPU com.microsoft.GroupQueryAttention gives NaN for a row with no key to weigh,
and lets a NaN in a value the causal mask hides reach the rows that may not see it:

1. A row whose every score is -inf (an -inf in k, no mask) gives NaN, where attncheck's contract
   counts it as a row with no permitted key, 0 (Property.ANegativeInfiniteScoreWeighsNothing,
   "wrong special value", accepted under --empty-rows nan).
2. A row whose every key has an attention_bias of -inf gives NaN (Property.BatchAndHeadIndependence,
   "wrong special value", fails only with: bias, float16 and float32 alike, accepted under
   --empty-rows nan; shrunk to one key, bias -inf).
3. (Found by hand, not by the 120 s campaigns.) The causal mask is applied after the softmax: the
   probabilities of keys past the diagonal are set to 0 and then multiplied by V, so a NaN in the
   value of a key query 0 may not see makes query 0's row NaN (0 * NaN). attncheck's property for
   this, ForbiddenKeysAndValuesCannotChangeValidOutputs (75 cases), did not draw it.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_gqa_no_finite_score_row_nan.py
Exit 0 when all three reproduce, 1 otherwise.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

D = 8  # the CPU kernel's head_size must be a multiple of 8


def gqa(q, k, v, bias=None, **attributes):
    """q, k, v [1,T,D] (one head, no past: Tq = Tk = T); causal unless causal=0 is given."""
    T = q.shape[1]
    feeds = {"query": q, "key": k, "value": v, "seqlens_k": np.array([T - 1], np.int32),
             "total_sequence_length": np.array(T, np.int32)}
    names = ["query", "key", "value", "", "", "seqlens_k", "total_sequence_length"]
    if bias is not None:
        names += ["", "", "", "attention_bias"]
        feeds["attention_bias"] = bias
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if x.dtype == np.int32 else TensorProto.FLOAT,
                                            list(x.shape)) for n, x in feeds.items()]
    node = helper.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"],
                            domain="com.microsoft", num_heads=1, kv_num_heads=1, **attributes)
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("output", "present_key", "present_value")]
    m = helper.make_model(helper.make_graph([node], "g", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    s = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return s.run(["output"], feeds)[0]


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
reproduced = 0
zeros = lambda T: np.zeros((1, T, D), np.float32)

q, k, v = zeros(1), zeros(1), zeros(1)
q[0, 0, 0], k[0, 0, 0], v[0, 0, 0] = 1, -np.inf, 1
out = gqa(q, k, v, causal=0)[0, 0, 0]
print(f"1. one key scoring -inf (q 1, k -inf): out {out}, expected 0 (no key to weigh)")
reproduced += bool(np.isnan(out))

q, k, v = zeros(1), zeros(1), zeros(1)
v[0, 0, 0] = 1
out = gqa(q, k, v, bias=np.full((1, 1, 1, 1), -np.inf, np.float32), causal=0)[0, 0, 0]
print(f"2. one key with bias -inf: out {out}, expected 0")
reproduced += bool(np.isnan(out))

q, k, v = zeros(2), zeros(2), zeros(2)
v[0, 0, 0], v[0, 1, 0] = 1, np.nan
out = gqa(q, k, v)[0, :, 0]  # causal: query 0 sees key 0 alone
print(f"3. causal, Tq = Tk = 2, key 1's value NaN: out {out.tolist()}, expected [1, nan] (query 0 may not see key 1)")
reproduced += bool(np.isnan(out[0]) and np.isnan(out[1]))

print("reproduced" if reproduced == 3 else f"not reproduced ({reproduced} of 3)")
sys.exit(0 if reproduced == 3 else 1)
