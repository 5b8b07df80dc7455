"""llama.cpp's two attention paths put the soft-cap and kq_scale in different orders
(llm_graph_context::build_attn_mha, src/llama-graph.cpp): with flash attention,
ggml_flash_attn_ext(..., kq_scale, max_bias, logit_softcap) caps the scaled score,
softcap tanh(kq_scale q.k / softcap); without it, build_attn_mha writes the cap as ggml_scale(1/softcap),
ggml_tanh, ggml_scale(softcap) on the raw q.k and then ggml_soft_max_ext(kq, mask, kq_scale, ...)
multiplies the capped score by kq_scale: kq_scale softcap tanh(q.k / softcap). They agree only for
kq_scale 1, which is what the one soft-capped model, Gemma 2 (src/models/gemma2.cpp), passes after
scaling q itself; a model given another kq_scale would get a different attention with -fa off.

Here: one query 1, keys 0 and 1, values 0 and 1, kq_scale 2, soft-cap 1. Capping the scaled score
(attncheck's order, and flash attention's) weighs key 1 by sigmoid(tanh 2) = 0.7238; the path
without flash attention gives sigmoid(2 tanh 1) = 0.8210.

attncheck's finding (attncheck.adapters.llama_cpp --path softmax --dtype f16, seed 1, 60 s):
Property.AllTrueMaskEqualsNoMask, failing only with a soft-cap (30, default scale 1/sqrt 2), 2.17
times the bound.

Shown with llama-cpp-python 0.3.36 (llama.cpp 0c1e570, built from the sdist on the CPU),
numpy 2.3.5 (ci/requirements-llama.txt), through ggml alone (ggml_attention.py beside this file).
Run: $ATTNCHECK_LLAMA_PYTHON examples/llama_cpp/repro_softmax_path_scales_after_the_softcap.py
Exit 0 while the path without flash attention gives the scale-after-cap value, 1 otherwise.
"""
import math
import sys

import numpy as np

from ggml_attention import flash, softmax

q = np.ones((1, 1, 1, 1), np.float32)
k = v = np.array([0, 1], np.float16).reshape(1, 1, 2, 1)
sigmoid = lambda x: 1 / (1 + math.exp(-x))
with_fa = flash(q, k, v, np.zeros((1, 1, 1, 2), np.float16), 2.0, softcap=1.0).item()
without = softmax(q, k, v, np.zeros((1, 1, 1, 2), np.float32), 2.0, softcap=1.0).item()
print(f"kq_scale 2, soft-cap 1: -fa on {with_fa:.4f} (sigmoid(tanh 2) = {sigmoid(math.tanh(2)):.4f}), "
      f"-fa off {without:.4f} (sigmoid(2 tanh 1) = {sigmoid(2 * math.tanh(1)):.4f})")
if abs(with_fa - sigmoid(math.tanh(2))) < 1e-3 and abs(without - sigmoid(2 * math.tanh(1))) < 1e-3:
    print("reproduced: without flash attention kq_scale multiplies the soft-capped score")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
