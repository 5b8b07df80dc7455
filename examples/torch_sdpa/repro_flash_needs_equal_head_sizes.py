"""torch 2.15's CPU flash attention takes no problem whose value width differs from the query's
(dv != dk): the private operator aten._scaled_dot_product_flash_attention_for_cpu raises
"Q/K/V should have the same head size", and F.scaled_dot_product_attention under
sdpa_kernel(SDPBackend.FLASH_ATTENTION) raises "No available kernel" ("Flash attention requires
q,k,v to have the same last dimension"); the default backend falls back to math. attncheck's
contract allows dk != dv, and there is no capability to rule it out.

attncheck's finding (torch_sdpa --lse, 60 s, kind "raised"): Property.AgreesWithOracleInFloat,
shrunk to B 1, H 1, Tq 1, Tk 1, dk 1, dv 2. --backend flash gets the same.

Shown with torch 2.15.0 (PyPI's manylinux wheel, run on the CPU), numpy 1.24.2. torch 1.13 has no
CPU flash kernel: the script exits 1 there.
Run: /tmp/venv-torch/bin/python examples/torch_sdpa/repro_flash_needs_equal_head_sizes.py
Exit 0 when both refuse dk != dv, 1 otherwise.
"""
import sys
import warnings

import numpy as np
import torch

warnings.simplefilter("ignore")
print(f"torch {torch.__version__}, numpy {np.__version__}")
try:
    flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    from torch.nn.attention import SDPBackend, sdpa_kernel
except (AttributeError, ImportError, RuntimeError):
    print("no CPU flash kernel: not reproduced")
    sys.exit(1)
q, k, v = torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 1), torch.zeros(1, 1, 1, 2)


def under_flash():
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


refused = []
for name, call in (("the private operator", lambda: flash(q, k, v, 0.0, False)),
                   ("SDPA under the flash backend", under_flash)):
    try:
        call()
        print(f"{name}: took dk 1, dv 2")
    except RuntimeError as error:
        print(f"{name}: RuntimeError: {str(error).splitlines()[0]}")
        refused.append(name)
print(f"the default backend: out {torch.nn.functional.scaled_dot_product_attention(q, k, v).tolist()}")
if len(refused) == 2:
    print("reproduced: the CPU flash kernel refuses dv != dk")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
