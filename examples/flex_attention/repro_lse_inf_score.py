"""torch 2.15's flex_attention on the CPU gives a log-sum-exp of +inf, not NaN, for a row whose
permitted scores include +inf, while its output row is NaN: the eager path
(torch._higher_order_ops.flex_attention.math_attention) takes torch.logsumexp of the scores, which
is +inf when one is +inf, and torch._safe_softmax of them, which is NaN (inf - inf). attncheck's
contract asks NaN for both (Property.ANanOrInfPermittedScoreMakesItsRowNaN: a row with a NaN or
infinite permitted score is NaN, out and lse). torch documents no value for this case; it is a
deviation from attncheck's contract, not shown to be a bug in torch's own terms: +inf is the limit
of log(sum(exp)).

attncheck's finding (flex_attention, --dtype f32, 200 cases, seed 1, kind "wrong special value"):
Property.ANanOrInfPermittedScoreMakesItsRowNaN (its own fixed case): "permitted key 2 of row [0,0,0]
has a +inf score; got inf at lse[0,0,0]".

The case: q = 1 [1,1,1,1], k = [0, +inf] [1,1,2,1], v = [1, 2]: both keys permitted, scores 0 and
+inf: out NaN, lse NaN in the contract.

Shown with torch 2.15.0 (PyPI's wheel, run on the CPU), numpy 2.3.5, in float32 and float64.
Run: $ATTNCHECK_TORCH_PYTHON examples/flex_attention/repro_lse_inf_score.py
Exit 0 when it reproduces, 1 otherwise.
"""
import math
import sys
import warnings

import torch

print(f"torch {torch.__version__}")
try:
    from torch.nn.attention.flex_attention import AuxRequest, flex_attention
except ImportError:
    print("no torch.nn.attention.flex_attention with AuxRequest: not reproduced")
    sys.exit(1)
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
torch.set_num_threads(1)
reproduced = True
for dtype in (torch.float32, torch.float64):
    q = torch.ones(1, 1, 1, 1, dtype=dtype)
    k = torch.tensor([0.0, math.inf], dtype=dtype).reshape(1, 1, 2, 1)
    v = torch.tensor([1.0, 2.0], dtype=dtype).reshape(1, 1, 2, 1)
    out, aux = flex_attention(q, k, v, return_aux=AuxRequest(lse=True))
    print(f"{dtype}: out {out.item()}, lse {aux.lse.item()} (the contract: NaN, NaN)")
    reproduced &= math.isnan(out.item()) and aux.lse.item() == math.inf
if reproduced:
    print("reproduced: out NaN but lse +inf for a row with a +inf permitted score")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
