"""ONNX Runtime's CPU Attention refuses a negative scale: the session cannot even be made.

attncheck's finding: Property.AgreesWithOracleInFloat (and others drawing an explicit scale),
kind "raised", shrunk to B 1, H 1, Tq 1, Tk 1, dk 1, dv 1 with scale -0.557:
  "scale_ > 0 || std::isnan(scale_) was false. scale must be greater than 0 if specified"
(an ORT_ENFORCE in the constructor of Attention<T>, onnxruntime/core/providers/cpu/llm/attention.cc).
The ONNX spec of Attention-23 gives `scale` no range ("Scaling factor applied to Q*K^T"), though its
advice to scale Q and K by sqrt(scale) before the product only works for a positive one. A model
with a negative (or zero) scale does not load; softmax(-0.25 q.k) is otherwise ordinary attention.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_negative_scale_refused.py
Exit 0 when the refusal reproduces, 1 when this ONNX Runtime takes the scale.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def attention_session(scale):
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, 2, 1]) for n in "QKV"]
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"], scale=scale)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1, 2, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=11)
    onnx.checker.check_model(model)  # the model is valid ONNX
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
q = np.array([1, 2], np.float32).reshape(1, 1, 2, 1)
k = np.array([1, -1], np.float32).reshape(1, 1, 2, 1)
v = np.array([10, 20], np.float32).reshape(1, 1, 2, 1)
for scale in (0.25, -0.25):
    s = scale * q[0, 0] @ k[0, 0].T
    expected = (np.exp(s - s.max(1, keepdims=True)) / np.exp(s - s.max(1, keepdims=True)).sum(1, keepdims=True)) @ v[0, 0]
    try:
        out = attention_session(scale).run(None, {"Q": q, "K": k, "V": v})[0]
        print(f"scale {scale}: out {out.ravel()} (softmax(scale q k^T) v: {expected.ravel()})")
    except Exception as e:
        print(f"scale {scale}: refused: {str(e).splitlines()[0][-160:]}")
        print("reproduced: a valid model with a negative scale does not load")
        sys.exit(0)
print("not reproduced: this ONNX Runtime takes a negative scale")
sys.exit(1)
