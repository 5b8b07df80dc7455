"""ONNX Runtime's CPU com.microsoft.MultiHeadAttention masks a key by adding mask_filter_value
(default -10000, the operator's documented attribute) to its score, not by giving it weight 0:

1. A row whose every key is masked (key_padding_mask all 0) gives the mean of V, not 0
   (attncheck: Property.AgreesWithOracleInFloat, "wrong value", accepted under --empty-rows mean;
   shrunk to one masked key with v 1: out 1, expected 0).
2. A masked key whose score passes 10000 takes the weight from the permitted ones: scale -0.2259,
   q -3, k (0, 16384): key 1 scores 11101 - 10000 = 1101 and out is its value -1, expected 0
   (Property.KeyPaddingMaskConvertsByFlipping, "changed by a poisoned forbidden input", float16,
   accepted under no policy).
3. A masked key's value of inf or NaN still reaches the permitted row: 0 * inf (finite weights
   e^-10000 are 0 in float) gives NaN (Property.ForbiddenKeysAndValuesCannotChangeValidOutputs,
   accepted under --masked-inputs finite).
4. A row emptied by an attention_bias of -inf gives NaN, not the mean of case 1 (Property.RowsSumToOne,
   "wrong special value", accepted under --empty-rows nan): two conventions for an empty row in one
   operator, so no --empty-rows policy accepts both.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_mha_soft_mask_minus_10000.py
Exit 0 when all four reproduce, 1 otherwise.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def mha(q, k, v, mask=None, bias=None, **attributes):
    """q [1,Tq,1], k and v [1,Tk,1] (one head of width 1); mask int32 [1,Tq,Tk] (1 = attend)."""
    element = {np.float16: TensorProto.FLOAT16, np.float32: TensorProto.FLOAT}[q.dtype.type]
    feeds = {"query": q, "key": k, "value": v}
    names = ["query", "key", "value", "", "key_padding_mask" if mask is not None else ""]
    if mask is not None:
        feeds["key_padding_mask"] = mask
    if bias is not None:
        names.append("attention_bias")
        feeds["attention_bias"] = bias
    while not names[-1]:
        names.pop()
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if x.dtype == np.int32 else element, list(x.shape))
              for n, x in feeds.items()]
    node = helper.make_node("MultiHeadAttention", names, ["output"], domain="com.microsoft", num_heads=1, **attributes)
    out = helper.make_tensor_value_info("output", element, [1, q.shape[1], 1])
    m = helper.make_model(helper.make_graph([node], "g", inputs, [out]),
                          opset_imports=[helper.make_opsetid("", 23), helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0].item()


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
h, f = np.float16, np.float32
reproduced = 0

out = mha(*(np.array([x], h).reshape(1, 1, 1) for x in (0, 0, 1)), mask=np.zeros((1, 1, 1), np.int32))
print(f"1. the only key masked, v 1: out {out} (the mean of V), expected 0")
reproduced += out == 1

q, k, v = np.array([-3], h).reshape(1, 1, 1), np.array([0, 16384], h).reshape(1, 2, 1), np.array([0, -1], h).reshape(1, 2, 1)
out = mha(q, k, v, mask=np.array([1, 0], np.int32).reshape(1, 1, 2), scale=-0.225867227)
print(f"2. key 1 masked, scores (0, 11101): out {out} (key 1's value), expected 0")
reproduced += out == -1

q, k, v = np.zeros((1, 1, 1), f), np.zeros((1, 2, 1), f), np.array([0, np.inf], f).reshape(1, 2, 1)
out = mha(q, k, v, mask=np.array([1, 0], np.int32).reshape(1, 1, 2))
print(f"3. key 1 masked, its value inf: out {out}, expected 0 (key 0's value)")
reproduced += bool(np.isnan(out))

out = mha(*(np.array([x], h).reshape(1, 1, 1) for x in (0, 0, 1)), bias=np.array([-np.inf], h).reshape(1, 1, 1, 1))
print(f"4. the only key's bias -inf, v 1: out {out}, expected 0 (and 1, the mean, by case 1's convention)")
reproduced += bool(np.isnan(out))

print("reproduced" if reproduced == 4 else f"not reproduced ({reproduced} of 4)")
sys.exit(0 if reproduced == 4 else 1)
