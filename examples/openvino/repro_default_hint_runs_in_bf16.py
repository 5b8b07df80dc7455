"""A float32 model of ScaledDotProductAttention compiled for OpenVINO's CPU without a config runs
in bf16 on a processor with AVX512-BF16 or AMX: the compiled model's INFERENCE_PRECISION_HINT is
bf16 and its attention node's runtimePrecision is bf16, while the inputs and the output stay f32.
Its output then carries bf16's error (2^-8), where a float32 kernel's is 2^-24; with
{"INFERENCE_PRECISION_HINT": "f32"} the same model is float32 throughout. OpenVINO's CPU device
documentation describes this default (bf16 in place of f32 where the processor has AVX512_BF16 or
AMX), so it is the runtime's choice, not a bug; but a check that calls OpenVINO with f32 data and
no config checks a bf16 kernel.

A float16 model is the same: without a config its values are rounded to bf16 inside, so one key
of value -0.000554561615 (f16) comes back as -0.000553131104 (its bf16 rounding, in f16), where
attention over one key must return the value itself.

attncheck's findings under --precision default (the adapter passes no config), kind "wrong value",
accepted under no policy: Property.SelectionAndAveragePooling, shrunk to B 1, H 1, Tq 1, Tk 1,
dk 1, dv 1 in float16, v -0.000554561615, out -0.000553131104; Property.BatchAndHeadIndependence
(f16 with a bias, error/bound 2.24).

Shown with openvino 2026.4.1, numpy 1.26.4 and 2.3.5, CPU plugin on an AMD EPYC with AVX512-BF16 (FULL_DEVICE_NAME
"AMD EPYC"). Run: VENV_PYTHON examples/openvino/repro_default_hint_runs_in_bf16.py.
Exit 0 when it reproduces (the default ran bf16), 1 otherwise (as on a CPU without bf16).
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def compiled(config, element=ov.Type.f32, keys=2):
    params = [ops.parameter(s, element) for s in ([1, 1, 1, 1], [1, 1, keys, 1], [1, 1, keys, 1])]
    node = ops.scaled_dot_product_attention(*params, causal=False)
    model = ov.Core().compile_model(ov.Model([node], params), "CPU", config)
    node_precision = [op.get_rt_info()["runtimePrecision"].astype(str) for op in model.get_runtime_model().get_ordered_ops()
                      if op.get_friendly_name().startswith("ScaledDotProductAttention")
                      and op.get_rt_info()["layerType"].astype(str) not in ("Reorder", "Convert")]
    return model, model.get_property("INFERENCE_PRECISION_HINT"), node_precision


print(f"openvino {ov.__version__}, numpy {np.__version__}, CPU {ov.Core().get_property('CPU', 'FULL_DEVICE_NAME')}, "
      f"{ov.Core().get_property('CPU', 'OPTIMIZATION_CAPABILITIES')}")
q = np.array([1.0], np.float32).reshape(1, 1, 1, 1)
k = np.array([0.0, 3.0078125 + 2 ** -12], np.float32).reshape(1, 1, 2, 1)
v = np.array([0.0, 1.0], np.float32).reshape(1, 1, 2, 1)
s = k.astype(np.float64).ravel()  # scale 1/sqrt(1)
exact = float(np.exp(s[1]) / np.exp(s).sum())
results = {}
for name, config in (("no config", {}), ("INFERENCE_PRECISION_HINT f32", {"INFERENCE_PRECISION_HINT": "f32"})):
    model, hint, node = compiled(config)
    out = model([q, k, v])[model.output(0)].item()
    results[name] = (str(hint), node, out)
    print(f"{name}: hint {hint}, attention node {node}, out {out!r}, exact {exact!r}, relative error {abs(out - exact) / exact:.2g}")
one = np.array([-0.000554561615], np.float16).reshape(1, 1, 1, 1)
f16_outs = {}
for name, config in (("no config", {}), ("INFERENCE_PRECISION_HINT f32", {"INFERENCE_PRECISION_HINT": "f32"})):
    model, hint, node = compiled(config, ov.Type.f16, keys=1)
    f16_outs[name] = float(model([one * 0, one * 0, one])[model.output(0)].item())
    print(f"float16, one key of value {float(one.item())!r}, {name}: hint {hint}, attention node {node}, out {f16_outs[name]!r}")
default_hint, default_node, default_out = results["no config"]
f32_out = results["INFERENCE_PRECISION_HINT f32"][2]
ok = "bf16" in default_hint.lower() or "bfloat16" in default_hint.lower()
ok = ok and abs(default_out - exact) / exact > 2 ** -14 and abs(f32_out - exact) / exact < 2 ** -22
ok = ok and f16_outs["no config"] != float(one.item()) == f16_outs["INFERENCE_PRECISION_HINT f32"]
print("reproduced" if ok else "not reproduced")
sys.exit(0 if ok else 1)
