"""A forbidden key still takes part in ONNX Runtime's CPU Attention arithmetic: the mask is *added*
to its score, so a large score defeats it, with finite inputs:

1. float32: a forbidden key whose score overflows to +inf (finite q and k, q.k = 1.7e41) makes its
   row NaN, whether the key is forbidden by is_causal, a bool attn_mask or a float -inf one:
   +inf + lowest() is +inf and +inf + -inf is NaN, and the softmax of a row holding +inf is NaN.
2. float16: a bool attn_mask (and is_causal) becomes the finite sentinel -65504 (MLFloat16's
   lowest), so a forbidden key scoring 65504 gets 65504 - 65504 = 0, the permitted key's score,
   and half the weight: out -16376 where it must be 0. A float -inf mask gets this case right.
3. float32, the same with float's lowest: a forbidden key scoring 3.4e38 (q -2, k -1.7e38) gets
   half the weight, out -8.5e37 where it must be 0.

attncheck's findings, under --masked-inputs finite too (it keeps finite extremes in forbidden
inputs): Property.KeyPaddingMaskConvertsByFlipping, kind "changed by a poisoned forbidden input",
shrunk to B 1, H 1, Tq 1, Tk 2, dk 1, dv 1 with causal upper-left, q -131072, k (0, -1.33e36):
out NaN, expected 0; and Property.ForbiddenKeysAndValuesCannotChangeValidOutputs in float16, key 1
forbidden by key lengths, q -2, k = v = (0, -32752): "out[0,0,0,0] 0 became -16376", and in a
float32 run with an allow mask, q -2, k = v = (0, -1.70141173e38): "0 became -8.50705867e+37". The
ONNX spec draws the mask as an Add too (and its reference implementation turns a bool mask into
-inf), so 1 is the spec's own arithmetic; 2 and 3 are ONNX Runtime's finite sentinel.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_forbidden_key_score_overflow.py
Exit 0 when all three reproduce, 1 otherwise.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def attention(q, k, v, mask=None, **attributes):
    element = {np.float16: TensorProto.FLOAT16, np.float32: TensorProto.FLOAT}[q.dtype.type]
    feeds = {"Q": q, "K": k, "V": v}
    if mask is not None:
        feeds["M"] = mask
    inputs = [helper.make_tensor_value_info(n, TensorProto.BOOL if x.dtype == bool else element, list(x.shape))
              for n, x in feeds.items()]
    node = helper.make_node("Attention", list(feeds), ["Y"], **attributes)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", element, [1, 1, 1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=11)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0].item()


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
keep_key_0 = np.array([True, False]).reshape(1, 1, 1, 2)  # the query may see key 0 alone

# 1. float32, key 1 forbidden, its score q k1 / sqrt(1) = 1.74e41 overflows (key 0's is 0).
f = np.float32
q = np.array([-131072], f).reshape(1, 1, 1, 1)
k = np.array([0, -1.329228e36], f).reshape(1, 1, 2, 1)
v = np.array([5, 7], f).reshape(1, 1, 2, 1)
first = {"is_causal=1": attention(q, k, v, is_causal=1), "bool mask": attention(q, k, v, keep_key_0),
         "float -inf mask": attention(q, k, v, np.where(keep_key_0, 0, -np.inf).astype(f))}
print(f"1. float32, forbidden key 1 scores 1.7e41: out {first} (the contract: 5, key 0's value)")

# 2. float16, key 1 forbidden, its score 65504 (key 0's is 0).
h = np.float16
q = np.array([-2], h).reshape(1, 1, 1, 1)
k = np.array([0, -32752], h).reshape(1, 1, 2, 1)
v = np.array([0, -32752], h).reshape(1, 1, 2, 1)
second = {"is_causal=1": attention(q, k, v, is_causal=1), "bool mask": attention(q, k, v, keep_key_0),
          "float -inf mask": attention(q, k, v, np.where(keep_key_0, 0, -np.inf).astype(h))}
print(f"2. float16, forbidden key 1 scores 65504: out {second} (the contract: 0, key 0's value)")

# 3. float32, key 1 forbidden, its score 3.4028235e38 = float's largest (key 0's is 0).
q = np.array([-2], f).reshape(1, 1, 1, 1)
k = np.array([0, -1.70141173e38], f).reshape(1, 1, 2, 1)
v = np.array([0, -1.70141173e38], f).reshape(1, 1, 2, 1)
third = {"bool mask": attention(q, k, v, keep_key_0), "float -inf mask": attention(q, k, v, np.where(keep_key_0, 0, -np.inf).astype(f))}
print(f"3. float32, forbidden key 1 scores 3.4e38: out {third} (the contract: 0, key 0's value)")

ok = all(np.isnan(x) for x in first.values()) and second["bool mask"] == second["is_causal=1"] == -16376 \
    and second["float -inf mask"] == 0 and third["bool mask"] == np.float32(-8.50705867e37) and third["float -inf mask"] == 0
print("reproduced" if ok else "not reproduced")
sys.exit(0 if ok else 1)
