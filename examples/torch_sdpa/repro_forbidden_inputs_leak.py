"""torch 1.13's F._scaled_dot_product_attention lets what a query may not see reach its output:
the bool attn_mask becomes an additive mask (0 where True, -inf where False) added to every score,
and the weights multiply all of V. So a NaN or inf in a forbidden value gives 0 * NaN = NaN; a NaN
in a forbidden key gives the score NaN + -inf = NaN, a NaN row; and a forbidden key whose score
overflows to +inf gives +inf + -inf = NaN, with finite inputs.

attncheck's findings (strict contract): Property.ForbiddenKeysAndValuesCannotChangeValidOutputs
and KeyPaddingMaskConvertsByFlipping (kind "changed by a poisoned forbidden input"), and
ANanOrInfPermittedScoreMakesItsRowNaN (its own fixed case: a row that may not see the NaN key got
NaN). The NaN/inf inputs are accepted under --masked-inputs finite; the overflowing score is not
(finite inputs): under --empty-rows nan --masked-inputs finite it remains, in bfloat16, as
Property.OutputsLieBetweenPermittedValues (q 1.09951163e+12, a forbidden key 6.1897002e+26) and
AllTrueMaskEqualsNoMask (q 2, a forbidden key 1.70141183e+38, causal). The README's
torch_sdpa_plugin.so lines say the same of 1.13.

The case: q = [1, 0], k = [[10, 0], [0, 0]], v = [[1], [2]], mask [False, True] (only key 1
permitted): the contract's output is 2 in every variant below.

Shown with torch 1.13.0a0 (Debian 12's python3-torch 1.13.1), numpy 1.24.2, CPU; torch 2.15.0
(PyPI) reproduces it too through F.scaled_dot_product_attention (attncheck's 60 s run of 2.15
under --masked-inputs finite: KeyPaddingMaskConvertsByFlipping, ExplicitScaleIsHonoured,
ForbiddenKeysAndValuesCannotChangeValidOutputs, all an overflowing forbidden score).
Run: /usr/bin/python3 examples/torch_sdpa/repro_forbidden_inputs_leak.py
Exit 0 when every variant gives NaN, 1 otherwise.
"""
import sys

import numpy as np
import torch

F = torch.nn.functional
print(f"torch {torch.__version__}, numpy {np.__version__}")


def sdpa(q, k, v, mask, dtype=torch.float32):
    q, k, v = (torch.tensor(x, dtype=torch.float32).reshape(1, 1, *np.shape(x)).to(dtype) for x in (q, k, v))
    mask = torch.tensor(mask).reshape(1, 1, 1, -1)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask).item()
    return F._scaled_dot_product_attention(q, k, v, mask, 0.0, False, False)[0].item()


mask = [False, True]
base = sdpa([[1.0, 0.0]], [[10.0, 0.0], [0.0, 0.0]], [[1.0], [2.0]], mask)
print(f"unpoisoned: out {base} (the contract: 2)")
variants = {
    "NaN in the forbidden value": sdpa([[1.0, 0.0]], [[10.0, 0.0], [0.0, 0.0]], [[np.nan], [2.0]], mask),
    "inf in the forbidden value": sdpa([[1.0, 0.0]], [[10.0, 0.0], [0.0, 0.0]], [[np.inf], [2.0]], mask),
    "NaN in the forbidden key": sdpa([[1.0, 0.0]], [[np.nan, 0.0], [0.0, 0.0]], [[1.0], [2.0]], mask),
    "forbidden score overflows (q 3e38, k 3e38), finite inputs": sdpa([[3e38, 0.0]], [[3e38, 0.0], [0.0, 0.0]],
                                                                       [[1.0], [2.0]], mask),
    # bf16, attncheck's OutputsLieBetweenPermittedValues under the policies: 1.1e12 * 6.2e26 overflows
    "bf16: forbidden score overflows (q 1.1e12, k 6.2e26), finite inputs": sdpa([[1.1e12]], [[6.2e26], [0.0]],
                                                                              [[1.0], [2.0]], mask, torch.bfloat16),
}
for what, out in variants.items():
    print(f"{what}: out {out} (the contract: 2)")
if base == 2.0 and all(np.isnan(out) for out in variants.values()):
    print("reproduced: a forbidden key or value changed the output (NaN) in all 5 variants")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
