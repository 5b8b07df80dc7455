"""A NaN in the value of a key that the attn_mask forbids reaches the output of ONNX Runtime's CPU
Attention: weight 0 times NaN is NaN (the weights are multiplied with all of V). So does a NaN or
+inf in a forbidden key: its score is NaN or +inf, and adding the mask (lowest() for a bool mask,
-inf for a float one) leaves NaN.

attncheck's findings (strict contract, kind "changed by a poisoned forbidden input" and "wrong
special value"): Property.ForbiddenKeysAndValuesCannotChangeValidOutputs, shrunk to B 1, H 1,
Tq 1, Tk 2, dk 1, dv 1: the query may see key 1 only, key 0's value is NaN, and out is NaN, not 0;
and in rows with no permitted key (Property.CausalPrefixIgnoresTheFuture, BatchAndHeadIndependence):
ONNX Runtime 1.30 gives such a row 0, but NaN when a forbidden value is NaN. All are accepted under
attncheck's --masked-inputs finite (padding never holds NaN or inf).

Shown with onnxruntime 1.30.0 (onnx 1.21.0, numpy 1.24.2) and 1.32.0 (ci/requirements.txt), CPU execution
provider. Run: $ATTNCHECK_VENV_PYTHON examples/onnxruntime/repro_nan_in_forbidden_inputs.py
Exit 0 when it reproduces, 1 when the forbidden NaN stays out.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def attention(q, k, v, mask):
    element = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info(n, element, list(x.shape)) for n, x in zip("QKV", (q, k, v))]
    inputs.append(helper.make_tensor_value_info("M", TensorProto.BOOL if mask.dtype == bool else element, list(mask.shape)))
    node = helper.make_node("Attention", ["Q", "K", "V", "M"], ["Y"])
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", element, [1, 1, 1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=11)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"Q": q, "K": k, "V": v, "M": mask})[0].item()


print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}, numpy {np.__version__}")
f = np.float32
q = np.zeros((1, 1, 1, 1), f)
k = np.zeros((1, 1, 2, 1), f)
cases = []
for v0 in (0.0, np.nan):  # key 0's value: finite, then NaN
    v = np.array([v0, 0.0], f).reshape(1, 1, 2, 1)
    cases.append((f"key 0 forbidden by a bool mask, its value {v0}", attention(q, k, v, np.array([False, True]).reshape(1, 1, 1, 2))))
    cases.append((f"key 0 forbidden by a float mask (-inf), its value {v0}", attention(q, k, v, np.array([-np.inf, 0], f).reshape(1, 1, 1, 2))))
    cases.append((f"no key permitted (bool mask all false), key 0's value {v0}", attention(q, k, v, np.zeros((1, 1, 1, 2), bool))))
v = np.array([5.0, 7.0], f).reshape(1, 1, 2, 1)
for k0 in (np.nan, np.inf):  # key 0 itself poisoned, forbidden; the query sees key 1 alone, out must be 7
    k = np.array([k0, 0.0], f).reshape(1, 1, 2, 1)
    q = np.ones((1, 1, 1, 1), f)
    cases.append((f"key 0 = {k0} forbidden by a bool mask", attention(q, k, v, np.array([False, True]).reshape(1, 1, 1, 2))))
    cases.append((f"key 0 = {k0} forbidden by a float mask (-inf)", attention(q, k, v, np.array([-np.inf, 0], f).reshape(1, 1, 1, 2))))
for what, out in cases:
    print(f"{what}: out {out} (the contract: {7.0 if what.startswith('key 0 =') else 0.0})")
leaked = [what for what, out in cases if np.isnan(out)]
if len(leaked) == 7 and all("nan" in what or "inf" in what for what in leaked):
    print(f"reproduced: a NaN or inf in a forbidden value or key reached the output in {len(leaked)} of {len(cases)} cases")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
