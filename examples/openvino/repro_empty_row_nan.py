"""A row with no permitted key is NaN in OpenVINO's CPU ScaledDotProductAttention: an all-false
boolean attention_mask row (OpenVINO issue 35959, open; PR 36016 proposes 0), and equally a float
mask row of -inf. That is what the spec's own pseudo-code gives (Select(LogicalNot(mask), -inf, 0),
then Softmax over a row of -inf), so OpenVINO's documented convention is attncheck's
--empty-rows nan; the other rows of the same call are unaffected.

attncheck's findings (strict contract, kind "wrong special value", accepted under --empty-rows nan):
Property.AgreesWithOracleInFloat, shrunk to B 1, H 1, Tq 1, Tk 1, dk 1, dv 1, the one key forbidden
by the allow mask (in bf16), out NaN, expected 0; Property.RowsSumToOne, the same with a bias of
-inf (in f16).

Shown with openvino 2026.4.1, numpy 1.26.4 and 2.3.5, CPU plugin (AMD EPYC with AVX512-BF16), INFERENCE_PRECISION_HINT f32.
Run: VENV_PYTHON examples/openvino/repro_empty_row_nan.py. Exit 0 when it reproduces, 1 otherwise.
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
    return model([q, k, v, mask])[model.output(0)]


print(f"openvino {ov.__version__}, numpy {np.__version__}")
f = np.float32
q = np.zeros((1, 1, 2, 1), f)
k = np.zeros((1, 1, 2, 1), f)
v = np.array([1, 3], f).reshape(1, 1, 2, 1)
bool_mask = np.array([[False, False], [True, True]]).reshape(1, 1, 2, 2)  # query 0 may see nothing
float_mask = np.where(bool_mask, f(0), f(-np.inf))
by_bool = attention(q, k, v, bool_mask).ravel()
by_float = attention(q, k, v, float_mask).ravel()
print(f"bool mask, query 0 sees no key:  out {by_bool} (the contract: 0 2; --empty-rows nan: nan 2)")
print(f"float mask of -inf, the same:    out {by_float}")
ok = all(np.isnan(o[0]) and o[1] == 2 for o in (by_bool, by_float))
print("reproduced" if ok else "not reproduced")
sys.exit(0 if ok else 1)
