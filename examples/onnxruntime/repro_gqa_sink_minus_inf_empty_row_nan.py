"""ONNX Runtime's CPU com.microsoft.GroupQueryAttention gives NaN for a row with no finite score when
head_sink is -inf, where the same call without head_sink gives 0:

A row whose every key has an attention_bias of -inf, causal = 1 (the default), with a past (Tq 1,
Tk 2) or Tq = Tk = 2: without head_sink the output is 0; with head_sink = -inf it is NaN, although a
sink of -inf adds exp(-inf) = 0 to the denominator, which attncheck's contract reads as no sink
(docs/contract.md "Sinks"; Property.SinkOfMinusInfinityIsNoSink, whose catch is this bug:
exp(-inf - -inf) in a row with no key). With head_sink = 0 the same row gives 0, as it should (the
sink's weight is 1, the output 0). Without a past and Tq = Tk = 1, or with causal = 0, the row is
NaN without head_sink too (repro_gqa_no_finite_score_row_nan.py), so there the sink adds nothing.

attncheck's campaigns with --masked-inputs finite draw no -inf bias for a whole row, so this was
found by hand (the adapter's hand tests, while adding sinks to --op gqa).

Shown with onnxruntime 1.32.0 (onnx 1.23.2, numpy 2.3.5; ci/requirements.txt), CPU execution
provider. In 1.23.0, the first release with head_sink, both rows are NaN without head_sink as well
(so it does not reproduce there: the sink is not what differs).
Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_gqa_sink_minus_inf_empty_row_nan.py
Exit 0 when it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

D = 8  # the CPU kernel's head_size must be a multiple of 8


def gqa(Tq, Tk, head_sink=None):
    """One head, q = k = 0, values 3, 6, ..; the first Tk - Tq keys a past; attention_bias -inf everywhere."""
    v = np.zeros((1, 1, Tk, D), np.float32)
    v[0, 0, :, 0] = 3 * np.arange(1, Tk + 1)
    past = Tk - Tq
    feeds = {"query": np.zeros((1, Tq, D), np.float32), "key": np.zeros((1, Tq, D), np.float32),
             "value": np.ascontiguousarray(v[0, 0, past:][None])}
    names = ["query", "key", "value", "", ""]
    if past:
        feeds["past_key"] = np.zeros((1, 1, past, D), np.float32)
        feeds["past_value"] = np.ascontiguousarray(v[:, :, :past])
        names[3:5] = ["past_key", "past_value"]
    feeds["seqlens_k"] = np.array([Tk - 1], np.int32)
    feeds["total_sequence_length"] = np.array(Tk, np.int32)
    feeds["attention_bias"] = np.full((1, 1, Tq, Tk), -np.inf, np.float32)
    names += ["seqlens_k", "total_sequence_length", "", "", "", "attention_bias"]
    if head_sink is not None:
        feeds["head_sink"] = np.array([head_sink], np.float32)
        names.append("head_sink")
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if x.dtype == np.int32 else TensorProto.FLOAT,
                                            list(x.shape)) for n, x in feeds.items()]
    node = helper.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"],
                            domain="com.microsoft", num_heads=1, kv_num_heads=1)
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("output", "present_key", "present_value")]
    m = helper.make_model(helper.make_graph([node], "g", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    s = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return s.run(["output"], feeds)[0][0, :, 0]


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
reproduced = 0
for Tq, Tk in ((1, 2), (2, 2)):
    without, minus_inf, zero = gqa(Tq, Tk), gqa(Tq, Tk, -np.inf), gqa(Tq, Tk, 0.0)
    print(f"Tq {Tq}, Tk {Tk}, every key's bias -inf: without head_sink {without.tolist()}, head_sink -inf "
          f"{minus_inf.tolist()} (expected the same), head_sink 0 {zero.tolist()}")
    reproduced += bool(np.all(without == 0) and np.all(np.isnan(minus_inf)) and np.all(zero == 0))

print("reproduced" if reproduced == 2 else f"not reproduced ({reproduced} of 2)")
sys.exit(0 if reproduced == 2 else 1)
