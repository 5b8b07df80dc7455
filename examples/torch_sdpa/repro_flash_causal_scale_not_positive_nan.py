"""torch 2.15's CPU flash attention gives NaN for every row of a causal call (is_causal=True) that has
a key to mask when the scale is 0 or negative, where the math backend gives the right value (a row
with nothing to mask is right). The causal mask's -inf looks multiplied by the scale after it is
applied (-inf x 0 = NaN, -inf x -0.5 = +inf, and +inf - +inf = NaN in the softmax); the same mask
given as a bool attn_mask is not affected, nor is a positive scale. With no backend asked for,
F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=-0.5) gives NaN too (torch's default
choice on the CPU is the flash kernel here), and so does the private operator
aten._scaled_dot_product_flash_attention_for_cpu (out and logsumexp). The inference is from the
outputs; the kernel's source (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp) was not read here.
torch documents no range for the scale (its docstring: "scale (optional float, keyword-only):
Scaling factor applied prior to softmax").

attncheck's finding (torch_sdpa --backend flash, --backend default and --lse, --dtype f32, 300
cases, seed 1, kind "wrong special value", fails only with causal, explicit scale):
Property.AgreesWithOracleInFloat, shrunk to B 1, H 1, Tq 1, Tk 2, dk 1, dv 1, scale -1.08172107,
causal upper-left, every input 0: out[0,0,0,0] NaN, exact 0.

The case: q = 0 [1,1,1,1], k = 0 [1,1,2,1], v = [1, 3] [1,1,2,1], is_causal=True: query 0 sees key
0 alone, so out = 1 at any scale.

Shown with torch 2.15.0 (PyPI's manylinux wheel, run on the CPU), numpy 2.3.5, in float32,
float64, bfloat16 and float16. torch 1.13 has no flash backend: the script exits 1 there.
Run: $ATTNCHECK_TORCH_PYTHON examples/torch_sdpa/repro_flash_causal_scale_not_positive_nan.py
Exit 0 when it reproduces, 1 otherwise.
"""
import math
import sys

import numpy as np
import torch

F = torch.nn.functional
print(f"torch {torch.__version__}, numpy {np.__version__}")
try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:
    print("no torch.nn.attention.sdpa_kernel: not reproduced")
    sys.exit(1)
torch.set_num_threads(1)


def out(backend, scale, dtype, **mask):
    q, k = torch.zeros(1, 1, 1, 1, dtype=dtype), torch.zeros(1, 1, 2, 1, dtype=dtype)
    v = torch.tensor([1.0, 3.0], dtype=dtype).reshape(1, 1, 2, 1)
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, scale=scale, **mask).item()


reproduced = True
for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
    for scale in (0.5, 0.0, -0.5):
        math_out, flash_out = out(SDPBackend.MATH, scale, dtype, is_causal=True), out(SDPBackend.FLASH_ATTENTION,
                                                                                     scale, dtype, is_causal=True)
        bool_mask = out(SDPBackend.FLASH_ATTENTION, scale, dtype, attn_mask=torch.tensor([[[[True, False]]]]))
        print(f"{str(dtype):14} scale {scale:4}: is_causal: math {math_out}, flash {flash_out}; "
              f"flash with the same mask as a bool attn_mask: {bool_mask} (the contract: 1)")
        want_nan = scale <= 0
        reproduced &= math_out == 1 and bool_mask == 1 and (math.isnan(flash_out) if want_nan else flash_out == 1)
q = torch.zeros(1, 1, 1, 1)
k, v = torch.zeros(1, 1, 2, 1), torch.tensor([1.0, 3.0]).reshape(1, 1, 2, 1)
default = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=-0.5).item()
print(f"no backend asked for, float32, scale -0.5: {default}")
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # Tq 2: row 1 sees both keys, nothing to mask
    square = F.scaled_dot_product_attention(torch.zeros(1, 1, 2, 1), k, v, is_causal=True, scale=-0.5).ravel().tolist()
print(f"flash, Tq 2, scale -0.5: out {square} (the contract: [1, 2])")
operator = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True, scale=-0.5)
print(f"aten._scaled_dot_product_flash_attention_for_cpu, is_causal, scale -0.5: out {operator[0].item()}, "
      f"logsumexp {operator[1].item()}")
if reproduced and math.isnan(default) and math.isnan(square[0]) and square[1] == 2 and math.isnan(operator[0].item()):
    print("reproduced: the CPU flash kernel's causal rows are NaN when the scale is 0 or negative")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
