"""ONNX Runtime's CPU Attention in float16 stores the scores q.k (times the scale, plus the mask,
soft-capped) in float16 before the softmax: on x86 the QK^T product runs in float (MLAS SGEMM) and
is rounded to float16, the mask is added and rounded again, and the softmax reads those float16
scores. A score's error is then 2^-11 of its size, not of the output's: far outside the error of a
kernel that keeps the scores in float, as attncheck's bound for float16 assumes (the weights may be
rounded to float16, the scores may not). A score past 65504 becomes inf, and its row NaN.

attncheck's findings in float16 (strict contract and under the policies alike; all 'fails only with:
f16'): Property.RowsSumToOne, kind "wrong special value" (q -8192, k -8: score 65536, out NaN where
the one key has weight 1), and "wrong value" in ShiftInvarianceOfAttention (7.6 times the bound),
CausalPrefixIgnoresTheFuture (2.6), EmptyRowsFollowThePolicy (1.5), KeyPaddingMaskConvertsByFlipping
(1.1, with a soft-cap); under the policies also BatchAndHeadIndependence (92.9: scores 0 and 1 plus a
bias of 10000 both round to 10000) and AgreesWithOracleInFloat (5.1, soft-cap and bias). The
float32 kernel on the same values is within 1 ulp.

The ONNX function body of Attention (MatMul in T1, then Add, Softmax) also holds float16 scores,
and softmax_precision only casts after the product, so this is the spec's own arithmetic; a
float16 model gets NaN from finite inputs whose scaled q.k passes 65504 all the same.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider on x86-64. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_fp16_scores_rounded.py
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
    inputs = [helper.make_tensor_value_info(n, element, list(x.shape)) for n, x in feeds.items()]
    node = helper.make_node("Attention", list(feeds), ["Y"], **attributes)
    y = [q.shape[0], q.shape[1], q.shape[2], v.shape[3]]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", element, y)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=11)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def exact(q, k, v, mask, scale):
    s = scale * (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2)) + mask.astype(np.float64)
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v.astype(np.float64)


def scores_in_float16(q, k, v, mask, scale):
    """ORT's float16 path, step by step: QK^T in float rounded to float16, + mask rounded to float16,
    softmax in float, weights rounded to float16, P V in float, rounded to float16."""
    f = np.float32
    s = (scale * (q.astype(f) @ np.swapaxes(k.astype(f), -1, -2))).astype(np.float16)
    s = (s.astype(f) + mask.astype(f)).astype(np.float16).astype(f)
    w = np.exp(s - s.max(-1, keepdims=True))
    w = (w / w.sum(-1, keepdims=True)).astype(np.float16).astype(f)
    return (w @ v.astype(f)).astype(np.float16)


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
h = np.float16
reproduced = 0

# 1. One key, score 65536 (exact in float): its weight is 1 and out is v = 1.
q, k, v = (np.array([x], h).reshape(1, 1, 1, 1) for x in (-8192, -8, 1))
out16, out32 = attention(q, k, v).item(), attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)).item()
print(f"1. q -8192, k -8, v 1 (one key, score 65536): float16 out {out16}, float32 out {out32}, exact 1")
reproduced += bool(np.isnan(out16) and out32 == 1)

# 2. attncheck's shrunk ShiftInvarianceOfAttention case: two keys, scores -88.8125 + bias (0, -0.2705).
q = np.array([0, -88.8125], h).reshape(1, 1, 1, 2)
k = np.array([0, 1, 0, 1], h).reshape(1, 1, 2, 2)
v = np.array([0, -1], h).reshape(1, 1, 2, 1)
bias = np.array([0, -0.2705078125], h).reshape(1, 1, 1, 2)
got = attention(q, k, v, bias, scale=1.0).item()
f32 = attention(*(x.astype(np.float32) for x in (q, k, v, bias)), scale=1.0).item()
want = exact(q, k, v, bias, 1.0).item()
emulated = scores_in_float16(q, k, v, bias, 1.0).item()
print(f"2. scores -88.8125 + (0, -0.2705078125): float16 out {got!r}, exact {want!r}: error {abs(got - want):.3g},"
      f" {abs(got - want) / (2 ** -11 * abs(want)):.0f} times float16's unit roundoff, relative")
print(f"   the scores rounded to float16 first (-89.083 becomes -89.0625) give {emulated!r}; float32 gives {f32!r}")
reproduced += bool(got == emulated and abs(got - want) > 8 * 2 ** -11 * abs(want) and abs(f32 - want) < 1e-6)

# 3. attncheck's shrunk BatchAndHeadIndependence case under the policies: scores (0, 1) + bias 10000;
# float16's spacing at 10000 is 8, so both scores become 10000 and the weights 1/2 each.
q = np.array([1], h).reshape(1, 1, 1, 1)
k = np.array([0, 1], h).reshape(1, 1, 2, 1)
v = np.array([0, 1], h).reshape(1, 1, 2, 1)
bias = np.array([10000, 10000], h).reshape(1, 1, 1, 2)
got, want = attention(q, k, v, bias).item(), exact(q, k, v, bias, 1.0).item()
print(f"3. scores (0, 1) + bias 10000: float16 out {got!r}, exact {want!r} (e / (1 + e))")
reproduced += bool(got == 0.5 and abs(want - 0.7311) < 1e-4)

print("reproduced" if reproduced == 3 else f"not reproduced ({reproduced} of 3)")
sys.exit(0 if reproduced == 3 else 1)
