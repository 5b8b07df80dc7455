"""torch 2.15's CPU flash operator, aten._scaled_dot_product_flash_attention_for_cpu, returns for a
bfloat16 or float16 problem a float32 logsumexp that is off by 5.3e-5 (224 float32 ulps) as soon
as a row has 16 keys or more: 16 equal scores of 0 give 2.7725353, not log(16) = 2.7725887. The
sum of exp(0) comes out 16 * (1 - 5.3e-5): its exp is accurate to the 2-byte format, not to the
float32 it returns (consistent with torch's vectorized fast exp for reduced-precision softmax,
`fexp_u20`, "intended for cases where outputs will be downcasted to FP16 / BF16"; not confirmed in
the kernel's source here). float32 and float64 problems, and rows of fewer than 16 keys, are
exact. The output is not affected (the same sum divides it).

attncheck's finding (torch_sdpa --lse, under --lse-empty zero --masked-inputs finite, 60 s,
kind "wrong value", fails only with bf16): Property.EmptyRowsFollowThePolicy, shrunk to B 1, H 1,
Tq 2, Tk 16, dk 3, dv 3, every input 0: lse[0,0,0] 2.77253532, exact 2.7725887222, bound
6.76e-06 (7.9 of it).

Shown with torch 2.15.0 (PyPI's manylinux wheel, run on the CPU), numpy 1.24.2. torch 1.13 has no
such operator: the script exits 1 there.
Run: /tmp/venv-torch/bin/python examples/torch_sdpa/repro_flash_lse_bf16_exp.py
Exit 0 when it reproduces, 1 otherwise.
"""
import math
import sys

import numpy as np
import torch

print(f"torch {torch.__version__}, numpy {np.__version__}")
try:
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
except (AttributeError, RuntimeError):
    print("no aten._scaled_dot_product_flash_attention_for_cpu: not reproduced")
    sys.exit(1)
torch.set_num_threads(1)
errors = {}
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    for Tk in (8, 16, 64):
        q, k, v = torch.zeros(1, 1, 1, 3, dtype=dtype), torch.zeros(1, 1, Tk, 3, dtype=dtype), torch.zeros(1, 1, Tk, 3, dtype=dtype)
        out, lse = flash(q, k, v, 0.0, False)
        errors[dtype, Tk] = lse.item() - math.log(Tk)
        print(f"{str(dtype):15} Tk {Tk:2}: lse {lse.item():.8f} ({lse.dtype}), log(Tk) {math.log(Tk):.8f}, "
              f"error {errors[dtype, Tk]:.3g}")
narrow = [errors[d, Tk] for d in (torch.bfloat16, torch.float16) for Tk in (16, 64)]
if all(abs(e) > 1e-5 for e in narrow) and all(abs(errors[torch.float32, Tk]) < 1e-6 for Tk in (8, 16, 64)):
    print("reproduced: the float32 logsumexp of a bf16/f16 problem is off by about 5e-5 from 16 keys on")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
