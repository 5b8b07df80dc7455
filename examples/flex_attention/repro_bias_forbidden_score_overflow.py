"""torch 2.15's flex_attention on the CPU gives NaN, not 0, for a row whose one key is forbidden by a
-inf bias (written as a score_mod, `score + bias[b, h, q_idx, kv_idx]`, the way FlexAttention's
docs add a bias) when that key's score q.k overflows float32: the eager path
(torch._higher_order_ops.flex_attention.math_attention) computes the scores in float32 (float64 for
float64 alone), so q.k = 2.9e17 x 4.8e24 = 1.4e42 becomes +inf, score_mod adds -inf, +inf + -inf =
NaN, and the row is NaN. attncheck's contract: a -inf bias forbids its key, so the row has no
permitted key and its output is 0 (its default --empty-rows zero; FlexAttention's own empty row is
0 too: torch._safe_softmax). The same key forbidden through a mask_mod gives 0 (torch.where puts -inf
in place of the overflowed score); the same case in float64 gives 0 (no overflow). A deviation of
float32 arithmetic on scores, not shown to be a bug in torch's own terms (torch documents no range).

attncheck's finding (flex_attention, --dtype f32 --masked-inputs finite, 200 cases, seed 1, kind
"wrong special value", fails only with bias; accepted under --empty-rows nan):
Property.PermutingKeysOrQueries, shrunk to B 1, H 1, Tq 1, Tk 1, dk 1, dv 1, q 2.88230376e+17,
k 4.83570328e+24, v 0, bias -inf: out[0,0,0,0] NaN, exact 0.

Shown with torch 2.15.0 (PyPI's wheel, run on the CPU), numpy 2.3.5, float32 and float64.
Run: $ATTNCHECK_TORCH_PYTHON examples/flex_attention/repro_bias_forbidden_score_overflow.py
Exit 0 when it reproduces, 1 otherwise.
"""
import math
import sys
import warnings

import torch

print(f"torch {torch.__version__}")
try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:
    print("no torch.nn.attention.flex_attention: not reproduced")
    sys.exit(1)
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
torch.set_num_threads(1)


def case(dtype):
    q = torch.tensor(2.88230376e17, dtype=dtype).reshape(1, 1, 1, 1)
    k = torch.tensor(4.83570328e24, dtype=dtype).reshape(1, 1, 1, 1)
    v = torch.zeros(1, 1, 1, 1, dtype=dtype)
    return q, k, v


bias = torch.full((1, 1, 1, 1), -math.inf)
results = {}
for dtype in (torch.float32, torch.float64):
    q, k, v = case(dtype)
    by_bias = flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s + bias[b, h, i, j]).item()
    block_mask = create_block_mask(lambda b, h, i, j: j < 0, None, None, 1, 1, device="cpu")  # no key permitted
    by_mask = flex_attention(q, k, v, block_mask=block_mask).item()
    results[dtype] = by_bias, by_mask
    print(f"{dtype}: key forbidden by a -inf bias in score_mod: {by_bias}; by a mask_mod: {by_mask} (the contract: 0)")
f32, f64 = results[torch.float32], results[torch.float64]
if math.isnan(f32[0]) and f32[1] == 0 and f64 == (0, 0):
    print("reproduced: float32's overflowed score plus a -inf bias makes the row NaN")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
