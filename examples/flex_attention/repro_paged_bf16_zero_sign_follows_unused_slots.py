"""torch 2.15's PagedAttention for FlexAttention, eager on the CPU in bfloat16: the sign of an output
that comes out zero follows the value of cache slots no sequence holds. The eager path
(torch._higher_order_ops.flex_attention.math_attention) multiplies the weights, 0 at every physical
key get_mask_mod and get_score_mod forbid, by all of the value cache; for these shapes the bfloat16
matmul flushes a subnormal result (here the exact answer, -1e-38) to zero, and the zero's sign is then
that of the products 0 x (an unused slot's value): -0 when those slots hold -1e30, +0 when they hold
+1e30, both finite, which --masked-inputs finite lets the checker put there. In float32 the same call
gives -1e-38 whatever the unused slots hold. A deviation from attncheck's contract (an output's bits
may not depend on a slot that holds no key), not shown to be a bug in torch's own terms: -0 and +0
are equal, and the answer is within the bfloat16 bound.

attncheck's finding (flex_attention, seed 1, 420 s, --masked-inputs finite, kind "broke a relation",
bfloat16): Property.PoisonedSlotsNeverReachAnOutput, shrunk to B 3, H 1, Tq 2, Tk 16, dk 9, dv 18,
pages of 7, 6 pages, an allow mask and key lengths 6 13 10: "out element 13 moved from -0 to 0 when
only the pool's slots that hold no key went from -1.69476569e+38 to 1.69476569e+38".

The case: B 3, H 1, Tq 2, dk 1, dv 18, page_size 7, n_pages 6; sequence b has 2 keys on page 5 - b
(reserve()), q = 0 and k = 0 (weights 1/2 each), values -4e-38 and 2e-38 (every column): the answer
is -1e-38; every other slot of the caches holds -1e30, then +1e30.

Shown with torch 2.15.0 (PyPI's wheel, run on the CPU), bfloat16 and float32.
Run: $ATTNCHECK_TORCH_PYTHON examples/flex_attention/repro_paged_bf16_zero_sign_follows_unused_slots.py
Exit 0 when it reproduces, 1 otherwise.
"""
import math
import sys
import warnings

import torch

print(f"torch {torch.__version__}")
try:
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention, noop_mask
except ImportError:
    print("no torch.nn.attention.experimental._paged_attention: not reproduced")
    sys.exit(1)
warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
torch.set_num_threads(1)
B, Tq, dv, page_size, n_pages = 3, 2, 18, 7, 6


def paged_call(dtype, other):
    """out[0, 0, 0, 0] of flex_attention through PagedAttention, the slots no key holds = `other`."""
    paged = PagedAttention(n_pages=n_pages, page_size=page_size, max_batch_size=B, device="cpu")
    k_cache = torch.full((1, 1, n_pages * page_size, 1), other, dtype=dtype)
    v_cache = torch.full((1, 1, n_pages * page_size, dv), other, dtype=dtype)
    values = torch.tensor([-4e-38, 2e-38], dtype=dtype).reshape(1, 1, 2, 1).expand(1, 1, 2, dv).contiguous()
    for b in range(B):
        paged.empty_pages = [n_pages - 1 - b]  # sequence b on page 5 - b
        paged.reserve(torch.tensor(b), torch.tensor(2))
        paged.assign(torch.tensor([b]), torch.arange(2).reshape(1, 2), torch.zeros(1, 1, 2, 1, dtype=dtype), values,
                     k_cache, v_cache)
    kv_len = torch.full((B,), 2)
    logical = create_block_mask(noop_mask, B, None, Tq, 2, device="cpu", BLOCK_SIZE=(128, page_size))
    block_mask = paged.convert_logical_block_mask(logical, kv_len=kv_len)
    out = flex_attention(torch.zeros(B, 1, Tq, 1, dtype=dtype), k_cache, v_cache,
                         score_mod=paged.get_score_mod(None, kv_len=kv_len), block_mask=block_mask)
    return out[0, 0, 0, 0].item()


minus, plus = paged_call(torch.bfloat16, -1e30), paged_call(torch.bfloat16, 1e30)
f32 = (paged_call(torch.float32, -1e30), paged_call(torch.float32, 1e30))
print(f"bfloat16: unused slots -1e30: {minus!r}, +1e30: {plus!r} (the contract: the same bits; exact -1e-38)")
print(f"float32:  unused slots -1e30: {f32[0]!r}, +1e30: {f32[1]!r}")
if minus == 0 and plus == 0 and math.copysign(1, minus) != math.copysign(1, plus) and f32[0] == f32[1] != 0:
    print("reproduced: in bfloat16 the sign of a zero output follows the cache slots no sequence holds")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
