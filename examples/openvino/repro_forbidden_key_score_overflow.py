"""A key that a mask forbids, whose score overflows float32 to +inf, makes its row NaN in OpenVINO's
CPU ScaledDotProductAttention: the masks are added to the scores (the spec's triu(-inf) for
causal=True, Select(!mask, -inf, 0) for a boolean mask, a float mask as given), and +inf + -inf is
NaN. The inputs are finite (q 2.7e11, the forbidden key 6.3e29): attncheck's --masked-inputs finite
does not accept it, since a correct kernel never computes a forbidden key's score into the result.

attncheck's findings (under --empty-rows nan --masked-inputs finite, accepted under no policy):
Property.AllTrueMaskEqualsNoMask, kind "wrong special value", shrunk to B 1, H 1, Tq 2, Tk 2,
dk 1, dv 1, causal (query 0 may not see key 1), q (2.74877907e+11, 0), k (0, 6.338253e+29), v 0:
out[0,0,0,0] NaN, expected 0; and, kind "changed by a poisoned forbidden input", in bf16 with key
lengths (Property.BatchAndHeadIndependence) and with a converted key_padding_mask and a negative
scale (Property.KeyPaddingMaskConvertsByFlipping): the same +inf + -inf.

Shown with openvino 2026.4.1, numpy 1.26.4 and 2.3.5, CPU plugin, INFERENCE_PRECISION_HINT f32.
Run: VENV_PYTHON examples/openvino/repro_forbidden_key_score_overflow.py. Exit 0 when it reproduces, 1 otherwise.
"""
import sys

import numpy as np
import openvino as ov
import openvino.opset13 as ops


def attention(q, k, v, mask=None, causal=False):
    params = [ops.parameter(list(x.shape), ov.Type.f32) for x in (q, k, v)]
    feeds = [q, k, v]
    m = None
    if mask is not None:
        m = ops.parameter(list(mask.shape), ov.Type.boolean if mask.dtype == bool else ov.Type.f32)
        feeds.append(mask)
    node = ops.scaled_dot_product_attention(*params, attention_mask=m, causal=causal)
    model = ov.Core().compile_model(ov.Model([node], params + ([m] if m is not None else [])), "CPU",
                                    {"INFERENCE_PRECISION_HINT": "f32"})
    return model(feeds)[model.output(0)].ravel()


print(f"openvino {ov.__version__}, numpy {np.__version__}")
f = np.float32
q = np.array([2.74877907e+11, 0], f).reshape(1, 1, 2, 1)
v = np.zeros((1, 1, 2, 1), f)
allowed = np.array([[True, False], [True, True]]).reshape(1, 1, 2, 2)  # the causal pattern: query 0 sees key 0
results = {}
for k1 in (6.338253e+29, 1e27):  # key 1's score for query 0: 1.7e41 (overflows float32), then 2.75e38 (finite)
    k = np.array([0, k1], f).reshape(1, 1, 2, 1)
    results[k1] = {"causal=True": attention(q, k, v, causal=True),
                   "bool mask": attention(q, k, v, mask=allowed),
                   "float mask (-inf)": attention(q, k, v, mask=np.where(allowed, f(0), f(-np.inf)))}
    for name, out in results[k1].items():
        print(f"forbidden key 1 = {k1:g} (score {float(q[0, 0, 0, 0]) * k1:.3g}), {name}: out {out} (the contract: 0 0)")
ok = all(np.isnan(out[0]) and out[1] == 0 for out in results[6.338253e+29].values())
ok = ok and all((out == 0).all() for out in results[1e27].values())
print("reproduced: an overflowing forbidden score makes the row NaN, a finite one does not" if ok else "not reproduced")
sys.exit(0 if ok else 1)
