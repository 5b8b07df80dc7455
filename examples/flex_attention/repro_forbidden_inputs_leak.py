"""torch 2.15's flex_attention on the CPU lets a NaN in a forbidden value reach the output: the eager
path (torch._higher_order_ops.flex_attention.math_attention) puts -inf in place of each score its
mask_mod forbids (torch.where), so the forbidden key's weight is 0, but then multiplies the weights by
all of V, and 0 x NaN = NaN. A row with no permitted key (weights all 0) is NaN the same way when a
value of its is NaN. attncheck's contract: what no query may see changes nothing (its default
--masked-inputs any); under --masked-inputs finite this is accepted: a convention, as for SDPA.

attncheck's finding (flex_attention, --dtype f32, 200 cases, seed 1, kind "wrong special value",
accepted under --masked-inputs finite): Property.ShiftInvarianceOfAttention, shrunk to B 1, H 1,
Tq 1, Tk 1, dk 2, dv 1, key lengths 0, v NaN: out[0,0,0,0] NaN, exact 0.

The case: q = k = 0, v = [1, NaN] [1,1,2,1], key 1 forbidden by the mask_mod `kv_idx < 1`: out = 1;
and the row with no key permitted (`kv_idx < 0`): out = 0.

Shown with torch 2.15.0 (PyPI's wheel, run on the CPU), numpy 2.3.5, float32 and float64.
Run: $ATTNCHECK_TORCH_PYTHON examples/flex_attention/repro_forbidden_inputs_leak.py
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
reproduced = True
for dtype in (torch.float32, torch.float64):
    q, k = torch.zeros(1, 1, 1, 1, dtype=dtype), torch.zeros(1, 1, 2, 1, dtype=dtype)
    v = torch.tensor([1.0, math.nan], dtype=dtype).reshape(1, 1, 2, 1)
    first = create_block_mask(lambda b, h, i, j: j < 1, None, None, 1, 2, device="cpu")
    none = create_block_mask(lambda b, h, i, j: j < 0, None, None, 1, 2, device="cpu")
    one, empty = (flex_attention(q, k, v, block_mask=m).item() for m in (first, none))
    clean = flex_attention(q, k, torch.tensor([1.0, 5.0], dtype=dtype).reshape(1, 1, 2, 1), block_mask=none).item()
    print(f"{dtype}: key 1 (NaN value) forbidden: {one} (the contract: 1); no key permitted: {empty} "
          f"(the contract: 0; with finite values: {clean})")
    reproduced &= math.isnan(one) and math.isnan(empty) and clean == 0
if reproduced:
    print("reproduced: a NaN in a forbidden value reaches the output")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
