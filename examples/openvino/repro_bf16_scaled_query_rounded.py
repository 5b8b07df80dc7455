"""In bf16, OpenVINO's CPU ScaledDotProductAttention applies the scale in nodes of its own (the
compiled model's runtime graph has two Multiply nodes, runtime precision bf16, ahead of the
attention node) and the scores come out as if the query times the scale had been rounded to bf16
before Q K^T: a relative error of 2^-8 in the scores, which a score gap of 5 turns into 1.7% of a
weight. (The default scale itself is computed in bf16, 0.70703125 for dk 2, as the spec's
pseudo-code says; that alone moves the output only to -0.0058720.) Here the effective query is not
even the nearest bf16 to the product: -1.6953125 * 0.70703125 = -1.19867, and the scale 1 with
the query -1.203125 gives the very same output, while the nearest, -1.1953125, gives another. With the query scaled beforehand (scale 1, no Multiply to
round) the operator's errors are those of rounding the output to bf16, and so they are when the
scale is a Parameter rather than a Constant: the plugin then decomposes the operator (MatMul, Add,
Softmax, MatMul, all bf16) and returns -0.005859375, the exact output rounded to bf16. A Constant
scale, or none (the default 1/sqrt(dk)), is what exporters give, and here it takes the fused
path, whose layerType in the runtime graph is "Subgraph" (a Snippets subgraph of the plugin's).

attncheck's finding (kind "wrong value", fails only with bf16, accepted under no policy):
Property.AllTrueMaskEqualsNoMask, shrunk to B 1, H 1, Tq 1, Tk 2, dk 2, dv 1, in bf16, default
scale 1/sqrt(2): q (0, -1.6953125), k (0, -3; 0, 1.28125), v (0, -1): out -0.00576782227, exact
-0.0058687879662781546, bound 7.01e-05 (error/bound 1.44). The same with or without an all-true
mask, and under INFERENCE_PRECISION_HINT f32 as well as the default (a bf16 model runs in bf16).

Shown with openvino 2026.4.1, numpy 1.26.4 and 2.3.5, CPU plugin (AMD EPYC with AVX512-BF16).
Run: VENV_PYTHON examples/openvino/repro_bf16_scaled_query_rounded.py. Exit 0 when it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def bf16_bits(x):
    """float32 values that are exactly bf16, as their bit patterns."""
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def attention(q, k, v, scale=None, scale_as_parameter=False):
    params = [ops.parameter(list(x.shape), ov.Type.bf16) for x in (q, k, v)]
    feeds = [ov.Tensor(bf16_bits(x), list(x.shape), ov.Type.bf16) for x in (q, k, v)]
    if scale_as_parameter:
        s = ops.parameter([], ov.Type.bf16)
        feeds.append(ov.Tensor(np.array(bf16_bits(np.array([scale], np.float32))[0]), [], ov.Type.bf16))
    else:
        s = None if scale is None else ops.constant(np.float32(scale), dtype=ov.Type.bf16)
    node = ops.scaled_dot_product_attention(*params, scale=s, causal=False)
    inputs = params + ([s] if scale_as_parameter else [])
    model = ov.Core().compile_model(ov.Model([node], inputs), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    out = model(feeds)[model.output(0)]
    value = (np.ascontiguousarray(out).view(np.uint16).astype(np.uint32) << 16).view(np.float32).item()
    multiplies = [op.get_rt_info()["runtimePrecision"].astype(str) for op in model.get_runtime_model().get_ordered_ops()
                  if op.get_friendly_name().startswith("Multiply")]
    return value, multiplies


print(f"openvino {ov.__version__}, numpy {np.__version__}")
k = np.array([0, -3, 0, 1.28125], np.float32).reshape(1, 1, 2, 2)
v = np.array([0, -1], np.float32).reshape(1, 1, 2, 1)
q = np.array([0, -1.6953125], np.float32).reshape(1, 1, 1, 2)
s = (k.astype(np.float64)[0, 0] @ q.astype(np.float64)[0, 0, 0]) / np.sqrt(2)
w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
exact = float(w @ v.astype(np.float64)[0, 0, :, 0])
got, multiplies = attention(q, k, v)
print(f"default scale 1/sqrt(2): out {got!r}, exact {exact!r} (relative error {abs(got - exact) / abs(exact):.3g}); "
      f"Multiply nodes in the runtime graph: {multiplies}")
same, _ = attention(np.array([0, -1.203125], np.float32).reshape(1, 1, 1, 2), k, v, scale=1.0)
nearest, _ = attention(np.array([0, -1.1953125], np.float32).reshape(1, 1, 1, 2), k, v, scale=1.0)
print(f"scale 1, q = (0, -1.203125):  out {same!r} (the same)")
print(f"scale 1, q = (0, -1.1953125): out {nearest!r} (the nearest bf16 to q * bf16(1/sqrt(2)) = -1.19867)")
decomposed, _ = attention(q, k, v, scale=0.70703125, scale_as_parameter=True)
print(f"the scale bf16(1/sqrt(2)) as a Parameter (decomposed): out {decomposed!r}")
ok = got == same and decomposed == -0.005859375 and abs(got - exact) > 1e-4 and "bf16" in multiplies
print("reproduced" if ok else "not reproduced")
sys.exit(0 if ok else 1)
