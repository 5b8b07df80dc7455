"""A row whose every score is -inf (an -inf in the keys, no mask) is NaN in ONNX Runtime's CPU
Attention, while a row that its mask empties gives 0, ONNX Runtime 1.30's own convention for a row
with no key to attend to. A single -inf score among finite ones weighs 0, as it should.

attncheck's finding, under the policies that match ONNX Runtime 1.30 (--empty-rows zero,
--masked-inputs finite): Property.ANegativeInfiniteScoreWeighsNothing (its own fixed case), kind
"wrong special value": B 1, H 1, Tq 2, Tk 2, dk 2, dv 2, q (1 1; 1 2), k (-inf 1; -inf 1): both
keys score -inf, out NaN, expected 0 (accepted only under --empty-rows nan, which is not ONNX
Runtime's convention for empty rows). The softmax of a row of -inf is NaN in the onnx reference
implementation too (exp(-inf - -inf)); ONNX Runtime treats a mask-emptied row apart, not a
score-emptied one.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_negative_infinite_scores_row_nan.py
Exit 0 when it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def attention(q, k, v, mask=None):
    feeds = {"Q": q, "K": k, "V": v}
    if mask is not None:
        feeds["M"] = mask
    inputs = [helper.make_tensor_value_info(n, TensorProto.BOOL if x.dtype == bool else TensorProto.FLOAT, list(x.shape))
              for n, x in feeds.items()]
    node = helper.make_node("Attention", list(feeds), ["Y"])
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1, 2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=11)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
f = np.float32
q = np.array([1, 1, 1, 2], f).reshape(1, 1, 2, 2)
v = np.array([1, 0, 0, 1], f).reshape(1, 1, 2, 2)
both = attention(q, np.array([-np.inf, 1, -np.inf, 1], f).reshape(1, 1, 2, 2), v)
masked = attention(q, np.ones((1, 1, 2, 2), f), v, np.zeros((1, 1, 2, 2), bool))
one = attention(q, np.array([-np.inf, 1, 1, 1], f).reshape(1, 1, 2, 2), v)
print(f"every key scores -inf:        out {both.ravel()} (the contract: 0 0 0 0, a row with no key to weigh)")
print(f"every key masked (bool mask): out {masked.ravel()}")
print(f"key 0 alone scores -inf:      out {one.ravel()} (key 1 takes all the weight: 0 1 0 1)")
ok = np.isnan(both).all() and (masked == 0).all() and one.ravel().tolist() == [0, 1, 0, 1]
print("reproduced" if ok else "not reproduced")
sys.exit(0 if ok else 1)
