"""Why the ONNX Runtime child claims f32 and f16 only: a double Attention graph does not run ONNX
Runtime's Attention kernel. The CPU kernel (onnxruntime/core/providers/cpu/llm/attention.cc) is
registered for float and MLFloat16; for tensor(double), which the Attention-23 schema allows, ONNX
Runtime inlines the operator's ONNX function body, some fifty primitive nodes (Shape, Concat,
MatMul, Softmax, ...), a different implementation. Not a deviation: what attncheck would check in
f64 is that function body, so the child does not claim it.

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_double_is_not_the_kernel.py
Exit 0 when float and float16 run one Attention node and double does not.
"""
import json
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def kernels(dtype, element):
    """The kernels ONNX Runtime runs for one Attention node, from its profile."""
    inputs = [helper.make_tensor_value_info(n, element, [1, 1, 2, 2]) for n in "QKV"]
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"])
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", element, [1, 1, 2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=11)
    with tempfile.TemporaryDirectory() as scratch:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(scratch, "profile")
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        x = np.ones((1, 1, 2, 2), dtype)
        session.run(None, {"Q": x, "K": x, "V": x})
        with open(session.end_profiling()) as f:
            events = json.load(f)
    return [e["args"]["op_name"] for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
ran = {}
for dtype, element in ((np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16), (np.float64, TensorProto.DOUBLE)):
    ran[dtype] = kernels(dtype, element)
    ops = sorted(set(ran[dtype]))
    print(f"{np.dtype(dtype).name}: {len(ran[dtype])} kernels ran: {', '.join(ops)}")
ok = ran[np.float32] == ["Attention"] and ran[np.float16] == ["Attention"] and "Attention" not in ran[np.float64]
print("reproduced: double runs the function body, not the Attention kernel" if ok else "not reproduced")
sys.exit(0 if ok else 1)
