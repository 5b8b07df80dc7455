"""In float16, OpenVINO's ScaledDotProductAttention computes its default scale 1/sqrt(dk) in the
query's element type, as the spec's pseudo-code says (scale = 1 / Sqrt(ConvertLike(dk, query))):
for dk 12 that is f16(0.28867513) = 0.28857421875, a relative error of 3.5e-4 in every score. The
CPU plugin then computes in float32 (INFERENCE_PRECISION_HINT f32: the runtime graph converts to
f32 and runs MatMul, Softmax, MatMul in f32), so the rounded scale is the one error beyond the
output's rounding: out 612.5 where the exact output is 611.5234 (the nearest f16 is 611.5), 2 f16
ulps, past attncheck's bound for a float16 kernel computing in float32 (0.902, error/bound 1.08).
The exact attention with the scale 0.28857421875 is 612.355, which rounds to 612.5: the operator's
output. An explicit scale cannot avoid it: the scale input has the query's type too.

attncheck's finding (under --empty-rows nan --masked-inputs finite, kind "wrong value", fails only
with f16, accepted under no policy): Property.AgreesWithOracleInFloat, shrunk to B 1, H 1, Tq 1,
Tk 2, dk 12, dv 1, default scale, q (0 x8, 1, -1.15625, 1, 1), k (0 x8, -1, -1.62695312, 3,
2.86132812; 0 x8, -2, 1.88476562, -1.80273438, -1), v (0, 32752): out 612.5, exact 611.52341630909211.

Shown with openvino 2026.4.1, numpy 1.26.4 and 2.3.5, CPU plugin (AMD EPYC with AVX512-BF16).
Run: VENV_PYTHON examples/openvino/repro_f16_default_scale_rounded.py. Exit 0 when it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def attention(q, k, v, scale_parameter=None):
    params = [ops.parameter(list(x.shape), ov.Type.f16) for x in (q, k, v)]
    feeds = [q, k, v]
    s = None
    if scale_parameter is not None:
        s = ops.parameter([], ov.Type.f16)
        feeds.append(np.array(scale_parameter, np.float16))
    node = ops.scaled_dot_product_attention(*params, scale=s, causal=False)
    inputs = params + ([s] if s is not None else [])
    model = ov.Core().compile_model(ov.Model([node], inputs), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return float(model(feeds)[model.output(0)].item())


print(f"openvino {ov.__version__}, numpy {np.__version__}")
z = [0.0] * 8
q = np.array(z + [1, -1.15625, 1, 1], np.float16).reshape(1, 1, 1, 12)
k = np.array(z + [-1, -1.62695312, 3, 2.86132812] + z + [-2, 1.88476562, -1.80273438, -1], np.float16).reshape(1, 1, 2, 12)
v = np.array([0, 32752], np.float16).reshape(1, 1, 2, 1)


def exact_attention(scale):
    s = (k.astype(np.float64)[0, 0] @ q.astype(np.float64)[0, 0, 0]) * scale
    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    return float(w @ v.astype(np.float64)[0, 0, :, 0])


exact = exact_attention(1 / np.sqrt(12))
with_f16_scale = exact_attention(float(np.float16(1 / np.sqrt(12))))
fused = attention(q, k, v)
decomposed = attention(q, k, v, scale_parameter=1 / np.sqrt(12))
print(f"default scale: out {fused!r}; exact {exact!r}, nearest f16 {float(np.float16(exact))!r}")
print(f"the scale f16(1/sqrt(12)) given as an input: out {decomposed!r}")
print(f"exact attention with the scale f16(1/sqrt(12)) = {float(np.float16(1 / np.sqrt(12)))!r}: {with_f16_scale!r}, "
      f"in f16 {float(np.float16(with_f16_scale))!r}")
ok = fused == decomposed == float(np.float16(with_f16_scale)) == 612.5 and abs(fused - exact) > 0.902
print("reproduced" if ok else "not reproduced")
sys.exit(0 if ok else 1)
