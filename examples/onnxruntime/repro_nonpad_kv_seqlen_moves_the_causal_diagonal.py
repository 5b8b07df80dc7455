"""ONNX Runtime's CPU Attention (opset 24) with both is_causal = 1 and the key lengths input
nonpad_kv_seqlen anchors the causal diagonal at each batch's key length (lower-right, even when the
length is Tk): query i sees keys
j <= i + nonpad_kv_seqlen[b] - Tq, not j <= i, the upper-left alignment the spec gives is_causal
("the upper left causal bias") and that the onnx reference implementation computes on the same
graph. With Tq == Tk and a length below Tk, the first queries see no key at all.

attncheck's finding (--op attention --opset 24, strict contract, and under the policies):
Property.OutputsLieBetweenPermittedValues, kind "wrong value" (B 2, H 2, Tq 2, Tk 128, causal
upper-left, key lengths: out[0,0,0,0] 0.478 where query 0 may see key 0 alone, whose value is
0.499), and others where causal and key lengths meet. Under --opset 23 the same problems pass
this point: there key lengths are a bool attn_mask and the diagonal stays upper-left.

Shown with onnxruntime 1.30.0, onnx 1.21.0, numpy 1.24.2, CPU execution provider. Resolved upstream
by the specification, not by ONNX Runtime: onnx 1.23's opset-24 text makes is_causal "bottom-right
(offset-aware)", query i attending key j <= i + nonpad_kv_seqlen[b] - q_sequence_length, and its
reference implementation now computes what ONNX Runtime does: not reproduced with onnxruntime 1.32.0,
onnx 1.23.2, numpy 2.3.5 (ci/requirements.txt), which ctest checks. The adapter now gives is_causal
only where that diagonal is the problem's. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_nonpad_kv_seqlen_moves_the_causal_diagonal.py
Exit 0 while it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator


def model(q, k, v):
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape)) for n, x in (("Q", q), ("K", k), ("V", v))]
    inputs.append(helper.make_tensor_value_info("L", TensorProto.INT64, [q.shape[0]]))
    node = helper.make_node("Attention", ["Q", "K", "V", "", "", "", "L"], ["Y"], is_causal=1)
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [q.shape[0], q.shape[1], q.shape[2], v.shape[3]])
    m = helper.make_model(helper.make_graph([node], "g", inputs, [y]), opset_imports=[helper.make_opsetid("", 24)],
                          ir_version=10)
    onnx.checker.check_model(m)
    return m


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
# Equal scores (q = k = 0) and one-hot values: each output row is the row's weights over the keys.
reproduced = 0
for Tq, Tk, length in ((2, 4, 4), (3, 3, 2)):
    q = np.zeros((1, 1, Tq, 1), np.float32)
    k = np.zeros((1, 1, Tk, 1), np.float32)
    v = np.eye(Tk, dtype=np.float32).reshape(1, 1, Tk, Tk)
    feeds = {"Q": q, "K": k, "V": v, "L": np.array([length], np.int64)}
    m = model(q, k, v)
    got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0][0, 0]
    ref = ReferenceEvaluator(m).run(None, feeds)[0][0, 0]
    i, j = np.arange(Tq)[:, None], np.arange(Tk)[None, :]
    allowed = (j <= i) & (j < length)  # upper-left causal and the key length
    want = np.where(allowed.any(1, keepdims=True), allowed / np.maximum(allowed.sum(1, keepdims=True), 1), 0)
    print(f"Tq {Tq}, Tk {Tk}, nonpad_kv_seqlen {length}, is_causal 1: weights (rows: queries)")
    print("  onnxruntime:", np.round(got, 3).tolist())
    print("  onnx reference:", np.round(ref, 3).tolist())
    print("  upper-left (the spec):", np.round(want, 3).tolist())
    shifted = (j <= i + length - Tq) & (j < length)
    as_shifted = np.where(shifted.any(1, keepdims=True), shifted / np.maximum(shifted.sum(1, keepdims=True), 1), 0)
    reproduced += bool(np.allclose(ref, want) and not np.allclose(got, want) and np.allclose(got, as_shifted, atol=1e-6))
print("reproduced" if reproduced == 2 else f"not reproduced ({reproduced} of 2)")
sys.exit(0 if reproduced == 2 else 1)
