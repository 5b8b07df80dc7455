"""A NaN or inf in the key or value of a key that the attention_mask forbids reaches the output of
OpenVINO's CPU ScaledDotProductAttention: the mask is added to the scores (the spec's Select(!mask,
-inf, 0) for a boolean mask), so an inf or NaN key gives inf + -inf or NaN + -inf = NaN, and a NaN
value is multiplied by its weight 0 (0 * NaN = NaN).

attncheck's finding (strict contract, kind "changed by a poisoned forbidden input", accepted under
--masked-inputs finite): Property.ForbiddenKeysAndValuesCannotChangeValidOutputs, shrunk to B 1,
H 1, Tq 1, Tk 2, dk 1, dv 1: the query may see key 1 only, key 0 and its value are inf, and out
is NaN, not key 1's value.

Shown with openvino 2026.4.1, numpy 1.26.4 and 2.3.5, CPU plugin, INFERENCE_PRECISION_HINT f32.
Run: VENV_PYTHON examples/openvino/repro_nan_in_forbidden_inputs.py. Exit 0 when it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def attention(q, k, v, mask):
    params = [ops.parameter(list(x.shape), ov.Type.f32) for x in (q, k, v)]
    m = ops.parameter(list(mask.shape), ov.Type.boolean if mask.dtype == bool else ov.Type.f32)
    node = ops.scaled_dot_product_attention(*params, attention_mask=m, causal=False)
    model = ov.Core().compile_model(ov.Model([node], params + [m]), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return model([q, k, v, mask])[model.output(0)].item()


print(f"openvino {ov.__version__}, numpy {np.__version__}")
f = np.float32
q = np.ones((1, 1, 1, 1), f)
masks = {"bool mask": np.array([False, True]).reshape(1, 1, 1, 2),
         "float mask (-inf)": np.array([-np.inf, 0], f).reshape(1, 1, 1, 2)}
cases = []
for name, mask in masks.items():  # key 0 forbidden; the query sees key 1 alone: out must be 7
    for k0, v0 in ((0.0, 5.0), (0.0, np.nan), (0.0, np.inf), (np.nan, 5.0), (np.inf, 5.0)):
        k = np.array([k0, 0.0], f).reshape(1, 1, 2, 1)
        v = np.array([v0, 7.0], f).reshape(1, 1, 2, 1)
        cases.append((name, k0, v0, attention(q, k, v, mask)))
for name, k0, v0, out in cases:
    print(f"{name}, forbidden key 0 = {k0}, its value {v0}: out {out} (the contract: 7)")
clean = [out for _, k0, v0, out in cases if np.isfinite(k0) and np.isfinite(v0)]
poisoned = [out for _, k0, v0, out in cases if not (np.isfinite(k0) and np.isfinite(v0))]
ok = all(out == 7 for out in clean) and all(np.isnan(out) for out in poisoned)
print(f"reproduced: all {len(poisoned)} poisoned cases are NaN" if ok else "not reproduced")
sys.exit(0 if ok else 1)
