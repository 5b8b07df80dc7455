"""torch 1.13's F._scaled_dot_product_attention gives NaN for a row with no permitted key (a bool
attn_mask all False, or a float mask all -inf): the softmax of a row of -inf. attncheck's
contract gives such a row 0 (policy `--empty-rows nan` accepts NaN; PyTorch gives 0 since 2.5,
`_safe_softmax`, PR 133882).

attncheck's findings (strict contract, kind "wrong special value", accepted under --empty-rows
nan): Property.AgreesWithOracleInFloat and KeyPaddingMaskConvertsByFlipping (a bias of -inf on
the only key), shrunk to B 1, H 1, Tq 1, Tk 1, dk 1, dv 1, and EmptyRowsFollowThePolicy.

Shown with torch 1.13.0a0 (Debian 12's python3-torch 1.13.1), numpy 1.24.2, CPU;
torch 2.5 and later give 0: the script exits 1 there (2.15.0 checked).
Run: /usr/bin/python3 examples/torch_sdpa/repro_empty_row_nan.py
Exit 0 when it reproduces (NaN), 1 when the row gives 0.
"""
import sys

import numpy as np
import torch

F = torch.nn.functional
sdpa = getattr(F, "scaled_dot_product_attention", None)
print(f"torch {torch.__version__}, numpy {np.__version__}")
q = torch.zeros(1, 1, 1, 1)
k = torch.zeros(1, 1, 2, 1)
v = torch.tensor([1.0, 3.0]).reshape(1, 1, 2, 1)
results = {}
for name, mask in (("bool mask all False", torch.zeros(1, 1, 1, 2, dtype=torch.bool)),
                   ("float mask all -inf", torch.full((1, 1, 1, 2), -np.inf))):
    out = (sdpa(q, k, v, attn_mask=mask) if sdpa is not None
           else F._scaled_dot_product_attention(q, k, v, mask, 0.0, False, False)[0])
    results[name] = out.item()
    print(f"{name}: out {out.item()} (the contract: 0)")
if all(np.isnan(x) for x in results.values()):
    print("reproduced: a row with no permitted key gives NaN")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
