"""llama.cpp's ggml_flash_attn_ext on the CPU accumulates sum_j exp(s_j - max) v_j in float16 when V
is float16 (the KV cache's default type), although llama.cpp asks for GGML_PREC_F32 on the node:
ggml_compute_forward_flash_attn_ext_f16_one_chunk (ggml-cpu/ops.cpp) keeps VKQ16 and adds each
value with ggml_vec_mad_f16, the sum divided by the float32 S only at the end. That path serves
every call with fewer than 64 query rows (decoding); from 64 rows on, the tiled path accumulates in
float32. So:

  overflow   two keys of equal score, each value 32768 (float16's): the unnormalised sum is 65536,
             past float16's 65504, and the output is inf where it is exactly 32768; with 64 query
             rows it is 32768.
  rounding   q -1, keys 0 and 1, values 0 and 1, scale 1: out = e^-1 / (1 + e^-1) = 0.2689414;
             e^-1 is rounded to float16 (0.36792) before the division, out 0.2689711 (1.1e-4
             relative, float16's rounding, where the float32 a llama.cpp user asked for gives about
             1e-7); with 64 query rows, 0.2689414.

attncheck's findings (attncheck.adapters.llama_cpp --path flash, seed 1, 60 s): in float16,
Property.ExplicitScaleIsHonoured shrunk to Tq 1, Tk 2, q 0, k 0 0, v 32768 32768: out inf; in
float16 and float32 wrong values up to 65.5 times the float32 bound (q -1, k 0 0 1, v 0 0 1).

Shown with llama-cpp-python 0.3.36 (llama.cpp 0c1e570, built from the sdist on the CPU),
numpy 2.3.5 (ci/requirements-llama.txt), through ggml alone (ggml_attention.py beside this file).
Run: $ATTNCHECK_LLAMA_PYTHON examples/llama_cpp/repro_flash_v_accumulated_in_f16.py
Exit 0 while both reproduce on the one-chunk path (and the tiled one is right), 1 otherwise.
"""
import math
import sys

import numpy as np

from ggml_attention import flash


def rows(q, k, v, Tq):
    """out[0, 0, :, 0] for Tq copies of the query row (mask 0: every key permitted)."""
    q = np.tile(np.asarray(q, np.float32).reshape(1, 1, 1, -1), (1, 1, Tq, 1))
    mask = np.zeros((1, 1, Tq, k.shape[2]), np.float16)
    return flash(q, k, v, mask, 1.0)[0, 0, :, 0]


f16 = lambda values: np.array(values, np.float16).reshape(1, 1, -1, 1)
overflow = [rows([0], f16([0, 0]), f16([32768, 32768]), Tq)[0] for Tq in (1, 64)]
print(f"v 32768, 32768 (exact 32768): one query row {overflow[0]}, 64 rows {overflow[1]}")
exact = math.exp(-1) / (1 + math.exp(-1))
rounded = [rows([-1], f16([0, 1]), f16([0, 1]), Tq)[0] for Tq in (1, 64)]
print(f"q -1, k 0 1, v 0 1 (exact {exact:.7f}): one query row {rounded[0]:.7f}, 64 rows {rounded[1]:.7f}")
if np.isinf(overflow[0]) and overflow[1] == 32768 and abs(rounded[0] / exact - 1) > 5e-5 > abs(rounded[1] / exact - 1):
    print("reproduced: with fewer than 64 query rows the weighted sum of V is accumulated in float16")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
