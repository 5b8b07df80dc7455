"""ONNX Runtime's CPU com.microsoft.Attention masks a key by adding mask_filter_value (default
-10000, the schema's documented attribute) to its score, not by giving it weight 0, for both kinds
of mask_index (key lengths [B] and the raw mask [B,S,S]):

1. A row whose every key is masked gets every score shifted by -10000 alike, and its softmax is the
   unmasked row's: out is the layer without the mask (up to float32's rounding of score - 10000),
   where attncheck's contract gives head 0, so out = b_o (and under --empty-rows nan, NaN). It is
   not the mean of V either (MultiHeadAttention's, examples/onnxruntime/repro_mha_soft_mask_minus_10000.py):
   the weights are the unmasked scores' softmax.
2. A masked key whose score passes the permitted one's by more than 10000 takes the weight: query
   and keys of one head, width 1, with q.k of 0 for the permitted key and 20000 for the masked one,
   give out = the masked key's value.

attncheck's finding: python -m attncheck.adapters.onnxruntime_attention on a layer call with a row
whose keys are all forbidden (kv_lens 0, or an allow row all 0), and on one whose forbidden key
scores high.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.26.4) and 1.32.0 (ci/requirements.txt), CPU execution provider.
Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime_attention/repro_soft_mask_minus_10000.py
Exit 0 while both reproduce, 1 otherwise, 2 without onnxruntime.
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


def attention(x, w, b, mask=None, **attributes):
    """com.microsoft.Attention's output for input x [B,S,D], weights w [D,3D], bias b [3D], mask_index int32."""
    feeds = {"input": x, "weights": w, "bias": b}
    if mask is not None:
        feeds["mask_index"] = mask
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if v.dtype == np.int32 else TensorProto.FLOAT,
                                            list(v.shape)) for n, v in feeds.items()]
    node = helper.make_node("Attention", list(feeds), ["output"], domain="com.microsoft", **attributes)
    out = helper.make_tensor_value_info("output", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([node], "g", inputs, [out]), ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def numpy_attention(x, w, b, H, allow):
    """The heads in float64 by attncheck's contract; allow [B,S,S]; a row with no permitted key is 0."""
    B, S, D = x.shape
    q, k, v = (a.reshape(B, S, H, -1).transpose(0, 2, 1, 3) for a in np.split(x.astype(np.float64) @ w + b, 3, -1))
    s = np.where(allow[:, None], q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1]), -np.inf)
    top = s.max(-1, keepdims=True)
    e = np.where(allow[:, None], np.exp(s - np.where(np.isfinite(top), top, 0)), 0)
    total = e.sum(-1, keepdims=True)
    p = np.where(total > 0, e / np.where(total > 0, total, 1), 0)
    return (p @ v).transpose(0, 2, 1, 3).reshape(B, S, -1)


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
rng = np.random.default_rng(0)
B, S, D, H = 2, 3, 4, 2
x = rng.standard_normal((B, S, D)).astype(np.float32)
w = rng.standard_normal((D, 3 * D)).astype(np.float32)
b = rng.standard_normal(3 * D).astype(np.float32)
everything = np.ones((B, S, S), bool)
unmasked = numpy_attention(x, w, b, H, everything)
reproduced = 0

allow = everything.copy()
allow[0] = False  # batch 0: no key at all
for name, mask in (("key lengths [0, 3]", np.array([0, S], np.int32)), ("raw mask, batch 0 all 0", allow.astype(np.int32))):
    out = attention(x, w, b, mask, num_heads=H)
    want = numpy_attention(x, w, b, H, allow)
    off_unmasked = np.abs(out[0] - unmasked[0]).max()
    print(f"1. {name}: batch 0 is the unmasked row within {off_unmasked:.2g} (expected 0, |unmasked| up to "
          f"{np.abs(unmasked[0]).max():.3g}); batch 1 agrees within {np.abs(out[1] - want[1]).max():.2g}")
    reproduced += off_unmasked < 1e-2 and np.abs(unmasked[0]).max() > 0.1

# one head of width 1 (scale 1): token 0 is the query, token 1 the masked key
x2 = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)              # [1,2,3]
w2 = np.zeros((3, 3), np.float32)
w2[0, 0] = 200.0                                                # q of query 0 = 200
w2[1, 1] = 100.0                                                # k of key 1 = 100, key 0 = 0: q.k = 20000 and 0
w2[0, 2], w2[1, 2] = 1.0, -1.0                                  # v: key 0 gives 1, key 1 gives -1
out = attention(x2, w2, np.zeros(3, np.float32), np.array([1], np.int32), num_heads=1)  # key 1 is padding
print(f"2. key 1 masked, scores (0, 20000): query 0's out {out[0, 0, 0]} (key 1's value), expected 1 (key 0's)")
reproduced += out[0, 0, 0] == -1

print("reproduced" if reproduced == 3 else f"not reproduced ({reproduced} of 3)")
sys.exit(0 if reproduced == 3 else 1)
